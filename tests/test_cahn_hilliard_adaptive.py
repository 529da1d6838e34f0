"""The adaptive step control of the Cahn-Hilliard model (sim/models/cahn_hilliard/model.py) and its fused
reduction kernel (kernels/ch_change.cu).

- the kernel's three result words (keys of max |new - old|, max old, max -old) equal its NumPy twin's, bit for
  bit, and decode to NumPy's own max |new - old|, max and min: float32 and float64, negative and mixed-sign
  fields, sizes that are not multiples of the block (1 cell up to several blocks), grids capped so that threads
  stride over several cells, NaN and infinities; the two result slots are zeroed in turn (CPU emulator; and on
  a GPU, marked gpu);
- the keys order the numbers as the numbers are ordered;
- an adaptive run through the fused kernel (the emulator's, in a NumPy model) takes the same dt sequence and
  ends on the same field, bit for bit, as the array reductions; on a GPU the same against a NumPy model;
- ``step(n)`` still refuses a diverged field after adaptive steps (its check now skipped only when the
  statistics showed a finite field).
"""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.cahn_hilliard.change_kernel import CHANGE_THREADS
from latticelab.sim.models.cahn_hilliard.model import (CahnHilliardModel, FusedChange, change_keys_twin, change_launch,
                                                       change_twin, decode_keys)
from latticelab.sim.params import ParameterError

from helpers import DEVICES, device_xp

# (cells, largest grid): one cell, less than a warp, partial warps and blocks, exactly one block, several
# blocks, and grids capped below the cells' blocks (each thread then strides over several cells)
SIZES = {"emulator": [(1, 1024), (7, 1024), (33, 1024), (255, 1024), (256, 1024), (257, 1024), (1000, 1024),
                      (2049, 1024), (3001, 2), (1500, 1)],
         "cuda": [(1, 1024), (33, 1024), (257, 1024), (40000, 1024), (1_000_003, 1024), (1_000_003, 7),
                  (4096 ** 2, 1024)]}


def fields(rng, n: int, dtype, kind: str):
    if kind == "negative":        # all below zero: max old and min old both negative
        old = rng.uniform(-3.0, -0.5, n)
    elif kind == "positive":
        old = rng.uniform(0.25, 2.0, n)
    else:
        old = rng.uniform(-1.2, 1.2, n)
    new = old + rng.normal(0.0, 1e-3, n) * rng.uniform(0, 1, n) ** 4
    old, new = old.astype(dtype), new.astype(dtype)
    if kind == "edges":           # all three extremes at the first and the last cell
        old[0], old[-1] = dtype(-1.5), dtype(1.5)
        new[-1] = old[-1] - dtype(0.3)
    elif n > 3:                   # the largest change somewhere in the middle
        where = rng.integers(1, n - 1)
        new[where] = old[where] - dtype(0.25)
    return new, old


def expected(new, old):
    return np.abs(new - old).max(), old.max(), old.min()


def check(reducer, new, old, where: str):
    xp = reducer.xp
    words = np.array(reducer.keys(xp.asarray(new), xp.asarray(old)), copy=True)
    twin = change_keys_twin(new, old)
    np.testing.assert_array_equal(words, twin, err_msg=where)
    got = decode_keys(words, new.dtype)
    want = expected(new, old)
    for g, w in zip(got, want):
        assert g.dtype == new.dtype, where
        np.testing.assert_array_equal(g, w, err_msg=where)       # bit for bit (NaN matches NaN)
    # the model's array path, the twin of the values
    for g, w in zip(change_twin(np, new, old), want):
        np.testing.assert_array_equal(g, w, err_msg=where)


@pytest.mark.parametrize("device", DEVICES)
def test_the_fused_change_kernel_equals_its_numpy_twin(device):
    xp = device_xp(device)
    rng = np.random.default_rng(21)
    reducers = {}
    for (n, max_blocks), dtype, kind in ((case, d, k) for case in SIZES[device] for d in (np.float32, np.float64)
                                         for k in ("mixed", "negative", "positive", "edges")):
        if max_blocks not in reducers:
            reducers[max_blocks] = FusedChange(xp, max_blocks=max_blocks)
        new, old = fields(rng, n, dtype, kind)
        check(reducers[max_blocks], new, old, f"n={n} blocks<={max_blocks} {dtype.__name__} {kind}")


@pytest.mark.parametrize("device", DEVICES)
def test_the_fused_change_kernel_propagates_nan_and_infinities(device):
    xp = device_xp(device)
    reducer = FusedChange(xp)
    for dtype in (np.float32, np.float64):
        base = np.linspace(-0.9, 0.8, 300).astype(dtype)
        cases = {}
        new = base.copy()
        new[117] = np.nan
        cases["nan in new"] = (new, base)
        new = base.copy()
        new[5] = -np.inf
        cases["-inf in new"] = (new, base)
        old = base.copy()
        old[290] = -np.nan                  # sign bit set: below -inf as a key, found through max(-old)
        cases["-nan in old"] = (base + dtype(0.01), old)
        old = base.copy()
        old[3] = np.inf
        cases["inf in old"] = (base, old)
        old = base.copy()
        old[:] = dtype(0.0)
        old[200] = -dtype(0.0)
        cases["zeros"] = (old.copy(), old)
        for name, (new, old) in cases.items():
            words = np.array(reducer.keys(xp.asarray(new), xp.asarray(old)), copy=True)
            np.testing.assert_array_equal(words, change_keys_twin(new, old), err_msg=f"{name} {dtype.__name__}")
            with np.errstate(invalid="ignore"):
                want = expected(new, old)
            for g, w in zip(decode_keys(words, dtype), want):
                np.testing.assert_array_equal(g, w, err_msg=f"{name} {dtype.__name__}")


def test_the_result_slots_are_used_in_turn_and_each_launch_zeroes_the_other():
    from latticelab.sim.gpu.emulate import compiler, emulated_xp
    if compiler() is None:
        pytest.skip("no C++ compiler (g++) for the CUDA emulator")
    reducer = FusedChange(emulated_xp())
    big, small = np.full(40, 5.0), np.full(40, -7.0)
    reducer.keys(big + 1.0, big)                       # slot 0 holds large keys
    assert np.all(reducer.words[:3] != 0) and np.all(reducer.words[3:] == 0)
    reducer.keys(small + 0.5, small)                   # slot 1; slot 0 zeroed by this launch
    assert np.all(reducer.words[:3] == 0)
    got = decode_keys(reducer.host, np.float64)        # not the earlier, larger keys
    assert got == (0.5, -7.0, -7.0)
    got = reducer(small + 0.25, small)                 # slot 0 again: it was zeroed, so the small values win
    assert got == (0.25, -7.0, -7.0)


def test_keys_order_as_the_numbers_do():
    values = np.array([-np.inf, -1e300, -2.5, -1e-310, -0.0, 0.0, 1e-310, 3.0, 1e300, np.inf, np.nan])
    # max old of a one-cell field is the key of that value: the twin's mapping, value by value
    mapped = [int(change_keys_twin(np.zeros(1), np.array([v]))[1]) for v in values]
    assert all(a < b for a, b in zip(mapped, mapped[1:]))          # increasing, NaN last
    assert mapped[0] > 0                                            # zeroed words are below every key
    assert all(decode_keys([0, k, 0], np.float64)[1] == v for k, v in zip(mapped[:-1], values[:-1]))
    assert np.isnan(decode_keys([0, mapped[-1], 0], np.float64)[1])
    assert np.signbit(decode_keys([0, mapped[4], 0], np.float64)[1])      # -0 stays -0
    assert change_launch(1) == ((1,), (CHANGE_THREADS,))
    assert change_launch(10 ** 9) == ((1024,), (CHANGE_THREADS,))


@pytest.mark.parametrize("integrator", ["spectral", "spectral-bdf2"])
@pytest.mark.parametrize("boundary", ["periodic", "mirror"])
@pytest.mark.parametrize("precision", ["single", "double"])
def test_an_adaptive_run_through_the_fused_kernel_equals_the_array_reductions(integrator, boundary, precision):
    """The emulator's kernel in a NumPy model: the same dt sequence and the same field, bit for bit."""
    from latticelab.sim.gpu.emulate import compiler, emulated_xp
    if compiler() is None:
        pytest.skip("no C++ compiler (g++) for the CUDA emulator")
    values = dict(L=20, integrator=integrator, boundary=boundary, precision=precision, time_step="adaptive",
                  dt=0.02, dt_max=2.0, max_change=0.05, noise=0.2, seed=4)
    plain = CahnHilliardModel.create(backend="numpy", **values)
    fused = CahnHilliardModel.create(backend="numpy", **values)
    fused._change = FusedChange(emulated_xp())
    plain_dts, fused_dts = [], []
    for _ in range(30):
        plain.step(1)
        fused.step(1)
        plain_dts.append(plain.dt_current)
        fused_dts.append(fused.dt_current)
    assert fused_dts == plain_dts
    assert max(plain_dts) > values["dt"] and len(set(plain_dts)) > 5          # the step really adapted
    np.testing.assert_array_equal(fused.phi, plain.phi)
    fused.advance_to(fused.time + 0.37)
    plain.advance_to(plain.time + 0.37)
    assert fused.time == plain.time and fused.dt_current == plain.dt_current
    np.testing.assert_array_equal(fused.phi, plain.phi)
    assert fused.observables() == plain.observables()


def test_step_still_refuses_a_diverged_field_after_adaptive_steps():
    model = CahnHilliardModel.create(backend="numpy", L=16, integrator="spectral", time_step="adaptive",
                                     dt=0.05, noise=0.2)
    model.step(3)
    assert model._known_finite
    phi = model.phi.copy()
    phi[3, 4] = np.nan
    model.phi = phi
    with pytest.raises(ParameterError, match="diverged"):
        model.step(1)
    assert not model._known_finite


@pytest.mark.gpu
@pytest.mark.parametrize("integrator", ["spectral", "spectral-bdf2"])
@pytest.mark.parametrize("precision", ["single", "double"])
def test_gpu_adaptive_runs_take_the_numpy_dt_sequence(integrator, precision):
    """The fused kernel's maxima are exact, so the dt sequence is NumPy's while the fields agree closely (the
    transforms differ in round-off); the step size decided on the device (the default there), the fused kernel
    read by the host, and the earlier CuPy-array path all give the same sequence."""
    values = dict(L=64, integrator=integrator, precision=precision, time_step="adaptive", dt=0.02, dt_max=2.0,
                  max_change=0.05, noise=0.2, seed=4)
    cpu = CahnHilliardModel.create(backend="numpy", **values)
    gpu = CahnHilliardModel.create(backend="cuda", **values)
    host = CahnHilliardModel.create(backend="cuda", **values)
    host.device_control = False
    arrays = CahnHilliardModel.create(backend="cuda", **values)
    arrays.device_control = False
    arrays.fused_change = False
    cpu_dts, gpu_dts, host_dts, array_dts = [], [], [], []
    for steps in (1, 1, 3, 20):
        for model, dts in ((cpu, cpu_dts), (gpu, gpu_dts), (host, host_dts), (arrays, array_dts)):
            model.step(steps)
            dts.append(model.dt_current)
    assert gpu._controlled_on_device() and not host._controlled_on_device()
    assert isinstance(host._change, FusedChange) and arrays._change is None
    assert gpu_dts == host_dts == array_dts
    assert gpu.time == host.time
    if precision == "double":
        np.testing.assert_allclose(gpu_dts, cpu_dts, rtol=1e-9)
    np.testing.assert_allclose(to_numpy(gpu.phi), cpu.phi, atol=1e-9 if precision == "double" else 1e-3)
