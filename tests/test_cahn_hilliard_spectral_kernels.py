"""The CUDA kernels of the direct spectral path (sim/models/cahn_hilliard/kernels/ch_spectral.cu) against their
NumPy twins, on the CPU emulator (and on a GPU, marked gpu), and the adaptive steps decided on the device.

- k^2 from the per-axis tables equals the k^2 grid of ``wavenumbers_squared`` bit for bit (the twin
  ``k2_from_tables``; 2D and 3D, even and odd sides, float32 and float64);
- the nonlinear pass, the first-order update and the SBDF2 update (with and without noise) equal the NumPy
  formulas, on half spectra whose rows and columns end mid-block (32 x 8 threads);
- the nonlinear pass with the statistics writes the same N and the same three keys as ch_change's twin, also in
  place (``prev`` the output buffer), and zeroes the other slot;
- a run of adaptive steps decided on the device (the emulator's kernels, NumPy transforms) gives the same fields,
  clock, step sizes and history, bit for bit, as the same kernels with the control on the host, for both
  integrators, in 2D and 3D, with step sizes that grow, shrink and hit their limits, over several chunks, and
  through ``advance_to`` (whose last step lands on the end time);
- on a GPU, a model with the control on the device follows one with the control on the host (marked gpu).
"""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.cahn_hilliard import model as ch_model
from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel, change_keys_twin
from latticelab.sim.models.cahn_hilliard.spectral import (SpectralKernels, axis_tables, k2_from_tables,
                                                          update_launch, wavenumbers_squared)

from helpers import DEVICES, device_xp

SHAPES = {"emulator": [(6, 10), (9, 70), (5, 4, 6), (3, 7, 9)], "cuda": [(6, 10), (300, 202), (5, 4, 6), (40, 33, 70)]}


@pytest.mark.parametrize("shape", [(8, 8), (9, 70), (64, 63), (5, 4, 6), (3, 7, 9), (16, 16, 16)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_k2_from_the_axis_tables_equals_the_k2_grid(shape, dtype):
    for dx in (1.0, 0.7):
        want = wavenumbers_squared(shape, dx, "periodic").astype(dtype)
        np.testing.assert_array_equal(k2_from_tables(shape, axis_tables(shape, dx), dtype), want)


def test_the_update_launch_covers_the_half_spectrum():
    assert update_launch((256, 256, 256)) == ((5, 8192, 1), (32, 8, 1))
    assert update_launch((200, 200)) == ((4, 25, 1), (32, 8, 1))


def _complex(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.result_type(dtype, np.complex64))


@pytest.mark.parametrize("device", DEVICES)
def test_the_spectral_kernels_equal_their_numpy_twins(device):
    xp = device_xp(device)
    rng = np.random.default_rng(7)
    dtm, stab, grad, c, g, e0, e1 = 0.37, 0.81, 1.3, 1.45, 0.61, 2.1, 1.1
    for shape, dtype in ((s, d) for s in SHAPES[device] for d in (np.float32, np.float64)):
        r = np.dtype(dtype).type
        kernels = SpectralKernels(xp, shape, dtype, 0.9)
        tol = dict(rtol=2e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-13)
        where = f"{shape} {np.dtype(dtype).name}"
        phi = rng.uniform(-1.2, 1.2, shape).astype(dtype)
        out = xp.asarray(np.full(shape, np.nan, dtype))
        kernels.nonlinear(xp.asarray(phi), out, 1.1, 0.7)
        np.testing.assert_allclose(to_numpy(out), r(1.1) * phi * phi * phi - r(0.7) * phi, err_msg=where, **tol)

        half = (*shape[:-1], shape[-1] // 2 + 1)
        k2 = wavenumbers_squared(shape, 0.9, "periodic").astype(dtype)
        ph, pm, nh, nm, eta = (_complex(rng, half, dtype) for _ in range(5))
        inv_n = 1.0 / np.prod(shape)
        a = r(dtm) * k2
        first = (ph - a * nh) / (r(1) + a * (r(stab) + r(grad) * k2))
        d = r(stab) + r(grad) * k2
        rise = r(g) * (ph - pm) - a * (d * ph + (r(e0) * nh - r(e1) * nm))
        cases = {"first-order": (first, lambda o, s: kernels.update(*dev(ph, nh), o, s, dtm, stab, grad, inv_n)),
                 "sbdf2": (ph + rise / (r(c) + a * d),
                           lambda o, s: kernels.sbdf2(*dev(ph, pm, nh, nm), None, o, s, dtm, stab, grad, c, g, e0, e1,
                                                      inv_n)),
                 "sbdf2+noise": (ph + (rise + eta) / (r(c) + a * d),
                                 lambda o, s: kernels.sbdf2(*dev(ph, pm, nh, nm, eta), o, s, dtm, stab, grad, c, g, e0,
                                                            e1, inv_n))}

        def dev(*arrays):
            return tuple(xp.asarray(x) for x in arrays)

        for name, (want, run) in cases.items():
            o, s = (xp.asarray(np.full(half, np.nan, want.dtype)) for _ in range(2))
            run(o, s)
            np.testing.assert_allclose(to_numpy(o), want, err_msg=f"{name} {where}", **tol)
            np.testing.assert_allclose(to_numpy(s), want * r(inv_n), err_msg=f"{name} {where}", **tol)


@pytest.mark.parametrize("device", DEVICES)
def test_the_nonlinear_pass_reduces_the_statistics_of_ch_change(device):
    xp = device_xp(device)
    rng = np.random.default_rng(3)
    for shape, dtype in ((s, d) for s in SHAPES[device] for d in (np.float32, np.float64)):
        kernels = SpectralKernels(xp, shape, dtype, 1.0)
        r = np.dtype(dtype).type
        prev = rng.uniform(-0.9, 0.4, shape).astype(dtype)
        phi = (prev + rng.normal(0, 1e-2, shape)).astype(dtype)
        want_n = r(1.1) * phi * phi * phi - r(0.7) * phi
        for in_place in (False, True):
            words = xp.asarray(np.array([0, 0, 0, 5, 6, 7], np.uint64))
            result, clear = words[:3], words[3:]
            prev_d = xp.asarray(prev.copy())
            out = prev_d if in_place else xp.asarray(np.full(shape, np.nan, dtype))
            kernels.nonlinear_change(xp.asarray(phi), prev_d, out, 1.1, 0.7, result, clear)
            where = f"{shape} {np.dtype(dtype).name} in place {in_place}"
            np.testing.assert_array_equal(to_numpy(words)[:3], change_keys_twin(phi, prev), err_msg=where)
            np.testing.assert_array_equal(to_numpy(words)[3:], 0, err_msg=where)
            tol = 2e-6 if dtype == np.float32 else 1e-14
            np.testing.assert_allclose(to_numpy(out), want_n, rtol=tol, atol=tol, err_msg=where)


# ---- adaptive steps decided on the device ------------------------------------------------------------------
def _install(model):
    """The direct path on the CPU: NumPy transforms (the inverse unnormalised and destroying its input, as cuFFT's
    C2R) and the emulator's kernels."""
    stepper = model._spectral_stepper()
    shape = stepper.shape

    class Direct:
        def forward(self, x, out):
            out[...] = np.fft.rfftn(x)
            return out

        def inverse(self, x, out):
            out[...] = np.fft.irfftn(x, s=shape, axes=range(len(shape))) * np.prod(shape)
            x[...] = np.nan
            return out

    stepper.direct, stepper.gpu = True, True
    stepper.fft = __import__("scipy.fft", fromlist=["fft"])
    stepper._direct_fft = Direct()
    stepper.spectral_kernels = SpectralKernels(device_xp("emulator"), shape, stepper.dtype, stepper.dx)
    return model


def _same(a, b, where=""):
    np.testing.assert_array_equal(to_numpy(a.phi), to_numpy(b.phi), err_msg=where)
    np.testing.assert_array_equal(to_numpy(a.phi_hat), to_numpy(b.phi_hat), err_msg=where)
    assert (a.time, a.dt_current, a.step_count, a._last_dt) == (b.time, b.dt_current, b.step_count, b._last_dt), where
    if a._history is None or b._history is None:
        assert a._history is None and b._history is None, where
    else:
        assert a._history.dt == b._history.dt, where
        np.testing.assert_array_equal(to_numpy(a._history.n_hat), to_numpy(b._history.n_hat), err_msg=where)
    assert a._known_finite == b._known_finite, where


CONTROL_CASES = [  # dim, L, precision, dt, dt_max, max_change
    (2, 16, "double", 0.02, 3.0, 0.05),        # grows from dt, then held near max_change
    (2, 12, "single", 0.05, 0.2, 0.2),         # reaches dt_max
    (3, 6, "double", 0.4, 5.0, 0.01),          # shrinks to dt
]


@pytest.mark.parametrize("integrator", ["spectral", "spectral-bdf2"])
@pytest.mark.parametrize("dim, L, precision, dt, dt_max, max_change", CONTROL_CASES)
def test_steps_decided_on_the_device_equal_the_host_control(monkeypatch, integrator, dim, L, precision, dt, dt_max,
                                                            max_change):
    monkeypatch.setattr(ch_model, "CONTROL_CHUNK", 7)                  # several chunks per call
    values = dict(dim=dim, L=L, integrator=integrator, precision=precision, time_step="adaptive", dt=dt,
                  dt_max=dt_max, max_change=max_change, noise=0.3, seed=5)
    host, device = (_install(CahnHilliardModel.create(**values)) for _ in range(2))
    host.device_control = False
    assert device._controlled_on_device() and not host._controlled_on_device()
    dts = set()
    for n in (1, 9, 15):
        host.step(n)
        device.step(n)
        _same(host, device, f"after step({n})")
        dts.add(device.dt_current)
    if max_change == 0.05:                                            # the growing case changes dt
        assert len(dts) > 1
    until = device.time + 25 * device.dt_current + 0.123
    host.advance_to(until)
    device.advance_to(until)
    _same(host, device, "after advance_to")
    assert device.time == until
    device.step(3)                                                    # the restart after the landing step
    host.step(3)
    _same(host, device, "after the landing step")


def test_noise_or_fixed_steps_keep_the_host_control():
    noisy = _install(CahnHilliardModel.create(L=8, integrator="spectral-bdf2", time_step="adaptive", thermal=0.01))
    fixed = _install(CahnHilliardModel.create(L=8, integrator="spectral-bdf2"))
    assert not noisy._controlled_on_device() and not fixed._controlled_on_device()


@pytest.mark.gpu
@pytest.mark.parametrize("integrator", ["spectral", "spectral-bdf2"])
def test_on_a_gpu_the_device_control_follows_the_host_control(integrator):
    values = dict(preset="pfhub-1a", integrator=integrator)
    host, device = CahnHilliardModel(backend="cuda", **values), CahnHilliardModel(backend="cuda", **values)
    host.device_control = False
    assert device._controlled_on_device()
    for model in (host, device):
        model.step(300)
        model.advance_to(model.time + 57.5)
    np.testing.assert_array_equal(to_numpy(device.phi), to_numpy(host.phi))
    assert (device.time, device.dt_current, device.step_count) == (host.time, host.dt_current, host.step_count)
