"""``latticelab bench sweep-scaling``: the same study on a local Dask cluster of 1 worker and of N workers.

Issue 11 asks that a sweep on a machine with 2 GPUs runs at >= 1.8x the points per hour of 1 GPU. This runs the
study once per worker count into a fresh table in a scratch folder (nothing of the user's is touched) and
reports points per hour two ways: over the whole run (cluster start-up, kernel compilation and the tail where
fewer points than workers are left all included: what a user waits for) and in the steady part (between the
first and the last finished point). A warm-up run of one point per worker first fills the kernel caches, so
neither count pays for compiling. Each worker is pinned to its own GPU where there are GPUs (sweep.py), else it
is a single-threaded CPU process.
"""
from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from latticelab.bench.report import print_table, write_results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study", help="study file (TOML) to run, e.g. bench/studies/ising3d_p0.toml")
    parser.add_argument("--workers", default="1,2",
                        help="worker counts to compare, comma-separated; the first is the base (default 1,2)")
    parser.add_argument("--points", type=int, default=None,
                        help="run only the first N points of the study (default: all)")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parent / "results"),
                        help="where sweep-scaling-<device>.json goes")
    parser.add_argument("--no-write", action="store_true", help="print the table only")


def _counts(text: str) -> list[int]:
    try:
        counts = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        counts = []
    if len(counts) < 2 or min(counts) < 1:
        from latticelab.sim.params import ParameterError
        raise ParameterError("--workers", f"two or more positive worker counts, e.g. 1,2; got {text!r}")
    return counts


def _timed_sweep(study, workers: int, folder: Path) -> dict:
    """Run ``study`` on a fresh local cluster of ``workers`` workers; wall time and the finish times of rows."""
    from latticelab.sim.studies.sweep import run_sweep
    finish: list[float] = []
    start = time.perf_counter()
    result = run_sweep(study, folder / f"w{workers}.csv", workers=workers, progress=False,
                       on_row=lambda row: finish.append(time.perf_counter() - start))
    wall = time.perf_counter() - start
    if result.failed:
        raise RuntimeError(f"{len(result.failed)} points failed with {workers} workers: {result.failed[0][1]}")
    steady = None
    if len(finish) > workers + 1:
        # rows after the first `workers` ones, over the time they took: start-up and the first points excluded
        steady = 3600.0 * (len(finish) - workers) / (finish[-1] - finish[workers - 1])
    return {"workers": workers, "points": result.done, "wall_s": round(wall, 2),
            "points_per_hour": round(3600.0 * result.done / wall, 1),
            "steady_points_per_hour": None if steady is None else round(steady, 1)}


def main(args: argparse.Namespace) -> int:
    from latticelab.sim.studies.spec import load_study
    from latticelab.sim.studies.sweep import gpu_ids
    counts = _counts(args.workers)
    study = load_study(args.study)
    if args.points is not None:
        study = dataclasses.replace(study, points=study.points[:args.points])
    gpus = gpu_ids()
    if gpus and max(counts) > len(gpus):
        from latticelab.sim.params import ParameterError
        raise ParameterError("--workers",
                             f"at most {len(gpus)} (one worker per GPU on this machine); got {args.workers}")
    device = _device_name(gpus)
    runs = []
    with tempfile.TemporaryDirectory(prefix="latticelab-scaling-") as tmp:
        folder = Path(tmp)
        (folder / "warm-up").mkdir()
        _timed_sweep(dataclasses.replace(study, points=study.points[:max(counts)]), max(counts), folder / "warm-up")
        for n in counts:
            run = _timed_sweep(study, n, folder)
            runs.append(run)
            print(f"  {n} worker(s): {run['points']} points in {run['wall_s']} s, {run['points_per_hour']} "
                  f"points/h (steady {run['steady_points_per_hour']})", flush=True)
    base = runs[0]
    cases = []
    for run in runs[1:]:
        ratio = run["points_per_hour"] / base["points_per_hour"]
        cases.append({"case": f"sweep-{Path(args.study).stem}-{run['workers']}v{base['workers']}-workers",
                      "metric": "points_per_hour", "value": run["points_per_hour"],
                      "baseline_value": base["points_per_hour"], "ratio": round(ratio, 3),
                      "details": {"study": args.study, "points": len(study.points), "gpus": len(gpus),
                                  "runs": runs, "steady_ratio": _ratio(run, base, "steady_points_per_hour")}})
    print()
    print_table(cases)
    if not args.no_write:
        print("written to", write_results("sweep-scaling", device, cases, args.out_dir))
    return 0


def _ratio(run: dict, base: dict, key: str):
    if run.get(key) is None or not base.get(key):
        return None
    return round(run[key] / base[key], 3)


def _device_name(gpus: list[str]) -> str:
    if not gpus:
        import platform
        return f"CPU {platform.processor() or platform.machine()}"
    import subprocess
    names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=30).stdout.split("\n")
    return f"{len(gpus)}x {names[0].strip()}"
