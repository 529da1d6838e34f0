"""`latticelab bench sim`: the CUDA engine's Ising updates against the naive CuPy reference, in one run.

Cases (bench-format.md names) and their targets (Metropolis: issue 39's, on an H200):
  metropolis-2d-L4096-p1e-5  flips_per_ns   >= 950   (T = 2.269)
  metropolis-2d-L32768-p0    flips_per_ns   >= 1350  (T = 2.269; NVIDIA's cuIsing 879 on the same GPU)
  metropolis-3d-L256-p1e-5   flips_per_ns   >= 780   (T = 4.5115)
  metropolis-2d-L4096-p1e-2  flips_per_ns   >= 450   (T = 2.269)
  wolff-2d-L4096-p1e-4       clusters_per_s >= 350   (T = 2.269, equilibrated by Swendsen-Wang sweeps)
  wolff-3d-L256-p1e-4        clusters_per_s >= 570   (T = 4.5115, likewise)
  swendsen-wang-2d-L4096     ns_per_spin    <= 0.1   (T = 2.269, p = 0)
Each value is the median of timed repetitions after warm-up, through IsingModel.step (the API a user calls, Python
launch overhead included); ``details.kernel_only`` replays the same launches from a CUDA graph (no launch gaps);
for the packed Metropolis sweeps ``details.kernel_only_philox4x32_7`` times the same with 7-round Philox for the
bit planes (the published Crush-resistant minimum; the engine keeps 10). Baselines timed in the same run: a naive
CuPy checkerboard Metropolis with a cupy.random array per half-sweep (Metropolis cases), and the reference engine
of sim/ising.py on CuPy (breadth-first Wolff; details for Metropolis). Ratios against the thesis's GTX 580 figures
and Komura & Okabe's Swendsen-Wang (2012, a GTX 580) are in ``anchor`` / ``anchor_ratio``.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

from latticelab.sim.models.ising.gpu import KERNEL_DIR as ISING_KERNELS

import numpy as np

from latticelab.bench.common import EventClock, add_output_arguments, copy_bandwidth, open_backend, save
from latticelab.bench.report import device_slug, print_table

T_C_2D, T_C_3D = 2.269, 4.5115
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+[A-Z@]")

CASES = {
    "metropolis-2d-L4096-p1e-5": dict(algorithm="metropolis", dim=2, L=4096, p=1e-5, T=T_C_2D, target=950.0,
                                      anchor=4.4, anchor_name="thesis GTX 580 (p=1e-4)"),
    "metropolis-2d-L32768-p0": dict(algorithm="metropolis", dim=2, L=32768, p=0.0, T=T_C_2D, target=1350.0,
                                    anchor=879.0, anchor_name="NVIDIA cuIsing (ising-gpu optimized), H200"),
    "metropolis-3d-L256-p1e-5": dict(algorithm="metropolis", dim=3, L=256, p=1e-5, T=T_C_3D, target=780.0,
                                     anchor=1.8, anchor_name="thesis GTX 580 (p=1e-4)"),
    "metropolis-2d-L4096-p1e-2": dict(algorithm="metropolis", dim=2, L=4096, p=1e-2, T=T_C_2D, target=450.0,
                                      anchor=4.4, anchor_name="thesis GTX 580 (p=1e-4)"),
    "wolff-2d-L4096-p1e-4": dict(algorithm="wolff", dim=2, L=4096, p=1e-4, T=T_C_2D, target=350.0,
                                 anchor=3.5, anchor_name="thesis GTX 580"),
    "wolff-3d-L256-p1e-4": dict(algorithm="wolff", dim=3, L=256, p=1e-4, T=T_C_3D, target=570.0,
                                anchor=5.7, anchor_name="thesis GTX 580"),
    "swendsen-wang-2d-L4096": dict(algorithm="swendsen-wang", dim=2, L=4096, p=0.0, T=T_C_2D, target=0.1,
                                   anchor=2.51, anchor_name="Komura & Okabe 2012, GTX 580"),
}
METRICS = {"metropolis": "flips_per_ns", "wolff": "clusters_per_s", "swendsen-wang": "ns_per_spin"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cases", default="all",
                        help="comma-separated case names or prefixes (default: all): " + ", ".join(CASES))
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per case (median reported)")
    parser.add_argument("--steps", type=int, default=0,
                        help="steps per repetition (default: 200 sweeps, 50 cluster flips, 50 SW sweeps)")
    parser.add_argument("--equilibrate", type=int, default=300,
                        help="Swendsen-Wang sweeps before the cluster cases (default 300)")
    parser.add_argument("--baseline-seconds", type=float, default=3.0,
                        help="time budget of each slow baseline (breadth-first Wolff), default 3 s")
    parser.add_argument("--quick", action="store_true", help="a short smoke run: few steps, 2 repetitions")
    add_output_arguments(parser, "sim-<gpu>.json")
    parser.add_argument("--sass", action="store_true",
                        help="also count the SASS instructions of the hot kernels (needs nvcc and cuobjdump)")


def _select(spec: str) -> list[str]:
    if spec == "all":
        return list(CASES)
    chosen = []
    for part in (s.strip() for s in spec.split(",") if s.strip()):
        hits = [name for name in CASES if name.startswith(part)]
        if not hits:
            raise ValueError(f"--cases: no case starts with {part!r}; cases are {', '.join(CASES)}")
        chosen += [h for h in hits if h not in chosen]
    return chosen


class Timer:
    """Wall time of device work, synchronised at both ends."""

    def __init__(self, cp):
        self.cp = cp

    def __call__(self, work) -> float:
        self.cp.cuda.Device().synchronize()
        start = time.perf_counter()
        work()
        self.cp.cuda.Device().synchronize()
        return time.perf_counter() - start


def naive_metropolis(cp, dim: int, L: int, T: float, seed: int = 1):
    """The naive CuPy reference: one thread per site
    (bench/kernels/naive_metropolis.cu) and a cupy.random float32 array per half-sweep. Returns a function
    doing one sweep."""
    from latticelab.sim.gpu.kernels import get_kernel
    kernel = get_kernel(cp, Path(__file__).resolve().parent / "kernels" / "naive_metropolis.cu",
                        f"naive_metropolis<{dim}>")
    cp.random.seed(seed)
    spins = cp.asarray(np.where(np.random.default_rng(seed).random((L,) * dim) < 0.5, 1, -1).astype(np.int8))
    n = L ** dim
    grid, block = ((n + 255) // 256,), (256,)
    beta, side = np.float32(1.0 / T), np.int32(L)

    def sweep():
        for colour in (np.int32(0), np.int32(1)):
            r = cp.random.random(spins.shape, dtype=cp.float32)
            kernel(grid, block, (spins, r, beta, side, colour))

    sweep.spins = spins
    return sweep


class KernelClock(EventClock):
    """Wraps an engine's kernels so every launch is bracketed by CUDA events; totals per kernel name."""

    def __init__(self, cp, engine):
        super().__init__(cp)
        self.engine = engine
        targets = [(engine.__dict__, "_metropolis", "metropolis"),
                   (engine.__dict__, "_metropolis_modified", "metropolis_modified")]
        self.replays = []
        if getattr(engine, "_multispin", None) is not None:  # the packed sweeps behind metropolis_sweeps
            targets += [(engine._multispin, name, f"multispin_{name}")
                        for name in ("pack", "decide", "sweep", "unpack")]
            # sweeps replayed from captured graphs would escape the wrapper: launch them directly meanwhile
            for name in ("replay", "sweeps_replay"):
                replay = engine._multispin.get(name)
                if replay is not None:
                    self.replays.append((replay, replay.capture))
                    replay.capture = False
        if engine._labeller is not None:
            targets += [(engine._labeller.kernels, name, name) for name in engine._labeller.kernels]
        for holder, name, label in targets:
            if name in holder:
                self.saved.append((holder, name, holder[name]))
                holder[name] = self._timed(holder[name], label)

    def _put_back(self) -> None:
        for holder, name, kernel in self.saved:
            holder[name] = kernel
        for replay, capture in self.replays:
            replay.capture = capture


def sass_counts(kernels: dict[str, str]) -> dict[str, int]:
    """Static SASS instruction counts of kernel instances (name -> source file), via nvcc and cuobjdump."""
    import shutil
    import subprocess
    import tempfile
    from latticelab.sim.gpu.kernels import kernel_source
    if not (shutil.which("nvcc") and shutil.which("cuobjdump")):
        return {}
    counts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, filename) in enumerate(kernels.items()):
            src = Path(tmp) / f"k{i}.cu"
            src.write_text(kernel_source(filename) + f"\n__global__ void sass_probe() {{ (void)&{name}; }}\n")
            cubin = src.with_suffix(".cubin")
            made = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", str(src), "-o", str(cubin)],
                                  capture_output=True, text=True)
            if made.returncode:
                continue
            sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True).stdout
            current = None
            for line in sass.splitlines():
                if "Function :" in line:
                    current = line.split("Function :")[1].strip()
                elif current and "sass_probe" not in current and _SASS_LINE.match(line):
                    counts[name] = counts.get(name, 0) + 1
    return counts


def graph_time(cp, step, n: int, repeats: int) -> float | None:
    """Seconds per step when ``n`` steps are replayed from a captured CUDA graph, or None if capture fails."""
    try:
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            step()  # anything lazily allocated happens before capture
            stream.synchronize()
            stream.begin_capture()
            for _ in range(n):
                step()
            graph = stream.end_capture()
            graph.launch(stream)
            stream.synchronize()
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                graph.launch(stream)
                stream.synchronize()
                times.append(time.perf_counter() - start)
        return statistics.median(times) / n
    except Exception as exc:  # capture is an extra; the headline numbers do not depend on it
        print(f"  (graph capture unavailable: {type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def sweeps_with_philox_rounds(cp, engine, spins, T: float, rng, steps: int, repeats: int, rounds: int):
    """Seconds for ``steps`` packed sweeps replayed from a graph, with the bit-plane calls' Philox4x32 at ``rounds``
    rounds instead of the engine's 10 (7: the published Crush-resistant minimum, philox.cuh): the alternative
    measured against the generator kept. Changes the trajectory (different numbers); timing only. Modified sites
    decided apart (multispin_decide_modified) keep their 10-round calls."""
    from latticelab.sim.gpu.kernels import get_kernel
    ms = engine._multispin
    name = f"metropolis_multispin<{engine.dim}, {rounds}>"
    kept, kept_replay = ms["sweep"], ms.pop("sweeps_replay", None)
    ms["sweep"] = get_kernel(cp, ISING_KERNELS / "metropolis_multispin.cu", name)
    try:
        return graph_time(cp, lambda: engine.metropolis_sweeps(spins, T, rng, steps, want_mask=False), 1, repeats)
    finally:
        ms["sweep"] = kept
        ms.pop("sweeps_replay", None)
        if kept_replay is not None:
            ms["sweeps_replay"] = kept_replay


def rate(metric: str, seconds_per_step: float, n_sites: int) -> float:
    if metric == "flips_per_ns":
        return n_sites / seconds_per_step / 1e9
    if metric == "clusters_per_s":
        return 1.0 / seconds_per_step
    return seconds_per_step / n_sites * 1e9  # ns_per_spin


def run_case(cp, name: str, spec: dict, args) -> dict:
    from latticelab.sim.models.ising.engines import ReferenceEngine
    from latticelab.sim.models.ising.model import IsingModel
    algorithm, dim, L, p, T = spec["algorithm"], spec["dim"], spec["L"], spec["p"], spec["T"]
    metric = METRICS[algorithm]
    quick = args.quick
    steps = args.steps or {"metropolis": 200, "wolff": 50, "swendsen-wang": 50}[algorithm]
    if quick:
        steps = max(2, steps // 10)
    repeats = 2 if quick else args.repeats
    timer = Timer(cp)
    model = IsingModel(dim=dim, L=L, T=T, p=p, algorithm=algorithm, seed=1, backend="cuda")
    n = model.n_sites
    details = {"T": T, "p": p, "steps_per_repeat": steps, "repeats": repeats,
               "rewired_edges": int(model.graph.new_edges.shape[0]),
               "modified_sites": int(model.graph.modified_sites.size), "engine": type(model._engine).__name__}
    if algorithm != "metropolis":
        model.algorithm = "swendsen-wang"
        sweeps = max(10, args.equilibrate // (10 if quick else 1))
        details["equilibration"] = f"{sweeps} Swendsen-Wang sweeps from a hot start"
        timer(lambda: model.step(sweeps))
        model.algorithm = algorithm
    # warm-up: compilation, caches, and for Metropolis the CUDA graphs of the timed step count
    model.step(steps if algorithm == "metropolis" else max(2, steps // 4))
    count_before = model.step_count
    times = [timer(lambda: model.step(steps)) for _ in range(repeats)]
    per_step = statistics.median(times) / steps
    case = {"case": name, "metric": metric, "value": round(rate(metric, per_step, n), 4)}
    details["ms_per_step"] = round(per_step * 1e3, 4)
    details["spread"] = [round(rate(metric, t / steps, n), 4) for t in sorted(times)]
    if algorithm == "wolff":
        obs = model.observables()
        details["last_cluster_fraction"] = round(obs["flipped_fraction"], 5)
        details["energy_per_spin"] = round(obs["energy"], 5)
    details["steps_timed"] = model.step_count - count_before

    engine, rng = model._engine, model._rng
    spins = model.spins
    if algorithm == "metropolis" and hasattr(engine, "metropolis_sweeps"):  # what model.step(steps) runs
        whole = graph_time(cp, lambda: engine.metropolis_sweeps(spins, T, rng, steps, want_mask=False), 1, repeats)
        kernel = None if whole is None else whole / steps
    else:
        update = getattr(engine, algorithm.replace("-", "_"))
        kernel = graph_time(cp, lambda: update(spins, T, rng, want_mask=False), steps, repeats)
    if kernel is not None:
        details["kernel_only"] = round(rate(metric, kernel, n), 4)
        details["kernel_only_ms_per_step"] = round(kernel * 1e3, 4)
    if algorithm == "metropolis" and getattr(engine, "_multispin", None) is not None:
        seven = sweeps_with_philox_rounds(cp, engine, spins, T, rng, steps, repeats, rounds=7)
        if seven is not None:
            details["kernel_only_philox4x32_7"] = round(rate(metric, seven / steps, n), 4)
    clock = KernelClock(cp, engine)
    model.step(steps)
    per_kernel = clock.restore()
    details["kernel_ms_per_step"] = {k: round(v / steps, 4) for k, v in per_kernel.items()}
    # CPU time to enqueue one step (no sync): when it exceeds the GPU time, the API path is launch-bound.
    cp.cuda.Device().synchronize()
    start = time.perf_counter()
    model.step(steps)
    details["enqueue_ms_per_step"] = round((time.perf_counter() - start) / steps * 1e3, 4)
    cp.cuda.Device().synchronize()

    if algorithm == "metropolis":
        sweep = naive_metropolis(cp, dim, L, T)
        sweep()
        base_steps = max(2, steps // 4)
        base = statistics.median(timer(lambda: [sweep() for _ in range(base_steps)]) for _ in range(repeats))
        case.update(baseline="naive-cupy", baseline_value=round(rate(metric, base / base_steps, n), 4))
        case["ratio"] = round(case["value"] / case["baseline_value"], 2)
        reference = ReferenceEngine(cp, model.graph)
        ref_steps = max(2, steps // 20)
        ref = timer(lambda: [reference.metropolis(spins, T, rng) for _ in range(ref_steps)])
        details["reference_engine"] = round(rate(metric, ref / ref_steps, n), 4)
    elif algorithm == "wolff" and not quick:
        reference = ReferenceEngine(cp, model.graph)
        s = spins.copy()
        done, spent = 0, 0.0
        while spent < args.baseline_seconds and done < steps:
            spent += timer(lambda: reference.wolff(s, T, rng))
            done += 1
        case.update(baseline="reference-bfs-cupy", baseline_value=round(done / spent, 4))
        case["ratio"] = round(case["value"] / case["baseline_value"], 2)
        details["baseline_clusters_timed"] = done
    better = case["value"] <= spec["target"] if metric == "ns_per_spin" else case["value"] >= spec["target"]
    case.update(anchor=spec["anchor"], anchor_name=spec["anchor_name"],
                anchor_ratio=round((spec["anchor"] / case["value"]) if metric == "ns_per_spin"
                                   else case["value"] / spec["anchor"], 1),
                target=spec["target"], target_met=bool(better), details=details)
    return case


def main(args) -> int:
    from latticelab.sim.backend import BackendError
    try:
        names = _select(args.cases)
        if args.repeats < 1 or args.steps < 0:
            raise ValueError("--repeats must be >= 1 and --steps >= 0")
    except ValueError as exc:
        print(f"latticelab bench sim: {exc}")
        return 2
    try:
        backend, device = open_backend("cuda", "sim")
    except BackendError as exc:
        print(f"latticelab bench sim needs a CUDA GPU: {exc}")
        return 1
    cp = backend.xp
    bandwidth = copy_bandwidth(cp)
    print(f"device-to-device copy: {bandwidth / 1e12:.2f} TB/s (read + write)", flush=True)
    cases = []
    for name in names:
        case = run_case(cp, name, CASES[name], args)
        case["details"]["copy_bandwidth_TBps"] = round(bandwidth / 1e12, 3)
        cases.append(case)
        d = case["details"]
        print(f"  {name}: {case['value']} {case['metric']} (kernel only {d.get('kernel_only')}, "
              f"enqueue {d['enqueue_ms_per_step']} ms/step, {d['ms_per_step']} ms/step)", flush=True)
    print()
    print_table(cases)
    print()
    for c in cases:
        print(f"{c['case']:38} target {c['target']:>7g} {'met' if c['target_met'] else 'MISSED':6} "
              f"x{c['anchor_ratio']} vs {c['anchor_name']}")
    if args.sass:
        counts = sass_counts({"metropolis_multispin<2, 10>": ISING_KERNELS / "metropolis_multispin.cu",
                              "metropolis_multispin<3, 10>": ISING_KERNELS / "metropolis_multispin.cu",
                              "metropolis_chunks<2, 4, true>": ISING_KERNELS / "metropolis.cu",
                              "label_tiles<2, 8, 1>": ISING_KERNELS / "labelling.cu",
                              "label_tiles<3, 8, 4>": ISING_KERNELS / "labelling.cu",
                              "cluster_flip<0>": ISING_KERNELS / "labelling.cu"})
        print("SASS instructions (static):", counts)
        for c in cases:
            c["details"]["sass_instructions"] = counts
    save("sim", device, cases, args, device_slug(device))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="latticelab bench sim", description=__doc__.splitlines()[0])
    add_arguments(parser)
    raise SystemExit(main(parser.parse_args()))
