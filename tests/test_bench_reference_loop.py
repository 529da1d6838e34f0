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


def test_runs_are_placed_on_the_callers_clock():
    """Stopped for 0.3 s, the loop records no run in that time, and runs before and after it: its times are
    this process's time.perf_counter, so they can be laid beside the event loop's gaps."""
    loop = ReferenceLoop(period_s=0.01)
    try:
        usable = len(os.sched_getaffinity(0))
        assert len(loop.processes) == (usable if usable <= 4 else 1)    # one per core where they are few
        time.sleep(0.5)                       # started, and a few runs done
        for process in loop.processes:
            os.kill(process.pid, signal.SIGSTOP)
        stopped = time.perf_counter()
        time.sleep(0.3)
        resumed = time.perf_counter()
        for process in loop.processes:
            os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.3)
        for before, during, after in zip(loop.runs(stopped - 0.3, stopped), loop.runs(stopped + 0.02, resumed),
                                         loop.runs(resumed, resumed + 0.3)):
            assert before and after
            assert not [r for r in during if r[0] > stopped + 0.02]
            for start, wall, cpu in before + after:
                assert 0 < cpu <= wall + 1e-3   # CPU time of the fixed work, never more than its wall time
        typical = loop.typical(stopped - 0.3, resumed + 0.3)
        assert all(typical) and loop.slowdown(stopped - 0.3, resumed + 0.3, typical) >= 1.0
        assert loop.slowdown(stopped + 0.05, resumed - 0.05, typical) is None     # no run: nothing to say
    finally:
        for process in loop.processes:
            os.kill(process.pid, signal.SIGCONT)
        loop.stop()
    assert all(process.poll() is not None for process in loop.processes)
    assert not any(os.path.exists(path) for path in loop.paths)


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
