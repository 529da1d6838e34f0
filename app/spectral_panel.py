"""A dock with the spectral views (thesis 003, section 7.4): the FFT magnitude of the running model's main
field (the first of ``model.fields()``) -- a greyscale image in 2D, iso-surfaces with an iso slider in 3D --
its spherical mean, the cluster-size histogram of models that have clusters (sim/model.py: HasClusters),
averaging over steps, and CSV/NPZ export.

The panel pulls from the window's model on its own timer (a few times a second, only while visible), so
the window needs one line to add it: ``spectral_panel.install(window)``. It notices on its own when the
model or its parameters change, restarts the average and redraws.

The work runs off the GUI thread (a 3D L=128 Ising update took 1.75 s, most of it cluster labelling): on the
GUI thread the panel only copies the state (``frozen_copy``: the model's field arrays copied where they live, the
rest shared; and for cluster sizes of a NumPy model its save/resume state), then a worker thread runs the job
(``compute``: the spectrum, its spherical mean, the image or iso-surface mesh and the cluster histogram), and a
queued signal brings the result back to the GUI thread, which only draws it. For a NumPy model the worker thread
hands the job to a worker process (app/spectral_jobs.py), because cluster labelling and marching cubes hold
Python's GIL for up to 0.3 s each and would stall the event loop from a thread (issue 16). One job at most is in
flight; while one runs the timer's ticks are skipped and the status bar says "computing spectrum...". The
accumulator of the average is replaced, never changed in place, so an export on the GUI thread never sees a
half-added spectrum, and a result computed for an older model, parameters or average is dropped. ``refresh()``
(scripts, tests) runs the same job and waits for it.

Drawing stays cheap on a software OpenGL renderer (Mesa llvmpipe, no GPU): there the 3D mesh is kept under
``SOFTWARE_GL_FACES`` faces (render/isosurface.py ``display_mesh``: a block-maximum reduction of the spectrum,
said in the view's caption), and a new iso value of a large spectrum is meshed by the worker process too, not
on the GUI thread.

No frame may wait long for the dock either (issue 16: 50 ms). So a result is shown a piece per draw of the canvas
(``UPDATE_PIECES``: the spectrum view, the spherical mean, the histogram, the caption, each followed by a draw):
each draw then lays out and uploads only one plot's new ticks and lines, and a piece that would change nothing
(the same caption, the same axes) changes nothing. And before the dock is first shown -- and again when the model
changes between 2D and 3D while it is hidden -- it is prepared a step per tick of a timer (``_prepare_steps``;
not while the window changes model, ``hold_preparation``):
the glyphs of its text rendered (each new glyph costs milliseconds on the CPU), the view for
the model's dimension made, and each visual drawn once offscreen so its shaders are compiled, as the analysis
docks do (app/analysis_dock.py ``_warm_steps``). Shown before that view was made (soon after a change of
dimension), the dock makes it a step per frame while its first spectrum computes (``_begin_dimension``).
"""
from __future__ import annotations

import collections
import concurrent.futures
import logging
import time
from pathlib import Path
from typing import Callable

import numpy as np
from PySide6 import QtCore, QtWidgets
from vispy import scene

from latticelab.app.analysis_dock import info_label, make_canvas, on_screen, sized_steps
from latticelab.app.dialogs import confirm_replace
from latticelab.app.spectral_jobs import (SpectrumJob, SpectrumResult, compute_here, compute_in_process, for_process,
                                          frozen_copy, mesh_in_process)
from latticelab.app.staging import another_step_fits
from latticelab.app.stepping import ModelAccess, ProcessGone, SharedProcess
from latticelab.render.gl_renderer import current_is_software
from latticelab.render.isosurface import SpectrumIsoView
from latticelab.render.plots import glyph_steps, one_font_manager, warm_up_steps, with_font_manager
from latticelab.render.spectral import TEXT, ClusterHistogramPlot, SphericalMeanPlot, SpectrumImageView
from latticelab.sim.analysis import spectral
from latticelab.sim.io import free_path
from latticelab.sim.model import HasClusters, main_field
from latticelab.sim.state import state_of

log = logging.getLogger(__name__)

REFRESH_MS = 300
BUSY_TEXT = "computing spectrum..."
BUSY_AFTER_MS = 200              # say so only for jobs that last longer than this (no flicker for quick ones)
CPU_CLUSTER_LIMIT = 1 << 21      # sites: above this, cluster sizes on the CPU are left to the user to ask
ISO_STEPS = 1000
SOFTWARE_GL_FACES = 20_000       # a software renderer's mesh budget (some 60 ms a draw with Mesa llvmpipe, 2 cores)
STAGE_FACES = 4_000              # faces drawn a slice there (about 2.7 us a face: 11 ms), render/isosurface.py
SYNC_REMESH_CELLS = 1 << 16      # volumes up to 40^3 are meshed at once on a new iso value; larger ones by a worker
PREPARE_MS = 40                  # the hidden dock's preparation: a step per tick of a timer this often
VIEW_STEP_MS = 30               # between two steps making the shown dock's view for a new dimension (a frame)
PREPARE_SLICE_S = 0.008          # a tick's budget of steps (at least one; app/staging.py another_step_fits)
UPDATE_PIECES = ("view", "mean", "histogram", "caption")
USE_PROCESS = True               # jobs of NumPy models in the worker process (False: on the worker thread)
FOLDER_KEY = "folders/export"    # the window's remembered export folder, shared with screenshots
EXPORTS = {  # kind: (file dialog filter, suffix, button text)
    "npz": ("Spectrum and spherical mean (*.npz)", ".npz", "Save NPZ…"),
    "spherical-csv": ("Spherical mean (*.csv)", ".csv", "Save mean CSV…"),
    "spectrum-csv": ("Spectrum, one row per mode (*.csv)", ".csv", "Save spectrum CSV…"),
    "iso-vtu": ("Iso-surface of a 3D spectrum for ParaView (*.vtu)", ".vtu", "Save iso-surface…"),
}


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
    from latticelab.render.isosurface import display_mesh
    return display_mesh(volume, iso, method=method, max_faces=max_faces)


def _iso_caption(field_name: str, view) -> str:
    """What the 3D view shows, short enough for the narrow cell under it."""
    if view.edge_length is None:
        return f"|FFT| of {field_name}: no surface at iso {view.iso:.3f}"
    reduced = f", 1/{view.factor} res." if getattr(view, "factor", 1) > 1 else ""
    return f"|FFT| of {field_name}, box edge {view.edge_length:g}/L{reduced}"


class _Delivery(QtCore.QObject):
    """Carries a finished job's future from the worker thread to the GUI thread (a queued signal)."""
    done = QtCore.Signal(object)


class SpectralPanel(QtWidgets.QDockWidget):
    """Spectral views of ``model_source()`` (any model: its main field)."""

    def __init__(self, model_source: Callable[[], object], parent=None, prefs=None, interactive: bool = True,
                 refresh_ms: int = REFRESH_MS, access: ModelAccess | None = None, status_bar=None):
        """``access``: whether the window's stepping worker writes the model's arrays (no copy is taken then,
        and the request is made again right after its batch); ``status_bar``: a QStatusBar told while a job
        takes long."""
        super().__init__("Spectrum", parent, objectName="spectral_dock")
        self.model_source = model_source
        self.prefs = prefs
        self.interactive = interactive
        self.access = access or ModelAccess()
        self.busy = self.access.busy
        self.status_bar = status_bar
        self.accumulator = spectral.SpectrumAccumulator()
        self.magnitude = None
        self.last_record = None
        self.last_error = ""
        self.jobs_started = 0
        self._identity = None
        self._shown_step = None
        self._spectrum_view = None
        self._field_name = "field"
        self._job: SpectrumJob | None = None
        self._future = None
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="spectrum")
        self._delivery = _Delivery(self)
        self._delivery.done.connect(self._delivered, QtCore.Qt.ConnectionType.QueuedConnection)
        # new iso values of a large spectrum are meshed off the GUI thread, one at a time, the latest wins
        self._mesh_executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="iso-mesh")
        self._mesh_delivery = _Delivery(self)
        self._mesh_delivery.done.connect(self._mesh_delivered, QtCore.Qt.ConnectionType.QueuedConnection)
        self._meshing = None          # (volume, iso) of the mesh being made, or None
        self._shown_iso = None        # the iso value of the mesh shown
        self.software_gl: bool | None = None   # known at the canvas's first draw
        for executor in (self._executor, self._mesh_executor):
            self.destroyed.connect(lambda *_, e=executor: e.shutdown(wait=False, cancel_futures=True))
        self._spectrum_ndim = None
        self._view_steps = None       # the steps left making the view for a new dimension while on screen
        self._pending: dict = {}      # the pieces of the last result not shown yet: name -> what shows it
        self.pieces_shown = collections.deque(maxlen=64)   # (draw number, piece), for tests and benchmarks
        self._draws = 0               # draws of the canvas so far
        self._piece_draw = -1         # the draw count when the last piece was shown
        self._piece_queued = False
        self._prepare_iter = None     # the steps preparing the hidden dock, while some are left
        # the host window says when that preparation is to wait (a model change under way: MainWindow.settling)
        self.hold_preparation: Callable[[], bool] = lambda: False
        self.prepared_steps = collections.deque(maxlen=256)   # what they did, for tests and benchmarks
        with one_font_manager() as fonts:
            self._fonts = fonts       # every text of the canvas shares it: each glyph is rendered once
            self._build()
        self.canvas.events.draw.connect(self._learn_renderer, position="first")
        self.canvas.events.draw.connect(self._drawn, position="last")
        self.visibilityChanged.connect(self._visibility_changed)
        self.timer = QtCore.QTimer(self, interval=refresh_ms)
        self.timer.timeout.connect(lambda: self.request())
        self.timer.start()
        self.prepare_timer = QtCore.QTimer(self, interval=PREPARE_MS)
        self.prepare_timer.timeout.connect(self._prepare_tick)
        self.prepare_timer.start()

    # ==== construction ==========================================================================
    def _build(self) -> None:
        body = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(body)
        layout.setContentsMargins(4, 4, 4, 4)
        # Its picture is cached and redrawn a part at a time (render/cached_canvas.py): a result is shown a piece
        # per draw (``_show``) and each draw redraws that piece's plot and the spectrum view only, not all of the
        # canvas (a whole draw took 25-45 ms on llvmpipe, on top of the window's own paint in the same frame).
        # A budget's worth of regions per paint (a first picture too, the background shown until it is complete).
        self.canvas = make_canvas("spectral_canvas", (760, 440), (360, 240), bgcolor=(0.08, 0.08, 0.1, 1.0),
                                  cached=True)
        self.grid = self.canvas.central_widget.add_grid(spacing=4, margin=4)
        self._add_main_cell()
        mean_grid = self.grid.add_grid(row=0, col=1)
        hist_grid = self.grid.add_grid(row=1, col=1)
        self.mean_plot = SphericalMeanPlot(mean_grid)
        self.hist_plot = ClusterHistogramPlot(hist_grid)
        self.caption = scene.Label("", color=TEXT, font_size=7)     # what the spectrum view shows, below it
        self.caption.height_max = 18
        self.grid.add_widget(self.caption, row=2, col=0)
        self.canvas.add_region(self.caption)
        layout.addWidget(self.canvas.native, 1)

        self.iso_row = QtWidgets.QWidget(objectName="iso_row")     # 3D only (``_offer_what_applies``)
        row = QtWidgets.QHBoxLayout(self.iso_row)
        row.setContentsMargins(0, 0, 0, 0)
        self.iso_label = QtWidgets.QLabel("iso 0.500")
        self.iso_slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal, objectName="iso_slider")
        self.iso_slider.setRange(1, ISO_STEPS - 1)
        self.iso_slider.setValue(ISO_STEPS // 2)
        self.iso_slider.setToolTip("3D: iso value as a fraction of the largest magnitude; "
                                   "higher values peel away the weaker layers")
        self.iso_slider.valueChanged.connect(self._iso_moved)
        row.addWidget(QtWidgets.QLabel("iso"))
        row.addWidget(self.iso_slider, 1)
        row.addWidget(self.iso_label)
        layout.addWidget(self.iso_row)

        row = QtWidgets.QHBoxLayout()
        self.average_box = QtWidgets.QCheckBox("Average over steps", objectName="average_box")
        self.average_box.setToolTip("Scattering patterns add: average the spectra of successive steps")
        self.average_box.toggled.connect(lambda _: self.reset_average())
        self.clusters_box = QtWidgets.QCheckBox("Cluster sizes", objectName="clusters_box")
        self.clusters_box.setChecked(True)
        self.clusters_box.toggled.connect(lambda _: self.request(force=True))
        reset = QtWidgets.QPushButton("Reset average")
        reset.clicked.connect(self.reset_average)
        row.addWidget(self.average_box)
        row.addWidget(self.clusters_box)
        row.addWidget(reset)
        row.addStretch(1)
        layout.addLayout(row)
        row = QtWidgets.QHBoxLayout()  # exports on a row of their own, so the dock stays narrow
        for kind, (text, _, label) in EXPORTS.items():
            button = QtWidgets.QPushButton(label, objectName=f"export_{kind}", toolTip=f"Save the {text}")
            button.clicked.connect(lambda _=False, k=kind: self.export_dialog(k))
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)
        # names every live parameter: wraps rather than widens the dock; three lines held from the start
        self.info = info_label("spectral_info", lines=3)
        layout.addWidget(self.info)
        self.setWidget(body)

    def _add_main_cell(self) -> None:
        """The spectrum view's ViewBox in the grid's first column, a region of the canvas redrawn at every draw
        (turned by the mouse, its mesh staged)."""
        self.main_cell = self.grid.add_view(row=0, col=0, row_span=2, bgcolor=(0, 0, 0, 1))
        self.main_cell.stretch = (1.4, 1)
        self.canvas.add_region(self.main_cell, every_draw=True)

    def _learn_renderer(self, event=None) -> None:
        """At the first draw (the canvas's GL context is current): is the renderer a software one?"""
        self.canvas.events.draw.disconnect(self._learn_renderer)
        software = current_is_software()
        if software is None:       # no answer: keep the budget, which is harmless on a GPU
            return
        self.software_gl = software
        if isinstance(self._spectrum_view, SpectrumIsoView):
            self._spectrum_view.max_faces = self.max_faces()
            self._spectrum_view.set_staging(self.stage_faces())

    def max_faces(self) -> int | None:
        """The 3D mesh's face budget: on a software renderer (or before the renderer is known), none on a GPU."""
        return None if self.software_gl is False else SOFTWARE_GL_FACES

    def stage_faces(self) -> int | None:
        """Faces of the 3D mesh drawn a slice (render/isosurface.py ``StagedPicture``): on a software renderer (or
        before the renderer is known); a GPU draws the mesh at each draw of the canvas."""
        return None if self.software_gl is False else STAGE_FACES

    # ==== model tracking ========================================================================
    def _model(self):
        try:
            return self.model_source()
        except Exception as exc:  # the window may be rebuilding its model
            log.debug("no model: %s", exc)
            return None

    @staticmethod
    def identity(model) -> tuple:
        """What, when changed, makes earlier spectra incomparable (restarts the average)."""
        return (id(model), tuple(model.shape), model.params)

    def reset_average(self) -> None:
        self.accumulator = spectral.SpectrumAccumulator()   # a new object: a job in flight adds to the old one
        self._shown_step = None
        self.request(force=True)

    # ==== updates ===============================================================================
    def on_screen(self) -> bool:
        return on_screen(self)        # (app/analysis_dock.py: a tab behind another is "visible", seen nowhere)

    def _visibility_changed(self, visible: bool) -> None:
        if visible:
            QtCore.QTimer.singleShot(0, lambda: self.request(force=True))

    @property
    def computing(self) -> bool:
        """Whether a job is in flight."""
        return self._job is not None

    def request(self, force: bool = False) -> bool:
        """Start a job when the model moved on (or when forced) and the panel is on screen; never more than one
        in flight, never waiting: the GUI thread only copies the state. Returns whether a job started."""
        if self._job is not None:
            return False
        job = self._make_job(force)
        if job is None:
            return False
        self._start(job)
        return True

    def refresh(self, force: bool = False) -> bool:
        """``request`` and wait for the result (scripts and tests; the timer never waits). A job already in
        flight is finished first. Returns whether a new spectrum is shown."""
        if self._job is not None:
            self._finish(self._job, self._future, at_once=True)
        job = self._make_job(force)
        if job is None:
            return False
        future = self._start(job)
        return self._finish(job, future, at_once=True)

    def _offer_what_applies(self, model) -> None:
        """Only the controls that apply to ``model``: the iso slider for a 3D field, cluster sizes for a model
        that has clusters (they were offered for 2D Cahn-Hilliard and the cortex, issue 41)."""
        self.iso_row.setVisible(len(model.shape) == 3)
        self.clusters_box.setVisible(isinstance(model, HasClusters))

    def _make_job(self, force: bool) -> SpectrumJob | None:
        """On the GUI thread: copy what the worker needs, or None when there is nothing to do."""
        if not self.on_screen():
            return None
        if self.busy():
            self.access.retry(lambda: self._job is None and self.request(force))
            return None
        model = self._model()
        if model is None:
            return None
        self._offer_what_applies(model)
        identity = self.identity(model)
        step = getattr(model, "step_count", None)
        if identity != self._identity:
            self._identity = identity
            self.accumulator = spectral.SpectrumAccumulator()
            self._begin_dimension(len(model.shape))
        elif not force and step is not None and step == self._shown_step:
            return None
        self._shown_step = step
        try:
            frozen, name, field, complete = frozen_copy(model)
        except Exception as exc:  # keep the app running; say what went wrong
            self._report(f"spectrum update failed: {type(exc).__name__}: {exc}")
            return None
        elsewhere = USE_PROCESS and isinstance(field, np.ndarray) and model.backend_name == "numpy"
        clusters_of, note, state = None, "", None
        if self.clusters_box.isChecked() and isinstance(model, HasClusters):
            if int(field.size) > CPU_CLUSTER_LIMIT and model.backend_name != "cuda":
                note = " | cluster sizes off above 2M cells on the CPU"
            elif not complete:
                note = " | cluster sizes need a copy of the model's state"
            else:
                clusters_of = frozen
                if elsewhere:
                    try:
                        state = state_of(model)        # the worker process's copy of the model takes it
                    except Exception as exc:           # a model without a complete state: measure it here
                        log.debug("no state for the worker process: %s", exc)
                        elsewhere = False
        live = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in model.params.model_dump().items() if k in type(model.params).names("live"))
        view = self._spectrum_view
        return SpectrumJob(identity, step, name, field, self.accumulator, self.average_box.isChecked(),
                           self.iso_value(), getattr(view, "method", "auto"), clusters_of, note, live,
                           max_faces=self.max_faces() if len(model.shape) == 3 else None, state=state,
                           elsewhere=elsewhere)

    def _start(self, job: SpectrumJob):
        self._job = job
        self.jobs_started += 1
        future = self._executor.submit(compute, job)
        self._future = future

        def deliver(done, job=job):
            try:
                self._delivery.done.emit((job, done))
            except RuntimeError:   # the panel is gone (window closed): nobody waits for the result
                pass

        future.add_done_callback(deliver)
        QtCore.QTimer.singleShot(BUSY_AFTER_MS, lambda job=job: self._say_busy(job))
        return future

    def _say_busy(self, job) -> None:
        if self._job is job and self.status_bar is not None:
            self.status_bar.showMessage(BUSY_TEXT)
        if self._job is job:
            self.info.setText(f"{BUSY_TEXT} (step {job.step})")

    def _delivered(self, payload) -> None:
        job, future = payload
        if job is self._job:      # not already taken by a waiting ``refresh``
            self._finish(job, future)

    def _finish(self, job: SpectrumJob, future, at_once: bool = False) -> bool:
        """On the GUI thread: draw the job's result (waiting for it if need be) unless it is out of date."""
        try:
            result = future.result()
            error = None
        except Exception as exc:
            result, error = None, exc
        self._job = self._future = None
        if self.status_bar is not None and self.status_bar.currentMessage() == BUSY_TEXT:
            self.status_bar.clearMessage()
        if error is not None:
            log.error("spectral panel", exc_info=error)
            self._report(f"spectrum update failed: {type(error).__name__}: {error}")
            return False
        if job.identity != self._identity or job.base is not self.accumulator:
            self._shown_step = None   # another model, parameters or average meanwhile: compute again
            QtCore.QTimer.singleShot(0, lambda: self.request(force=True))
            return False
        self._show(job, result, at_once)
        return True

    def _report(self, text: str) -> None:
        self.last_error = text
        self.info.setText(text)

    def _begin_dimension(self, ndim: int) -> None:
        """Make the spectrum view for ``ndim`` a step per tick of the event loop, while the first job computes on
        the worker (made at once, each step took 20-50 ms of one frame on llvmpipe when the dock was shown soon
        after a change of dimension). Showing a result finishes what is left (``_show_view``)."""
        self._prepare_iter = None     # a hidden preparation left unfinished: these steps take over
        self._view_steps = with_font_manager(self._dimension_steps(ndim), self._fonts)
        # the first step too in a pass of the event loop of its own: called from the frame loop's request, it had
        # added 13-26 ms to that frame's tick, right before the window's paint (bench responsiveness, traced)
        QtCore.QTimer.singleShot(0, self, self._view_step)

    def _view_step(self) -> None:
        """One step of making the view; the next one after a frame."""
        if self._view_steps is None:
            return
        try:
            next(self._view_steps)
        except StopIteration:
            self._view_steps = None
            return
        QtCore.QTimer.singleShot(VIEW_STEP_MS, self._view_step)

    def _finish_view(self) -> None:
        """The steps left making the view, at once (a result to be shown all at once)."""
        while self._view_steps is not None:
            self._view_step()

    def _dimension_steps(self, ndim: int):
        """Make the spectrum view for ``ndim`` in steps (its ViewBox, then its visuals: 10-25 ms each on llvmpipe;
        the 3D view's a visual a step), so that they can be taken in separate slices."""
        view = self._spectrum_view
        if view is not None and self._spectrum_ndim == ndim and view.view is self.main_cell:
            return
        if view is None or view.view is self.main_cell:
            # a fresh ViewBox for the new kind of view (image or 3D), in the same grid cell; until the view is
            # made in it, the old view (no longer drawn) takes what may come for it. (The first view too: made in
            # the cell the canvas was built with, its mesh's first paint request was lost in a GUI test -- the
            # canvas was never painted again.)
            self.grid.remove_widget(self.main_cell)
            self.canvas.remove_region(self.main_cell)
            self.main_cell.parent = None
            self._add_main_cell()
            yield "view box"
        # else the cell is still empty (made by the steps of a preparation left unfinished)
        if ndim == 2:
            with one_font_manager(self._fonts):
                view = SpectrumImageView(self.main_cell)
        else:   # its visuals a step each (26-37 ms together on llvmpipe's host)
            view = yield from with_font_manager(SpectrumIsoView.in_steps(
                self.main_cell, max_faces=self.max_faces(), stage_faces=self.stage_faces()), self._fonts)
        self._spectrum_view = view
        self._spectrum_ndim = ndim
        self.iso_slider.setEnabled(ndim == 3)
        if ndim == 3:
            self._spectrum_view.iso = self.iso_value()
            # its label lives in the 3D scene and is drawn over the plots beside it: the caption says it instead
            self._spectrum_view.label.visible = False

    def _show(self, job: SpectrumJob, result: SpectrumResult, at_once: bool = False) -> None:
        """Take a result (GUI thread): its numbers now, its pictures a piece per draw of the canvas (all now with
        ``at_once``, or when the dock is not on screen). Pieces of an earlier result not shown yet are replaced."""
        self.accumulator = result.accumulator
        self._field_name = job.field_name
        shown = result.accumulator.mean if job.average else None
        self.magnitude = shown if shown is not None else self.accumulator.mean
        self.last_error = ""
        self._set_info(f"{job.field_name}, step {job.step} | {job.live} | averaged over "
                       f"{self.accumulator.count} | {1e3 * result.seconds:.0f} ms{result.clusters_text}")
        self._pending = {"view": lambda: self._show_view(job, result),
                         "mean": lambda: self.mean_plot.set_data(result.spherical),
                         "histogram": ((lambda: self.hist_plot.set_data(*result.histogram[:3],
                                                                         labels=result.histogram[3]))
                                       if result.histogram is not None else None),
                         "caption": lambda: self._set_caption(self._caption_for(job, result))}
        self._pending = {k: v for k, v in self._pending.items() if v is not None}
        if at_once or not self.on_screen():
            while self._pending:
                self._next_piece()
        else:
            self._next_piece()

    def _next_piece(self) -> None:
        """Show the next piece of the last result and ask for a draw; the draw's end asks for the one after."""
        if not self._pending:
            return
        name = next(iter(self._pending))
        show = self._pending.pop(name)
        try:
            show()
        except Exception as exc:    # keep the window running; say what went wrong
            self._report(f"spectrum {name} failed: {type(exc).__name__}: {exc}")
            log.exception("spectral panel: %s", name)
        self.pieces_shown.append((self._draws, name))
        self._piece_draw = self._draws
        self._changed(*self._piece_parts(name))

    def _piece_parts(self, name: str) -> tuple:
        """The canvas's regions a piece of a result changes (the spectrum view is redrawn at every draw)."""
        return {"mean": self.mean_plot.data_parts, "histogram": self.hist_plot.data_parts}.get(name, ())

    def _changed(self, *regions) -> None:
        """``regions`` of the canvas show something new: redraw them (and the spectrum view) at the next draw."""
        for region in regions:
            self.canvas.invalidate(region)
        self.canvas.update()

    def _drawn(self, event=None) -> None:
        self._draws += 1
        if self._pending and not self._piece_queued:   # the next piece after this draw, once the loop has run
            self._piece_queued = True
            QtCore.QTimer.singleShot(0, self._piece_after_draw)

    def _piece_after_draw(self) -> None:
        self._piece_queued = False
        if self._draws > self._piece_draw:     # not if no draw came since the last piece (it will come)
            self._next_piece()

    def _show_view(self, job: SpectrumJob, result: SpectrumResult) -> None:
        self._finish_view()           # mostly done while the job computed
        view = self._spectrum_view
        if result.image is not None:
            view.show_image(result.image)
            return
        view.volume = result.volume
        view.iso = self._shown_iso = result.iso
        view.show_mesh(result.mesh, result.factor)
        if result.iso != self.iso_value():    # the slider moved while the job ran
            self._apply_iso(self.iso_value())

    def _caption_for(self, job: SpectrumJob, result: SpectrumResult) -> str:
        self._finish_view()
        if result.image is not None:
            return f"|FFT| of {job.field_name}, k = 0 at the centre"
        return _iso_caption(job.field_name, self._spectrum_view)

    def _set_caption(self, text: str) -> None:
        if self.caption.text != text:   # a new text is laid out and uploaded again at the next draw
            self.caption.text = text
            self.canvas.invalidate(self.caption)

    def _set_info(self, text: str) -> None:
        if self.info.text() != text:
            self.info.setText(text)

    # ==== preparing the hidden dock ==============================================================
    def _prepare_tick(self) -> None:
        """While the dock is hidden, in the window shown: prepare it for the model's dimension, a slice of
        steps per tick, in the ticks the host window does not hold it (``hold_preparation``). Once shown, a
        preparation left unfinished is dropped (its draws are real ones now)."""
        if self.on_screen() or not self._window_shown():
            self._prepare_iter = None
            return
        if self.hold_preparation() or self._view_steps is not None:
            return                   # later, where its steps do not add to a switch's frames
        if self._prepare_iter is None:
            model = self._model()
            if model is None or (self._spectrum_ndim == len(model.shape) and self.prepared_steps):
                return
            self._prepare_iter = with_font_manager(self._prepare_steps(len(model.shape)), self._fonts)
        start = time.perf_counter()
        took = None          # at least one step, then as the window's staging does
        while self._prepare_iter is not None and (took is None
                                                  or another_step_fits(start, took, PREPARE_SLICE_S)):
            step_start = time.perf_counter()
            try:
                what = next(self._prepare_iter)
            except StopIteration:
                self._prepare_iter = None
                break
            except Exception as exc:   # the first show does what is left; nothing is lost
                log.warning("preparing the spectrum dock failed: %s: %s", type(exc).__name__, exc)
                self._prepare_iter = None
                self.prepared_steps.append("failed")
                break
            self.prepared_steps.append(str(what))
            took = time.perf_counter() - step_start

    def _window_shown(self) -> bool:
        top = self.parentWidget()
        return top is not None and top.isVisible()

    def _prepare_steps(self, ndim: int):
        """The steps preparing the hidden dock for a model of ``ndim`` dimensions: the glyphs of its text, the
        spectrum view for ``ndim``, when the canvas has a GL context a first (offscreen) draw of each visual, and
        the size its tab will give it."""
        canvas = self.canvas
        native = canvas.native
        if not hasattr(native, "grabFramebuffer"):
            return
        if not self.prepared_steps:
            # No GL context is made for the hidden canvas here (as app/analysis_dock.py's grab does): measured
            # with bench responsiveness, a grabbed hidden canvas made every frame of the window some 13 ms slower
            # on llvmpipe (Swendsen-Wang 2D L=256: 20 steps in 5 s instead of 70). Its visuals are drawn once
            # offscreen only when it has a context already (it was shown before).
            yield from glyph_steps(self._fonts)    # into the font's atlas now, not at a draw
        if self._spectrum_ndim != ndim:
            for piece in self._dimension_steps(ndim):
                yield f"{ndim}D {piece}"
            yield f"{ndim}D view"
        if native.isValid():
            for drawn in warm_up_steps(canvas, canvas.scene):
                yield f"drew {drawn}"
        # last, the size its tab will give it and the canvas laid out at that size: raised, the dock was resized
        # first (its canvas's resize and paint: 8-17 ms of the gap that showed it, bench responsiveness traced)
        for what in sized_steps(self, canvas):
            yield f"sized: {what}"

    # ==== iso value =============================================================================
    def iso_value(self) -> float:
        return self.iso_slider.value() / ISO_STEPS

    def _iso_moved(self, _position: int) -> None:
        iso = self.iso_value()
        self.iso_label.setText(f"iso {iso:.3f}")
        if isinstance(self._spectrum_view, SpectrumIsoView):
            self._apply_iso(iso)

    def _apply_iso(self, iso: float) -> None:
        """Mesh the 3D spectrum at ``iso``: at once for a small one; a large host one on the worker (the process),
        one mesh at a time, the latest value when it is done. Until then the view shows the last mesh."""
        view = self._spectrum_view
        volume = view.volume
        if isinstance(volume, np.ndarray) and volume.size > SYNC_REMESH_CELLS:
            view.iso = iso
            if self._meshing is None:
                self._start_mesh(volume, iso)
            return
        try:
            view.set_iso(iso)
            self._shown_iso = iso
            self._set_caption(_iso_caption(self._field_name, view))
        except Exception as exc:
            self.last_error = f"iso-surface failed: {type(exc).__name__}: {exc}"
            log.exception("iso surface")
            self.info.setText(self.last_error)
        self.canvas.update()

    def _start_mesh(self, volume, iso: float) -> None:
        view = self._spectrum_view
        self._meshing = (volume, iso)
        future = self._mesh_executor.submit(remesh, volume, iso, view.method, view.max_faces)

        def deliver(done, key=self._meshing):
            try:
                self._mesh_delivery.done.emit((key, done))
            except RuntimeError:   # the panel is gone
                pass

        future.add_done_callback(deliver)

    def _mesh_delivered(self, payload) -> None:
        (volume, iso), future = payload
        self._meshing = None
        view = self._spectrum_view
        if not isinstance(view, SpectrumIsoView) or view.volume is None:
            return
        if view.volume is not volume:   # another spectrum meanwhile, shown with the mesh of its job's iso value
            if self._shown_iso != view.iso:
                self._start_mesh(view.volume, view.iso)
            return
        try:
            mesh, factor = future.result()
        except Exception as exc:
            self.last_error = f"iso-surface failed: {type(exc).__name__}: {exc}"
            log.error("iso surface", exc_info=exc)
            self.info.setText(self.last_error)
            return
        if view.iso != iso:        # the slider moved on: mesh its latest value
            self._start_mesh(volume, view.iso)
            return
        view.show_mesh(mesh, factor)
        self._shown_iso = iso
        self._set_caption(_iso_caption(self._field_name, view))
        self.canvas.update()

    # ==== export ================================================================================
    def record(self) -> spectral.SpectrumRecord:
        if self.accumulator.count == 0:
            raise ValueError("no spectrum yet: let the model run a step first")
        model = self._model()
        meta = {}
        if model is not None:
            meta = {"model": model.name, "field": main_field(model)[0], **model.params.model_dump(),
                    "step_count": model.step_count}
            if len(model.shape) == 3:
                meta["iso"] = self.iso_value()          # the surface the view shows (the iso-vtu export)
        return self.accumulator.record(**meta)

    def export(self, kind: str, path, confirm: bool = True) -> Path | None:
        """Write the current (averaged) spectrum. An existing file is replaced only after a yes to the
        question (interactive), otherwise a free name beside it is used; returns the path written."""
        if kind not in EXPORTS:
            raise ValueError(f"kind must be one of {', '.join(EXPORTS)}; got {kind!r}")
        path = Path(path)
        suffix = EXPORTS[kind][1]
        if path.suffix.lower() != suffix:
            path = path.with_name(path.name + suffix)
        overwrite = False
        if path.exists():
            if confirm and self.interactive:
                if not confirm_replace(self, path):
                    return None
                overwrite = True
            else:
                path = free_path(path)
        try:
            written = spectral.export(self.record(), path, kind, overwrite=overwrite)
        except (OSError, ValueError) as exc:
            self.last_error = f"export failed: {exc}"
            self.info.setText(self.last_error)
            if self.interactive:
                QtWidgets.QMessageBox.warning(self, "Export failed", str(exc))
            return None
        if self.prefs is not None:
            self.prefs.set(FOLDER_KEY, str(written.parent.resolve()))
        self.info.setText(f"saved {written}")
        return written


    def export_dialog(self, kind: str) -> None:
        text, suffix, _ = EXPORTS[kind]
        folder = (self.prefs.get(FOLDER_KEY) if self.prefs is not None else None) or str(Path.cwd())
        name = f"spectrum-{kind}{suffix}"
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, f"Save {text}", str(Path(folder) / name), text,
            options=QtWidgets.QFileDialog.Option.DontConfirmOverwrite)  # we ask ourselves, once
        if path:
            self.export(kind, path, confirm=True)


def install(window, area=QtCore.Qt.DockWidgetArea.RightDockWidgetArea) -> SpectralPanel:
    """Add the panel to a main window that has a ``model`` attribute (the one-line hook).

    With a live-plot dock present the panel becomes a tab beside it, so the lattice view keeps its
    space; the panel only computes while its tab is shown.
    """
    panel = SpectralPanel(lambda: window.model, parent=window, prefs=getattr(window, "prefs", None),
                          interactive=getattr(window, "interactive", True), access=ModelAccess(window),
                          status_bar=window.statusBar())
    if hasattr(window, "settling"):
        panel.hold_preparation = window.settling
    window.addDockWidget(area, panel)
    plots = getattr(window, "plot_dock", None)
    if isinstance(plots, QtWidgets.QDockWidget):
        window.tabifyDockWidget(plots, panel)
        plots.raise_()
    window.spectral_panel = panel
    return panel
