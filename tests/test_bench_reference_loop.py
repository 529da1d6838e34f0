"""The responsiveness benchmark's reference loop (bench/reference_loop.py): a separate process whose runs are
placed on this process's clock, that leaves no file behind and ends with its parent."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from latticelab.bench.reference_loop import ReferenceLoop

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGSTOP") or not os.path.isdir("/proc"),
                                reason="needs POSIX signals and /proc")


def _wait_for_runs(loop, after: float, timeout_s: float = 60.0) -> None:
    """Wait until every loop has recorded a run that started after ``after`` (on a busy machine a start-up or a
    resumption can take seconds: the test waits for the event, not for a fixed time)."""
    deadline = time.monotonic() + timeout_s
    while not all(any(start > after for start, _w, _c in runs) for runs in loop.runs(after, float("inf"))):
        assert time.monotonic() < deadline, "the reference loop recorded no run"
        time.sleep(0.02)


def test_runs_are_placed_on_the_callers_clock():
    """Stopped for a while, the loop records no run in that time, and runs before and after it: its times are
    this process's time.perf_counter, so they can be laid beside the event loop's gaps. Nothing here depends on
    how fast or busy the machine is: the test waits for runs rather than for a time, and a run that the stop
    caught half-way (it began before the stop and ends after it) is told apart from one begun while stopped."""
    loop = ReferenceLoop(period_s=0.01)
    try:
        usable = len(os.sched_getaffinity(0))
        assert len(loop.processes) == (usable if usable <= 4 else 1)    # one per core where they are few
        _wait_for_runs(loop, 0.0)             # started, and a run done
        for process in loop.processes:
            os.kill(process.pid, signal.SIGSTOP)
        stopped = time.perf_counter()
        time.sleep(0.3)
        resumed = time.perf_counter()
        for process in loop.processes:
            os.kill(process.pid, signal.SIGCONT)
        _wait_for_runs(loop, resumed)
        everything = (0.0, float("inf"))
        for before, during, after in zip(loop.runs(*everything), loop.runs(stopped + 0.02, resumed),
                                         loop.runs(resumed, float("inf"))):
            assert any(start < stopped for start, _w, _c in before)
            assert any(start > resumed for start, _w, _c in after)
            caught = [r for r in during if r[0] <= stopped + 0.02]       # begun before the stop, ended after it
            assert len(during) == len(caught) <= 1
            for start, wall, cpu in caught:
                assert start + wall >= resumed - 0.02     # its wall time holds the stop; its CPU time does not
            for start, wall, cpu in before + after:
                assert 0 < cpu <= wall + 1e-3   # CPU time of the fixed work, never more than its wall time
        typical = loop.typical(*everything)
        assert all(typical) and loop.slowdown(*everything, typical) >= 1.0
        window = (stopped + 0.05, resumed - 0.05)
        if not any(loop.runs(*window)):
            assert loop.slowdown(*window, typical) is None     # no run: nothing to say
    finally:
        for process in loop.processes:
            os.kill(process.pid, signal.SIGCONT)
        loop.stop()
    assert all(process.poll() is not None for process in loop.processes)
    assert not any(os.path.exists(path) for path in loop.paths)


def test_slowdown_is_none_where_no_run_overlaps(tmp_path):
    """The verdict from records alone (no processes, no clock): the slowest run as a multiple of the typical one,
    and None over a time in which no run was made."""
    record = tmp_path / "runs.txt"
    record.write_text("1.000000 0.001000 0.001000\n1.010000 0.001000 0.001000\n1.020000 0.004000 0.003000\n"
                      "2.000000 0.001000 0.001000\n2.010000 0.0010")      # the last line still being written
    loop = ReferenceLoop.__new__(ReferenceLoop)
    loop.paths = [str(record)]
    assert [len(runs) for runs in loop.runs(0.0, 3.0)] == [4]
    typical = loop.typical(0.0, 3.0)
    assert typical == [0.001]
    assert loop.slowdown(0.0, 3.0, typical) == pytest.approx(3.0)
    assert loop.slowdown(1.1, 1.9, typical) is None


def test_the_loop_ends_with_its_parent(tmp_path):
    """A benchmark that dies without stopping its loop (killed, or os._exit) does not leave it running."""
    code = ("import os, time; from latticelab.bench.reference_loop import ReferenceLoop; "
            "loop = ReferenceLoop(); print(*(p.pid for p in loop.processes), flush=True); time.sleep(0.3); os._exit(0)")
    parent = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    children = [int(pid) for pid in parent.stdout.split()]
    assert children
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_running(child) for child in children):
        time.sleep(0.05)
    assert not any(_running(child) for child in children)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            state = next(line for line in status if line.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return "Z" not in state.split()[1]
