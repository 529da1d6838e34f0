"""The main window, for any registered model: the field view in the centre, the controls (a form generated from
the model's schema) and live plots of its declared observables in docks, and the docks and menus that plug in
(app/dock_host.py: what the window offers them).

The window wires collaborators with one job each: the frame loop (app/frame_loop.py: pacing, the stepping
worker, the picture and the plots refreshed), the model lifecycle (app/model_lifecycle.py: parameters, resets,
switches, new models built on a worker and what is made ahead for them), the status bar (app/status_bar.py), the
file actions (app/file_actions.py: screenshots, save and load) and the actions and menus
(app/window_actions.py). Nothing blocks the event loop for longer than one frame.
"""
from __future__ import annotations

import logging
import sys

from PySide6 import QtCore, QtWidgets
from vispy import scene

from latticelab.app import cell_readout, coarsening_panel, colour_key, graph_panel, help_menu, input_keys, log_panel
from latticelab.app import tab_labels
from latticelab.app import recording, signal_panel, spectral_panel, study_panel, undo, view_menu
from latticelab.app.analysis_dock import AnalysisDock, DockPlacements, place_dock
from latticelab.app.canvas_paints import draw_only_when_changed
from latticelab.app.dock_canvas import paint_only_when_shown
from latticelab.app.controls import ControlsPanel
from latticelab.app.dock_host import RIGHT
from latticelab.app.file_actions import FileActions, default_export_name
from latticelab.app.frame_loop import FrameLoop
from latticelab.app.kernel_cache import device_identity, start_in_background
from latticelab.app.model_lifecycle import ModelLifecycle
from latticelab.app.qt_compat import protect_singletons, share_gl_contexts
from latticelab.app.settings import Preferences, default_steps_per_frame
from latticelab.app.status_bar import StatusBar
from latticelab.app.window_actions import build_actions, make_action, model_help, show_model_choice, show_running
from latticelab.render import palette
from latticelab.render.cached_canvas import RegionCachedCanvas
from latticelab.render.field_view import FieldView
from latticelab.sim.backend import initialise_gpu_libraries, select_backend
from latticelab.sim.params import ModelParams
from latticelab.sim.runner import Runner

log = logging.getLogger(__name__)

PLOT_DRAW_BUDGET_S = 0.006   # a paint draws this much of a plots refresh (at least one part)
# the live plots' history keeps at most this many samples of a frame's steps (sim/runner.py thin): with Steps / frame
# auto a CUDA frame takes hundreds of sweeps of a large lattice, and a history of 1000 samples would cover few frames
PLOT_SAMPLES_PER_FRAME = 4


class MainWindow(QtWidgets.QMainWindow):
    modelChanged = QtCore.Signal()    # another model is shown (a switch, a rebuild, a reset, a loaded state)

    def __init__(self, model: str, parameters: ModelParams | dict | None = None,
                 preferences: Preferences | None = None, interactive: bool = True, backend: str = "auto",
                 devices=None):
        protect_singletons()
        if not share_gl_contexts():
            log.warning("the QApplication was made without Qt.AA_ShareOpenGLContexts: a dock holding a canvas "
                        "cannot be floated or moved safely (app/qt_compat.py: share_gl_contexts)")
        super().__init__()
        self.prefs = preferences or Preferences(None)
        self.interactive = interactive   # False: scripted runs never open dialogs
        self.runner = Runner(model, parameters, backend=backend, samples_per_batch=PLOT_SAMPLES_PER_FRAME,
                             devices=devices)
        if self.runner.model.backend_name == "cuda":
            self._start_gpu_libraries(select_backend(backend).xp)   # CuPy (a model split over devices: host arrays)
        self.last_message = ""
        self.last_error = ""
        self.steps_per_frame = 1
        self.adaptive = True
        self.running = False
        # On a device: ask Qt to paint the finished picture at once, before queueing the next steps (frame loop);
        # off: the steps are queued first and the picture is painted in the event loop while they run
        self.paint_before_steps = False
        self.background_builds = None        # None: when the model is large (or on CUDA); True/False: always/never
        # The other registered models' forms and plots made ahead while the window is idle, a slice per frame as
        # for a switch: on by default in the application; off in scripted windows (tests count what a switch
        # stages) unless set
        self.stage_ahead = interactive
        self.settle_after_swap_s = None      # seconds ``settling`` lasts after a swap (None: by backend)
        self.collector = None                # app/collector.py: when full collections may run (set at start-up)
        self._steps_picked = True            # Steps / frame picked by the user (set from the settings)
        self.dock_placements = DockPlacements()   # when a dock of the window last appeared or went
        self.log_panel = None                # the Messages dock, once made

        self.frames = FrameLoop(self)
        self.lifecycle = ModelLifecycle(self)
        self.files = FileActions(self)
        self.timer, self.stepper = self.frames.timer, self.frames.stepper
        self.pacer, self.plot_pacer = self.frames.pacer, self.frames.plot_pacer
        self.preparer, self.staging = self.lifecycle.preparer, self.lifecycle.staging
        self._build_canvases()
        self._build_controls()
        build_actions(self)
        self.status = StatusBar(self)
        self.status_labels = self.status.labels
        self._install_docks()
        self._restore_preferences()
        self.lifecycle.after_model_change()
        self.set_running(True)

    def _start_gpu_libraries(self, xp) -> None:
        # loaded here, not first by a model's build on a worker thread, where loading them blocked this thread's
        # texture writes (sim/backend.py)
        log.info("CUDA libraries initialised: %s", ", ".join(initialise_gpu_libraries(xp)))
        # the other models' kernels compiled by a process of its own, once per installation and GPU, so that a
        # first switch to them does not compile and load them beside this thread (app/kernel_cache.py)
        try:
            start_in_background(device_identity(xp))
        except Exception as exc:      # a convenience: the window works without it
            log.warning("GPU kernels not prepared in the background: %s: %s", type(exc).__name__, exc)

    # ==== construction ==========================================================================
    def _build_canvases(self) -> None:
        self.lattice_canvas = scene.SceneCanvas(keys=None, app="pyside6", bgcolor=palette.BACKGROUND,
                                                size=(720, 720), show=False)
        self.lattice_canvas.native.setObjectName("lattice_canvas")
        self.lattice_canvas.native.setMinimumSize(240, 240)
        self.lattice_canvas.native.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)
        self.field_view = FieldView(self.lattice_canvas.central_widget.add_view())
        self.lattice_canvas.events.draw.connect(self.frames.count_frame, position="last")
        draw_only_when_changed(self.lattice_canvas)   # Qt's own paints of the unchanged view draw nothing
        self.setCentralWidget(self.lattice_canvas.native)

        # the plots' picture is cached (render/cached_canvas.py): a refresh redraws only the parts that changed
        # (plot areas, titles, axes), a budget's worth per paint, so no paint pays for all of them: while the
        # frame loop runs, a few with each frame; paused, a paint a pass of the event loop until done
        self.plot_canvas = RegionCachedCanvas(keys=None, app="pyside6", bgcolor=(0.08, 0.08, 0.1, 1.0),
                                              size=(380, 640), show=False, budget_s=PLOT_DRAW_BUDGET_S)
        self.plot_canvas.events.draw.connect(self.frames.plots_paint_starts, position="first")
        self.plot_canvas.events.draw.connect(self.frames.plots_drawn, position="last")
        self.plot_canvas.native.setObjectName("plot_canvas")
        self.plot_canvas.native.setMinimumSize(260, 300)
        # behind another tab of its group it is not painted; its paint requests wait until it is in front again
        paint_only_when_shown(self.plot_canvas)
        self.plot_dock = QtWidgets.QDockWidget("Live plots", self, objectName="plot_dock")
        self.plot_dock.setWidget(self.plot_canvas.native)
        self.addDockWidget(RIGHT, self.plot_dock)
        self.plot_dock.visibilityChanged.connect(   # shown again: catch up at once (hidden, nothing was drawn)
            lambda visible: visible and QtCore.QTimer.singleShot(0, self, self.frames.update_plots))

    def _build_controls(self) -> None:
        self.controls = ControlsPanel()
        scroll = QtWidgets.QScrollArea(widgetResizable=True)
        scroll.setWidget(self.controls)
        scroll.setMinimumWidth(self.controls.sizeHint().width() + 24)
        self.control_dock = QtWidgets.QDockWidget("Controls", self, objectName="control_dock")
        self.control_dock.setWidget(scroll)
        self.addDockWidget(QtCore.Qt.DockWidgetArea.LeftDockWidgetArea, self.control_dock)
        c = self.controls
        c.parameterEdited.connect(self.set_parameter)
        c.resetRequested.connect(self.reset)
        c.viewChanged.connect(self.apply_view_options)
        c.stepsPerFrameChanged.connect(self._set_steps_per_frame)
        c.adaptive.toggled.connect(self._set_adaptive)

    def _set_steps_per_frame(self, n: int) -> None:
        self.steps_per_frame = n
        self._steps_picked = n != self._default_pace()    # the default picked again: it follows the model again

    def _default_pace(self) -> int:
        return default_steps_per_frame(self.model.backend_name, type(self.model))

    def follow_pace(self) -> None:
        """Steps / frame not picked by the user: the new model's default (sim/model.py ``cpu_pace``)."""
        if self._steps_picked:
            return
        pace = self._default_pace()
        if pace != self.steps_per_frame:
            self.controls.set_steps_per_frame(pace)
            self.steps_per_frame = pace

    def _set_adaptive(self, on: bool) -> None:
        self.adaptive = on

    def _install_docks(self) -> None:
        self.spectral_panel = spectral_panel.install(self)   # spectrum dock, a tab beside the live plots
        self.graph_panel = graph_panel.install(self)         # the model's graph measured, for HasGraph models
        self.recording = recording.install(self)             # File menu: plot data, plots as PNG, movie recording
        self.signal_panel = signal_panel.install(self)       # EEG, periodogram, picked cell, for HasSignal
        self.coarsening_panel = coarsening_panel.install(self)   # length vs t, 3D interface
        self.study_panel = study_panel.install(self)         # T_c studies run in the background
        self.log_panel = log_panel.install(self)             # Messages dock: every message, with time and level
        self.undo_history = undo.install(self)               # Edit menu: undo/redo of parameter changes
        history = self.undo_history
        self.edit_menu, self.undo_action, self.redo_action = history.menu, history.undo_action, history.redo_action
        views = view_menu.install(self)                      # View menu: every dock, reset layout, defaults
        self.reset_layout_action = views.reset_layout_action
        self.restore_defaults_action = views.restore_defaults_action
        self.help_menu_actions = help_menu.install(self)     # Help menu: usage (F1), keyboard shortcuts, about
        self.colour_key = colour_key.install(self)           # colour key over the lattice; after the View menu
        self.legend_overlay, self.legend_action = self.colour_key.overlay, self.colour_key.action
        self.hover_readout = cell_readout.install(self)      # status bar: the cell or plot sample under the mouse
        self.input_keys = input_keys.install(self)   # one-key shortcuts leave their keys to a focused input widget
        self.tab_labels = tab_labels.install(self)   # dock tabs show their whole names; the tab bars scroll instead
        self.lifecycle.docks_ahead = self.findChildren(AnalysisDock)   # their first shows prepared ahead

    # ==== what the docks are offered (app/dock_host.py) =========================================
    @property
    def model(self):
        return self.runner.model

    @property
    def plots(self):
        return self.lifecycle.plots

    def add_action(self, text, slot, shortcuts=(), tip="", checkable=False, name=None):
        return make_action(self, text, slot, shortcuts, tip, checkable, name)

    def add_dock(self, dock, area=RIGHT, beside_plots: bool = True) -> None:
        place_dock(self, dock, area, self.plot_dock if beside_plots else None)

    def show_message(self, text: str, error: bool = False) -> None:
        self.last_message = text
        if error:
            self.last_error = text
            log.warning(text)
        self.statusBar().showMessage(log_panel.status_text(self.statusBar(), text), 12000 if error else 5000)
        if self.log_panel is not None:     # the Messages dock (app/log_panel.py) keeps them all, once made
            self.log_panel.add(text, "error" if error else "info")

    def warn(self, title: str, text: str) -> None:
        self.show_message(text, error=True)
        if self.interactive:
            QtWidgets.QMessageBox.warning(self, title, text)
        else:
            print(f"latticelab: {text}", file=sys.stderr)

    def model_busy(self) -> bool:
        return self.stepper.busy

    def model_preparing(self) -> bool:
        return self.preparer.busy

    def when_model_free(self, action) -> None:
        self.frames.when_model_free(action)

    def settling(self) -> bool:
        return self.lifecycle.settling()

    @property
    def staged_ahead(self) -> bool:
        """The live plots' glyphs, the hidden analysis docks' first shows and every registered model's form and
        plots are made (or nothing is to be made ahead)."""
        return not self.lifecycle.working()

    def capture(self, what: str = "view"):
        return self.files.capture(what)

    def default_export_name(self) -> str:
        return default_export_name(self.model)

    def picture(self):
        o = self.controls.view_options()
        marks = o["show_links"] and self.model.marks_label is not None
        return self.runner.picture(highlight=o["highlight"] and self.frames.highlight_readable(), marks=marks)

    # ==== simulation control ====================================================================
    def set_running(self, running: bool) -> None:
        show_running(self, running)
        self.running = running
        if not running and self.plot_canvas.stale:
            self.plot_canvas.update()      # what is left of the last refresh, a paint at a time
        self.frames.restart_counters()
        self.pacer.restart()
        if running:
            self.frames.start()
        else:
            self.status.update()     # "paused" at once, not at the next status refresh

    def step_once(self) -> None:
        self.frames.step_once()

    def run_steps(self, n: int, then=None) -> None:
        self.frames.run_steps(n, then)

    def set_parameter(self, name: str, value, also: dict | None = None, record: bool = True) -> bool:
        return self.lifecycle.set_parameter(name, value, also, record)

    def reset(self, *_unused) -> None:
        self.lifecycle.reset()

    def switch_model(self, name: str) -> bool:
        return self.lifecycle.switch_model(name)

    def show_model_choice(self) -> None:
        show_model_choice(self, self.model.name)

    def apply_view_options(self) -> None:
        o = self.controls.view_options()
        view = self.field_view
        view.set_mode_3d("unfold" if o["unfold"] else "cube")
        view.set_peel(o["peel"])
        self.frames.refresh_view()
        if o["show_links"] and view.links_total > view.links_shown:
            self.show_message(f"showing {view.links_shown:,} of {view.links_total:,} links")
        self.lattice_canvas.update()

    def model_help(self) -> str:
        return model_help(self.model)

    def show_model_help(self) -> None:
        if not self.interactive:
            return
        box = QtWidgets.QMessageBox(self)
        box.setWindowTitle(f"About the model: {self.model.title}")
        box.setTextFormat(QtCore.Qt.TextFormat.RichText)
        box.setText(self.model_help())
        box.exec()

    # ==== files =================================================================================
    def export_screenshot(self, path, what: str = "view", confirm: bool = True):
        return self.files.export_screenshot(path, what, confirm)

    def save_state(self, path, confirm: bool = True):
        return self.files.save_state(path, confirm)

    def load_state(self, path) -> bool:
        return self.files.load_state(path)

    # ==== preferences ===========================================================================
    def _restore_preferences(self) -> None:
        p = self.prefs
        c = self.controls
        for widget, key in ((c.highlight, "view/highlight"), (c.show_links, "view/show_links"),
                            (c.unfold, "view/unfold"), (c.adaptive, "run/adaptive")):
            with QtCore.QSignalBlocker(widget):
                widget.setChecked(p.get(key))
        steps = p.get("run/steps_per_frame")
        # not picked: the default of the backend and the model, followed at each model change (follow_pace)
        self._steps_picked = steps is not None
        c.set_steps_per_frame(self._default_pace() if steps is None else steps)
        self.colour_key.restore(p.get("view/legend"))
        self.steps_per_frame = c.steps_per_frame.value()
        self.adaptive = c.adaptive.isChecked()
        c.set_geometry(self.model.shape)
        with QtCore.QSignalBlocker(c.peel):
            c.peel.setValue(min(p.get("view/peel"), c.peel.maximum()))
        geometry = p.get_bytes("window/geometry")
        if geometry is not None and not self.restoreGeometry(geometry):
            p.problems.append("setting window/geometry is damaged; using the default window size")
        elif geometry is None:
            self.resize(1400, 860)
        layout = p.get_bytes("window/state")
        self._layout_restored = layout is not None and self.restoreState(layout)
        if layout is not None and not self._layout_restored:
            p.problems.append("setting window/state is damaged; using the default layout")
        if p.problems:
            self.show_message("; ".join(p.problems), error=True)

    def save_preferences(self) -> None:
        p = self.prefs
        p.set("model", self.model.name)
        p.set_model_values(self.model.name, self.runner.params)
        if not self._steps_picked:
            p.clear("run/steps_per_frame")     # the default follows the backend and model until the user picks one
        else:
            p.set("run/steps_per_frame", self.steps_per_frame)
        p.set("run/adaptive", self.adaptive)
        for key, value in self.controls.view_options().items():
            p.set(f"view/{key}", value)
        p.set("view/legend", self.colour_key.shown())
        p.set("window/geometry", self.saveGeometry())
        p.set("window/state", self.saveState())
        p.sync()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._layout_restored:
            # default layout: the lattice gets the space; docks start at their useful widths
            self._layout_restored = True
            width = self.width()
            self.resizeDocks([self.control_dock, self.plot_dock], [300, max(320, width // 4)],
                             QtCore.Qt.Orientation.Horizontal)

    def closeEvent(self, event) -> None:
        self.timer.stop()
        self.preparer.cancel()      # a model still being built is dropped when its worker is done
        if self.interactive:
            self.save_preferences()
        super().closeEvent(event)
