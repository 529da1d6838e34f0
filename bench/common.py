"""What the model benchmarks (bench/sim.py, cahn_hilliard.py, cortex.py; ch_accuracy.py takes some) share: their
common options, choosing cases, opening the backend, device timing, the device-to-device copy bandwidth their
bytes are weighed against, CUDA-event kernel clocks, and the end of a run (the table, the target lines, the
results file with ``--commit``)."""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from latticelab.bench.report import device_slug, print_table, write_results


# ---- options ---------------------------------------------------------------------------------------------------
def add_case_arguments(parser: argparse.ArgumentParser, cases: dict) -> None:
    """--cases (names, short names or prefixes of ``cases``; ``select_cases``), --repeats and --steps."""
    parser.add_argument("--cases", default="all", help="comma-separated case names, short names or prefixes "
                        "(default: all): " + ", ".join(f"{n} [{s['alias']}]" for n, s in cases.items()))
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per case (median reported)")
    parser.add_argument("--steps", type=int, default=0,
                        help="model steps per repetition (default 200; --small 4); the baseline runs a quarter")


def add_smoke_arguments(parser: argparse.ArgumentParser, small_help: str) -> None:
    """--backend (cuda, or numpy for CPU smoke runs) and --small (``small_help`` says what it shrinks)."""
    parser.add_argument("--backend", choices=("cuda", "numpy"), default="cuda",
                        help="cuda (default; the targets are for an H100) or numpy (CPU smoke runs)")
    parser.add_argument("--small", action="store_true", help=small_help)


def add_output_arguments(parser: argparse.ArgumentParser, results: str) -> None:
    """--out-dir (where ``results``, e.g. 'sim-<gpu>.json', goes), --no-write and --commit."""
    parser.add_argument("--out-dir", default="bench/results", help=f"where {results} goes")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--commit", default=None, help="commit to record (default: git rev-parse)")


def select_cases(spec: str, cases: dict, flag: str = "--cases") -> list[str]:
    """Case names from a comma-separated list of names, aliases or prefixes of either ('all': every case)."""
    if spec == "all":
        return list(cases)
    chosen = []
    for part in (s.strip() for s in spec.split(",") if s.strip()):
        hits = [n for n, c in cases.items() if n.startswith(part) or c.get("alias", "").startswith(part)]
        if not hits:
            raise ValueError(f"{flag}: no case starts with {part!r}; cases are "
                             + ", ".join(f"{n} [{c['alias']}]" if c.get("alias") else n for n, c in cases.items()))
        chosen += [h for h in hits if h not in chosen]
    return chosen


# ---- the device --------------------------------------------------------------------------------------------------
def open_backend(name: str, bench: str):
    """(backend, device description) or raises BackendError (the caller prints it)."""
    from latticelab.sim.backend import select_backend
    backend = select_backend(name)
    if backend.is_gpu:
        cp = backend.xp
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        print(f"latticelab bench {bench} on {backend.device_name} ({props['multiProcessorCount']} SMs, "
              f"L2 {props['l2CacheSize'] / 2 ** 20:.0f} MiB)", flush=True)
        return backend, backend.device_name
    device = f"CPU {platform.processor() or platform.machine()} ({os.cpu_count()} cores), NumPy {np.__version__}"
    print(f"latticelab bench {bench} on {device} (NumPy backend: a smoke run, not a GPU benchmark)", flush=True)
    return backend, device


def run_benchmark(bench: str, args, choose_cases, run_case, compare=None) -> int:
    """A model benchmark from start to end: ``choose_cases(args)`` (the case names; its ValueError is a usage
    error: said, exit 2), the backend of ``--backend`` (none: said, exit 1), the copy bandwidth (said), then
    ``run_case(backend, name, args, bandwidth)`` for each name (it says its result), ``compare(cases)`` (figures
    across cases, if any), and ``finish``. Returns the exit code."""
    from latticelab.sim.backend import BackendError
    try:
        names = choose_cases(args)
    except ValueError as exc:
        print(f"latticelab bench {bench}: {exc}")
        return 2
    try:
        backend, device = open_backend(args.backend, bench)
    except BackendError as exc:
        print(f"latticelab bench {bench} needs a CUDA GPU (or --backend numpy --small): {exc}")
        return 1
    bandwidth = copy_bandwidth(backend.xp, args.small)
    print(f"device-to-device copy: {bandwidth / 1e12:.3f} TB/s (read + write)", flush=True)
    cases = [run_case(backend, name, args, bandwidth) for name in names]
    if compare is not None:
        compare(cases)
    return finish(bench, device, cases, args, args.small)


def synchronizer(xp):
    """A function that waits for the device (nothing to wait for on NumPy)."""
    if xp is np:
        return lambda: None
    return lambda: xp.cuda.Device().synchronize()


def timed(xp, work, repeats: int) -> list[float]:
    """Wall seconds of ``work()`` per repetition, the device synchronised at both ends."""
    sync = synchronizer(xp)
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        work()
        sync()
        times.append(time.perf_counter() - start)
    return times


def enqueue_seconds(xp, work) -> float | None:
    """CPU seconds to enqueue ``work()`` without waiting for the device (CuPy only): when it exceeds the
    device time, the path is launch-bound."""
    if xp is np:
        return None
    sync = synchronizer(xp)
    sync()
    start = time.perf_counter()
    work()
    elapsed = time.perf_counter() - start
    sync()
    return elapsed


def copy_bandwidth(xp, small: bool = False) -> float:
    """Device-to-device copy rate in bytes/s (bytes read plus bytes written), median of 5 copies after one: of
    1 GiB on CuPy; on NumPy a host copy of 64 MiB (8 MiB with ``small``)."""
    nbytes = (8 if small else 64) * 2 ** 20 if xp is np else 2 ** 30
    src = xp.ones(nbytes // 4, dtype=xp.float32)
    dst = xp.empty_like(src)

    def copy():
        if xp is np:
            np.copyto(dst, src)
        else:
            dst[...] = src
    copy()
    return 2 * nbytes / statistics.median(timed(xp, copy, 5))


def free_memory(xp) -> None:
    if xp is not np:
        xp.get_default_memory_pool().free_all_blocks()


class EventClock:
    """Brackets kernel launches with CUDA events (``_timed`` wraps a kernel under a name); ``restore`` puts the
    kernels back (``_put_back``) and gives the total milliseconds per name."""

    def __init__(self, cp):
        self.cp, self.records, self.saved = cp, [], []

    def _timed(self, kernel, name):
        def launch(*args, **kwargs):
            start, end = self.cp.cuda.Event(), self.cp.cuda.Event()
            start.record()
            kernel(*args, **kwargs)
            end.record()
            self.records.append((name, start, end))
        return launch

    def _put_back(self) -> None:
        raise NotImplementedError

    def restore(self) -> dict[str, float]:
        self._put_back()
        self.cp.cuda.Device().synchronize()
        totals: dict[str, float] = {}
        for name, start, end in self.records:
            totals[name] = totals.get(name, 0.0) + self.cp.cuda.get_elapsed_time(start, end)
        return totals


# ---- the end of a run ------------------------------------------------------------------------------------------
def target_met(value: float, target: float, lower_is_better: bool) -> bool:
    return bool(value <= target) if lower_is_better else bool(value >= target)


def save(bench: str, device: str, cases: list[dict], args, slug: str) -> None:
    """Write bench/results/<bench>-<slug>.json into ``--out-dir`` with ``--commit`` recorded (a copy of the tree
    without .git, as on the GPU machine, cannot ask git), and say where; nothing with ``--no-write``."""
    if not args.no_write:
        path = write_results(bench, device, cases, out_dir=args.out_dir, slug=slug, commit=args.commit)
        print(f"written to {path}")


def finish(bench: str, device: str, cases: list[dict], args, small: bool) -> int:
    """Print the table and the targets, write bench/results/<bench>-<device>.json (``--commit`` recorded)."""
    print()
    print_table(cases)
    print()
    for c in cases:
        if c.get("target") is None:
            continue
        sign = "<=" if c.get("lower_is_better") else ">="
        verdict = "n/a (small)" if small else ("met" if c["target_met"] else "MISSED")
        extra = ""
        d = c.get("details", {})
        if "bandwidth_fraction" in d:
            extra = f"  {100 * d['bandwidth_fraction']:.0f}% of copy bandwidth"
        if "anchor_ratio" in c:
            extra += f"  x{c['anchor_ratio']} vs {c['anchor_name']}"
        print(f"{c['case']:38} target {sign} {c['target']:<7g} {verdict:11}{extra}")
    save(bench, device, cases, args, device_slug(device) if not device.startswith("CPU") else "CPU")
    return 0
