"""How many seconds of steps a device frame launches, so that frames come at 60/s with as many steps as fit.

On a CUDA device the frame loop runs back to back (timer interval 0) and each frame launches the steps that its
budget allows (sim/runner.py steps_for, from the device time a step has lately taken). The budget is the target
period less what a frame's period has lately exceeded its steps' device time by: where the host's work (the
paint, the events) runs while the device steps, that excess is near zero and the steps get almost the whole
period; where it does not (the paint waits for the GPU, app/main_window.py paint_before_steps), the steps get
the period less that work. The excess may be negative: a frame's steps are credited with the runner's estimate
of their device time, and where that estimate runs above the true time, a floor at zero left every frame short of
the target (at 2D 4096^2 on the H100 the frames came every 15.3 ms instead of 16.2, the steps filling less of
each). Floored only at minus a period, the running excess is what makes the mean period equal the target,
whatever the estimate's bias.
No GUI here: the window feeds it times, the tests feed it simulated frames.
"""
from __future__ import annotations

FRAME_PERIOD_S = 1 / 60
FRAME_TARGET_S = 0.97 * FRAME_PERIOD_S   # a little under the period, so frames stay at 60/s
MIN_STEP_BUDGET_S = 0.002
SMOOTHING = 0.2                          # weight of the newest frame in the running excess


class DevicePacer:
    def __init__(self, target_s: float = FRAME_TARGET_S, min_budget_s: float = MIN_STEP_BUDGET_S,
                 excess_s: float = 0.004):
        self.target_s, self.min_budget_s = target_s, min_budget_s
        self.excess_s = excess_s              # running mean of (frame period - its steps' estimated device time)
        self._last_start = None
        self._last_device_s = None

    def budget(self) -> float:
        """Device seconds of steps for the next frame."""
        return max(self.min_budget_s, self.target_s - self.excess_s)

    def stepped(self, start: float, steps: int, seconds_per_step: float | None) -> None:
        """A frame launched ``steps`` steps at time ``start`` (seconds, any clock); ``seconds_per_step`` is the
        runner's device time per step (None while unknown)."""
        last, device_s = self._last_start, self._last_device_s
        self._last_start = start
        self._last_device_s = steps * seconds_per_step if steps and seconds_per_step else None
        if last is not None and device_s is not None:
            # a pause or a switch between two launches is not a frame: the clamp keeps it from ruling the mean
            excess = min(max(start - last - device_s, -FRAME_PERIOD_S), FRAME_PERIOD_S)
            self.excess_s = (1 - SMOOTHING) * self.excess_s + SMOOTHING * excess

    def restart(self) -> None:
        """Forget the last launch (the run was paused or the model changed): the next frame starts afresh."""
        self._last_start = self._last_device_s = None


# The live plots' refresh while a device frame loop runs at full pace. There the GUI thread's time is what limits
# the sweeps (the pacing above gives the device what the host leaves), and the plots were the largest part of it:
# on the H100 machine's host a refresh of the five Ising plots took about 60 ms of drawing (a region of the cached
# canvas, 5-7 ms of VisPy each), a third of each frame at four refreshes a second; bench window, 2D 4096^2:
# 62-82% of headless with them, 85-86% with no refresh, 80-87% at one a second.
PLOT_INTERVAL_S = 0.25        # the plots redraw at most this often
PLOT_INTERVAL_MAX_S = 1.0     # ... and, while they are shown and the data changes, at least this often
PLOT_SHARE = 0.06             # of the GUI thread's time, what the plots may take while a device runs flat out


class PlotPacer:
    """How often the live plots refresh: every PLOT_INTERVAL_S, except while a device frame loop runs at full pace,
    where the refreshes are spaced so that drawing them takes at most PLOT_SHARE of the time (up to
    PLOT_INTERVAL_MAX_S apart). A refresh's cost is measured: the GUI thread's seconds in the plots' update and
    paints from one refresh to the next (a refresh is drawn over several paints), as a running mean."""

    def __init__(self, fastest_s: float = PLOT_INTERVAL_S, slowest_s: float = PLOT_INTERVAL_MAX_S,
                 share: float = PLOT_SHARE):
        self.fastest_s, self.slowest_s, self.share = fastest_s, slowest_s, share
        self.cost_s = None            # running mean of a refresh's drawing seconds (None: none measured yet)
        self._spent = 0.0             # drawing seconds since the last refresh began

    def spent(self, seconds: float) -> None:
        """The plots' update or one of their paints took ``seconds`` of the GUI thread."""
        self._spent += seconds

    def refreshed(self) -> None:
        """A new refresh begins: what was spent since the last one is that one's cost."""
        if self._spent > 0:
            self.cost_s = self._spent if self.cost_s is None else 0.5 * self.cost_s + 0.5 * self._spent
        self._spent = 0.0

    def interval(self, device_paced: bool) -> float:
        """Seconds from one refresh to the next."""
        if not device_paced or self.cost_s is None:
            return self.fastest_s
        return min(self.slowest_s, max(self.fastest_s, self.cost_s / self.share))
