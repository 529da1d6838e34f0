"""The capabilities behind the model analysis docks (sim/model.py): which models have them, and that what the
cortex and Cahn-Hilliard models declare matches what they record and what their schema allows."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.model import (HasCoarsening, HasEffectiveParameters, HasImpulse, HasInterface, HasProbe,
                                  HasSignal)
from latticelab.sim.models import get_model, model_names
from latticelab.sim.params import ParameterError

CAPABILITIES = (HasSignal, HasProbe, HasEffectiveParameters, HasImpulse, HasCoarsening, HasInterface)


def small(name, **values):
    cls = get_model(name)
    return cls.create(backend="numpy", **{**cls.small_example, **values})


def test_which_models_have_which_capability():
    found = {name: {c.__name__ for c in CAPABILITIES if isinstance(small(name), c)} for name in model_names()}
    assert found["ising"] == set()
    assert found["cortex"] == {"HasSignal", "HasProbe", "HasEffectiveParameters", "HasImpulse"}
    assert found["cahn-hilliard"] == {"HasCoarsening", "HasInterface"}


def test_cortex_trace_has_the_declared_columns_and_rate():
    model = small("cortex")
    model.step(30)
    rows = model.trace(since=0)
    assert rows.shape == (30, 1 + len(model.signal_columns))
    assert rows[:, 0].tolist() == list(range(1, 31))          # steps of 1 ms at 1000 samples per second
    assert model.signal_rate == 1000.0
    roles = [c.role for c in model.signal_columns]
    assert roles.count("signal") == 1 and roles.count("probe") == 1 and roles.count("fraction") == 2
    # the last row is the state after the last step: the observables and the probe neuron's potential
    obs = model.observables()
    col = {c.name: 1 + i for i, c in enumerate(model.signal_columns)}
    assert rows[-1, col["eeg"]] == pytest.approx(obs["eeg"])
    assert rows[-1, col["firing_e"]] == pytest.approx(obs["firing_e"])
    assert rows[-1, col["probe_v"]] == pytest.approx(model.probe_info(model.probe)["v"])


def test_probe_follows_the_picked_neuron_and_refuses_bad_indices():
    model = small("cortex")
    model.probe = 37
    model.step(3)
    info = model.probe_info(37)
    assert info["index"] == 37 and info["x"] == 37 % 16 and info["y"] == 37 // 16
    assert model.trace(since=2)[-1, 4] == pytest.approx(info["v"])
    with pytest.raises(ParameterError, match="probe"):
        model.probe = model.n_neurons


def test_effective_parameters_follow_the_drug_factors_and_the_boost():
    model = small("cortex")
    rows = {v.name: v for v in model.effective_parameters()}
    assert all(v.base == v.effective for k, v in rows.items() if k != "boost (mean input)")
    model.update(lambda_tau_e=3.0, lambda_A_i=2.0, lambda_I_e=2.0, boost_fraction=0.1)
    rows = {v.name: v for v in model.effective_parameters()}
    assert rows["tau_e"].base == 10.0 and rows["tau_e"].effective == pytest.approx(10.0 / 3.0)   # eq. 8.4
    assert rows["A_i"].effective == pytest.approx(-1.0)                                            # eq. 8.5
    assert rows["I_e"].effective == pytest.approx(model.params.I_e - 1.0)
    assert rows["boost (mean input)"].effective == pytest.approx(model.params.boost * 0.1)


def test_impulse_names_live_parameters_with_valid_values():
    cls = get_model("cortex")
    impulse = cls.impulse
    assert impulse.steps == 50 and impulse.label == "Boost"
    live = cls.Params.names("live")
    params = cls.Params.create()
    for name, value in impulse.changes:
        assert name in live
        params = params.replace(**{name: value})         # valid for the schema
    assert params.boost_fraction == 0.1


def test_cahn_hilliard_declares_its_coarsening_length_and_interface():
    model = small("cahn-hilliard")
    names = [o.name for o in model.declared_observables]
    assert model.coarsening.observable in names
    assert model.coarsening.exponent == pytest.approx(1 / 3)
    phi = np.asarray(model.fields()["phi"])
    assert phi.min() < model.interface_level < phi.max()
