"""Critical-temperature measurements (thesis 003, sections 7.5-7.7): per-configuration energy and
magnetisation, their thermal averages with errors, heat capacity, susceptibility and the Binder cumulant, the
Pearson correlation between configurations (decorrelation distance) and equilibration curves.

Per configuration only two numbers are needed: the energy per spin e = E/N and the (signed) magnetisation
per spin m = M/N; |M|, M^2 and M^4 follow from m. They are reduced on the device where the model's state
lives and copied back as one small array (the HasMagnetisation capability of sim/model.py, one sync).

How a model gives e and m is the only model-specific part (``measurer``): a model with the HasMagnetisation
capability (the Ising model) through its own reduction; any other model through the declared observables
named "energy" and "magnetisation" if it has them. A model without one of them cannot give the quantities that need it
(``unavailable`` says which, and why), so generic code (sim/studies) can refuse such a study before anything runs.

Over a run of n configurations (``thermodynamics``):
    <e>, <|m|>               mean, error by blocking (block means are nearly independent)
    C_v = N (<e^2> - <e>^2) / T^2          heat capacity per spin          } value from all data,
    chi = N (<m^2> - <|m|>^2) / T          susceptibility per spin         } error by jackknife over
    U   = 1 - <m^4> / (3 <m^2>^2)          Binder cumulant                 } the same blocks
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from latticelab.sim.backend import to_numpy

# What each per-configuration series gives, and the run quantities that need it.
NEEDS = {
    "energy": ("energy", "heat_capacity"),
    "magnetisation": ("abs_magnetisation", "m2", "m4", "susceptibility", "binder"),
}
QUANTITIES = tuple(q for qs in NEEDS.values() for q in qs)
RATIOS = ("1:0", "16:1", "8:1", "4:1", "2:1", "1:1")      # Metropolis:Wolff ratios of figures 7.23 and 7.25
DECORRELATED = 0.01                                       # |rho| <= 0.01 counts as decorrelated (7.5.2)


# ---- per configuration -------------------------------------------------------------------------------
def _from_capability(model) -> dict[str, float]:
    """Energy and signed magnetisation per cell of a model with the HasMagnetisation capability (sim/model.py),
    reduced where its state lives."""
    energy, magnetisation = model.energy_and_magnetisation()
    return {"energy": float(energy), "magnetisation": float(magnetisation)}


def _from_observables(names: tuple[str, ...]) -> Callable:
    def per_spin(model) -> dict[str, float]:
        obs = model.observables()
        return {name: float(obs[name]) for name in names}
    return per_spin


@dataclass(frozen=True)
class Measurer:
    """How to measure one configuration of a model class: ``series`` names what ``__call__(model)``
    returns ("energy", "magnetisation"); ``missing`` maps each unavailable run quantity to the reason."""
    model_name: str
    series: tuple[str, ...]
    per_spin: Callable
    missing: dict

    def __call__(self, model) -> dict[str, float]:
        return self.per_spin(model)

    @property
    def quantities(self) -> tuple[str, ...]:
        return tuple(q for s in self.series for q in NEEDS[s])


def measurer(model_class) -> Measurer:
    """The per-configuration measurement of a registered model class (see the module docstring)."""
    name = model_class.name
    declared = {o.name for o in model_class.declared_observables}
    if callable(getattr(model_class, "energy_and_magnetisation", None)):   # sim.model.HasMagnetisation
        series, per_spin = tuple(NEEDS), _from_capability
    else:
        series = tuple(s for s in NEEDS if s in declared)
        per_spin = _from_observables(series)
    missing = {q: f"model {name!r} declares no {s!r} observable, so {q} cannot be measured"
               for s in NEEDS if s not in series for q in NEEDS[s]}
    return Measurer(name, series, per_spin, missing)


def unavailable(model_class) -> dict[str, str]:
    """Run quantities the model cannot give -> why (empty for the Ising model)."""
    return dict(measurer(model_class).missing)


# ---- over a run: means, blocking and jackknife errors ------------------------------------------------
def n_blocks_for(n: int, wanted: int = 32) -> int:
    """Blocks used for errors: ``wanted`` when there are enough values (>= 4 per block), fewer otherwise."""
    return int(max(2, min(wanted, n // 4))) if n >= 4 else max(1, n)


def _blocks(x: np.ndarray, n_blocks: int) -> np.ndarray:
    """Means of ``n_blocks`` consecutive equal blocks (a remainder at the end is dropped)."""
    size = len(x) // n_blocks
    return np.asarray(x[: size * n_blocks], dtype=np.float64).reshape(n_blocks, size).mean(axis=1)


def blocking(x, n_blocks: int | None = None) -> tuple[float, float]:
    """(mean, error of the mean): the standard error of the block means, which holds for correlated series
    as long as a block is longer than the correlation time."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return float("nan"), float("nan")
    nb = n_blocks or n_blocks_for(x.size)
    if nb < 2:
        return float(x.mean()), float("nan")
    means = _blocks(x, nb)
    return float(x.mean()), float(means.std(ddof=1) / np.sqrt(nb))


def jackknife(estimator: Callable[..., float], *series, n_blocks: int | None = None) -> tuple[float, float]:
    """(value, error) of ``estimator(*block_or_full_means)`` where the arguments are means of ``series``:
    the value from all data, the error from leaving out one block at a time."""
    arrays = [np.asarray(s, dtype=np.float64) for s in series]
    n = arrays[0].size
    value = float(estimator(*(a.mean() for a in arrays)))
    nb = n_blocks or n_blocks_for(n)
    if nb < 2:
        return value, float("nan")
    block_means = [_blocks(a, nb) for a in arrays]
    totals = [b.sum() for b in block_means]
    leave_out = np.array([estimator(*((t - b[i]) / (nb - 1) for t, b in zip(totals, block_means)))
                          for i in range(nb)])
    return value, float(np.sqrt((nb - 1) / nb * ((leave_out - leave_out.mean()) ** 2).sum()))


def heat_capacity(e_mean: float, e2_mean: float, T: float, n_sites: int) -> float:
    """C_v per spin = N (<e^2> - <e>^2) / T^2 for the energy per spin e."""
    return n_sites * (e2_mean - e_mean ** 2) / T ** 2


def susceptibility(m_abs_mean: float, m2_mean: float, T: float, n_sites: int) -> float:
    """chi per spin = N (<m^2> - <|m|>^2) / T for the magnetisation per spin m."""
    return n_sites * (m2_mean - m_abs_mean ** 2) / T


def binder(m2_mean: float, m4_mean: float) -> float:
    """U = 1 - <m^4> / (3 <m^2>^2)."""
    return 1.0 - m4_mean / (3.0 * m2_mean ** 2)


def thermodynamics(T: float, n_sites: int, energy=None, magnetisation=None,
                   n_blocks: int | None = None) -> dict[str, float]:
    """Means and errors over a run from per-configuration series (energy and signed magnetisation per spin;
    either may be None when the model lacks it, and its quantities are then left out). Keys: energy,
    abs_magnetisation, m2, m4, heat_capacity, susceptibility, binder, each with a ``_err``, and n."""
    out: dict[str, float] = {}
    if energy is not None:
        e = np.asarray(energy, dtype=np.float64)
        out["n"] = e.size
        out["energy"], out["energy_err"] = blocking(e, n_blocks)
        out["heat_capacity"], out["heat_capacity_err"] = jackknife(
            lambda a, b: heat_capacity(a, b, T, n_sites), e, e * e, n_blocks=n_blocks)
    if magnetisation is not None:
        m = np.abs(np.asarray(magnetisation, dtype=np.float64))
        m2 = m * m
        out["n"] = m.size
        out["abs_magnetisation"], out["abs_magnetisation_err"] = blocking(m, n_blocks)
        out["m2"], out["m2_err"] = blocking(m2, n_blocks)
        out["m4"], out["m4_err"] = blocking(m2 * m2, n_blocks)
        out["susceptibility"], out["susceptibility_err"] = jackknife(
            lambda a, b: susceptibility(a, b, T, n_sites), m, m2, n_blocks=n_blocks)
        out["binder"], out["binder_err"] = jackknife(binder, m2, m2 * m2, n_blocks=n_blocks)
    return out


def exact_quantities(averages: dict[str, float], T: float, n_sites: int) -> dict[str, float]:
    """chi and U from exact averages (sim/models/ising/exact.py: <|M|>/N, <M^2>/N^2, <M^4>/N^4)."""
    return {"susceptibility": susceptibility(averages["magnetisation"], averages["m2"], T, n_sites),
            "binder": binder(averages["m2"], averages["m4"])}


# ---- decorrelation: Pearson correlation between configurations ----------------------------------------
def pearson(reference, current) -> float:
    """Pearson correlation coefficient rho (equation 7.4) between two configurations of equal shape, over
    their cells; computed on their device, five sums copied back. NaN when either is constant."""
    from latticelab.sim.backend import array_module
    xp = array_module(reference)
    a = reference.astype(xp.float64).ravel()
    b = current.astype(xp.float64).ravel()
    n = a.size
    sa, sb, sab, saa, sbb = to_numpy(xp.stack([a.sum(), b.sum(), (a * b).sum(), (a * a).sum(), (b * b).sum()]))
    cov = sab / n - (sa / n) * (sb / n)
    va, vb = saa / n - (sa / n) ** 2, sbb / n - (sb / n) ** 2
    if va <= 0 or vb <= 0:
        return float("nan")
    return float(cov / np.sqrt(va * vb))


def main_field_array(model):
    """The model's main field (the first of ``fields()``: the spins of the Ising model), on its device."""
    return next(iter(model.fields().values()))


def correlation_curve(model, distance: int, references: int = 1, step: int = 1) -> dict[str, np.ndarray]:
    """|rho| between a reference configuration and each of the ``distance`` configurations after it (one
    model step apart; ``step`` steps apart if given), for ``references`` successive references (each the
    configuration after the previous curve, as in figure 7.25). Returns steps, the |rho| per reference and
    step (shape (references, distance)), and the wall-clock seconds after the reference of each."""
    rho = np.empty((references, distance))
    seconds = np.empty((references, distance))
    for r in range(references):
        ref = main_field_array(model).copy()
        start = time.perf_counter()
        for d in range(distance):
            model.step(step)
            rho[r, d] = abs(pearson(ref, main_field_array(model)))     # syncs: the time includes the step
            seconds[r, d] = time.perf_counter() - start
    return {"steps": step * np.arange(1, distance + 1), "abs_rho": rho, "seconds": seconds}


def decorrelation_distance(steps, abs_rho, threshold: float = DECORRELATED) -> int | None:
    """The first step count at which the mean |rho| (over references, if 2D) is <= threshold; None if never."""
    rho = np.asarray(abs_rho, dtype=np.float64)
    if rho.ndim == 2:
        rho = np.nanmean(rho, axis=0)
    below = np.flatnonzero(rho <= threshold)
    return int(np.asarray(steps)[below[0]]) if below.size else None


# ---- equilibration and decorrelation against the Metropolis:Wolff ratio --------------------------------
def _ratio_model(model_name: str, params: dict, ratio: str, seed: int, backend: str):
    from latticelab.sim.models import get_model
    cls = get_model(model_name)
    values = {**params, "seed": seed}
    if "algorithm" in cls.Params.model_fields:
        values["algorithm"] = ratio
    return cls.create(backend=backend, **values)


def equilibration_curves(model_name: str, params: dict, steps: int, runs: int = 1,
                         ratios=RATIOS, backend: str = "auto", first_seed: int = 1) -> dict[str, dict]:
    """Energy per spin after each of ``steps`` steps from the model's initial state (hot start), for each
    Metropolis:Wolff ratio (the ``algorithm`` parameter, figure 7.23), averaged over ``runs`` seeds. Per
    ratio: steps, energy and energy_std (over runs), seconds and seconds_std (wall clock since the start;
    each measurement syncs the device, so the time includes the work)."""
    cls_measure = None
    out = {}
    for ratio in ratios:
        energy = np.empty((runs, steps))
        seconds = np.empty((runs, steps))
        for r in range(runs):
            model = _ratio_model(model_name, params, ratio, first_seed + r, backend)
            if cls_measure is None:
                cls_measure = measurer(type(model))
                if "energy" not in cls_measure.series:
                    raise ValueError(cls_measure.missing["energy"])
            cls_measure(model)                         # warm-up (kernels compiled, device synced)
            start = time.perf_counter()
            for s in range(steps):
                model.step(1)
                energy[r, s] = cls_measure(model)["energy"]
                seconds[r, s] = time.perf_counter() - start
        out[ratio] = {"steps": np.arange(1, steps + 1), "energy": energy.mean(0), "energy_std": energy.std(0),
                      "seconds": seconds.mean(0), "seconds_std": seconds.std(0)}
    return out


def decorrelation_curves(model_name: str, params: dict, equilibrate: int, distance: int, references: int = 1,
                         runs: int = 1, ratios=RATIOS, backend: str = "auto",
                         first_seed: int = 1) -> dict[str, dict]:
    """Mean |rho| against steps and wall-clock time after equilibration, per Metropolis:Wolff ratio (figure
    7.25), over ``runs`` seeds x ``references`` reference configurations each; with the decorrelation
    distance (first step with mean |rho| <= 0.01, or None)."""
    out = {}
    for ratio in ratios:
        curves = []
        for r in range(runs):
            model = _ratio_model(model_name, params, ratio, first_seed + r, backend)
            model.step(equilibrate)
            curves.append(correlation_curve(model, distance, references))
        rho = np.concatenate([c["abs_rho"] for c in curves])
        seconds = np.concatenate([c["seconds"] for c in curves])
        steps = curves[0]["steps"]
        out[ratio] = {"steps": steps, "abs_rho": np.nanmean(rho, 0), "abs_rho_std": np.nanstd(rho, 0),
                      "seconds": seconds.mean(0), "distance": decorrelation_distance(steps, rho)}
    return out
