"""The window makes the live plots' glyphs and the other registered models' forms and plots while idle
(app/model_lifecycle.py stage_ahead), a slice per frame as for a switch, so that a first switch to one stages
nothing; what it made is frozen and full collections run again once it is done (app/collector.py). Nothing here
is timed: steps are counted."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from latticelab.sim.models import all_models  # noqa: E402


@pytest.mark.parametrize("running", [True, False])
def test_the_other_models_are_made_ahead_and_a_first_switch_stages_nothing(make_window, qtbot, running):
    from latticelab.app.collector import freeze_after_start
    window = make_window(running=running)
    window.background_builds = True            # switches built on the worker, their pieces staged
    freeze_after_start(window)
    window.lifecycle.ahead_from = 0.0                   # at once, not STAGE_AHEAD_AFTER_S after start-up
    window.stage_ahead = True
    window.timer.start()                       # as a window that was just shown (the frame loop runs)
    qtbot.waitUntil(lambda: window.staged_ahead, timeout=120000)
    others = [cls for cls in all_models().values() if cls is not type(window.model)]
    assert others
    for cls in others:
        assert cls in window.lifecycle.plot_sets                                   # its live plots
        assert window.controls.stage_form(cls.Params) is None             # its form: nothing left to make
    assert not window.collector.held                                      # released, what was made frozen
    from latticelab.render.plots import GLYPHS, TEXT_FACE
    font = window.lifecycle.plot_fonts.get_font(TEXT_FACE)                         # every glyph the plots may show,
    assert all(char in font._glyphs for char in GLYPHS)                  # rendered before any text needs it
    for cls in others:
        window.staging.log = []
        assert window.switch_model(cls.name)
        qtbot.waitUntil(lambda: window.model.name == cls.name, timeout=90000)
        assert window.staging.log == []                                   # nothing was left to make at the switch


def test_without_making_ahead_a_first_switch_stages_the_form_and_plots(make_window, qtbot):
    window = make_window(running=True)          # stage_ahead off, as the tests' windows are
    window.background_builds = True
    other = next(cls for cls in all_models().values() if cls is not type(window.model))
    qtbot.wait(100)
    assert other not in window.lifecycle.plot_sets
    window.staging.log = []
    assert window.switch_model(other.name)
    qtbot.waitUntil(lambda: window.model.name == other.name, timeout=90000)
    staged = {key for _n, key, _what in window.staging.log}
    assert ("form", other.name) in staged and ("plots", other.name) in staged


def test_the_hidden_docks_first_shows_are_prepared_ahead(make_window, qtbot):
    """Behind their tabs, the Graph and Study docks are prepared while the window is idle, a step per slice:
    their glyphs rendered, the Study dock's plot made (it used to be made at its first show), each visual drawn
    once offscreen. The first show then makes nothing, and the cached canvas draws its picture a part per paint."""
    window = make_window()
    window.lifecycle.ahead_from = 0.0                   # at once, not STAGE_AHEAD_AFTER_S after start-up
    window.lifecycle.ahead = []                         # the other models' forms and plots: another test's
    graph, study = window.graph_panel, window.study_panel
    made = {}
    for dock in (graph, study):
        def recorded(steps=dock.ahead_steps, name=dock.objectName()):
            for what in steps():
                made.setdefault(name, []).append((window.staging.slices, what))
                yield what
        dock.ahead_steps = recorded
    assert study.canvas is None and not graph.prepared_ahead
    window.stage_ahead = True
    window.timer.start()                       # as a window that was just shown (the frame loop runs)
    qtbot.waitUntil(lambda: window.staged_ahead, timeout=60000)
    for dock in (graph, study):
        assert dock.prepared_ahead and not dock.on_screen()
        steps = [what for _slice, what in made[dock.objectName()]]
        assert "glyphs" in steps and any(what.startswith("drew ") for what in steps)
        # the program showing the cached picture compiled too (its first paint compiled it: 11 ms on llvmpipe)
        assert "drew the cached picture's program" in steps and dock.canvas._blit is not None
        slices = [n for n, _what in made[dock.objectName()]]
        assert len(set(slices)) > 5                                # spread over many slices, not one
    assert any(what.startswith("plot ") for _slice, what in made["study_dock"])
    canvas, plot = study.canvas, study.plot
    assert canvas is not None and plot is not None
    study.show()
    study.raise_()
    qtbot.waitUntil(study.on_screen, timeout=10000)
    qtbot.waitUntil(lambda: canvas.full_draws > 0 and not canvas.stale, timeout=20000)
    assert study.canvas is canvas and study.plot is plot         # nothing made again at the show
    picture = canvas.render()[..., :3]
    assert picture.std() > 5                                     # its axes and labels, not a blank canvas


def test_an_unseen_prepared_dock_follows_its_tabs_size_and_its_first_show_resizes_nothing(make_window, qtbot):
    """The group of tabs changes size after the docks behind it were prepared (a dock beside it came or went, or
    the user dragged its edge): a prepared dock that is not seen takes the new size while it waits, so that its
    first show neither resizes its canvas nor lays its grids out again."""
    from PySide6 import QtCore
    window = make_window()
    window.lifecycle.ahead_from = 0.0
    window.lifecycle.ahead = []
    study, plots = window.study_panel, window.plot_dock
    window.stage_ahead = True
    window.timer.start()
    qtbot.waitUntil(lambda: window.staged_ahead, timeout=60000)
    qtbot.waitUntil(lambda: study.size() == plots.size(), timeout=10000)
    before = plots.size()
    window.resizeDocks([plots], [before.width() + 120], QtCore.Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: plots.size() != before, timeout=5000)
    assert study.size() != plots.size()                          # Qt moved only the tab in front
    qtbot.waitUntil(lambda: study.size() == plots.size(), timeout=10000)
    native = study.canvas.native
    size_before_show = native.size()

    class Resizes(QtCore.QObject):
        count = 0

        def eventFilter(self, watched, event):
            if event.type() == QtCore.QEvent.Type.Resize:
                Resizes.count += 1
            return False

    counter = Resizes()
    native.installEventFilter(counter)
    study.raise_()
    qtbot.waitUntil(study.on_screen, timeout=10000)
    qtbot.wait(300)
    native.removeEventFilter(counter)
    assert Resizes.count == 0 and native.size() == size_before_show
