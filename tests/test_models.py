"""Guarantees every registered model gets for free (parametrised over the registry, sim/models/__init__.py):
reproducible trajectories, exact save/load/continue, a named error for every bad parameter, the declared
observables, a picture of the model's shape, live updates and rebuilds through the runner."""
from __future__ import annotations

import math

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.model import Model
from latticelab.sim.models import all_models, get_model, model_names
from latticelab.sim.params import ParameterError
from latticelab.sim.runner import Runner
from latticelab.sim.state import StateError, load_state, restore, save_state, state_of

MODELS = model_names()


def small(name: str, **changes) -> Model:
    cls = get_model(name)
    return cls.create(backend="numpy", **{**cls.small_example, **changes})


def snapshot(model) -> dict:
    return {k: to_numpy(v).copy() for k, v in model.fields().items()}


def assert_same_fields(a, b):
    fa, fb = snapshot(a), snapshot(b)
    assert fa.keys() == fb.keys()
    for key in fa:
        np.testing.assert_array_equal(fa[key], fb[key], err_msg=key)


def bad_values(schema, name: str) -> list:
    """Values the schema must refuse for field ``name``: outside its bounds or choices, or of the wrong type."""
    info = schema.fields()[name]
    kind, bounds = info["type"], info["bounds"]
    bad = [True, [1], None if False else object()]
    if kind is int:
        bad += [1.5, "3"]
    if kind is float:
        bad += [math.nan, math.inf, "x"]
    if kind is str:
        bad += [5]
    if "ge" in bounds:
        bad.append(bounds["ge"] - (1 if kind is int else 1e-3 * max(1, abs(bounds["ge"]))))
    if "gt" in bounds:
        bad.append(bounds["gt"])
    if "le" in bounds:
        bad.append(bounds["le"] + (1 if kind is int else 1e-3 * max(1, abs(bounds["le"]))))
    if "lt" in bounds:
        bad.append(bounds["lt"])
    if info.get("choices") is not None:
        bad.append("not-a-choice" if kind is str else 10 ** 6 + 7)
    return bad


def test_the_registry_holds_models_that_implement_the_protocol():
    assert MODELS, "no model registered"
    for name, cls in all_models().items():
        assert issubclass(cls, Model) and cls.name == name and cls.title
        assert cls.declared_observables and len({o.name for o in cls.declared_observables}) == len(
            cls.declared_observables)
        assert cls.Params.model_name == name
        assert cls.small_example, f"{name} declares no small example for the tests"
    with pytest.raises(ParameterError, match="model"):
        get_model("no-such-model")


@pytest.mark.parametrize("name", MODELS)
def test_same_seed_same_parameters_same_trajectory(name):
    a, b = small(name, seed=5), small(name, seed=5)
    a.step(3), b.step(3)
    assert_same_fields(a, b)
    assert a.observables() == b.observables()
    c = small(name, seed=6)
    c.step(3)
    assert any(not np.array_equal(x, y) for x, y in zip(snapshot(a).values(), snapshot(c).values()))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("split", [0, 1, 3])
def test_save_load_continue_equals_running_straight_through(name, split, tmp_path):
    straight = small(name, seed=11)
    straight.step(6)
    first = small(name, seed=11)
    first.step(split)
    path = save_state(tmp_path / "state.npz", first)
    resumed = load_state(path, backend="numpy")
    assert type(resumed) is type(first) and resumed.params == first.params
    assert resumed.step_count == split
    for _ in range(6 - split):
        resumed.step(1)
    assert resumed.step_count == straight.step_count
    assert_same_fields(resumed, straight)
    assert resumed.observables() == straight.observables()


@pytest.mark.parametrize("name", MODELS)
def test_every_bad_parameter_is_refused_by_name(name):
    schema = get_model(name).Params
    for field in schema.model_fields:
        for value in bad_values(schema, field):
            with pytest.raises(ParameterError) as info:
                schema.create(**{**get_model(name).small_example, field: value})
            assert info.value.parameter == field, f"{field}={value!r}: {info.value}"
            assert str(info.value).startswith(f"{field}: ")
    with pytest.raises(ParameterError, match="not a parameter"):
        schema.create(no_such_parameter=1)


@pytest.mark.parametrize("name", MODELS)
def test_observables_match_the_declaration_and_fields_the_shape(name):
    model = small(name)
    model.step(2)
    observed = model.observables()
    assert set(observed) == {o.name for o in model.declared_observables}
    assert all(isinstance(v, float) and math.isfinite(v) for v in observed.values())
    assert len(model.shape) in (2, 3)
    for key, array in model.fields().items():
        assert tuple(array.shape) == model.shape, key


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("marks", [False, True])
def test_the_picture_has_the_model_shape_and_a_full_palette(name, marks):
    model = small(name)
    model.step(1)
    changed = model.changed()
    picture = model.picture(changed, marks=marks and model.marks_label is not None)
    assert picture.shape == model.shape
    codes = to_numpy(picture.codes())
    assert codes.dtype == np.uint8 and codes.shape == model.shape
    colours = picture.colours()
    assert colours.shape == (*model.shape, 4) and colours.dtype == np.uint8
    if changed is not None:
        assert changed.dtype == bool and tuple(changed.shape) == model.shape


@pytest.mark.parametrize("name", MODELS)
def test_runner_applies_live_changes_and_rebuilds_keeping_the_old_model_on_failure(name):
    cls = get_model(name)
    runner = Runner(name, cls.small_example, backend="numpy")
    model = runner.model
    runner.advance(3)
    assert runner.model.step_count == 3 and len(runner.history) == 4   # the initial state and three steps
    fields = cls.Params.fields()
    live = [n for n, f in fields.items() if f["applies"] == "live" and f["type"] is float]
    for field in live[:1]:
        value = getattr(runner.params, field)
        bounds = fields[field]["bounds"]
        new = value * 1.01 if value else min(bounds.get("le", 1.0), 0.01)
        assert runner.set(**{field: new}) == "live"
        assert runner.model is model and getattr(model.params, field) == pytest.approx(new)
    rebuild = [n for n, f in fields.items() if f["applies"] == "rebuild"]
    for field in rebuild[:1]:
        with pytest.raises(ParameterError, match=field):
            runner.set(**{field: bad_values(cls.Params, field)[-1]})
        assert runner.model is model
    reset = [n for n, f in fields.items() if f["applies"] == "reset"]
    if "seed" in reset:
        assert runner.set(seed=model.params.seed + 1) == "reset"
        assert runner.model.params.seed != runner.params.seed      # waits for the reset
        runner.reset()
        assert runner.model.params.seed == runner.params.seed and runner.model.step_count == 0


@pytest.mark.parametrize("name", MODELS)
def test_a_reset_restarts_the_run_from_the_seed(name):
    model = small(name, seed=4)
    start = snapshot(model)
    model.step(2)
    model.reset()
    assert model.step_count == 0
    for key, array in snapshot(model).items():
        np.testing.assert_array_equal(array, start[key], err_msg=key)
    model.step(2)
    again = small(name, seed=4)
    again.step(2)
    assert_same_fields(model, again)


@pytest.mark.parametrize("name", MODELS)
def test_update_refuses_parameters_that_are_not_live(name):
    model = small(name)
    for field, info in model.Params.fields().items():
        if info["applies"] != "live":
            with pytest.raises(ParameterError, match=field):
                model.update(**{field: getattr(model.params, field)})


def test_state_files_name_the_problem(tmp_path):
    model = small(MODELS[0])
    state = state_of(model)
    future = {**state, "latticelab_state": np.int64(99)}
    with pytest.raises(StateError, match="newer latticelab"):
        restore(future)
    other = {**state, "model": np.str_("no-such-model")}
    with pytest.raises(StateError, match="no-such-model"):
        restore(other)
    missing = {k: v for k, v in state.items() if not k.startswith("param.")}
    with pytest.raises(StateError, match="missing parameter"):
        restore(missing)
    text = tmp_path / "notes.npz"
    text.write_text("my notes, not a state")
    with pytest.raises(StateError, match="notes.npz") as info:
        load_state(text)
    assert "allow_pickle" not in str(info.value)


def step_by_step(model, n: int):
    """What a frame of n steps must equal: n single steps, the observables after each, the union of changes."""
    times, rows, union = [], [], None
    for _ in range(n):
        model.step(1)
        changed = model.changed()
        if changed is not None:
            changed = to_numpy(changed).astype(bool)
            union = changed.copy() if union is None else union | changed
        times.append(model.time)
        rows.append(model.observables())
    return times, rows, union


@pytest.mark.parametrize("name", MODELS)
def test_a_frame_of_steps_equals_single_steps(name):
    """model.advance(n) (one call per frame) gives the trajectory, the per-step observables and the union of the
    changed cells of n single steps, for every registered model; the runner puts them in its history."""
    for n in (1, 4):
        a, b = small(name, seed=8), small(name, seed=8)
        times, rows, union = step_by_step(a, n)
        batch = b.advance(n)
        assert batch.steps == n and b.step_count == a.step_count
        assert_same_fields(a, b)
        np.testing.assert_allclose(batch.times, times, rtol=1e-12)
        for o in type(b).declared_observables:
            np.testing.assert_allclose(batch.observables[o.name], [r[o.name] for r in rows], rtol=1e-12,
                                       err_msg=o.name)
        if union is None:
            assert batch.changed is None
        else:
            np.testing.assert_array_equal(to_numpy(batch.changed), union)
    with pytest.raises(ValueError, match="n"):
        small(name).advance(0)


def test_the_history_takes_a_frame_as_single_steps_would():
    """ObservableHistory.push_many equals push one sample at a time, sliding-window spreads included, also
    when a batch is longer than the history."""
    from latticelab.sim.model import Observable
    from latticelab.sim.runner import ObservableHistory
    declared = [Observable("a", "a", spread=True), Observable("b", "b")]
    rng = np.random.default_rng(3)
    for capacity, window, batches in ((1000, 50, [1, 3, 100, 7, 1200, 5]), (20, 5, [1, 1, 2, 30, 3])):
        one, many = ObservableHistory(declared, capacity, window), ObservableHistory(declared, capacity, window)
        t = 0
        for size in batches:
            values = {"a": rng.normal(size=size) * 3 + 1, "b": rng.normal(size=size)}
            for i in range(size):
                one.push(t + i + 1, {k: v[i] for k, v in values.items()})
            many.push_many(np.arange(t + 1, t + size + 1), values)
            t += size
            (t1, v1), (t2, v2) = one.arrays(), many.arrays()
            np.testing.assert_array_equal(t1, t2)
            for key in v1:
                np.testing.assert_allclose(v2[key], v1[key], rtol=1e-9, atol=1e-12, err_msg=key)


def test_a_runner_keeping_a_few_samples_a_frame_keeps_true_steps_ending_with_the_last():
    """Runner.samples_per_batch (the window's live plots at hundreds of steps a frame): at most that many samples
    of each batch go into the history, evenly spaced, the batch's last step among them, each the value the same
    step has in a runner that keeps every step; a batch no longer than that keeps all."""
    from latticelab.sim.runner import Runner
    params = {"dim": 2, "L": 16, "T": 2.3, "p": 0.0, "algorithm": "metropolis", "seed": 5}
    every = Runner("ising", params, backend="numpy")
    thinned = Runner("ising", params, backend="numpy", samples_per_batch=4)
    for n in (3, 4, 25, 100):
        every.advance(n)
        thinned.advance(n)
    (t_all, v_all), (t_few, v_few) = every.history.arrays(), thinned.history.arrays()
    # the first record, 3 + 4 (all kept), then 4 of 25 and 4 of 100
    assert len(t_few) == 1 + 3 + 4 + 4 + 4 and len(t_all) == 1 + 3 + 4 + 25 + 100
    assert t_few[-1] == t_all[-1] == 132 and 32 in t_few and 7 in t_few      # each batch's last step
    np.testing.assert_array_equal(t_few[:8], t_all[:8])                      # short batches: every step
    steps = np.diff(t_few[8:12])
    assert steps.min() == steps.max() == 7                                    # 25 steps: every 7th, ending at 32
    where = np.searchsorted(t_all, t_few)
    for name in ("abs_magnetisation", "energy", "flipped_fraction"):
        np.testing.assert_array_equal(v_few[name], v_all[name][where], err_msg=name)


@pytest.mark.parametrize("name", model_names())
def test_a_runner_adopting_a_first_look_records_what_adopting_the_model_records(name):
    """``Runner.load`` of a ``FirstLook(model)`` (taken where the model was built) starts the history and the
    highlight as loading the model itself does (stepped a little first, so they are not the initial ones)."""
    from latticelab.sim.runner import FirstLook
    cls = get_model(name)
    models = []
    for _ in range(2):
        model = small(name)
        model.advance(3)
        models.append(model)
    runners = [Runner(name, cls.small_example, backend="numpy") for _ in range(2)]
    runners[0].load(models[0])
    runners[1].load(FirstLook(models[1]))
    assert runners[1].model is models[1]
    (t0, v0), (t1, v1) = runners[0].history.arrays(), runners[1].history.arrays()
    np.testing.assert_array_equal(t0, t1)
    assert v0.keys() == v1.keys()
    for key in v0:
        np.testing.assert_array_equal(v0[key], v1[key], err_msg=key)
    h0, h1 = runners[0].highlight, runners[1].highlight
    assert (h0 is None) == (h1 is None)
    if h0 is not None:
        np.testing.assert_array_equal(to_numpy(h0), to_numpy(h1))
