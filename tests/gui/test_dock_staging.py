"""The analysis docks of the next model are made ahead too (app/analysis_dock.py ``stage_for``, app/staging.py
followers): their plots a piece per staging step and each visual drawn once offscreen, all before the swap;
a dock that goes away gives its place to the live plots; and the collector's start-up freeze (app/gui.py)
lets go of a first model that sits in a reference cycle. Nothing here is timed: steps and slices are counted.
"""
from __future__ import annotations

import gc
import weakref

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from latticelab.app.raster_canvas import presents_in_raster  # noqa: E402


@pytest.fixture
def window(make_window):
    w = make_window(running=True)
    w.background_builds = True
    return w


def switch_and_record(window, qtbot, monkeypatch, name: str) -> dict:
    """Switch to ``name`` on the worker; what the signal and coarsening docks had when the swap began."""
    seen = {}
    after = window.lifecycle.after_model_change

    def recorded():
        for attribute in ("signal_panel", "coarsening_panel"):
            panel = getattr(window, attribute)
            seen[attribute] = {"made": panel.plots_made, "canvas": panel.canvas, "shown": panel.isVisible()}
        seen["staging_busy"] = window.staging.busy
        return after()

    monkeypatch.setattr(window.lifecycle, "after_model_change", recorded)
    assert window.switch_model(name)
    qtbot.waitUntil(lambda: window.model.name == name, timeout=90000)
    monkeypatch.setattr(window.lifecycle, "after_model_change", after)
    return seen


def steps_of(window, key) -> list[tuple[int, str]]:
    return [(number, what) for number, k, what in window.staging.log if k == key]


@pytest.mark.parametrize("model, attribute", [("cortex", "signal_panel"), ("cahn-hilliard", "coarsening_panel")])
def test_a_model_docks_plots_are_made_and_drawn_ahead_of_the_swap(window, qtbot, monkeypatch, model, attribute):
    panel = getattr(window, attribute)
    assert panel.canvas is None and not panel.plots_made
    seen = switch_and_record(window, qtbot, monkeypatch, model)
    # at the swap the dock's plots were made, while the dock itself was still hidden
    assert not seen["staging_busy"]
    assert seen[attribute]["made"] and seen[attribute]["canvas"] is not None and not seen[attribute]["shown"]
    steps = steps_of(window, (attribute, model))
    whats = [what for _number, what in steps]
    assert "canvas" in whats
    # its canvas got a GL context of its own, then every visual was drawn once into an offscreen buffer
    assert "context" in whats
    drawn = [w for w in whats if w.startswith("drew ")]
    assert any("Label" in w for w in drawn) and any("AxisWidget" in w for w in drawn)
    # the making was split: several steps, over several frame-loop slices
    assert len(steps) >= 6 and len({number for number, _what in steps}) >= 3
    # the swap showed the dock with the canvas made ahead (not a new one)
    qtbot.waitUntil(lambda: panel.isVisible(), timeout=10000)
    assert panel.canvas is seen[attribute]["canvas"]
    # the other dock was not made for a model it does not apply to
    other = "coarsening_panel" if attribute == "signal_panel" else "signal_panel"
    assert not steps_of(window, (other, model)) and getattr(window, other).canvas is None


def test_showing_a_dock_paints_no_whole_scene_inside_the_switch(window, qtbot, monkeypatch):
    """Qt paints a GL canvas at once when its dock is shown and again when it is raised; the canvas is hidden
    through both (app/analysis_dock.py ``_canvas_after_dock``), so nothing of its scene is drawn inside them.
    Until the model's data is drawn, a paint draws no whole scene either:
    the Signal dock's canvas draws its first picture a budget's worth of regions per paint
    (app/analysis_dock.py make_canvas(cached=True); a paint can come before the data when the first refresh
    waits for a batch of steps in flight)."""
    panel = window.signal_panel
    inside, draws = {"on": False}, []
    show_for = panel._show_for

    def recorded(available):
        if available and panel.canvas is not None and not draws:
            canvas = panel.canvas
            canvas.events.draw.connect(lambda event: draws.append((inside["on"], canvas.scene.visible,
                                                                   panel._drawn is not None,
                                                                   bool(canvas.last_draw.get("full")))),
                                       position="last")
        inside["on"] = True
        try:
            return show_for(available)
        finally:
            inside["on"] = False

    monkeypatch.setattr(panel, "_show_for", recorded)
    switch_and_record(window, qtbot, monkeypatch, "cortex")
    qtbot.waitUntil(lambda: any(visible and data for _inside, visible, data, _full in draws), timeout=10000)
    assert not any(during and visible for during, visible, _data, _full in draws)
    assert not any(visible and not data and full for _during, visible, data, full in draws)


def test_a_dock_on_top_that_goes_away_gives_its_place_to_the_live_plots(window, qtbot, monkeypatch):
    switch_and_record(window, qtbot, monkeypatch, "cortex")
    panel = window.signal_panel
    qtbot.waitUntil(lambda: panel.on_screen(), timeout=10000)     # raised when its model arrives
    switch_and_record(window, qtbot, monkeypatch, "ising")
    qtbot.waitUntil(lambda: panel.isHidden(), timeout=10000)
    qtbot.waitUntil(lambda: window.frames.plots_on_screen(), timeout=10000)


def test_switching_back_makes_nothing_again(window, qtbot, monkeypatch):
    switch_and_record(window, qtbot, monkeypatch, "cortex")
    canvas = window.signal_panel.canvas
    switch_and_record(window, qtbot, monkeypatch, "ising")
    assert window.signal_panel.stage_for(type(window.model)) is None      # not for the Ising model
    seen = switch_and_record(window, qtbot, monkeypatch, "cortex")
    assert seen["signal_panel"]["made"]
    assert window.signal_panel.canvas is canvas


def test_the_start_up_freeze_lets_go_of_a_first_model_in_a_reference_cycle(make_window, qtbot):
    from latticelab.app.collector import freeze_after_start
    window = make_window(running=False)
    window.background_builds = False
    first = window.model
    first._cycle = first               # only the cycle collector could free it
    gone = weakref.ref(first)
    del first
    try:
        freeze_after_start(window)
        assert gc.get_freeze_count() > 0
        assert window.switch_model("cahn-hilliard")
        qtbot.waitUntil(lambda: gone() is None, timeout=20000)
        assert gc.get_freeze_count() > 0            # frozen again after that one collection
    finally:
        gc.unfreeze()


class CanvasEvents:
    """Resize and Paint events of the dock canvases, by canvas name (an application-wide event filter)."""

    def __init__(self):
        from PySide6 import QtCore, QtWidgets

        class Filter(QtCore.QObject):
            def eventFilter(inner, watched, event):
                kind = event.type()
                if (kind in (QtCore.QEvent.Type.Resize, QtCore.QEvent.Type.Paint)
                        and isinstance(watched, QtWidgets.QWidget) and watched.objectName().endswith("_canvas")):
                    self.events.append((watched.objectName(), kind.name,
                                        (event.size().width(), event.size().height())
                                        if kind == QtCore.QEvent.Type.Resize else None))
                return False

        self.events: list[tuple[str, str, tuple | None]] = []
        self.filter = Filter()
        QtWidgets.QApplication.instance().installEventFilter(self.filter)

    def stop(self) -> None:
        from PySide6 import QtWidgets
        QtWidgets.QApplication.instance().removeEventFilter(self.filter)

    def of(self, name: str, kind: str) -> list:
        return [size for canvas, k, size in self.events if canvas == name and k == kind]


def test_a_dock_shown_as_a_tab_is_laid_out_once_and_the_tabs_behind_are_not_painted(window, qtbot, monkeypatch):
    """Qt's QOpenGLWidget paints at every resize, and Qt paints every GL widget of a tab group it lays out again.
    The Signal dock, shown as a tab of the live plots' group, takes that tab's size first: its canvas is resized
    once, to its size on screen, and shown a moment after the dock (so the paint of the window that shows the dock
    is not also the canvas's first); the Spectrum and Graph docks' canvases behind other tabs get no paint."""
    window.show()
    qtbot.waitUntil(lambda: window.plot_dock.visibleRegion().isEmpty() is False, timeout=10000)
    behind = [d for d in (window.spectral_panel, window.graph_panel) if d.isVisible() and d.visibleRegion().isEmpty()]
    assert behind, "the Spectrum and Graph docks should be tabs behind the live plots"
    panel = window.signal_panel
    show_for, canvas_seen = panel._show_for, []

    def recorded(available):
        show_for(available)
        if available and panel.isVisible() and not canvas_seen:
            canvas_seen.append(panel.canvas.native.isVisible())

    monkeypatch.setattr(panel, "_show_for", recorded)
    events = CanvasEvents()
    try:
        switch_and_record(window, qtbot, monkeypatch, "cortex")
        qtbot.waitUntil(lambda: panel.on_screen() and panel._drawn is not None, timeout=20000)
        qtbot.wait(200)
    finally:
        events.stop()
    native = panel.canvas.native
    assert canvas_seen == [False] and native.isVisible()    # the canvas came after the dock, in a later paint
    assert events.of("signal_canvas", "Resize") == [(native.width(), native.height())]
    for dock in behind:
        assert not events.of(dock.canvas.native.objectName(), "Paint"), dock.objectName()


def test_a_floating_dock_shown_again_keeps_the_size_the_user_gave_it(window, qtbot, monkeypatch):
    switch_and_record(window, qtbot, monkeypatch, "cortex")
    panel = window.signal_panel
    qtbot.waitUntil(lambda: panel.isVisible(), timeout=20000)
    panel.setFloating(True)
    panel.resize(480, 520)
    qtbot.wait(300)
    size = (panel.width(), panel.height())
    assert size != (window.plot_dock.width(), window.plot_dock.height())
    switch_and_record(window, qtbot, monkeypatch, "ising")
    qtbot.waitUntil(lambda: panel.isHidden(), timeout=20000)
    switch_and_record(window, qtbot, monkeypatch, "cortex")
    qtbot.waitUntil(lambda: panel.isVisible(), timeout=20000)
    qtbot.wait(100)
    assert panel.isFloating() and (panel.width(), panel.height()) == size


def test_the_paint_qt_makes_inside_a_dock_canvas_first_resize_draws_no_plots(window, qtbot, monkeypatch):
    """Qt paints a GL widget inside the resize that first shows it. For a cached canvas whose first picture is
    not begun, that paint shows the background only (render/cached_canvas.py): no grid is laid out and no plot
    drawn inside the resize; the picture is made in the paints after it."""
    panel = window.signal_panel
    draws, inside = [], {"show": False}
    show_canvas = panel._show_canvas

    def recorded():
        canvas = panel.canvas
        canvas.events.draw.connect(lambda event: draws.append((inside["show"], dict(canvas.last_draw),
                                                               canvas.full_draws)), position="last")
        inside["show"] = True
        try:
            canvas.native.show()             # the resize (and Qt's paint inside it) happens here
        finally:
            inside["show"] = False
        show_canvas()

    monkeypatch.setattr(panel, "_show_canvas", recorded)
    switch_and_record(window, qtbot, monkeypatch, "cortex")
    qtbot.waitUntil(lambda: bool(draws) and draws[-1][2] >= 1, timeout=20000)     # its first whole picture
    in_resize = [d for during, d, _n in draws if during]
    if not presents_in_raster(panel.canvas):
        assert in_resize          # a QOpenGLWidget is painted inside the resize (a canvas shown as an image is not)
    assert all(d == {"full": False, "regions": 0, "after resize": True} for d in in_resize)
    assert not any(during for during, _d, _n in draws[len(in_resize):])
    assert any(d.get("regions") or d.get("full") for _during, d, _n in draws)   # the picture came after


def test_a_dock_made_ahead_is_laid_out_at_its_tabs_size_and_its_first_show_places_no_cell(window, qtbot,
                                                                                          monkeypatch):
    """The last staging steps of a dock (still hidden) take the size its tab will give it and lay its canvas's
    grids out at that size; the paints after its canvas is shown, its first picture among them, find no grid to
    lay out again (each placement updates the transforms of every visual inside the grid)."""
    from latticelab.render import cached_canvas
    window.show()
    qtbot.waitUntil(lambda: not window.plot_dock.visibleRegion().isEmpty(), timeout=10000)
    panel = window.signal_panel
    pending_on_screen = []
    real = cached_canvas.layout_pending

    def recorded(grid):
        pending = real(grid)
        if panel.canvas is not None and grid.canvas is panel.canvas and panel.canvas.native.isVisible():
            pending_on_screen.append(pending)
        return pending

    monkeypatch.setattr(cached_canvas, "layout_pending", recorded)
    switch_and_record(window, qtbot, monkeypatch, "cortex")
    steps = [what for _number, what in steps_of(window, ("signal_panel", "cortex"))]
    assert "sized" in steps and steps[-1] == "grids laid out"
    canvas = panel.canvas
    qtbot.waitUntil(lambda: canvas.native.isVisible() and canvas.full_draws >= 1, timeout=20000)
    assert canvas.central_widget.size == (canvas.native.width(), canvas.native.height())
    assert pending_on_screen and not any(pending_on_screen)


def test_the_live_plots_going_behind_another_tab_are_not_painted_and_are_painted_again_in_front(window, qtbot):
    """Qt painted the live plots' canvas as its tab went behind another (11-17 ms on llvmpipe in that frame, for
    nothing seen): it gets no paint while behind, and a paint once its tab is in front again."""
    window.show()
    plots, graph = window.plot_dock, window.graph_panel
    qtbot.waitUntil(lambda: not plots.visibleRegion().isEmpty(), timeout=10000)
    assert graph in window.tabifiedDockWidgets(plots)
    qtbot.wait(300)
    events = CanvasEvents()
    try:
        graph.raise_()
        qtbot.waitUntil(graph.on_screen, timeout=10000)
        qtbot.wait(300)
        behind = list(events.of("plot_canvas", "Paint"))
        plots.raise_()
        qtbot.waitUntil(lambda: len(events.of("plot_canvas", "Paint")) > len(behind), timeout=10000)
    finally:
        events.stop()
    assert plots.visibleRegion().isEmpty() is False
    assert behind == []
