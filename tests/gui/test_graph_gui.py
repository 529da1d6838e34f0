"""The Graph dock in the real main window (under Xvfb): the current graph's numbers, and the small-world curve
arriving point by point from a worker thread while the event loop keeps running."""
from __future__ import annotations

import time

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from latticelab.app.graph_panel import GraphPanel  # noqa: E402
from latticelab.sim.analysis import graph as G  # noqa: E402


def show_panel(window, qtbot) -> GraphPanel:
    panel = window.findChild(GraphPanel)
    assert panel is not None and window.graph_panel is panel
    panel.show()
    panel.raise_()
    qtbot.wait(50)
    return panel


def test_graph_tab_shows_the_numbers(make_window, qtbot):
    window = make_window(L=16, p=0.0, seed=2)
    panel = show_panel(window, qtbot)
    panel.refresh(force=True)
    qtbot.waitUntil(lambda: panel.result is not None, timeout=20000)
    text = panel.info.text()
    assert "256 vertices, 512 edges" in text and "C (Newman) = 0.0000" in text
    assert "square C4 = 0.1250" in text and "bipartite" in text and "exact" in text, text
    assert panel.degree_plot.data.tolist() == [0, 0, 0, 0, 256]
    assert "l = 8.031 (exact)" in text   # 16 x 16 torus: 4 per axis over all 256 targets, so 8 * 256 / 255
    assert panel.last_error == ""


def test_small_world_curve_arrives_while_the_window_runs(make_window, qtbot):
    import gc

    from latticelab.app import graph_panel
    from latticelab.app.collector import freeze_after_start
    window = make_window(L=24, p=0.05, seed=2)
    # as the application does after start-up: without it a full collection of this test process's objects (all
    # earlier tests' too) pauses the GUI thread, 0.2 s here alone, over a second in CI
    freeze_after_start(window)
    panel = show_panel(window, qtbot)
    panel.probabilities = [0.001, 0.01, 0.1, 0.5, 1.0]
    panel.curve_samples = None
    panel.refresh(force=True)
    assert panel.curve_button.isEnabled()
    ticks = []
    timer = window.startTimer(10)
    # the GUI thread's own CPU time: a gap in it is work done on that thread; time spent waiting for a core on a
    # busy machine is not counted (a wall-clock gap would be)
    window.timerEvent = lambda event: ticks.append(time.thread_time())
    calls_before = graph_panel._worker.get().calls
    try:
        assert panel.start_curve()
        assert not panel.curve_button.isEnabled() and panel.stop_button.isEnabled()
        qtbot.waitUntil(lambda: panel.curve is not None and len(panel.curve.points) == 5, timeout=60000)
    finally:
        window.killTimer(timer)
        gc.unfreeze()
    qtbot.waitUntil(lambda: panel.curve_button.isEnabled(), timeout=10000)
    # the event loop ran throughout: no tick came after more than a couple of seconds of the GUI thread's work
    # (the bound is wide because a loaded 2-core machine runs the same work several times slower; that the
    # points were measured off the GUI thread is checked below, by the worker's call count)
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert len(ticks) > 5 and max(gaps) < 2.0, max(gaps)
    p, c, l_ = panel.curve_plot.data
    assert len(p) == 5 and c[-1] < 0.5 and l_[-1] < l_[0] and panel.curve_plot.current_p == 0.05
    assert "5 of 5 points" in panel.curve_info.text() and "square" in panel.curve_info.text()
    assert window.model.params.p == 0.05
    # on NumPy the points were measured in the dock's worker process (building and measuring hold the GIL); a
    # CUDA model's curve is built on the device from a worker thread (app/graph_panel.py measure_curve_point)
    if window.model.backend_name == "numpy":
        process = graph_panel._worker.get()
        assert process.calls - calls_before >= 6 or process.failed, (process.calls, calls_before, process.failed)


def test_graph_tab_disabled_without_a_graph(make_window, qtbot):
    window = make_window(model="cahn-hilliard", dim=2, L=16)
    panel = show_panel(window, qtbot)
    assert not panel.refresh(force=True)
    assert "no interaction graph" in panel.info.text()
    assert not panel.measure_button.isEnabled() and not panel.curve_button.isEnabled()
    assert G.rewiring_field(window.model) is None


def test_the_edges_are_read_off_the_gui_thread_while_it_says_computing(make_window, qtbot, monkeypatch):
    """No edge is read on the GUI thread (3D L = 128 takes half a second): with the worker process the model's
    copy there reads them; without it, the worker thread reads them from a copy of the model."""
    import threading

    from latticelab.app import graph_panel

    window = make_window(L=16, p=0.1, seed=2)
    panel = show_panel(window, qtbot)
    qtbot.waitUntil(lambda: panel._measure_worker is None, timeout=30000)
    readers = []
    real_edges = type(window.model).edges
    monkeypatch.setattr(type(window.model), "edges",
                        lambda self: (readers.append(threading.current_thread()), real_edges(self))[1])
    for in_process in (True, False):
        monkeypatch.setattr(graph_panel, "USE_PROCESS", in_process)
        panel.result = None
        assert panel.refresh(force=True)
        assert panel.info.text() == graph_panel.COMPUTING_TEXT     # until the numbers come
        assert readers == [] or threading.main_thread() not in readers
        # the worker's result comes before its thread has finished (then the next refresh can start one)
        qtbot.waitUntil(lambda: panel.result is not None and panel._measure_worker is None, timeout=30000)
        assert "256 vertices" in panel.info.text()
    # the process read them in its own copy of the model; the worker thread read them here, off the GUI thread
    assert readers and threading.main_thread() not in readers


def test_a_cancelled_curve_point_is_not_measured_again_when_the_process_is_killed(monkeypatch):
    """The window closing kills the worker process during a curve point: the point is not computed again on the
    curve's thread (which the closing window waits for), and the curve ends there."""
    from latticelab.app import graph_panel
    from latticelab.app.stepping import ProcessGone
    from latticelab.sim.models import get_model

    class Killed:
        def call(self, *args):
            raise ProcessGone("the worker process ended during a call")

    monkeypatch.setattr(graph_panel._worker, "get", lambda: Killed())
    measured = []
    monkeypatch.setattr(G, "measure_point", lambda *args: measured.append(args))
    cls = get_model("ising")
    params = dict(cls.create(backend="numpy", dim=2, L=8, p=0.1, seed=1).params.model_dump())
    point = graph_panel.measure_curve_point(cls, params, "p", 0.1, "numpy", None, 0, cancelled=lambda: True)
    assert point is None and measured == []
    curve = G.curve_for(cls, params, "numpy", [0.1, 0.5], None,
                        measure=lambda *a: graph_panel.measure_curve_point(*a, cancelled=lambda: True))
    assert curve is None and measured == []
    # not cancelled: the point falls back to this thread, as before
    graph_panel.measure_curve_point(cls, params, "p", 0.1, "numpy", None, 0, cancelled=lambda: False)
    assert len(measured) == 1
