"""Critical-temperature measurements (sim/analysis/critical.py, sim/studies/tc.py): estimators against exact
enumeration of the 4x4 lattice, Pearson decorrelation, equilibration curves, and the Binder crossing of the 2D
Ising model at Onsager's T_c = 2.2692 with U* near 0.61."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.analysis import critical
from latticelab.sim.models.ising.exact import T_C_2D, exact_averages
from latticelab.sim.models.ising.model import IsingModel
from latticelab.sim.studies import parse_study
from latticelab.sim.studies.point import measure_point
from latticelab.sim.studies.sweep import run_sweep
from latticelab.sim.studies.tc import analyse, load_rows

U_STAR_2D = 0.6107      # Binder cumulant at T_c of the 2D square lattice (Kamieniarz and Bloete 1993)


def enumerated(edges, n, T):
    """Per-state energy and magnetisation per spin, and Boltzmann probabilities, of all 2**n states."""
    states = np.arange(2 ** n, dtype=np.int64)
    spins = ((states[:, None] >> np.arange(n)) & 1).astype(np.int64) * 2 - 1
    energy = -sum(spins[:, a] * spins[:, b] for a, b in edges).astype(np.float64)
    weights = np.exp(-(energy - energy.min()) / T)
    return energy / n, spins.sum(axis=1) / n, weights / weights.sum()


@pytest.fixture(scope="module")
def lattice_4x4():
    model = IsingModel(dim=2, L=4, T=2.5, p=0.0, seed=1, backend="numpy")
    return model.edges(), 16


@pytest.mark.parametrize("T", [2.0, 2.5, 3.5])
def test_estimators_on_exact_samples_agree_with_enumeration(lattice_4x4, T):
    edges, n = lattice_4x4
    e, m, prob = enumerated(edges, n, T)
    rng = np.random.default_rng(7)
    draw = rng.choice(prob.size, size=200_000, p=prob)           # independent exact samples
    est = critical.thermodynamics(T, n, e[draw], m[draw])
    exact = exact_averages(edges, n, T)
    h = 1e-4
    exact_cv = (exact_averages(edges, n, T + h)["energy"] - exact_averages(edges, n, T - h)["energy"]) / (2 * h)
    exact.update(critical.exact_quantities(exact, T, n), heat_capacity=exact_cv, abs_magnetisation=exact[
        "magnetisation"])
    for q in ("energy", "abs_magnetisation", "m2", "m4", "heat_capacity", "susceptibility", "binder"):
        err = est[f"{q}_err"]
        assert err > 0
        assert abs(est[q] - exact[q]) < 4.5 * err, (q, est[q], exact[q], err)
    # the errors themselves are right: independent samples, so the blocking error is the plain one
    assert est["energy_err"] == pytest.approx(e[draw].std() / np.sqrt(draw.size), rel=0.35)


def test_a_monte_carlo_run_agrees_with_enumeration(lattice_4x4):
    edges, n = lattice_4x4
    T = 2.5
    row = measure_point("ising", L=4, p=0.0, T=T, seed=3, equilibrate=100, decorrelate=1, measurements=8000,
                        backend="numpy", dim=2, algorithm="metropolis", blocks=40)
    exact = exact_averages(edges, n, T)
    exact.update(critical.exact_quantities(exact, T, n), abs_magnetisation=exact["magnetisation"])
    for q in ("energy", "abs_magnetisation", "m2", "m4", "susceptibility", "binder"):
        assert abs(row[q] - exact[q]) < 4.5 * row[f"{q}_err"], (q, row[q], exact[q], row[f"{q}_err"])


def test_blocking_sees_correlations_and_jackknife_matches_the_delta_method():
    rng = np.random.default_rng(1)
    white = rng.normal(size=64_000)
    mean, err = critical.blocking(white)
    assert err == pytest.approx(1 / np.sqrt(white.size), rel=0.35)
    correlated = np.repeat(white[:4000], 16)        # 16 copies of each value: error as for 4000 values
    assert critical.blocking(correlated)[1] == pytest.approx(1 / np.sqrt(4000), rel=0.35)
    x = rng.normal(2.0, 0.1, size=20_000)
    value, jk = critical.jackknife(lambda a, b: b - a * a, x, x * x)   # variance: err ~ sigma^2 sqrt(2/n)
    assert value == pytest.approx(x.var(), rel=1e-9)
    assert jk == pytest.approx(0.01 * np.sqrt(2 / x.size), rel=0.35)


def test_pearson_correlation_of_configurations():
    rng = np.random.default_rng(2)
    a = rng.choice(np.array([-1, 1], dtype=np.int8), size=(64, 64))
    b = rng.choice(np.array([-1, 1], dtype=np.int8), size=(64, 64))
    assert critical.pearson(a, a) == pytest.approx(1.0)
    assert critical.pearson(a, -a) == pytest.approx(-1.0)
    mixed = np.where(rng.random((64, 64)) < 0.5, a, b)
    assert critical.pearson(a, mixed) == pytest.approx(np.corrcoef(a.ravel(), mixed.ravel())[0, 1])
    assert abs(critical.pearson(a, b)) < 0.05
    assert np.isnan(critical.pearson(np.ones((4, 4)), a[:4, :4]))
    assert critical.decorrelation_distance([1, 2, 3, 4], [[0.5, 0.2, 0.005, 0.02]]) == 3
    assert critical.decorrelation_distance([1, 2], [0.5, 0.2]) is None


def test_correlation_falls_with_steps_and_gives_a_decorrelation_distance():
    model = IsingModel(dim=2, L=32, T=2.3, p=0.0, seed=4, algorithm="metropolis", backend="numpy")
    model.step(50)
    curve = critical.correlation_curve(model, distance=40, references=2)     # Metropolis near T_c: slow
    rho = curve["abs_rho"].mean(axis=0)
    assert curve["abs_rho"].shape == (2, 40) and rho[0] > 0.3 and rho[-1] < rho[0] / 2
    assert np.all(np.diff(curve["seconds"], axis=1) > 0)
    distance = critical.decorrelation_distance(curve["steps"], curve["abs_rho"], threshold=0.2)
    assert distance is not None and 1 < distance <= 40


def test_equilibration_curves_for_the_metropolis_wolff_ratios():
    curves = critical.equilibration_curves("ising", {"dim": 2, "L": 16, "T": 2.0, "p": 0.0}, steps=25, runs=2,
                                           backend="numpy")
    assert tuple(curves) == critical.RATIOS
    for ratio, c in curves.items():
        assert c["energy"].shape == (25,) and np.all(np.diff(c["seconds"]) > 0)
        assert c["energy"][-1] < -1.5, ratio                 # from a hot start (e ~ 0) to near e(T=2) ~ -1.75
    decor = critical.decorrelation_curves("ising", {"dim": 2, "L": 16, "T": 3.0, "p": 0.0}, equilibrate=20,
                                          distance=15, ratios=("1:0", "1:1"), backend="numpy")
    assert set(decor) == {"1:0", "1:1"} and decor["1:0"]["abs_rho"].shape == (15,)


def test_models_without_magnetisation_say_what_is_unavailable():
    from latticelab.sim.models import get_model
    assert critical.unavailable(get_model("ising")) == {}
    missing = critical.unavailable(get_model("cahn-hilliard"))
    assert set(missing) == set(critical.QUANTITIES)
    assert "declares no 'magnetisation' observable, so binder cannot be measured" in missing["binder"]


# ---- the 2D Binder crossing -------------------------------------------------------------------------------------
def binder_study(Ls, Ts, seeds, measurements, equilibrate=150):
    return parse_study(f"""
model = "ising"
[parameters]
dim = 2
p = 0.0
algorithm = "swendsen-wang"
[grid]
L = {list(Ls)}
T = {list(Ts)}
seed = {list(seeds)}
[run]
equilibrate = {equilibrate}
decorrelate = 1
measurements = {measurements}
backend = "numpy"
""")


def test_binder_crossing_fast_and_loose(tmp_path):
    """L = 8, 16, one seed: T_c within 3% and U* within 0.06 (fails on a wrong estimator or crossing)."""
    run_sweep(binder_study([8, 16], [2.15, 2.27, 2.39], [1], 800), tmp_path / "fast.csv", progress=False)
    (result,) = analyse(load_rows(tmp_path / "fast.csv"), n_boot=200)
    assert result.T_c == pytest.approx(T_C_2D, rel=0.03)
    assert result.U_c == pytest.approx(U_STAR_2D, abs=0.06)
    assert np.isfinite(result.T_c_err) and result.T_c_err > 0


def test_heat_capacity_and_susceptibility_peak_near_tc(tmp_path):
    Ts = [2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6]
    run_sweep(binder_study([16], Ts, [1], 500, equilibrate=100), tmp_path / "peaks.csv", progress=False)
    (result,) = analyse(load_rows(tmp_path / "peaks.csv"), n_boot=10)
    assert 2.2 <= result.peaks[("heat_capacity", 16)] <= 2.4
    assert 2.2 <= result.peaks[("susceptibility", 16)] <= 2.45
    assert "needs at least two lattice sizes" in result.warnings[0]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_binder_crossing_of_l8_16_32_gives_onsager_tc(tmp_path):
    """Acceptance (issue 11): L = 8, 16, 32: T_c within 1% of 2.2692, U at the crossing near 0.61; C_v and
    chi peak near T_c."""
    Ts = [2.22, 2.25, 2.28, 2.31]
    run_sweep(binder_study([8, 16, 32], Ts, [1, 2, 3, 4], 3000), tmp_path / "b.csv", progress=False)
    (result,) = analyse(load_rows(tmp_path / "b.csv"), n_boot=300)
    assert result.T_c == pytest.approx(T_C_2D, rel=0.01), result
    assert result.U_c == pytest.approx(U_STAR_2D, abs=0.03), result
    assert result.T_c_err < 0.02
    for c in result.crossings:
        assert c.T == pytest.approx(T_C_2D, rel=0.015), c
