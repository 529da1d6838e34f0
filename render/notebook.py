"""latticelab in Jupyter (issue 43): the live field view, the parameter controls and the live plots of a
``Simulation`` (sim/session.py) in a notebook, drawn by the same VisPy views as the window (render/field_view.py,
render/plots.py) through VisPy's jupyter_rfb backend: the kernel renders off screen and sends the frames to the
browser as images, so a JupyterLab on a remote GPU server shows them in the local browser (docs/notebooks.md).
No Qt here; the widgets are ipywidgets made from the model's schema (render/notebook_controls.py).

``latticelab.open(...)`` returns a ``NotebookSimulation``. ``sim.show()`` returns a widget (display it, or
let the cell show it): the view, a Run/Pause button, Reset, the controls and a status line; while running, a
VisPy timer on the kernel's event loop advances the simulation by as many steps as fit in a frame's time budget
and draws the new picture. ``sim.plots()`` shows the observables' live plots the same way.
"""
from __future__ import annotations

import time

from latticelab.render import palette
from latticelab.sim.output.extras import require
from latticelab.sim.session import Simulation

FRAME_S = 1 / 30            # the timer's interval
STEP_BUDGET_S = 0.02        # simulation time per frame


def notebook_libraries():
    """(ipywidgets, vispy.scene) with VisPy on its jupyter_rfb backend; MissingExtra naming the extra."""
    require("the notebook view", "jupyter_rfb", "ipywidgets", extra="notebook")
    import ipywidgets
    from vispy import scene
    choose_offscreen_context()
    return ipywidgets, scene


def choose_offscreen_context() -> None:
    """jupyter_rfb renders in an off-screen OpenGL context, which VisPy makes with glfw or its default
    application backend. On a server without a display (no DISPLAY or WAYLAND_DISPLAY) that must be EGL (the
    NVIDIA driver provides it): a Qt backend would end the kernel trying to reach a display. Raises
    RuntimeError saying what to do when neither glfw nor EGL can be used there."""
    import importlib.util
    import os
    import sys
    if sys.platform in ("darwin", "win32") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    if importlib.util.find_spec("glfw") is not None:
        return
    import vispy
    try:
        from vispy.app.backends import _egl
        usable = bool(_egl.available)
    except Exception:
        usable = False
    if not usable:
        raise RuntimeError("the notebook view needs an OpenGL context: this machine has no display and no usable "
                           "EGL; run the kernel with a GPU driver that provides EGL, or under xvfb-run")
    vispy.config["default_backend"] = "egl"


class LiveView:
    """A FieldView on a jupyter_rfb canvas, stepped by a VisPy timer: the notebook's counterpart of the
    window's central view."""

    def __init__(self, sim: Simulation, size=(600, 600), budget_s: float = STEP_BUDGET_S):
        widgets, scene = notebook_libraries()
        from vispy import app as vispy_app
        from latticelab.render.field_view import FieldView
        from latticelab.render.notebook_controls import ParameterControls
        self.sim, self.budget_s = sim, budget_s
        self.canvas = scene.SceneCanvas(app="jupyter_rfb", size=size, bgcolor=palette.BACKGROUND, keys=None)
        self.view = FieldView(self.canvas.central_widget.add_view())
        self.view.show(sim.runner.picture())
        self.running = False
        self.frames = 0
        self._started = time.perf_counter()
        self.status = widgets.HTML("")
        self.run_button = widgets.ToggleButton(value=False, description="Run", icon="play")
        self.run_button.observe(lambda change: self.set_running(change["new"]), names="value")
        reset = widgets.Button(description="Reset", icon="refresh")
        reset.on_click(lambda _button: self.reset())
        self.controls = ParameterControls(widgets, type(sim.params), sim.params.model_dump(), self.apply)
        self.timer = vispy_app.Timer(interval=FRAME_S, connect=self._frame, app=self.canvas.app, start=False)
        self.widget = widgets.HBox([widgets.VBox([self.canvas.native, widgets.HBox([self.run_button, reset]),
                                                  self.status]), self.controls.box])
        self._say()

    def apply(self, name: str, value) -> None:
        self.sim.set(**{name: value})
        self.controls.show_values(self.sim.params.model_dump())
        self.redraw()

    def reset(self) -> None:
        self.sim.reset()
        self.redraw()

    def set_running(self, running: bool) -> None:
        self.running = bool(running)
        self.run_button.description, self.run_button.icon = ("Pause", "pause") if running else ("Run", "play")
        if running:
            self.frames, self._started = 0, time.perf_counter()
            self.timer.start()
        else:
            self.timer.stop()

    def step_frame(self) -> int:
        """One frame: the steps that fit in the budget, then the new picture. Returns the steps taken."""
        self.view.before_step()
        steps = self.sim.runner.advance(10 ** 6, self.budget_s)
        self.redraw()
        self.frames += 1
        return steps

    def redraw(self) -> None:
        self.view.show(self.sim.runner.picture())
        self.canvas.update()
        self._say()

    def _frame(self, _event=None) -> None:
        if self.running:
            self.step_frame()

    def frames_per_second(self) -> float:
        """Frames stepped per second since Run (what the browser shows: ``browser_stats``)."""
        return self.frames / max(time.perf_counter() - self._started, 1e-9)

    def _say(self) -> None:
        model = self.sim.model
        obs = "  ".join(f"{k} {v:.4g}" for k, v in model.observables().items())
        rate = f"  {self.frames_per_second():.1f} frames/s" if self.running else ""
        self.status.value = f"<code>step {model.step_count}  {obs}{rate}</code>"

    def browser_stats(self) -> dict:
        """jupyter_rfb's own frame accounting: frames sent to and shown by the browser, and their rate."""
        return self.canvas.native.get_stats()


class LivePlotView:
    """The observables' live plots (render/plots.py) on a jupyter_rfb canvas, refreshed by a timer."""

    def __init__(self, sim: Simulation, size=(600, 480)):
        _widgets, scene = notebook_libraries()
        from vispy import app as vispy_app
        from latticelab.render.plots import LivePlots, series_for
        cls = type(sim.model)
        self.sim = sim
        self.canvas = scene.SceneCanvas(app="jupyter_rfb", size=size, bgcolor="white", keys=None)
        self.plots = LivePlots(self.canvas.central_widget, series_for(cls.declared_observables),
                               x_label=cls.time_label)
        self.timer = vispy_app.Timer(interval=0.25, connect=lambda _e: self.refresh(), app=self.canvas.app)
        self.widget = self.canvas.native
        self.refresh()

    def refresh(self) -> None:
        times, values = self.sim.history()
        self.plots.update(times, values)
        self.canvas.update()


class NotebookSimulation(Simulation):
    """A ``Simulation`` with a live view and live plots for Jupyter."""

    def show(self, size=(600, 600), budget_s: float = STEP_BUDGET_S):
        """The live view with its controls (an ipywidget); the simulation runs while Run is pressed."""
        self.live_view = LiveView(self, size, budget_s)
        return self.live_view.widget

    def plots(self, size=(600, 480)):
        """The live plots of the observables (an ipywidget), refreshed four times a second."""
        self.live_plots = LivePlotView(self, size)
        return self.live_plots.widget


def open(model: str = "ising", backend: str = "auto", **params) -> NotebookSimulation:   # noqa: A001
    """``latticelab.open("ising", L=1024)``: a simulation of a registered model for a notebook or a script."""
    return NotebookSimulation(model, backend, **params)
