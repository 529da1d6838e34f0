"""The cost at the target error in `latticelab bench ch-accuracy` (bench/ch_accuracy.py): log-log interpolation on
each method's cost-error front, exact for a power law; an unbracketed target is flagged; the second-order
spectral runs are measured beside the first-order ones."""
from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from latticelab.bench import ch_accuracy as A


def runs_on_power_law(method, costs, order=2.0, scale=1.0):
    """Runs whose error is scale * cost^-order (a method's error falling as a power of its cost)."""
    return [A.Run(method, 1.0, 0.1, 1, c, [0.0], np.zeros(1), error=scale * c ** -order) for c in costs]


def test_the_cost_at_the_target_is_exact_on_a_power_law():
    runs = runs_on_power_law("spectral-bdf2", [1.0, 3.0, 10.0, 30.0])
    at = A.cost_at_target(runs, "spectral-bdf2", 0.02)
    assert at["bracketed"]
    assert at["wall_s"] == pytest.approx(0.02 ** -0.5, rel=1e-12)      # error = cost^-2 at exactly 0.02
    assert [r["wall_s"] for r in at["between"]] == [3.0, 10.0]


def test_dominated_runs_are_left_off_the_front():
    runs = runs_on_power_law("finite-difference", [1.0, 10.0])
    runs.append(A.Run("finite-difference", 0.5, 0.1, 1, 5.0, [0.0], np.zeros(1), error=2.0))   # dear and poor
    assert [r.wall_s for r in A.front(runs, "finite-difference")] == [1.0, 10.0]
    at = A.cost_at_target(runs, "finite-difference", 0.1)
    assert at["wall_s"] == pytest.approx(math.sqrt(10.0), rel=1e-12)


def test_an_unbracketed_or_unreached_target():
    runs = runs_on_power_law("spectral", [2.0, 4.0], scale=1e-3)
    at = A.cost_at_target(runs, "spectral", 0.01)
    assert at == {"wall_s": 2.0, "bracketed": False, "between": [runs[0].summary()]}
    assert A.cost_at_target(runs, "spectral", 1e-9) is None
    assert A.cost_at_target(runs, "finite-difference", 0.01) is None


def test_small_benchmark_measures_both_spectral_steps(tmp_path):
    parser = argparse.ArgumentParser()
    A.add_arguments(parser)
    args = parser.parse_args(["--backend", "numpy", "--small", "--out-dir", str(tmp_path), "--target", "0.5"])
    assert A.main(args) == 0
    case = json.loads((tmp_path / "ch-accuracy-CPU.json").read_text())["cases"][0]
    d = case["details"]
    assert {r["method"] for r in d["runs"]} == {"finite-difference", "spectral", "spectral-bdf2"}
    assert d["reference"]["method"] == "spectral-bdf2"
    assert set(d["ratio_at_target"]) == {"spectral", "spectral-bdf2"}
    # the value is the cheaper spectral method's ratio (the larger one), and value_for names it
    assert d["value_for"] == max(d["ratio_at_target"], key=d["ratio_at_target"].get)
    assert case["value"] == d["ratio_at_target"][d["value_for"]] == max(d["ratio_at_target"].values())
    by = {(r["method"], r["dx"], r["dt"]): r["error"] for r in d["runs"]}
    for (method, dx, dt), error in by.items():                 # at equal dt the second-order step is closer
        if method == "spectral":
            assert by[("spectral-bdf2", dx, dt)] < error
