"""What the window shows of the next model, made ahead on the GUI thread a slice at a time.

Widgets and GL objects must be made on the GUI thread, and the next model's parameter form and live plots take
long to make (on a software renderer seconds: hundreds of VisPy visuals, their shaders compiled at the first
draw). While the model itself is built on a worker (app/preparing.py), the window hands the making of its form
and plots here as iterators, each step one small piece (a form row, a plot's axis, one visual drawn offscreen);
each frame-loop tick runs a slice of steps, at least one, and another only while one like the last still fits
the slice's budget (``SLICE_S`` beside the build, ``SLICE_AFTER_BUILD_S`` once the model is built). The swap
waits until the slices are done, and then only shows what is made (app/main_window.py: _poll_preparation).
"""
from __future__ import annotations

import logging
import time
from collections import deque

log = logging.getLogger(__name__)

SLICE_S = 0.008      # a slice of steps runs until this is spent (at least one step)
# once the model is built, the swap waits only for the staging: a slice may take a frame's worth (on a software
# renderer, where a frame takes 50-60 ms, the 8 ms slices made a switch wait 1-1.5 s longer than the build)
SLICE_AFTER_BUILD_S = 0.016


def another_step_fits(start: float, last_step_s: float, budget: float) -> bool:
    """Whether a slice begun at ``start`` (``time.perf_counter()``) takes another step: only while one as long as
    the last (``last_step_s``) would still end within ``budget`` seconds. Steps of one task take alike times, so
    a slice overruns only by a step longer than the one before it, not by a whole step."""
    return time.perf_counter() - start + last_step_s < budget


class Staging:
    """A queue of iterators (tasks) run a slice at a time; ``run_slice`` is called once per frame-loop tick.

    ``longest`` is the longest step of the last staging (seconds, task, step) and ``log`` its steps as (slice
    number, task, step), for tests and benchmarks."""

    def __init__(self):
        self._tasks: deque = deque()        # (key, iterator)
        self.slices = 0                     # slices run since the window started
        self.longest = (0.0, None, "")
        self.log: list[tuple[int, object, str]] = []
        # (name, stage_for): what else the window shows of a model, made ahead too (the analysis docks' plots,
        # app/analysis_dock.py); ``stage_for(model_class)`` returns its steps, or None when nothing is to make
        self.followers: list[tuple[str, object]] = []

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    def pending(self, key) -> bool:
        return any(k == key for k, _ in self._tasks)

    def add(self, key, steps) -> None:
        """Run ``steps`` (an iterator; each ``next`` is one step) in the coming slices; a key already queued is
        not queued again. A new staging after an idle spell starts a new ``log``."""
        if steps is None or self.pending(key):
            return
        if not self._tasks:
            self.log, self.longest = [], (0.0, None, "")
        self._tasks.append((key, iter(steps)))

    def add_followers(self, model_class) -> None:
        """Queue what each follower makes ahead for a coming ``model_class`` model."""
        for name, stage_for in self.followers:
            try:
                steps = stage_for(model_class)
            except Exception as exc:     # the swap makes it then, and reports what fails
                log.warning("making %s ahead failed: %s: %s", name, type(exc).__name__, exc)
                continue
            self.add((name, model_class.name), steps)

    def run_slice(self, budget: float = SLICE_S) -> bool:
        """Run steps until ``budget`` seconds are spent (at least one step); True when nothing is left."""
        if not self._tasks:
            return True
        self.slices += 1
        start = time.perf_counter()
        while self._tasks:
            key, steps = self._tasks[0]
            t0 = time.perf_counter()
            try:
                what = next(steps)
            except StopIteration:
                self._tasks.popleft()
                continue
            except Exception as exc:      # the swap makes what is missing itself, and reports what fails then
                log.warning("making %s ahead failed: %s: %s", key, type(exc).__name__, exc)
                self._tasks.popleft()
                continue
            took = time.perf_counter() - t0
            self.log.append((self.slices, key, str(what)))
            if took > self.longest[0]:
                self.longest = (took, key, str(what))
            if not another_step_fits(start, took, budget):
                break
        return not self._tasks

    def finish(self) -> None:
        """Run every step left now (the swap cannot wait)."""
        while self._tasks:
            self.run_slice(float("inf"))
