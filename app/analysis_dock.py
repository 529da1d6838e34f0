"""What the analysis docks (app/graph_panel.py, signal_panel.py, coarsening_panel.py, study_panel.py) share:
the dock and its body, plot canvases (app/dock_canvas.py) and message lines made alike, the model the dock
follows, the refresh timer and the throttled redraw (only while the dock is on screen, only when something
changed), showing and hiding with what the running model can do, stopping with the window, and the dock's
place in the main window (a tab beside the live plots; the View menu lists it from the window's docks,
app/view_menu.py).

Nothing here names a model or a capability: each panel says which models it is for (``CapabilityDock``'s
``_set_available``) and what it draws.
"""
from __future__ import annotations

import contextlib
import logging
import time
from typing import Callable

from PySide6 import QtCore, QtWidgets

from latticelab.app.dock_canvas import make_canvas, on_screen, redraw  # noqa: F401  (the docks import them here)
from latticelab.app.dock_host import RIGHT, DockHost
from latticelab.app.stepping import ModelAccess
from latticelab.render.cached_canvas import RegionCachedCanvas
from latticelab.render.plots import glyph_steps, one_font_manager, warm_up_steps, with_font_manager

PLACEMENT_SPACING_S = 0.06   # after a dock appeared or went, the next one appears this much later (a few frames)
CANVAS_AFTER_DOCK_MS = 20    # a dock's canvas is shown this long after the dock (a paint of the window between)
TAB_SIZE_CHECK_MS = 400     # how often an unseen prepared dock compares its size with its tab's


def labelled_steps(pieces, label: str):
    """Run ``pieces`` (a plot's ``in_steps``, render/spectral.py), yielding each piece's name after ``label``;
    returns what it returns (the plot): ``plot = yield from labelled_steps(Plot.in_steps(...), "name")``."""
    while True:
        try:
            piece = next(pieces)
        except StopIteration as made:
            return made.value
        yield f"{label} {piece}"


class SteadyLabel(QtWidgets.QLabel):
    """A wrapped label whose height only grows while its width stays: a text one line shorter than the last
    leaves the space it had. A dock's message that alternates between "computing…" and a two-line result would
    otherwise change the layout each time, and every change resizes the dock's GL canvas, which redraws all of
    it at the new size (150-280 ms for the 3D spectrum on software GL, measured with bench responsiveness).
    A new width (the user resizing the dock) lets it take the height its text needs again. ``lines``: the
    height held from the start, in lines of text."""

    def __init__(self, *args, lines: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.reserved = max(1, int(lines)) * self.fontMetrics().lineSpacing()
        self.setMinimumHeight(self.reserved)

    def setText(self, text: str) -> None:
        super().setText(text)
        self._hold_height()

    def _hold_height(self) -> None:
        if self.width() < 40:      # not laid out yet: no width to wrap at
            return
        needed = self.heightForWidth(self.width())
        if needed > self.minimumHeight():
            self.setMinimumHeight(needed)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.setMinimumHeight(self.reserved)
            self._hold_height()


def info_label(name: str, selectable: bool = False, lines: int = 1) -> QtWidgets.QLabel:
    """A dock's wrapped message, which never widens the dock nor, by changing its text, makes it relayout
    (``SteadyLabel``, ``lines`` high at least)."""
    label = SteadyLabel("", objectName=name, wordWrap=True, lines=lines)
    label.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
    if selectable:
        label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def class_has(model_class, *capabilities) -> bool:
    """Whether ``model_class`` declares one of the ``capabilities`` (sim/model.py protocols) on the class itself.
    The protocols have data members, which ``issubclass`` refuses; the class object is checked as an instance
    instead (each member looked up on it). A member a model only sets in ``__init__`` is not seen: its dock's
    plots are then made at the swap rather than ahead."""
    return any(isinstance(model_class, c) for c in capabilities)


def tab_size(dock: QtWidgets.QDockWidget) -> QtCore.QSize | None:
    """The size ``dock`` gets once shown as a tab of its group on screen: the group's current tab's (the live
    plots' group for a hidden dock, which is in no group); None for a floating dock or a group not on screen."""
    window = dock.parentWidget()
    if dock.isFloating() or not isinstance(window, QtWidgets.QMainWindow):
        return None                                # its own window keeps the size the user gave it
    plots = window.findChild(QtWidgets.QDockWidget, "plot_dock")   # the group install_dock put it in (a hidden
    group = window.tabifiedDockWidgets(dock)                         # dock has none)
    if not group and isinstance(plots, QtWidgets.QDockWidget) and not plots.isFloating() \
            and window.dockWidgetArea(plots) == window.dockWidgetArea(dock):
        group = [plots]
    for other in group:
        if on_screen(other):
            return other.size()
    return None


def take_a_tabs_size(dock: QtWidgets.QDockWidget) -> None:
    """Before ``dock`` is shown as a tab of a group on screen: take the size of the group's current tab, which it
    gets once shown. Shown at another size, Qt laid its widgets out twice (the canvas at its least size, then
    at the tab's), and a GL canvas is painted at each resize (Qt's QOpenGLWidget does: 13-14 ms each on the
    H100 in a switch to the cortex, bench window --trace)."""
    size = tab_size(dock)
    if size is not None:
        dock.resize(size)
        dock.layout().activate()            # its widgets placed now, hidden: one resize event each at the show


def sized_steps(dock: QtWidgets.QDockWidget, canvas):
    """Steps giving a hidden ``dock`` the size its tab will give it (``take_a_tabs_size``), its body laid out, and
    ``canvas``'s grids laid out at that size (a cached canvas: a budget's worth a step), so that its first show
    neither resizes the canvas nor places a cell."""
    take_a_tabs_size(dock)
    body = dock.widget()
    if body is not None and body.layout() is not None:
        # the dock's layout sized its body, whose own layout waits for the body's show to place the canvas
        body.layout().invalidate()
        body.layout().activate()
    if isinstance(canvas, RegionCachedCanvas):
        yield from canvas.lay_out_hidden(canvas.budget_s)
    else:
        yield "sized"


class AnalysisDock(QtWidgets.QDockWidget):
    """A dock of the analysis panels. A subclass sets its own state after ``__init__`` here, then calls
    ``_start``, which builds its body (``_build``) and starts its refresh timer. A dock with plots keeps their
    VisPy canvas in ``canvas``; the window prepares its first show while idle (``ahead_steps``)."""
    _showing_next = False        # (CapabilityDock) its plots are being made for a show that follows at once

    def __init__(self, title: str, name: str, parent=None, model_source: Callable[[], object] | None = None):
        super().__init__(title, parent, objectName=name)
        self.model_source = model_source
        self.last_error = ""
        self.timer: QtCore.QTimer | None = None
        self._tab_size_timer: QtCore.QTimer | None = None   # ``_follow_tab_size``'s (made in ``_start``)
        self.canvas = None
        self.fonts = None            # the font manager every text of the dock shares (glyphs rendered once)
        self.prepared_ahead = False  # ``ahead_steps`` ran to the end
        self._resizing = None        # the steps taking the size of the dock's tab (``_follow_tab_size``), or None

    def _start(self, refresh_ms: int | None = None, when_shown: Callable[[], object] | None = None) -> None:
        """Build the body (its text through one font manager); call ``when_shown`` soon after each time the dock
        is shown; ``refresh`` every ``refresh_ms``."""
        with one_font_manager() as fonts:
            self.fonts = fonts
            self._build()
        if when_shown is not None:
            self.visibilityChanged.connect(lambda visible: visible and QtCore.QTimer.singleShot(0, self, when_shown))
        if refresh_ms is not None:
            self.timer = QtCore.QTimer(self, interval=refresh_ms)
            self.timer.timeout.connect(self.refresh)
            self.timer.start()
        self._tab_size_timer = QtCore.QTimer(self, interval=TAB_SIZE_CHECK_MS)
        self._tab_size_timer.timeout.connect(self._follow_tab_size)
        self._tab_size_timer.start()

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
        return on_screen(self)

    # ==== its first show, prepared ahead ======================================================
    def ahead_steps(self):
        """Steps that prepare the hidden dock's first show, for the window to run a slice per frame while idle
        (app/main_window.py ``_stage_ahead``): the glyphs its text may show, its canvas made where it is made
        late (``_canvas_steps``), each visual drawn once offscreen, the dock at its tab's size. Without them the
        first show of the Graph dock drew its canvas in one 250 ms paint on llvmpipe (shaders compiled, glyphs
        rendered), and the Study dock's made its plot and drew it in 200 ms (3D L=128 paused, 2 cores). They stop
        when the dock is shown meanwhile: its own paints then do what is left."""
        if (yield from self._glyph_steps()):
            return
        for what in self._canvas_steps():
            yield what
        if self.canvas is None or self.on_screen():
            return
        for steps in (self._warm_steps(), self._sized_steps()):
            for what in steps:
                yield what
                if self.on_screen():
                    return
        self.prepared_ahead = True

    def _glyph_steps(self):
        """The glyphs the dock's text may show, a step each; returns True when the dock was shown meanwhile
        (``shown = yield from self._glyph_steps()``)."""
        for what in glyph_steps(self.fonts) if self.fonts is not None else ():
            yield what
            if self.on_screen():
                return True
        return False

    def _canvas_steps(self):
        """The steps making ``canvas`` and its plots, for a dock that makes them after ``_build``."""
        return iter(())

    def _warm_steps(self):
        """Draw each visual of the (hidden) canvas once offscreen, so the first draw on screen finds its shaders
        compiled and its glyphs uploaded. A canvas never shown has no GL context yet: grabbing its (empty,
        small) framebuffer makes one first; until then its visuals must not be drawn (they would be made in
        another canvas's context)."""
        canvas = self.canvas
        native = canvas.native
        if not hasattr(native, "grabFramebuffer") or not self.window_is_shown():
            return
        if not native.isVisible():
            scene_visible = canvas.scene.visible
            canvas.scene.visible = False          # the grab only makes the context: nothing drawn yet
            try:
                native.grabFramebuffer()
            finally:
                canvas.scene.visible = scene_visible
            yield "context"
        for drawn in warm_up_steps(canvas, canvas.scene):
            yield f"drew {drawn}"

    def _sized_steps(self):
        """Last, while the dock is still hidden: the size its tab will give it, and the canvas's grids laid out
        at that size a piece per step, so that its first show places no cell. VisPy places every cell of a grid
        whose rectangle changed, and each placement updates the transforms of every visual inside: the Signal
        dock's grids were laid out in each of its first three paints after a switch to the cortex, 7-18 ms
        each on the H100's host (bench window --trace)."""
        canvas = self.canvas
        if canvas.native.isVisible() or not self.window_is_shown():
            return
        if self._showing_next:
            return      # made at its show (not ahead): laid out in the paints after it, a budget's worth each
        yield from sized_steps(self, canvas)

    def _follow_tab_size(self) -> None:
        """(timer) While the dock waits unseen with its first show prepared, keep it at the size its tab would give
        it, a step per tick (``sized_steps``). The group's size changes when docks beside it appear or go (with a
        model or a dimension): the Study dock, prepared at 335x499, was resized to its tab's 370x754 in the frame
        that first showed it, its canvas's grids laid out again there (94-114 ms on llvmpipe, 2 cores, bench
        responsiveness). Qt keeps a tab behind another "visible" (moved off the window), so the canvas takes the
        resize at once, without painting (``paint_only_when_shown``)."""
        if self._resizing is not None:
            if next(self._resizing, None) is None:
                self._resizing = None
                self._tab_size_timer.setInterval(TAB_SIZE_CHECK_MS)
            return
        prepared = self.prepared_ahead or getattr(self, "plots_made", False)
        if not prepared or self.canvas is None or self.on_screen() or not self.window_is_shown():
            return
        size = tab_size(self)
        if size is not None and size != self.size():
            self._resizing = sized_steps(self, self.canvas)
            self._tab_size_timer.setInterval(0)        # the next steps at the next passes of the event loop

    def window_is_shown(self) -> bool:
        top = self.parentWidget()
        return top is not None and top.isVisible()

    # ==== closing ==============================================================================
    def shutdown(self) -> None:
        """Stop the timers (the window is closing); a subclass stops its workers too."""
        if self.timer is not None:
            self.timer.stop()
        if self._tab_size_timer is not None:
            self._tab_size_timer.stop()

    def eventFilter(self, watched, event) -> bool:
        """Installed on the window (``install_dock(..., stop_with_window=True)``): its closing shuts the dock
        down first."""
        if event.type() == QtCore.QEvent.Type.Close and watched is self.parent():
            self.shutdown()
        return False


class CapabilityDock(AnalysisDock):
    """A dock for the models with some capability (``_set_available``; ``applies_to`` for a model class): shown
    (its plots made first, by ``_plots``) when such a model arrives, hidden for one without. The plots are made
    by the generator ``_plot_steps`` a piece per step, so the window can make them ahead, a slice per frame,
    while the next model is built (``stage_for``, app/staging.py), and draw each visual once offscreen: the
    swap then only shows the dock. ``refresh`` takes the model's new data
    (``_take``, also while the dock is hidden) and draws (``_draw``) only while the dock is on screen and the
    key ``_take`` returns differs from ``_drawn`` (what ``_draw`` sets), or when forced; a failure is logged
    and shown in ``info``, and the window goes on."""
    RAISE_WHEN_AVAILABLE = False     # raised above the other tabs when it becomes available
    READ_WHILE_STEPPING = True       # False: nothing is read while a worker steps the model (after its batch)
    WHAT = "analysis"                # in messages: "<WHAT> update failed: ...", logged as "<WHAT> panel"

    def __init__(self, title: str, name: str, window: DockHost):
        super().__init__(title, name, window, model_source=lambda: window.model)
        self.window = window
        self.available = False       # read by the View menu (app/view_menu.py ``applies``)
        self._identity = None        # id() of the model the record is of
        self._drawn = None           # the key of what was drawn last
        self.canvas = None           # the plot canvas, made with the plots
        self._plot_iter = None       # the steps making the plots, shared by ``_plots`` and ``stage_for``
        self._showing_next = False   # ``_plots`` is making them for a show that follows at once
        self.placements = DockPlacements()   # the window's, once installed (install_dock)
        self.plots_made = False
        # a refresh declined while the worker steps the model is made again right after its batch
        self.access = ModelAccess(window)

    def applies_to(self, model_class) -> bool:
        """Whether models of ``model_class`` have what this dock shows."""
        raise NotImplementedError

    def _plot_steps(self):
        """Make the canvas (``self.canvas``) and its plots, yielding after each piece."""
        raise NotImplementedError

    def _plots(self) -> None:
        """Make the plots now (what was not made ahead yet), for a show that follows at once."""
        self._showing_next = True
        try:
            for _ in self._plot_pieces():
                pass
        finally:
            self._showing_next = False

    def _plot_pieces(self):
        if self._plot_iter is None:
            self._plot_iter = self._made_and_warmed()
        return self._plot_iter

    def _made_and_warmed(self):
        with one_font_manager() as fonts:
            pieces = self._plot_steps()
        # each piece's text shares the one font manager (glyphs rendered once)
        yield from with_font_manager(pieces, fonts)
        self.plots_made = True
        yield from self._warm_steps()
        yield from self._sized_steps()

    def ahead_steps(self):
        """None here: the plots are made, warmed and sized ahead for a coming model they apply to (``stage_for``)."""
        return iter(())

    def stage_for(self, model_class):
        """The steps that make this dock's plots ahead for a coming ``model_class`` model (None: it does not
        apply, or they are made)."""
        if self.plots_made or not self.applies_to(model_class):
            return None
        return self._plot_pieces()

    def _canvas_steps_into(self, layout: QtWidgets.QBoxLayout, name: str, size, minimum):
        """Three steps: the dock's cached plot canvas (``canvas``, its GL widget), its grid, and its place at the
        top of ``layout``; returns the grid (``grid = yield from self._canvas_steps_into(...)``)."""
        self.canvas = make_canvas(name, size, minimum, cached=True)
        yield "canvas"
        grid = self.canvas.central_widget.add_grid(spacing=2, margin=4)
        yield "grid"
        layout.insertWidget(0, self.canvas.native, 1)
        yield "placed"
        return grid

    def _take(self, model):
        raise NotImplementedError

    def _draw(self, model) -> None:
        raise NotImplementedError

    def _set_available(self, model) -> None:
        raise NotImplementedError

    def _show_for(self, available: bool) -> None:
        """Shown when the model became one this dock is for; hidden for one it is not for (also after the
        window restored a layout that showed it)."""
        if available and not self.available:
            wait = self.placements.wait_s()
            if wait > 0:          # another dock changed a moment ago: this one appears a few frames later
                QtCore.QTimer.singleShot(int(1000 * wait) + 1, self, self.refresh)
                return
        if available != self.available:
            self.available = available
            if available:
                self._plots()
                take_a_tabs_size(self)
                with self._canvas_after_dock():
                    self.show()
                    if self.RAISE_WHEN_AVAILABLE:
                        self.raise_()
                self.placements.placed()
        if not available and not self.isHidden():
            on_top = self.on_screen()
            self.hide()
            self.placements.placed()
            plots = self.window.plot_dock
            if on_top:
                # the live plots take its place, not whichever tab Qt picks (a dock shown for the first time
                # draws its canvas for the first time: hundreds of ms on a software renderer)
                plots.raise_()

    @contextlib.contextmanager
    def _canvas_after_dock(self):
        """Showing a dock, and raising it above the other tabs, each made Qt paint its GL canvas at once, inside
        the call (two whole draws of the Signal dock, 100-150 ms each on llvmpipe, in the frame of a switch to the
        cortex), and the window's paint that shows the dock held the canvas's first resize and paint as well (on
        the H100 the two together made a 60-80 ms gap of that switch, bench window --trace). The canvas is hidden
        meanwhile, keeping its place in the layout, and shown ``CANVAS_AFTER_DOCK_MS`` later: its first resize
        and paint fall into a later paint of the window, and its one draw is with the model's data (a draw asked
        for at once would show the plots still empty, and the data would cost a second whole draw)."""
        if self.canvas is None:
            yield
            return
        native = self.canvas.native
        policy = native.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        native.setSizePolicy(policy)
        native.hide()
        try:
            yield
        finally:
            # with the dock as context: not called if the dock is gone by then (a window closed meanwhile)
            QtCore.QTimer.singleShot(CANVAS_AFTER_DOCK_MS, self, self._show_canvas)

    def _show_canvas(self) -> None:
        if self.canvas is not None:
            self.canvas.native.show()
        self._draw_now()

    def _draw_now(self) -> None:
        if self.refresh(force=True) or self.canvas is None:
            return
        if not self.READ_WHILE_STEPPING and self.stepping():
            return        # declined while a batch runs: it draws right after the batch, with the data (retry)
        redraw(self.canvas)          # nothing new to draw: at least the plots as they are

    def stepping(self) -> bool:
        """Whether a worker is stepping the window's model now (its arrays are not to be read)."""
        return self.access.busy()

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
            self.access.retry(lambda: self.refresh(force))
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


class DockPlacements:
    """When a dock of the window last appeared or went. A model switch changes several docks, each at its own
    refresh; those that fell into one pass of the event loop were composed by Qt in one paint of the window with
    every canvas they resized (bench window --trace, llvmpipe: 130 ms for the Signal dock shown as the
    Coarsening dock went, 60-70 ms for one). A dock that would appear sooner than ``PLACEMENT_SPACING_S`` after
    the last change waits that long (``wait_s``); going is never held (the dock would otherwise read a model it
    is not for) but counts as a change."""

    def __init__(self):
        self.last = -float("inf")

    def wait_s(self) -> float:
        return max(0.0, self.last + PLACEMENT_SPACING_S - time.perf_counter())

    def placed(self) -> None:
        self.last = time.perf_counter()


def place_dock(window: QtWidgets.QMainWindow, dock: QtWidgets.QDockWidget, area=RIGHT,
               plots: QtWidgets.QDockWidget | None = None) -> None:
    """Add ``dock`` to ``window`` in ``area``: a tab beside ``plots`` (the live plots) when given, which stay in
    front."""
    window.addDockWidget(area, dock)
    if plots is not None:
        window.tabifyDockWidget(plots, dock)
        plots.raise_()


def install_dock(window: DockHost, panel: AnalysisDock, name: str, area=RIGHT, *,
                 stop_with_window: bool = False) -> AnalysisDock:
    """Add ``panel`` to a main window (``window.add_dock``: a tab beside the live plots), shut down when the
    application quits and, with ``stop_with_window``, when the window closes (its workers are waited for first).
    A ``CapabilityDock`` starts hidden, has its plots made ahead for a coming model it applies to (in the window's
    staging under ``name``), and looks at the model once the window restored its layout. Returns ``panel``."""
    window.add_dock(panel, area)
    if isinstance(panel, CapabilityDock):
        panel.hide()
        panel.placements = window.dock_placements
        window.staging.followers.append((name, panel.stage_for))
        QtCore.QTimer.singleShot(0, panel, panel.refresh)   # after the window restored its layout
    if stop_with_window:
        window.installEventFilter(panel)
    app = QtWidgets.QApplication.instance()
    if app is not None:
        app.aboutToQuit.connect(panel.shutdown)
    return panel
