"""The live plots drawn through a cached picture (render/cached_canvas.py, under Xvfb): what the plot dock shows
is what a full draw of the scene gives, also when a refresh is spread over several draws; a refresh redraws only
the parts whose content changed; the window spreads it over frames while running, and over the event loop's
passes when paused.

Pixels on screen are read with ``grabFramebuffer()`` (a paint of the widget: the cached path); the reference is
``canvas.render()``, which always draws the whole scene directly.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from latticelab.app.main_window import PLOT_DRAW_BUDGET_S  # noqa: E402
from latticelab.app.raster_canvas import presents_in_raster  # noqa: E402
from latticelab.render.plots import X_AXIS  # noqa: E402

from gui_helpers import on_screen as shown  # noqa: E402


def direct(canvas) -> np.ndarray:
    """RGB of the whole scene drawn directly (no cache)."""
    return canvas.render(alpha=False).astype(int)


def differing(a: np.ndarray, b: np.ndarray) -> float:
    """The share of pixels that differ by more than rounding."""
    assert a.shape == b.shape
    return float((np.abs(a - b).max(axis=2) > 8).mean())


def complete(qtbot, canvas) -> np.ndarray:
    """What the canvas shows once every stale part is drawn (a budget's worth a paint: the window asks for the
    next paint while parts are left), read with one more paint."""
    canvas.update()
    qtbot.waitUntil(lambda: not canvas.stale, timeout=10000)
    return shown(canvas)


def run(qtbot, window, steps: int) -> None:
    done = []
    window.run_steps(steps, then=lambda: done.append(True))
    qtbot.waitUntil(lambda: bool(done), timeout=30000)


@pytest.fixture
def window(make_window, qtbot):
    w = make_window(L=16, T=2.2, seed=3)
    qtbot.waitUntil(lambda: w.plots is not None and w.plots.built, timeout=30000)
    complete(qtbot, w.plot_canvas)
    if not w.plot_canvas.caching:
        pytest.skip("the plot cache is turned off (LATTICELAB_PLOT_CACHE=off)")
    return w


def test_without_the_cache_the_canvas_draws_as_a_plain_one(make_window, qtbot):
    w = make_window(L=16, T=2.2, seed=3)
    qtbot.waitUntil(lambda: w.plots is not None and w.plots.built, timeout=30000)
    canvas = w.plot_canvas
    canvas.caching = False                        # what LATTICELAB_PLOT_CACHE=off gives
    run(qtbot, w, 30)
    assert not canvas.stale                       # nothing waits for a region redraw: the frame loop asks nothing
    picture = shown(canvas)
    assert canvas.last_draw == {"full": False, "regions": 0}
    assert differing(picture, direct(canvas)) < 0.0005


def test_cached_plots_show_what_a_full_draw_shows(window, qtbot):
    canvas = window.plot_canvas
    run(qtbot, window, 30)
    canvas.budget_s = None
    first = shown(canvas)
    assert differing(first, direct(canvas)) < 0.0005
    # lines, titles (running mean) and the time axis all changed: drawn again region by region, one per draw
    canvas.native.setUpdatesEnabled(False)     # no paint meanwhile (a fast machine would draw it all at once)
    try:
        run(qtbot, window, 30)
    finally:
        canvas.native.setUpdatesEnabled(True)
    assert canvas.stale
    canvas.budget_s = 0.0
    draws = 0
    while canvas.stale:
        image = shown(canvas)
        assert not canvas.last_draw["full"] and canvas.last_draw["regions"] == 1
        draws += 1
        assert draws < 100
    assert draws > 1
    assert differing(image, first) > 0.001           # the new data is on screen
    assert differing(image, direct(canvas)) < 0.0005  # and the picture is the one a full draw makes


def test_a_refresh_redraws_only_what_changed(window, qtbot):
    canvas, plots = window.plot_canvas, window.plots
    run(qtbot, window, 20)
    complete(qtbot, canvas)
    times, values = window.runner.history.arrays()
    plots.update(times, values)            # the same data again: nothing to draw
    assert not canvas.stale
    # one series changes its last value only, within its range: its plot area is stale, its axis is not
    def spread(key):
        finite = np.asarray(values[key], float)[-len(times):]
        finite = finite[np.isfinite(finite)]
        return np.ptp(finite) if finite.size > 1 else 0.0
    key = max((s.key for s in plots.series if not s.log), key=spread)
    assert spread(key) > 0
    changed = dict(values)
    changed[key] = np.array(values[key], float)
    low, high = np.nanmin(changed[key]), np.nanmax(changed[key])
    changed[key][-1] = low + 0.25 * (high - low) if changed[key][-1] != low + 0.25 * (high - low) else \
        low + 0.75 * (high - low)
    plots.update(times, changed)
    stale = {k for k, widget in plots.regions.items() if widget in canvas._stale}
    assert (key, "plot") in stale and (key, "y axis") not in stale and X_AXIS not in stale
    assert all(k[0] == key for k in stale)


def test_running_spreads_the_plots_over_frames_and_paused_they_come_a_part_per_paint(window, qtbot):
    canvas = window.plot_canvas
    window.set_running(True)
    assert canvas.budget_s is not None
    qtbot.waitUntil(lambda: window.model.step_count > 40, timeout=30000)
    window.set_running(False)
    assert canvas.budget_s is not None            # paused too: no paint draws a whole refresh
    qtbot.waitUntil(lambda: not canvas.stale, timeout=10000)   # what the pause left came without frames
    # the frame loop stops once nothing is left to do (on a device after the last batch's observables came):
    # from then on only the canvas's own requests bring its paints
    qtbot.waitUntil(lambda: not window.timer.isActive(), timeout=10000)
    canvas.budget_s = 0.0                         # one region per paint
    drawn = []

    def count(event):
        drawn.append(canvas.last_draw["regions"])

    canvas.events.draw.connect(count, position="last")
    try:
        canvas.invalidate_regions()               # every plot, axis and title to draw again
        regions = sum(1 for node in canvas._stale if node.visible)
        canvas.update()
        qtbot.waitUntil(lambda: not canvas.stale, timeout=10000)
    finally:
        canvas.events.draw.disconnect(count)
        canvas.budget_s = PLOT_DRAW_BUDGET_S
    assert regions > 3 and max(drawn) == 1 and sum(drawn) >= regions     # a paint for each, one at a time
    assert differing(shown(canvas), direct(canvas)) < 0.0005


def test_a_resized_canvas_draws_the_whole_scene_again_behind_the_old_picture(window, qtbot):
    canvas = window.plot_canvas
    run(qtbot, window, 10)
    before = complete(qtbot, canvas)
    full_draws = canvas.full_draws
    height, width = before.shape[:2]
    canvas.budget_s = 0.0                              # one piece a paint
    try:
        inside = []

        def count(event):
            inside.append(dict(canvas.last_draw))

        canvas.events.draw.connect(count, position="last")
        try:
            canvas.native.resize(width - 40, height - 30)   # the cached picture no longer fits: all drawn anew
            if presents_in_raster(canvas):
                assert inside == []          # a canvas shown as an image is not painted inside its resize event:
                canvas.native.repaint()      # its first paint is the window's next one
        finally:
            canvas.events.draw.disconnect(count)
        # Qt painted the widget inside its resize event (or next): that paint only showed the old picture
        assert inside == [{"full": False, "regions": 0, "after resize": True}]
        draws = 0
        while canvas.stale and draws < 200:
            image = shown(canvas)
            assert image.shape[:2] == (height - 30, width - 40)
            if canvas.stale:                           # meanwhile the old picture, pixel for pixel, top left
                assert differing(image, before[:height - 30, :width - 40]) < 0.0005
            draws += 1
    finally:
        canvas.budget_s = PLOT_DRAW_BUDGET_S
    assert draws > 3 and not canvas.stale and canvas.full_draws == full_draws + 1
    assert differing(image, direct(canvas)) < 0.0005
    assert differing(image, before[:height - 30, :width - 40]) > 0.01     # laid out anew for the new size
    canvas.budget_s = None                             # without a budget: the whole scene in the next draw
    canvas.native.resize(width, height)
    image = shown(canvas)
    assert canvas.full_draws == full_draws + 2 and image.shape[:2] == (height, width)
    assert differing(image, direct(canvas)) < 0.0005
    canvas.budget_s = PLOT_DRAW_BUDGET_S


def test_a_new_gl_context_makes_a_new_cache_without_deleting_the_old_name(window, qtbot):
    """Given a new GL context (its widget moved to another top-level window where contexts are not shared),
    the canvas forgets its framebuffer object without queueing its deletion (the name may belong to another
    framebuffer in the new context) and draws the whole scene into a new one."""
    canvas = window.plot_canvas
    run(qtbot, window, 20)
    complete(qtbot, canvas)
    old = canvas._fbo
    canvas.events.initialize()                      # what Qt's initializeGL of the new context sends
    assert canvas._fbo is None and not hasattr(old, "_glir")   # no DELETE can be queued for the old name
    picture = shown(canvas)
    assert canvas._fbo is not None and canvas._fbo is not old and canvas.last_draw["full"]
    assert differing(picture, direct(canvas)) < 0.0005


def test_other_plots_shown_while_running_are_drawn_over_several_draws_behind_the_old_picture(window, qtbot):
    """A switch shows another model's plots: the new picture is drawn into a second buffer a region or more per
    draw, the old one staying on screen until the new one is complete."""
    canvas = window.plot_canvas
    window.background_builds = False
    run(qtbot, window, 20)
    before = complete(qtbot, canvas)
    full_draws = canvas.full_draws
    assert window.switch_model("cahn-hilliard")
    assert window.plots is not None and window.plots.built
    canvas.budget_s = 0.0                           # one grid laid out, then one region (or visual), per draw
    first = shown(canvas)
    layout_draws = 0
    while canvas.last_draw.get("laying out") and layout_draws < 50:     # the new plots' grids placed first
        assert canvas.last_draw["regions"] == 0 and differing(first, before) < 0.0005
        first = shown(canvas)
        layout_draws += 1
    # the first share draws what lies outside the regions (axes' grids, backgrounds), the next ones a region each
    assert canvas.last_draw.get("rebuilding") and canvas.last_draw["regions"] == 0
    assert differing(first, before) < 0.0005        # the Ising plots stay on screen meanwhile
    draws, in_parts = 1, 0
    while canvas.stale and draws < 400:
        image = shown(canvas)
        # a region or more per draw; a region never drawn before on this canvas a visual at a time (its programs
        # are compiled at its first draw), so some draws only draw visuals of one
        assert canvas.last_draw["regions"] >= 1 or canvas.last_draw.get("parts", 0) >= 1
        assert not canvas.last_draw.get("full")
        in_parts += bool(canvas.last_draw.get("parts"))
        if canvas.stale:                            # meanwhile the Ising plots stay on screen
            assert differing(image, before) < 0.0005
        draws += 1
    assert in_parts >= 1       # the Cahn-Hilliard plots' regions are new here: drawn a visual per draw at budget 0
    assert draws > 5 and not canvas.stale and canvas.full_draws == full_draws + 1
    assert differing(image, before) > 0.01          # the Cahn-Hilliard plots are on screen now
    assert differing(image, direct(canvas)) < 0.0005   # as a full draw of the scene shows them

