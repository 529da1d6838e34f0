"""The device frame pacing (app/pacing.py) on simulated frames: the budget it gives must bring a frame loop to
its target period, whether the host's work runs beside the steps or after them."""
from latticelab.app.pacing import FRAME_PERIOD_S, FRAME_TARGET_S, MIN_STEP_BUDGET_S, DevicePacer

PER_STEP = 25e-6      # device seconds a step


def run_frames(period_of, frames: int = 200) -> tuple[DevicePacer, list[float]]:
    """Drive a pacer: each frame launches the steps its budget allows; ``period_of(device_s)`` is the period
    that frame then takes. Returns the pacer and the periods of the last 20 frames."""
    pacer, now, periods = DevicePacer(), 0.0, []
    for _ in range(frames):
        steps = max(1, int(pacer.budget() / PER_STEP))
        pacer.stepped(now, steps, PER_STEP)
        period = period_of(steps * PER_STEP)
        periods.append(period)
        now += period
    return pacer, periods[-20:]


def test_host_work_after_the_steps_is_taken_off_the_budget():
    host = 0.005      # a paint that waits for the steps: the period is their sum
    pacer, periods = run_frames(lambda device_s: device_s + host)
    assert abs(pacer.budget() - (FRAME_TARGET_S - host)) < 1e-4
    assert all(FRAME_TARGET_S - 2e-4 < p <= FRAME_PERIOD_S for p in periods), periods


def test_host_work_beside_the_steps_leaves_them_the_whole_period():
    host = 0.009      # runs while the device steps: the period is the longer of the two
    pacer, periods = run_frames(lambda device_s: max(device_s, host) + 1e-4)
    assert pacer.budget() > FRAME_TARGET_S - 5e-4
    assert all(p <= FRAME_PERIOD_S for p in periods), periods


def test_a_host_slower_than_a_frame_gets_the_smallest_budget_not_a_negative_one():
    pacer, _ = run_frames(lambda device_s: device_s + 0.030)
    assert pacer.budget() == MIN_STEP_BUDGET_S


def test_a_pause_is_not_taken_for_a_long_frame():
    pacer, _ = run_frames(lambda device_s: device_s + 0.004)
    settled = pacer.budget()
    pacer.restart()
    pacer.stepped(1e6, 400, PER_STEP)    # the first launch after a pause: no period to measure
    assert pacer.budget() == settled


def test_a_device_time_estimate_above_the_truth_still_brings_frames_to_the_target():
    """The runner's device time per step can run above the steps' true time (measured around the batch): the
    frames must still come at the target period, not as much shorter as the estimate is high."""
    host, true_per_step = 0.002, PER_STEP / 1.25      # the estimate 25% above the truth; a serial paint
    pacer, now, periods = DevicePacer(), 0.0, []
    for _ in range(300):
        steps = max(1, int(pacer.budget() / PER_STEP))
        pacer.stepped(now, steps, PER_STEP)
        period = steps * true_per_step + host
        periods.append(period)
        now += period
    mean = sum(periods[-50:]) / 50
    assert abs(mean - FRAME_TARGET_S) < 2e-4, (mean, FRAME_TARGET_S)


def refresh_cycle(pacer, paints_s):
    """One refresh of the plots drawn over several paints of ``paints_s`` seconds each."""
    pacer.refreshed()
    for seconds in paints_s:
        pacer.spent(seconds)


def test_plots_refresh_at_the_fastest_rate_unless_a_device_runs_flat_out():
    from latticelab.app.pacing import PLOT_INTERVAL_S, PlotPacer
    pacer = PlotPacer()
    assert pacer.interval(device_paced=True) == PLOT_INTERVAL_S      # no refresh measured yet
    for _ in range(3):
        refresh_cycle(pacer, [0.007] * 8)                             # 56 ms a refresh
    pacer.refreshed()
    assert pacer.interval(device_paced=False) == PLOT_INTERVAL_S


def test_costly_plots_beside_a_device_take_their_share_of_the_time_and_no_more():
    from latticelab.app.pacing import PLOT_INTERVAL_MAX_S, PLOT_INTERVAL_S, PlotPacer
    pacer = PlotPacer(share=0.1)
    for _ in range(10):
        refresh_cycle(pacer, [0.006] * 8)                             # 48 ms a refresh
    pacer.refreshed()
    assert abs(pacer.cost_s - 0.048) < 1e-9
    assert abs(pacer.interval(device_paced=True) - 0.48) < 1e-9       # 48 ms every 0.48 s: 10% of the time
    for _ in range(10):
        refresh_cycle(pacer, [0.002, 0.003])                          # cheap now: back to the fastest rate
    pacer.refreshed()
    assert pacer.interval(device_paced=True) == PLOT_INTERVAL_S
    for _ in range(10):
        refresh_cycle(pacer, [0.05] * 8)                              # very costly: never slower than the cap
    pacer.refreshed()
    assert pacer.interval(device_paced=True) == PLOT_INTERVAL_MAX_S
