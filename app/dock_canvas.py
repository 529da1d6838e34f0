"""The docks' VisPy canvases: made alike (``make_canvas``), redrawn a region at a time when cached (``redraw``,
``continue_while_stale``), and painted only while their dock is on screen (``paint_only_when_shown``): Qt keeps a
dock behind another tab "visible" and would paint its GL widget there for nothing anyone sees.
"""
from __future__ import annotations

from typing import Callable

from PySide6 import QtCore, QtWidgets
from vispy import scene

from latticelab.render.cached_canvas import RegionCachedCanvas

PLOT_BACKGROUND = (0.08, 0.08, 0.1, 1.0)
DOCK_DRAW_BUDGET_S = 0.006   # a cached dock canvas draws this much of a redraw per paint (at least one region)


def make_canvas(name: str, size: tuple[int, int], minimum: tuple[int, int],
                bgcolor=PLOT_BACKGROUND, cached: bool = False) -> scene.SceneCanvas:
    """A VisPy canvas for a dock (no key bindings, shown once placed in a layout), its Qt widget named ``name``,
    painted only while its dock is on screen (``paint_only_when_shown``). ``cached``: a canvas of line plots
    (render/spectral.py ``_Plot``, whose parts register as regions) that keeps its picture and redraws it a
    budget's worth of regions per paint (render/cached_canvas.py), so that no paint of the dock takes much longer
    than a frame (a whole draw of the Signal dock's four plots took 40-50 ms on the H100, 60-75 ms on llvmpipe);
    the owner calls ``redraw(canvas)`` when its plots changed."""
    if cached:
        canvas = RegionCachedCanvas(keys=None, app="pyside6", bgcolor=bgcolor, size=size, show=False,
                                    budget_s=DOCK_DRAW_BUDGET_S)
        canvas.events.draw.connect(lambda event: continue_while_stale(canvas), position="last")
    else:
        canvas = scene.SceneCanvas(keys=None, app="pyside6", bgcolor=bgcolor, size=size, show=False)
    canvas.native.setObjectName(name)
    canvas.native.setMinimumSize(*minimum)
    paint_only_when_shown(canvas)
    return canvas


def redraw(canvas, *plots) -> None:
    """The plots of ``canvas`` changed (``plots``: only these, render/spectral.py ``_Plot``s): they are drawn again
    (spread over paints on a cached canvas, a region at a time)."""
    if isinstance(canvas, RegionCachedCanvas):
        if plots:
            for plot in plots:
                for part in plot.data_parts:
                    canvas.invalidate(part)
        else:
            canvas.invalidate_regions()
    canvas.update()


def continue_while_stale(canvas) -> None:
    """After a paint of a cached canvas that left regions to draw, the next paint comes at the next pass of the
    event loop (the frames in between run as usual)."""
    if canvas.stale:
        QtCore.QTimer.singleShot(0, canvas.native, canvas.update)    # not called once the widget is gone


def _dock_of(widget) -> QtWidgets.QDockWidget | None:
    while widget is not None and not isinstance(widget, QtWidgets.QDockWidget):
        widget = widget.parentWidget()
    return widget


def on_screen(dock: QtWidgets.QDockWidget) -> bool:
    """Whether any of ``dock`` is seen (Qt calls a dock behind another tab visible)."""
    return dock.isVisible() and not dock.visibleRegion().isEmpty()


def paint_only_when_shown(canvas: scene.SceneCanvas) -> None:
    """Hold a dock canvas's paint requests while its dock is behind another tab, and paint once when its tab is
    brought to the front. Qt keeps a tabified dock "visible" behind the current tab and paints a GL widget there
    whenever it is asked to: a hidden Spectrum or Graph dock was painted at each change of its scene (50-130 ms
    each on llvmpipe, measured with bench responsiveness), for nothing anyone sees.

    VisPy asks for a paint through ``SceneCanvas.update`` (thousands of calls a second while transforms change);
    only a call that would schedule a paint looks at the dock, and a held one marks the canvas as pending, so
    the calls after it return at once, as while a paint is pending."""
    original = canvas.update
    held = {"dock": None}

    def shown() -> bool:
        dock = held["dock"] or _dock_of(canvas.native)
        if dock is None:
            return True                     # not in a dock (yet): as VisPy would
        if held["dock"] is None:
            held["dock"] = dock
            dock.visibilityChanged.connect(seen_changed)
            canvas.native.setUpdatesEnabled(on_screen(dock))
        return on_screen(dock)

    def seen_changed(visible: bool) -> None:
        # Qt itself paints every GL widget of a tab group when it lays the group out again (a dock added to it,
        # raised or removed), those behind the current tab too: 10-14 ms each on the H100 and on llvmpipe, in the
        # paint of the window that showed the Signal dock in a switch to the cortex (bench window --trace). Its
        # paint events are off while the dock is not seen (Qt paints it when they are turned on again).
        canvas.native.setUpdatesEnabled(bool(visible))
        if visible:
            QtCore.QTimer.singleShot(0, held["dock"], release)

    def release() -> None:
        if canvas._update_pending and not canvas._drawing:
            canvas._update_pending = False
            original()

    def update(node=None) -> None:
        if canvas._drawing or canvas._update_pending:
            return                          # what VisPy's update does then
        if not shown():
            canvas._update_pending = True   # held: painted when the tab comes to the front
            return
        original(node)

    canvas.update = update
    # found as soon as the canvas is placed in a dock (not at its first update, which may come much later: the
    # Graph dock's canvas is updated only when a graph is measured)
    canvas.native.installEventFilter(_WhenPlaced(canvas.native, shown))


class _WhenPlaced(QtCore.QObject):
    """Calls ``placed()`` when the watched widget gets a new parent or is shown."""

    def __init__(self, widget: QtWidgets.QWidget, placed: Callable[[], object]):
        super().__init__(widget)
        self._placed = placed

    def eventFilter(self, watched, event) -> bool:
        if event.type() in (QtCore.QEvent.Type.ParentChange, QtCore.QEvent.Type.Show):
            self._placed()
        return False
