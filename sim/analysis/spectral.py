"""Spectral analysis of lattice fields (thesis 003, section 7.4): FFT magnitudes, spherical means and
their averages over runs or steps.

Works on any real field -- Ising spins, a Cahn-Hilliard concentration, membrane potentials -- in any
number of dimensions, on NumPy or CuPy (the array module is taken from the field or passed as ``xp``).

Conventions
* Spins enter as up = +1, down = -1 (a boolean field is mapped True -> +1, False -> -1).
* ``magnitude`` is |FFT| / N (N = number of sites), shifted so frequency zero is at index n // 2 of every
  axis, with that constant (DC) term set to 0. A plane wave cos(2 pi k.x / L) gives 0.5 at +-k, the
  checkerboard (-1)^(x+y+...) gives 1.0 at the Nyquist corner (shifted index 0 along every axis).
* Frequencies are integer mode numbers k_i in [-n_i/2, n_i/2); |k| is measured in units of the
  fundamental mode of the longest axis (k_i scaled by n_max / n_i), so a cubic lattice has plain |k|.
* Scattering patterns add, configurations do not: averages are taken over magnitudes (and over each
  sample's spherical mean, which gives the error bars of the thesis' figure 7.16).
"""
from __future__ import annotations

import csv
import json
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from latticelab.sim.backend import array_module, to_numpy
from latticelab.sim.io import open_atomic

NORMALISATIONS = ("sites", "max", "none")


def as_real_field(field, xp=None):
    """A float32 copy-or-view of a spin or scalar field: bool -> +-1, other real dtypes as they are."""
    xp = xp or array_module(field)
    field = xp.asarray(field)
    if field.ndim < 1 or field.size == 0:
        raise ValueError(f"field must be a non-empty array with at least one axis; got shape {field.shape}")
    if field.dtype == bool:
        return xp.where(field, xp.float32(1), xp.float32(-1))
    if field.dtype.kind == "c":
        raise ValueError(f"field must be real; got dtype {field.dtype}")
    return field.astype(xp.float32, copy=False)


def fft_magnitude(field, xp=None, normalise: str = "sites"):
    """|FFT(field)| shifted to centre zero frequency, DC set to 0, as float32.

    normalise: "sites" (divide by the number of sites), "max" (largest value 1; all zeros stay zeros)
    or "none" (raw |FFT|).
    """
    if normalise not in NORMALISATIONS:
        raise ValueError(f"normalise must be one of {', '.join(NORMALISATIONS)}; got {normalise!r}")
    xp = xp or array_module(field)
    f = as_real_field(field, xp)
    mag = xp.abs(xp.fft.fftn(f)).astype(xp.float32)
    mag.reshape(-1)[0] = 0  # the constant term (total magnetisation) carries no length scale
    mag = xp.fft.fftshift(mag)
    if normalise == "sites":
        mag /= xp.float32(f.size)
    elif normalise == "max":
        top = mag.max()
        mag /= xp.where(top > 0, top, xp.float32(1))
    return mag


def zero_frequency_index(shape) -> tuple[int, ...]:
    """Index of frequency zero in a shifted spectrum."""
    return tuple(n // 2 for n in shape)


def frequency_grid(shape, xp=np):
    """Integer mode numbers per axis of a shifted spectrum: k_i = index_i - n_i // 2, as (ndim, ...) array."""
    axes = [xp.arange(n, dtype=xp.float32) - (n // 2) for n in shape]
    return xp.stack(xp.meshgrid(*axes, indexing="ij"))


def radius_bins(shape, xp=np):
    """Integer |k| bin (rounded) of every mode of a shifted spectrum, and the number of bins."""
    n_max = max(shape)
    k = frequency_grid(shape, xp)
    scale = xp.asarray([n_max / n for n in shape], dtype=xp.float32).reshape((-1,) + (1,) * len(shape))
    radius = xp.sqrt(((k * scale) ** 2).sum(axis=0))
    bins = xp.rint(radius).astype(xp.int64)
    n_bins = int(math.floor(math.sqrt(sum((n_max / 2) ** 2 for _ in shape)) + 0.5)) + 1
    return bins, n_bins


@dataclass
class SphericalMean:
    """Mean magnitude over shells of equal |k| (bins with no mode are left out)."""
    k: np.ndarray        # shell radius in mode numbers (float64, host)
    mean: np.ndarray     # mean magnitude in each shell (host)
    modes: np.ndarray    # number of modes in each shell (host, int64)


class _ShellCache:
    """Shell indices are the same for every spectrum of one shape: build them once per shape and module."""

    def __init__(self):
        self._cache = {}

    def get(self, shape, xp):
        key = (tuple(shape), xp.__name__)
        if key not in self._cache:
            bins, n_bins = radius_bins(shape, xp)
            bins = bins.reshape(-1)
            counts = xp.bincount(bins, minlength=n_bins)
            self._cache = {key: (bins, counts, n_bins)}  # keep one shape: spectra are large
        return self._cache[key]


_shells = _ShellCache()


def spherical_mean_device(magnitude, xp=None):
    """(mean per shell, modes per shell) on the array's own device, all shells including empty ones."""
    xp = xp or array_module(magnitude)
    bins, counts, n_bins = _shells.get(magnitude.shape, xp)
    sums = xp.bincount(bins, weights=magnitude.reshape(-1).astype(xp.float64), minlength=n_bins)
    return sums / xp.maximum(counts, 1), counts


def spherical_mean(magnitude, xp=None) -> SphericalMean:
    """The spherical (radial) mean of a shifted magnitude spectrum, as a function of |k|.

    The DC shell (k = 0) holds only the zeroed constant term and is left out.
    """
    xp = xp or array_module(magnitude)
    mean, counts = spherical_mean_device(magnitude, xp)
    mean, counts = to_numpy(mean), to_numpy(counts)
    keep = counts > 0
    keep[0] = False
    k = np.arange(mean.size, dtype=np.float64)
    return SphericalMean(k=k[keep], mean=mean[keep], modes=counts[keep].astype(np.int64))


@dataclass
class SpectrumAccumulator:
    """Running mean and standard deviation (Welford) of spectra and of their spherical means.

    Add magnitudes (scattering patterns), never configurations: ``add_field`` transforms first.
    """
    count: int = 0
    shape: tuple | None = None
    normalise: str = "sites"
    _mean: object = field(default=None, repr=False)
    _m2: object = field(default=None, repr=False)
    _radial_mean: object = field(default=None, repr=False)
    _radial_m2: object = field(default=None, repr=False)

    def reset(self):
        self.count, self.shape = 0, None
        self._mean = self._m2 = self._radial_mean = self._radial_m2 = None

    def add_field(self, field, xp=None):
        mag = fft_magnitude(field, xp, normalise=self.normalise)
        self.add(mag)
        return mag

    def add(self, magnitude):
        xp = array_module(magnitude)
        if self.shape is not None and tuple(magnitude.shape) != self.shape:
            raise ValueError(f"spectrum shape {tuple(magnitude.shape)} differs from the accumulated "
                             f"shape {self.shape}; reset the accumulator first")
        mag = magnitude.astype(xp.float64)
        radial, _ = spherical_mean_device(magnitude, xp)
        if self.count == 0:
            self.shape = tuple(magnitude.shape)
            self._mean, self._m2 = xp.zeros_like(mag), xp.zeros_like(mag)
            self._radial_mean, self._radial_m2 = xp.zeros_like(radial), xp.zeros_like(radial)
        self.count += 1
        for mean, m2, x in ((self._mean, self._m2, mag), (self._radial_mean, self._radial_m2, radial)):
            delta = x - mean
            mean += delta / self.count
            m2 += delta * (x - mean)

    def _require_data(self):
        if self.count == 0:
            raise ValueError("no spectrum has been accumulated yet")

    @property
    def mean(self):
        self._require_data()
        return self._mean

    @property
    def std(self):
        """Sample standard deviation over the accumulated spectra (0 for a single one)."""
        self._require_data()
        return (self._m2 / max(self.count - 1, 1)) ** 0.5

    def spherical(self) -> "SphericalSummary":
        """Mean and standard deviation over samples of each sample's spherical mean."""
        self._require_data()
        xp = array_module(self._radial_mean)
        _, counts, _ = _shells.get(self.shape, xp)
        counts = to_numpy(counts)
        keep = counts > 0
        keep[0] = False
        mean = to_numpy(self._radial_mean)
        std = to_numpy((self._radial_m2 / max(self.count - 1, 1)) ** 0.5)
        k = np.arange(mean.size, dtype=np.float64)
        return SphericalSummary(k=k[keep], mean=mean[keep], std=std[keep], modes=counts[keep].astype(np.int64),
                                count=self.count)

    def record(self, **metadata) -> "SpectrumRecord":
        """Everything worth saving, on the host."""
        return SpectrumRecord(mean=to_numpy(self.mean).astype(np.float32), std=to_numpy(self.std).astype(np.float32),
                              spherical=self.spherical(), count=self.count,
                              metadata={"normalise": self.normalise, **metadata})


@dataclass
class SphericalSummary:
    k: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    modes: np.ndarray
    count: int


@dataclass
class SpectrumRecord:
    """An averaged spectrum with its spread and spherical mean, ready to export."""
    mean: np.ndarray
    std: np.ndarray
    spherical: SphericalSummary
    count: int
    metadata: dict

    @classmethod
    def single(cls, magnitude, **metadata) -> "SpectrumRecord":
        acc = SpectrumAccumulator()
        acc.add(magnitude)
        return acc.record(**metadata)


# ------------------------------------------------------------------------------------------- export

EXPORT_KINDS = ("npz", "spherical-csv", "spectrum-csv", "iso-vtu")


def _open_new(path: Path, overwrite: bool, binary: bool):
    """Open for writing through sim/io.py: atomically, and never over an existing file unless asked."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return open_atomic(path, overwrite=overwrite, binary=binary)


def save_npz(record: SpectrumRecord, path, overwrite: bool = False) -> Path:
    """All of a record in one .npz (never overwrites an existing file unless asked)."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"path must end in .npz; got {path.name!r}")
    s = record.spherical
    with _open_new(path, overwrite, binary=True) as f:
        np.savez(f, spectrum_mean=record.mean, spectrum_std=record.std, k=s.k, spherical_mean=s.mean,
                 spherical_std=s.std, modes=s.modes, count=np.int64(record.count),
                 metadata=np.array(json.dumps(record.metadata)))
    return path


def load_npz(path) -> SpectrumRecord:
    try:
        with np.load(path, allow_pickle=False) as d:
            spherical = SphericalSummary(k=d["k"], mean=d["spherical_mean"], std=d["spherical_std"],
                                         modes=d["modes"], count=int(d["count"]))
            return SpectrumRecord(mean=d["spectrum_mean"], std=d["spectrum_std"], spherical=spherical,
                                  count=int(d["count"]), metadata=json.loads(str(d["metadata"])))
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path} is not a readable latticelab spectrum file ({exc})") from None


def _metadata_lines(record: SpectrumRecord) -> list[str]:
    return [f"# latticelab spectrum, averaged over {record.count} sample(s)",
            f"# metadata: {json.dumps(record.metadata)}"]


def save_spherical_csv(record: SpectrumRecord, path, overwrite: bool = False) -> Path:
    """The spherical mean as CSV: k, mean, std, modes."""
    path = Path(path)
    s = record.spherical
    with _open_new(path, overwrite, binary=False) as f:
        for line in _metadata_lines(record):
            f.write(line + "\n")
        w = csv.writer(f)
        w.writerow(["k", "mean", "std", "modes"])
        for row in zip(s.k, s.mean, s.std, s.modes):
            w.writerow([repr(float(row[0])), repr(float(row[1])), repr(float(row[2])), int(row[3])])
    return path


def load_spherical_csv(path) -> SphericalSummary:
    rows = [r for r in csv.reader(line for line in open(path, newline="") if not line.startswith("#"))]
    if not rows or rows[0] != ["k", "mean", "std", "modes"]:
        raise ValueError(f"{path} is not a latticelab spherical-mean CSV (header k,mean,std,modes)")
    data = np.array(rows[1:], dtype=np.float64).reshape(-1, 4)
    count = 0
    for line in open(path):
        if line.startswith("# latticelab spectrum, averaged over "):
            count = int(line.split("over ")[1].split()[0])
    return SphericalSummary(k=data[:, 0], mean=data[:, 1], std=data[:, 2], modes=data[:, 3].astype(np.int64),
                            count=count)


def save_spectrum_csv(record: SpectrumRecord, path, overwrite: bool = False) -> Path:
    """The full spectrum as CSV in long form: one row per mode with its mode numbers, mean and std."""
    path = Path(path)
    shape = record.mean.shape
    names = ["kz", "ky", "kx"][-len(shape):] if len(shape) <= 3 else [f"k{i}" for i in range(len(shape))]
    k = frequency_grid(shape).reshape(len(shape), -1).T.astype(np.int64)
    with _open_new(path, overwrite, binary=False) as f:
        for line in _metadata_lines(record):
            f.write(line + "\n")
        f.write(f"# shape: {list(shape)}\n")
        f.write(",".join(names + ["mean", "std"]) + "\n")
        table = np.column_stack([k, record.mean.reshape(-1), record.std.reshape(-1)])
        fmt = ["%d"] * len(shape) + ["%.9g", "%.9g"]
        np.savetxt(f, table, fmt=fmt, delimiter=",")
    return path


def load_spectrum_csv(path) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) arrays of a spectrum CSV, in the shifted layout they were saved from."""
    shape, header_rows = None, 0
    with open(path) as f:
        for line in f:
            header_rows += 1
            if line.startswith("# shape:"):
                shape = tuple(json.loads(line.split(":", 1)[1]))
            if not line.startswith("#"):  # the column names
                break
    if shape is None:
        raise ValueError(f"{path} is not a latticelab spectrum CSV (no '# shape:' line)")
    data = np.loadtxt(path, delimiter=",", skiprows=header_rows, ndmin=2, dtype=np.float64)
    if data.shape != (math.prod(shape), len(shape) + 2):
        raise ValueError(f"{path}: expected {math.prod(shape)} rows of {len(shape) + 2} columns, "
                         f"found {data.shape}")
    return data[:, -2].reshape(shape).astype(np.float32), data[:, -1].reshape(shape).astype(np.float32)


def export(record: SpectrumRecord, path, kind: str, overwrite: bool = False) -> Path:
    """Save ``record`` as ``kind`` (one of EXPORT_KINDS) at ``path``; refuses to overwrite unless asked."""
    if kind == "npz":
        return save_npz(record, path, overwrite)
    if kind == "spherical-csv":
        return save_spherical_csv(record, path, overwrite)
    if kind == "spectrum-csv":
        return save_spectrum_csv(record, path, overwrite)
    if kind == "iso-vtu":       # for ParaView: the surface at the record's iso value (metadata "iso")
        from latticelab.sim.output.vtk import write_spectrum_surface
        if "iso" not in record.metadata:
            raise ValueError("an iso-surface needs a 3D spectrum and its iso value")
        return write_spectrum_surface(path, record.mean, record.metadata["iso"], overwrite=overwrite)
    raise ValueError(f"kind must be one of {', '.join(EXPORT_KINDS)}; got {kind!r}")
