"""The cortical model's CUDA kernels (sim/models/cortex/kernels/*.cu) against their NumPy twins, bit for bit:
the normal deviates, phase 1, phase 2, the connections and whole runs of the model, on the CPU emulator of the
kernels (g++) and on a CUDA device (marked gpu). Launch shapes are varied: the results must not depend on
them."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.gpu.philox import split64
from latticelab.sim.models.cortex import numbers
from latticelab.sim.models.cortex.engines import EV_MAX, KERNEL_DIR, CortexState, CudaPhases, Inputs, NumpyPhases
from latticelab.sim.models.cortex.model import CortexModel
from latticelab.sim.models.cortex.network import connect, make_neurons
from latticelab.sim.models.cortex.params import CortexParams

from helpers import DEVICES, device_xp

SPECIAL_WORDS = np.array([0, 1, 2, 0x3FFFFFFF, 0x40000000, 0x7FFFFFFF, 0x80000000, 0xBFFFFFFF, 0xC0000000,
                          0x1FFFFFFF, 0x20000000, 0x20000001, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32)

NORMAL_TEST = """
extern "C" __global__ void normal_test(const unsigned int* w0, const unsigned int* w1, double* out, const int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        double z0, z1;
        cortex_normal_pair(w0[i], w1[i], &z0, &z1);
        out[2 * i] = z0;
        out[2 * i + 1] = z1;
    }
}
"""


def test_normal_deviates_are_standard_normal_and_the_logarithm_and_cosine_are_accurate():
    rng = np.random.default_rng(1)
    w = rng.integers(0, 2 ** 32, size=(2, 200000), dtype=np.uint64).astype(np.uint32)
    w = np.concatenate([w, np.stack([SPECIAL_WORDS, SPECIAL_WORDS[::-1]])], axis=1)
    u1 = (w[0].astype(np.float64) + 1) / 2 ** 32
    np.testing.assert_allclose(numbers.log_unit(w[0]), np.log(u1), rtol=4e-16, atol=4e-16)
    sin, cos = numbers.sincos_2pi(w[1])
    angle = 2 * np.pi * w[1].astype(np.float64) / 2 ** 32
    np.testing.assert_allclose(cos, np.cos(angle), atol=3e-16)
    np.testing.assert_allclose(sin, np.sin(angle), atol=3e-16)
    z0, z1 = numbers.normal_pair(w[0], w[1])
    for z in (z0, z1):
        assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
        assert abs((np.abs(z) < 1).mean() - 0.6827) < 0.005
    assert abs(np.corrcoef(z0, z1)[0, 1]) < 0.01


@pytest.mark.parametrize("device", DEVICES)
def test_the_kernels_normal_deviates_equal_numpys_bit_for_bit(device):
    from latticelab.sim.gpu.kernels import kernel_source
    xp = device_xp(device)
    rng = np.random.default_rng(2)
    size = 4000 if device == "emulator" else 1 << 20
    w = rng.integers(0, 2 ** 32, size=(2, size), dtype=np.uint64).astype(np.uint32)
    w = np.concatenate([w, np.stack([SPECIAL_WORDS, SPECIAL_WORDS[::-1]])], axis=1)
    n = w.shape[1]
    module = xp.RawModule(code=kernel_source(KERNEL_DIR / "cortex_math.cuh") + NORMAL_TEST,
                          options=("--std=c++17",), name_expressions=("normal_test",))
    kernel = module.get_function("normal_test")
    out = xp.zeros(2 * n, xp.float64)
    kernel(((n + 255) // 256,), (256,), (xp.asarray(w[0]), xp.asarray(w[1]), out, np.int32(n)))
    z0, z1 = numbers.normal_pair(w[0], w[1])
    got = to_numpy(out).reshape(n, 2)
    np.testing.assert_array_equal(got[:, 0].view(np.uint64), z0.view(np.uint64))
    np.testing.assert_array_equal(got[:, 1].view(np.uint64), z1.view(np.uint64))


@functools.lru_cache(maxsize=8)
def cached_connect(seed: int, L: int, k: int, r: int) -> np.ndarray:
    sources = connect(seed, L, k, r)
    sources.flags.writeable = False
    return sources


def random_state(xp, L: int, k: int, r: int, seed: int, ev_idx: int) -> CortexState:
    """A network in a random mid-run state: potentials across the whole range (some at 30 mV: they fired),
    pending inputs in the ring, fired bits set at random."""
    rng = np.random.default_rng(seed)
    n = L * L
    neurons = make_neurons(seed, n, 0.8)
    v = rng.uniform(-90, 30, n).astype(np.float32)
    v[rng.random(n) < 0.1] = 30.0
    u = rng.uniform(-20, 10, n).astype(np.float32)
    ev = np.where(rng.random((EV_MAX, n)) < 0.3, rng.normal(0, 2, (EV_MAX, n)), 0).astype(np.float32)
    data = (neurons.types << 1) | (rng.random(n) < 0.2)
    return CortexState(L=L, k=k, sources=xp.asarray(cached_connect(seed, L, k, r).copy()),
                       data=xp.asarray(data.astype(np.uint8)), tv=xp.asarray(neurons.tv),
                       delay=xp.asarray(neurons.delay), v=xp.asarray(v), u=xp.asarray(u), ev=xp.asarray(ev),
                       ev_idx=ev_idx)


def host_state(s: CortexState) -> CortexState:
    arrays = {f: None if getattr(s, f) is None else to_numpy(getattr(s, f)).copy()
              for f in ("sources", "data", "tv", "delay", "v", "u", "ev", "packed", "halo")}
    return CortexState(L=s.L, k=s.k, ev_idx=s.ev_idx, pad=s.pad, **arrays)


def assert_same(a: CortexState, b: CortexState):
    for f in ("data", "v", "u", "ev"):
        x, y = to_numpy(getattr(a, f)), to_numpy(getattr(b, f))
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8), err_msg=f)


INPUTS = Inputs((np.float32(3.0), np.float32(2.0)), (np.float32(4.5), np.float32(3.0)), np.float32(10.0),
                numbers.threshold32(0.3))
SHAPES = {"emulator": [(256, None), (32, 3)], "cuda": [(256, None), (128, 7), (32, 1000)]}
SIZES = {"emulator": (16, 10, 4), "cuda": (128, 50, 8)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ev_idx", [0, 9, 74])
def test_phase1_kernel_equals_its_numpy_twin(device, ev_idx):
    xp = device_xp(device)
    L, k, r = SIZES[device]
    step = 2 ** 32 + 12345          # a step count beyond 32 bits: both counter words are used
    reference = random_state(np, L, k, r, seed=11, ev_idx=ev_idx)
    want = NumpyPhases().phase1(reference, 2 ** 40 + 7, step, INPUTS)
    for threads, blocks in SHAPES[device]:
        state = random_state(xp, L, k, r, seed=11, ev_idx=ev_idx)
        got = CudaPhases(xp, threads=threads, blocks=blocks).phase1(state, 2 ** 40 + 7, step, INPUTS)
        assert_same(host_state(state), reference)
        got = to_numpy(got)
        assert got[1:].tolist() == want[1:].tolist()                 # firing counts: exact
        assert got[0] == pytest.approx(want[0], rel=1e-12)           # sum of potentials: order of the sum


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ev_idx, w", [(0, 30), (50, 60), (74, 1)])
def test_phase2_kernel_equals_its_numpy_twin(device, ev_idx, w):
    xp = device_xp(device)
    L, k, r = SIZES[device]
    rng = np.random.default_rng(w)
    table = np.zeros((2, 60), np.float32)
    table[0, :w] = rng.uniform(0, 1, w)
    table[1, :w] = -rng.uniform(0, 1, w)
    reference = random_state(np, L, k, r, seed=12, ev_idx=ev_idx)
    NumpyPhases().phase2(reference, table, w)
    for threads, blocks in SHAPES[device]:
        state = random_state(xp, L, k, r, seed=12, ev_idx=ev_idx)
        CudaPhases(xp, threads=threads, blocks=blocks).phase2(state, table, w)
        assert_same(host_state(state), reference)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("L, k, r", [(16, 10, 4), (12, 7, 6), (10, 3, 1)])
def test_connect_kernel_equals_its_numpy_twin(device, L, k, r):
    from latticelab.sim.gpu.kernels import get_kernel
    from latticelab.sim.models.cortex.engines import grid_for
    xp = device_xp(device)
    seed = 2 ** 33 + 5
    name = "cortex_connect<256>"
    kernel = get_kernel(xp, KERNEL_DIR / "connect.cu", name, (name,))
    got = xp.zeros((k, L * L), xp.int32)
    lo, hi = split64(seed)
    kernel((grid_for(k * L * L),), (256,), (got, np.int32(L), np.int32(k), np.int32(r), np.float64(r / 3.0),
                                            np.uint32(lo), np.uint32(hi), np.int32(0),
                                        np.int32(L * L), np.int32(0)))
    np.testing.assert_array_equal(to_numpy(got), connect(seed, L, k, r))


@pytest.mark.parametrize("device", DEVICES)
def test_a_run_on_the_kernels_equals_the_numpy_run(device):
    """Whole steps (both phases, the ring, the observables), with live changes and a boost mid-run."""
    xp = device_xp(device)
    values = {"L": 16, "k": 10, "r": 4} if device == "emulator" else {"L": 128, "k": 100, "r": 16}
    params = CortexParams.create(seed=21, I_e=4.0, **values)
    numpy_model = CortexModel(params, backend="numpy")
    kernel_model = CortexModel(params, backend="numpy", phases=CudaPhases(xp)) if device == "emulator" \
        else CortexModel(params, backend="cuda")
    for m in (numpy_model, kernel_model):
        m.step(30)
        m.update(boost_fraction=0.2, lambda_tau_e=3.0, A_i=-0.8)
        m.step(10)
        m.update(boost_fraction=0.0)
        m.step(20)
    assert_same(host_state(kernel_model.state), host_state(numpy_model.state))
    a, b = numpy_model.trace(since=0), kernel_model.trace(since=0)
    assert np.array_equal(a[:, [0, 2, 3, 4]], b[:, [0, 2, 3, 4]])
    np.testing.assert_allclose(a[:, 1], b[:, 1], rtol=1e-12)
    assert a[:, 2].max() > 0                     # something fired
