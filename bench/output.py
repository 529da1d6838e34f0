"""``latticelab bench io``: what writing fields to Zarr costs a run (issue 43's target: a 2D 4096^2 Ising
lattice written every 100 sweeps costs <= 10% of the run's time on the GPU).

The same run twice, alternately, in this process: ``model.advance(every)`` batches with nothing written, and
the same batches with each batch's observables and a snapshot of the spins going to a Zarr store
(sim/output/zarr_store.py: device snapshot, asynchronous host copy, writer thread). The time with output
includes waiting for the writer to finish (``close``), so nothing is left out. The overhead is the median of
the repetitions' ratios minus one; the last snapshot read back from the store must equal the model's spins bit
for bit. ``--backend numpy --small`` is the CPU smoke run.
"""
from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from latticelab.bench.common import add_output_arguments, add_smoke_arguments, finish, open_backend, synchronizer

TARGET_PERCENT = 10.0


def add_arguments(parser) -> None:
    add_smoke_arguments(parser, "a 256^2 lattice, 200 sweeps, a snapshot every 20 (CPU smoke run)")
    parser.add_argument("--L", type=int, default=None, help="lattice side (default 4096; --small 256)")
    parser.add_argument("--sweeps", type=int, default=None, help="sweeps per run (default 10000; --small 200)")
    parser.add_argument("--every", type=int, default=None, help="sweeps between snapshots (default 100; --small 20)")
    parser.add_argument("--repeats", type=int, default=3, help="pairs of runs (median reported)")
    parser.add_argument("--store-dir", default=None, help="folder for the temporary store (default: the system's "
                                                          "temporary folder; use a local disk)")
    add_output_arguments(parser, "io-<gpu>.json")


def one_run(backend: str, L: int, sweeps: int, every: int, store: Path | None):
    """Seconds for ``sweeps`` sweeps in batches of ``every`` (writing to ``store`` when given, the writer's
    close included), and the model."""
    from latticelab.sim.models.ising.model import IsingModel
    from latticelab.sim.output import open_output
    model = IsingModel(dim=2, L=L, T=2.269, seed=1, backend=backend)
    model.advance(every)                           # compiles the kernels, fills the memory pools
    sync = synchronizer(model.xp)
    writer = open_output(store, model, every=every) if store is not None else None
    sync()
    start = time.perf_counter()
    for _ in range(sweeps // every):
        batch = model.advance(every)
        if writer is not None:
            values = batch.observables if isinstance(batch.observables, dict) else batch.observables.result()
            first = model.step_count - batch.steps + 1
            writer.series(batch.times, np.arange(first, model.step_count + 1), values)
            writer.snapshot(model)
    sync()
    if writer is not None:
        writer.close()
    return time.perf_counter() - start, model


def main(args) -> int:
    from latticelab.sim.backend import BackendError, to_numpy
    small = args.small
    L = args.L or (256 if small else 4096)
    sweeps = args.sweeps or (200 if small else 10000)
    every = args.every or (20 if small else 100)
    try:
        backend, device = open_backend(args.backend, "io")
    except BackendError as exc:
        print(f"latticelab bench io needs a CUDA GPU (or --backend numpy --small): {exc}")
        return 1
    import zarr
    folder = Path(tempfile.mkdtemp(prefix="latticelab-bench-io-", dir=args.store_dir))
    plain, written, identical = [], [], True
    try:
        for r in range(args.repeats):
            store = folder / f"run{r}.zarr"
            seconds, _ = one_run(backend.name, L, sweeps, every, None)
            plain.append(seconds)
            seconds, model = one_run(backend.name, L, sweeps, every, store)
            written.append(seconds)
            last = zarr.open_group(str(store), mode="r")["spins"][-1]
            identical &= bool(np.array_equal(last, to_numpy(model.spins)))
            size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
            shutil.rmtree(store)
            print(f"repeat {r + 1}: {plain[-1]:.3f} s without output, {written[-1]:.3f} s with "
                  f"({size / 2 ** 20:.1f} MiB written)", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratios = [w / p for w, p in zip(written, plain)]
    overhead = 100 * (statistics.median(ratios) - 1)
    case = {"case": f"zarr-2d-L{L}-every{every}", "metric": "overhead_percent", "value": round(overhead, 2),
            "baseline": "same-run-without-output", "baseline_value": round(statistics.median(plain), 4),
            "ratio": round(statistics.median(ratios), 4), "target": TARGET_PERCENT, "lower_is_better": True,
            "target_met": overhead <= TARGET_PERCENT and identical,
            "details": {"sweeps": sweeps, "snapshots": sweeps // every, "seconds_with_output":
                        round(statistics.median(written), 4), "read_back_bit_for_bit": identical}}
    if not identical:
        print("the store's last snapshot differs from the model's spins")
    finish("io", device, [case], args, small)
    return 0 if identical else 1
