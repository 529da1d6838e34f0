"""What a study measures on the cortex (the study capability, sim/studies/capability.py): over the measurement
window, the qEEG metrics of the pseudo-EEG (sim/analysis/qeeg.py: spectral entropy, peak, median and spectral
edge frequencies, relative band powers; thesis 003, section 8.7), its mean, and the mean firing rates of the
excitatory and inhibitory neurons (Hz per neuron). Every step's sample is read from the model's trace
(HasSignal), so the window's EEG is complete whatever the spacing of the samples. The errors are the standard
errors over equal parts of the window (each at least one periodogram segment long), when it has two or more."""
from __future__ import annotations

import numpy as np

from latticelab.sim.studies.capability import Measure, StudyMeasures, split_errors

SEGMENT = 1024                     # samples per periodogram segment (qeeg.py)
QEEG = (("spectral_entropy", "sen", "spectral entropy (1-47 Hz)", ""),
        ("peak_frequency", "ppf", "peak power frequency", "Hz"),
        ("median_frequency", "mpf", "median power frequency", "Hz"),
        ("sef75", "sef75", "spectral edge frequency 75%", "Hz"),
        ("sef90", "sef90", "spectral edge frequency 90%", "Hz"),
        ("sef95", "sef95", "spectral edge frequency 95%", "Hz"),
        ("power_delta", "delta", "relative power, delta band", ""),
        ("power_theta", "theta", "relative power, theta band", ""),
        ("power_alpha", "alpha", "relative power, alpha band", ""),
        ("power_beta", "beta", "relative power, beta band", ""),
        ("power_gamma", "gamma", "relative power, gamma band", ""))
RATES = {"firing_e": "rate_e", "firing_i": "rate_i"}     # trace column of firing fractions -> rate measure
DERIVED = (*(Measure(name, label, unit) for name, _, label, unit in QEEG),
           Measure("mean_eeg", "mean pseudo-EEG", "mV"),
           Measure("rate_e", "mean excitatory firing rate", "Hz"),
           Measure("rate_i", "mean inhibitory firing rate", "Hz"))


def qeeg_of(eeg: np.ndarray, rate: float) -> dict[str, float] | None:
    """The QEEG measures of one stretch of EEG (None when shorter than a periodogram segment)."""
    if eeg.size < SEGMENT:
        return None
    from latticelab.sim.analysis import qeeg      # (SciPy's signal module: seconds to import on a busy machine)
    freqs, psd = qeeg.periodogram(eeg, segment=SEGMENT, average=eeg.size, fs=rate)
    found = qeeg.metrics(freqs, psd)
    return {name: float(found[key]) for name, key, _, _ in QEEG}


class SignalRecorder:
    def __init__(self, model_class, wanted):
        roles = [c.role for c in model_class.signal_columns]
        names = [c.name for c in model_class.signal_columns]
        self.eeg_column = 1 + roles.index("signal")
        self.fraction_columns = {name: 1 + i for i, (name, role) in enumerate(zip(names, roles)) if role == "fraction"}
        self.pieces: list[np.ndarray] = []
        self.since = 0
        # the spectrum only when a qEEG measure is asked for (a study of firing rates needs none)
        self.spectral = not wanted or any(name in wanted for name, *_ in QEEG)

    def start(self, model) -> None:
        self.since = model.step_count

    def sample(self, model) -> None:
        rows = model.trace(since=self.since)
        self.since = model.step_count
        if rows.size:
            self.pieces.append(rows)

    def result(self, model, n_blocks: int) -> dict:
        rows = np.concatenate(self.pieces) if self.pieces else np.zeros((0, 1 + len(model.signal_columns)))
        rate = float(model.signal_rate)
        eeg = rows[:, self.eeg_column]
        out: dict = {m.name: (None, None) for m in DERIVED}
        whole = qeeg_of(eeg, rate) if self.spectral else None
        parts = min(n_blocks, eeg.size // SEGMENT)
        errors = {}
        if whole is not None and parts >= 2:
            errors = split_errors([qeeg_of(p, rate) for p in np.array_split(eeg, parts)])
        for name, value in (whole or {}).items():
            out[name] = (value, errors.get(name))
        if eeg.size:
            out["mean_eeg"] = _mean_and_error(eeg, n_blocks)
            for name, column in self.fraction_columns.items():
                if name in RATES:
                    value, err = _mean_and_error(rows[:, column], n_blocks)
                    out[RATES[name]] = (value * rate, None if err is None else err * rate)
        return out


def _mean_and_error(x: np.ndarray, n_blocks: int):
    from latticelab.sim.analysis.critical import blocking
    value, err = blocking(x, max(2, min(n_blocks, x.size // 2)) if x.size >= 4 else None)
    return value, (err if np.isfinite(err) else None)


def suggest(params) -> dict:
    """The anaesthesia scan of thesis 003, chapter 8, small: the excitatory washout factor lambda_tau_e from 1 to
    3, each point settled 300 ms, then 2 s of EEG (four periodogram segments)."""
    return {"grid": {"lambda_tau_e": {"start": 1.0, "stop": 3.0, "num": 3}, "seed": [1]},
            "run": {"equilibrate": 300, "decorrelate": 512, "measurements": 5}}


STUDY = StudyMeasures(derived=DERIVED, recorder=SignalRecorder, observables=(), suggest=suggest,
                      plot={"measure": "spectral_entropy", "against": "lambda_tau_e"})
