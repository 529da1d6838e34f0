"""``latticelab bench io``: what writing fields to Zarr costs a run (issue 43's target: a 2D 4096^2 Ising
lattice written every 100 sweeps costs <= 10% of the run's time on the GPU).

The same run twice, alternately, in this process: ``model.advance(every)`` batches with nothing written, and
the same batches with each batch's observables and a snapshot of the spins going to a Zarr store
(sim/output/zarr_store.py: device snapshot, asynchronous host copy, writer thread). The time with output
includes waiting for the writer to finish (``close``), so nothing is left out. The overhead is the median of
the repetitions' ratios minus one; the last snapshot read back from the store must equal the model's spins bit
for bit. ``--formats zarr,pvd`` measures the ParaView series too (sim/output/vtk.py: one .vti file a snapshot,
its last file decoded and compared the same way). ``--backend numpy --small`` is the CPU smoke run.
"""
from __future__ import annotations

import shutil
import statistics
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from latticelab.bench.common import add_output_arguments, add_smoke_arguments, finish, open_backend, synchronizer

TARGET_PERCENT = 10.0
SUFFIXES = {"zarr": ".zarr", "pvd": ".pvd"}


def add_arguments(parser) -> None:
    add_smoke_arguments(parser, "a 256^2 lattice, 200 sweeps, a snapshot every 20 (CPU smoke run)")
    parser.add_argument("--L", type=int, default=None, help="lattice side (default 4096; --small 256)")
    parser.add_argument("--sweeps", type=int, default=None, help="sweeps per run (default 10000; --small 200)")
    parser.add_argument("--every", type=int, default=None, help="sweeps between snapshots (default 100; --small 20)")
    parser.add_argument("--repeats", type=int, default=3, help="pairs of runs (median reported)")
    parser.add_argument("--formats", default="zarr", help="comma-separated output formats to measure: "
                        f"{', '.join(SUFFIXES)} (default zarr, the issue's target)")
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


def last_snapshot(store: Path, fmt: str) -> np.ndarray:
    """The spins of the store's last snapshot, read independently of the writer."""
    if fmt == "zarr":
        import zarr
        return zarr.open_group(str(store), mode="r")["spins"][-1]
    import base64
    last = ET.parse(store).getroot().findall("Collection/DataSet")[-1].get("file")
    image = ET.parse(store.parent / last).getroot().find("ImageData")
    raw = base64.b64decode(image.find("Piece/PointData/DataArray").text)
    nbytes = int(np.frombuffer(raw[:8], "<u8")[0])
    shape = [int(n) + 1 for n in image.get("WholeExtent").split()[1::2]]
    values = np.frombuffer(raw[8:8 + nbytes], np.int8)
    return values.reshape([n for n in shape if n > 1], order="F")


def stored_bytes(path: Path) -> int:
    folder = path.with_suffix("") if path.suffix == ".pvd" else path
    files = [path] if path.is_file() else []
    if folder.is_dir():
        files += [p for p in folder.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files)


def measure_format(fmt: str, backend: str, L: int, sweeps: int, every: int, repeats: int, folder: Path) -> dict:
    """Alternate runs without and with ``fmt`` output; the case's dict."""
    from latticelab.sim.backend import to_numpy
    plain, written, identical, size = [], [], True, 0
    for r in range(repeats):
        store = folder / f"run{r}{SUFFIXES[fmt]}"
        seconds, _ = one_run(backend, L, sweeps, every, None)
        plain.append(seconds)
        seconds, model = one_run(backend, L, sweeps, every, store)
        written.append(seconds)
        identical &= bool(np.array_equal(last_snapshot(store, fmt), to_numpy(model.spins)))
        size = stored_bytes(store)
        shutil.rmtree(store.with_suffix("") if fmt == "pvd" else store, ignore_errors=True)
        store.unlink(missing_ok=True)
        print(f"{fmt} repeat {r + 1}: {plain[-1]:.3f} s without output, {written[-1]:.3f} s with "
              f"({size / 2 ** 20:.1f} MiB written)", flush=True)
    ratios = [w / p for w, p in zip(written, plain)]
    overhead = 100 * (statistics.median(ratios) - 1)
    snapshots = sweeps // every
    extra = statistics.median(written) - statistics.median(plain)
    return {"case": f"{fmt}-2d-L{L}-every{every}", "metric": "overhead_percent", "value": round(overhead, 2),
            "baseline": "same-run-without-output", "baseline_value": round(statistics.median(plain), 4),
            "ratio": round(statistics.median(ratios), 4), "target": TARGET_PERCENT, "lower_is_better": True,
            "target_met": overhead <= TARGET_PERCENT and identical,
            "details": {"sweeps": sweeps, "snapshots": snapshots, "seconds_with_output":
                        round(statistics.median(written), 4), "read_back_bit_for_bit": identical,
                        "mib_on_disk": round(size / 2 ** 20, 1),
                        "field_mib_per_s_sustained": round(snapshots * L * L / 2 ** 20 / statistics.median(written), 1),
                        "ms_added_per_snapshot": round(1e3 * extra / snapshots, 3)}}


def main(args) -> int:
    from latticelab.sim.backend import BackendError
    small = args.small
    L = args.L or (256 if small else 4096)
    sweeps = args.sweeps or (200 if small else 10000)
    every = args.every or (20 if small else 100)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = [f for f in formats if f not in SUFFIXES]
    if unknown or not formats:
        print(f"latticelab bench io: --formats: unknown {', '.join(unknown) or '(none given)'}; "
              f"known: {', '.join(SUFFIXES)}")
        return 2
    try:
        backend, device = open_backend(args.backend, "io")
    except BackendError as exc:
        print(f"latticelab bench io needs a CUDA GPU (or --backend numpy --small): {exc}")
        return 1
    folder = Path(tempfile.mkdtemp(prefix="latticelab-bench-io-", dir=args.store_dir))
    try:
        cases = [measure_format(fmt, backend.name, L, sweeps, every, args.repeats, folder) for fmt in formats]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    identical = all(c["details"]["read_back_bit_for_bit"] for c in cases)
    if not identical:
        print("a store's last snapshot differs from the model's spins")
    finish("io", device, cases, args, small)
    return 0 if identical else 1
