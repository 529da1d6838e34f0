"""The main window, for any registered model: the field view in the centre, the controls (a form generated from
the model's schema) and live plots of its declared observables in docks, and a timer-driven frame loop.

Each frame (QTimer, GUI thread, the thread that owns the GL contexts): the runner (sim/runner.py) takes the
steps that fit the frame's time budget, the model's picture (byte codes + palette, sim/picture.py) goes to the
field view (render/field_view.py), and plots and status refresh a few times per second. The Model menu and the
toolbar's model box switch models while the application runs; the controls, plots, title and export names
follow. Nothing blocks the event loop for longer than one frame.
"""
from __future__ import annotations

import logging
import math
import sys
import time
from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets
from vispy import scene

from latticelab.app import graph_panel, spectral_panel
from latticelab.app import coarsening_panel, signal_panel
from latticelab.app import study_panel
from latticelab.app import recording
from latticelab.app import help_menu, log_panel, undo, view_menu
from latticelab.app import cell_readout, colour_key, input_keys, tab_labels
from latticelab.app.analysis_dock import AnalysisDock, continue_while_stale, on_screen, paint_only_when_shown
from latticelab.app.canvas_paints import draw_only_when_changed
from latticelab.app.controls import ControlsPanel
from latticelab.app.dialogs import confirm_replace
from latticelab.app.qt_compat import protect_singletons, share_gl_contexts
from latticelab.app.settings import AUTO_STEPS, MAX_STEPS_PER_FRAME, Preferences, default_steps_per_frame, variant_key
from latticelab.app.kernel_cache import device_identity, start_in_background
from latticelab.app.preparing import Job, ModelPreparer, current_device
from latticelab.app import preparing
from latticelab.app.staging import SLICE_AFTER_BUILD_S, SLICE_S, Staging
from latticelab.app.stepping import BackgroundStepper, wants_background
from latticelab.render import palette
from latticelab.render.cached_canvas import RegionCachedCanvas
from latticelab.render.field_view import FieldView
from latticelab.render.plots import LivePlots, glyph_steps, series_for
from latticelab.render.unfold import UnfoldLayout
from latticelab.sim import io, state
from latticelab.sim.backend import BackendError, initialise_gpu_libraries, select_backend
from latticelab.sim.models import all_models, get_model, model_names
from latticelab.sim.model import Model
from latticelab.sim.params import ModelParams, ParameterError
from latticelab.app.pacing import DevicePacer, PlotPacer
from latticelab.sim.runner import FirstLook, Runner

log = logging.getLogger(__name__)

FRAME_BUDGET_S = 0.030       # simulation time per frame when "keep frames under 30 ms" is on (CPU)
FRAME_INTERVAL_MS = 15
STAGING_EVERY_TICKS = 2      # a staging slice runs at least every this many frames
STAGE_AHEAD_AFTER_S = 2.0    # the other models' forms and plots are made ahead from this long after start-up
PLOT_DRAW_BUDGET_S = 0.006   # a paint draws this much of a plots refresh (at least one part)
STATUS_INTERVAL_S = 0.5
# a frame of more steps is drawn without the highlight of changed cells: the union of a GPU frame's ~500 sweeps
# covered nearly every cell, and the view showed only the two "flipped" colours (issue 41); the key says so
HIGHLIGHT_MAX_STEPS = 4
LONG_BATCH_S = 1.0           # running, a batch of background steps this long is named in the status bar
# the live plots' history keeps at most this many samples of a frame's steps (sim/runner.py thin): with Steps / frame
# auto a CUDA frame takes some 500 sweeps of a 4096^2 lattice, and its 1000 samples covered the last two frames
PLOT_SAMPLES_PER_FRAME = 4
SETTLE_AFTER_SWAP_S = {"cuda": 1.0}  # by backend: the hidden docks' preparation waits this long after a swap
# a new model this large (its estimated bytes) is built on a worker thread (app/preparing.py); on a CUDA device a
# smaller one too, since its kernels may have to be compiled
BACKGROUND_BUILD_BYTES = {"numpy": 512 << 20, "cuda": 1 << 20}
EXPORT_KINDS = {
    "view": "Lattice view as shown, at the canvas's pixel size (*.png)",
    "cells": "Lattice cells, one pixel per cell; 3D unfolded (*.png)",
    "window": "Whole window (*.png)",
}


def segment_start(times, history) -> float | None:
    """The time from which the live plots' running means are taken: the first sample under the current
    parameters (sim/runner.py ObservableHistory segments); None when every sample in the history is."""
    start = history.segments()[-1][0]
    if start == 0:
        return None
    return float(times[start]) if start < len(times) else math.inf


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
            gpu_xp = select_backend(backend).xp   # CuPy (a model split over devices shows host arrays: model.xp)
            # loaded here, not first by a model's build on a worker thread, where loading them blocked this
            # thread's texture writes for up to a third of a second (sim/backend.py)
            log.info("CUDA libraries initialised: %s", ", ".join(initialise_gpu_libraries(gpu_xp)))
            # the other models' kernels compiled by a process of its own, once per installation and GPU, so that
            # a first switch to them does not compile and load them beside this thread (app/kernel_cache.py)
            try:
                start_in_background(device_identity(gpu_xp))
            except Exception as exc:      # a convenience: the window works without it
                log.warning("GPU kernels not prepared in the background: %s: %s", type(exc).__name__, exc)
        self.last_message = ""
        self.last_error = ""
        self.steps_per_frame = 1
        self.adaptive = True
        self.running = False
        self._shown = None             # (state_version, model, view options) last shown
        self._plotted_model = None
        self._step_target = None       # scripted runs: stop after this many steps
        self._target_reached = []      # callbacks for the step target
        self._counters = {"steps": 0, "frames": 0, "t": time.perf_counter()}
        self._last_plot = 0.0
        self._staging_waited = 0          # frames the staging let pass in a row (``_frame``)
        self._plot_version = -1
        self.pacer = DevicePacer()           # device frames: seconds of steps per frame (app/pacing.py)
        self.plot_pacer = PlotPacer()        # how often the live plots refresh (app/pacing.py)
        self._plot_paint_start = None
        # On a device: ask Qt to paint the finished picture at once, before queueing the next steps (see _frame);
        # off: the steps are queued first and the picture is painted in the event loop while they run
        self.paint_before_steps = False
        self.stepper = BackgroundStepper()   # steps longer than a frame (CPU) run on a worker thread
        self._deferred = []                  # changes waiting for the worker's batch or the model being prepared
        self._on_model_free = []             # readers waiting for the worker's batch (when_model_free)
        self.preparer = ModelPreparer()      # new models (switch, size, dimension) are built on a worker thread
        self.background_builds = None        # None: when the model is large (or on CUDA); True/False: always/never
        # The other registered models' forms and plots made ahead while the window is idle, a slice per frame as
        # for a switch (``_stage_ahead``), so that a first switch to one only shows them: on by default in the
        # application; off in scripted windows (tests count what a switch stages) unless set
        self.stage_ahead = interactive
        self._ahead = list(all_models().values())
        self._glyphs_ahead = True            # the live plots' glyphs rendered ahead too (before the models)
        self._ahead_from = time.perf_counter() + STAGE_AHEAD_AFTER_S
        self.staging = Staging()             # the next model's form and plots, made ahead a slice per frame
        self.collector = None                # app/collector.py: when full collections may run (set at start-up)
        self._plot_sets = {}                 # model class -> its LivePlots; those of other models kept, hidden
        self._plot_fonts = None              # one VisPy font manager (glyph atlas) for all of them
        self.last_swap: dict = {}            # the last model change's GUI-thread parts, in seconds (bench/window.py)
        self._swapped_at = -math.inf         # perf_counter() of the last model change shown (``settling``)
        self.settle_after_swap_s = None      # seconds ``settling`` lasts after a swap (None: by backend)

        self._build_canvases()
        self._build_controls()
        self._build_actions()
        self._build_status_bar()
        spectral_panel.install(self)   # spectrum dock (issue 6), a tab beside the live plots
        graph_panel.install(self)      # graph dock (issue 12): the model's graph measured, for HasGraph models
        recording.install(self)        # File menu: plot data as CSV, plots as PNG, movie recording (issue 16)
        signal_panel.install(self)     # signal dock (issue 15): EEG, periodogram, picked cell, for HasSignal
        coarsening_panel.install(self) # coarsening dock (issue 14): length vs t, 3D interface
        study_panel.install(self)      # study dock (issue 11): T_c studies run in the background
        log_panel.install(self)        # Messages dock (issue 16): every message in full, with time and level
        undo.install(self)             # Edit menu (issue 16): undo/redo of parameter changes
        view_menu.install(self)        # View menu (issue 16): every dock, reset layout, restore defaults
        help_menu.install(self)        # Help menu (issue 16): usage (F1), keyboard shortcuts, about
        colour_key.install(self)       # colour key over the lattice, View > Show colour key (issue 16); after view_menu
        cell_readout.install(self)     # status bar: the cell or plot sample under the mouse (issue 16)
        input_keys.install(self)       # one-key shortcuts leave their keys to a focused slider, box, button (issue 41)
        tab_labels.install(self)       # dock tabs show their whole names; the tab bar scrolls instead (issue 41)
        self._docks_ahead = self.findChildren(AnalysisDock)   # their first shows prepared ahead (_stage_ahead)

        self.timer = QtCore.QTimer(self, interval=FRAME_INTERVAL_MS, timerType=QtCore.Qt.TimerType.PreciseTimer)
        self.timer.timeout.connect(self._frame)
        self._restore_preferences()
        self._after_model_change()
        self.set_running(True)

    # ==== construction ==========================================================================
    def _build_canvases(self) -> None:
        self.lattice_canvas = scene.SceneCanvas(keys=None, app="pyside6", bgcolor=palette.BACKGROUND,
                                                size=(720, 720), show=False)
        self.lattice_canvas.native.setObjectName("lattice_canvas")
        self.lattice_canvas.native.setMinimumSize(240, 240)
        self.lattice_canvas.native.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)
        self.field_view = FieldView(self.lattice_canvas.central_widget.add_view())
        self.lattice_canvas.events.draw.connect(self._count_frame, position="last")
        draw_only_when_changed(self.lattice_canvas)   # Qt's own paints of the unchanged view draw nothing
        self.setCentralWidget(self.lattice_canvas.native)

        # the plots' picture is cached (render/cached_canvas.py): a refresh redraws only the parts that changed
        # (plot areas, titles, axes), a budget's worth per paint, so no paint pays for all of them: while the
        # frame loop runs, a few with each frame (_frame_end); paused, a paint a pass of the event loop until
        # done (all at once, they took 58 ms on llvmpipe and 78 ms beside the NVIDIA renderer on two cores when
        # the plots' tab came back to the front after a pause)
        self.plot_canvas = RegionCachedCanvas(keys=None, app="pyside6", bgcolor=(0.08, 0.08, 0.1, 1.0),
                                              size=(380, 640), show=False, budget_s=PLOT_DRAW_BUDGET_S)
        self.plot_canvas.events.draw.connect(self._plots_paint_starts, position="first")
        self.plot_canvas.events.draw.connect(self._plots_drawn, position="last")
        self.plot_canvas.native.setObjectName("plot_canvas")
        self.plot_canvas.native.setMinimumSize(260, 300)
        # behind another tab of its group it is not painted (Qt painted it as it went behind the Spectrum dock's
        # tab: 11-17 ms on llvmpipe in that frame); its paint requests wait until it is in front again
        paint_only_when_shown(self.plot_canvas)
        self.plots = None      # made for the model's observables (_show_model)
        self.plot_dock = QtWidgets.QDockWidget("Live plots", self, objectName="plot_dock")
        self.plot_dock.setWidget(self.plot_canvas.native)
        self.addDockWidget(QtCore.Qt.DockWidgetArea.RightDockWidgetArea, self.plot_dock)
        self.plot_dock.visibilityChanged.connect(   # shown again: catch up at once (hidden, nothing was drawn)
            lambda visible: visible and QtCore.QTimer.singleShot(0, self, self._update_plots))

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
        c.viewChanged.connect(self._apply_view_options)
        c.stepsPerFrameChanged.connect(self._set_steps_per_frame)
        c.adaptive.toggled.connect(self._set_adaptive)

    def _action(self, text, slot, shortcuts=(), tip="", checkable=False, name=None) -> QtGui.QAction:
        action = QtGui.QAction(text, self, checkable=checkable)
        action.setObjectName(name or text)
        if shortcuts:
            action.setShortcuts([QtGui.QKeySequence(s) for s in shortcuts])
            action.setShortcutContext(QtCore.Qt.ShortcutContext.WindowShortcut)
        action.setToolTip(tip or text)
        action.setStatusTip(tip or text)
        (action.toggled if checkable else action.triggered).connect(slot)
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        self.run_action = self._action("Run", self.set_running, ["P"], "Run or pause the simulation (P)",
                                       checkable=True, name="run_action")
        self.step_action = self._action("Step", self.step_once, ["Space", "Right"],
                                        "Advance exactly one step and highlight what flipped (Space, Right)",
                                        name="step_action")
        self.reset_action = self._action("Reset", self.reset, [], "A new initial state from the reset parameters",
                                         name="reset_action")
        self.export_action = self._action("Export screenshot...", self.export_dialog, ["Ctrl+S"],
                                          "Save the lattice view, its cells or the whole window as PNG (Ctrl+S)",
                                          name="export_action")
        self.save_action = self._action("Save state...", self.save_dialog, ["Ctrl+Shift+S"],
                                        "Save the simulation so it can be resumed exactly", name="save_action")
        self.load_action = self._action("Load state...", self.load_dialog, ["Ctrl+O"],
                                        "Resume a saved simulation", name="load_action")
        self.quit_action = self._action("Quit", self.close, ["Ctrl+Q"], name="quit_action")
        self.camera_action = self._action("Reset camera", self.field_view.reset_camera, ["Home"],
                                          "Fit the lattice into the view (Home)", name="camera_action")

        for action in (self.run_action, self.step_action):
            action.setShortcutContext(QtCore.Qt.ShortcutContext.ApplicationShortcut)
        file_menu = self.menuBar().addMenu("&File")
        for action in (self.export_action, self.save_action, self.load_action):
            file_menu.addAction(action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        sim_menu = self.menuBar().addMenu("&Simulation")
        for action in (self.run_action, self.step_action, self.reset_action):
            sim_menu.addAction(action)
        self.model_menu = self.menuBar().addMenu("&Model")
        self.model_actions = QtGui.QActionGroup(self)
        self.model_actions.setExclusive(True)
        for name in model_names():
            action = QtGui.QAction(get_model(name).title, self, checkable=True)
            action.setObjectName(f"model_{name}")
            action.setData(name)
            action.triggered.connect(lambda _=False, name=name: self.switch_model(name))
            self.model_actions.addAction(action)
            self.model_menu.addAction(action)
        view_menu = self.view_menu = self.menuBar().addMenu("&View")    # filled when shown (app/view_menu.py)
        view_menu.addAction(self.camera_action)
        view_menu.addAction(self.control_dock.toggleViewAction())
        view_menu.addAction(self.plot_dock.toggleViewAction())

        self.model_help_action = self._action("About the model...", self.show_model_help, [],
                                              "What the running model is and what each parameter means",
                                              name="model_help_action")
        help_menu = self.help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction(self.model_help_action)

        icons = {self.step_action: "SP_MediaSkipForward", self.reset_action: "SP_BrowserReload",
                 self.export_action: "SP_DesktopIcon",
                 self.save_action: "SP_DialogSaveButton", self.load_action: "SP_DialogOpenButton",
                 self.camera_action: "SP_ArrowUp", self.run_action: "SP_MediaPlay"}
        for action, name in icons.items():
            action.setIcon(self.style().standardIcon(getattr(QtWidgets.QStyle.StandardPixmap, name)))
        toolbar = self.addToolBar("Main")
        toolbar.setObjectName("main_toolbar")
        toolbar.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.model_box = QtWidgets.QComboBox(objectName="model_box")
        self.model_box.setToolTip("The model to run (Model menu)")
        for name in model_names():
            self.model_box.addItem(get_model(name).title, name)
        self.model_box.activated.connect(lambda index: self.switch_model(self.model_box.itemData(index)))
        toolbar.addWidget(self.model_box)
        toolbar.addSeparator()
        for action in (self.run_action, self.step_action, self.reset_action):
            toolbar.addAction(action)
        toolbar.addSeparator()
        for action in (self.export_action, self.save_action, self.load_action, self.camera_action):
            toolbar.addAction(action)
        self.toolbar = toolbar
        self.toolbar.toggleViewAction().setObjectName("toolbar_toggle")
        view_menu.addAction(self.toolbar.toggleViewAction())

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.status_labels = {}
        for key in ("backend", "lattice", "step", "steps_per_s", "frames_per_s"):
            label = QtWidgets.QLabel(objectName=f"status_{key}")
            label.setContentsMargins(6, 0, 6, 0)
            bar.addPermanentWidget(label)
            self.status_labels[key] = label

    # ==== preferences ===========================================================================
    def _restore_preferences(self) -> None:
        p = self.prefs
        c = self.controls
        for widget, key in ((c.highlight, "view/highlight"), (c.show_links, "view/show_links"),
                            (c.unfold, "view/unfold"), (c.adaptive, "run/adaptive")):
            with QtCore.QSignalBlocker(widget):
                widget.setChecked(p.get(key))
        steps = p.get("run/steps_per_frame")
        # not picked: the default of the backend and the model, followed at each model change (_follow_pace)
        self._steps_picked = steps is not None
        c.set_steps_per_frame(self._default_pace() if steps is None else steps)
        colour_key.restore(self, p.get("view/legend"))
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
        p.set("view/legend", colour_key.shown(self))
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

    # ==== messages ==============================================================================
    def show_message(self, text: str, error: bool = False) -> None:
        self.last_message = text
        if error:
            self.last_error = text
            log.warning(text)
        self.statusBar().showMessage(log_panel.status_text(self.statusBar(), text), 12000 if error else 5000)
        panel = getattr(self, "log_panel", None)     # the Messages dock (app/log_panel.py) keeps them all
        if panel is not None:
            panel.add(text, "error" if error else "info")

    def _warn(self, title: str, text: str) -> None:
        self.show_message(text, error=True)
        if self.interactive:
            QtWidgets.QMessageBox.warning(self, title, text)
        else:
            print(f"latticelab: {text}", file=sys.stderr)

    def _try(self, change, *args, **kwargs) -> tuple[bool, object]:
        """Run a model change; a bad value is shown and the model stays as it was. Returns (whether it
        worked, the change's result)."""
        try:
            return True, change(*args, **kwargs)
        except (ParameterError, BackendError, ValueError, MemoryError) as exc:
            text = str(exc) if not isinstance(exc, MemoryError) else "not enough memory for this model"
            self.show_message(text, error=True)
            self._show_parameters()
            return False, None

    # ==== simulation control ====================================================================
    @property
    def model(self):
        return self.runner.model

    def set_running(self, running: bool) -> None:
        with QtCore.QSignalBlocker(self.run_action):
            self.run_action.setChecked(running)
        self.run_action.setText("Pause" if running else "Run")
        pixmap = QtWidgets.QStyle.StandardPixmap.SP_MediaPause if running else QtWidgets.QStyle.StandardPixmap.SP_MediaPlay
        self.run_action.setIcon(self.style().standardIcon(pixmap))
        self.running = running
        if not running and self.plot_canvas.stale:
            self.plot_canvas.update()      # what is left of the last refresh, a paint at a time (_plots_drawn)
        self._counters.update(steps=0, frames=0, t=time.perf_counter())
        self.pacer.restart()
        if running and not self.timer.isActive():
            self.timer.start()
        if not running:
            self._update_status()     # "paused" at once, not at the next status refresh

    def step_once(self) -> None:
        """Pause and advance exactly one step; what changed is highlighted until the next step."""
        if self.running:
            self.set_running(False)
        if self.stepper.busy:
            return      # the step in flight is the one the user sees next
        self.field_view.before_step()
        if wants_background(self.model, self.runner.seconds_per_step, FRAME_BUDGET_S):
            self.stepper.start(self.model, 1)
            self._show_background_work()
            self.timer.start()
            return
        try:
            self.runner.advance(1, None)
        except ParameterError as exc:
            self._stop_on_error(exc)
        self._refresh_view()
        self._update_plots(force=True)
        self._update_status()

    def set_parameter(self, name: str, value, also: dict | None = None, record: bool = True) -> bool:
        """A parameter edited in the form (or by a script): applied as its schema says (sim/runner.py).
        ``also``: other fields changed in the same step (undo, restore defaults). A refused value is also shown
        under its field; an applied change can be undone (Edit menu, app/undo.py) unless ``record`` is False."""
        if self._busy():    # a worker owns the model, or builds the next one: check the value now, apply it after
            try:
                self.runner.params.replace(**{**(also or {}), name: value})
            except ParameterError as exc:
                self.show_message(str(exc), error=True)
                self._show_parameters()
                self.controls.show_field_error(name, str(exc), value)
                return False
            self._when_idle(lambda: self.set_parameter(name, value, also, record), f"{name} = {value}")
            return True
        schema = self.runner.model_class.Params
        changes = {name: value}
        if name in schema.variant_fields:
            changes = self._variant_changes(name, value)
        changes.update(also or {})
        before = self.runner.params
        in_background = self._rebuild_in_background(name, value, changes, before, record)
        if in_background is not None:
            return in_background
        # a wait cursor while a change that can take long is applied: a new model, or a field declared slow=True
        slow = any(schema.is_slow(k) for k, v in changes.items() if getattr(before, k, None) != v)
        if slow:
            QtWidgets.QApplication.setOverrideCursor(QtCore.Qt.CursorShape.WaitCursor)
        try:
            ok, what = self._try(self.runner.set, **changes)
        finally:
            if slow:
                QtWidgets.QApplication.restoreOverrideCursor()
        if not ok:
            self.controls.show_field_error(name, self.last_error, value)   # beside the box as well
            return False
        if what == "none" or self.runner.params == before:
            # the value it has already: nothing to say or undo (a typed value came twice, from Enter and again
            # as the box lost the focus, and the Messages dock logged it twice)
            self._show_parameters()
            return True
        if record:
            self.undo_history.record(name, before, self.runner.params, self.model.name)
        if what == "rebuild":
            self._after_model_change()
            self.show_message(f"new {self.model.title.lower()}: {self._describe()}")
        else:
            info = schema.fields().get(name, {})
            unit = f" {info['unit']}" if info.get("unit") else ""
            later = " (used by the next reset)" if what == "reset" else ""
            self.show_message(f"{name} = {getattr(self.runner.params, name)}{unit}{later}")
            self._show_parameters()
            self._refresh_view()
        return True

    def _rebuild_in_background(self, name: str, value, changes: dict, before, record: bool) -> bool | None:
        """A change that needs a new model large enough to be built on the worker: start building it (True), or
        refuse a bad value (False); None when the change is to be applied here and now."""
        ok, new = self._try(self._params_if_rebuilt, changes)
        if not ok:
            self.controls.show_field_error(name, self.last_error, value)
            return False
        cls = self.runner.model_class
        if new is None or not self._builds_in_background(cls, new):
            return None

        def ready(look) -> None:
            self.runner.load(look)
            if record:
                self.undo_history.record(name, before, self.runner.params, self.model.name)
            self._after_model_change()
            self.show_message(f"new {self.model.title.lower()}: {self._describe()}")

        def failed(exc) -> None:
            self._report_build_error(exc)
            self.controls.show_field_error(name, self.last_error, value)

        shown = ", ".join(f"{k} = {v}" for k, v in changes.items())
        self._prepare(cls, new, f"{cls.title.lower()} with {shown}", ready, failed)
        return True

    def _params_if_rebuilt(self, changes: dict):
        """The parameters of the new model that ``changes`` need, or None when they apply to the running one;
        a bad value raises ParameterError."""
        current = self.runner.params
        new = current.replace(**changes)
        fields = type(current).fields()
        rebuild = any(fields[k]["applies"] == "rebuild" and getattr(current, k) != getattr(new, k) for k in changes)
        return new if rebuild else None

    def _builds_in_background(self, cls, params) -> bool:
        """Whether a new ``cls`` model is built on the worker: when ``background_builds`` says so, else when its
        estimated size reaches BACKGROUND_BUILD_BYTES (models without an estimate are built here)."""
        if self.background_builds is not None:
            return bool(self.background_builds)
        backend = self.model.backend_name
        estimate = cls.estimate_bytes(params, backend)
        return estimate is not None and estimate >= BACKGROUND_BUILD_BYTES.get(backend, 0)

    def _prepare(self, cls, params, what: str, ready, failed) -> None:
        """Build a ``cls`` model from ``params`` on the worker (app/preparing.py) while this one keeps running; the
        frame loop calls ``ready(look)`` (a sim.runner.FirstLook of the model) or ``failed(exception)`` when it is
        done (_poll_preparation)."""
        backend, devices = self.runner.backend, self.runner.devices
        # the model's first observables are taken on the worker too (sim/runner.py FirstLook): ``ready`` gets them
        job = Job(lambda: FirstLook(preparing.build_model(cls, params, backend, devices)), what, ready, failed,
                  device=current_device(self.model))
        self._hold_full_collections()        # before the worker starts allocating
        self.preparer.start(job)
        self.show_message(f"preparing {what}...")
        self._update_status()
        if not self.timer.isActive():
            self.timer.start()

    def _poll_preparation(self) -> bool:
        """Swap in a model the worker has built, in one step on this thread; after the batch of steps in flight,
        if any (the old model's), and once its form and plots are made (``staging``). True when a build was
        taken (swapped in, or reported as failed)."""
        if not self.preparer.busy or self.stepper.busy or self.staging.busy:
            return False
        job = self.preparer.poll()
        if job is None:
            self._release_full_collections()     # the build was superseded or cancelled: no swap to wait for
            return False
        if job.error is not None:
            job.on_error(job.error)
        else:
            job.on_ready(job.result)
        self._release_full_collections()         # what the switch made is frozen
        self._run_deferred()
        return True

    def _hold_full_collections(self) -> None:
        """No automatic full collection of Python's cycle collector while a switch is prepared: one pauses every
        thread for as long as it walks the objects made since start-up (app/collector.py)."""
        if self.collector is not None:
            self.collector.hold()

    def _release_full_collections(self) -> None:
        """Once no build is left, full collections may run again (what the switch made frozen first)."""
        if self.collector is not None and self.collector.held and not self.preparer.busy:
            self.collector.settle()

    def _stage(self, cls) -> None:
        """Make ``cls``'s parameter form and live plots ahead, hidden, a slice per frame (app/staging.py), while
        its model is built on the worker: the swap then only shows them."""
        self._hold_full_collections()
        self.staging.add(("form", cls.name), self.controls.stage_form(cls.Params))
        if cls not in self._plot_sets:
            plots = LivePlots(self.plot_canvas.central_widget, series_for(cls.declared_observables),
                              x_label=cls.time_label, fonts=self._plot_fonts, build=False)
            self._plot_sets[cls] = plots
            self.staging.add(("plots", cls.name), self._plot_signals_blocked(plots.stage(self.plot_canvas, True)))
        self.staging.add_followers(cls)      # the analysis docks' plots for it (app/analysis_dock.py)
        if not self.timer.isActive():
            self.timer.start()

    def settling(self) -> bool:
        """Whether a model change is under way or was just shown: a new model being built, forms and plots being
        made (for a switch, or ahead), or a swap less than ``settle_after_swap_s`` ago (its first frames draw the
        new plots and view). The hidden docks' own preparation waits meanwhile: on the H100, where frames take
        16 ms, a 16 ms step of it falling into a switch's first frames beside a plot redraw made the longest gap of
        that switch (bench window --trace). Not after a swap on the CPU: frames take 40-60 ms on a software
        renderer anyway, and a dock opened right after a switch would make what was held in one frame tick (bench
        responsiveness, traced: the Spectrum dock shown 0.5 s after a change of dimension made its 3D view in
        its first request, 30 ms of a 108 ms gap)."""
        if self.preparer.busy or self.staging.busy:
            return True
        settle = self.settle_after_swap_s
        if settle is None:
            settle = SETTLE_AFTER_SWAP_S.get(self.model.backend_name, 0.0)
        return time.perf_counter() - self._swapped_at < settle

    @property
    def staged_ahead(self) -> bool:
        """The live plots' glyphs, the hidden analysis docks' first shows and every registered model's form and
        plots are made (or nothing is to be made ahead)."""
        return not self._ahead_left() and not self.staging.busy

    def _ahead_left(self) -> bool:
        return self.stage_ahead and bool(self._ahead or self._glyphs_ahead or self._docks_ahead)

    def _stage_ahead(self) -> None:
        """While idle (no switch prepared, nothing staged), queue what is made ahead, from STAGE_AHEAD_AFTER_S after
        start-up: first the glyphs the live plots' texts may show (render/plots.py glyph_steps: a glyph's first
        use otherwise renders it inside a paint), then each hidden analysis dock's first show
        (app/analysis_dock.py ``ahead_steps``), then the next registered model's form and plots (``_stage``).
        ``_frame`` lets full collections run again once each is made, what it made frozen first
        (app/collector.py)."""
        if not self._ahead_left() or time.perf_counter() < self._ahead_from:
            return
        if self._glyphs_ahead:
            self._glyphs_ahead = False
            if self._plot_fonts is not None:
                self.staging.add(("glyphs", "live plots"), glyph_steps(self._plot_fonts))
                return
        while self._docks_ahead:
            dock = self._docks_ahead.pop(0)
            if not dock.on_screen():
                self.staging.add(("dock", dock.objectName()), dock.ahead_steps())
                return
        if not self._ahead:
            return
        cls = self._ahead.pop(0)
        if cls is not type(self.model):
            self._stage(cls)

    def _plot_signals_blocked(self, steps):
        """``steps`` with the plot canvas's Qt signals blocked while each runs (as ``_make_plots`` does)."""
        while True:
            with QtCore.QSignalBlocker(self.plot_canvas.native):
                try:
                    what = next(steps)
                except StopIteration:
                    return
            yield what

    def _report_build_error(self, exc: BaseException) -> None:
        """A new model could not be built: say why (as ``_try`` does); the running model stays."""
        if isinstance(exc, MemoryError):
            text = "not enough memory for this model"
        elif isinstance(exc, (ParameterError, BackendError, ValueError)):
            text = str(exc)
        else:
            text = f"could not build the model: {type(exc).__name__}: {exc}"
        self.show_message(text, error=True)
        self._show_parameters()

    def _variant_changes(self, name: str, value) -> dict:
        """A variant field changes (the Ising dimension): the fields whose defaults depend on it take the
        values last used in that variant, or its suggested ones; the current variant's values are kept."""
        schema = self.runner.model_class.Params
        current = self.runner.params
        self.prefs.set_model_values(self.model.name, current)
        values = {**current.model_dump(), name: value}
        try:
            depends = schema.suggested(gpu=self.model.backend_name == "cuda", **values)
        except Exception:
            depends = {}
        stored = self.prefs.model_values(self.model.name, schema, variant_key(schema, values))
        return {name: value, **depends, **{k: v for k, v in stored.items() if k in depends}}

    def reset(self, *_unused) -> None:
        if self._busy():
            self._when_idle(self.reset, "reset")
            return
        if not self._try(self.runner.reset)[0]:
            return
        self._after_model_change()
        p = self.runner.params
        self.show_message(f"reset ({', '.join(f'{k}={getattr(p, k)}' for k in type(p).names('reset'))})")

    def switch_model(self, name: str) -> bool:
        """Run a new model of kind ``name`` with its remembered (or default) parameters; the running model
        stays if that fails."""
        if name == self.model.name:
            if self.preparer.busy:      # back to the running model: the one being prepared is not wanted
                self.preparer.cancel()
                self.show_message(f"kept the {self.model.title.lower()}")
            self._show_model_choice()
            return True
        if self.interactive:
            self.save_preferences()
        else:
            self.prefs.set_model_values(self.model.name, self.runner.params)
        gpu = self.model.backend_name == "cuda"

        def remembered():     # an unknown name or a bad stored value raises ParameterError
            cls = get_model(name)
            return cls, cls.Params.create(gpu=gpu, **self.prefs.model_values(name, cls.Params))

        ok, chosen = self._try(remembered)
        if not ok:
            self._show_model_choice()
            return False
        cls, params = chosen
        if self._builds_in_background(cls, params):   # a request made while another model is prepared wins
            self._prepare(cls, params, cls.title, self._adopt_switched, self._switch_failed)
            self._stage(cls)
            return True
        self.preparer.cancel()
        if self.stepper.busy:
            self._when_idle(lambda: self.switch_model(name), f"switch to {name}")
            return True
        if not self._try(self.runner.switch, name, params)[0]:
            self._show_model_choice()
            return False
        self._adopt_switched(None)
        return True

    def _adopt_switched(self, look) -> None:
        """The switch's new model is running (``look``: built on the worker, taken here; None: already)."""
        if look is not None:
            self.runner.load(look)
        self._after_model_change()
        self.show_message(f"{self.model.title}: {self._describe()}")

    def _switch_failed(self, exc: BaseException) -> None:
        self._report_build_error(exc)
        self._show_model_choice()

    def model_help(self) -> str:
        """The running model's description and its parameters (label, unit, allowed values, when a change
        applies), as rich text from the model's docstring and schema."""
        from latticelab.app.rest_text import inline_html, rest_to_html
        from latticelab.sim.params import allowed_text
        cls, schema = type(self.model), type(self.model.params)
        doc = rest_to_html(cls.__doc__ or "")     # reST (``code``, *emphasis*) as rich text, not as typed
        rows = []
        applies = {"live": "at once", "reset": "at the next reset", "rebuild": "new model"}
        for name, info in schema.fields().items():
            unit = f" [{info['unit']}]" if info.get("unit") else ""
            rows.append(f"<tr><td><b>{inline_html(info['label'])}</b> ({name}){inline_html(unit)}</td>"
                        f"<td>{inline_html(info['help'])}</td><td>{inline_html(allowed_text(schema, name))}</td>"
                        f"<td>{applies[info['applies']]}</td></tr>")
        observables = ", ".join(f"{o.label}{f' [{o.unit}]' if o.unit else ''}" for o in cls.declared_observables)
        return (f"<h3>{cls.title}</h3>{doc}<p><b>Plotted:</b> {inline_html(observables)}</p>"
                "<table cellpadding='3'><tr><th>parameter</th><th>meaning</th><th>allowed</th><th>applies</th></tr>"
                + "".join(rows) + "</table>")

    def show_model_help(self) -> None:
        if not self.interactive:
            return
        box = QtWidgets.QMessageBox(self)
        box.setWindowTitle(f"About the model: {self.model.title}")
        box.setTextFormat(QtCore.Qt.TextFormat.RichText)
        box.setText(self.model_help())
        box.exec()

    def _describe(self) -> str:
        shape = "x".join(str(n) for n in self.model.shape)
        return f"{shape} ({math.prod(self.model.shape):,} cells)"

    def _show_parameters(self) -> None:
        self.controls.show_parameters(self.runner.params.model_dump())

    def _show_model_choice(self) -> None:
        for action in self.model_actions.actions():
            with QtCore.QSignalBlocker(action):
                action.setChecked(action.data() == self.model.name)
        with QtCore.QSignalBlocker(self.model_box):
            self.model_box.setCurrentIndex(self.model_box.findData(self.model.name))

    def _after_model_change(self) -> None:
        """The model was replaced or reset: controls, plots, title and view follow it. Each part's time is kept
        in ``last_swap`` (a form and plots made ahead, ``_stage``, are only shown here)."""
        model = self.model
        parts, clock = {}, time.perf_counter()

        def done(part: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            parts[part] = now - clock
            clock = now

        self.setWindowTitle(f"latticelab: {model.title}")
        self.model_help_action.setText(f"About the {model.title}...")
        done("title")
        self.controls.set_model(type(model))     # its form, and only the view options that apply to it
        self.controls.set_geometry(model.shape)
        self._show_parameters()
        self._show_model_choice()
        self._follow_pace()
        done("controls")
        if self._plotted_model is not type(model):
            self._make_plots(type(model))
            done("plots")
        self._apply_view_options()
        self._refresh_view(force=True)
        done("view")
        self._update_plots(force=True)
        done("plot data")
        self._update_status()
        done("status")
        self.last_swap = parts
        self._swapped_at = time.perf_counter()
        self.modelChanged.emit()

    def _make_plots(self, model_class) -> None:
        """Show ``model_class``'s plots: those made before (or ahead, ``_stage``), else new ones."""
        plots = self._plot_sets.get(model_class)
        if plots is not None and not plots.built:
            with QtCore.QSignalBlocker(self.plot_canvas.native):
                plots.finish()          # the steps not made ahead yet
            if not plots.built:         # making them ahead failed: make them anew
                plots.remove()
                plots = None
        if plots is None:
            with QtCore.QSignalBlocker(self.plot_canvas.native):
                plots = LivePlots(self.plot_canvas.central_widget, series_for(model_class.declared_observables),
                                  x_label=model_class.time_label, fonts=self._plot_fonts)
            self._plot_sets[model_class] = plots
            self._plot_fonts = plots.fonts
        if self.plots is not None and self.plots is not plots:
            self.plots.show(False)
        plots.show(True)
        self.plots = plots
        self._plotted_model = model_class
        self._plot_version = -1

    def _set_steps_per_frame(self, n: int) -> None:
        self.steps_per_frame = n
        self._steps_picked = n != self._default_pace()    # the default picked again: it follows the model again

    def _default_pace(self) -> int:
        return default_steps_per_frame(self.model.backend_name, type(self.model))

    def _follow_pace(self) -> None:
        """Steps / frame not picked by the user: the new model's default (sim/model.py ``cpu_pace``)."""
        if getattr(self, "_steps_picked", True):
            return
        pace = self._default_pace()
        if pace != self.steps_per_frame:
            self.controls.set_steps_per_frame(pace)
            self.steps_per_frame = pace

    def _set_adaptive(self, on: bool) -> None:
        self.adaptive = on

    def run_steps(self, n: int, then=None) -> None:
        """Scripted: run exactly n more steps through the frame loop, then pause and call ``then``."""
        self._step_target = self.model.step_count + n
        if then is not None:
            self._target_reached.append(then)
        if n <= 0:
            self._finish_target()
        else:
            self.set_running(True)

    def _finish_target(self) -> None:
        self._step_target = None
        self.set_running(False)
        self._refresh_view()
        self._update_plots(force=True)
        self._update_status()
        callbacks, self._target_reached = self._target_reached, []
        for callback in callbacks:
            callback()

    # ==== the frame loop ========================================================================
    def _frame(self) -> None:
        if self.staging.busy:
            # the next model's form and plots, a piece per frame. While the model is still being built (the
            # swap waits for the build anyway) not in a frame that paints the live plots too (the two were the
            # longest parts of one gap in the switches on the H100, bench window --trace), but at least every
            # STAGING_EVERY_TICKS frames; once it is built, in every frame (the swap waits for the staging)
            # (staging with no build at all is made ahead, while idle: as gently as beside a build)
            gentle = self.preparer.building() or not self.preparer.busy
            if self._staging_waited + 1 < STAGING_EVERY_TICKS and gentle and self._plots_paint_in_this_frame():
                self._staging_waited += 1
            else:
                self._staging_waited = 0
                self.staging.run_slice(SLICE_S if gentle else SLICE_AFTER_BUILD_S)
                if not self.staging.busy:
                    # made ahead (no build waits for it): frozen now, as a switch's at its swap
                    self._release_full_collections()
        elif self._poll_preparation():
            self._frame_end()              # a swap takes its own frame: the new model steps from the next one
            return
        elif not self.preparer.busy:
            self._stage_ahead()
        if self.stepper.busy:
            self._collect_background_steps()
        elif self.running:
            limit = self.steps_per_frame or MAX_STEPS_PER_FRAME     # auto: the frame's time budget decides
            if self._step_target is not None:
                limit = min(limit, self._step_target - self.model.step_count)
            shown_first = False
            if limit > 0:
                # scripted runs take whole frames of steps, so what a frame highlights does not depend on timing
                budget = self._step_budget() if self._budgeted() and self._step_target is None else None
                if budget is not None and self._device_paced():
                    # Show what the last frame computed, then launch this frame's steps: the texture is written
                    # behind the last frame's steps in the stream, and Qt paints the window in the event loop
                    # while the new steps run (OpenGL and CUDA share the GPU by time slices). The picture is
                    # one frame behind the simulation. Painting first (paint_before_steps, a repaint) gains
                    # nothing: Qt postpones a repaint that comes within a display frame of its last composition
                    # to the event loop anyway (QWidgetRepaintManager), and where it does paint at once, or
                    # where the composition was forced (tried: 54-60% of headless against 67-73%, bench/NOTES.md),
                    # the device waits for the paint; on the H100 the steps-first order was as fast or 3-4
                    # points faster in every paired run of bench window.
                    self._refresh_view()
                    if self.paint_before_steps:
                        self.lattice_canvas.native.repaint()
                    shown_first = True
                else:
                    self.field_view.before_step()
                if wants_background(self.model, self.runner.seconds_per_step, FRAME_BUDGET_S):
                    self.stepper.start(self.model, self.runner.steps_for(limit, budget))
                else:
                    stepping = time.perf_counter()
                    steps = 0
                    try:
                        steps = self.runner.advance(limit, budget)
                    except ParameterError as exc:    # a model that can no longer step (a diverged field)
                        self._stop_on_error(exc)
                    self._counters["steps"] += steps
                    self._pace(stepping, steps)
            if not self.stepper.busy:
                self._after_steps(refresh=not shown_first)
        elif not self.stepper.busy:
            self.runner.collect(wait=True)   # paused: the last frame's observables,
            self._refresh_view()             # and its state (a no-op when it is already shown)
        self._frame_end()

    def _plots_paint_starts(self, event=None) -> None:
        self._plot_paint_start = time.perf_counter()

    def _plots_drawn(self, event=None) -> None:
        """After a paint of the live plots (its time counted for the plot pacing); one that left parts to draw:
        while the frame loop runs, the next frame asks for them with its own picture (_frame_end: one composition
        of the window for both); paused, the next pass of the event loop does."""
        if self._plot_paint_start is not None:
            self.plot_pacer.spent(time.perf_counter() - self._plot_paint_start)
            self._plot_paint_start = None
        if not self.running:
            continue_while_stale(self.plot_canvas)

    def _device_paced(self) -> bool:
        """Whether running frames are paced on a CUDA device (app/pacing.py): frames kept short, not a scripted
        run of a number of steps."""
        return self._budgeted() and self._step_target is None and self.model.backend_name == "cuda"

    def _budgeted(self) -> bool:
        """Whether frames take fewer steps than Steps / frame when those would make them slow: "keep frames under
        30 ms" checked, or Steps / frame auto (as many as fit)."""
        return self.adaptive or self.steps_per_frame == AUTO_STEPS

    def _plot_interval(self) -> float:
        """Seconds between refreshes of the live plots: longer while a device runs flat out and the plots would
        take more than their share of the GUI thread (app/pacing.py PlotPacer)."""
        return self.plot_pacer.interval(self.running and self._device_paced())

    def _plots_paint_in_this_frame(self) -> bool:
        """Whether this frame's end will ask for a paint of the live plots (``_frame_end``)."""
        if not self._plots_on_screen():
            return False
        return time.perf_counter() - self._last_plot >= self._plot_interval() or self.plot_canvas.stale

    def _frame_end(self) -> None:
        now = time.perf_counter()
        if now - self._last_plot >= self._plot_interval():
            self._update_plots()
        elif self.plot_canvas.stale and self._plots_on_screen():
            self.plot_canvas.update()      # the next plots of the last refresh, drawn with this frame's picture
        if now - self._counters["t"] >= STATUS_INTERVAL_S:
            self._update_status()
        if not self.running and self._step_target is None and not self._busy() and not self.staging.busy \
                and not self._ahead_left():
            self.timer.stop()   # nothing to do until the next change; changes refresh directly

    def _step_budget(self) -> float:
        """Seconds of stepping in the next frame. On the CPU a fixed budget (drawing with a software renderer is
        slow and would otherwise take all the time). On a CUDA device the frame is paced (app/pacing.py)."""
        if self.model.backend_name != "cuda":
            return FRAME_BUDGET_S
        return self.pacer.budget()

    def _pace(self, stepping_start: float, steps: int) -> None:
        self.pacer.stepped(stepping_start, steps, self.runner.seconds_per_step)
        # on a device the timer runs back to back: the stepping budget, not the timer, sets the frame rate
        interval = 0 if self.model.backend_name == "cuda" and self._budgeted() else FRAME_INTERVAL_MS
        if self.timer.interval() != interval:
            self.timer.setInterval(interval)

    def _after_steps(self, refresh: bool = True) -> None:
        if refresh:
            self._refresh_view()
        if self._step_target is not None and self.model.step_count >= self._step_target:
            self._finish_target()

    def _stop_on_error(self, exc) -> None:
        """A model that can no longer step (a diverged field): say so and pause."""
        self.set_running(False)
        self._step_target = None
        self._target_reached.clear()
        self.show_message(str(exc), error=True)

    def _collect_background_steps(self) -> None:
        """The frame loop while a worker steps the model (app/stepping.py): take its batch once it is in,
        then run what waited for it."""
        try:
            done = self.stepper.poll()
        except ParameterError as exc:
            self._stop_on_error(exc)
            done = None
        except MemoryError:
            self._stop_on_error(ParameterError("steps", "not enough memory to step this model"))
            done = None
        except Exception as exc:    # any other failure of the batch (from the worker process: a RuntimeError)
            log.exception("background steps")
            self._stop_on_error(f"the steps failed: {type(exc).__name__}: {exc}")
            done = None
        if done is None and self.stepper.busy:
            self._show_background_work_if_due()
            return
        if done is not None:
            model, batch, seconds = done
            if model is self.model:
                self.runner.commit(batch, seconds)
                self._counters["steps"] += batch.steps
        self._after_steps()
        if not self.running:
            self._update_status()     # "paused" again, and the new step count, once the step is in
        self._run_deferred()
        self._run_model_free()

    def when_model_free(self, action) -> None:
        """Run ``action`` as soon as no worker writes the model's arrays: now, or right after the stepping
        worker's batch is committed, before the next one starts (for the docks that copy the model's state;
        unlike ``_when_idle`` nothing is said in the status bar)."""
        if not self.stepper.busy:
            action()
            return
        self._on_model_free.append(action)

    def _run_model_free(self) -> None:
        waiting, self._on_model_free = self._on_model_free, []
        for action in waiting:
            try:
                action()
            except Exception:     # a reader's failure is its own; the frame loop goes on
                log.exception("a reader of the model failed")

    def _run_deferred(self) -> None:
        """Run what waited for a worker (each action checks again and waits again if one is still busy)."""
        waiting, self._deferred = self._deferred, []
        for action in waiting:
            action()

    def _show_background_work_if_due(self) -> None:
        """Say what the worker computes: paused (a step asked for), at once; running, only once its batch has
        taken LONG_BATCH_S (until then the status shows steps/s: it showed "computing 1 step" all the time while
        Swendsen-Wang ran, whose every batch goes to the worker)."""
        if self.stepper.busy and (not self.running or self.stepper.elapsed() >= LONG_BATCH_S):
            self._show_background_work()

    def _show_background_work(self) -> None:
        label = self.status_labels["steps_per_s"]
        label.setText(f"computing {self.stepper.steps:,} step{'s' if self.stepper.steps != 1 else ''} "
                      f"({self.stepper.elapsed():.1f} s)...")

    def _busy(self) -> bool:
        """A worker steps the model, or builds the next one."""
        return self.stepper.busy or self.preparer.busy

    def _when_idle(self, action, what: str) -> bool:
        """Run ``action`` now, or (a worker is stepping the model, or building the next one) as soon as it is
        done; True when it ran now."""
        if not self._busy():
            action()
            return True
        self._deferred.append(action)
        waiting_for = "the step being computed" if self.stepper.busy else "the model being prepared"
        self.show_message(f"{what}: after {waiting_for}")
        if not self.timer.isActive():
            self.timer.start()
        return False

    def _count_frame(self, event=None) -> None:
        self._counters["frames"] += 1

    def picture(self):
        o = self.controls.view_options()
        marks = o["show_links"] and self.model.marks_label is not None
        return self.runner.picture(highlight=o["highlight"] and self._highlight_readable(), marks=marks)

    def _highlight_readable(self) -> bool:
        """Whether the cells changed since the last frame are few enough steps' worth to be worth highlighting."""
        return self.runner.steps_in_last_frame <= HIGHLIGHT_MAX_STEPS

    def _highlight_note(self) -> str:
        """The colour key's note when the highlight asked for is left out of the picture."""
        o = self.controls.view_options()
        if not o["highlight"] or type(self.model).changed is Model.changed or self._highlight_readable():
            return ""
        return f"changed cells: shown up to {HIGHLIGHT_MAX_STEPS} steps a frame"

    def _refresh_view(self, force: bool = False) -> None:
        if self.stepper.busy:
            return      # the worker is changing the arrays: the view keeps the last picture until its batch is in
        o = self.controls.view_options()
        key = (self.runner.state_version, id(self.model), o["highlight"], o["show_links"])
        if not force and key == self._shown:
            return
        self._shown = key
        colour_key.note(self, self._highlight_note())
        self.field_view.show(self.picture())
        self.lattice_canvas.update()

    def _apply_view_options(self) -> None:
        o = self.controls.view_options()
        view = self.field_view
        view.set_mode_3d("unfold" if o["unfold"] else "cube")
        view.set_peel(o["peel"])
        self._refresh_view()
        if o["show_links"] and view.links_total > view.links_shown:
            self.show_message(f"showing {view.links_shown:,} of {view.links_total:,} links")
        self.lattice_canvas.update()

    def _update_plots(self, force: bool = False) -> None:
        """Redraw the live plots with the history recorded since the last redraw; the frame loop's calls do
        nothing while the plot dock is hidden or behind another tab (it catches up when shown)."""
        self._last_plot = time.perf_counter()
        history = self.runner.history
        if not force and (history.version == self._plot_version or not self._plots_on_screen()):
            return
        self._plot_version = history.version
        start = time.perf_counter()
        self.plot_pacer.refreshed()
        times, values = history.arrays()
        self.plots.update(times, values, since=segment_start(times, history))
        self.plot_canvas.update()
        self.plot_pacer.spent(time.perf_counter() - start)

    def _plots_on_screen(self) -> bool:
        return on_screen(self.plot_dock)

    def _update_status(self) -> None:
        m = self.model
        now = time.perf_counter()
        elapsed = max(now - self._counters["t"], 1e-9)
        labels = self.status_labels
        device = m.device_name if m.backend_name == "cuda" else "CPU (NumPy)"
        labels["backend"].setText(f"backend: {device}")
        labels["lattice"].setText(f"{m.title}: {self._describe()}")
        labels["step"].setText(f"step {m.step_count:,}")
        if self.running:
            labels["steps_per_s"].setText(f"{self._counters['steps'] / elapsed:,.1f} steps/s")
            labels["frames_per_s"].setText(f"{self._counters['frames'] / elapsed:,.1f} frames/s")
        else:
            labels["steps_per_s"].setText("paused")
            labels["frames_per_s"].setText("")
        self._show_background_work_if_due()
        if self.preparer.busy:
            labels["lattice"].setText(f"preparing {self.preparer.what} ({self.preparer.elapsed():.1f} s)...")
        self._counters.update(steps=0, frames=0, t=now)

    # ==== screenshots ===========================================================================
    def capture(self, what: str = "view") -> np.ndarray:
        """RGBA uint8 image: the canvas as drawn ("view"), one pixel per cell ("cells"), or the whole window
        ("window")."""
        if what == "view":
            self.field_view.before_render()      # render() emits no draw event: give CUDA's textures back to GL
            return self.lattice_canvas.render(alpha=False)
        if what == "cells":
            return self._cells_image()
        if what == "window":
            # the layouts asked for by texts that grew since the last pass of the event loop, done first: after a
            # frame of many steps (Steps / frame auto, a CUDA window's default) the status bar's label still had
            # the width of "step 0" and a scripted screenshot read "step 3" for step 300 (issue 41)
            QtWidgets.QApplication.sendPostedEvents(None, QtCore.QEvent.Type.LayoutRequest)
            self._complete_cached_pictures()
            image = self.grab().toImage().convertToFormat(QtGui.QImage.Format.Format_RGBA8888)
            width, height = image.width(), image.height()
            raw = np.frombuffer(image.constBits(), np.uint8).reshape(height, image.bytesPerLine())
            return raw[:, :width * 4].reshape(height, width, 4).copy()
        raise ValueError(f"what: must be one of {', '.join(EXPORT_KINDS)}; got {what!r}")

    def _complete_cached_pictures(self) -> None:
        """Finish, at once, the pictures of the cached canvases on screen (the live plots, the docks' plots) whose
        redraw is spread over paints: a picture of the window shows them complete. A scripted run's screenshot
        (``--screenshot-what window --quit``) was taken while the live plots' first picture was still being drawn,
        and showed an empty plot dock."""
        for widget in self.findChildren(QtWidgets.QWidget):
            canvas = getattr(widget, "_vispy_canvas", None)
            if not isinstance(canvas, RegionCachedCanvas) or not widget.isVisible():
                continue
            if not (canvas.stale or canvas.full_draws == 0):
                continue
            budget, canvas.budget_s = canvas.budget_s, None     # no budget: the whole picture in one draw
            try:
                canvas.update()
                widget.repaint()
            finally:
                canvas.budget_s = budget

    def _cells_image(self) -> np.ndarray:
        rgba = self.picture().colours()
        if rgba.ndim == 3:
            return rgba
        L = rgba.shape[0]
        layout = UnfoldLayout(L)
        width, height = layout.extent
        image = np.empty((height, width, 4), np.uint8)
        image[:] = palette.rgba_bytes(palette.BACKGROUND)
        for z in range(L):
            x0, y0 = (int(v) for v in layout.tile_origin(z))
            image[y0:y0 + L, x0:x0 + L] = rgba[z]
        return image

    def default_export_name(self) -> str:
        m = self.model
        shape = "x".join(str(n) for n in m.shape)
        scalars = "-".join(f"{k}{v:.4g}" for k, v in m.params.model_dump().items()
                           if isinstance(v, float) and m.params.fields()[k]["applies"] == "live")
        return f"latticelab-{m.name}-{shape}-{scalars}-step{m.step_count}.png".replace("--", "-")

    def export_screenshot(self, path, what: str = "view", confirm: bool = True) -> Path | None:
        """Write a PNG. An existing file is replaced only if the user agrees (``confirm``); otherwise
        (scripted use) a free name beside it is chosen. Returns the path written, or None."""
        path = Path(path)
        if path.suffix.lower() != ".png":
            path = path.with_name(path.name + ".png")
        overwrite = False
        if path.exists():
            if confirm:
                if not confirm_replace(self, path):
                    self.show_message(f"not exported: {path.name} exists and was kept")
                    return None
                overwrite = True
            else:
                path = io.free_path(path)
        try:
            io.write_png(path, self.capture(what), overwrite=overwrite)
        except OSError as exc:
            self._warn("Export failed", f"could not write {path}: {exc.strerror or exc}")
            return None
        self.prefs.set("folders/export", str(path.parent.resolve()))
        self.show_message(f"exported {path}")
        return path

    def _file_dialog(self, title: str, folder_key: str, name: str, filters: list[str], save: bool):
        folder = self.prefs.get(folder_key) or str(Path.cwd())
        options = QtWidgets.QFileDialog.Option.DontConfirmOverwrite   # we ask ourselves, once
        start = str(Path(folder) / name)
        if save:
            return QtWidgets.QFileDialog.getSaveFileName(self, title, start, ";;".join(filters), options=options)
        return QtWidgets.QFileDialog.getOpenFileName(self, title, folder, ";;".join(filters))

    def export_dialog(self) -> None:
        filters = list(EXPORT_KINDS.values())
        path, chosen = self._file_dialog("Export screenshot", "folders/export", self.default_export_name(),
                                         filters, save=True)
        if path:
            what = next((k for k, v in EXPORT_KINDS.items() if v == chosen), "view")
            self.export_screenshot(path, what, confirm=True)

    # ==== save / load ===========================================================================
    def save_state(self, path, confirm: bool = True) -> Path | None:
        if self.stepper.busy:   # the arrays are being written by the worker: save the state after its batch
            self._when_idle(lambda: self.save_state(path, confirm), "save")
            return None
        path = Path(path)
        if path.suffix.lower() != state.SUFFIX:
            path = path.with_name(path.name + state.SUFFIX)
        overwrite = False
        if path.exists():
            if confirm:
                if not confirm_replace(self, path):
                    self.show_message(f"not saved: {path.name} exists and was kept")
                    return None
                overwrite = True
            else:
                path = io.free_path(path)
        try:
            state.save_state(path, self.model, overwrite=overwrite)
        except OSError as exc:
            self._warn("Save failed", f"could not write {path}: {exc.strerror or exc}")
            return None
        self.prefs.set("folders/state", str(path.parent.resolve()))
        self.show_message(f"saved state at step {self.model.step_count} to {path}")
        return path

    def load_state(self, path) -> bool:
        """Resume from a file, switching to the model it holds; a damaged file is reported and the running
        simulation is left untouched."""
        if self._busy():
            self._when_idle(lambda: self.load_state(path), "load")
            return True
        try:
            model = state.load_state(path, backend=self.runner.backend)
        except (state.StateError, ParameterError, BackendError, MemoryError) as exc:
            self._warn("Cannot load state", f"not loaded: {exc}")
            return False
        except Exception as exc:   # anything else a foreign file may trigger: report, keep running
            self._warn("Cannot load state", f"not loaded: {path}: {type(exc).__name__}: {exc}")
            return False
        self.runner.load(model)
        self.prefs.set("folders/state", str(Path(path).parent.resolve()))
        self._after_model_change()
        self.show_message(f"loaded {path} ({self.model.title}, step {self.model.step_count})")
        return True

    def save_dialog(self) -> None:
        m = self.model
        shape = "x".join(str(n) for n in m.shape)
        name = f"latticelab-{m.name}-{shape}-step{m.step_count}.npz"
        path, _ = self._file_dialog("Save state", "folders/state", name, ["Saved states (*.npz)"], save=True)
        if path:
            self.save_state(path, confirm=True)

    def load_dialog(self) -> None:
        path, _ = self._file_dialog("Load state", "folders/state", "", ["Saved states (*.npz)", "All files (*)"],
                                    save=False)
        if path:
            self.load_state(path)
