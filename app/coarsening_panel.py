"""The Coarsening dock (issue 14): for models that declare a coarsening length (sim/model.py ``HasCoarsening``;
Cahn-Hilliard's 2 pi / k1), the length against simulated time on log-log axes with the guide line of the
declared law (Lifshitz-Slyozov, t^(1/3)) and the exponent fitted over the most recent decade of time; and, for
3D models with an interface (``HasInterface``), on a toggle, the iso-surface of the main field at the interface
level (phi = 0).

The length comes from the runner's observable history (``window.runner.history``), which keeps only the last
samples; the dock keeps its own record, thinned to evenly spaced points in log time, so the plot spans the
whole run. The interface is made by marching cubes on the CPU in a worker thread, at most one job in flight:
the field is copied on the GUI thread (the worker never touches the model) and the view shows the last finished
surface. Installed with one line: ``coarsening_panel.install(window)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PySide6 import QtWidgets

from latticelab.app.background import Background, Task
from latticelab.app.analysis_dock import (RIGHT, CapabilityDock, class_has, info_label, install_dock,
                                          labelled_steps, make_canvas, redraw)
from latticelab.render.interface_view import InterfaceView
from latticelab.render.signal_plots import CoarseningPlot
from latticelab.sim.analysis.marching_cubes import Mesh, marching_cubes
from latticelab.sim.backend import to_numpy
from latticelab.sim.model import HasCoarsening, HasInterface, main_field


REFRESH_MS = 300
POINTS_PER_DECADE = 200        # the record keeps a point when log10 t has moved on by 1/200 since the last
FIT_DECADES = 1.0


@dataclass(frozen=True)
class ExponentFit:
    """Least-squares slope of log length against log time over ``t0`` .. ``t1`` (``points`` samples)."""
    exponent: float
    t0: float
    t1: float
    points: int
    full: bool            # the samples reach back the whole span asked for (else: all there are so far)

    @property
    def decades(self) -> float:
        return math.log10(self.t1 / self.t0)


def coarsening_exponent(t, length, decades: float = FIT_DECADES) -> ExponentFit | None:
    """The growth exponent of ``length`` ~ t^n fitted over the most recent ``decades`` of time (or over all the
    samples when they span less); None with fewer than three usable samples (t > 0, length > 0)."""
    t, length = np.asarray(t, np.float64), np.asarray(length, np.float64)
    ok = (t > 0) & (length > 0) & np.isfinite(t) & np.isfinite(length)
    t, length = t[ok], length[ok]
    if t.size < 3:
        return None
    recent = t >= t.max() / 10.0 ** decades
    x, y = np.log10(t[recent]), np.log10(length[recent])
    if recent.sum() < 3 or np.ptp(x) <= 0:
        return None
    slope = np.polyfit(x, y, 1)[0]
    full = bool(t.min() <= t.max() / 10.0 ** decades)
    return ExponentFit(float(slope), float(t[recent].min()), float(t[recent].max()), int(recent.sum()), full)


class LogRecord:
    """(time, value) samples kept at most ``per_decade`` per decade of time; a time going back (a reset) starts
    it again."""

    def __init__(self, per_decade: int = POINTS_PER_DECADE):
        self.step = 1.0 / per_decade
        self.clear()

    def clear(self) -> None:
        self.t: list[float] = []
        self.value: list[float] = []
        self.last_seen = -math.inf

    def add(self, times, values) -> int:
        """Samples in time order; those not later than the last seen are skipped. Returns how many were kept."""
        kept = 0
        for t, v in zip(np.asarray(times, float), np.asarray(values, float)):
            if t < self.last_seen:
                self.clear()
            if t <= self.last_seen:
                continue
            self.last_seen = t
            if not (t > 0 and v > 0 and math.isfinite(v)):
                continue
            if self.t and math.log10(t) - math.log10(self.t[-1]) < self.step:
                continue
            self.t.append(float(t))
            self.value.append(float(v))
            kept += 1
        return kept

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array(self.t), np.array(self.value)


def interface_mesh(field: np.ndarray, level: float) -> Mesh:
    """The iso-surface of a host 3D field at ``level`` (marching cubes on the CPU; vertices in array order)."""
    # the NumPy path of the GPU algorithm: one vertex on each crossed grid edge (scikit-image's Lewiner variant adds
    # vertices inside some cubes), the same surface the CUDA kernels give
    return marching_cubes(np.asarray(field, np.float32), level, method="numpy")


class CoarseningPanel(CapabilityDock):
    WHAT = "coarsening"

    def __init__(self, window, refresh_ms: int = REFRESH_MS):
        super().__init__("Coarsening", "coarsening_dock", window)
        self.record = LogRecord()
        self.fit: ExponentFit | None = None
        self._history_version = None
        self.background = Background(self, "latticelab-interface")
        self._job: Task | None = None
        self._job_key = None          # (id(model), step_count) of the job in flight or last finished
        self._job_info = None         # (field name, level, step, host copy) of the job in flight
        self.job_field: np.ndarray | None = None   # the field the shown surface was made from
        self._start(refresh_ms, when_shown=self._draw_now)

    # ==== construction ==========================================================================
    def _build(self) -> None:
        layout = self._layout = self._body()
        self.canvas = None           # made when a model with a coarsening length first arrives (_plots)
        self.info = info_label("coarsening_info")
        layout.addWidget(self.info)
        self.interface_box = QtWidgets.QCheckBox("3D interface", objectName="interface_box")
        self.interface_box.setToolTip("The surface where the field crosses the interface level (3D models; made "
                                      "in the background, the last finished one is shown)")
        self.interface_box.toggled.connect(self._interface_toggled)
        layout.addWidget(self.interface_box)
        self.interface_canvas = None   # made when the interface is first asked for (_interface_canvas)
        self.interface_view: InterfaceView | None = None
        self.interface_info = QtWidgets.QLabel("", objectName="interface_info", wordWrap=True)
        layout.addWidget(self.interface_info)

    # ==== the model ============================================================================
    def applies_to(self, model_class) -> bool:
        return class_has(model_class, HasCoarsening, HasInterface)

    def _plot_steps(self):
        """The plot canvas, made once (``_plots``, or ahead: ``stage_for``): axes and text cost a second or more
        on software GL, which a window that never runs a coarsening model need not pay."""
        grid = yield from self._canvas_steps_into(self._layout, "coarsening_canvas", (420, 320), (280, 200))
        # a piece per step: title, axes, view, lines
        self.plot = yield from labelled_steps(CoarseningPlot.in_steps(grid, "length", 1 / 3), "length plot")

    def _make_interface_canvas(self) -> None:
        if self.interface_canvas is not None:
            return
        self.interface_canvas = make_canvas("interface_canvas", (420, 360), (280, 240),
                                            bgcolor=(0.05, 0.05, 0.07, 1.0))
        self.interface_view = InterfaceView(self.interface_canvas.central_widget.add_view())
        self._layout.insertWidget(self._layout.indexOf(self.interface_info), self.interface_canvas.native, 1)

    def _show_interface_canvas(self, on: bool) -> None:
        if on:
            self._make_interface_canvas()
        if self.interface_canvas is not None:
            self.interface_canvas.native.setVisible(on)

    def _set_available(self, model) -> None:
        self._show_for(isinstance(model, (HasCoarsening, HasInterface)))
        has_interface = isinstance(model, HasInterface) and len(model.shape) == 3
        self.interface_box.setEnabled(has_interface)
        if has_interface:
            self.interface_box.setText(f"3D interface ({main_field(model)[0]} = {model.interface_level:g})")
        self._show_interface_canvas(has_interface and self.interface_box.isChecked())

    def _take(self, model):
        if id(model) != self._identity:
            self._identity = id(model)
            self.record.clear()
            self._history_version = None
        self._take_history(model)
        self._start_interface(model)
        return self._history_version

    def _take_history(self, model) -> None:
        if not isinstance(model, HasCoarsening):
            return
        history = self.window.runner.history
        if history.version == self._history_version:
            return
        self._history_version = history.version
        times, values = history.arrays()
        name = model.coarsening.observable
        if name in values:
            self.record.add(times, values[name])

    def add_samples(self, times, lengths) -> None:
        """Samples from elsewhere (a saved run, a test), as the history would give them."""
        self.record.add(times, lengths)
        self._drawn = None

    def _draw(self, model) -> None:
        self._drawn = self._history_version
        if not isinstance(model, HasCoarsening):
            self.info.setText(f"{model.title}: no coarsening length declared")
            return
        c = model.coarsening
        label = next((o.label for o in model.declared_observables if o.name == c.observable), c.observable)
        law = f"{c.law} " if c.law else ""
        self.plot.exponent = c.exponent
        self.plot.title.text = f"{label}; guide: {law}t^{c.exponent:.3g}"
        t, length = self.record.arrays()
        self.plot.set_data(t, length)
        self.fit = coarsening_exponent(t, length)
        if self.fit is None:
            self.info.setText(f"{label}: waiting for samples at t > 0")
        else:
            f = self.fit
            span = "the last decade" if f.full else f"{f.decades:.2f} decades (all so far)"
            self.info.setText(f"fitted exponent {f.exponent:.3f} over {span}, t = {f.t0:.4g} to {f.t1:.4g} "
                              f"({f.points} points); {law}law: {c.exponent:.3f}")
        redraw(self.canvas)

    # ==== the 3D interface ======================================================================
    def _interface_toggled(self, on: bool) -> None:
        model = self._model()
        self._show_interface_canvas(on and isinstance(model, HasInterface) and len(model.shape) == 3)
        if on:
            self._job_key = None
            self.refresh(force=True)

    def _start_interface(self, model) -> None:
        """One marching-cubes job at a time, for a state not yet meshed."""
        if not (self.interface_box.isChecked() and isinstance(model, HasInterface) and len(model.shape) == 3):
            return
        key = (id(model), model.step_count, model.params)
        if self._job is not None or key == self._job_key:
            return
        if self.stepping():                          # copy after the worker's batch
            return
        name, field = main_field(model)
        host = np.array(to_numpy(field), np.float32)      # a copy: the worker never sees the model's arrays
        level = float(model.interface_level)
        self._job_key = key
        self._job_info = (name, level, model.step_count, host)
        self._job = self.background.run(lambda task: interface_mesh(host, level), self._show_interface,
                                        self._interface_failed, on_finished=self._interface_finished,
                                        what="interface")

    def _interface_finished(self, task) -> None:
        if self._job is task:
            self._job = None

    def _interface_failed(self, text: str) -> None:
        self.last_error = f"interface failed: {text}"
        self.interface_info.setText(self.last_error)

    def _show_interface(self, mesh) -> None:
        name, level, step, host = self._job_info
        self.job_field = host
        self._make_interface_canvas()
        self.interface_view.show_mesh(mesh, host.shape)
        self.interface_info.setText(f"{name} = {level:g} at step {step:,}: {mesh.n_faces:,} triangles"
                                    if mesh.n_faces else f"no {name} = {level:g} surface at step {step:,}")
        self.interface_canvas.update()

    @property
    def interface_busy(self) -> bool:
        return self._job is not None

    def shutdown(self) -> None:
        super().shutdown()
        self.background.shutdown()


def install(window, area=RIGHT) -> CoarseningPanel:
    """Add the dock to a main window (``model``, ``runner``); a tab beside the live plots, shown only for models
    that declare a coarsening length or an interface."""
    return install_dock(window, CoarseningPanel(window), "coarsening_panel", area)
