"""Physics of the Cahn-Hilliard model (sim/models/cahn_hilliard) against exact and published results.

- mass is conserved to round-off (both integrators, both boundaries, with thermal noise);
- the free energy never increases without noise (each integrator's own discrete energy);
- a small Fourier (or cosine) mode grows or decays at the rate of linear stability theory: the continuum
  omega(k) = -m k^2 (-b + 3 u phi0^2 + K k^2) for the spectral solver and its discrete analogue for finite
  differences, within 2%, and by exactly each scheme's amplification factor per step;
- the RK2 stability limit is the real one: just below it a grid-scale mode decays, just above it it grows;
- finite differences and the spectral solver give the same free-energy curve;
- PFHub benchmark 1: F(0) from the formula, and one step in PFHub's own variables equals ours (the mapping);
- bad parameters (unstable dt, phi0 outside [-1, 1]) are refused by name and leave a running model as it was;
- every CUDA stage kernel (row-blocked, cache-read) equals its NumPy twin, on grids smaller
  and larger than a block or strip (CPU emulator; and on a GPU, marked gpu); the GPU stepper writes into two kept
  buffers (more sizes for the row-blocked kernel in test_cahn_hilliard_fd_kernels.py);
- save / resume is exact for the spectral integrator with adaptive steps and thermal noise;
- slow: the coarsening length grows as t^(1/3) in 2D.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.cahn_hilliard import pfhub
from latticelab.sim.models.cahn_hilliard.finite_difference import (KERNELS, CudaStage, FiniteDifferenceStepper,
                                                                   Shifts, rk2_stage_twin)
from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel
from latticelab.sim.models.cahn_hilliard.params import CahnHilliardParams, fd_stable_dt
from latticelab.sim.models.cahn_hilliard.spectral import stabiliser
from latticelab.sim.params import ParameterError
from latticelab.sim.runner import Runner
from latticelab.sim.state import load_state, save_state

from helpers import BACKENDS, DEVICES, device_xp

INTEGRATORS = ("finite-difference", "spectral")
BOUNDARIES = ("periodic", "mirror")


def make(backend="numpy", **values) -> CahnHilliardModel:
    return CahnHilliardModel.create(backend=backend, **values)


# ---- conservation and dissipation ------------------------------------------------------------------------
@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_mass_is_conserved_to_round_off_over_ten_thousand_steps(integrator, boundary):
    dt = 0.01 if integrator == "finite-difference" else 0.5
    model = make(L=16, integrator=integrator, boundary=boundary, dt=dt, phi0=-0.3, noise=0.2, thermal=0.1)
    mass0 = model.observables()["mass"]
    assert mass0 == pytest.approx(-0.3 * 16 ** 2, rel=1e-12)        # the initial mean is exactly phi0
    model.step(10_000)
    drift = abs(model.observables()["mass"] - mass0)
    assert drift < 1e-12 * model.phi.size, drift                     # a leak of one flux would be ~1e-3
    assert np.all(np.isfinite(model.phi)) and np.abs(model.phi).max() < 2


@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_mass_is_conserved_in_3d(integrator, boundary):
    model = make(dim=3, L=8, integrator=integrator, boundary=boundary, dt=0.005, phi0=0.2, noise=0.3, thermal=0.05)
    mass0 = model.observables()["mass"]
    model.step(300)
    assert abs(model.observables()["mass"] - mass0) < 1e-12 * model.phi.size


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("integrator, dt, time_step", [
    ("finite-difference", None, "fixed"),            # the suggested dt: 0.8 x the stability limit
    ("spectral", 0.02, "fixed"), ("spectral", 5.0, "fixed"), ("spectral", 0.05, "adaptive")])
def test_free_energy_never_increases_without_noise(boundary, integrator, dt, time_step):
    model = make(L=32, boundary=boundary, integrator=integrator, dt=dt, time_step=time_step, phi0=0.1, noise=0.1)
    if dt is None:
        assert model.params.dt == pytest.approx(0.8 * model.params.stable_dt, rel=0.02)
    energies = [model.observables()["free_energy"]]
    for _ in range(300):
        model.step(1)
        energies.append(model.observables()["free_energy"])
    steps = np.diff(energies)
    assert steps.max() <= 1e-12 * abs(energies[0]), steps.max()
    assert energies[-1] < energies[0] - 1.0                        # and it did separate


# ---- linear stability theory -----------------------------------------------------------------------------
def mode_shape(shape, numbers, boundary, dx):
    """A cosine mode of the grid: exp(i k.x) real part for periodic, cos(pi n (i + 1/2) / L) for mirror; and its
    continuum k^2 and discrete (finite-difference Laplacian) eigenvalue kappa."""
    field = np.ones(shape)
    k2 = kappa = 0.0
    for axis, (n, size) in enumerate(zip(numbers, shape)):
        i = np.arange(size).reshape([-1 if a == axis else 1 for a in range(len(shape))])
        k = (2 * np.pi * n if boundary == "periodic" else np.pi * n) / (size * dx)
        field = field * (np.cos(k * i * dx) if boundary == "periodic" else np.cos(k * (i + 0.5) * dx))
        k2 += k * k
        kappa += 4 * np.sin(k * dx / 2) ** 2 / dx ** 2
    return field, k2, kappa


GROWTH_CASES = [  # dim, L, dx, boundary, mode numbers, phi0
    (2, 32, 1.0, "periodic", (1, 2), 0.0),
    (2, 32, 1.0, "periodic", (1, 2), 0.7),          # f'' > 0: the mode decays
    (2, 32, 0.8, "mirror", (0, 3), 0.2),
    (3, 12, 1.0, "periodic", (1, 0, 1), 0.0),
]


@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("dim, L, dx, boundary, numbers, phi0", GROWTH_CASES)
def test_a_small_mode_grows_at_the_rate_of_linear_stability_theory(integrator, dim, L, dx, boundary, numbers, phi0):
    m, b, u, K, dt, T = 1.3, 1.0, 1.2, 1.1, 0.005, 8.0
    model = make(dim=dim, L=L, dx=dx, boundary=boundary, integrator=integrator, m=m, b=b, u=u, K=K, dt=dt,
                 noise=0.0, phi0=phi0)
    mode, k2, kappa = mode_shape(model.shape, numbers, boundary, dx)
    amplitude = 1e-7
    model.set_field(phi0 + amplitude * mode)
    model.advance_to(T)
    measured = float(((to_numpy(model.phi) - phi0) * mode).sum() / (mode * mode).sum())
    rate = math.log(measured / amplitude) / T
    f2 = -b + 3 * u * phi0 ** 2
    steps = model.step_count
    if integrator == "spectral":
        omega = -m * k2 * (f2 + K * k2)                          # the continuum dispersion relation
        S = stabiliser(b, u)
        factor = (1 - dt * m * k2 * (f2 - S)) / (1 + dt * m * k2 * (S + K * k2))
    else:
        omega = -m * kappa * (f2 + K * kappa)                    # its finite-difference analogue
        z = omega * dt
        factor = 1 + z + z * z / 2                               # the RK2 amplification factor
    assert rate == pytest.approx(omega, rel=0.02), (rate, omega)
    assert measured == pytest.approx(amplitude * factor ** steps, rel=1e-6)
    assert steps == round(T / dt)


def test_the_finite_difference_stability_limit_is_sharp():
    """Linearised about phi = 1 (f'' = 2b), the grid-scale checkerboard is the fastest decaying mode; RK2 keeps it
    bounded for dt just below the limit and amplifies it just above."""
    for dim, dx, m, K in ((2, 1.0, 1.0, 1.0), (3, 0.7, 2.0, 0.5)):
        b = u = 1.0
        limit = fd_stable_dt(dim, dx, m, b, u, K)
        kappa = 4 * dim / dx ** 2
        assert limit == pytest.approx(2 / (m * kappa * (K * kappa + 2 * b)))
        shape = (8,) * dim
        checker = np.indices(shape).sum(axis=0) % 2 * 2.0 - 1.0
        stepper = FiniteDifferenceStepper(np, shape, np.float64, "periodic", use_kernel=False)
        for ratio, grows in ((0.98, False), (1.02, True)):
            phi = 1.0 + 1e-8 * checker
            for _ in range(400):
                phi = stepper.step(phi, ratio * limit, m, b, u, K, dx)
            amplitude = np.abs(phi - phi.mean()).max()
            assert (amplitude > 1e-8) == grows, (dim, ratio, amplitude)


# ---- the two integrators ---------------------------------------------------------------------------------
def smooth_field(L: int, dx: float, seed: int) -> np.ndarray:
    x = np.arange(L) * dx
    rng = np.random.default_rng(seed)
    field = np.zeros((L, L))
    for _ in range(12):
        k = rng.integers(-3, 4, 2)
        field += 0.05 * np.cos(2 * np.pi * (k[0] * x[:, None] + k[1] * x[None, :]) / (L * dx) + rng.uniform(0, 6.3))
    return field - field.mean()


def test_both_integrators_give_the_same_free_energy_curve():
    """K = 4: interfaces ~3 cells wide, so both discretisations resolve them; finite differences at 0.8 x their
    stability limit, the spectral solver at a 17x larger step."""
    field = smooth_field(32, 1.0, seed=3)
    curves = {}
    for integrator, dt in (("finite-difference", None), ("spectral", 0.1)):
        model = make(L=32, K=4.0, integrator=integrator, dt=dt, noise=0.0)
        model.set_field(field)
        curve = [model.observables()["free_energy"]]
        for t in np.linspace(0, 100, 21)[1:]:
            model.advance_to(float(t))
            curve.append(model.observables()["free_energy"])
        curves[integrator] = np.array(curve)
    fd, sp = curves["finite-difference"], curves["spectral"]
    drop = fd[0] - fd[-1]
    assert drop > 50                                            # it phase-separated
    assert np.abs(fd - sp).max() < 0.015 * drop, np.abs(fd - sp).max() / drop


# ---- PFHub benchmark 1 -----------------------------------------------------------------------------------
def test_pfhub_free_energy_at_t0_matches_the_formula():
    exact = pfhub.analytic_free_energy(points=1000)
    assert exact == pytest.approx(319.0433, abs=2e-3)           # independent of the grid (4000^2 points agree)
    for integrator in INTEGRATORS:
        model = make(preset="pfhub-1b", integrator=integrator, dt=0.002, time_step="fixed")
        assert pfhub.pfhub_free_energy(model) == pytest.approx(exact, rel=1e-5)
    # periodic (1a): the initial field is not periodic on 200; without the energy of the seam faces the
    # finite-difference energy is the formula's
    model = make(preset="pfhub-1a", integrator="finite-difference", dt=0.002, time_step="fixed")
    phi, K = to_numpy(model.phi), model.params.K
    seam = 0.5 * K * (((phi[0] - phi[-1]) ** 2).sum() + ((phi[:, 0] - phi[:, -1]) ** 2).sum())
    assert pfhub.pfhub_free_energy(model) - seam == pytest.approx(exact, rel=1e-4)


@pytest.mark.parametrize("preset", ["pfhub-1a", "pfhub-1b"])
def test_pfhub_mapping_one_step_in_pfhub_variables_equals_ours(preset):
    """PFHub's equation in c (rho, c_a, c_b, kappa, M) stepped with the same RK2 finite differences gives our
    step mapped through c = 0.5 + 0.2 phi: m, b, u, K, dx and time are mapped exactly."""
    dt = 0.002
    model = make(preset=preset, integrator="finite-difference", dt=dt, time_step="fixed")
    c = pfhub.concentration(to_numpy(model.phi))
    shifts = Shifts(np, c.shape, model.params.boundary)

    def rate(c):
        df = 2 * pfhub.RHO * (c - pfhub.C_A) * (pfhub.C_B - c) * (pfhub.C_A + pfhub.C_B - 2 * c)
        return pfhub.M * shifts.laplacian(df - pfhub.KAPPA * shifts.laplacian(c, 1.0), 1.0)

    half = c + 0.5 * dt * rate(c)
    expected = c + dt * rate(half)
    model.step(1)
    np.testing.assert_allclose(pfhub.concentration(to_numpy(model.phi)), expected, rtol=0, atol=1e-13)
    assert model.time == dt


def test_pfhub_presets_fix_the_benchmark_parameters():
    params = CahnHilliardParams.create(preset="pfhub-1a")
    assert (params.dim, params.L, params.dx, params.boundary) == (2, 200, 1.0, "periodic")
    assert (params.m, params.b, params.u, params.K) == (125.0, 0.032, 0.032, 0.08)
    w = (pfhub.C_B - pfhub.C_A) / 2
    assert (params.m, params.b, params.u, params.K) == pytest.approx(
        (pfhub.M / w ** 2, 4 * pfhub.RHO * w ** 4, 4 * pfhub.RHO * w ** 4, pfhub.KAPPA * w ** 2), rel=1e-14)
    assert CahnHilliardParams.create(preset="pfhub-1b").boundary == "mirror"
    fine = CahnHilliardParams.create(preset="pfhub-1b", L=400)
    assert fine.dx == 0.5                                       # L dx = 200: a finer grid for convergence
    with pytest.raises(ParameterError) as info:
        CahnHilliardParams.create(preset="pfhub-1a", m=1.0)
    assert info.value.parameter == "m" and "pfhub-1a" in str(info.value)
    with pytest.raises(ParameterError, match="^L: "):
        CahnHilliardParams.create(preset="pfhub-1a", L=100, dx=1.0)


def test_pfhub_writer_lands_on_the_output_times_and_writes_atomically(tmp_path):
    model = make(preset="pfhub-1a")
    written = pfhub.run_pfhub(model, tmp_path / "out", until=3.0, times=(1.0, 3.0), samples_per_decade=5)
    assert set(written) == {"free_energy", "c_t1", "c_t3", "meta"}
    assert model.time == 3.0
    table = pfhub.read_free_energy(written["free_energy"])
    assert table[0, 0] == 0.0 and table[-1, 0] == 3.0 and 1.0 in table[:, 0]
    assert np.all(np.diff(table[:, 0]) > 0) and np.all(np.diff(table[:, 1]) < 0)
    assert table[0, 1] == pytest.approx(319.2, abs=0.05)
    field = np.loadtxt(written["c_t3"], delimiter=",", skiprows=1)
    assert field.shape == (200 * 200, 3)
    np.testing.assert_allclose(field[:, 2].reshape(200, 200), pfhub.concentration(to_numpy(model.phi)), atol=1e-15)
    assert "id: '1a'" in written["meta"].read_text()
    with pytest.raises(FileExistsError):
        pfhub.run_pfhub(make(preset="pfhub-1a"), tmp_path / "out", until=1.0, times=(1.0,))
    assert not list((tmp_path / "out").glob(".*part"))


# ---- errors ----------------------------------------------------------------------------------------------
def test_unstable_dt_is_refused_by_name_and_leaves_the_running_model_as_it_was():
    model = make(L=16, dt=0.01, noise=0.1)
    model.step(5)
    before, params, time = to_numpy(model.phi).copy(), model.params, model.time
    limit = model.params.stable_dt
    for change in ({"dt": 1.01 * limit}, {"m": 3.0}, {"K": 10.0}):
        with pytest.raises(ParameterError) as info:
            model.update(**change)
        assert info.value.parameter == "dt"
        assert "stability limit" in str(info.value) and "largest stable dt" in str(info.value)
    spectral = make(L=16, dt=0.5, integrator="spectral")
    with pytest.raises(ParameterError, match=f"^dt: 0.5 is above .* largest stable dt is {limit:.6g}"):
        spectral.update(integrator="finite-difference")
    assert spectral.params.integrator == "spectral"
    with pytest.raises(ParameterError, match="^dt: "):
        make(L=16, dt=0.03)
    assert model.params == params and model.time == time
    np.testing.assert_array_equal(to_numpy(model.phi), before)
    model.update(dt=limit)                      # the limit itself is allowed
    model.step(3)
    assert np.all(np.isfinite(model.phi))


def test_phi0_outside_the_interval_is_refused_and_the_model_kept():
    runner = Runner("cahn-hilliard", {"L": 16, "dt": 0.01}, backend="numpy")
    runner.advance(3)
    model, before = runner.model, to_numpy(runner.model.phi).copy()
    for bad in (1.5, -1.01):
        with pytest.raises(ParameterError) as info:
            runner.set(phi0=bad)
        assert info.value.parameter == "phi0" and "[-1, 1]" in str(info.value)
        with pytest.raises(ParameterError, match="^phi0: "):
            model.reset(phi0=bad)
        with pytest.raises(ParameterError, match="^phi0: "):
            make(L=16, phi0=bad)
    assert runner.model is model and model.step_count == 3 and model.params.phi0 == 0.0
    np.testing.assert_array_equal(to_numpy(model.phi), before)
    assert runner.set(phi0=-0.5) == "reset"
    runner.reset()
    assert runner.model.observables()["mass"] == pytest.approx(-0.5 * 16 ** 2, rel=1e-12)


# ---- the CUDA kernel against its twin --------------------------------------------------------------------
# small grids, and grids that end mid-block (flat launch of 256 threads; the row-blocked strips of 30 columns)
KERNEL_CASES = {"emulator": [(2, 7), (2, 16), (2, 37), (3, 5), (3, 9)],
                "cuda": [(2, 7), (2, 300), (3, 5), (3, 70)]}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("device", DEVICES)
def test_the_rk2_stage_kernels_equal_their_numpy_twin(device, kernel):
    xp = device_xp(device)
    rng = np.random.default_rng(5)
    for (dim, L), boundary, dtype in ((case, bnd, d) for case in KERNEL_CASES[device] for bnd in BOUNDARIES
                                      for d in (np.float64, np.float32)):
        shape = (L,) * dim
        base, evaluated = (rng.uniform(-1.2, 1.2, shape).astype(dtype) for _ in range(2))
        args = (1.1, 0.9, 1.3, 1 / 0.7 ** 2, 0.0037)
        twin = rk2_stage_twin(Shifts(np, shape, boundary), base, evaluated, *args)
        out = xp.empty(shape, dtype)
        CudaStage(xp, dtype, dim, boundary, kernel)(xp.asarray(base), xp.asarray(evaluated), out, *args)
        got = to_numpy(out)
        assert got.dtype == twin.dtype
        if device == "emulator":                 # the same operations in the same order: the same bits
            np.testing.assert_array_equal(got, twin, err_msg=f"{dim}D L={L} {boundary} {dtype.__name__}")
        else:                                    # nvrtc contracts to fused multiply-adds
            tol = 1e-12 if dtype == np.float64 else 2e-5
            np.testing.assert_allclose(got, twin, rtol=tol, atol=tol, err_msg=f"{dim}D L={L} {boundary}")
    # whole RK2 steps through the stepper: two kept output buffers, used in turn, the input never written
    shape = (12, 12)
    phi = rng.uniform(-1, 1, shape)
    for boundary in BOUNDARIES:
        stepper = FiniteDifferenceStepper(xp, shape, np.float64, boundary, use_kernel=True, kernel=kernel)
        twin = FiniteDifferenceStepper(np, shape, np.float64, boundary, use_kernel=False)
        start = xp.asarray(phi)
        a, b = start, phi
        outputs = []
        for _ in range(4):
            a, b = stepper.step(a, 0.01, 1.0, 1.0, 1.0, 1.0, 1.0), twin.step(b, 0.01, 1.0, 1.0, 1.0, 1.0, 1.0)
            outputs.append(a)
        np.testing.assert_allclose(to_numpy(a), b, rtol=0, atol=0 if device == "emulator" else 1e-12)
        np.testing.assert_array_equal(to_numpy(start), phi)
        assert outputs[0] is outputs[2] and outputs[1] is outputs[3] and outputs[0] is not outputs[1]


@pytest.mark.gpu
@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_the_gpu_model_follows_the_numpy_model(integrator, boundary):
    values = dict(L=64, integrator=integrator, boundary=boundary, dt=0.01 if integrator == "finite-difference" else 0.1,
                  noise=0.1)
    cpu, gpu = make("numpy", **values), make("cuda", **values)
    np.testing.assert_array_equal(to_numpy(gpu.phi), cpu.phi)
    cpu.step(200), gpu.step(200)
    np.testing.assert_allclose(to_numpy(gpu.phi), cpu.phi, atol=1e-9)
    for key, value in cpu.observables().items():
        assert gpu.observables()[key] == pytest.approx(value, rel=1e-6, abs=1e-9), key


# ---- save / resume ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_spectral_adaptive_noisy_runs_resume_exactly(backend, boundary, tmp_path):
    values = dict(L=24, integrator="spectral", boundary=boundary, time_step="adaptive", dt=0.05, thermal=1e-4,
                  max_change=0.1, seed=9)
    straight = make(backend, **values)
    straight.step(140)
    first = make(backend, **values)
    first.step(117)
    path = save_state(tmp_path / "state.npz", first)
    resumed = load_state(path, backend=backend)
    assert resumed.time == first.time and resumed.dt_current == first.dt_current
    resumed.step(23)
    np.testing.assert_array_equal(to_numpy(resumed.phi), to_numpy(straight.phi))
    assert resumed.time == straight.time and resumed.observables() == straight.observables()
    assert straight.dt_current > values["dt"]                  # the step grew


def test_live_integrator_switch_keeps_the_field_and_the_clock():
    model = make(L=16, dt=0.01, noise=0.2)
    model.step(10)
    phi, time = to_numpy(model.phi).copy(), model.time
    model.update(integrator="spectral", dt=0.2)
    np.testing.assert_array_equal(to_numpy(model.phi), phi)
    model.step(5)
    assert model.time == pytest.approx(time + 1.0)
    model.update(integrator="finite-difference", dt=0.01)
    model.step(5)
    assert model.observables()["dt"] == 0.01


# ---- coarsening ------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_coarsening_length_grows_as_t_to_the_one_third_in_2d():
    """Lifshitz-Slyozov: a critical quench (phi0 = 0) coarsens with L(t) ~ t^(1/3); the first moment of the
    spherically averaged structure factor from t = 200 to 20,000 on a 384^2 grid (about five domains across at
    the end). Measured: exponent 0.333 from t = 100 and 0.341 from t = 300 on 256^2."""
    model = make(L=384, integrator="spectral", time_step="adaptive", dt=0.05, dt_max=5.0, max_change=0.01,
                 noise=0.05, seed=2)
    times = np.geomspace(200, 20_000, 12)
    lengths = []
    for t in times:
        model.advance_to(float(t))
        lengths.append(model.observables()["length"])
    exponent = np.polyfit(np.log(times), np.log(lengths), 1)[0]
    assert exponent == pytest.approx(1 / 3, rel=0.10), exponent
    assert 384 / 8 < lengths[-1] < 384 / 4


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_pfhub_1a_early_curve_matches_a_converged_run_at_a_finer_step():
    """The preset's adaptive steps (max_change 0.01, the PFHub run) against fixed steps of 0.01 up to t = 100,
    through the fast initial decomposition: the free-energy curves agree within 1%."""
    times = np.linspace(10, 100, 10)
    curves = []
    for values in ({}, {"time_step": "fixed", "dt": 0.01}):
        model = make(preset="pfhub-1a", **values)
        curve = []
        for t in times:
            model.advance_to(float(t))
            curve.append(pfhub.pfhub_free_energy(model))
        curves.append(np.array(curve))
    adaptive, fine = curves
    assert fine[-1] < 0.5 * fine[0]                             # decomposed
    np.testing.assert_allclose(adaptive, fine, rtol=0.01)


def test_a_diverging_field_is_reported_by_name_not_stepped_on_silently():
    """Found by the stateful property test: strong thermal noise on a tiny grid drives the explicit scheme to
    overflow. The step must say so, naming the noise (thermal), instead of carrying non-finite values on; a reset
    recovers."""
    from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel
    model = CahnHilliardModel(backend="numpy", seed=0, dim=2, L=4, integrator="finite-difference", u=6.0, K=1.0,
                              dt=0.01, thermal=6.0, phi0=0.0, noise=0.1)
    with np.errstate(all="ignore"), pytest.raises(ParameterError, match="^thermal: the field diverged"):
        for _ in range(200):
            model.step(1)
    model.reset()
    assert np.isfinite(model.phi).all() and model.step_count == 0
