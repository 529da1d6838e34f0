"""Benchmark results in the project's JSON format (docs/benchmarks.md, "Results files")."""
from __future__ import annotations

import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time


def median_rate(work, amount: float, repeats: int = 5, warmup: int = 1, sync=lambda: None) -> float:
    """Median of ``amount / seconds`` over timed repetitions of ``work()`` after warm-up."""
    for _ in range(warmup):
        work()
    sync()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        sync()
        rates.append(amount / (time.perf_counter() - start))
    return statistics.median(rates)


def git_commit() -> str:
    """HEAD's short hash; LATTICELAB_COMMIT names it where the tree is a copy without .git (GPU machine)."""
    if os.environ.get("LATTICELAB_COMMIT"):
        return os.environ["LATTICELAB_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_slug(device: str) -> str:
    # longer names first where one contains another (L40S / L4, A100 / A10)
    for known in ("H200", "H100", "A100", "L40S", "L4", "A10", "V100", "T4", "RTX"):
        if known in device:
            return known
    return re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-")[:40] or "device"


def write_results(name: str, device: str, cases: list[dict], out_dir: str = "bench/results",
                  slug: str | None = None, commit: str | None = None) -> str:
    """Write bench/results/<name>-<slug or short device name>.json (``commit`` recorded, else git's); returns the
    path."""
    from latticelab.sim.io import OutputError, write_atomic
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise OutputError(out_dir, f"cannot make the folder ({exc.strerror or exc})", exc.errno) from None
    path = os.path.join(out_dir, f"{name}-{slug or device_slug(device)}.json")
    doc = {"command": " ".join(["latticelab", *portable_arguments(sys.argv[1:])]),
           "commit": commit or git_commit(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "device": device, "cases": cases}
    # atomically: an interrupted or failed write leaves the previous results file whole (OutputError names
    # the path, and the command line turns it into one line, exit 2)
    text = json.dumps(doc, indent=2) + "\n"
    write_atomic(path, lambda f: f.write(text), overwrite=True, binary=False)
    return path


def portable_path(path: str, cwd: str | None = None) -> str:
    """``path`` as a results file records it: relative to the working directory when inside it, else its last
    part, so that no file names a folder of the machine the benchmark ran on."""
    if not os.path.isabs(path):
        return path
    cwd = cwd or os.getcwd()
    relative = os.path.relpath(path, cwd)
    if relative != ".." and not relative.startswith(".." + os.sep):
        return relative
    return os.path.basename(os.path.normpath(path)) or "."


def portable_arguments(arguments: list[str], cwd: str | None = None) -> list[str]:
    """The command's arguments with every absolute path (alone or as ``--option=/path``) made portable."""
    out = []
    for argument in arguments:
        option, equals, value = argument.partition("=")
        if equals and option.startswith("--"):
            out.append(f"{option}={portable_path(value, cwd)}")
        else:
            out.append(portable_path(argument, cwd))
    return out


def print_table(cases: list[dict]) -> None:
    print(f"{'case':38} {'metric':16} {'value':>12} {'baseline':>12} {'ratio':>8}")
    for c in cases:
        base = c.get("baseline_value")
        ratio = c.get("ratio")
        print(f"{c['case']:38} {c['metric']:16} {c['value']:12.4g} "
              f"{'' if base is None else format(base, '12.4g'):>12} "
              f"{'' if ratio is None else format(ratio, '8.2f'):>8}")
