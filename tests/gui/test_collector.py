"""When Python's cycle collector may pause the window (app/collector.py): no automatic full collection while a
switch is prepared, what the switch made frozen once it is swapped in, and replaced models freed by reference
counting (nothing of the window keeps them)."""
from __future__ import annotations

import gc
import traceback
import weakref

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


@pytest.fixture
def eager_collector():
    """The collector's thresholds at their lowest: without the schedule's hold, a full collection would follow
    nearly every young one (so a switch could not pass without one)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(100, 1, 1)
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def full_collections() -> list:
    """A list that receives, for each full collection started from now, (automatic, stack): ``automatic`` when
    the collector's third threshold was not held then (CPython starts a full collection by itself only once
    that threshold is passed, so one that starts while it is held was asked for: a library's gc.collect(),
    possibly from C code, as a CuPy finalizer on the H100)."""
    from latticelab.app.collector import HELD_THRESHOLD
    starts = []

    def callback(phase, info):
        if phase == "start" and info["generation"] == 2:
            stack = traceback.extract_stack()[:-1]
            starts.append((gc.get_threshold()[2] < HELD_THRESHOLD, "".join(traceback.format_list(stack[-6:]))))
    gc.callbacks.append(callback)
    return starts, callback


def test_a_switch_runs_no_full_collection_and_freezes_what_it_made(make_window, qtbot, eager_collector):
    from latticelab.app.collector import freeze_after_start
    window = make_window(running=True)
    window.background_builds = True
    schedule = freeze_after_start(window)
    frozen_at_start = gc.get_freeze_count()
    first = weakref.ref(window.model)
    starts, callback = full_collections()
    settle, held_until_settled = schedule.settle, []

    def settled():        # what started while the switch was prepared: up to the schedule's settle at the swap
        held_until_settled.append(list(starts))   # (after it, full collections may run: the paints that follow
        settle()                                  # the swap could start one before the wait below looks again)
    schedule.settle = settled
    try:
        assert window.switch_model("cahn-hilliard")
        assert schedule.held and gc.get_threshold()[2] > 1 << 20
        qtbot.waitUntil(lambda: window.model.name == "cahn-hilliard" and not window.preparer.busy, timeout=60000)
    finally:
        gc.callbacks.remove(callback)
        schedule.settle = settle
    assert held_until_settled, "the switch did not settle the collector schedule"
    during = held_until_settled[0]
    automatic = [stack for is_automatic, stack in during if is_automatic]
    assert not automatic, "a full collection could start by itself while the switch was prepared:\n" + automatic[0]
    assert not schedule.held and gc.get_threshold() == (100, 1, 1)     # full collections may run again
    assert gc.get_freeze_count() > frozen_at_start + 1000              # the new model's form and plots
    qtbot.waitUntil(lambda: first() is None, timeout=5000)              # the replaced model is gone
    assert schedule.collections_for_cycles == 0                         # by reference counting alone


def test_without_the_schedule_the_same_switch_collects_in_full(make_window, qtbot, eager_collector):
    """The control of the test above: the thresholds it sets do start full collections during a switch."""
    window = make_window(running=True)
    window.background_builds = True
    # CPython starts a full collection only once the objects that reached the oldest generation since the last
    # one exceed a quarter of those it held then: what earlier tests left in this process could push that beyond
    # one switch (a fresh-clone run failed here so). Frozen, then collected, the oldest generation starts empty.
    gc.freeze()
    gc.collect()
    starts, callback = full_collections()
    try:
        assert window.switch_model("cahn-hilliard")
        qtbot.waitUntil(lambda: window.model.name == "cahn-hilliard" and not window.preparer.busy, timeout=60000)
    finally:
        gc.callbacks.remove(callback)
    assert [automatic for automatic, _stack in starts].count(True) > 0     # started by CPython itself


def test_the_stepper_lets_go_of_the_model_and_batch_it_returned():
    from latticelab.app.stepping import BackgroundStepper
    from latticelab.sim.models import get_model
    cls = get_model("ising")
    model = cls(cls.Params(L=16), backend="numpy")
    stepper = BackgroundStepper()
    stepper.start(model, 3)
    assert stepper.wait(30)
    returned, batch, _seconds = stepper.poll()
    assert returned is model and batch is not None
    gone = weakref.ref(model)
    del model, returned, batch
    assert gone() is None         # freed by reference counting: the stepper keeps nothing of it
    stepper.close()


def test_a_cancelled_switch_lets_full_collections_run_again(make_window, qtbot):
    from latticelab.app.collector import freeze_after_start
    window = make_window(running=True)
    window.background_builds = True
    thresholds = gc.get_threshold()
    schedule = freeze_after_start(window)
    try:
        assert window.switch_model("cahn-hilliard")
        assert schedule.held
        window.preparer.cancel()                  # as a synchronous switch or closing the window does
        qtbot.waitUntil(lambda: not window.preparer.busy and not schedule.held, timeout=60000)
        assert gc.get_threshold() == thresholds and window.model.name == "ising"
    finally:
        gc.unfreeze()

