"""The second-order semi-implicit spectral step of the Cahn-Hilliard model (integrator "spectral-bdf2",
sim/models/cahn_hilliard/spectral.py): SBDF2 with the stabiliser S (phi' - phi*), variable-step coefficients.

- its observed temporal order is 2 (error ratio between dt and dt/2 in [3.2, 5]) where the first-order step's is 1,
  for fixed steps and for steps that change length every step (the variable-step coefficients);
- mass is conserved to round-off; the free energy does not increase at moderate steps (fixed and adaptive);
- a small mode grows at the rate of linear stability theory within 2%;
- its first step, and a step after dt jumps by more than MAX_RATIO, is the first-order step;
- save / resume is exact (the previous step's phi_hat and N_hat are part of the state); a state without them
  (written before this integrator existed, or after a restart) resumes with a first-order step;
- the CuPy path with cuFFT plans called directly follows the NumPy path (GPU, marked gpu), and its buffer
  handling (which array each pass writes) follows it on the CPU with NumPy transforms and the CPU emulator's
  kernels (kernels/ch_spectral.cu; their own tests are in test_cahn_hilliard_spectral_kernels.py).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel
from latticelab.sim.models.cahn_hilliard.spectral import MAX_RATIO, SpectralStepper, stabiliser
from latticelab.sim.state import load_state, save_state

from helpers import BACKENDS

BOUNDARIES = ("periodic", "mirror")
SPECTRAL = ("spectral", "spectral-bdf2")


def make(backend="numpy", **values) -> CahnHilliardModel:
    return CahnHilliardModel.create(backend=backend, **values)


def smooth_field(L: int, seed: int = 3) -> np.ndarray:
    x = np.arange(L)
    rng = np.random.default_rng(seed)
    field = np.zeros((L, L))
    for _ in range(12):
        k = rng.integers(-3, 4, 2)
        field += 0.05 * np.cos(2 * np.pi * (k[0] * x[:, None] + k[1] * x[None, :]) / L + rng.uniform(0, 6.3))
    return field - field.mean()


def run_curve(integrator: str, steps: list[float], boundary: str = "periodic", samples: int = 4):
    """(final field, free energy at ``samples`` equal parts of the step list) from the smooth field on 32^2."""
    model = make(L=32, boundary=boundary, integrator=integrator, dt=min(steps), noise=0.0)
    model.set_field(smooth_field(32))
    energies = []
    per = len(steps) // samples
    for i, dt in enumerate(steps):
        model._advance(dt, adapt=False)
        if (i + 1) % per == 0:
            energies.append(model.observables()["free_energy"])
    return to_numpy(model.phi).copy(), np.array(energies)


def errors(integrator, steps, reference, boundary="periodic"):
    phi, energy = run_curve(integrator, steps, boundary)
    ref_phi, ref_energy = reference
    return (float(np.linalg.norm(phi - ref_phi) / np.linalg.norm(ref_phi)),
            float(np.abs(energy - ref_energy).max() / np.ptp(ref_energy)))


# ---- order of convergence --------------------------------------------------------------------------------
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_the_second_order_step_converges_at_order_two_and_the_first_order_step_at_order_one(boundary):
    T = 16.0
    reference = run_curve("spectral-bdf2", [T / 6400] * 6400, boundary)
    ratios = {}
    for integrator in SPECTRAL:
        coarse = errors(integrator, [T / 160] * 160, reference, boundary)
        fine = errors(integrator, [T / 320] * 320, reference, boundary)
        ratios[integrator] = (coarse[0] / fine[0], coarse[1] / fine[1])
    assert 3.2 < ratios["spectral-bdf2"][0] < 5, ratios           # field error: second order
    assert 3.2 < ratios["spectral-bdf2"][1] < 8, ratios           # free-energy curve: at least second order
    assert 1.6 < ratios["spectral"][0] < 2.4, ratios              # the first-order step, for contrast
    assert 1.6 < ratios["spectral"][1] < 2.4, ratios


def test_variable_steps_keep_second_order():
    """Steps alternating between h and 1.6 h (ratios 1.6 and 0.625): the variable-step coefficients keep the
    order 2; the constant-step formula (w = 1) would not even be consistent."""
    T = 16.0
    reference = run_curve("spectral-bdf2", [T / 6400] * 6400)

    def pattern(n):
        h = T / (1.3 * n)
        return [h, 1.6 * h] * (n // 2)

    coarse, fine = errors("spectral-bdf2", pattern(160), reference), errors("spectral-bdf2", pattern(320), reference)
    assert 3.2 < coarse[0] / fine[0] < 5, (coarse, fine)
    assert coarse[0] < 2e-3


def test_the_first_step_and_a_large_jump_of_dt_are_first_order_steps():
    shape = (16, 16)
    stepper = SpectralStepper(np, shape, np.float64, "periodic", 1.0, gpu=False)
    phi = 0.1 * np.random.default_rng(1).standard_normal(shape)
    hat = stepper.forward(phi)
    S = stabiliser(1.0, 1.0)
    args = (1.0, 1.0, 1.0, 1.0, S)
    one, one_hat, history = stepper.step_bdf2(phi, hat, None, 0.1, *args)
    first, first_hat = stepper.step(phi, hat, 0.1, *args)
    np.testing.assert_array_equal(one, first)
    assert history.dt == 0.1 and history.phi_hat is hat
    jump = 0.1 * MAX_RATIO * 1.01
    two, _, _ = stepper.step_bdf2(one, one_hat, history, jump, *args)
    np.testing.assert_array_equal(two, stepper.step(one, one_hat, jump, *args)[0])
    within = stepper.step_bdf2(one, one_hat, history, 0.1 * MAX_RATIO, *args)[0]
    assert np.abs(within - two).max() > 1e-6                    # a real second-order step there


# ---- conservation and dissipation ------------------------------------------------------------------------
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_mass_is_conserved_to_round_off(boundary):
    model = make(L=16, integrator="spectral-bdf2", boundary=boundary, dt=0.5, phi0=-0.3, noise=0.2, thermal=0.1)
    mass0 = model.observables()["mass"]
    assert mass0 == pytest.approx(-0.3 * 16 ** 2, rel=1e-12)
    model.step(5_000)
    assert abs(model.observables()["mass"] - mass0) < 1e-12 * model.phi.size
    model3 = make(dim=3, L=8, integrator="spectral-bdf2", boundary=boundary, time_step="adaptive", dt=0.01,
                  phi0=0.2, noise=0.3, thermal=0.05)
    mass0 = model3.observables()["mass"]
    model3.step(300)
    assert abs(model3.observables()["mass"] - mass0) < 1e-12 * model3.phi.size


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("dt, time_step", [(0.02, "fixed"), (0.5, "fixed"), (0.05, "adaptive")])
def test_free_energy_never_increases_at_moderate_steps(boundary, dt, time_step):
    model = make(L=32, boundary=boundary, integrator="spectral-bdf2", dt=dt, time_step=time_step, phi0=0.1,
                 noise=0.1)
    energies = [model.observables()["free_energy"]]
    for _ in range(300):
        model.step(1)
        energies.append(model.observables()["free_energy"])
    assert np.diff(energies).max() <= 1e-12 * abs(energies[0])
    assert energies[-1] < energies[0] - 1.0


# ---- linear stability theory -----------------------------------------------------------------------------
GROWTH_CASES = [  # dim, L, dx, boundary, mode numbers, phi0
    (2, 32, 1.0, "periodic", (1, 2), 0.0),
    (2, 32, 1.0, "periodic", (1, 2), 0.7),
    (2, 32, 0.8, "mirror", (0, 3), 0.2),
    (3, 12, 1.0, "periodic", (1, 0, 1), 0.0),
]


@pytest.mark.parametrize("dim, L, dx, boundary, numbers, phi0", GROWTH_CASES)
def test_a_small_mode_grows_at_the_rate_of_linear_stability_theory(dim, L, dx, boundary, numbers, phi0):
    m, b, u, K, dt, T = 1.3, 1.0, 1.2, 1.1, 0.005, 8.0
    model = make(dim=dim, L=L, dx=dx, boundary=boundary, integrator="spectral-bdf2", m=m, b=b, u=u, K=K, dt=dt,
                 noise=0.0, phi0=phi0)
    field = np.ones(model.shape)
    k2 = 0.0
    for axis, (n, size) in enumerate(zip(numbers, model.shape)):
        i = np.arange(size).reshape([-1 if a == axis else 1 for a in range(dim)])
        k = (2 * np.pi * n if boundary == "periodic" else np.pi * n) / (size * dx)
        field = field * (np.cos(k * i * dx) if boundary == "periodic" else np.cos(k * (i + 0.5) * dx))
        k2 += k * k
    amplitude = 1e-7
    model.set_field(phi0 + amplitude * field)
    model.advance_to(T)
    measured = float(((to_numpy(model.phi) - phi0) * field).sum() / (field * field).sum())
    rate = math.log(measured / amplitude) / T
    omega = -m * k2 * (-b + 3 * u * phi0 ** 2 + K * k2)
    assert rate == pytest.approx(omega, rel=0.02), (rate, omega)


# ---- save / resume ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_adaptive_noisy_runs_resume_exactly(backend, boundary, tmp_path):
    values = dict(L=24, integrator="spectral-bdf2", boundary=boundary, time_step="adaptive", dt=0.05,
                  thermal=1e-4, max_change=0.1, seed=9)
    straight = make(backend, **values)
    straight.step(140)
    first = make(backend, **values)
    first.step(117)
    path = save_state(tmp_path / "state.npz", first)
    resumed = load_state(path, backend=backend)
    assert resumed._history is not None and resumed._history.dt == first._history.dt
    resumed.step(23)
    np.testing.assert_array_equal(to_numpy(resumed.phi), to_numpy(straight.phi))
    assert resumed.time == straight.time and resumed.observables() == straight.observables()


def test_a_state_without_history_resumes_with_a_first_order_step(tmp_path):
    values = dict(L=16, integrator="spectral-bdf2", dt=0.1, noise=0.1, seed=4)
    model = make(**values)
    model.step(10)
    state = model.get_state()
    for key in ("prev_phi_hat", "prev_n_hat", "prev_dt"):          # as a file from before the second-order step
        del state[key]
    resumed = CahnHilliardModel.from_state(model.params, state)
    assert resumed._history is None
    resumed.step(1)
    p = model.params
    first, _ = model._spectral_stepper().step(model.phi, model.phi_hat, p.dt, p.m, p.b, p.u, p.K,
                                              stabiliser(p.b, p.u))
    np.testing.assert_array_equal(resumed.phi, first)
    bad = model.get_state()
    bad["prev_n_hat"] = bad["prev_n_hat"][:3]
    from latticelab.sim.params import ParameterError
    with pytest.raises(ParameterError, match="prev_n_hat"):
        CahnHilliardModel.from_state(model.params, bad)


def test_changing_the_equation_restarts_at_first_order():
    model = make(L=16, integrator="spectral-bdf2", dt=0.1, noise=0.1)
    model.step(3)
    assert model._history is not None
    model.update(b=1.2)
    assert model._history is None
    model.step(1)
    model.update(dt=0.15)                                          # a change of dt alone keeps it (variable step)
    assert model._history is not None
    model.update(integrator="spectral")
    assert model._history is None and model.phi_hat is not None


# ---- the CuPy path ---------------------------------------------------------------------------------------
class NumpyStandIns:
    """The direct path on the CPU: cuFFT's plans replaced by NumPy transforms (the inverse unnormalised and
    destroying its input, as C2R does) and the CUDA kernels of ch_spectral.cu run on the CPU emulator, so the
    stepper's buffer handling (what each pass writes where, the 1/n scaling, which arrays survive) is checked."""

    @staticmethod
    def install(stepper: SpectralStepper, monkeypatch=None):
        from latticelab.sim.models.cahn_hilliard.spectral import SpectralKernels
        from helpers import device_xp
        shape = stepper.shape

        class Direct:
            def forward(self, x, out):
                out[...] = np.fft.rfftn(x)
                return out

            def inverse(self, x, out):
                out[...] = np.fft.irfftn(x, s=shape, axes=range(len(shape))) * np.prod(shape)   # unnormalised
                x[...] = np.nan                                             # C2R may destroy its input
                return out

        stepper.direct, stepper.gpu = True, True
        stepper.fft = __import__("scipy.fft", fromlist=["fft"])
        stepper._direct_fft = Direct()
        stepper.spectral_kernels = SpectralKernels(device_xp("emulator"), shape, stepper.dtype, stepper.dx)


@pytest.mark.parametrize("integrator", SPECTRAL)
def test_the_direct_path_buffers_follow_the_numpy_path(integrator, monkeypatch):
    values = dict(L=16, integrator=integrator, dt=0.3, noise=0.2, thermal=0.01, time_step="adaptive",
                  max_change=0.05, seed=3)
    plain, direct = make(**values), make(**values)
    NumpyStandIns.install(direct._spectral_stepper(), monkeypatch)       # noisy: the per-step host control
    seen = set()
    for _ in range(12):
        plain.step(1)
        before = direct.phi
        direct.step(1)
        assert direct.phi is not before
        seen.add(id(direct.phi))
        np.testing.assert_allclose(direct.phi, plain.phi, rtol=0, atol=1e-12)
        np.testing.assert_allclose(direct.phi_hat, plain.phi_hat, rtol=0, atol=1e-10)
    assert len(seen) == 2                                           # two real buffers, used in turn
    assert direct.time == plain.time


@pytest.mark.gpu
@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("integrator", SPECTRAL)
def test_the_gpu_model_follows_the_numpy_model(integrator, boundary):
    values = dict(L=64, integrator=integrator, boundary=boundary, dt=0.1, noise=0.1)
    cpu, gpu = make("numpy", **values), make("cuda", **values)
    cpu.step(200), gpu.step(200)
    np.testing.assert_allclose(to_numpy(gpu.phi), cpu.phi, atol=1e-9)
    old = make("cuda", **values)
    old._spectral_stepper().direct = False                          # the earlier cupyx path, for the benchmark
    old.step(200)
    np.testing.assert_allclose(to_numpy(old.phi), cpu.phi, atol=1e-9)
