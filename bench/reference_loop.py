"""A reference loop: how fast the machine's cores ran at each moment, seen from outside the window's process.

A long gap in the window's event loop is either the window's own work (its GUI thread on a core) or the machine's
doing (other processes had the cores, or the cores ran slow). The GUI thread's scheduler counters
(bench/responsiveness.py) tell time on a core from time waiting for one; they cannot tell a long piece of work
from ordinary work run slow. This loop can: a separate process runs a fixed piece of pure-Python work every
``period_s`` and times it by its own CPU time (time spent waiting for a core does not count), so a run that takes
several times the median means the core itself ran slow at that moment (on a virtual machine: its host busy
elsewhere, which the guest's steal counter need not show; docs/design/responsiveness.md). The work is a
few tenths of a ms every 10 ms: a few per cent of one core.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

# The child: one line per run, "start wall_s cpu_s", start on the clock of time.perf_counter (CLOCK_MONOTONIC on
# Linux, one clock for every process). It ends when its parent is gone, whatever became of the parent.
_LOOP = r"""
import os, sys, time
parent = os.getppid()
out = open(sys.argv[1], "w", buffering=1)
period = float(sys.argv[2])
while os.getppid() == parent:
    start, cpu = time.perf_counter(), time.thread_time()
    x = 0
    for i in range(10000):
        x += i
    out.write(f"{start:.6f} {time.perf_counter() - start:.6f} {time.thread_time() - cpu:.6f}\n")
    time.sleep(period)
"""


PINNED_UP_TO = 4    # up to this many usable cores: one loop pinned to each (a slow core is seen whichever it is)


class ReferenceLoop:
    """The reference processes, started at construction: one pinned to each core this process may use where those
    are few (PINNED_UP_TO; a host may slow one core and not the other), else one the scheduler places. ``stop``
    ends them and removes their records."""

    def __init__(self, period_s: float = 0.01):
        usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.cores: list[int | None] = usable if 0 < len(usable) <= PINNED_UP_TO else [None]
        self.paths: list[str] = []
        self.processes: list[subprocess.Popen] = []
        for core in self.cores:
            fd, path = tempfile.mkstemp(prefix="latticelab-reference-loop-", suffix=".txt")
            os.close(fd)
            self.paths.append(path)
            process = subprocess.Popen([sys.executable, "-c", _LOOP, path, str(period_s)],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            if core is not None:
                try:
                    os.sched_setaffinity(process.pid, {core})   # before its first run (its start-up takes ms)
                except OSError:
                    pass
            self.processes.append(process)

    def runs(self, start: float, end: float) -> list[list[tuple[float, float, float]]]:
        """For each loop, (start, wall s, CPU s) of each of its runs that overlap [start, end] (a line still being
        written is left out)."""
        return [self._runs(path, start, end) for path in self.paths]

    @staticmethod
    def _runs(path: str, start: float, end: float) -> list[tuple[float, float, float]]:
        found = []
        with open(path) as record:
            for line in record:
                fields = line.split()
                if len(fields) != 3 or not line.endswith("\n"):
                    continue
                t, wall, cpu = (float(v) for v in fields)
                if t <= end and t + wall >= start:
                    found.append((t, wall, cpu))
        return found

    def typical(self, start: float, end: float) -> list[float | None]:
        """Each loop's median CPU time of a run in [start, end] (None for a loop with no run there)."""
        return [statistics.median(c for _, _, c in runs) if runs else None for runs in self.runs(start, end)]

    def slowdown(self, start: float, end: float, typical: list[float | None]) -> float | None:
        """The slowest run overlapping [start, end] as a multiple of its own loop's ``typical`` run, the largest
        over the loops; None where no loop ran then."""
        ratios = [max(c for _, _, c in runs) / usual
                  for runs, usual in zip(self.runs(start, end), typical) if runs and usual]
        return max(ratios) if ratios else None

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for path in self.paths:
            try:
                os.unlink(path)
            except OSError:
                pass
