"""The cortical spiking network (sim/models/cortex, thesis 003 chapter 8): single neurons of Izhikevich's five
classes against an independent step-by-step reference, the delivery of one spike through delays and washout,
the network's in-degree, radius and source spread, drug effects, and the model's own guarantees (the registry
tests in test_models.py cover reproducibility, save/resume and parameter errors)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from latticelab.sim.models.cortex.engines import (EV_MAX, W_MAX, WashoutCutWarning, izhikevich_step,
                                                  washout_length, washout_tables)
from latticelab.sim.models.cortex.model import CortexModel
from latticelab.sim.models.cortex.network import connect, make_neurons, offset_probabilities
from latticelab.sim.models.cortex.params import CortexParams
from latticelab.sim.params import ParameterError
from latticelab.sim.state import restore, state_of

f32 = np.float32

# Izhikevich (2003), "Simple model of spiking neurons", figure 2: (a, b, c, d)
CLASSES = {
    "regular spiking": (0.02, 0.2, -65.0, 8.0),
    "intrinsically bursting": (0.02, 0.2, -55.0, 4.0),
    "chattering": (0.02, 0.2, -50.0, 2.0),
    "fast spiking": (0.1, 0.2, -65.0, 2.0),
    "low-threshold spiking": (0.02, 0.25, -65.0, 2.0),
}


def reference_spikes(a, b, c, d, current, steps, v0=-65.0, u0=None):
    """An independent, scalar, step-by-step transcription of Algorithm 61 for one neuron in float32: a neuron
    at 30 mV is reset at the start of the next step, then one Euler step of 1 ms, v capped at 30."""
    a, b, c, d, current = f32(a), f32(b), f32(c), f32(d), f32(current)
    v = f32(v0)
    u = b * v if u0 is None else f32(u0)
    spikes = []
    for t in range(steps):
        if v >= f32(30):
            v, u = c, u + d
        dv = f32(0.04) * v * v + f32(5) * v + f32(140) - u + current
        du = a * (b * v - u)
        v = min(v + dv, f32(30))
        u = u + du
        if v >= f32(30):
            spikes.append(t)
    return spikes


def model_spikes(a, b, c, d, current, steps):
    """The same neuron through the model's update (engines.izhikevich_step, what phase 1 runs)."""
    p = [np.array([x], f32) for x in (a, b, c, d)]
    v = np.array([-65.0], f32)
    u = p[1] * v
    spikes = []
    for t in range(steps):
        v, u, fired = izhikevich_step(v, u, *p, np.array([current], f32), np.zeros(1, f32))
        if fired[0]:
            spikes.append(t)
    return spikes


@pytest.mark.parametrize("name", CLASSES)
def test_single_neurons_of_each_class_match_the_step_by_step_reference(name):
    a, b, c, d = CLASSES[name]
    spikes = model_spikes(a, b, c, d, 10.0, 1000)
    assert spikes == reference_spikes(a, b, c, d, 10.0, 1000)
    isi = np.diff(spikes)
    short = isi < 10
    if name == "regular spiking":       # tonic, adapting once: the first interval shorter than the steady ones
        assert 15 <= len(spikes) <= 30 and isi[0] < isi[-1] and np.ptp(isi[2:]) <= 1 and isi[-1] > 30
    elif name == "intrinsically bursting":   # an initial burst, then tonic spiking
        assert short[:2].all() and not short[2:].any() and np.ptp(isi[4:]) <= 1
    elif name == "chattering":          # repeated bursts: runs of short intervals separated by long ones
        long = np.flatnonzero(isi > 30)
        assert len(long) >= 10 and np.all(np.diff(long) >= 3) and short.mean() > 0.6
    elif name == "fast spiking":        # high rate, hardly adapting
        assert len(spikes) >= 100 and isi.max() <= 12 and isi[-1] <= 1.5 * isi[0]
    elif name == "low-threshold spiking":    # high rate with strong adaptation
        assert len(spikes) >= 50 and isi[0] <= 6 and isi[-1] >= 2 * isi[0]
    # the five patterns differ: rates in the order of Izhikevich's figure
    if name == "fast spiking":
        others = [len(model_spikes(*CLASSES[k], 10.0, 1000)) for k in CLASSES if k != name]
        assert len(spikes) > max(others)


def test_neurons_in_the_network_follow_the_reference_when_isolated():
    """Without input from other neurons (A = 0) and without noise, every neuron of a network spikes exactly as
    the reference with its own a, b, c, d, initial v and u, and I = I_e or I_i."""
    model = CortexModel(L=8, k=5, r=2, A_e=0.0, A_i=0.0, n_e=0.0, n_i=0.0, I_e=10.0, I_i=6.0, seed=4,
                        backend="numpy")
    steps = 300
    neurons = [model.neuron(i) for i in range(model.n_neurons)]
    fired = np.zeros((steps, model.n_neurons), bool)
    for t in range(steps):
        model.step(1)
        fired[t] = model.fired.reshape(-1)
    kinds = set()
    for i, n in enumerate(neurons):
        current = 10.0 if n["type"] == "excitatory" else 6.0
        ref = reference_spikes(n["a"], n["b"], n["c"], n["d"], current, steps, v0=n["v"], u0=n["u"])
        assert np.flatnonzero(fired[:, i]).tolist() == ref, f"neuron {i} ({n['type']})"
        kinds.add(n["type"])
    assert kinds == {"excitatory", "inhibitory"}


def test_randomised_dynamics_parameters_follow_the_thesis():
    n = make_neurons(seed=9, n=20000, excitatory_fraction=0.8)
    exc, inh = n.types == 0, n.types == 1
    assert abs(exc.mean() - 0.8) < 0.015
    a, b, c, d = n.dynamics()
    assert np.all(a[exc] == f32(0.02)) and np.all(b[exc] == f32(0.2))
    r2 = (c[exc] + 65.0) / 15.0                        # c = -65 + 15 r^2, d = 8 - 6 r^2 with the same r
    assert r2.min() >= -1e-6 and r2.max() < 1 and np.allclose(d[exc], 8.0 - 6.0 * r2, atol=1e-4)
    r = (a[inh] - 0.02) / 0.08                         # a = 0.02 + 0.08 r, b = 0.25 - 0.05 r
    assert r.min() >= -1e-6 and r.max() < 1 and np.allclose(b[inh], 0.25 - 0.05 * r, atol=1e-6)
    assert np.all(c[inh] == f32(-65)) and np.all(d[inh] == f32(2))
    assert n.delay.min() == 5 and n.delay.max() == 15 and len(np.unique(n.delay)) == 11
    assert n.v.min() > -65 and n.v.max() <= 30 and np.allclose(n.u, b * n.v)


# ---- the network -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("L, k, r", [(16, 10, 4), (12, 7, 6), (32, 100, 1)])
def test_every_neuron_has_in_degree_k_and_sources_within_r(L, k, r):
    sources = connect(seed=3, L=L, k=k, r=r)
    assert sources.shape == (k, L * L) and sources.dtype == np.int32
    receivers = np.broadcast_to(np.arange(L * L), sources.shape)
    dx = (sources % L - receivers % L + L // 2) % L - L // 2       # periodic offsets in [-L/2, L/2)
    dy = (sources // L - receivers // L + L // 2) % L - L // 2
    assert np.all(dx * dx + dy * dy <= r * r)
    assert np.all(sources != receivers)
    assert np.all(np.bincount(receivers.reshape(-1), minlength=L * L) == k)


def test_the_source_spread_matches_sigma_r_over_3():
    L, k, r = 64, 100, 12
    sources = connect(seed=5, L=L, k=k, r=r)
    receivers = np.arange(L * L)[None, :]
    dx = ((sources % L - receivers % L + L // 2) % L - L // 2).reshape(-1)
    dy = ((sources // L - receivers // L + L // 2) % L - L // 2).reshape(-1)
    ox, oy, p = offset_probabilities(r)
    expected_var = float((p * ox * ox).sum())           # the exact rounded, truncated normal
    n = dx.size
    for d in (dx, dy):
        var = float((d.astype(np.float64) ** 2).mean())
        error = math.sqrt(float((p * ox ** 4).sum()) - expected_var ** 2) / math.sqrt(n)
        assert abs(var - expected_var) < 5 * error
        assert abs(math.sqrt(var) - r / 3) < 0.03 * r / 3          # and that is sigma = r/3, to 3%
    # the whole two-dimensional distribution: chi-square over rings of the offset disc
    ring = np.floor(np.sqrt(ox * ox + oy * oy)).astype(int)
    seen = np.bincount(np.floor(np.sqrt(dx * dx + dy * dy)).astype(int), minlength=r + 1)
    want = np.bincount(ring, weights=p, minlength=r + 1) * n
    used = want > 0
    assert seen[~used].sum() == 0
    chi2 = float((((seen[used] - want[used]) ** 2) / want[used]).sum())
    assert chi2 < 3 * (r + 1)


# ---- delays and washout ------------------------------------------------------------------------------------
def quiet_network(fraction: float, **changes) -> CortexModel:
    """A network without input (I = 0, no noise) after 300 steps: every neuron at rest, none firing."""
    model = CortexModel(L=12, k=12, r=3, excitatory_fraction=fraction, I_e=0.0, I_i=0.0, n_e=0.0, n_i=0.0,
                        seed=2, backend="numpy", **changes)
    model.step(300)
    for _ in range(20):
        model.step(1)
        assert not model.fired.any()
    return model


def delayed_input(model) -> np.ndarray:
    """What phase 1 adds to each neuron's v in the next step: its ring slot (ev_idx - delay)."""
    s = model.state
    return s.ev[(s.ev_idx - s.delay.astype(int)) % EV_MAX, np.arange(s.n)].copy()


@pytest.mark.parametrize("fraction, amplitude, changes", [
    (1.0, 0.25, {}),                                    # excitatory: A_e = 0.25, tau_e = 10
    (0.0, -0.5, {}),                                    # inhibitory: A_i = -0.5, tau_i = 10
    (1.0, 0.125, {"lambda_A_e": 2.0, "lambda_tau_e": 2.5}),      # drugs: A_e / 2, tau_e / 2.5
    (0.0, -1.0, {"lambda_A_i": 2.0, "lambda_tau_i": 1.5}),       # A_i * 2, tau_i * 1.5
])
def test_one_spike_reaches_each_receiver_after_its_delay_with_the_washout_amplitudes(fraction, amplitude, changes):
    control = quiet_network(fraction, **changes)
    spiked = restore(state_of(control), backend="numpy")         # an exact copy, through a saved state
    q = 77
    spiked.state.v[q] = 29.0                                     # crosses 30 mV in the next step
    fire_step = spiked.step_count
    eff = control.params.effective()["e" if fraction == 1.0 else "i"]
    table, w = washout_tables(control.params)
    assert w == math.ceil(3 * max(e["tau"] for t, e in control.params.effective().items()) - 1e-9)
    assert amplitude == pytest.approx(eff["A"])
    multiplicity = (spiked.state.sources == q).sum(axis=0)       # how often q is each neuron's source
    receivers = np.flatnonzero(multiplicity)
    assert receivers.size > 0
    delay = spiked.state.delay.astype(int)
    arrivals = {}
    for _ in range(15 + 1 + w + 3):
        step = spiked.step_count
        extra = delayed_input(spiked) - delayed_input(control)
        for i in range(spiked.n_neurons):
            t = step - (fire_step + delay[i] + 1)
            want = f32(multiplicity[i]) * table[0 if fraction == 1.0 else 1, t] if 0 <= t < w else 0.0
            assert extra[i] == want, f"neuron {i}, step {step}: {extra[i]} != {want}"
            if want != 0 and t == 0:
                arrivals[i] = step
        spiked.step(1)
        control.step(1)
        others = spiked.fired.reshape(-1).copy()
        if step == fire_step:
            assert others[q] and others.sum() == 1              # q fired, and only q
        else:
            assert not others.any()
    assert set(arrivals) == set(receivers)
    tau = eff["tau"]
    t = np.arange(w)
    np.testing.assert_allclose(table[0 if fraction == 1.0 else 1, :w], amplitude * np.exp(-t / tau), rtol=1e-6)


def test_the_washout_length_is_three_taus_at_most_60_with_a_warning_when_cut():
    assert washout_length(CortexParams())[0] == 30
    assert washout_length(CortexParams(tau_e=4.0, tau_i=4.0))[0] == 12
    assert washout_length(CortexParams(tau_e=30.0, lambda_tau_e=3.0))[0] == 30     # tau_e / 3 = 10
    assert washout_length(CortexParams(tau_i=15.0, lambda_tau_i=1.2))[0] == 54     # tau_i * 1.2 = 18
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert washout_tables(CortexParams(tau_e=20.0))[1] == W_MAX                # exactly 60: not cut
    with pytest.warns(WashoutCutWarning, match="cut off"):
        table, w = washout_tables(CortexParams(tau_i=10.0, lambda_tau_i=3.0))
    assert w == W_MAX and table[1, -1] != 0
    model = CortexModel(L=8, k=4, r=2, backend="numpy")
    with pytest.warns(WashoutCutWarning):
        model.update(tau_e=25.0)
    assert model.effective()["w"] == W_MAX


def test_drug_factors_follow_equations_8_4_and_8_5():
    p = CortexParams(I_e=3.0, I_i=2.0, A_e=0.25, A_i=-0.5, tau_e=10.0, tau_i=10.0, lambda_A_e=2.0, lambda_tau_e=4.0,
                     lambda_I_e=1.5, lambda_A_i=3.0, lambda_tau_i=0.5, lambda_I_i=2.5)
    e, i = p.effective()["e"], p.effective()["i"]
    assert (e["A"], e["tau"], e["I"]) == (0.125, 2.5, 2.5)
    assert (i["A"], i["tau"], i["I"]) == (-1.5, 5.0, 3.5)


def test_lambda_tau_e_above_one_lowers_the_excitatory_firing_rate():
    """The thesis's anaesthetic: a faster excitatory washout (lambda_tau_e = 3) weakens excitation."""
    rates = {}
    for lam in (1.0, 3.0):
        model = CortexModel(L=32, k=100, r=6, lambda_tau_e=lam, seed=8, backend="numpy")
        model.step(200)
        model.trace()
        model.step(800)
        rates[lam] = model.trace()[:, 2].mean()
    assert rates[1.0] > 0.005
    assert rates[3.0] < 0.9 * rates[1.0]


# ---- the model's own behaviour ------------------------------------------------------------------------------
def test_parameters_name_the_field_and_the_range():
    with pytest.raises(ParameterError, match=r"^r: must be an integer in \[1, L/2\] = \[1, 8\]"):
        CortexParams.create(L=16, r=9)
    with pytest.raises(ParameterError, match=r"^lambda_tau_e: must be a number in \[0.01, 100\]"):
        CortexParams.create(lambda_tau_e=0.0)
    with pytest.raises(ParameterError, match=r"^A_i: must be a number in \[-100, 0\]"):
        CortexParams.create(A_i=0.5)
    assert CortexParams.create(gpu=True).L == 1024 and CortexParams.create(gpu=True).r == 64
    assert CortexParams.create(L=64).r == 8


def test_live_changes_apply_between_steps_and_structural_ones_are_refused():
    model = CortexModel(L=16, k=10, r=4, backend="numpy")
    model.step(5)
    model.update(I_e=5.0, lambda_tau_e=3.0, boost_fraction=0.5)
    assert model.params.I_e == 5.0 and model.effective()["e"]["tau"] == pytest.approx(10 / 3)
    for field in ("L", "k", "r", "excitatory_fraction", "seed"):
        with pytest.raises(ParameterError, match=field):
            model.update(**{field: getattr(model.params, field)})
    with pytest.raises(ParameterError, match="n_e"):
        model.update(n_e=-1.0)
    assert model.params.n_e == 4.5


def test_a_boost_raises_firing_in_the_boosted_steps():
    a = CortexModel(L=16, k=10, r=4, seed=3, backend="numpy")
    b = CortexModel(L=16, k=10, r=4, seed=3, backend="numpy")
    a.step(100), b.step(100)
    b.update(boost_fraction=0.5, boost=20.0)
    fa, fb = [], []
    for _ in range(20):
        a.step(1), b.step(1)
        fa.append(a.observables()["firing_e"]), fb.append(b.observables()["firing_e"])
    assert np.mean(fb) > np.mean(fa) + 0.05


def test_observables_trace_fields_picture_and_edges():
    model = CortexModel(L=16, k=10, r=4, seed=1, backend="numpy")
    model.probe = 17
    model.step(40)
    rows = model.trace()
    assert rows.shape == (40, 5) and np.array_equal(rows[:, 0], np.arange(1, 41))
    assert rows[-1, 4] == model.state.v[17]
    obs = model.observables()
    assert (rows[-1, 1], rows[-1, 2], rows[-1, 3]) == (obs["eeg"], obs["firing_e"], obs["firing_i"])
    v = model.state.v
    exc = (model.state.data >> 1) == 0
    assert obs["eeg"] == pytest.approx(v[exc].astype(np.float64).mean(), rel=1e-12)
    assert obs["firing_e"] == np.count_nonzero((model.state.data == 1)) / exc.sum()
    model.step(3)
    assert model.trace().shape == (3, 5)
    with pytest.raises(ParameterError, match="probe"):
        model.probe = 256
    fields = model.fields()
    assert list(fields) == ["v", "fired"] and fields["fired"].dtype == bool
    assert np.array_equal(model.changed(), fields["fired"])
    picture = model.picture(model.changed())
    assert picture.value_range == (-80.0, 30.0) and picture.codes().shape == (16, 16)
    codes = picture.codes()
    assert np.all(codes[fields["fired"]] == 254)
    edges = model.edges()
    assert edges.shape == (16 * 16 * 10, 2)
    assert np.array_equal(np.bincount(edges[:, 1]), np.full(256, 10))
    info = model.neuron(17)
    assert info["type"] in ("excitatory", "inhibitory") and 5 <= info["delay"] <= 15
    with pytest.raises(ParameterError, match="neuron"):
        model.neuron(256)


def test_a_state_of_another_network_is_refused():
    model = CortexModel(L=16, k=10, r=4, seed=1, backend="numpy")
    model.step(2)
    state = state_of(model)
    state["param.seed"] = np.asarray(2)
    from latticelab.sim.state import StateError
    with pytest.raises(StateError, match="types differ"):
        restore(state, backend="numpy")
    state = state_of(model)
    state["ev_idx"] = np.int64(7)
    with pytest.raises(StateError, match="do not match"):
        restore(state, backend="numpy")


def test_a_new_network_is_ready_to_step_when_made(monkeypatch):
    """Phase 2's outgoing-edge index is built with the network (off the GUI thread in the window, where models are
    made on a worker), not by the first step, which the window runs in a frame."""
    model = CortexModel(L=16, k=10, r=4, seed=3, backend="numpy")
    for seed in (3, 4):
        model.reset(seed=seed)
        monkeypatch.setattr(np, "argsort", lambda *a, **k: pytest.fail("the first step sorted the connections"))
        model.step(1)
        monkeypatch.undo()
