"""The cortical network split into row slabs over several devices (issue 38; thesis 003 Algorithm 63): the same
spike trains, membrane states, pending inputs and EEG, bit for bit, as on one device.

On the CPU the parts are NumPy slabs of one process, the kernels emulated (sim/gpu/emulate.py), the halos moved
by LocalExchanger; the one-device reference is the same kernels, emulated, on the whole grid (the model with
CudaPhases). On the 2-GPU machine (marked gpu) the parts are the GPUs.
"""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.cortex.engines import CudaPhases
from latticelab.sim.params import ParameterError

from helpers import device_xp

VALUES = dict(L=32, k=10, r=4, seed=5, I_e=4.0, boost=5.0, boost_fraction=0.2)
STEPS = 24
THREADS = 32


@pytest.fixture
def emulated(monkeypatch):
    """(CortexModel, emulator xp): the model on the CPU with several 'devices' (NumPy slabs, kernels emulated),
    blocks of THREADS threads (the emulator's cost grows with the threads of a launch)."""
    import latticelab.sim.backend as backend
    import latticelab.sim.multidevice.devices as devices
    xp = device_xp("emulator")
    monkeypatch.setattr(backend, "select_backend", lambda name="auto": backend.Backend(xp, "numpy", "CPU", "test"))
    monkeypatch.setattr(devices, "resolve_devices", lambda cls, value, b: tuple(value) if value else (0,))
    from latticelab.sim.models.cortex.model import CortexModel
    monkeypatch.setattr(CortexModel, "split_options", {"threads": THREADS})
    return CortexModel, xp


def _one_device(model_cls, xp, layout="auto", threads=THREADS):
    return model_cls(backend="numpy", phases=CudaPhases(xp, layout=layout, threads=threads), **VALUES)


def _run(model, steps=STEPS):
    """Steps with a live change between them; the spikes of a band across the slab borders recorded."""
    recording = model.record_spikes(range(100, 900))
    model.step(steps // 2)
    model.update(boost_fraction=0.0, I_i=1.0)
    batch = model.advance(steps - steps // 2)
    return recording.spikes(), batch


def _assert_same(a, b, what, since=0):
    sa, sb = a.state, b.state
    for name in ("v", "u", "data", "ev"):
        x, y = to_numpy(getattr(sa, name)), to_numpy(getattr(sb, name))
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8), err_msg=f"{what}: {name}")
    assert sa.ev_idx == sb.ev_idx and a.step_count == b.step_count
    np.testing.assert_array_equal(a.trace(since=since), b.trace(since=since), err_msg=f"{what}: trace")
    assert a.observables() == b.observables(), what
    assert a.neuron(700) == b.neuron(700), what
    np.testing.assert_array_equal(to_numpy(a.fired), to_numpy(b.fired), err_msg=what)


# the EEG sums' chunks: a row (32 threads) or two rows (64 threads) of the 32 x 32 grid (kernels/phase1.cu)
@pytest.mark.parametrize("layout, overlap, threads", [("packed", True, 32), ("int32", False, 64), ("int32", True, 64)])
def test_a_split_network_steps_as_on_one_device(emulated, monkeypatch, layout, overlap, threads):
    model_cls, xp = emulated
    monkeypatch.setattr(model_cls, "split_options", {"layout": layout, "overlap": overlap, "threads": threads})
    one = _one_device(model_cls, xp, layout, threads)
    one.probe = 700                               # the probe neuron's potential comes from another part
    (steps, indices), batch = _run(one)
    assert steps.size > 50 and len(set(indices.tolist())) > 20      # spikes on both sides of the borders
    for devices in ((0, 1), (0, 1, 2, 3)):
        split = model_cls.create(backend="numpy", devices=devices, **VALUES)
        split.probe = 700
        (s, i), b = _run(split)
        what = f"{layout} {len(devices)} parts"
        np.testing.assert_array_equal(s, steps, err_msg=what)
        np.testing.assert_array_equal(i, indices, err_msg=what)
        np.testing.assert_array_equal(to_numpy(b.changed), to_numpy(batch.changed), err_msg=what)
        for name, values in batch.observables.items():
            np.testing.assert_array_equal(b.observables[name], values, err_msg=f"{what}: {name}")
        _assert_same(split, one, what)
        # the EEG partial sums, gathered in row order, are the one-device ones (a float sum of potentials over so
        # few neurons is nearly always exact, so the EEG alone would not show a wrong order)
        np.testing.assert_array_equal(to_numpy(split._split.engine.gathered), to_numpy(one._phases._partials),
                                      err_msg=what)
    np.testing.assert_array_equal(split.edges(), one.edges())       # the source lists, back in global indices


def test_a_split_network_saves_and_resumes(emulated):
    model_cls, xp = emulated
    one = _one_device(model_cls, xp)
    two = model_cls.create(backend="numpy", devices=(0, 1), **VALUES)
    for model in (one, two):
        model.step(10)
    state = two.get_state()
    for key, value in one.get_state().items():
        np.testing.assert_array_equal(state[key], value, err_msg=key)
    np.testing.assert_array_equal(two.edges(), one.edges())
    resumed = [model_cls.from_state(two.params, state, backend="numpy", devices=(0, 1, 2, 3)),
               model_cls.from_state(two.params, one.get_state(), backend="numpy", devices=(0, 1))]
    for model in (one, *resumed):
        model.step(8)
    for model in resumed:
        _assert_same(model, one, f"resumed on {len(model.devices)}", since=10)


def test_the_halo_moves_are_what_makes_the_slabs_equal(emulated):
    """Without the border rows' spike codes in the neighbours' halos, the receivers near the borders miss their
    sources there: the tests above can fail."""
    model_cls, xp = emulated
    one = _one_device(model_cls, xp)
    two = model_cls.create(backend="numpy", devices=(0, 1), **VALUES)
    engine = two._split.engine
    halo, gather = engine._planned()
    engine._moves = ([], gather)
    for model in (one, two):
        model.step(STEPS)
    assert not np.array_equal(to_numpy(one.state.v), two.state.v)


def test_a_split_network_refuses_slabs_thinner_than_two_radii(emulated):
    model_cls, _ = emulated
    with pytest.raises(ParameterError, match=r"devices: 32 rows cannot be split over 4 devices with r = 5: each "
                                             r"device needs at least 2 r = 10 rows;"):
        model_cls.create(backend="numpy", devices=(0, 1, 2, 3), **{**VALUES, "r": 5})
    model_cls.split_options = {"threads": 256}      # chunks of the EEG sums of 10 rows of 24: slabs of 10, 10, 4
    with pytest.raises(ParameterError, match=r"devices: 24 rows cannot be split over 3 devices with r = 3: each "
                                             r"device needs at least 2 r = 6 rows in whole blocks of 10 rows;"):
        model_cls.create(backend="numpy", devices=(0, 1, 2), **{**VALUES, "L": 24, "r": 3})


def test_a_run_over_the_processes_of_an_mpi_job_is_refused_in_one_line():
    from types import SimpleNamespace

    from latticelab.sim.models.cortex.model import CortexModel
    from latticelab.sim.multidevice.devices import ProcessDevices
    with pytest.raises(ParameterError, match=r"^distributed: the cortex model .* runs in one process only"):
        CortexModel(backend="numpy", devices=ProcessDevices((0, 1), SimpleNamespace(rank=0)), **VALUES)


# ---- on the 2-GPU machine ----------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("options", [{}, {"overlap": False}, {"exchanger": "nccl"}, {"layout": "int32"}])
def test_a_network_split_over_two_gpus_steps_as_on_one(monkeypatch, options):
    xp = device_xp("cuda")
    if xp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    from latticelab.sim.models.cortex.model import CortexModel
    monkeypatch.setattr(CortexModel, "split_options", options)
    values = dict(L=256, k=50, r=16, seed=3, I_e=4.0, boost=5.0, boost_fraction=0.2)
    one = CortexModel(backend="cuda", phases=CudaPhases(xp, layout=options.get("layout", "auto")), **values)
    two = CortexModel.create(backend="cuda", devices="0,1", **values)
    for model in (one, two):
        model.probe = 40000
    (steps, indices), batch = _run(one, 200)
    (s, i), b = _run(two, 200)
    assert steps.size > 1000
    np.testing.assert_array_equal(s, steps)
    np.testing.assert_array_equal(i, indices)
    np.testing.assert_array_equal(to_numpy(b.changed), to_numpy(batch.changed))
    _assert_same(two, one, f"2 GPUs {options}")
    three = CortexModel.from_state(two.params, two.get_state(), backend="cuda", devices="0,1")
    three.probe = 40000                           # not part of a saved state
    for model in (one, three):
        model.step(50)
    _assert_same(three, one, f"2 GPUs {options}, resumed", since=200)


def test_a_network_too_large_for_one_gpu_is_accepted_on_two(monkeypatch):
    import latticelab.sim.memory as memory
    from latticelab.sim.backend import Backend
    from latticelab.sim.models.cortex.model import CortexModel
    params = CortexModel.Params.create(gpu=True, L=2896, k=100, r=64)
    per_two = CortexModel.estimate_bytes_per_device(params, "cuda", 2)
    whole = CortexModel.estimate_bytes(params, "cuda")
    assert whole / 2 < per_two < whole / 1.9            # half the neurons and a slab's halo rows
    monkeypatch.setattr(memory, "available_bytes", lambda backend, devices=None: (per_two + whole) // 2)
    gpu = Backend(np, "cuda", "test GPU", "test")
    assert memory.check_fits(CortexModel, params, gpu, devices=(0, 1)) == per_two
    with pytest.raises(ParameterError, match="L: .*needs about"):
        memory.check_fits(CortexModel, params, gpu)
