"""The model's API: reproducibility, live parameter changes, masks, save/resume, bad input."""
import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.ising.model import IsingModel
from latticelab.sim.params import ParameterError
from latticelab.sim.state import StateError, load_state, restore, save_state, state_of

from helpers import BACKENDS, block_mean_and_error


def spins_of(model):
    return to_numpy(model.spins).copy()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("algorithm", ["metropolis", "wolff", "2:1"])
def test_same_seed_same_trajectory(algorithm, backend):
    kw = dict(dim=2, L=32, T=2.3, p=0.05, algorithm=algorithm, backend=backend)
    a, b = IsingModel(seed=9, **kw), IsingModel(seed=9, **kw)
    for _ in range(5):
        a.step(3), b.step(3)
        assert np.array_equal(spins_of(a), spins_of(b))
        assert a.observables() == b.observables()
    c = IsingModel(seed=10, **kw)
    c.step(15)
    assert not np.array_equal(spins_of(a), spins_of(c))


@pytest.mark.parametrize("backend", BACKENDS)
def test_spins_and_observables_are_consistent(backend):
    m = IsingModel(dim=3, L=8, T=4.0, p=0.1, seed=1, backend=backend)
    m.step(4)
    s = spins_of(m)
    assert s.dtype == np.int8 and s.shape == (8, 8, 8) and set(np.unique(s)) <= {-1, 1}
    e = m.edges()
    flat = s.reshape(-1).astype(int)
    obs = m.observables()
    assert obs["energy"] == pytest.approx(-(flat[e[:, 0]] * flat[e[:, 1]]).sum() / flat.size)
    assert obs["abs_magnetisation"] == pytest.approx(abs(flat.sum()) / flat.size)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("algorithm", ["metropolis", "wolff"])
def test_flipped_mask_is_exactly_the_last_steps_changes(algorithm, backend):
    m = IsingModel(dim=2, L=32, T=2.27, seed=4, algorithm=algorithm, backend=backend)
    m.step(5)
    before = spins_of(m)
    m.step(1)
    changed = before != spins_of(m)
    assert np.array_equal(to_numpy(m.flipped), changed)
    assert m.observables()["flipped_fraction"] == pytest.approx(changed.mean())
    assert changed.any()


def test_wolff_flips_one_connected_like_spin_cluster():
    m = IsingModel(dim=2, L=16, T=2.5, p=0.2, seed=2, algorithm="wolff", backend="numpy")
    m.step(3)
    before = spins_of(m).reshape(-1)
    m.step(1)
    cluster = np.flatnonzero(to_numpy(m.flipped).reshape(-1))
    assert cluster.size and np.all(before[cluster] == before[cluster[0]])
    # connected through edges of the rewired graph
    e = m.edges()
    inside = np.isin(e, cluster).all(axis=1)
    reached, todo = {int(cluster[0])}, [int(cluster[0])]
    adj = {}
    for a, b in e[inside]:
        adj.setdefault(a, []).append(b), adj.setdefault(b, []).append(a)
    while todo:
        for nb in adj.get(todo.pop(), []):
            if nb not in reached:
                reached.add(nb), todo.append(nb)
    assert reached == set(cluster.tolist())


def test_temperature_and_algorithm_change_between_steps():
    m = IsingModel(dim=2, L=16, T=2.0, seed=1, backend="numpy")
    m.step(2)
    m.T = 3.1
    m.algorithm = "wolff"
    m.step(2)
    assert m.T == 3.1 and m.algorithm == "wolff" and m.step_count == 4


def test_changing_rewiring_keeps_the_spins():
    m = IsingModel(dim=2, L=32, T=2.0, p=0.0, seed=1, backend="numpy")
    m.step(3)
    before = spins_of(m)
    m.set_rewiring(p=1e-1, rewire_dims="x")
    assert np.array_equal(before, spins_of(m))
    assert m.p == 0.1 and m.rewire_dims == "x" and len(m.rewired_edges()) > 0
    m.step(1)


def test_cold_and_hot_starts():
    m = IsingModel(dim=2, L=16, T=2.0, seed=1, backend="numpy", start="cold")
    assert np.all(spins_of(m) == 1)
    m.reset("hot", seed=5)
    assert 0.3 < (spins_of(m) == 1).mean() < 0.7 and m.seed == 5 and m.step_count == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("algorithm", ["metropolis", "wolff", "3:2"])
def test_saved_state_resumes_identically(algorithm, backend, tmp_path):
    m = IsingModel(dim=2, L=16, T=2.4, p=0.1, seed=3, algorithm=algorithm, backend=backend)
    m.step(4)
    save_state(tmp_path / "s.npz", m)
    r = load_state(tmp_path / "s.npz", backend=backend)
    assert isinstance(r, IsingModel) and r.params == m.params
    assert np.array_equal(r.edges(), m.edges())
    for _ in range(4):
        m.step(1), r.step(1)
        assert np.array_equal(spins_of(m), spins_of(r))
        assert np.array_equal(to_numpy(m.flipped), to_numpy(r.flipped))


@pytest.mark.parametrize("damage", ["missing", "shape", "values", "graph"])
def test_damaged_state_is_rejected_by_name(damage):
    state = state_of(IsingModel(dim=2, L=8, T=2.0, p=0.2, seed=1, backend="numpy"))
    if damage == "missing":
        del state["spins"]
    elif damage == "shape":
        state["spins"] = state["spins"][:4]
    elif damage == "values":
        state["spins"] = np.zeros_like(state["spins"])
    else:
        state["new_edges"] = state["new_edges"] + 10 ** 6
    with pytest.raises(StateError, match="damaged"):
        restore(state, backend="numpy")


@pytest.mark.parametrize("kwargs,parameter", [
    (dict(L=7), "L"), (dict(L=2), "L"), (dict(L=64.0), "L"), (dict(dim=4), "dim"), (dict(dim=1), "dim"),
    (dict(T=0), "T"), (dict(T=-1.0), "T"), (dict(T=float("nan")), "T"), (dict(p=-0.1), "p"), (dict(p=1.5), "p"),
    (dict(algorithm="glauber"), "algorithm"), (dict(algorithm="0:0"), "algorithm"),
    (dict(backend="opencl"), "backend"), (dict(rewire_dims="w"), "rewire_dims"), (dict(seed=-1), "seed"),
    (dict(dim=3, L=2000), "L"), (dict(start="warm"), "start")])
def test_bad_parameters_name_themselves(kwargs, parameter):
    with pytest.raises(ValueError, match=parameter) as info:
        IsingModel(**{"backend": "numpy", **kwargs})
    assert any(word in str(info.value) for word in ("must", "allowed", "choose a smaller"))


def test_lattice_too_big_for_memory_is_refused_before_allocating(monkeypatch):
    from latticelab.sim import memory
    monkeypatch.setattr(memory, "available_bytes", lambda backend: 2 ** 30)
    refusal = "L: Rewired Ising model with L = 8192 needs about 1.6 GiB of host memory; only 1.0 GiB"
    with pytest.raises(ParameterError, match=refusal):
        IsingModel(dim=2, L=8192, backend="numpy")


def test_bad_values_on_a_running_model_leave_it_unchanged():
    m = IsingModel(dim=2, L=16, T=2.0, seed=1, backend="numpy")
    for attr, value in (("T", -2), ("algorithm", "nope")):
        with pytest.raises(ParameterError):
            setattr(m, attr, value)
    with pytest.raises(ParameterError):
        m.set_rewiring(p=2)
    assert m.T == 2.0 and m.algorithm == "metropolis" and m.p == 0.0
    m.step(1)


@pytest.mark.gpu
@pytest.mark.parametrize("engine", ["default", "reference"])
@pytest.mark.parametrize("algorithm,T", [("metropolis", 2.6), ("wolff", 2.269), ("metropolis", 4.2)])
def test_numpy_and_cuda_agree_statistically(algorithm, T, engine, monkeypatch):
    from latticelab.sim.models.ising import model as ising_model
    from latticelab.sim.models.ising.engines import ReferenceEngine
    dim = 3 if T > 4 else 2
    L = 12 if dim == 3 else 24
    means = {}
    for backend in ("numpy", "cuda"):
        if engine == "reference" and backend == "cuda":
            monkeypatch.setattr(ising_model, "make_engine", lambda xp, lat: ReferenceEngine(xp, lat))
        m = IsingModel(dim=dim, L=L, T=T, p=0.02, algorithm=algorithm, seed=21, backend=backend)
        assert m.backend_name == backend
        m.step(300)
        e = np.empty(3000)
        for i in range(e.size):
            m.step(1)
            e[i] = m.observables()["energy"]
        means[backend] = block_mean_and_error(e)
    (a, ea), (b, eb) = means["numpy"], means["cuda"]
    assert abs(a - b) < 5 * np.hypot(ea, eb), means
