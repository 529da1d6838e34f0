"""A scheduled batch run of the cortical model (thesis 003, sections 8.3 and 8.5): the parameter changes of a
schedule (schedule.py) applied before their steps, the pseudo-EEG and firing fractions of every step, and the
qEEG metrics (sim/analysis/qeeg.py) of every periodogram update (each ``segment // 2`` steps once ``segment``
steps are done).

The model runs in chunks that end at the next scheduled change or the next periodogram update, whichever
comes first, and the chunk's per-step values come from the device in one copy (``CortexModel.trace``).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from latticelab.sim.analysis.qeeg import Periodogram
from latticelab.sim.models.cortex.schedule import Schedule

ROW_FIELDS = ("time_ms", "eeg", "firing_e", "firing_i", "v_probe")


def run_batch(model, schedule: Schedule | None, steps: int, *, segment: int = 1024, average: int = 10,
              window_name: str = "blackman", wiener: bool = False,
              on_rows: Callable[[np.ndarray], None] | None = None,
              on_qeeg: Callable[[int, dict], None] | None = None,
              progress: Callable[[int], None] | None = None) -> Periodogram:
    """Run ``steps`` steps of ``model`` (a CortexModel) under ``schedule``.

    ``on_rows(rows)``: float64 (m, 5) [time in ms after the step, eeg, firing_e, firing_i, v of the probe
    neuron] per chunk (ROW_FIELDS);
    ``on_qeeg(time_ms, metrics)`` after each periodogram update; ``progress(n)`` with the steps just done.
    Returns the periodogram (its ``psd`` is the final average)."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps: must be a non-negative integer; got {steps!r}")
    schedule = schedule or Schedule()
    periodogram = Periodogram(segment=segment, average=average, window_name=window_name, wiener=wiener)
    half = segment // 2
    end = model.step_count + int(steps)
    model.trace()                                   # start the trace here
    recorded = 0
    while model.step_count < end:
        schedule.apply(model)
        here = model.step_count
        later = [s for s in schedule.steps if s > here]
        stop = min(end, later[0] if later else end, here + half - (recorded % half))
        model.step(stop - here)
        rows = model.trace()
        recorded += rows.shape[0]
        if on_rows is not None:
            on_rows(rows)
        if periodogram.push(rows[:, 1]) and on_qeeg is not None:
            on_qeeg(int(rows[-1, 0]), periodogram.metrics())
        if progress is not None:
            progress(stop - here)
    return periodogram
