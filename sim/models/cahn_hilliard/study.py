"""What a study measures on Cahn-Hilliard (the study capability, sim/studies/capability.py): the characteristic
length 2 pi / k1 and the free energy at the end of the measurement window, and the coarsening exponent: the
slope of log L(t) against log t fitted over the window's samples (Lifshitz-Slyozov: 1/3 late in the
coarsening of a conserved order parameter).

The exponent's error: the fitted slope's standard error and, added in quadrature, half the difference between
the slopes fitted to the first and the second half of the window (in log t). The fit's own error assumes
independent residuals, but the samples of one run follow one realisation: the lengths are correlated from
sample to sample, so that error is far smaller than the spread between seeds. The two halves' difference sees
that realisation's wander, and an exponent that has not yet settled to its late-time value, in one run."""
from __future__ import annotations

import numpy as np

from latticelab.sim.studies.capability import Measure, StudyMeasures

DERIVED = (
    Measure("final_length", "characteristic length at the window's end"),
    Measure("final_free_energy", "free energy at the window's end"),
    Measure("coarsening_exponent", "exponent of L(t) ~ t^alpha over the window"),
)


def fitted_exponent(times, lengths) -> tuple[float | None, float | None]:
    """(slope, its standard error) of log L against log t over the samples with t > 0 and L > 0."""
    t = np.asarray(times, dtype=np.float64)
    L = np.asarray(lengths, dtype=np.float64)
    keep = (t > 0) & (L > 0) & np.isfinite(t) & np.isfinite(L)
    x, y = np.log(t[keep]), np.log(L[keep])
    if x.size < 3 or np.ptp(x) == 0:
        return None, None
    (slope, intercept), cov = np.polyfit(x, y, 1, cov=True)
    fit_error = float(np.sqrt(cov[0, 0]))
    middle = 0.5 * (x.min() + x.max())
    first, second = x <= middle, x > middle
    if first.sum() < 2 or second.sum() < 2 or np.ptp(x[first]) == 0 or np.ptp(x[second]) == 0:
        return float(slope), fit_error
    drift = 0.5 * abs(np.polyfit(x[second], y[second], 1)[0] - np.polyfit(x[first], y[first], 1)[0])
    return float(slope), float(np.hypot(fit_error, drift))


class CoarseningRecorder:
    def __init__(self, model_class, wanted):
        self.times: list[float] = []
        self.lengths: list[float] = []
        self.last: dict = {}

    def start(self, model) -> None:
        pass

    def sample(self, model) -> None:
        values = model.observables()
        self.times.append(float(model.time))
        self.lengths.append(float(values["length"]))
        self.last = values

    def result(self, model, n_blocks: int) -> dict:
        slope, err = fitted_exponent(self.times, self.lengths)
        return {"final_length": (self.last.get("length"), None),
                "final_free_energy": (self.last.get("free_energy"), None),
                "coarsening_exponent": (slope, err)}


STUDY = StudyMeasures(derived=DERIVED, recorder=CoarseningRecorder, observables=("free_energy", "length"))
