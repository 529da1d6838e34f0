"""Periodograms and quantitative EEG (qEEG) metrics of a pseudo-EEG (thesis 003, sections 8.6.2 and 8.7).

The periodogram follows the thesis's summary of section 8.6.2, with SciPy's signal processing doing the work:

1. segments of ``segment`` samples (1024) overlapping by one half, a new one every ``segment // 2`` samples;
2. each detrended by its least-squares straight line (``scipy.signal.detrend``). The thesis's summary detrends
   each new half on its own and joins it to the previous detrended half (``detrend="half"``); that leaves a
   step at the junction which leaks power into every bin (a 5 Hz tone loses 4% of its power to other bands),
   so the default detrends the whole segment (``"segment"``, as Welch's method does; then the average of the
   segments equals ``scipy.signal.welch`` times df);
3. multiplied by the window (Blackman, Welch or Hann; ``window``),
4. transformed (``scipy.signal.periodogram``) and
5. normalised so that the one-sided PSD sums to the mean square of the windowed segment divided by the mean
   square of the window: P(f_k) = (|C_k|^2 + |C_{N-k}|^2) / (N sum w^2), equations 8.6 to 8.8 (for a
   stationary signal, sum P = its variance);
6. the ``average`` (10) most recent PSDs are averaged;
7. optionally a Wiener filter (Numerical Recipes 13.3) with a straight-line fit to the PSD as the noise:
   Phi = max(P - noise, 0) / P, and the filtered PSD is Phi^2 P (the power of the filtered signal).

The qEEG metrics (``metrics``) of the averaged PSD, with frequencies rounded to the nearest bin (df = fs / N):
spectral entropy over 1 to 47 Hz (Shannon entropy of the normalised PSD there, divided by the log of the
number of bins), peak power frequency, median power frequency, spectral edge frequencies 75/90/95% (the lowest
bin frequency at which the cumulative power reaches the fraction) over 0 Hz to the cutoff (65 Hz), and the
power of each band of table 8.4 relative to the power from 0 Hz to the cutoff. Bands take the bins from their
rounded lower edge up to, not including, their rounded upper edge (gamma includes the cutoff bin), so the
relative powers sum to 1.
"""
from __future__ import annotations

from collections import deque

import numpy as np
from scipy import signal

WINDOWS = ("blackman", "welch", "hann")
DETRENDS = ("segment", "half")
BANDS = {"delta": (0.0, 3.5), "theta": (3.5, 7.0), "alpha": (7.0, 13.0), "beta": (13.0, 30.0),
         "gamma": (30.0, 65.0)}
CUTOFF = 65.0                      # Hz: upper end of gamma and of the metrics' range (table 8.4)
ENTROPY_BAND = (1.0, 47.0)         # Hz: the spectral entropy's range (section 8.7)
EDGES = (0.75, 0.90, 0.95)         # spectral edge fractions
SAMPLE_RATE = 1000.0               # Hz: one sample per 1 ms step


def window(name: str, n: int) -> np.ndarray:
    """The data window of length n: 'blackman' and 'hann' from scipy.signal.get_window (periodic), 'welch' the
    parabola 1 - ((j - n/2) / (n/2))^2 (Numerical Recipes 13.4)."""
    if name not in WINDOWS:
        raise ValueError(f"window: must be one of {', '.join(WINDOWS)}; got {name!r}")
    if name == "welch":
        j = np.arange(n, dtype=np.float64)
        return 1.0 - ((j - n / 2) / (n / 2)) ** 2
    return signal.get_window(name, n, fftbins=True)


def segment_psd(segment, fs: float = SAMPLE_RATE, window_name: str = "blackman") -> tuple[np.ndarray, np.ndarray]:
    """(frequencies, P) of one segment (already detrended), one-sided, P summing to the window-weighted mean
    square (equation 8.8): P = scipy's PSD density times df."""
    segment = np.asarray(segment, dtype=np.float64)
    n = segment.size
    freqs, density = signal.periodogram(segment, fs=fs, window=window(window_name, n), detrend=False,
                                        scaling="density", return_onesided=True)
    return freqs, density * (fs / n)


def wiener_filter(freqs: np.ndarray, psd: np.ndarray) -> np.ndarray:
    """The PSD after an optimal (Wiener) filter whose noise is the least-squares straight line through the PSD
    (clipped at 0): Phi = max(P - noise, 0) / P, filtered P = Phi^2 P."""
    psd = np.asarray(psd, dtype=np.float64)
    slope, intercept = np.polyfit(freqs, psd, 1)
    noise = np.clip(slope * freqs + intercept, 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where(psd > 0, np.clip(psd - noise, 0.0, None) / psd, 0.0)
    return phi * phi * psd


class Periodogram:
    """The running periodogram of a signal fed in pieces (``push``): a new PSD every ``segment // 2`` samples
    once ``segment`` have arrived, the average of the ``average`` most recent in ``psd``."""

    def __init__(self, segment: int = 1024, average: int = 10, window_name: str = "blackman",
                 fs: float = SAMPLE_RATE, detrend: str = "segment", wiener: bool = False):
        if segment < 4 or segment % 2:
            raise ValueError(f"segment: must be an even number of samples >= 4; got {segment!r}")
        if average < 1:
            raise ValueError(f"average: must be >= 1; got {average!r}")
        window(window_name, 4)       # checks the name
        if detrend not in DETRENDS:
            raise ValueError(f"detrend: must be one of {', '.join(DETRENDS)}; got {detrend!r}")
        if not fs > 0:
            raise ValueError(f"fs: must be > 0; got {fs!r}")
        self.segment, self.average, self.window_name = segment, average, window_name
        self.fs, self.detrend, self.wiener = float(fs), detrend, wiener
        self.freqs = np.fft.rfftfreq(segment, 1.0 / fs)
        self._pending: list[np.ndarray] = []
        self._pending_count = 0
        self._previous: np.ndarray | None = None
        self._recent: deque[np.ndarray] = deque(maxlen=average)
        self.updates = 0             # PSDs computed so far

    def push(self, samples) -> int:
        """Add samples; returns how many new PSDs they completed."""
        samples = np.asarray(samples, dtype=np.float64).reshape(-1)
        half = self.segment // 2
        self._pending.append(samples)
        self._pending_count += samples.size
        if self._pending_count < half:
            return 0
        data = np.concatenate(self._pending)
        new = 0
        start = 0
        while data.size - start >= half:
            piece = data[start:start + half]
            start += half
            if self.detrend == "half":
                piece = signal.detrend(piece, type="linear")
            if self._previous is not None:
                seg = np.concatenate([self._previous, piece])
                if self.detrend == "segment":
                    seg = signal.detrend(seg, type="linear")
                self._recent.append(segment_psd(seg, self.fs, self.window_name)[1])
                self.updates += 1
                new += 1
            self._previous = piece
        rest = data[start:]
        self._pending = [rest] if rest.size else []
        self._pending_count = rest.size
        return new

    @property
    def ready(self) -> bool:
        return bool(self._recent)

    @property
    def psd(self) -> np.ndarray | None:
        """The average of the most recent PSDs (Wiener-filtered when asked), or None before the first."""
        if not self._recent:
            return None
        mean = np.mean(np.stack(self._recent), axis=0)
        return wiener_filter(self.freqs, mean) if self.wiener else mean

    def metrics(self) -> dict[str, float] | None:
        psd = self.psd
        return None if psd is None else metrics(self.freqs, psd)


def periodogram(samples, segment: int = 1024, average: int = 10, window_name: str = "blackman",
                fs: float = SAMPLE_RATE, detrend: str = "segment",
                wiener: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(frequencies, PSD) of a whole signal: the average of the ``average`` most recent segment PSDs."""
    p = Periodogram(segment, average, window_name, fs, detrend, wiener)
    p.push(samples)
    if not p.ready:
        raise ValueError(f"samples: need at least {segment} samples for a periodogram; got {np.size(samples)}")
    return p.freqs, p.psd


# ---- qEEG metrics --------------------------------------------------------------------------------------------
def _bin(freqs: np.ndarray, f: float) -> int:
    df = freqs[1] - freqs[0]
    return int(min(max(round(f / df), 0), freqs.size - 1))


def spectral_entropy(freqs, psd, band=ENTROPY_BAND) -> float:
    """Shannon entropy (natural log) of the PSD normalised over the bins from ``band[0]`` to ``band[1]``
    (inclusive, rounded to bins), divided by the log of the number of bins: 0 for one line, 1 for flat."""
    lo, hi = _bin(freqs, band[0]), _bin(freqs, band[1])
    p = np.asarray(psd[lo:hi + 1], dtype=np.float64)
    total = p.sum()
    if total <= 0 or p.size < 2:
        return 0.0
    p = p / total
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum() / np.log(p.size))


def _range(freqs, psd, cutoff):
    hi = _bin(freqs, cutoff)
    return np.asarray(freqs[:hi + 1]), np.asarray(psd[:hi + 1], dtype=np.float64)


def peak_frequency(freqs, psd, cutoff=CUTOFF) -> float:
    """Frequency of the largest PSD bin from 0 Hz to the cutoff."""
    f, p = _range(freqs, psd, cutoff)
    return float(f[int(np.argmax(p))])


def edge_frequency(freqs, psd, fraction: float, cutoff=CUTOFF) -> float:
    """Spectral edge frequency: the lowest bin frequency at which the cumulative power from 0 Hz reaches
    ``fraction`` of the power up to the cutoff (0.5: the median power frequency)."""
    f, p = _range(freqs, psd, cutoff)
    cumulative = np.cumsum(p)
    if cumulative[-1] <= 0:
        return 0.0
    return float(f[int(np.searchsorted(cumulative, fraction * cumulative[-1], side="left"))])


def band_powers(freqs, psd, bands=None, cutoff=CUTOFF) -> dict[str, float]:
    """Power of each band relative to the power from 0 Hz to the cutoff (edges rounded to bins; see the module
    docstring)."""
    bands = BANDS if bands is None else bands
    f, p = _range(freqs, psd, cutoff)
    total = p.sum()
    top = _bin(freqs, cutoff)
    out = {}
    for name, (lo, hi) in bands.items():
        a, b = _bin(freqs, lo), _bin(freqs, hi)
        b = b + 1 if b >= top else b
        out[name] = float(p[a:b].sum() / total) if total > 0 else 0.0
    return out


def metrics(freqs, psd, cutoff=CUTOFF, entropy_band=ENTROPY_BAND, edges=EDGES) -> dict[str, float]:
    """The qEEG numbers beside the periodogram (section 8.7): sen, ppf, mpf, sef75/90/95 and the relative band
    powers delta, theta, alpha, beta, gamma."""
    out = {"sen": spectral_entropy(freqs, psd, entropy_band), "ppf": peak_frequency(freqs, psd, cutoff),
           "mpf": edge_frequency(freqs, psd, 0.5, cutoff)}
    for e in edges:
        out[f"sef{round(e * 100)}"] = edge_frequency(freqs, psd, e, cutoff)
    out.update(band_powers(freqs, psd, cutoff=cutoff))
    return out
