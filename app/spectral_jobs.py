"""The Spectrum dock's work, without Qt (app/spectral_panel.py draws it): what a job holds, what it gives, and
the computation itself -- which runs in the dock's worker process for a NumPy model, so that the long C calls
in it (cluster labelling in scipy.sparse.csgraph, marching cubes in scikit-image: up to 0.3 s each at 3D L=128,
holding Python's GIL) never stall the window's event loop; on a worker thread otherwise (a CUDA model: its
arrays stay on the device, and the device does the work without the GIL).

The worker process is app/stepping.py's ``ModelProcess``: it keeps a copy of the model, brought to the state
the job ships (sim/state.py ``state_of``) when cluster sizes are asked for.
"""
from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass

from latticelab.app.stepping import ProcessGone, SharedProcess
from latticelab.render.isosurface import display_mesh
from latticelab.render.spectral import display_image
from latticelab.sim.analysis import spectral
from latticelab.sim.analysis.statistics import size_histogram

log = logging.getLogger(__name__)


def frozen_copy(model):
    """A copy of ``model`` for a worker thread while the model steps on: a shallow copy whose arrays named by
    ``fields()`` are copies (made on the model's device). Returns (copy, main field name, main field copy,
    whether every field was found as an attribute -- only then do the copy's methods read the frozen state)."""
    fields = model.fields()
    copies = {id(array): array.copy() for array in fields.values()}
    frozen = copy.copy(model)
    found = set()
    for attribute, value in list(vars(model).items()):
        if id(value) in copies:
            vars(frozen)[attribute] = copies[id(value)]   # past any property: the copy's own attribute
            found.add(id(value))
    name, main = next(iter(fields.items()))
    return frozen, name, copies[id(main)], found == set(copies)


@dataclass
class SpectrumJob:
    """What the GUI thread hands the worker: copies only, nothing the frame loop changes."""
    identity: tuple
    step: int | None
    field_name: str
    field: object                     # a copy of the main field (NumPy or CuPy)
    base: spectral.SpectrumAccumulator   # the average so far (not changed by the worker)
    average: bool
    iso: float
    iso_method: str
    clusters_of: object = None        # a frozen copy of the model to measure clusters on, or None
    clusters_note: str = ""
    live: str = ""
    max_faces: int | None = None      # the 3D mesh's face budget (render/isosurface.py display_mesh)
    state: dict | None = None         # the model's state (sim/state.py state_of) for clusters in the process
    elsewhere: bool = False           # whether the job may run in the worker process


@dataclass
class SpectrumResult:
    accumulator: spectral.SpectrumAccumulator
    spherical: object
    image: object = None              # 2D: the display image
    volume: object = None             # 3D: the normalised magnitude and its mesh at ``iso``
    mesh: object = None
    iso: float = 0.5
    factor: int = 1                   # 3D: the block reduction the mesh was made from
    histogram: tuple | None = None    # (edges, counts a, counts b, (name a, name b))
    clusters_text: str = ""
    seconds: float = 0.0


def compute_here(job: SpectrumJob) -> SpectrumResult:
    """Spectrum, average, spherical mean, image or mesh, cluster histogram, in the calling thread."""
    t0 = time.perf_counter()
    mag = spectral.fft_magnitude(job.field)
    accumulator = copy.deepcopy(job.base) if job.average else spectral.SpectrumAccumulator()
    accumulator.add(mag)
    shown = accumulator.mean if job.average else mag
    result = SpectrumResult(accumulator, accumulator.spherical(), iso=job.iso)
    if shown.ndim == 2:
        result.image = display_image(shown)
    else:
        top = float(shown.max())
        result.volume = (shown / (top if top > 0 else 1.0)).astype("float32")   # as SpectrumIsoView.set_spectrum
        result.mesh, result.factor = display_mesh(result.volume, job.iso, method=job.iso_method,
                                                  max_faces=job.max_faces)
    if job.clusters_of is not None:
        groups = job.clusters_of.cluster_size_groups()
        (first, a), (second, b) = list(groups.items())[:2]
        n_cells = int(job.field.size)
        edges, counts_a = size_histogram(a, n_cells)
        _, counts_b = size_histogram(b, n_cells)
        result.histogram = (edges, counts_a, counts_b, (first, second))
        largest = max([s[0] for s in groups.values() if s.size] or [0])
        result.clusters_text = f" | clusters: {a.size} {first}, {b.size} {second}, largest {largest}"
    elif job.clusters_note:
        result.clusters_text = job.clusters_note
    result.seconds = time.perf_counter() - t0
    return result


def for_process(job: SpectrumJob) -> SpectrumJob:
    """What of ``job`` goes to the worker process: no frozen model (the state stands for it), no state (it
    travels beside), and the average so far only when averaging."""
    base = job.base if job.average else spectral.SpectrumAccumulator()
    return SpectrumJob(job.identity, job.step, job.field_name, job.field, base, job.average, job.iso,
                       job.iso_method, None, job.clusters_note, job.live, job.max_faces, None, False)


def compute_in_process(model, job: SpectrumJob, clusters: bool) -> SpectrumResult:
    """The worker process's part (app/stepping.py ModelProcess.call): with ``clusters``, ``model`` is its copy
    of the window's model, brought to the job's state (without, whatever copy it holds is not looked at)."""
    job.clusters_of = model if clusters else None
    return compute_here(job)


def mesh_in_process(model, volume, iso: float, method: str, max_faces: int | None):
    """A new iso value's mesh, in the worker process: (mesh, factor)."""
    return display_mesh(volume, iso, method=method, max_faces=max_faces)


_worker = SharedProcess("latticelab-spectrum")   # the dock's worker process, started by the first job that needs it


def compute(job: SpectrumJob) -> SpectrumResult:
    """The worker thread's part: the job in the worker process when it may go there (a NumPy model), else here
    (also when the process cannot be had)."""
    if job.elsewhere:
        try:
            return _worker.get().call(compute_in_process, job.state, for_process(job), job.state is not None)
        except ProcessGone as exc:
            log.warning("spectrum on a worker thread: %s", exc)
    return compute_here(job)


def remesh(volume, iso: float, method: str, max_faces: int | None):
    """A new iso value's mesh of a host volume, (mesh, factor): in the worker process (the worker thread's
    part), here if the process cannot be had."""
    try:
        return _worker.get().call(mesh_in_process, None, volume, iso, method, max_faces)
    except ProcessGone as exc:
        log.warning("iso-surface on a worker thread: %s", exc)
    return display_mesh(volume, iso, method=method, max_faces=max_faces)
