"""The cortical model's packed source layout (16-bit offsets (dx, dy), four to a 64-bit word, read through phase
1's halo array of spike codes; sim/models/cortex/network.py) and the fused step (phase 2 finishes the EEG sums into
the trace; ``advance(n)`` copies a frame's observables once): against the NumPy twins and the int32 layout, on the
CPU emulator of the kernels and on a CUDA device (marked gpu)."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.gpu.philox import split64
from latticelab.sim.models.cortex.engines import EV_MAX, KERNEL_DIR, CortexState, CudaPhases, NumpyPhases, grid_for
from latticelab.sim.models.cortex.model import CortexModel, bytes_per_neuron
from latticelab.sim.models.cortex.network import (PACKED_MAX_RADIUS, check_packable, connect, connect_offsets,
                                                  halo_codes, halo_side, make_neurons, pack_offsets, packed_words,
                                                  unpack_offsets, unpack_sources)
from latticelab.sim.models.cortex.params import CortexParams
from latticelab.sim.params import ParameterError

from helpers import DEVICES, device_xp
from test_cortex_kernels import INPUTS, assert_same, host_state

NETWORKS = [(16, 10, 4), (12, 7, 6), (10, 3, 1), (8, 5, 4), (9, 4, 2), (20, 70, 5)]   # k mod 4 = 0 .. 3; 2r = L


@pytest.mark.parametrize("L, k, r", NETWORKS)
def test_packed_offsets_decode_to_the_int32_sources(L, k, r):
    dx, dy = connect_offsets(seed=3, L=L, k=k, r=r)
    packed = pack_offsets(dx, dy)
    assert packed.dtype == np.uint64 and packed.shape == (packed_words(k), L * L)
    np.testing.assert_array_equal(unpack_sources(np, packed, L, k), connect(3, L, k, r))
    ux, uy = unpack_offsets(np, packed, k)
    np.testing.assert_array_equal(ux, dx)
    np.testing.assert_array_equal(uy, dy)
    # every receiver: exactly k sources, each within r and not itself, by the decoded offsets
    assert ux.shape == (k, L * L)
    assert np.all(ux * ux + uy * uy <= r * r) and np.all((ux != 0) | (uy != 0))
    lanes = packed.view(np.uint16).reshape(packed_words(k), L * L, 4).transpose(0, 2, 1).reshape(-1, L * L)
    assert np.all(lanes[k:] == 0)                                  # unused lanes of the last word


def test_the_packed_layout_refuses_radii_beyond_one_byte():
    check_packable(PACKED_MAX_RADIUS)
    with pytest.raises(ValueError, match="r = 128"):
        check_packable(128)
    phases = CudaPhases.__new__(CudaPhases)
    for layout, r, want in [("auto", 127, "packed"), ("auto", 128, "int32"), ("int32", 4, "int32"),
                            ("packed", 127, "packed")]:
        phases.layout = layout
        assert phases.layout_for(r) == want
    phases.layout = "packed"
    with pytest.raises(ValueError, match="r = 200"):
        phases.layout_for(200)


def test_a_packed_model_with_too_large_a_radius_is_refused_naming_r():
    xp = device_xp("emulator")
    with pytest.raises(ParameterError, match=r"^r: r = 128"):
        CortexModel(L=256, k=1, r=128, backend="numpy", phases=CudaPhases(xp, layout="packed"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("L, k, r", NETWORKS[:5])
def test_packed_connect_kernel_equals_its_numpy_twin(device, L, k, r):
    from latticelab.sim.gpu.kernels import get_kernel
    xp = device_xp(device)
    seed = 2 ** 33 + 5
    names = ("cortex_connect<256>", "cortex_connect_packed<256>")
    kernel = get_kernel(xp, KERNEL_DIR / "connect.cu", names[1], names)
    got = xp.zeros((packed_words(k), L * L), xp.uint64)
    lo, hi = split64(seed)
    kernel((grid_for(got.size),), (256,), (got, np.int32(L), np.int32(k), np.int32(r), np.float64(r / 3.0),
                                           np.uint32(lo), np.uint32(hi), np.int32(0),
                                        np.int32(L * L), np.int32(0)))
    np.testing.assert_array_equal(to_numpy(got), pack_offsets(*connect_offsets(seed, L, k, r)))


def random_packed_state(xp, L: int, k: int, r: int, seed: int, ev_idx: int, fire: float = 0.2) -> CortexState:
    """A network in a random mid-run state (as test_cortex_kernels.random_state) in the packed layout, halo
    written from its data bytes."""
    rng = np.random.default_rng(seed)
    n = L * L
    neurons = make_neurons(seed, n, 0.8)
    v = rng.uniform(-90, 30, n).astype(np.float32)
    v[rng.random(n) < 0.1] = 30.0
    u = rng.uniform(-20, 10, n).astype(np.float32)
    ev = np.where(rng.random((EV_MAX, n)) < 0.3, rng.normal(0, 2, (EV_MAX, n)), 0).astype(np.float32)
    data = ((neurons.types << 1) | (rng.random(n) < fire)).astype(np.uint8)
    s = CortexState(L=L, k=k, sources=None, data=xp.asarray(data), tv=xp.asarray(neurons.tv),
                    delay=xp.asarray(neurons.delay), v=xp.asarray(v), u=xp.asarray(u), ev=xp.asarray(ev),
                    ev_idx=ev_idx, packed=xp.asarray(pack_offsets(*connect_offsets(seed, L, k, r))),
                    halo=xp.zeros(halo_side(L, r) ** 2, xp.uint8), pad=r)
    s.refresh_halo(xp)
    return s


def as_int32(s: CortexState) -> CortexState:
    """The same state in the int32 layout, on the host (the NumPy twin's input)."""
    h = host_state(s)
    return CortexState(L=h.L, k=h.k, sources=unpack_sources(np, h.packed, h.L, h.k), data=h.data, tv=h.tv,
                       delay=h.delay, v=h.v, u=h.u, ev=h.ev, ev_idx=h.ev_idx)


SHAPES = {"emulator": [(256, None), (32, 3)], "cuda": [(256, None), (128, 7), (32, 1000)]}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ev_idx", [0, 74])
def test_phase1_writes_the_halo_and_otherwise_equals_its_twin(device, ev_idx):
    xp = device_xp(device)
    L, k, r = (12, 7, 6) if device == "emulator" else (128, 50, 64)
    step = 2 ** 32 + 99
    reference = as_int32(random_packed_state(np, L, k, r, seed=11, ev_idx=ev_idx))
    want = NumpyPhases().phase1(reference, 2 ** 40 + 7, step, INPUTS)
    for threads, blocks in SHAPES[device]:
        state = random_packed_state(xp, L, k, r, seed=11, ev_idx=ev_idx)
        state.halo[...] = 77                                       # phase 1 must write every halo byte
        union = xp.zeros(L * L, xp.uint8)
        got = CudaPhases(xp, threads=threads, blocks=blocks).phase1(state, 2 ** 40 + 7, step, INPUTS, union)
        assert_same(host_state(state), reference)
        np.testing.assert_array_equal(to_numpy(state.halo), halo_codes(np, reference.data, L, r))
        np.testing.assert_array_equal(to_numpy(union), reference.data & 1)
        assert to_numpy(got)[1:].tolist() == want[1:].tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("L, k, r, fire, w, ev_idx", [
    (16, 10, 4, 0.2, 30, 0), (12, 7, 6, 0.5, 60, 50), (9, 5, 2, 0.3, 1, 74),
    (20, 70, 5, 1.0, 30, 3),                     # every source fires: the largest code sums (no carries)
    (20, 70, 5, 0.9, 45, 20), (10, 31, 5, 1.0, 10, 9)])
def test_packed_phase2_equals_its_numpy_twin(device, L, k, r, fire, w, ev_idx):
    xp = device_xp(device)
    if device == "cuda":
        L = L * 8
    rng = np.random.default_rng(w)
    table = np.zeros((2, 60), np.float32)
    table[0, :w] = rng.uniform(0, 1, w)
    table[1, :w] = -rng.uniform(0, 1, w)
    reference = as_int32(random_packed_state(np, L, k, r, seed=12, ev_idx=ev_idx, fire=fire))
    NumpyPhases().phase2(reference, table, w)
    for threads, blocks in SHAPES[device]:
        state = random_packed_state(xp, L, k, r, seed=12, ev_idx=ev_idx, fire=fire)
        CudaPhases(xp, threads=threads, blocks=blocks).phase2(state, table, w)
        assert_same(host_state(state), reference)


def fingerprint(model, steps: int = 80) -> str:
    h = hashlib.sha256()
    for _ in range(steps):
        model.step(1)
        h.update(to_numpy(model.state.data).tobytes())
    h.update(to_numpy(model.state.v).tobytes())
    h.update(to_numpy(model.state.ev).tobytes())
    return h.hexdigest()[:16]


# spike trains, potentials and ring of the int32 code before the packed layout (NumPy, commit 6cb6628)
BEFORE = [({"L": 16, "k": 10, "r": 4, "seed": 7}, "29c56286f3bb0507"),
          ({"L": 24, "k": 37, "r": 6, "seed": 3, "I_e": 4.0}, "8a02248ca24ce79f")]


@pytest.mark.parametrize("values, digest", BEFORE)
@pytest.mark.parametrize("how", ["numpy", "emulator-packed", "emulator-int32",
                                 pytest.param("cuda-packed", marks=pytest.mark.gpu),
                                 pytest.param("cuda-int32", marks=pytest.mark.gpu)])
def test_the_spike_trains_are_those_of_the_code_before(values, digest, how):
    if how == "numpy":
        model = CortexModel(backend="numpy", **values)
    else:
        device, layout = how.split("-")
        xp = device_xp(device)
        model = CortexModel(backend="numpy" if device == "emulator" else "cuda", phases=CudaPhases(xp, layout=layout),
                            **values)
        assert model.state.layout == layout
    assert fingerprint(model) == digest


@pytest.mark.parametrize("device", DEVICES)
def test_advance_gives_the_steps_observables_and_the_union_of_spikes(device):
    xp = device_xp(device)
    values = {"L": 16, "k": 10, "r": 4} if device == "emulator" else {"L": 256, "k": 100, "r": 64}
    params = CortexParams.create(seed=5, I_e=4.0, **values)
    reference = CortexModel(params, backend="numpy")
    model = CortexModel(params, backend="numpy", phases=CudaPhases(xp)) if device == "emulator" \
        else CortexModel(params, backend="cuda")
    model.probe = 37
    reference.probe = 37
    for n in (1, 7, 12):
        union = np.zeros(reference.n_neurons, bool)
        times, rows = [], []
        for _ in range(n):
            reference.step(1)
            union |= to_numpy(reference.fired).reshape(-1)
            times.append(reference.time)
            rows.append([reference.observables()[k] for k in ("eeg", "firing_e", "firing_i")])
        batch = model.advance(n)
        rows = np.array(rows)
        assert batch.steps == n and batch.times.tolist() == times
        np.testing.assert_allclose(batch.observables["eeg"], rows[:, 0], rtol=1e-12)
        assert batch.observables["firing_e"].tolist() == rows[:, 1].tolist()
        assert batch.observables["firing_i"].tolist() == rows[:, 2].tolist()
        np.testing.assert_array_equal(to_numpy(batch.changed).reshape(-1), union)
    a, b = reference.trace(since=0), model.trace(since=0)
    assert a[:, 2].max() > 0                                            # something fired
    assert np.array_equal(a[:, [0, 2, 3, 4]], b[:, [0, 2, 3, 4]])       # the probe's v too
    assert_same(host_state(model.state), host_state(reference.state))
    assert model.observables()["firing_e"] == reference.observables()["firing_e"]


def test_a_saved_state_resumes_on_the_packed_layout():
    xp = device_xp("emulator")
    params = CortexParams.create(seed=8, L=12, k=9, r=3, I_e=4.0)
    first = CortexModel(params, backend="numpy", phases=CudaPhases(xp))
    first.step(15)
    saved = first.get_state()
    first.step(10)
    again = CortexModel.from_state(params, saved, backend="numpy")        # NumPy phases from the saved state
    again.step(10)
    assert_same(host_state(first.state), host_state(again.state))
    assert first.observables() == pytest.approx(again.observables(), rel=1e-12)


@pytest.mark.parametrize("L, k, r", [(16, 10, 4), (32, 101, 8)])
def test_the_cuda_estimate_matches_the_packed_arrays(L, k, r):
    xp = device_xp("emulator")
    params = CortexParams.create(L=L, k=k, r=r)
    model = CortexModel(params, backend="numpy", phases=CudaPhases(xp))
    s = model.state
    assert s.layout == "packed" and s.sources is None
    assert s.packed.nbytes == 8 * packed_words(k) * L * L and s.halo.nbytes == (L + 2 * r) ** 2
    arrays = sum(getattr(s, f).nbytes for f in ("packed", "halo", "data", "tv", "delay", "v", "u", "ev"))
    estimate = CortexModel.estimate_bytes(params, "cuda")
    assert arrays <= estimate <= arrays + 16 * L * L + 1
    # the case: 2 bytes a source instead of 4, and the halo (1152^2 / 1024^2 bytes a neuron)
    assert bytes_per_neuron(100, 1024, 64, "packed") == pytest.approx(bytes_per_neuron(100) - 200 + 1.265625)
    edges = model.edges()
    np.testing.assert_array_equal(edges[:, 0].reshape(k, L * L), connect(params.seed, L, k, r))
