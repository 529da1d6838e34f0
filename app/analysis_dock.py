"""What the analysis docks (app/graph_panel.py, signal_panel.py, coarsening_panel.py, study_panel.py) share:
the dock and its body, plot canvases and message lines made alike, the model the dock follows, the refresh
timer and the throttled redraw (only while the dock is on screen, only when something changed), showing and
hiding with what the running model can do, stopping with the window, and the dock's place in the main window
(a tab beside the live plots, ``window.<name>_panel``; the View menu lists it from the window's docks,
app/view_menu.py).

Nothing here names a model or a capability: each panel says which models it is for (``CapabilityDock``'s
``_set_available``) and what it draws.
"""
from __future__ import annotations

import logging
from typing import Callable

from PySide6 import QtCore, QtWidgets
from vispy import scene

from latticelab.render.plots import one_font_manager

PLOT_BACKGROUND = (0.08, 0.08, 0.1, 1.0)
RIGHT = QtCore.Qt.DockWidgetArea.RightDockWidgetArea


def make_canvas(name: str, size: tuple[int, int], minimum: tuple[int, int],
                bgcolor=PLOT_BACKGROUND) -> scene.SceneCanvas:
    """A VisPy canvas for a dock (no key bindings, shown once placed in a layout), its Qt widget named ``name``."""
    canvas = scene.SceneCanvas(keys=None, app="pyside6", bgcolor=bgcolor, size=size, show=False)
    canvas.native.setObjectName(name)
    canvas.native.setMinimumSize(*minimum)
    return canvas


def info_label(name: str, selectable: bool = False) -> QtWidgets.QLabel:
    """A dock's wrapped message line, which never widens the dock."""
    label = QtWidgets.QLabel("", objectName=name, wordWrap=True)
    label.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
    if selectable:
        label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class AnalysisDock(QtWidgets.QDockWidget):
    """A dock of the analysis panels. A subclass sets its own state after ``__init__`` here, then calls
    ``_start``, which builds its body (``_build``) and starts its refresh timer."""

    def __init__(self, title: str, name: str, parent=None, model_source: Callable[[], object] | None = None):
        super().__init__(title, parent, objectName=name)
        self.model_source = model_source
        self.last_error = ""
        self.timer: QtCore.QTimer | None = None

    def _start(self, refresh_ms: int | None = None, when_shown: Callable[[], object] | None = None) -> None:
        """Build the body (its text through one font manager); call ``when_shown`` soon after each time the dock
        is shown; ``refresh`` every ``refresh_ms``."""
        with one_font_manager():
            self._build()
        if when_shown is not None:
            self.visibilityChanged.connect(lambda visible: visible and QtCore.QTimer.singleShot(0, when_shown))
        if refresh_ms is not None:
            self.timer = QtCore.QTimer(self, interval=refresh_ms)
            self.timer.timeout.connect(self.refresh)
            self.timer.start()

    def _build(self) -> None:
        raise NotImplementedError

    def _body(self) -> QtWidgets.QVBoxLayout:
        """The dock's widget, a column with small margins; returns its layout."""
        body = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(body)
        layout.setContentsMargins(4, 4, 4, 4)
        self.setWidget(body)
        return layout

    # ==== the model ============================================================================
    def _model(self):
        try:
            return self.model_source()
        except Exception:   # the window may be rebuilding its model
            return None

    def on_screen(self) -> bool:
        return self.isVisible() and not self.visibleRegion().isEmpty()

    # ==== closing ==============================================================================
    def shutdown(self) -> None:
        """Stop the refresh timer (the window is closing); a subclass stops its workers too."""
        if self.timer is not None:
            self.timer.stop()

    def eventFilter(self, watched, event) -> bool:
        """Installed on the window (``install_dock(..., stop_with_window=True)``): its closing shuts the dock
        down first."""
        if event.type() == QtCore.QEvent.Type.Close and watched is self.parent():
            self.shutdown()
        return False


class CapabilityDock(AnalysisDock):
    """A dock for the models with some capability (``_set_available``): shown (its plots made first, by
    ``_plots``) when such a model arrives, hidden for one without. ``refresh`` takes the model's new data
    (``_take``, also while the dock is hidden) and draws (``_draw``) only while the dock is on screen and the
    key ``_take`` returns differs from ``_drawn`` (what ``_draw`` sets), or when forced; a failure is logged
    and shown in ``info``, and the window goes on."""
    RAISE_WHEN_AVAILABLE = False     # raised above the other tabs when it becomes available
    READ_WHILE_STEPPING = True       # False: nothing is read while a worker steps the model (after its batch)
    WHAT = "analysis"                # in messages: "<WHAT> update failed: ...", logged as "<WHAT> panel"

    def __init__(self, title: str, name: str, window):
        super().__init__(title, name, window, model_source=lambda: window.model)
        self.window = window
        self.available = False       # read by the View menu (app/view_menu.py ``applies``)
        self._identity = None        # id() of the model the record is of
        self._drawn = None           # the key of what was drawn last

    def _plots(self) -> None:
        raise NotImplementedError

    def _take(self, model):
        raise NotImplementedError

    def _draw(self, model) -> None:
        raise NotImplementedError

    def _set_available(self, model) -> None:
        raise NotImplementedError

    def _show_for(self, available: bool) -> None:
        """Shown when the model became one this dock is for; hidden for one it is not for (also after the
        window restored a layout that showed it)."""
        if available != self.available:
            self.available = available
            if available:
                self._plots()
                self.show()
                if self.RAISE_WHEN_AVAILABLE:
                    self.raise_()
        if not available and not self.isHidden():
            self.hide()

    def _draw_now(self) -> None:
        self.refresh(force=True)

    def stepping(self) -> bool:
        """Whether a worker is stepping the window's model now (its arrays are not to be read)."""
        stepper = getattr(self.window, "stepper", None)
        return stepper is not None and stepper.busy

    def refresh(self, force: bool = False) -> bool:
        """Take the model's new data; redraw when shown and something changed (or when forced). Returns
        whether it drew."""
        model = self._model()
        if model is None:
            return False
        self._set_available(model)
        if not self.available:
            self._identity = None
            return False
        if not self.READ_WHILE_STEPPING and self.stepping():
            return False
        try:
            key = self._take(model)
            if not self.on_screen() or (not force and self._drawn == key):
                return False
            self._draw(model)
        except Exception as exc:   # keep the window running; say what went wrong
            self.last_error = f"{self.WHAT} update failed: {type(exc).__name__}: {exc}"
            logging.getLogger(type(self).__module__).exception(f"{self.WHAT} panel")
            self.info.setText(self.last_error)
            return False
        return True


def install_dock(window, panel: AnalysisDock, attribute: str, area=RIGHT, *,
                 stop_with_window: bool = False) -> AnalysisDock:
    """Add ``panel`` to a main window as ``window.<attribute>``: a tab beside the live plots (``plot_dock``) when
    the window has them, shut down when the application quits and, with ``stop_with_window``, when the window
    closes (its workers are waited for first). A ``CapabilityDock`` starts hidden and looks at the model once
    the window restored its layout."""
    window.addDockWidget(area, panel)
    plots = getattr(window, "plot_dock", None)
    if isinstance(plots, QtWidgets.QDockWidget):
        window.tabifyDockWidget(plots, panel)
        plots.raise_()
    if isinstance(panel, CapabilityDock):
        panel.hide()
        QtCore.QTimer.singleShot(0, panel.refresh)   # after the window restored its layout
    if stop_with_window:
        window.installEventFilter(panel)
    setattr(window, attribute, panel)
    app = QtWidgets.QApplication.instance()
    if app is not None:
        app.aboutToQuit.connect(panel.shutdown)
    return panel
