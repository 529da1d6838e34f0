"""The error measurement of `latticelab bench ch-accuracy` (bench/ch_accuracy.py): zero for the reference
against itself, and the finite-difference error falling at its order (second order in dx)."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from latticelab.bench import ch_accuracy as A

PROBLEM = A.Problem(domain=8.0, until=6.0, samples=3)


@pytest.fixture(scope="module")
def reference():
    return A.run("numpy", PROBLEM, "spectral", 0.25, 0.002)


def test_the_reference_against_itself_is_exact(reference):
    assert A.curve_error(reference, reference) == 0.0
    assert A.field_error(reference, reference) == 0.0
    again = A.run("numpy", PROBLEM, "spectral", 0.25, 0.002)
    assert A.curve_error(again, reference) == 0.0     # the runs are deterministic


def test_the_same_field_on_every_grid():
    coarse, fine = PROBLEM.initial_field(1.0), PROBLEM.initial_field(0.5)
    np.testing.assert_allclose(coarse, fine[::2, ::2], rtol=0, atol=1e-15)
    assert abs(coarse.mean()) < 1e-12 and 0 < np.abs(coarse).max() <= PROBLEM.amplitude


def test_finite_difference_error_falls_at_second_order_in_dx(reference):
    errors = {dx: A.curve_error(A.run("numpy", PROBLEM, "finite-difference", dx, 0.5 * A.fd_stable_dt(dx)),
                                reference) for dx in (1.0, 0.5)}
    assert errors[1.0] > 0.01                          # a real error, measurable against the reference
    assert 2.8 < errors[1.0] / errors[0.5] < 5.6       # halving dx: about 4x smaller (dt ~ dx^4 is negligible)


def test_spectral_error_falls_with_dt_at_first_order(reference):
    e1 = A.curve_error(A.run("numpy", PROBLEM, "spectral", 0.5, 0.1), reference)
    e2 = A.curve_error(A.run("numpy", PROBLEM, "spectral", 0.5, 0.05), reference)
    assert 1.6 < e1 / e2 < 2.5                         # the semi-implicit step is first order in time


def test_cheapest_run_at_the_target():
    runs = [A.Run("spectral", 1.0, dt, 1, cost, [0.0], np.zeros(1), error=err)
            for dt, cost, err in ((0.1, 1.0, 0.05), (0.05, 2.0, 0.009), (0.02, 5.0, 0.004))]
    assert A.cheapest(runs, "spectral", 0.01).dt == 0.05
    assert A.cheapest(runs, "spectral", 0.001) is None
    assert A.cheapest(runs, "finite-difference", 0.01) is None


def test_small_benchmark_writes_its_result(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    A.add_arguments(parser)
    args = parser.parse_args(["--backend", "numpy", "--small", "--out-dir", str(tmp_path), "--target", "0.5"])
    assert A.main(args) == 0
    import json
    doc = json.loads((tmp_path / "ch-accuracy-CPU.json").read_text())
    case = doc["cases"][0]
    assert case["case"] == "ch-accuracy-2d-spectral-vs-fd-small"
    assert case["details"]["reference"]["self_error_at_2dt"] < 0.05
    assert {r["method"] for r in case["details"]["runs"]} == {"finite-difference", "spectral", "spectral-bdf2"}


def test_bad_arguments_get_a_message(capsys):
    parser = argparse.ArgumentParser()
    A.add_arguments(parser)
    assert A.main(parser.parse_args(["--backend", "numpy", "--grids", "0.7"])) == 2
    assert "--grids: dx = 0.7 does not divide the domain 32" in capsys.readouterr().out


# ---- the PFHub 1a problem (--problem pfhub-1a) ----------------------------------------------------------------
PFHUB = A.Problem(name="pfhub-1a", domain=200.0, until=4.0, samples=4)


def test_the_pfhub_reference_starts_at_pfhubs_free_energy():
    """The definition: the reference's F(0), plus PFHub's constant rho w^4 x area, is PFHub 1a's F(0) from the
    formula (pfhub.analytic_free_energy: the analytic gradient of PFHub's initial c); on PFHub's own grid the
    periodic seam of the initial field adds about 0.16 of 319."""
    from latticelab.sim.models.cahn_hilliard import pfhub
    ref = A.run("numpy", PFHUB, "spectral-bdf2", 1.0, 1.0)
    f0 = ref.free_energy[0] + PFHUB.energy_offset
    assert PFHUB.energy_offset == pytest.approx(320.0)
    assert f0 == pytest.approx(pfhub.analytic_free_energy("pfhub-1a"), rel=1e-3)
    assert 318.5 < f0 < 319.5
    np.testing.assert_array_equal(PFHUB.initial_field(1.0), pfhub.initial_phi(200, 1.0, "periodic"))
    assert PFHUB.coefficients == {k: pfhub.preset_values("pfhub-1a")[k] for k in ("m", "b", "u", "K")}
    with pytest.raises(ValueError, match="fixed at 200"):
        A.Problem(name="pfhub-1a", domain=100.0)


def test_pfhub_samples_are_dense_early_and_thin_late():
    p = A.Problem(name="pfhub-1a", domain=200.0, until=1000.0, samples=1000)
    t = p.times()
    assert t[0] == 0 and t[-1] == 1000 and len(t) == 101 + 90
    np.testing.assert_allclose(np.diff(t[:101]), 1.0)
    np.testing.assert_allclose(np.diff(t[100:]), 10.0)
    assert p.fd_stable_dt(1.0) == pytest.approx(2 / (125 * 8 * (0.08 * 8 + 3 * 0.032 - 0.032)))


def test_field_error_on_grids_that_are_not_multiples():
    fine = A.Run("x", 1.0, 0.1, 1, 1.0, [0.0], np.arange(400.0).reshape(20, 20) + 1)
    coarse = A.Run("x", 1.25, 0.1, 1, 1.0, [0.0], fine.phi_end[::5, ::5].copy())   # 20 and 4 points: common 4
    assert A.field_error(coarse, fine) == 0.0
    coarse.phi_end[1, 1] += 1.0
    assert A.field_error(coarse, fine) > 0


def test_an_adaptive_run_reads_its_free_energy_between_steps():
    """The untimed replay takes the timed run's steps; F at a sample time is between its neighbours' values."""
    p = A.Problem(name="pfhub-1a", domain=200.0, until=20.0, samples=20)
    r = A.run_adaptive("numpy", p, "spectral-bdf2", 4.0, 0.02, 0.01, 5.0)
    assert r.method == "spectral-bdf2-adaptive" and r.max_change == 0.02 and r.steps > 20
    assert len(r.free_energy) == len(p.times()) and r.dt == pytest.approx(20.0 / r.steps)
    assert np.all(np.diff(r.free_energy) <= 1e-9)                 # F never rises without noise
    fixed = A.run("numpy", p, "spectral-bdf2", 4.0, 0.01)
    assert A.curve_error(r, fixed) < 0.05


def test_small_pfhub_benchmark_writes_its_result(tmp_path, capsys):
    import json
    parser = argparse.ArgumentParser()
    A.add_arguments(parser)
    args = parser.parse_args(["--backend", "numpy", "--problem", "pfhub-1a", "--small", "--out-dir", str(tmp_path),
                              "--target", "0.3"])
    assert A.main(args) == 0
    out = capsys.readouterr().out
    assert "problem pfhub-1a: t = 0 .. 20" in out and "reference grid check" in out
    case = json.loads((tmp_path / "ch-accuracy-CPU.json").read_text())["cases"][0]
    d = case["details"]
    assert case["case"] == "ch-accuracy-pfhub-1a-spectral-vs-fd-small"
    assert d["problem"]["name"] == "pfhub-1a" and d["problem"]["window"] == [0.0, 20.0]
    assert d["problem"]["m"] == 125.0 and d["problem"]["K"] == 0.08
    assert d["reference"]["self_error_at_2dt"] < 0.01 and d["reference"]["grid_check"]["error"] < 0.01
    assert d["reference"]["free_energy_pfhub"]["0"] == pytest.approx(319.2, abs=0.3)
    methods = {r["method"] for r in d["runs"]}
    assert methods == {"finite-difference", "spectral", "spectral-bdf2", "spectral-adaptive",
                       "spectral-bdf2-adaptive"}
    assert {r["dx"] for r in d["runs"] if r["method"] == "finite-difference"} == {4.0, 2.0}
    assert all("max_change" in r for r in d["runs"] if r["method"].endswith("-adaptive"))
    assert set(d["ratio_at_target"]) <= set(methods) - {"finite-difference"}
    assert "spectral-bdf2" in d["ratio_at_target"] and case["value"] == d["ratio_at_target"]["spectral-bdf2"]
    assert set(d["cost_at_target"]) == methods
    # short runs are timed again from a fresh model (three times in all, unless a timing reached the limit of a
    # short run: on a busy machine it may); the run's cost is the shortest timing
    for r in d["runs"]:
        timings = r.get("wall_s_timings", [r["wall_s"]])
        assert len(timings) == 3 or max(timings) >= A.REPEAT_BELOW_S, r
        assert r["wall_s"] == min(timings)


def test_short_runs_are_timed_again_and_long_ones_once():
    calls = []

    def timed(seconds):
        def once():
            calls.append(seconds)
            return seconds
        return once

    assert A.timings(timed(0.01), 3) == [0.01, 0.01, 0.01]
    assert A.timings(timed(A.REPEAT_BELOW_S + 1), 3) == [A.REPEAT_BELOW_S + 1]
    assert A.timings(timed(0.01), 1) == [0.01]
    walls = iter([0.5, A.REPEAT_BELOW_S + 0.1, 0.4])
    assert A.timings(lambda: next(walls), 3) == [0.5, A.REPEAT_BELOW_S + 0.1]   # stops once one is long


def test_repeats_out_of_range_get_a_message(capsys):
    parser = argparse.ArgumentParser()
    A.add_arguments(parser)
    assert A.main(parser.parse_args(["--backend", "numpy", "--repeats", "0"])) == 2
    assert "--repeats must be 1 to 20; got 0" in capsys.readouterr().out


def test_explicit_options_win_over_the_problem_defaults():
    parser = argparse.ArgumentParser()
    A.add_arguments(parser)
    s = A.settings_for(parser.parse_args(["--problem", "pfhub-1a"]))
    assert s["until"] == 1000.0 and s["reference_dx"] == 1.0 and s["grids"] == "2,1.25,1"
    s = A.settings_for(parser.parse_args(["--problem", "pfhub-1a", "--small", "--until", "10"]))
    assert s["until"] == 10.0 and s["grids"] == "4,2"
    assert A.settings_for(parser.parse_args([]))["domain"] == 32.0


def test_pfhub_domain_is_fixed(capsys):
    parser = argparse.ArgumentParser()
    A.add_arguments(parser)
    assert A.main(parser.parse_args(["--backend", "numpy", "--problem", "pfhub-1a", "--domain", "100"])) == 2
    assert "fixed at 200 x 200" in capsys.readouterr().out
    assert A.main(parser.parse_args(["--backend", "numpy", "--problem", "pfhub-1a", "--grids", "3"])) == 2
    assert "dx = 3 does not divide the domain 200" in capsys.readouterr().out
