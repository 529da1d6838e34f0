"""A dock with the spectral views (thesis 003, section 7.4) of the models that have a main field (the first of
``model.fields()``): its FFT magnitude -- a greyscale image in 2D, iso-surfaces with an iso slider in 3D
(app/spectral_iso.py) -- its spherical mean, the cluster-size histogram of models that have clusters
(sim/model.py: HasClusters), averaging over steps, and CSV/NPZ/VTU export (app/spectral_export.py).

A capability dock (app/analysis_dock.py ``CapabilityDock``): shown for a model with a main field, hidden for one
without. It pulls from the window's model on its own timer (a few times a second, only while on screen), notices
on its own when the model or its parameters change, restarts the average and redraws.

The work runs off the GUI thread (a 3D L=128 Ising update took 1.75 s, most of it cluster labelling): on the GUI
thread the dock only copies the state (``frozen_copy``: the model's field arrays copied where they live, the rest
shared; and for cluster sizes of a NumPy model its save/resume state), then its ``Background`` worker
(app/background.py) runs the job (``compute``: the spectrum, its spherical mean, the image or iso-surface mesh and
the cluster histogram) and delivers the result on the GUI thread, which only draws it. For a NumPy model the worker
hands the job to a worker process (app/spectral_jobs.py), because cluster labelling and marching cubes hold
Python's GIL for up to 0.3 s each and would stall the event loop from a thread (issue 16). One job at most is in
flight; while one runs the timer's ticks are skipped and the status bar says "computing spectrum...". The
accumulator of the average is replaced, never changed in place, so an export on the GUI thread never sees a
half-added spectrum, and a result computed for an older model, parameters or average is dropped. ``refresh()``
(scripts, tests) runs the same job and waits for it.

A result is shown a piece per draw (app/spectral_pieces.py), and the hidden dock is prepared for its first show a
step per tick (app/spectral_preparing.py). Drawing stays cheap on a software OpenGL renderer (Mesa llvmpipe, no
GPU): there the 3D mesh is kept under ``SOFTWARE_GL_FACES`` faces and drawn a slice at a time.
"""
from __future__ import annotations

import collections
import logging

import numpy as np
from PySide6 import QtCore, QtWidgets
from vispy import scene

from latticelab.app.analysis_dock import CapabilityDock, info_label, install_dock, make_canvas
from latticelab.app.background import Background, Task
from latticelab.app.dock_host import RIGHT, DockHost
from latticelab.app.spectral_export import EXPORTS, SpectrumExports
from latticelab.app.spectral_iso import ISO_STEPS, IsoSurfaceMeshing
from latticelab.app.spectral_jobs import SpectrumJob, compute, frozen_copy
from latticelab.app.spectral_pieces import SpectrumPieces
from latticelab.app.spectral_preparing import PREPARE_MS, HiddenPreparation
from latticelab.render.gl_renderer import current_is_software
from latticelab.render.isosurface import SpectrumIsoView
from latticelab.render.spectral import TEXT, ClusterHistogramPlot, SphericalMeanPlot
from latticelab.sim.analysis import spectral
from latticelab.sim.model import HasClusters
from latticelab.sim.state import state_of

log = logging.getLogger(__name__)

REFRESH_MS = 300
BUSY_TEXT = "computing spectrum..."
BUSY_AFTER_MS = 200              # say so only for jobs that last longer than this (no flicker for quick ones)
CPU_CLUSTER_LIMIT = 1 << 21      # sites: above this, cluster sizes on the CPU are left to the user to ask
SOFTWARE_GL_FACES = 20_000       # a software renderer's mesh budget (some 60 ms a draw with Mesa llvmpipe, 2 cores)
STAGE_FACES = 4_000              # faces drawn a slice there (about 2.7 us a face: 11 ms), render/isosurface.py
USE_PROCESS = True               # jobs of NumPy models in the worker process (False: on the worker thread)


class SpectralPanel(SpectrumPieces, HiddenPreparation, IsoSurfaceMeshing, SpectrumExports, CapabilityDock):
    """Spectral views of the window's model (its main field)."""
    WHAT = "spectrum"

    def __init__(self, window: DockHost, refresh_ms: int = REFRESH_MS):
        super().__init__("Spectrum", "spectral_dock", window)
        self.prefs = window.prefs
        self.interactive = window.interactive
        self.status_bar = window.statusBar()    # told while a job takes long
        self.accumulator = spectral.SpectrumAccumulator()
        self.magnitude = None
        self.jobs_started = 0
        self._shown_step = None
        self._spectrum_view = None
        self._field_name = "field"
        self._job: SpectrumJob | None = None
        self._task: Task | None = None
        self.background = Background(self, "spectrum")
        # new iso values of a large spectrum are meshed off the GUI thread, one at a time, the latest wins
        self.mesh_background = Background(self, "iso-mesh")
        self._meshing = None          # (volume, iso) of the mesh being made, or None
        self._shown_iso = None        # the iso value of the mesh shown
        self.software_gl: bool | None = None   # known at the canvas's first draw
        self._spectrum_ndim = None
        self._view_steps = None       # the steps left making the view for a new dimension while on screen
        self._pending: dict = {}      # the pieces of the last result not shown yet: name -> what shows it
        self.pieces_shown = collections.deque(maxlen=64)   # (draw number, piece), for tests and benchmarks
        self._draws = 0               # draws of the canvas so far
        self._piece_draw = -1         # the draw count when the last piece was shown
        self._piece_queued = False
        self._prepare_iter = None     # the steps preparing the hidden dock, while some are left
        self.prepared_steps = collections.deque(maxlen=256)   # what they did, for tests and benchmarks
        # its body, every text of the canvas through one font manager (each glyph rendered once); a job requested
        # each time the dock is shown; no refresh timer of the base class: ``refresh`` here waits for its job
        self._start(refresh_ms=None, when_shown=lambda: self.request(force=True))
        self.canvas.events.draw.connect(self._learn_renderer, position="first")
        self.canvas.events.draw.connect(self._after_draw, position="last")
        self.timer = QtCore.QTimer(self, interval=refresh_ms)
        self.timer.timeout.connect(lambda: self.request())
        self.timer.start()
        self.prepare_timer = QtCore.QTimer(self, interval=PREPARE_MS)
        self.prepare_timer.timeout.connect(self._prepare_tick)
        self.prepare_timer.start()

    def busy(self) -> bool:
        """Whether the window's stepping worker writes the model's arrays now (no copy is taken then, and the
        request is made again right after its batch)."""
        return self.access.busy()

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
    @staticmethod
    def identity(model) -> tuple:
        """What, when changed, makes earlier spectra incomparable (restarts the average)."""
        return (id(model), tuple(model.shape), model.params)

    def reset_average(self) -> None:
        self.accumulator = spectral.SpectrumAccumulator()   # a new object: a job in flight adds to the old one
        self._shown_step = None
        self.request(force=True)

    # ==== updates ===============================================================================
    @property
    def computing(self) -> bool:
        """Whether a job is in flight."""
        return self._job is not None

    def request(self, force: bool = False) -> bool:
        """Start a job when the model moved on (or when forced) and the panel is on screen; never more than one
        in flight, never waiting: the GUI thread only copies the state. Returns whether a job started. Shows or
        hides the dock first, with what the model has (``_set_available``)."""
        if self._job is not None:
            return False
        job = self._make_job(force)
        if job is None:
            return False
        self._start_job(job)
        return True

    def refresh(self, force: bool = False) -> bool:
        """``request`` and wait for the result (scripts and tests; the timer never waits). A job already in
        flight is finished first. Returns whether a new spectrum is shown."""
        if self._job is not None:
            self._finish(self._job, self._task, at_once=True)
        job = self._make_job(force)
        if job is None:
            return False
        task = self._start_job(job)
        return self._finish(job, task, at_once=True)

    def _offer_what_applies(self, model) -> None:
        """Only the controls that apply to ``model``: the iso slider for a 3D field, cluster sizes for a model
        that has clusters (they were offered for 2D Cahn-Hilliard and the cortex, issue 41)."""
        self.iso_row.setVisible(len(model.shape) == 3)
        self.clusters_box.setVisible(isinstance(model, HasClusters))

    def _make_job(self, force: bool) -> SpectrumJob | None:
        """On the GUI thread: copy what the worker needs, or None when there is nothing to do."""
        model = self._model()
        if model is None:
            return None
        self._set_available(model)
        if not self.available or not self.on_screen():
            return None
        if self.busy():
            self.access.retry(lambda: self._job is None and self.request(force))
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

    def _start_job(self, job: SpectrumJob):
        self._job = job
        self.jobs_started += 1
        self._task = self.background.run(lambda task: compute(job),
                                         on_finished=lambda task, job=job: self._delivered((job, task)))
        QtCore.QTimer.singleShot(BUSY_AFTER_MS, lambda job=job: self._say_busy(job))
        return self._task

    def _say_busy(self, job) -> None:
        if self._job is job and self.status_bar is not None:
            self.status_bar.showMessage(BUSY_TEXT)
        if self._job is job:
            self.info.setText(f"{BUSY_TEXT} (step {job.step})")

    def _delivered(self, payload) -> None:
        job, task = payload
        if job is self._job:      # not already taken by a waiting ``refresh``
            self._finish(job, task)

    def _finish(self, job: SpectrumJob, task: Task, at_once: bool = False) -> bool:
        """On the GUI thread: draw the job's result (waiting for it if need be) unless it is out of date."""
        try:
            result = task.result()
            error = None
        except Exception as exc:
            result, error = None, exc
        self._job = self._task = None
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

    # ==== what the dock shares with the other capability docks ========================================
    def applies_to(self, model_class) -> bool:
        """A model with fields: the spectrum is of its main field (sim/model.py ``main_field``)."""
        return callable(getattr(model_class, "fields", None))

    def _set_available(self, model) -> None:
        available = self.applies_to(type(model))
        if available and not self.available and self.isVisible():
            # shown already (by a restored layout, a script or the user): nothing to place, the plots are made
            self.available = True
            self._plots()
            return
        self._show_for(available)

    def _plot_steps(self):
        """The canvas and its plots are made with the dock (``_build``); the view for the model's dimension by the
        hidden dock's preparation (``_prepare_steps``) or while its first job computes (``_begin_dimension``)."""
        yield "made with the dock"

    def _warm_steps(self):
        """None here: the hidden dock's preparation draws each visual once offscreen when the canvas has a GL
        context (``_prepare_steps``), and makes none for it."""
        return iter(())

    def _draw_now(self) -> None:
        """The canvas shown after the dock (``_canvas_after_dock``): a job for it (never waited for here)."""
        self.request(force=True)

    def shutdown(self) -> None:
        super().shutdown()
        self.prepare_timer.stop()
        self.background.shutdown()
        self.mesh_background.shutdown()


def install(window: DockHost, area=RIGHT) -> SpectralPanel:
    """Add the Spectrum dock to the window: a tab beside the live plots, shown for the models it applies to; it
    only computes while its tab is on screen."""
    return install_dock(window, SpectralPanel(window), "spectral_panel", area)
