"""sim/spectral.py: FFT magnitudes, spherical means, accumulation and export."""
import math

import numpy as np
import pytest

from latticelab.sim.analysis import spectral
from latticelab.sim.io import free_path
from latticelab.sim.analysis.spectral import (SpectrumAccumulator, SpectrumRecord, fft_magnitude, spherical_mean,
                          zero_frequency_index)


@pytest.mark.parametrize("shape,k", [((32, 48), (3, -5)), ((16, 16, 24), (2, 0, 7)), ((64,), (9,))])
def test_plane_wave_peaks_exactly_at_its_wave_vector(shape, k):
    grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    phase = sum(2 * np.pi * ki * g / n for ki, g, n in zip(k, grids, shape))
    mag = fft_magnitude(np.cos(phase))
    centre = np.array(zero_frequency_index(shape))
    peaks = {tuple(int(i) for i in p) for p in np.argwhere(mag > 0.25)}
    assert peaks == {tuple(centre + np.array(k)), tuple(centre - np.array(k))}
    assert mag[tuple(centre + np.array(k))] == pytest.approx(0.5, abs=1e-5)
    rest = mag.copy()
    for p in peaks:
        rest[p] = 0
    assert rest.max() < 1e-5


@pytest.mark.parametrize("shape", [(16, 16), (8, 12, 10)])
def test_checkerboard_peaks_at_the_nyquist_corner(shape):
    checker = np.where(np.indices(shape).sum(axis=0) % 2 == 0, 1, -1).astype(np.int8)
    mag = fft_magnitude(checker)
    assert np.unravel_index(np.argmax(mag), shape) == (0,) * len(shape)  # k_i = -n_i/2 for every axis
    assert mag[(0,) * len(shape)] == pytest.approx(1.0)
    assert np.count_nonzero(mag > 1e-6) == 1


def test_boolean_spins_map_to_plus_minus_one_and_dc_is_zero():
    rng = np.random.default_rng(4)
    up = rng.random((20, 20)) < 0.7          # strongly magnetised: a large DC term before zeroing
    a = fft_magnitude(up)
    b = fft_magnitude(np.where(up, 1, -1).astype(np.int8))
    np.testing.assert_array_equal(a, b)
    assert a[zero_frequency_index(a.shape)] == 0.0
    m = fft_magnitude(up, normalise="max")
    assert m.max() == pytest.approx(1.0)
    assert fft_magnitude(np.ones((4, 4)), normalise="max").max() == 0.0  # no division by zero
    with pytest.raises(ValueError, match="normalise"):
        fft_magnitude(up, normalise="peak")
    with pytest.raises(ValueError, match="field"):
        fft_magnitude(np.zeros((0, 3)))


def shell_z_scores(field):
    """z-scores of each shell's mean against white noise of unit variance: every non-DC mode's
    |F|/sqrt(N) is then Rayleigh with mean sqrt(pi)/2 and variance 1 - pi/4 (E|F|^2 = N). Modes k and -k
    are conjugate, so a shell of m modes holds m/2 independent values."""
    n = field.size
    sm = spherical_mean(fft_magnitude(field))
    big = sm.modes >= 16
    expected = math.sqrt(math.pi) / 2 / math.sqrt(n)
    sigma = np.sqrt((1 - math.pi / 4) / (sm.modes[big] / 2)) / math.sqrt(n)
    return sm.k[big], (sm.mean[big] - expected) / sigma


@pytest.mark.parametrize("shape", [(128, 128), (40, 40, 40)])
def test_isotropic_noise_has_a_flat_spherical_mean(shape):
    rng = np.random.default_rng(11)
    k, z = shell_z_scores(rng.normal(size=shape))
    assert z.size > 20
    assert np.abs(z).max() < 5                                   # no shell off by 5 standard errors
    # the scatter is what the statistics say: mean z^2 is chi^2/nu, standard deviation sqrt(2/nu)
    assert np.mean(z ** 2) == pytest.approx(1.0, abs=4 * math.sqrt(2 / z.size))
    slope = np.polyfit(k, z, 1)[0] * (k.max() - k.min())         # flat: no trend across the shells
    assert abs(slope) < 3


def test_random_spins_have_a_flat_spherical_mean():
    # +-1 spins are not Gaussian: |F(k)|^2 of different modes are slightly anti-correlated (fourth
    # cumulant -2 per site), so shells scatter less than the Gaussian error; the bound still holds.
    rng = np.random.default_rng(12)
    _, z = shell_z_scores(rng.choice(np.array([-1, 1], np.int8), size=(40, 40, 40)))
    assert np.abs(z).max() < 5


def test_spherical_mean_shells_are_integer_radii_and_cover_every_mode():
    mag = np.ones((10, 10), np.float32)
    mag[zero_frequency_index(mag.shape)] = 0
    sm = spherical_mean(mag)
    assert sm.k[0] == 1 and np.all(np.diff(sm.k) >= 1)
    assert sm.modes.sum() == mag.size - 1
    np.testing.assert_allclose(sm.mean, 1.0)


def test_accumulator_mean_and_std_match_numpy_over_samples():
    rng = np.random.default_rng(5)
    fields = [rng.choice(np.array([-1, 1], np.int8), size=(12, 12)) for _ in range(7)]
    acc = SpectrumAccumulator()
    mags = [acc.add_field(f) for f in fields]
    np.testing.assert_allclose(acc.mean, np.mean(mags, axis=0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(acc.std, np.std(mags, axis=0, ddof=1), rtol=1e-5, atol=1e-9)
    radial = np.array([spherical_mean(m).mean for m in mags])
    s = acc.spherical()
    np.testing.assert_allclose(s.mean, radial.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(s.std, radial.std(axis=0, ddof=1), rtol=1e-5)
    assert s.count == 7
    # configurations do not add: the mean spectrum is not the spectrum of the mean configuration
    assert not np.allclose(acc.mean, fft_magnitude(np.mean(fields, axis=0)))
    with pytest.raises(ValueError, match="shape"):
        acc.add(fft_magnitude(fields[0][:6, :6]))
    acc.reset()
    with pytest.raises(ValueError, match="no spectrum"):
        acc.mean


@pytest.fixture
def record():
    rng = np.random.default_rng(2)
    acc = SpectrumAccumulator()
    for _ in range(3):
        acc.add_field(rng.choice(np.array([-1, 1], np.int8), size=(6, 8, 10)))
    return acc.record(model="ising", T=4.5115, rewire_dims="x")


def test_npz_export_reloads_equal_and_never_overwrites(tmp_path, record):
    path = spectral.export(record, tmp_path / "spec.npz", "npz")
    back = spectral.load_npz(path)
    np.testing.assert_array_equal(back.mean, record.mean)
    np.testing.assert_array_equal(back.std, record.std)
    for name in ("k", "mean", "std", "modes"):
        np.testing.assert_array_equal(getattr(back.spherical, name), getattr(record.spherical, name))
    assert back.count == 3 and back.metadata == record.metadata
    before = path.read_bytes()
    with pytest.raises(FileExistsError):
        spectral.export(record, path, "npz")
    assert path.read_bytes() == before
    assert free_path(path).name == "spec-1.npz"


def test_csv_exports_reload_equal(tmp_path, record):
    p = spectral.export(record, tmp_path / "radial.csv", "spherical-csv")
    s = spectral.load_spherical_csv(p)
    for name in ("k", "mean", "std", "modes"):
        np.testing.assert_array_equal(getattr(s, name), getattr(record.spherical, name))
    assert s.count == 3
    q = spectral.export(record, tmp_path / "full.csv", "spectrum-csv")
    mean, std = spectral.load_spectrum_csv(q)
    np.testing.assert_array_equal(mean, record.mean)
    np.testing.assert_array_equal(std, record.std)
    with pytest.raises(FileExistsError):
        spectral.export(record, q, "spectrum-csv")
    spectral.export(record, q, "spectrum-csv", overwrite=True)
    with pytest.raises(ValueError, match="kind"):
        spectral.export(record, tmp_path / "x.txt", "txt")


def test_damaged_files_are_rejected_with_a_message(tmp_path, record):
    path = spectral.export(record, tmp_path / "spec.npz", "npz")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="not a readable"):
        spectral.load_npz(path)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="spherical-mean CSV"):
        spectral.load_spherical_csv(bad)


def test_single_record_from_one_spectrum():
    rec = SpectrumRecord.single(fft_magnitude(np.random.default_rng(0).normal(size=(8, 8))), step=4)
    assert rec.count == 1 and np.all(rec.std == 0) and rec.metadata["step"] == 4


@pytest.mark.gpu
def test_cupy_spectrum_matches_numpy():
    import cupy
    rng = np.random.default_rng(8)
    spins = rng.choice(np.array([-1, 1], np.int8), size=(32, 32, 32))
    a = fft_magnitude(spins)
    b = fft_magnitude(cupy.asarray(spins))
    assert isinstance(b, cupy.ndarray)
    np.testing.assert_allclose(b.get(), a, atol=1e-6)
    np.testing.assert_allclose(spherical_mean(b).mean, spherical_mean(a).mean, rtol=1e-5)
    acc = SpectrumAccumulator()
    acc.add(b)
    acc.add(b * 2)
    np.testing.assert_allclose(acc.spherical().mean, 1.5 * spherical_mean(a).mean, rtol=1e-5)
