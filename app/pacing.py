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
