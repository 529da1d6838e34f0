"""One Ising lattice split into slabs over several devices (issue 38): the same bits as on one device.

The slab engine (sim/models/ising/gpu/slabs.py) runs the packed Metropolis kernel on each part with halos and a
gathered list of the rewired neighbours held elsewhere. On the CPU the parts are NumPy slabs of one process,
the kernels running under the CUDA emulator and the halos moved by LocalExchanger; on the 2-GPU machine
(marked gpu) the parts are the GPUs, moved by peer copies or NCCL. Either way the end state after n sweeps on
1, 2 or 4 parts must equal, bit for bit, what CudaEngine gives on one device -- itself tested against its
NumPy twin (tests/test_gpu_kernels.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.ising.lattice import build_lattice
from latticelab.sim.multidevice.exchange import make_exchanger, make_parts
from latticelab.sim.multidevice.slabs import split_slow_axis
from latticelab.sim.params import ParameterError
from latticelab.sim.rng import StreamRNG

from helpers import device_xp, emulate_devices, random_spins

SWEEPS = 3


def _one_device(xp, lattice, host, T, n, seed=11, first=0, inline_modified=None):
    """n packed sweeps of CudaEngine on one device: (spins, last sweep's mask, (bond sum, spin sum))."""
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    engine = CudaEngine(xp, lattice, inline_modified=inline_modified)
    spins, mask = engine.metropolis_sweeps(xp.asarray(host.copy()), T, StreamRNG(xp, seed, first), n)
    return to_numpy(spins), to_numpy(mask), engine.measure(spins)


def _split(xp, devices, lattice, host, T, n, overlap=True, exchanger="peer", seed=11, first=0, graphs=True,
           inline_modified=None):
    from latticelab.sim.models.ising.gpu.slabs import SlabMetropolis
    parts = make_parts(xp, devices)
    engine = SlabMetropolis(parts, make_exchanger(parts, exchanger), lattice.dim, lattice.L, lattice,
                            overlap=overlap, graphs=graphs, inline_modified=inline_modified)
    engine.load(host)
    np.testing.assert_array_equal(engine.spins(), host)
    engine.sweeps(T, seed, first, n, mask="last")
    engine.synchronize()
    return engine


def _assert_same(engine, expected, where):
    spins, mask, measured = expected
    np.testing.assert_array_equal(engine.spins(), spins, err_msg=where)
    np.testing.assert_array_equal(engine.flip_mask(), mask, err_msg=where)
    assert engine.measure() == measured, where


def test_slabs_cut_the_slow_axis_evenly_and_refuse_thin_ones():
    layout = split_slow_axis(10, 4, 1)
    assert [(s.start, s.stop) for s in layout.slabs] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    s = layout.slabs[0]
    assert (s.extent, s.offset, s.owned, s.lower_border, s.upper_border, s.interior) == \
        (5, -1, (1, 4), (1, 2), (3, 4), (2, 3))
    assert list(layout.owner(np.array([0, 2, 3, 9, 10, -1]))) == [0, 0, 1, 3, 0, 3]
    with pytest.raises(ParameterError, match="L: 6 cannot be split over 4 devices"):
        split_slow_axis(6, 4, 1)


EMULATOR_CASES = [(2, 64, 0.0, SWEEPS), (2, 64, 0.0, 10), (2, 128, 0.05, SWEEPS), (3, 64, 0.01, SWEEPS)]


@pytest.mark.parametrize("dim, L, p, sweeps", EMULATOR_CASES)
def test_slabs_on_the_cpu_end_in_the_one_device_state(dim, L, p, sweeps):
    """1, 2 and 4 NumPy slabs (the kernels emulated), borders first or all at once: the same spins, last flips
    and observables as one device, rewired neighbours on other slabs included. Without rewiring, 2D slabs keep
    deep halos: 10 sweeps run 8 in periods (halos moved every 8 half-sweeps), then 2 plane by plane."""
    xp = device_xp("emulator")
    lattice = build_lattice(dim, L, p, "all", np.random.default_rng(L + dim))
    host = random_spins((L,) * dim, seed=L)
    T = 2.3 if dim == 2 else 4.5
    expected = _one_device(xp, lattice, host, T, sweeps)
    for devices in ((0,), (0, 1), (0, 1, 2, 3)):
        for overlap in (True, False):
            engine = _split(xp, devices, lattice, host, T, sweeps, overlap=overlap)
            assert engine.depth == (8 if dim == 2 and p == 0 else 1)
            _assert_same(engine, expected, f"{dim}D L={L} p={p} {len(devices)} parts overlap={overlap}")


@pytest.mark.parametrize("dim, L, p", [(2, 128, 0.05), (3, 64, 0.01)])
def test_modified_sites_decided_apart_on_slabs_take_the_one_device_decisions(dim, L, p):
    """Rewired sites well above N/1000: on one device and on 1, 2 and 4 slabs they are decided by
    multispin_decide_modified (global site numbers, each slab's own sites and decision bits), and the result is
    that of the packed pass deciding them inline, bit for bit."""
    xp = device_xp("emulator")
    lattice = build_lattice(dim, L, p, "all", np.random.default_rng(5 + dim))
    assert lattice.modified_sites.size * 1000 > 10 * L ** dim
    host = random_spins((L,) * dim, seed=L + 1)
    T = 2.269 if dim == 2 else 4.5115
    inline = _one_device(xp, lattice, host, T, SWEEPS, inline_modified=True)
    apart = _one_device(xp, lattice, host, T, SWEEPS)
    for a, b in zip(inline, apart):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
    for devices in ((0,), (0, 1), (0, 1, 2, 3)):
        for inline_modified in (False, True):
            engine = _split(xp, devices, lattice, host, T, SWEEPS, inline_modified=inline_modified)
            assert engine.modified_apart == (not inline_modified)
            assert all(sum(state.colour_rows) for state in engine.states)
            _assert_same(engine, inline, f"{dim}D {len(devices)} parts inline={inline_modified}")


def test_the_gathered_rewired_neighbours_and_the_halos_are_what_makes_them_equal():
    """Leaving out the gathered list, the halo moves or the deep halos' moves changes the result: the test
    above can fail."""
    xp = device_xp("emulator")
    lattice = build_lattice(2, 128, 0.05, "all", np.random.default_rng(3))
    host = random_spins((128, 128), seed=1)
    spins, _mask, _measured = _one_device(xp, lattice, host, 2.3, 8)
    from latticelab.sim.models.ising.gpu.slabs import SlabMetropolis
    parts = make_parts(xp, (0, 1))
    for broken in ("gathers", "halos", "deep halos"):
        if broken == "deep halos":       # a lattice without rewiring: 2D slabs with deep halos
            lattice = build_lattice(2, 128, 0.0, "all", np.random.default_rng(3))
            spins, _mask, _measured = _one_device(xp, lattice, host, 2.3, 8)
        engine = SlabMetropolis(parts, make_exchanger(parts), 2, 128, lattice)
        engine.load(host)
        if broken == "gathers":
            assert any(len(m) for m in engine._gather_moves)
            engine._fill_gathers = lambda colour: []
        elif broken == "halos":
            engine._halo_moves = [[], []]
        else:
            assert engine.depth == 8
            engine._deep_moves = []
        engine.sweeps(2.3, 11, 0, 8)
        assert not np.array_equal(engine.spins(), spins), broken


@pytest.fixture
def emulated_models(monkeypatch):
    """IsingModel on the CPU with its CUDA kernels emulated and several 'devices' allowed (NumPy slabs)."""
    emulate_devices(monkeypatch)
    from latticelab.sim.models.ising.model import IsingModel
    return IsingModel


@pytest.mark.parametrize("dim, L, p", [(2, 64, 0.1), (3, 64, 0.01)])
def test_a_split_model_steps_measures_and_resumes_as_on_one_device(emulated_models, dim, L, p):
    IsingModel = emulated_models
    values = dict(dim=dim, L=L, p=p, T=2.3 if dim == 2 else 4.5, algorithm="metropolis", seed=5)
    one, two = IsingModel(**values), IsingModel(**values, devices=(0, 1))
    four = IsingModel(**values, devices=(0, 1, 2, 3))
    assert two.devices == (0, 1) and two.xp is np
    for model in (one, two, four):
        model.step(3)
    for model in (two, four):
        np.testing.assert_array_equal(model.spins, to_numpy(one.spins))
        np.testing.assert_array_equal(model.flipped, to_numpy(one.flipped))
        assert model.observables() == one.observables()
    frames = [model.advance(3) for model in (one, four)]
    for name, values_one in frames[0].observables.items():
        np.testing.assert_array_equal(frames[1].observables[name], values_one, err_msg=name)
    np.testing.assert_array_equal(frames[1].changed, to_numpy(frames[0].changed))
    state = four.get_state()
    np.testing.assert_array_equal(state["spins"], to_numpy(one.spins))
    assert state["streams_used"] == one.get_state()["streams_used"]
    two.set_state(state)
    one.step(2)
    two.step(2)
    np.testing.assert_array_equal(two.spins, to_numpy(one.spins))
    for model in (one, two):             # a new graph (live p): the spins are kept, the slabs rebuilt
        model.update(p=0.05)
        model.step(2)
    np.testing.assert_array_equal(two.spins, to_numpy(one.spins))
    assert two.observables() == one.observables()


def test_a_split_frame_runs_its_sweeps_back_to_back_with_the_one_device_values(emulated_models, monkeypatch):
    """A plain 2D lattice (deep halos): a frame's 10 sweeps (two 8-half-sweep periods, then 2 plane by plane) run
    at once on every slab, each sweep measured into its own slot by the owned planes' launch, the halo planes
    updated apart -- the per-step observables, the flips' union and the end state of one device, also with the
    totals left pending (``wait=False``); never sweep by sweep."""
    from latticelab.sim.models.ising.split import SplitRun
    IsingModel = emulated_models
    values = dict(dim=2, L=64, p=0.0, T=2.269, algorithm="metropolis", seed=9)
    one = IsingModel(**values)
    split = [IsingModel(**values, devices=devices) for devices in ((0, 1), (0, 1, 2, 3))]
    assert all(model._split.engine.depth == 8 for model in split)

    def per_sweep(*args, **kwargs):
        raise AssertionError("a plain split frame was measured sweep by sweep")
    monkeypatch.setattr(SplitRun, "measured_sweep", per_sweep)
    for n, wait in ((10, True), (3, False)):
        expected = one.advance(n)
        for model in split:
            batch = model.advance(n, wait=wait)
            observables = batch.observables if wait else batch.observables.result()
            for name, values_one in expected.observables.items():
                np.testing.assert_array_equal(observables[name], values_one, err_msg=f"{name} {model.devices}")
            np.testing.assert_array_equal(batch.changed, to_numpy(expected.changed))
            np.testing.assert_array_equal(model.spins, to_numpy(one.spins))
            np.testing.assert_array_equal(batch.times, expected.times)


def test_a_split_model_refuses_cluster_updates(emulated_models):
    IsingModel = emulated_models
    with pytest.raises(ParameterError, match="devices: .*Metropolis only.*Wolff and Swendsen-Wang stay on one"):
        IsingModel(dim=2, L=64, algorithm="wolff", devices=(0, 1))
    model = IsingModel(dim=2, L=64, algorithm="metropolis", devices=(0, 1))
    with pytest.raises(ParameterError, match="algorithm: .*Metropolis only"):
        model.update(algorithm="2:1")
    with pytest.raises(ParameterError, match="devices: .*L a multiple of 64"):
        IsingModel(dim=2, L=96, algorithm="metropolis", devices=(0, 1))


def test_the_devices_option_is_refused_where_it_cannot_apply():
    from latticelab.sim.models import all_models
    from latticelab.sim.multidevice.devices import parse_devices
    models = all_models()
    assert parse_devices("0, 1") == (0, 1) and parse_devices("all") == "all" and parse_devices(None) is None
    for bad in ("x", "0,0", "-1", "", 1.5, True):
        with pytest.raises(ParameterError, match="devices"):
            parse_devices(bad)
    for name, cls in models.items():
        if cls.splits_across_devices:
            with pytest.raises(ParameterError, match="devices: several devices need the CUDA backend"):
                cls.create(backend="numpy", devices="0,1", **cls.small_example)
        else:
            with pytest.raises(ParameterError, match=f"devices: the {name} model .* runs on one device only"):
                cls.create(backend="numpy", devices="0,1", **cls.small_example)
    with pytest.raises(ParameterError, match="devices: a one-device run uses the current device"):
        models["ising"].create(backend="numpy", devices="1", **models["ising"].small_example)


def test_the_memory_check_counts_per_device(monkeypatch):
    """A lattice too large for one device is refused on one and accepted on two when each half fits."""
    import latticelab.sim.memory as memory
    from latticelab.sim.backend import Backend
    from latticelab.sim.models.ising.model import IsingModel
    params = IsingModel.Params.create(gpu=True, dim=2, L=32768, algorithm="metropolis")
    per_two = IsingModel.estimate_bytes_per_device(params, "cuda", 2)
    whole = IsingModel.estimate_bytes(params, "cuda")
    assert per_two < whole / 1.5
    monkeypatch.setattr(memory, "available_bytes", lambda backend, devices=None: (per_two + whole) // 2)
    gpu = Backend(np, "cuda", "test GPU", "test")
    assert memory.check_fits(IsingModel, params, gpu, devices=(0, 1)) == per_two
    with pytest.raises(ParameterError, match="L: .*L = 32768 needs about .*the largest L that fits"):
        memory.check_fits(IsingModel, params, gpu)


def test_the_cli_refuses_devices_for_a_model_that_does_not_split(capsys, monkeypatch):
    from latticelab.app.commands.main import main
    from latticelab.sim.models.cortex.model import CortexModel
    monkeypatch.setattr(CortexModel, "splits_across_devices", False)      # every model splits now: pretend
    assert main(["run", "cortex", "--devices", "0,1", "--steps", "1"]) == 2
    assert "devices: the cortex model" in capsys.readouterr().err


# ---- on the 2-GPU machine ----------------------------------------------------------------------------------------
def _gpus(n: int):
    xp = device_xp("cuda")
    if xp.cuda.runtime.getDeviceCount() < n:
        pytest.skip(f"needs {n} GPUs")
    return xp


GPU_CASES = [(2, 512, 0.0), (2, 1024, 0.01), (3, 128, 0.002), (3, 64, 0.05)]


@pytest.mark.gpu
@pytest.mark.parametrize("exchanger", ["peer", "nccl"])
@pytest.mark.parametrize("dim, L, p", GPU_CASES)
def test_slabs_on_two_gpus_end_in_the_one_gpu_state(dim, L, p, exchanger):
    xp = _gpus(2)
    lattice = build_lattice(dim, L, p, "all", np.random.default_rng(L + dim))
    host = random_spins((L,) * dim, seed=L)
    T = 2.269 if dim == 2 else 4.5115
    expected = _one_device(xp, lattice, host, T, 70, seed=7, first=3)
    for devices in ((0,), (0, 1)):
        for overlap, graphs in ((True, True), (False, True), (True, False)):
            engine = _split(xp, devices, lattice, host, T, 70, overlap, exchanger, seed=7, first=3, graphs=graphs)
            assert engine._capture == (graphs and exchanger == "peer"), "the sweeps were not replayed from graphs"
            _assert_same(engine, expected, f"{dim}D L={L} p={p} {devices} overlap={overlap} graphs={graphs} "
                                           f"{exchanger}")


@pytest.mark.gpu
def test_a_model_split_over_two_gpus_follows_the_one_gpu_trajectory():
    _gpus(2)
    from latticelab.sim.models.ising.model import IsingModel
    for dim, L, p in ((2, 256, 0.01), (3, 64, 0.01), (2, 512, 0.0)):
        values = dict(dim=dim, L=L, p=p, T=2.5 * dim - 1, algorithm="metropolis", seed=4, backend="cuda")
        one, two = IsingModel(**values), IsingModel(**values, devices="0,1")
        for model in (one, two):
            model.step(7)
            model.step(1)
        np.testing.assert_array_equal(two.spins, to_numpy(one.spins))
        np.testing.assert_array_equal(two.flipped, to_numpy(one.flipped))
        assert two.observables() == one.observables()
        # p = 0: frames replayed from measured multi-GPU graphs (64 + 4 sweeps in periods, 2 plane by plane),
        # their totals pending without wait; rewired: measured sweep by sweep, the totals at hand
        for n, wait in ((5, True), (70, True), (70, False)):
            a, b = one.advance(n), two.advance(n, wait=wait)
            pending = not isinstance(b.observables, dict)
            assert pending == (not wait and p == 0), (L, p, n, wait)
            observables = b.observables.result() if pending else b.observables
            for name in a.observables:
                np.testing.assert_array_equal(observables[name], a.observables[name], err_msg=f"{name} {L} {n}")
            np.testing.assert_array_equal(b.changed, to_numpy(a.changed))
        assert two._split.engine._capture, "the split frames were not replayed from graphs"
        np.testing.assert_array_equal(two.spins, to_numpy(one.spins))


def test_the_window_runner_splits_the_models_that_split_and_runs_the_others_on_one_device(monkeypatch):
    from latticelab.sim.models import get_model
    from latticelab.sim.runner import Runner
    cortex = get_model("cortex")
    monkeypatch.setattr(cortex, "splits_across_devices", False)           # every model splits now: pretend
    runner = Runner("cortex", cortex.small_example, backend="numpy", devices="0,1")
    assert runner.model.name == "cortex"
    with pytest.raises(ParameterError, match="devices: several devices need the CUDA backend"):
        Runner("ising", get_model("ising").small_example, backend="numpy", devices="0,1")
