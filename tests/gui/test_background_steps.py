"""Steps longer than a frame run on a worker thread (app/stepping.py): the window keeps processing events
while one is in flight, defers what needs the model, and takes the batch when it is in.

No timing: the worker's step is held on an Event, so "slow" is as long as the test wants, on any machine."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from latticelab.app import main_window as main_window_module
from latticelab.app.stepping import BIG_MODEL_CELLS, wants_background


class _Model:
    def __init__(self, backend, shape):
        self.backend_name, self.shape = backend, shape


def test_only_cpu_steps_longer_than_half_a_frame_go_to_the_worker():
    budget = 0.03
    assert not wants_background(_Model("cuda", (4096, 4096)), 10.0, budget)
    assert wants_background(_Model("numpy", (32, 32)), 0.02, budget)
    assert not wants_background(_Model("numpy", (32, 32)), 0.01, budget)
    side = int(np.sqrt(BIG_MODEL_CELLS))
    assert wants_background(_Model("numpy", (side, side)), None, budget)       # not measured yet, large
    assert not wants_background(_Model("numpy", (32, 32)), None, budget)      # not measured yet, small


@pytest.fixture
def held_steps(monkeypatch):
    """Every batch goes to the worker, whose model.advance waits for ``release`` to be set."""
    release = threading.Event()
    monkeypatch.setattr(main_window_module, "wants_background", lambda *args: True)

    def hold(window):
        model = window.model
        original = model.advance

        def advance(n):
            release.wait(20)
            return original(n)

        model.advance = advance
        return release

    return hold


def test_the_window_answers_while_a_step_is_computed(make_window, qtbot, held_steps):
    window = make_window(L=16, T=2.0)
    release = held_steps(window)
    before = window.model.step_count
    window.set_running(True)
    qtbot.waitUntil(lambda: window.stepper.busy, timeout=15000)

    ticks = []
    from PySide6 import QtCore
    probe = QtCore.QTimer(interval=5)
    probe.timeout.connect(lambda: ticks.append(1))
    probe.start()
    qtbot.waitUntil(lambda: len(ticks) >= 5, timeout=15000)     # the event loop runs while the step is held
    menu = window.menuBar().actions()[0].menu()
    menu.popup(window.mapToGlobal(QtCore.QPoint(10, 10)))
    qtbot.waitUntil(menu.isVisible, timeout=15000)              # a menu opens
    menu.close()
    assert "computing" in window.status_labels["steps_per_s"].text()
    assert window.model.step_count == before                   # nothing committed yet

    # a bad value is refused at once, naming the parameter; a good one waits for the batch
    assert not window.set_parameter("T", -1.0)
    assert "T" in window.last_error
    assert window.set_parameter("T", 3.5)
    assert window.model.params.T == 2.0

    release.set()
    qtbot.waitUntil(lambda: window.model.step_count > before, timeout=15000)
    qtbot.waitUntil(lambda: window.model.params.T == 3.5, timeout=15000)
    probe.stop()
    window.set_running(False)
    qtbot.waitUntil(lambda: not window.stepper.busy, timeout=15000)
    times, values = window.runner.history.arrays()
    assert times[-1] == window.model.step_count and np.isfinite(values["energy"][-1])


def test_a_save_asked_for_during_a_step_is_written_after_it(make_window, qtbot, held_steps, tmp_path):
    from latticelab.sim.state import load_state
    window = make_window(L=16, T=2.0)
    release = held_steps(window)
    window.set_running(True)
    qtbot.waitUntil(lambda: window.stepper.busy, timeout=15000)
    window.set_running(False)
    path = tmp_path / "during.npz"
    assert window.save_state(path, confirm=False) is None and not path.exists()
    release.set()
    qtbot.waitUntil(path.exists, timeout=15000)
    saved = load_state(path, backend="numpy")
    assert saved.step_count == window.model.step_count >= 1


def hold_a_batch_with_the_dock_shown(window, qtbot, held_steps, panel):
    """Run the window with its batch held on the worker and ``panel`` on screen; returns the batch's release."""
    release = held_steps(window)
    window.set_running(True)
    qtbot.waitUntil(lambda: window.stepper.busy, timeout=15000)
    panel.show()
    panel.raise_()
    qtbot.waitUntil(panel.on_screen, timeout=5000)
    return release


@pytest.mark.parametrize("dock", ["spectral_panel", "graph_panel"])
def test_a_dock_that_finds_the_model_busy_copies_it_right_after_the_batch(make_window, qtbot, held_steps, dock):
    """The Spectrum and Graph docks take no copy while the worker writes the model; they ask the window to run
    their request again once the batch is committed (MainWindow.when_model_free), before the next batch starts.
    The dock's own timer is stopped here, so only that path can start its job."""
    window = make_window(L=16, T=2.0, p=0.05)
    panel = getattr(window, dock)
    panel.timer.stop()
    started = (lambda: panel.jobs_started) if dock == "spectral_panel" else (lambda: panel.measures_started)
    ask = (lambda: panel.request(force=True)) if dock == "spectral_panel" else (lambda: panel.refresh(force=True))
    release = hold_a_batch_with_the_dock_shown(window, qtbot, held_steps, panel)
    before = started()
    assert not ask()                                   # refused: the worker writes the arrays
    assert started() == before
    release.set()                                      # the batch comes in; the dock copies the model at once
    qtbot.waitUntil(lambda: started() > before, timeout=15000)
    window.set_running(False)


def test_the_signal_dock_declined_while_stepping_refreshes_right_after_the_batch(make_window, qtbot, held_steps):
    """The Signal dock reads nothing while the worker steps the model (READ_WHILE_STEPPING = False); a refresh it
    declined then is made again once the batch is committed (its own timer stopped here)."""
    window = make_window(model="cortex")
    panel = window.signal_panel
    qtbot.waitUntil(lambda: panel.available and panel.canvas is not None, timeout=30000)
    panel.timer.stop()
    release = hold_a_batch_with_the_dock_shown(window, qtbot, held_steps, panel)
    drawn = panel._drawn
    assert not panel.refresh(force=True)               # declined: the worker writes the model
    release.set()
    qtbot.waitUntil(lambda: panel._drawn is not None and panel._drawn != drawn, timeout=15000)
    window.set_running(False)


def test_a_batch_that_fails_stops_the_run_with_a_message_and_waiting_readers_still_run(make_window, qtbot,
                                                                                       monkeypatch):
    monkeypatch.setattr(main_window_module, "wants_background", lambda *args: True)
    window = make_window(L=16, T=2.0)

    def broken(n):
        raise RuntimeError("the kernel went wrong")

    window.model.advance = broken
    ran = []
    window.set_running(True)
    qtbot.waitUntil(lambda: window.stepper.busy or not window.running, timeout=15000)
    window.when_model_free(lambda: ran.append(True))
    qtbot.waitUntil(lambda: not window.running, timeout=15000)
    assert "the steps failed: RuntimeError" in window.last_error and "the kernel went wrong" in window.last_error
    qtbot.waitUntil(lambda: bool(ran), timeout=5000)
