"""app/staging.py: a slice runs at least one step, and no further step once one like the last would end past
the budget (no Qt needed: the queue is plain Python)."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")     # app/ is the Qt layer; this module itself imports no Qt

from latticelab.app import staging as staging_module  # noqa: E402
from latticelab.app.staging import Staging  # noqa: E402


class Clock:
    """The staging's clock, advanced only by the steps: the slices' decisions do not depend on how fast or busy
    the machine is."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(staging_module.time, "perf_counter", clock)
    return clock


def sleeper(clock: Clock, seconds: float, n: int):
    for i in range(n):
        clock.now += seconds
        yield i


def test_a_slice_takes_no_step_that_would_end_past_its_budget(clock):
    staging = Staging()
    staging.add("slow", sleeper(clock, 0.006, 6))
    staging.run_slice(budget=0.010)       # one 6 ms step, then 6 + 6 >= 10: the second waits for the next slice
    assert [what for _n, _k, what in staging.log] == ["0"]
    staging.run_slice(budget=1.0)         # room for the five left
    assert len(staging.log) == 6 and not staging.busy


def test_a_slice_runs_one_step_even_when_that_step_alone_exceeds_the_budget(clock):
    staging = Staging()
    staging.add("long", sleeper(clock, 0.02, 2))
    assert staging.run_slice(budget=0.001) is False
    assert len(staging.log) == 1
    staging.finish()
    assert not staging.busy and len(staging.log) == 2
