"""Results in the formats other tools read (issue 43): Zarr stores for xarray and napari, NWB files for
neuroscience tools, VTK files for ParaView. No GUI here; the command line (``latticelab run ... --output``), the
window (File > Export data...) and the Python API (sim/session.py) all go through ``open_output``.

The format follows the file name's suffix (``FORMATS``); an unknown suffix is refused, naming the known ones.
Each writer's library is optional (the ``io`` extra): a missing one is reported in one line naming the extra.

A writer takes the model's state at the steps it is given (``snapshot(model)``) and the per-step observables
(``series(times, steps, values)``); copying from the device and writing happen off the caller's thread
(sim/output/background.py), and ``close()`` waits for the last write and leaves a complete file.
"""
from __future__ import annotations

from pathlib import Path

from latticelab.sim.output.extras import MissingExtra, require  # noqa: F401  (the package's API)
from latticelab.sim.params import ParameterError

# suffix -> (format name, what it holds, for messages)
FORMATS = {
    ".zarr": ("zarr", "Zarr store: fields and observables for xarray, napari"),
    ".nwb": ("nwb", "Neurodata Without Borders: spike trains, pseudo-EEG and firing rates (cortex)"),
    ".pvd": ("vtk", "ParaView time series of VTK image data and iso-surfaces"),
    ".vtk": ("vtk", "the same as .pvd (a .pvd index beside a folder of VTK files)"),
}


def known_suffixes() -> str:
    return ", ".join(FORMATS)


def output_format(path) -> str:
    """The format name of an output path from its suffix; ParameterError('output', ...) naming the known ones."""
    suffix = Path(str(path).rstrip("/")).suffix.lower()
    if suffix not in FORMATS:
        raise ParameterError("output", f"{path}: unknown format {suffix or '(no suffix)'!r}; the output's suffix "
                                       f"must be one of {known_suffixes()}")
    return FORMATS[suffix][0]


def check_target(path, overwrite: bool = False) -> None:
    """Before a run: ``path`` has a known suffix and can be written (an existing file or store only with
    ``overwrite``); OutputError naming it otherwise."""
    from latticelab.sim.io import OutputExists, check_output
    output_format(path)
    if Path(path).is_dir():
        if not overwrite:
            raise OutputExists(path, "it exists already; choose another name or allow overwriting")
        return
    check_output(path, overwrite=overwrite)


def open_output(path, model, *, every: int = 1, overwrite: bool = False, append: bool = False,
                inputs: dict | None = None, **options):
    """The writer of ``path``'s format for ``model``: fields every ``every`` steps (the caller calls
    ``snapshot`` when ``due(step)``), observables each step given. ``append``: continue an existing store of the
    same model and parameters (a resumed run); otherwise an existing path is refused unless ``overwrite``.
    ``inputs``: {run option: file} of the run's inputs (a schedule), kept in the metadata. ``options``:
    format-specific (the NWB writer's ``neurons``, the band of neurons whose spikes it keeps)."""
    kind = output_format(path)
    if kind == "zarr":
        from latticelab.sim.output.zarr_store import ZarrWriter
        return ZarrWriter(path, model, every=every, overwrite=overwrite, append=append, inputs=inputs)
    if kind == "nwb":
        from latticelab.sim.output.nwb import NwbWriter
        return NwbWriter(path, model, every=every, overwrite=overwrite, inputs=inputs, **options)
    from latticelab.sim.output.vtk import VtkWriter
    return VtkWriter(path, model, every=every, overwrite=overwrite, inputs=inputs)


def record_step(writer, model) -> None:
    """After a step of a headless run: the step's observables, and the fields when a snapshot is due."""
    writer.series([model.time], [model.step_count], model.observables())
    if writer.due(model.step_count):
        writer.snapshot(model)


def export_now(path, model, history=None, *, overwrite: bool = False):
    """Write what a window shows now: the model's fields (one snapshot, copied at once) and the observables'
    ``history`` (times, {name: values}; their steps are not known: -1) to ``path``, in any format; an NWB file
    takes the spikes the model has recorded so far (its spike raster). The copies are taken in the caller's
    thread; the writing runs in a worker thread. Returns a ``concurrent.futures.Future`` of the path."""
    import concurrent.futures

    import numpy as np
    kind = output_format(path)
    times, values = history if history is not None else (np.zeros(0), {})
    if kind == "nwb":
        from latticelab.sim.output.nwb import write_nwb
        from latticelab.sim.io import OutputError
        recording = getattr(model, "spike_recording", None)
        if recording is None:
            raise OutputError(path, "no spikes are being recorded: show the spike raster (Signal dock) to record "
                                    "them, then export")
        recording.drain()
        spikes, band = recording.spikes(), (recording.first, recording.count)
        values = {name: np.array(v, copy=True) for name, v in values.items()}
        work = lambda: write_nwb(path, model, spikes, band, np.array(times, copy=True), values,  # noqa: E731
                                 overwrite=overwrite)
    else:
        writer = open_output(path, model, every=1, overwrite=overwrite)
        writer.snapshot(model)
        if len(times):
            writer.series(times, np.full(len(times), -1), values)
        work = writer.close
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="latticelab-export")
    future = pool.submit(work)
    pool.shutdown(wait=False)
    return future
