"""New models are built on a worker thread (app/preparing.py): while one is prepared the event loop keeps
ticking and the old model keeps running; the swap ends in the model asked for last; a failed build leaves the
old model running with the reason in the status bar. A build is made as slow as a test likes through the
``preparing.build_model`` hook, so nothing here depends on the machine's speed.
"""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtCore  # noqa: E402

from latticelab.app import preparing  # noqa: E402


class HeldBuild:
    """Stands in for ``preparing.build_model``: each build waits until the test releases it (or fails with
    ``error``), and records the thread it ran on."""

    def __init__(self, monkeypatch, error: BaseException | None = None):
        self.release = threading.Event()
        self.started = threading.Event()
        self.error = error
        self.threads: list[threading.Thread] = []
        self.built: list[str] = []
        self.real = preparing.build_model
        monkeypatch.setattr(preparing, "build_model", self)

    def __call__(self, cls, params, backend, devices=None):
        self.threads.append(threading.current_thread())
        self.started.set()
        assert self.release.wait(timeout=60), "the test never released the build"
        if self.error is not None:
            raise self.error
        model = self.real(cls, params, backend, devices)
        self.built.append(cls.name)
        return model


def ticking(qtbot):
    """A timer of the event loop's own, counting its ticks."""
    ticks = []
    timer = QtCore.QTimer(interval=10)
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start()
    return timer, ticks


@pytest.fixture
def window(make_window):
    w = make_window(running=True)
    w.background_builds = True
    return w


def test_a_model_switch_builds_on_a_worker_while_the_window_keeps_running(window, qtbot, monkeypatch):
    held = HeldBuild(monkeypatch)
    timer, ticks = ticking(qtbot)
    old = window.model
    assert window.switch_model("cahn-hilliard")
    assert held.started.wait(10)
    steps, ticked = old.step_count, len(ticks)
    # the build is held until released: any progress here happens while it runs
    qtbot.waitUntil(lambda: len(ticks) >= ticked + 5, timeout=20000)   # the event loop is not blocked
    qtbot.waitUntil(lambda: old.step_count > steps, timeout=20000)     # the old model still runs meanwhile
    assert window.model is old and not held.release.is_set()
    assert "preparing" in window.status_labels["lattice"].text()
    assert held.threads[0] is not threading.main_thread()
    held.release.set()
    qtbot.waitUntil(lambda: window.model.name == "cahn-hilliard", timeout=30000)
    timer.stop()
    assert window.model.step_count >= 0 and window.model_box.currentData() == "cahn-hilliard"
    assert window.windowTitle().endswith(window.model.title)
    assert not window.preparer.busy


def test_a_size_change_is_built_on_a_worker_and_changes_made_meanwhile_follow(window, qtbot, monkeypatch):
    held = HeldBuild(monkeypatch)
    assert window.set_parameter("L", 48)
    assert held.started.wait(10)
    assert window.model.shape == (32, 32)
    window.set_parameter("T", 2.6)             # waits for the new model, then applies to it
    assert window.model.params.T != 2.6
    held.release.set()
    qtbot.waitUntil(lambda: window.model.shape == (48, 48) and window.model.params.T == 2.6, timeout=30000)


def test_a_failed_build_leaves_the_old_model_running(window, qtbot, monkeypatch):
    held = HeldBuild(monkeypatch, error=MemoryError())
    old = window.model
    assert window.set_parameter("L", 64)
    held.release.set()
    qtbot.waitUntil(lambda: not window.preparer.busy, timeout=30000)
    assert window.model is old and window.model.shape == (32, 32)
    assert window.last_error == "not enough memory for this model"
    steps = old.step_count
    qtbot.waitUntil(lambda: old.step_count > steps, timeout=10000)   # and it keeps running


def test_a_second_switch_supersedes_the_first(window, qtbot, monkeypatch):
    held = HeldBuild(monkeypatch)
    window.switch_model("cahn-hilliard")
    assert held.started.wait(10)
    window.switch_model("cortex")              # asked while the first is still being built
    held.release.set()
    qtbot.waitUntil(lambda: window.model.name == "cortex", timeout=60000)
    qtbot.wait(200)
    assert window.model.name == "cortex" and not window.preparer.busy
    assert held.built == ["cahn-hilliard", "cortex"]   # the first was built, but never shown


def test_switching_back_cancels_and_closing_while_preparing_drops_the_build(window, qtbot, monkeypatch):
    held = HeldBuild(monkeypatch)
    old = window.model
    window.switch_model("cahn-hilliard")
    assert held.started.wait(10)
    window.switch_model("ising")               # the running model's kind: nothing to prepare any more
    window.close()
    held.release.set()
    assert window.preparer.wait(30)
    qtbot.wait(100)
    window.lifecycle.poll_preparation()
    assert window.model is old


def test_a_new_models_first_observables_are_taken_on_the_worker(window, qtbot, monkeypatch):
    """The swap takes the first record of the history from where the model was built (sim/runner.py FirstLook):
    the GUI thread does not compute the new model's observables or changed cells (18 ms on a 2048^2 lattice)."""
    held = HeldBuild(monkeypatch)
    calls = []
    cls = type(window.model)
    for name in ("observables", "changed"):
        original = getattr(cls, name)

        def recorded(model, *args, _original=original, _name=name, **kwargs):
            calls.append((_name, model, threading.current_thread()))
            return _original(model, *args, **kwargs)

        monkeypatch.setattr(cls, name, recorded)
    window.set_running(False)
    assert window.set_parameter("L", 24)
    assert held.started.wait(10)
    held.release.set()
    qtbot.waitUntil(lambda: window.model.params.L == 24, timeout=30000)
    new = window.model
    mine = [(name, thread) for name, model, thread in calls if model is new]
    assert ("observables", held.threads[0]) in mine and ("changed", held.threads[0]) in mine
    assert not [name for name, thread in mine if thread is threading.main_thread()], mine
    times, values = window.runner.history.arrays()
    assert len(times) == 1 and times[0] == new.time
    first = new.observables()              # (the model has not stepped: the same numbers)
    assert all(values[key][0] == first[key] for key in first if key in values)
