"""Periodograms and qEEG metrics (sim/analysis/qeeg.py, thesis 003 sections 8.6.2 and 8.7) on synthetic
signals with known answers: sinusoids (peak, median and edge frequencies, band powers, low entropy), white noise
(flat: entropy near 1, edges and band powers in proportion to bandwidth), the normalisation (the PSD sums to the
variance), the running average of the 10 most recent segments, the Wiener filter, and agreement with SciPy's
Welch estimate and with an independent library (antropy's spectral entropy)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from scipy import signal

from latticelab.sim.analysis import qeeg

FS = 1000.0
N = 1024
DF = FS / N


def tone(bin_index: int, amplitude: float = 1.0, samples: int = 11 * 512, phase: float = 0.3) -> np.ndarray:
    t = np.arange(samples) / FS
    return amplitude * np.sin(2 * np.pi * bin_index * DF * t + phase)


@pytest.mark.parametrize("window_name", qeeg.WINDOWS)
def test_a_sinusoid_gives_its_peak_edges_band_and_power(window_name):
    x = tone(11)                                          # 10.74 Hz: alpha
    freqs, psd = qeeg.periodogram(x, window_name=window_name)
    assert freqs.size == N // 2 + 1 and freqs[1] == DF
    assert psd.sum() == pytest.approx(0.5, rel=0.01)      # the sine's mean square (equation 8.8)
    m = qeeg.metrics(freqs, psd)
    assert m["ppf"] == 11 * DF
    assert m["mpf"] == pytest.approx(11 * DF, abs=DF)
    for edge in ("sef75", "sef90", "sef95"):
        assert 11 * DF <= m[edge] <= 14 * DF               # within the window's main lobe
    assert m["alpha"] > 0.99
    assert sum(m[b] for b in qeeg.BANDS) == pytest.approx(1.0)
    assert m["sen"] < 0.35                               # 3 to 5 bins of the 48 from 1 to 47 Hz


def test_two_sinusoids_split_the_power_between_their_bands():
    # 9.8 Hz (alpha), 20.5 Hz (beta), powers 4 : 1; a Blackman window spreads a line over 5 bins
    x = tone(10, 2.0) + tone(21, 1.0, phase=1.1)
    freqs, psd = qeeg.periodogram(x, window_name="blackman")
    m = qeeg.metrics(freqs, psd)
    assert m["alpha"] == pytest.approx(0.8, abs=0.005) and m["beta"] == pytest.approx(0.2, abs=0.005)
    assert m["delta"] + m["theta"] + m["gamma"] < 0.005
    assert m["ppf"] == 10 * DF and m["mpf"] == pytest.approx(10 * DF, abs=DF) and m["sef75"] <= 12 * DF
    assert 21 * DF <= m["sef90"] <= m["sef95"] <= 24 * DF
    assert psd.sum() == pytest.approx(2.5, rel=0.01)


def test_metrics_of_a_flat_spectrum_and_of_a_single_line_are_exact():
    freqs = np.fft.rfftfreq(N, 1 / FS)
    flat = np.ones_like(freqs)                 # 68 bins from 0 Hz to the cutoff (bin 67 = 65.4 Hz)
    m = qeeg.metrics(freqs, flat)
    assert (m["mpf"], m["sef75"], m["sef90"], m["sef95"]) == (33 * DF, 50 * DF, 61 * DF, 64 * DF)
    widths = {"delta": 4, "theta": 3, "alpha": 6, "beta": 18, "gamma": 37}     # bins per band, 68 in all
    assert {b: m[b] for b in widths} == pytest.approx({b: w / 68 for b, w in widths.items()})
    assert m["sen"] == pytest.approx(1.0)
    line = np.zeros_like(freqs)
    line[20] = 1.0
    m = qeeg.metrics(freqs, line)
    assert m["sen"] == 0.0 and m["ppf"] == m["mpf"] == m["sef95"] == 20 * DF and m["beta"] == 1.0


@pytest.mark.parametrize("window_name", qeeg.WINDOWS)
def test_white_noise_is_flat(window_name):
    rng = np.random.default_rng(3)
    x = rng.normal(0, 2.0, 160 * 512)
    p = qeeg.Periodogram(average=150, window_name=window_name)
    p.push(x)
    assert p.psd.sum() == pytest.approx(4.0, rel=0.03)       # the variance
    m = p.metrics()
    flat = qeeg.metrics(p.freqs, np.ones_like(p.freqs))
    assert m["sen"] > 0.995
    for key in ("mpf", "sef75", "sef90", "sef95"):
        assert m[key] == pytest.approx(flat[key], abs=2.5 * DF), key
    for band in qeeg.BANDS:     # the detrend removes the lowest bins' power: delta a little low, the rest high
        assert m[band] == pytest.approx(flat[band], abs=0.02), band


def test_segment_welch_average_equals_scipys_welch():
    """With whole-segment linear detrend, the average of the 10 segments is Welch's estimate (times df)."""
    rng = np.random.default_rng(4)
    x = tone(30, 0.7) + rng.normal(0, 1, 11 * 512)
    for window_name in ("hann", "blackman"):
        freqs, psd = qeeg.periodogram(x, window_name=window_name, detrend="segment")
        f, density = signal.welch(x, fs=FS, window=window_name, nperseg=N, noverlap=N // 2, detrend="linear")
        np.testing.assert_allclose(freqs, f)
        np.testing.assert_allclose(psd, density * DF, rtol=1e-10, atol=1e-15)
    welch_window = qeeg.window("welch", 8)
    np.testing.assert_allclose(welch_window, 1 - ((np.arange(8) - 4) / 4) ** 2)
    with pytest.raises(ValueError, match="window"):
        qeeg.window("hamming", 8)


def test_the_periodogram_averages_the_ten_most_recent_segments():
    p = qeeg.Periodogram(average=10)
    assert p.push(tone(10, samples=1000)) == 0 and not p.ready and p.psd is None
    assert p.push(tone(10, samples=24)) == 1 and p.updates == 1       # 1024 samples: the first PSD
    assert p.push(tone(10, samples=512 * 9)) == 9 and p.updates == 10
    rng = np.random.default_rng(7)
    new = tone(40, samples=11 * 512) + rng.normal(0, 0.1, 11 * 512)
    only_new = qeeg.periodogram(new)[1]
    for k in range(1, 12):                  # then another signal, half a segment at a time
        assert p.push(new[(k - 1) * 512:k * 512]) == 1
        if k < 11:                          # a segment holding the old tone is still among the last 10
            assert p.psd[10] > 100 * only_new[10], k
        else:                               # 5120 steps after the change: only the new signal is left
            np.testing.assert_allclose(p.psd, only_new, rtol=1e-12)
    assert p.updates == 21 and p.metrics()["ppf"] == 40 * DF


def test_the_thesis_half_segment_detrend_runs_and_shows_its_junction_leakage():
    x = tone(10, 1.0)
    freqs, whole = qeeg.periodogram(x, detrend="segment")
    _, halves = qeeg.periodogram(x, detrend="half")
    assert qeeg.peak_frequency(freqs, halves) == 10 * DF
    assert qeeg.band_powers(freqs, whole)["alpha"] > 0.995
    assert qeeg.band_powers(freqs, halves)["alpha"] < 0.99       # the step between the halves leaks


def test_the_wiener_filter_keeps_the_line_and_removes_the_noise_floor():
    rng = np.random.default_rng(5)
    x = tone(40, 1.0, samples=11 * 512) + rng.normal(0, 1.0, 11 * 512)
    freqs, raw = qeeg.periodogram(x)
    _, filtered = qeeg.periodogram(x, wiener=True)
    assert np.all(filtered >= 0) and np.all(filtered <= raw + 1e-18)
    assert filtered[40] == pytest.approx(raw[40], rel=0.05)
    floor = np.r_[100:300]
    assert filtered[floor].mean() < 0.1 * raw[floor].mean()


def test_bad_periodogram_settings_are_refused():
    with pytest.raises(ValueError, match="segment"):
        qeeg.Periodogram(segment=1023)
    with pytest.raises(ValueError, match="detrend"):
        qeeg.Periodogram(detrend="none")
    with pytest.raises(ValueError, match="samples"):
        qeeg.periodogram(np.zeros(100))


def _antropy():
    if "numba" not in sys.modules:      # antropy compiles unrelated numba functions at import (~10 s); its
        os.environ.setdefault("NUMBA_DISABLE_JIT", "1")    # spectral entropy is plain SciPy, so skip that
    return pytest.importorskip("antropy")


def test_spectral_entropy_agrees_with_antropy():
    ant = _antropy()
    rng = np.random.default_rng(6)
    signals = {"noise": rng.normal(0, 1, 11 * 512),
               "tones and noise": tone(9, 2.0) + tone(25, 1.0) + rng.normal(0, 0.5, 11 * 512),
               "coloured noise": signal.lfilter([1.0], [1.0, -0.9], rng.normal(0, 1, 11 * 512))}
    for name, x in signals.items():
        freqs, psd = qeeg.periodogram(x, window_name="hann", detrend="segment")
        ours = qeeg.spectral_entropy(freqs, psd, band=(0.0, FS / 2))
        theirs = float(ant.spectral_entropy(x, FS, method="welch", nperseg=N, normalize=True))
        # antropy's Welch removes only the mean of each segment, ours the linear trend
        assert ours == pytest.approx(theirs, abs=2e-3), name
