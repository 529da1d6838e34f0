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
