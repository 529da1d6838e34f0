"""The docks' plots are made a piece per step, and the Spectrum dock shows a new result a piece per draw and is
prepared while hidden a step per timer tick (issue 16: no frame waits long for them on a software renderer).
Steps and draws are counted; nothing is timed."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtCore  # noqa: E402
from vispy import scene  # noqa: E402

from latticelab.render.signal_plots import TimePlot  # noqa: E402
from latticelab.render.spectral import _Plot, nice_ceiling  # noqa: E402


def test_a_plot_made_in_steps_is_the_plot_made_at_once(qtbot):
    canvas = scene.SceneCanvas(keys=None, app="pyside6", show=False)
    grid = canvas.central_widget.add_grid()
    steps = TimePlot.in_steps(grid.add_grid(row=0, col=0), "rate", "t", "Hz", {0: (1, 0, 0, 1)})
    names = []
    while True:
        try:
            names.append(next(steps))
        except StopIteration as made:
            plot = made.value
            break
    assert names == ["title", "y axis", "view", "x axis", "lines"]
    at_once = TimePlot(grid.add_grid(row=1, col=0), "rate", "t", "Hz", {0: (1, 0, 0, 1)})
    for made in (plot, at_once):
        made.set_data(np.arange(5.0), {0: np.arange(5.0) ** 2})
    assert plot.title.text == at_once.title.text == "rate"
    assert plot.y_axis.axis.axis_label == at_once.y_axis.axis.axis_label == "Hz"
    assert tuple(plot.view.camera.rect.size) == tuple(at_once.view.camera.rect.size)
    np.testing.assert_array_equal(plot.lines[0].pos, at_once.lines[0].pos)


def test_a_plot_with_its_own_init_is_made_in_one_step(qtbot):
    class Own(_Plot):
        def __init__(self, grid):
            super().__init__(grid, "own", "x", "y")
            self.extra = True

    canvas = scene.SceneCanvas(keys=None, app="pyside6", show=False)
    steps = Own.in_steps(canvas.central_widget.add_grid())
    assert next(steps) == "Own"
    with pytest.raises(StopIteration) as made:
        next(steps)
    assert made.value.value.extra and made.value.value.title.text == "own"


def test_nice_ceiling():
    assert [nice_ceiling(v) for v in (0.9, 1.0, 1.01, 3.3, 47.0, 0.0071)] == pytest.approx(
        [1.0, 1.0, 1.2, 4.0, 50.0, 0.008])


def test_the_signal_dock_makes_each_plot_a_piece_per_step(make_window, qtbot):
    window = make_window()
    panel = window.signal_panel
    names = list(panel._plot_steps())
    for plot in ("signal_plot", "spectrum_plot", "probe_plot", "rate_plot"):
        assert [n for n in names if n.startswith(plot)] == [f"{plot} cell", f"{plot} title", f"{plot} y axis",
                                                            f"{plot} view", f"{plot} x axis",
                                                            f"{plot} {'line' if plot == 'spectrum_plot' else 'lines'}"]
        assert isinstance(getattr(panel, plot), _Plot)


def _spectrum_window(make_window, qtbot, **params):
    window = make_window(**params)
    qtbot.waitExposed(window)
    return window, window.spectral_panel


def test_the_hidden_spectrum_dock_is_prepared_a_few_steps_per_tick(make_window, qtbot):
    window, panel = _spectrum_window(make_window, qtbot, dim=3, L=16)
    assert not panel.on_screen()
    fired = []
    probe = QtCore.QTimer(interval=1, timerType=QtCore.Qt.TimerType.PreciseTimer)
    probe.timeout.connect(lambda: fired.append(len(panel.prepared_steps)))
    probe.start()
    try:
        qtbot.waitUntil(lambda: "3D view" in panel.prepared_steps and panel._prepare_iter is None, timeout=30000)
    finally:
        probe.stop()
    steps = list(panel.prepared_steps)
    assert steps.count("glyphs") >= 5 and "3D view" in steps
    assert panel._spectrum_ndim == 3              # the first show finds its 3D view made
    # the event loop ran between the steps: the probe saw the count of steps done grow in many small increments
    seen = sorted(set(fired))
    assert len(seen) >= 4 and seen[0] < len(steps)
    font = panel.fonts.get_font("OpenSans")
    assert all(c in font._glyphs for c in "|FFT| of spins, box edge")


def test_the_hidden_spectrum_dock_takes_its_tabs_size_so_its_first_show_resizes_nothing(make_window, qtbot):
    """The last steps of the hidden dock's preparation give it the size of the tab it shares with the live plots
    and lay its canvas out there: raised, its canvas is neither resized nor laid out again (both cost a paint of
    it inside the frame that shows it)."""
    window, panel = _spectrum_window(make_window, qtbot, dim=3, L=16)
    qtbot.waitUntil(lambda: any(step.startswith("sized") for step in panel.prepared_steps)
                    and panel._prepare_iter is None, timeout=30000)
    assert panel.size() == window.plot_dock.size()
    resized = []
    panel.canvas.events.resize.connect(lambda event: resized.append(tuple(event.size)))
    panel.raise_()
    qtbot.waitUntil(panel.on_screen, timeout=10000)
    qtbot.waitUntil(lambda: panel._draws > 2, timeout=20000)
    assert resized == []
    assert tuple(panel.canvas.central_widget.size) == tuple(panel.canvas.size)


def test_the_hidden_spectrum_dock_waits_while_the_window_changes_model(make_window, qtbot):
    """Its preparation for a new dimension takes no step while the window settles (the new model built, its pieces
    made, the first moment after the swap: MainWindow.settling), and is made after that."""
    window, panel = _spectrum_window(make_window, qtbot, dim=3, L=16)
    qtbot.waitUntil(lambda: "3D view" in panel.prepared_steps and panel._prepare_iter is None, timeout=30000)
    window.background_builds = True               # built on the worker, as large models are
    window.settle_after_swap_s = 1.0              # as on a GPU (on the CPU only while the model is built)
    samples = []                                   # (settling, steps made for 2D so far)
    probe = QtCore.QTimer(interval=1, timerType=QtCore.Qt.TimerType.PreciseTimer)
    probe.timeout.connect(lambda: samples.append(
        (window.settling(), sum(step.startswith("2D") for step in panel.prepared_steps))))
    probe.start()
    try:
        assert window.set_parameter("dim", 2)
        qtbot.waitUntil(lambda: len(window.model.shape) == 2, timeout=60000)
        qtbot.waitUntil(lambda: "2D view" in panel.prepared_steps and panel._prepare_iter is None, timeout=30000)
    finally:
        probe.stop()
    settling = [made for held, made in samples if held]
    assert len(settling) > 50 and settling[-1] == 0   # it settled for a while, and nothing was made meanwhile
    assert samples[-1] == (False, sum(step.startswith("2D") for step in panel.prepared_steps))
    assert panel._spectrum_ndim == 2


def test_the_spectrum_view_of_another_dimension_is_made_in_two_steps_and_a_dropped_one_is_made_again(make_window,
                                                                                                     qtbot):
    """The view for another dimension is made a piece per preparation step (its ViewBox, then its visuals); a
    preparation dropped between them (the dock shown meanwhile) leaves the grid's cell empty, and the next
    ``_begin_dimension`` makes the view in it, even for the dimension the old view had."""
    from latticelab.render.isosurface import SpectrumIsoView
    window, panel = _spectrum_window(make_window, qtbot, dim=2, L=16)
    panel.prepare_timer.stop()
    panel._begin_dimension(2)
    panel._finish_view()
    old_view, old_cell = panel._spectrum_view, panel.main_cell
    steps = panel._dimension_steps(3)
    assert next(steps) == "view box"
    assert panel.main_cell is not old_cell and panel._spectrum_view is old_view    # the old view until the new one
    assert list(steps) == ["camera", "surface", "box", "label", "staging"]         # the 3D view a visual a step
    assert panel._spectrum_view is not old_view and isinstance(panel._spectrum_view, SpectrumIsoView)
    steps = panel._dimension_steps(2)
    next(steps)                                     # dropped after its ViewBox
    panel._begin_dimension(3)                       # the dimension of the view in hand: made again all the same
    panel._finish_view()
    assert isinstance(panel._spectrum_view, SpectrumIsoView) and panel._spectrum_view.view is panel.main_cell
    assert panel.main_cell.parent is not None       # the view is in the grid, not in a ViewBox taken out of it


def test_a_dock_shown_before_its_view_is_made_makes_it_a_step_per_tick(make_window, qtbot):
    """Shown right after a change of dimension, before its hidden preparation made the view for it, the dock makes
    that view a step per pass of the event loop while its first spectrum computes, not all in the pass that
    starts the job, and shows the spectrum in it."""
    from latticelab.render.isosurface import SpectrumIsoView
    window, panel = _spectrum_window(make_window, qtbot, dim=2, L=16)
    qtbot.waitUntil(lambda: "2D view" in panel.prepared_steps and panel._prepare_iter is None, timeout=30000)
    panel.prepare_timer.stop()                      # nothing prepared for the new dimension
    assert window.set_parameter("dim", 3)
    qtbot.waitUntil(lambda: len(window.model.shape) == 3, timeout=60000)
    passes = [0]
    probe = QtCore.QTimer(interval=1, timerType=QtCore.Qt.TimerType.PreciseTimer)
    probe.timeout.connect(lambda: passes.__setitem__(0, passes[0] + 1))
    made = []                                       # (what, probe firings so far)
    steps_of = panel._dimension_steps

    def recorded_steps(ndim):
        for what in steps_of(ndim):
            made.append((what, passes[0]))
            yield what
        made.append(("view", passes[0]))
    panel._dimension_steps = recorded_steps
    started = []
    request = panel.request
    panel.request = lambda force=False: started.append((request(force), len(made))) or started[-1][0]
    probe.start()
    try:
        panel.show()
        panel.raise_()
        qtbot.waitUntil(lambda: any(ok for ok, _ in started), timeout=15000)
        qtbot.waitUntil(lambda: panel._view_steps is None and not panel.computing and not panel._pending,
                        timeout=30000)
    finally:
        probe.stop()
    assert [what for what, _ in made] == ["view box", "camera", "surface", "box", "label", "staging", "view"]
    assert [n for ok, n in started if ok] == [0]    # the job started before the view's steps (passes of their own)
    # the event loop ran between the first two steps (the rest may be made at once when the first spectrum is shown
    # before they are: on a GPU it comes within a few passes)
    assert made[1][1] > made[0][1]
    view = panel._spectrum_view
    assert isinstance(view, SpectrumIsoView) and view.view is panel.main_cell and view.volume is not None
    assert "view" in [name for _, name in panel.pieces_shown]


def test_a_new_spectrum_is_shown_a_piece_per_draw(make_window, qtbot):
    window, panel = _spectrum_window(make_window, qtbot, dim=2, L=32)
    panel.show()
    panel.raise_()
    qtbot.waitUntil(panel.on_screen, timeout=15000)
    qtbot.waitUntil(lambda: not panel.computing and not panel._pending, timeout=30000)
    window.model.step(3)
    panel.pieces_shown.clear()
    assert panel.request(force=True)
    qtbot.waitUntil(lambda: len(panel.pieces_shown) == 4 and not panel._pending, timeout=30000)
    shown = list(panel.pieces_shown)
    assert [name for _, name in shown] == ["view", "mean", "histogram", "caption"]
    draws = [draw for draw, _ in shown]
    assert draws == sorted(draws) and len(set(draws)) == 4   # a draw of the canvas between each two pieces
    assert f"step {window.model.step_count} " in panel.info.text()
    assert panel.mean_plot.data is not None and panel.caption.text.startswith("|FFT| of")
