"""The coarsening exponent's error bar (sim/models/cahn_hilliard/study.py): exact on a clean power law, and on
runs whose lengths wander as one realisation does (correlated from sample to sample) it covers the true
exponent about as often as a two-sigma bar should; the fitted slope's own error would not."""
import numpy as np

from latticelab.sim.models.cahn_hilliard.study import fitted_exponent


def test_a_clean_power_law_gives_its_exponent_with_no_error():
    t = np.geomspace(100.0, 1e5, 40)
    slope, err = fitted_exponent(t, 2.0 * t ** (1 / 3))
    assert abs(slope - 1 / 3) < 1e-9 and err < 1e-9


def test_correlated_wander_is_covered_by_two_sigma():
    rng = np.random.default_rng(5)
    t = np.geomspace(100.0, 1e5, 40)
    covered = fit_only_covered = 0
    runs = 400
    for _ in range(runs):
        # log L = log t / 3 + a slow random wander (each sample remembers 90% of the previous one's deviation)
        noise = np.zeros(t.size)
        for i in range(1, t.size):
            noise[i] = 0.9 * noise[i - 1] + rng.normal(0.0, 0.01)
        lengths = t ** (1 / 3) * np.exp(noise)
        slope, err = fitted_exponent(t, lengths)
        fit_err = np.sqrt(np.polyfit(np.log(t), np.log(lengths), 1, cov=True)[1][0, 0])
        covered += abs(slope - 1 / 3) < 2 * err
        fit_only_covered += abs(slope - 1 / 3) < 2 * fit_err
    assert covered / runs > 0.8, covered / runs               # 2 sigma: 95% were it Gaussian
    assert fit_only_covered / runs < 0.5, fit_only_covered / runs   # the bar before: too narrow
