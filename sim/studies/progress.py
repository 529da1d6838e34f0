"""How far a running sweep is and how long the rest will take, for a progress display (the Study panel).

Points differ in cost: a point's work is taken as its number of sites times the steps it runs
(equilibrate + decorrelate x (measurements - 1)). The time left is the remaining work times the rate seen so
far (wall-clock time since the sweep started over the work finished since), so it follows the real speed,
parallel workers and overheads included. A remaining point's number of sites is read from finished rows of
the same L, else from L ** d with the dimension d seen in any finished row, else the mean of the finished
rows.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from latticelab.sim.studies.spec import Point


def steps_of(equilibrate: int, decorrelate: int, measurements: int) -> int:
    return int(equilibrate) + int(decorrelate) * max(int(measurements) - 1, 0)


@dataclass
class SweepProgress:
    """Counts and time left of one run of a sweep: ``start(todo, skipped)``, then ``finished(row)`` per row."""
    total: int = 0
    skipped: int = 0
    remaining: dict = field(default_factory=dict)        # point key -> Point still to run
    sites_by_L: dict = field(default_factory=dict)
    dimension: float | None = None
    work_done: float = 0.0
    sites_seen: list = field(default_factory=list)
    started: float | None = None

    def start(self, todo: list[Point], skipped: int, now: float | None = None) -> None:
        self.remaining = {p.key: p for p in todo}
        self.skipped = skipped
        self.total = skipped + len(todo)
        self.started = time.perf_counter() if now is None else now

    @property
    def done(self) -> int:
        """Points in the table (found there at the start or finished since)."""
        return self.total - len(self.remaining)

    def finished(self, row: dict) -> None:
        point = self.remaining.pop(row.get("point"), None)
        sites = row.get("n_sites")
        if sites:
            sites = int(sites)
            self.sites_seen.append(sites)
            L = row.get("L")
            if L is not None:
                self.sites_by_L[int(L)] = sites
                if int(L) > 1 and sites > 1:
                    self.dimension = round(math.log(sites) / math.log(int(L)))
        if point is not None:
            self.work_done += self._work(point, sites)

    def _sites(self, point: Point) -> float:
        L = point.values.get("L")
        if L is not None and int(L) in self.sites_by_L:
            return self.sites_by_L[int(L)]
        if L is not None and self.dimension:
            return float(int(L) ** self.dimension)
        return sum(self.sites_seen) / len(self.sites_seen) if self.sites_seen else 1.0

    def _work(self, point: Point, sites=None) -> float:
        sites = sites if sites else self._sites(point)
        return float(sites) * max(steps_of(point.equilibrate, point.decorrelate, point.measurements), 1)

    def time_left(self, now: float | None = None) -> float | None:
        """Seconds until the last point is done, or None before the first point of this run finished."""
        if not self.remaining:
            return 0.0
        if self.started is None or self.work_done <= 0:
            return None
        elapsed = (time.perf_counter() if now is None else now) - self.started
        rate = elapsed / self.work_done
        return rate * sum(self._work(p) for p in self.remaining.values())


def format_duration(seconds: float | None) -> str:
    """'estimating…', '45 s', '3 min 20 s', '2 h 05 min'."""
    if seconds is None or not math.isfinite(seconds):
        return "estimating…"
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
