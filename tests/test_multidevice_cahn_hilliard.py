"""One Cahn-Hilliard field split into slabs over several devices (issue 38): the same bits as on one device.

The slab stepper (sim/models/cahn_hilliard/slabs.py) runs the row-blocked RK2 stage kernel on each part's slab
with two halo rows (planes) on each side, filled from the neighbours after each stage -- at a mirror wall with
the mirror images. On the CPU the parts are NumPy slabs of one process, the kernel emulated (the one-device
reference is the same kernel, emulated, on the whole grid); on the 2-GPU machine (marked gpu) the parts are the
GPUs. The field after n steps must be equal bit for bit on 1, 2 and 4 parts.
"""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.cahn_hilliard.finite_difference import FiniteDifferenceStepper
from latticelab.sim.multidevice.exchange import make_exchanger, make_parts
from latticelab.sim.params import ParameterError

from helpers import device_xp

ARGS = (0.01, 1.0, 1.0, 1.0, 1.0, 0.9)        # dt, m, b, u, K, dx


def _one_device(xp, phi0, boundary, steps):
    stepper = FiniteDifferenceStepper(xp, phi0.shape, phi0.dtype, boundary, use_kernel=True)
    phi = xp.asarray(phi0.copy())
    for _ in range(steps):
        phi = stepper.step(phi, *ARGS).copy()
    return to_numpy(phi)


def _split(xp, devices, phi0, boundary, steps):
    from latticelab.sim.models.cahn_hilliard.slabs import SlabFiniteDifference
    parts = make_parts(xp, devices)
    engine = SlabFiniteDifference(parts, make_exchanger(parts), phi0.ndim, phi0.shape[0], phi0.dtype, boundary)
    engine.load(phi0)
    np.testing.assert_array_equal(engine.field(), phi0)
    engine.step(steps, *ARGS)
    engine.synchronize()
    return engine.field()


@pytest.mark.parametrize("dim, L, boundary, dtype", [(2, 40, "periodic", np.float64), (2, 37, "mirror", np.float32),
                                                     (3, 16, "mirror", np.float64), (3, 17, "periodic", np.float32)])
def test_slabs_on_the_cpu_end_in_the_one_device_field(dim, L, boundary, dtype):
    xp = device_xp("emulator")
    phi0 = np.random.default_rng(L).uniform(-0.6, 0.6, (L,) * dim).astype(dtype)
    expected = _one_device(xp, phi0, boundary, 5)
    for devices in ((0,), (0, 1), (0, 1, 2, 3)):
        np.testing.assert_array_equal(_split(xp, devices, phi0, boundary, 5), expected,
                                      err_msg=f"{dim}D L={L} {boundary} {len(devices)} parts")


def test_the_mirror_halos_are_what_makes_the_walls_equal():
    """Filling the wall halos with the neighbours' values (a periodic copy) instead of the mirror images changes
    the cells next to the walls: the test above can fail."""
    xp = device_xp("emulator")
    phi0 = np.random.default_rng(3).uniform(-0.6, 0.6, (32, 32))
    expected = _one_device(xp, phi0, "mirror", 1)
    from latticelab.sim.models.cahn_hilliard.slabs import SlabFiniteDifference
    parts = make_parts(xp, (0, 1))
    engine = SlabFiniteDifference(parts, make_exchanger(parts), 2, 32, phi0.dtype, "mirror")
    engine.boundary = "periodic"        # halos as on a torus; the kernel still mirrors x
    engine.load(phi0)
    engine.step(1, *ARGS)
    got = engine.field()
    assert not np.array_equal(got[[0, -1]], expected[[0, -1]])
    np.testing.assert_array_equal(got[4:-4], expected[4:-4])     # a step reaches 4 rows (2 a stage)


@pytest.fixture
def emulated_model(monkeypatch):
    """CahnHilliardModel on the CPU with several 'devices' (NumPy slabs, the kernel emulated); its one-device
    steps use the NumPy twin, which gives the emulated kernel's bits."""
    import latticelab.sim.backend as backend
    import latticelab.sim.multidevice.devices as devices
    xp = device_xp("emulator")
    monkeypatch.setattr(backend, "select_backend", lambda name="auto": backend.Backend(xp, "numpy", "CPU", "test"))
    monkeypatch.setattr(devices, "resolve_devices", lambda cls, value, b: tuple(value) if value else (0,))
    from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel
    return CahnHilliardModel


@pytest.mark.parametrize("dim, L, boundary", [(2, 32, "periodic"), (3, 16, "mirror")])
def test_a_split_model_steps_and_resumes_as_on_one_device(emulated_model, dim, L, boundary):
    values = dict(dim=dim, L=L, boundary=boundary, dt=0.01, noise=0.1, seed=3)
    one = emulated_model.create(backend="numpy", **values)
    two = emulated_model.create(backend="numpy", devices=(0, 1), **values)
    assert two.devices == (0, 1) and two.xp is np
    for model in (one, two):
        model.step(4)
    np.testing.assert_array_equal(two.phi, to_numpy(one.phi))
    assert two.observables()["mass"] == pytest.approx(one.observables()["mass"], abs=1e-12)
    assert two.time == one.time and two.step_count == one.step_count
    state = two.get_state()
    np.testing.assert_array_equal(state["phi"], to_numpy(one.phi))
    three = emulated_model.from_state(two.params, state, backend="numpy")
    for model in (one, three):
        model.step(2)
    np.testing.assert_array_equal(three.phi, to_numpy(one.phi))


def test_a_split_model_refuses_the_spectral_integrators_and_noise(emulated_model):
    with pytest.raises(ParameterError, match="devices: .*finite differences only; the spectral integrators"):
        emulated_model.create(backend="numpy", devices=(0, 1), dim=2, L=32, integrator="spectral")
    with pytest.raises(ParameterError, match="devices: .*no thermal noise"):
        emulated_model.create(backend="numpy", devices=(0, 1), dim=2, L=32, thermal=0.1)
    model = emulated_model.create(backend="numpy", devices=(0, 1), dim=2, L=32)
    with pytest.raises(ParameterError, match="integrator: .*stay on one device"):
        model.update(integrator="spectral")


# ---- on the 2-GPU machine ----------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dim, L, boundary, dtype", [(2, 1001, "periodic", np.float64), (2, 300, "mirror", np.float32),
                                                     (3, 70, "mirror", np.float64), (3, 64, "periodic", np.float32)])
def test_slabs_on_two_gpus_end_in_the_one_gpu_field(dim, L, boundary, dtype):
    xp = device_xp("cuda")
    if xp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    phi0 = np.random.default_rng(L).uniform(-0.6, 0.6, (L,) * dim).astype(dtype)
    expected = _one_device(xp, phi0, boundary, 20)
    for devices in ((0,), (0, 1)):
        np.testing.assert_array_equal(_split(xp, devices, phi0, boundary, 20), expected,
                                      err_msg=f"{dim}D L={L} {boundary} {devices}")


@pytest.mark.gpu
def test_a_model_split_over_two_gpus_follows_the_one_gpu_field():
    xp = device_xp("cuda")
    if xp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel
    values = dict(dim=2, L=512, boundary="mirror", dt=0.02, noise=0.1, seed=3)
    one = CahnHilliardModel.create(backend="cuda", **values)
    two = CahnHilliardModel.create(backend="cuda", devices="0,1", **values)
    for model in (one, two):
        model.step(30)
    np.testing.assert_array_equal(two.phi, to_numpy(one.phi))
