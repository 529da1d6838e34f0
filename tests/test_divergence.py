"""Issue 41, item 7: a run that blows up ends with one line naming the likely parameter (exit 2), never with a
free energy of 1e34 and exit 0; the Cahn-Hilliard parameters and its --initial field are bounded."""
from __future__ import annotations

import math

import numpy as np
import pytest

from latticelab.app.commands import main as cli
from latticelab.sim.model import check_finite
from latticelab.sim.models import all_models, get_model
from latticelab.sim.params import ParameterError

CH = ["run", "cahn-hilliard", "--backend", "numpy", "--L", "32"]


def _error(capsys, argv) -> str:
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    line, = [e for e in err.splitlines() if e.startswith("latticelab: error:")]
    assert "Traceback" not in err and "Warning" not in err
    return line


@pytest.mark.parametrize("name, value", [("thermal", 1000), ("m", 1e300), ("u", 1e-300), ("K", 1e300),
                                         ("b", -1e300), ("dt", 1e300), ("dt-max", 1e300)])
def test_cahn_hilliard_coefficients_are_bounded(capsys, name, value):
    assert f"error: {name.replace('-', '_')}: must be a number" in _error(capsys, [*CH, f"--{name}={value}"])


@pytest.mark.parametrize("length", [["--steps", 300], ["--until", 50]])
def test_a_diverging_cahn_hilliard_run_names_its_parameter(capsys, tmp_path, length):
    """Thermal noise of 5 (allowed: the spectral integrators stay stable there) blows up the explicit
    finite-difference step of dt = 0.02 within a few steps; the field's growth is caught long before it overflows
    (by step count and by simulated time alike)."""
    line = _error(capsys, [*CH, "--thermal", 5, "--dt", 0.02, *length, "--csv", tmp_path / "out.csv"])
    assert "error: thermal: the field diverged" in line and "lower thermal or dt" in line
    assert list(tmp_path.iterdir()) == []          # no table of a diverged run


def test_an_initial_field_far_beyond_the_phases_is_refused(capsys, tmp_path):
    path = tmp_path / "phi.npy"
    field = np.zeros((32, 32))
    field[3, 4] = 1e9
    np.save(path, field)
    line = _error(capsys, [*CH, "--initial", path])
    assert f"error: --initial: {path} has values up to |phi| = 1e+09" in line


@pytest.mark.parametrize("name", sorted(all_models()))
def test_non_finite_observables_of_any_model_end_the_run(name, monkeypatch, capsys):
    """Generic: whatever the model, an observable that is NaN or inf ends the run with one line."""
    cls = get_model(name)
    real = cls.observables

    def broken(self):
        values = real(self)
        first = next(iter(values))
        return {**values, first: math.nan if self.step_count >= 2 else values[first]}

    monkeypatch.setattr(cls, "observables", broken)
    args = ["run", name, "--backend", "numpy", "--steps", "5", *(f"--{k.replace('_', '-')}={v}"
                                                                for k, v in cls.small_example.items())]
    line = _error(capsys, args)
    first = next(iter(real(cls.create(backend='numpy', **cls.small_example))))
    assert "the run diverged by step" in line and f"{first} is not a finite number" in line


def test_check_finite_names_the_models_suspect():
    model = get_model("cahn-hilliard").create(backend="numpy", **get_model("cahn-hilliard").small_example)
    with pytest.raises(ParameterError, match="^dt: the run diverged .* free_energy is not a finite number; try a "
                                             "smaller dt or thermal"):
        check_finite(model, {"free_energy": math.inf, "mass": 0.0})
    check_finite(model, {"free_energy": 1e300})
