"""The Cahn-Hilliard model of phase separation (seed 001, section 3; seed 000, section 4):

    dphi/dt = m lap( -b phi + u phi^3 - K lap phi ) [+ conserved thermal noise],   phi in [-1, 1]

on an L^2 or L^3 grid of spacing dx, periodic or mirror (zero-flux), integrated by explicit finite differences
with RK2 (finite_difference.py; the CUDA kernel kernels/ch_rk2.cu on a GPU) or by the semi-implicit
stabilised spectral method, first order ("spectral") or second order in time ("spectral-bdf2", SBDF2)
(spectral.py; cuFFT on a GPU), optionally with adaptive steps. The second-order step keeps the previous step's
phi_hat and N_hat (``_history``); they are part of the saved state, so a resumed run continues at second order
exactly as the uninterrupted one.

Observables: the free energy F = sum(-b/2 phi^2 + u/4 phi^4 + K/2 |grad phi|^2) dx^d (the gradient as the
integrator discretises it: forward differences for finite differences, the spectral gradient for the spectral
method; each integrator never increases its own F without noise), the total mass sum(phi) dx^d (conserved),
the characteristic length 2 pi / k1 from the first moment k1 of the spherically averaged structure factor, and
the time step.

Adaptive steps (time_step "adaptive", spectral integrators): after each step dt is set from max |phi' - phi|
relative to half the peak-to-peak amplitude of phi before the step (``adapted_dt``). On a GPU the three
statistics come from one fused reduction kernel (kernels/ch_change.cu, ``FusedChange``) and one 24-byte copy to
pinned host memory, the step's only host synchronisation; on NumPy from array reductions (``change_twin``). The
maxima are exact either way, so both give the same dt sequence. A run of adaptive steps learns from the same
statistics that the field stayed finite, so ``step(n)`` then skips its own finiteness check.

On the direct GPU path without thermal noise (periodic grids; ``device_control``) the control runs on the
device instead (spectral.DeviceControl): runs of up to CONTROL_CHUNK steps are enqueued without a host
synchronisation -- each step's nonlinear pass reduces the previous step's statistics and its update computes the
step's dt from them exactly as ``adapted_dt`` does -- and the dt log and the last step's statistics are read back
once at the end of the run, where the host replays the clock (the same additions in the same order). A step per
launch fewer (no separate reduction) and no synchronisation per step; the same fields and dt sequence.
``advance_to`` runs such chunks while they cannot reach the landing step (dt grows by at most GROWTH per step).

Thermal noise (Cahn-Hilliard-Cook): in each step phi gains dt-integrated random fluxes across every cell face,
dphi_i = sigma sum_a (zeta_{a, i+1/2} - zeta_{a, i-1/2}), sigma = sqrt(2 m theta dt / dx^d) / dx, zeta standard
normal (no flux through mirror walls); added after the finite-difference step, and on the explicit side of the
spectral step, so that its implicit operator damps the short waves of the noise too. The mass is conserved
exactly up to round-off and the discrete fluctuation-dissipation relation holds. The normals come from one random stream
per step keyed by (seed, stream number) (sim/rng.py), so runs are reproducible and resume exactly.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from latticelab.sim.backend import to_numpy
from latticelab.sim.memory import check_fits
from latticelab.sim.model import Coarsening, Model, Observable
from latticelab.sim.model import RunHooks, RunOption
from latticelab.sim.models.cahn_hilliard.change_kernel import (CHANGE_FILE, CHANGE_KERNELS, CHANGE_MAX_BLOCKS,
                                                              change_launch)
from latticelab.sim.models.cahn_hilliard.finite_difference import FiniteDifferenceStepper, gradient_energy
from latticelab.sim.models.cahn_hilliard.params import (COEFFICIENT_MAX, DIVERGED_AMPLITUDE, INITIAL_AMPLITUDE,
                                                       SPECTRAL, CahnHilliardParams, phase_amplitude)
from latticelab.sim.models.cahn_hilliard.pfhub import initial_phi
from latticelab.sim.models.cahn_hilliard.study import STUDY
from latticelab.sim.models.cahn_hilliard.spectral import DeviceControl, History, SpectralStepper, stabiliser
from latticelab.sim.params import ParameterError
from latticelab.sim.picture import scalar_picture
from latticelab.sim.rng import StreamRNG, counter_problem

# Peak bytes per cell, measured with tracemalloc on NumPy (2D L = 256, 3D L = 40; tests/test_memory_estimate.py):
# what the model keeps for each integrator (the field, RK2 stages or the transform and k^2 grid; a = item size),
# the observables' complex128 transform and shell sums, and a step's Cook noise (normals and face fluxes).
# spectral-bdf2 keeps two more transforms (phi_hat and N_hat of the previous step): a + a (periodic, half
# spectrum of complex) or 2 a (mirror) more than spectral (estimated from the arrays, not measured).
KEPT_BYTES = {"finite-difference": lambda a: 16 + a, "spectral/periodic": lambda a: 16 + 2.5 * a,
              "spectral/mirror": lambda a: 24 + 2 * a, "spectral-bdf2/periodic": lambda a: 16 + 4.5 * a,
              "spectral-bdf2/mirror": lambda a: 24 + 4 * a}
OBSERVABLE_BYTES = 52
NOISE_BYTES_PER_AXIS, NOISE_BYTES_FIXED = 40, -8
FFT_PLAN_BYTES = 16        # cuFFT work area per cell (GPU spectral steps)
GROWTH, SHRINK = 1.1, 0.5  # adaptive steps change by at most these factors per step
COUNTERS = ("step_count", "streams_used")
CONTROL_CHUNK = 4096           # most steps decided on the device between two host synchronisations
_SIGN = 1 << 63
_ALL = (1 << 64) - 1


# ---- the adaptive step control ----------------------------------------------------------------------------
def adapted_dt(dt_current: float, change, top, bottom, p) -> float:
    """The next adaptive step from the last step's statistics: ``change`` = max |phi' - phi| and ``top``,
    ``bottom`` = max and min of phi before the step (scalars of the field's dtype: their difference is taken in
    the field's precision). The largest change relative to half the field's peak-to-peak amplitude is kept near
    max_change (so the linear growth is resolved): dt grows by at most GROWTH, shrinks by at most SHRINK per step,
    and stays within [dt, dt_max]."""
    change = float(change) / max(0.5 * float(top - bottom), 1e-12)
    factor = min(GROWTH, max(SHRINK, p.max_change / change)) if change > 0 else GROWTH
    return min(p.dt_max, max(p.dt, dt_current * factor))


def change_twin(xp, new, old) -> tuple:
    """(max |new - old|, max old, min old) as host scalars of the fields' dtype, by array reductions (NumPy, or
    CuPy: five launches and three host synchronisations); the twin of ch_change.cu's values."""
    real = old.dtype.type
    return real(float(xp.abs(new - old).max())), real(float(old.max())), real(float(old.min()))


def change_keys_twin(new, old) -> np.ndarray:
    """The three result words of ch_change.cu (uint64 keys of max |new - old|, max old, max -old) in NumPy."""
    def keys(values):
        values = np.asarray(values, np.float64)
        bits = values.view(np.uint64)
        mapped = np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(_SIGN))
        return np.where(np.isnan(values), np.uint64(_ALL), mapped)
    new, old = np.asarray(new), np.asarray(old)
    d = (new - old).astype(np.float64)
    change = np.where(np.isnan(d), np.uint64(_ALL), d.view(np.uint64) | np.uint64(_SIGN)).max()
    return np.array([change, keys(old).max(), keys(-old.astype(np.float64)).max()], np.uint64)


def decode_keys(words, dtype) -> tuple:
    """(max |new - old|, max old, min old) as scalars of ``dtype`` from the three words of ch_change.cu."""
    words = words.tolist() if hasattr(words, "tolist") else [int(w) for w in words]
    bits = [(k ^ _SIGN) if k & _SIGN else (~k & _ALL) for k in words]
    change, top, neg_bottom = struct.unpack("<3d", struct.pack("<3Q", *bits))
    real = np.dtype(dtype).type
    return real(change), real(top), real(-neg_bottom)


class FusedChange:
    """max |new - old|, max old and min old in one launch of ch_change.cu (CuPy, or the CPU emulator's xp) and
    one host synchronisation: the 24 result bytes copied to pinned memory. Two result slots are used in turn,
    each launch zeroing the one the next launch reduces into."""

    def __init__(self, xp, max_blocks: int = CHANGE_MAX_BLOCKS):
        from latticelab.sim.gpu.kernels import get_kernel
        self.xp, self.max_blocks = xp, max_blocks
        self._kernels = {np.dtype(np.float32): get_kernel(xp, CHANGE_FILE, CHANGE_KERNELS[0], CHANGE_KERNELS),
                         np.dtype(np.float64): get_kernel(xp, CHANGE_FILE, CHANGE_KERNELS[1], CHANGE_KERNELS)}
        self.words = xp.zeros(6, np.uint64)
        self._slots = (self.words[:3], self.words[3:])
        self._slot = 0
        self._launches = {}            # cells -> (grid, block)
        self._cuda = hasattr(xp, "cuda")
        if self._cuda:
            import cupyx
            self.host = cupyx.empty_pinned((3,), dtype=np.uint64)
        else:
            self.host = np.zeros(3, np.uint64)

    def keys(self, new, old) -> np.ndarray:
        """The three result words (host), after one launch."""
        if new.shape != old.shape or new.dtype != old.dtype or new.dtype not in self._kernels:
            raise ValueError(f"ch_change: fields of one shape and float dtype; got {new.shape} {new.dtype}, "
                             f"{old.shape} {old.dtype}")
        xp = self.xp
        if not (new.flags.c_contiguous and old.flags.c_contiguous):
            new, old = xp.ascontiguousarray(new), xp.ascontiguousarray(old)
        result, clear = self._slots[self._slot], self._slots[1 - self._slot]
        self._slot = 1 - self._slot
        n = new.size
        launch = self._launches.get(n)
        if launch is None:
            launch = self._launches[n] = change_launch(n, self.max_blocks)
        self._kernels[new.dtype](*launch, (new, old, np.int64(n), result, clear))
        if self._cuda:
            runtime = xp.cuda.runtime
            stream = xp.cuda.get_current_stream()
            runtime.memcpyAsync(self.host.ctypes.data, result.data.ptr, result.nbytes,
                                runtime.memcpyDeviceToHost, stream.ptr)
            stream.synchronize()
        else:
            self.host[:] = result
        return self.host

    def __call__(self, new, old) -> tuple:
        """(max |new - old|, max old, min old) as scalars of the fields' dtype."""
        return decode_keys(self.keys(new, old), new.dtype)


class CahnHilliardModel(Model):
    """Cahn-Hilliard phase separation in 2D or 3D: ``CahnHilliardModel(params, backend)`` or
    ``CahnHilliardModel.create(backend="numpy", dim=2, L=128, integrator="spectral", ...)``."""

    name = "cahn-hilliard"
    title = "Cahn-Hilliard phase separation"
    Params = CahnHilliardParams
    declared_observables = (
        Observable("free_energy", "free energy F"),
        Observable("mass", "total mass sum(phi) dx^d"),
        Observable("length", "characteristic length 2 pi / k1", log=True),
        Observable("dt", "time step", log=True),
    )
    time_label = "simulated time"
    state_format = 1
    cpu_pace = 0     # auto: one step of dt = 0.02 a frame left the field a grey square for seconds
    splits_across_devices = True       # finite differences only (slabs.py)
    devices_note = ("finite-difference steps split into slabs, the same field bit for bit as on one GPU; the "
                    "spectral integrators and thermal noise stay on one device")
    small_example = {"dim": 2, "L": 16, "dt": 0.01, "noise": 0.1, "thermal": 0.05}
    diverges_with = ("dt", "thermal")
    # extra inputs and outputs of `latticelab run cahn-hilliard` (sim/model.py RunOption; CahnHilliardRun below)
    run_options = (
        RunOption("initial", "start from this phi field (a .npy file of the grid's shape, finite numbers), "
                             "replacing the initial state of phi0/noise or the preset", metavar="FILE.npy"),
        RunOption("pfhub_out", "write PFHub benchmark 1's time series as CSV: time, free energy (PFHub's F) and "
                               "mass (the integral of c = 0.5 + 0.2 phi); needs --preset pfhub-1a or pfhub-1b",
                  output=True),
    )

    @classmethod
    def run_hooks(cls, values: dict) -> "CahnHilliardRun":
        return CahnHilliardRun(values)
    # capabilities (sim/model.py): HasCoarsening -- late-stage coarsening of a conserved order parameter
    # (Lifshitz-Slyozov-Wagner) grows the length as t^(1/3); HasInterface -- the phases meet where phi = 0
    coarsening = Coarsening("length", 1.0 / 3.0, "Lifshitz-Slyozov")
    interface_level = 0.0
    study = STUDY      # what a study measures (sim/studies/capability.py; cahn_hilliard/study.py)

    @classmethod
    def estimate_bytes(cls, params: CahnHilliardParams, backend_name: str) -> int:
        """Peak bytes from dim, L, the integrator, boundaries, precision and thermal noise: what the model keeps
        plus the larger of the observables' scratch and a noisy step's (the constants above)."""
        item = 8 if params.precision == "double" else 4
        method = params.integrator if params.integrator not in SPECTRAL else f"{params.integrator}/{params.boundary}"
        scratch = OBSERVABLE_BYTES
        if params.thermal > 0:
            scratch = max(scratch, NOISE_BYTES_PER_AXIS * params.dim + NOISE_BYTES_FIXED)
        per_cell = KEPT_BYTES[method](item) + scratch
        if backend_name == "cuda" and params.integrator in SPECTRAL:
            per_cell += FFT_PLAN_BYTES
        return int(per_cell * params.L ** params.dim)

    @classmethod
    def estimate_bytes_per_device(cls, params: CahnHilliardParams, backend_name: str, devices: int) -> int:
        """Each device's share of a split run: its slab of the field and of the two stage buffers (slabs.py)."""
        if devices == 1:
            return cls.estimate_bytes(params, backend_name)
        from latticelab.sim.models.cahn_hilliard.slabs import device_bytes_per_part
        return device_bytes_per_part(params.dim, params.L, devices, 8 if params.precision == "double" else 4)

    def __init__(self, params: CahnHilliardParams | None = None, backend: str = "auto", *, devices=None, **values):
        """``devices``: the GPUs one run is split over ("0,1", "all", ids; default one device): finite-difference
        steps on slabs of the field (slabs.py); the field the model shows is then a host copy."""
        from latticelab.sim.multidevice.devices import resolve_devices
        params = self._setup(params, backend, values)
        self.dtype = np.dtype(np.float64 if params.precision == "double" else np.float32)
        self._devices = resolve_devices(type(self), devices, self._backend)
        self._split = None
        if len(self._devices) > 1:
            from latticelab.sim.models.cahn_hilliard.slabs import SplitField, split_refusal
            refusal = split_refusal(params, len(self._devices))
            if refusal is not None:
                raise refusal
        check_fits(type(self), params, self._backend, self._devices)
        if len(self._devices) > 1:
            self._split = SplitField(self.xp, self._devices, params.dim, params.L, self.dtype, params.boundary)
            self.xp = np                 # what the model shows (fields, pictures, observables) lives on the host
        self._rng = StreamRNG(self.xp, params.seed)
        self._fd = None
        self._spectral = None
        self._obs_cache = None
        self.phi_hat = None
        self._history = None           # spectral-bdf2: the previous step's phi_hat, N_hat and dt (spectral.History)
        # adaptive steps on a GPU: the step's statistics by the fused kernel (FusedChange); False: by CuPy array
        # reductions (the earlier path, timed by the benchmark); NumPy always uses the array reductions
        self.fused_change = True
        self._change = None
        # adaptive steps on the direct GPU path without noise: the control on the device, read back once per run
        # of steps (spectral.DeviceControl); False: one synchronisation per step (the earlier path)
        self.device_control = True
        self._control = None
        self._known_finite = False     # the last step's statistics showed the field finite
        self.reset()

    # ---- parameters -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return (self._params.L,) * self._params.dim

    @property
    def step_count(self) -> int:
        return self._step_count

    @property
    def time(self) -> float:
        """Simulated time since the last reset."""
        return self._time

    @property
    def devices(self) -> tuple[int, ...]:
        """The devices the run is split over (one: not split)."""
        return self._devices

    @property
    def phi(self):
        """The field: on the model's device, or a host copy of a split run's."""
        return self._split.field() if self._split is not None else self._phi

    @phi.setter
    def phi(self, value) -> None:
        if self._split is not None:
            self._split.load(to_numpy(value))
        else:
            self._phi = value

    @property
    def dt_current(self) -> float:
        """The step the next ``step`` takes (dt, or the adaptive step)."""
        return self._dt_current

    def update(self, **changes) -> None:
        """Live changes: m, b, u, K, dt, integrator, time_step, dt_max, max_change, thermal. A bad value (a dt
        above the finite-difference stability limit among them) raises ParameterError and changes nothing."""
        new = self._validated("live", changes)
        old = self._params
        if self._split is not None:
            from latticelab.sim.models.cahn_hilliard.slabs import split_refusal
            refusal = split_refusal(new, len(self._devices))
            if refusal is not None:
                wrong = "integrator" if new.integrator != old.integrator else "thermal"
                raise ParameterError(wrong, str(refusal).removeprefix("devices: "))
        if new.integrator != old.integrator:
            if new.integrator not in SPECTRAL:
                self.phi_hat = None
            elif old.integrator not in SPECTRAL:
                self.phi_hat = self._spectral_stepper().forward(self.phi)
        if any(getattr(new, k) != getattr(old, k) for k in ("integrator", "m", "b", "u", "K")):
            self._history = None       # the kept nonlinear term belongs to the old equation: restart at first order
        if new.dt != old.dt or new.time_step != old.time_step:
            self._dt_current = new.dt
        self._dt_current = min(max(self._dt_current, new.dt), new.dt_max)
        self._params = new
        self._obs_cache = None

    def reset(self, **values) -> None:
        """New initial field from phi0 and noise (or the preset); time and step count 0. A new seed restarts the
        random streams, so the same values give the same run. Takes the ``reset`` parameters (phi0, noise,
        preset, seed)."""
        new = self._validated("reset", values)
        self._rng = StreamRNG(self.xp, new.seed)
        self._params = new
        p = new
        if p.preset != "none":
            host = initial_phi(p.L, p.dx, p.boundary)
        else:
            r = self._rng.host_stream().random(self.shape) * 2.0 - 1.0
            host = p.phi0 + p.noise * (r - r.mean())
        self._set(self.xp.asarray(host.astype(self.dtype)))
        self._time = 0.0
        self._step_count = 0
        self._dt_current = p.dt
        self._last_dt = p.dt

    def set_field(self, phi) -> None:
        """Replace the field (any array of the grid's shape with finite values; e.g. a .npy file's); the clock,
        step count and random streams are kept."""
        host = np.asarray(to_numpy(phi), dtype=np.float64)
        if host.shape != self.shape or not np.all(np.isfinite(host)):
            raise ParameterError("field", f"must be finite numbers of shape {self.shape}; got shape {host.shape}")
        self._set(self.xp.asarray(host.astype(self.dtype)))

    def _set(self, phi) -> None:
        self.phi = phi
        self.phi_hat = self._spectral_stepper().forward(phi) if self._params.integrator in SPECTRAL else None
        self._history = None
        self._obs_cache = None

    # ---- the integrators --------------------------------------------------------------------
    def _fd_stepper(self) -> FiniteDifferenceStepper:
        if self._fd is None:
            self._fd = FiniteDifferenceStepper(self.xp, self.shape, self.dtype, self._params.boundary,
                                               use_kernel=self._backend.is_gpu)
        return self._fd

    def _spectral_stepper(self) -> SpectralStepper:
        if self._spectral is None:
            self._spectral = SpectralStepper(self.xp, self.shape, self.dtype, self._params.boundary,
                                             self._params.dx, gpu=self._backend.is_gpu)
        return self._spectral

    def step(self, n: int = 1) -> None:
        """Advance ``n`` steps of the current time step (fixed, or adaptive for the spectral integrator)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ParameterError("n", f"must be a non-negative integer number of steps; got {n!r}")
        done = 0
        while done < n:
            if self._controlled_on_device():
                done += self._device_steps(min(int(n) - done, CONTROL_CHUNK))
            else:
                self._advance(self._dt_current, adapt=True)
                done += 1
        if n:
            self._check_diverged()

    def _diverged_limit(self) -> float:
        """The |phi| beyond which the field has diverged (params.DIVERGED_AMPLITUDE)."""
        return DIVERGED_AMPLITUDE * phase_amplitude(self._params.b, self._params.u)

    def _check_diverged(self) -> None:
        """ParameterError naming the likely cause (thermal where there is noise, else dt) when the field is
        non-finite or far beyond its phase amplitude: one reduction per call, not per step, and none when the
        last (adaptive) step's statistics showed the field finite and in bounds."""
        if self._known_finite:
            return
        if self._split is not None:                # split over devices: each slab reduced where it lives
            if self._split.finite():
                return
            largest = math.nan
        else:
            largest = float(self.xp.abs(self.phi).max())
            if largest <= self._diverged_limit():      # NaN fails this too
                return
        p = self._params
        cause = "thermal" if p.thermal > 0 else "dt"
        what = "non-finite values" if not math.isfinite(largest) else f"|phi| up to {largest:.3g}"
        raise ParameterError(cause, f"the field diverged ({what}) by t = {self._time:.6g}: the steps are unstable "
                                    f"for this field{' and noise' if p.thermal > 0 else ''} (thermal = "
                                    f"{p.thermal:g}, dt = {self._dt_current:g}); lower "
                                    f"{'thermal or dt' if p.thermal > 0 else 'dt'}, then reset")

    def _finite(self) -> bool:
        """Whether every cell of the field is finite (reduced where the field lives)."""
        if self._split is not None:
            return self._split.finite()
        return bool(self.xp.isfinite(self.phi).all())

    def advance_to(self, t: float) -> None:
        """Step until the simulated time is exactly ``t`` (the last step shortened to land on it)."""
        if not math.isfinite(t):
            raise ParameterError("until", f"must be a finite time; got {t!r}")
        while self._time < t:
            remaining = t - self._time
            if remaining <= 1e-12 * max(1.0, abs(t)):
                self._time = float(t)
                break
            if remaining <= self._dt_current:
                self._advance(remaining, adapt=False)
                self._time = float(t)
            elif self._controlled_on_device() and (steps := self._steps_before(t)) > 1:
                self._device_steps(steps)
            else:
                self._advance(self._dt_current, adapt=True)
        self._check_diverged()

    def _controlled_on_device(self) -> bool:
        """Adaptive steps decided on the device (module docstring): the direct GPU spectral path, no noise."""
        p = self._params
        return (self.device_control and self.fused_change and p.time_step == "adaptive" and p.integrator in SPECTRAL
                and p.thermal == 0 and self._spectral_stepper().direct)

    def _steps_before(self, t: float) -> int:
        """How many adaptive steps (at most CONTROL_CHUNK) surely end before the step that must land on ``t``:
        each step's dt is bounded by the previous bound times GROWTH (within [dt, dt_max]), and the time before
        each step plus its dt stays below t by a margin far above the clock's round-off."""
        p = self._params
        margin = 1e-9 * max(1.0, abs(t))
        bound, time_before = self._dt_current, self._time
        for k in range(CONTROL_CHUNK):
            if time_before + bound * (1 + 1e-9) + margin >= t:
                return k
            time_before += bound * (1 + 1e-9)
            bound = min(p.dt_max, max(p.dt, bound * GROWTH))
        return CONTROL_CHUNK

    def _device_steps(self, steps: int) -> int:
        """``steps`` adaptive steps decided on the device, then one read-back; the host replays the clock."""
        p = self._params
        stepper = self._spectral_stepper()
        if self._control is None:
            self._control = DeviceControl(stepper.kernel_xp(), CONTROL_CHUNK)
        order2 = p.integrator == "spectral-bdf2"
        limits = (p.dt, p.dt_max, p.max_change, GROWTH, SHRINK)
        S = stabiliser(p.b, p.u)
        phi, hat, history, prev = self.phi, self.phi_hat, self._history if order2 else None, None
        for index in range(steps):
            new_phi, new_hat, n_hat = stepper.step_control(phi, hat, history, prev, index, self._control,
                                                           self._dt_current, p.m, p.b, p.u, p.K, S, order2, limits)
            history = History(hat, n_hat, math.nan)        # its dt is known after the read-back
            prev, phi, hat = phi, new_phi, new_hat
        dts, words = self._control.finish(steps, phi, prev)
        for dt in dts.tolist():
            self._time += dt
        self._step_count += steps
        self._last_dt = float(dts[-1])
        self.phi, self.phi_hat = phi, hat
        if order2:
            self._history = History(history.phi_hat, history.n_hat, self._last_dt)
        change, top, bottom = decode_keys(words, self.dtype)
        self._dt_current = adapted_dt(self._last_dt, change, top, bottom, p)
        self._known_finite = self._in_bounds(change, top, bottom)
        self._obs_cache = None
        return steps

    def _in_bounds(self, change: float, top: float, bottom: float) -> bool:
        """Whether a step's statistics (largest change, old max and min) show the new field finite and within
        the divergence limit."""
        limit = self._diverged_limit()
        return (math.isfinite(change) and math.isfinite(top) and math.isfinite(bottom)
                and max(abs(top), abs(bottom)) + abs(change) <= limit)

    def _advance(self, dt: float, adapt: bool) -> None:
        p = self._params
        if self._split is not None:            # finite differences without noise (split_refusal)
            self._split.step(1, dt, p.m, p.b, p.u, p.K, p.dx)
            self._known_finite = False
            self._time += dt
            self._last_dt = dt
            self._step_count += 1
            self._obs_cache = None
            return
        adaptive = adapt and p.time_step == "adaptive" and p.integrator in SPECTRAL
        old = self.phi
        noise = self._thermal_increment(dt) if p.thermal > 0 else None
        if p.integrator == "spectral":
            self.phi, self.phi_hat = self._spectral_stepper().step(old, self.phi_hat, dt, p.m, p.b, p.u, p.K,
                                                                   stabiliser(p.b, p.u), noise)
        elif p.integrator == "spectral-bdf2":
            self.phi, self.phi_hat, self._history = self._spectral_stepper().step_bdf2(
                old, self.phi_hat, self._history, dt, p.m, p.b, p.u, p.K, stabiliser(p.b, p.u), noise)
        else:
            self.phi = self._fd_stepper().step(old, dt, p.m, p.b, p.u, p.K, p.dx)
            if noise is not None:
                self.phi = self.phi + noise
        self._known_finite = False
        if adaptive:     # the largest change relative to the field's amplitude (so the linear growth is resolved)
            change, top, bottom = self._change_stats(self.phi, old)
            self._dt_current = adapted_dt(self._dt_current, change, top, bottom, p)
            # finite old (top, bottom) and finite |new - old| mean a finite new field
            self._known_finite = self._in_bounds(change, top, bottom)
        self._time += dt
        self._last_dt = dt
        self._step_count += 1
        self._obs_cache = None

    def _change_stats(self, new, old) -> tuple:
        """(max |new - old|, max old, min old): one fused kernel and one synchronisation on a GPU."""
        if self._change is None and self._backend.is_gpu and self.fused_change:
            self._change = FusedChange(self.xp)
        if self._change is not None and self.fused_change:
            return self._change(new, old)
        return change_twin(self.xp, new, old)

    def _thermal_increment(self, dt: float):
        """Conserved Cook noise for one step: the divergence of independent normal face fluxes."""
        p, xp = self._params, self.xp
        d = p.dim
        sigma = math.sqrt(2.0 * p.m * p.thermal * dt / p.dx ** d) / p.dx
        stream = self._rng.next_stream()
        pairs = (d + 1) // 2
        u1 = 1.0 - stream.random((pairs, *self.shape), dtype=np.float64)
        u2 = stream.random((pairs, *self.shape), dtype=np.float64)
        radius, angle = xp.sqrt(-2.0 * xp.log(u1)), 2.0 * math.pi * u2
        normals = [radius[i] * f(angle[i]) for i in range(pairs) for f in (xp.cos, xp.sin)][:d]
        total = None
        for a, flux in enumerate(normals):
            if p.boundary == "mirror":            # no flux through the walls: faces L-1/2 and -1/2 carry 0
                last, first, head = [slice(None)] * d, [slice(None)] * d, [slice(None)] * d
                last[a], first[a], head[a] = slice(-1, None), slice(0, 1), slice(0, -1)
                flux[tuple(last)] = 0.0
                before = xp.concatenate([xp.zeros_like(flux[tuple(first)]), flux[tuple(head)]], axis=a)
            else:
                before = xp.roll(flux, 1, a)
            div = flux - before
            total = div if total is None else total + div
        return (sigma * total).astype(self.dtype)

    # ---- measurements -----------------------------------------------------------------------
    def observables(self) -> dict[str, float]:
        key = (self._step_count, self._time)
        if self._obs_cache is not None and self._obs_cache[0] == key:
            return dict(self._obs_cache[1])
        p, xp = self._params, self.xp
        volume = p.dx ** p.dim
        phi = self.phi.astype(xp.float64)
        phi2 = phi * phi
        bulk = float((-0.5 * p.b * phi2 + 0.25 * p.u * phi2 * phi2).sum())
        if p.integrator in SPECTRAL:
            grad = self._spectral_stepper().gradient_energy(self.phi_hat)
        else:
            grad = gradient_energy(xp, self.phi, p.boundary, p.dx)
        values = {"free_energy": (bulk + 0.5 * p.K * grad) * volume, "mass": float(phi.sum()) * volume,
                  "length": self.characteristic_length(), "dt": float(self._last_dt)}
        self._obs_cache = (key, values)
        return dict(values)

    def characteristic_length(self) -> float:
        """2 pi / k1 with k1 = sum_k k S(k) / sum_k S(k) the first moment of the spherically averaged structure
        factor S(k) (mean of |FFT phi|^2 over the shell |k|; k = 0 left out), in units of length; 0 for a
        uniform field. Averaging over shells (the radial measure dk, not d^d k) keeps the Porod tail
        S ~ k^-(d+1) of sharp interfaces from adding a logarithmic bias to the length."""
        from latticelab.sim.analysis.spectral import fft_magnitude, spherical_mean_device
        xp = self.xp
        power = fft_magnitude(self.phi, xp, normalise="none") ** 2
        weight, counts = spherical_mean_device(power, xp)
        weight = xp.where(counts > 0, weight, 0.0)
        total = float(weight.sum())
        if not total > 0:
            return 0.0
        k_mean = float((weight * xp.arange(weight.size)).sum()) / total       # in mode numbers
        return self._params.L * self._params.dx / k_mean if k_mean > 0 else 0.0

    @property
    def grid_spacing(self) -> float:
        return float(self._params.dx)

    def fields(self) -> dict:
        return {"phi": self.phi}

    def main_field_at(self, index) -> tuple[str, float]:
        """("phi", the value at ``index``): one element read where it lives, also for a split run (no gather)."""
        if self._split is not None:
            return "phi", self._split.value_at(index)
        return "phi", float(self.phi[tuple(int(i) for i in index)].item())

    def picture(self, highlight=None, marks: bool = False):
        """The field through a blue-white-red colormap over the two phases' range. A split run's picture is made
        of its slabs, each encoded on its own device (slabs.py: SplitField.picture_slabs)."""
        a = phase_amplitude(self._params.b, self._params.u)

        def picture_of(xp, values, mask):
            return scalar_picture(xp, values, -a, a, "coolwarm", mask, label="concentration phi",
                                  highlight_label="changed")

        if self._split is not None and self._split.all_local:
            from latticelab.sim.multidevice.picture import whole_picture
            cell = (1,) * self._params.dim
            sample = picture_of(np, np.zeros(cell, self.dtype), None if highlight is None else np.zeros(cell, bool))
            return whole_picture(self._split.picture_slabs(picture_of, highlight), sample)
        return picture_of(self.xp, self.phi, highlight)

    # ---- save / resume ----------------------------------------------------------------------
    def get_state(self) -> dict:
        """The field (and its transform, for the spectral integrators), the second-order step's history (empty
        arrays and prev_dt 0 when there is none), the clock and the stream position."""
        def saved(array):
            return to_numpy(array).copy() if array is not None else np.zeros(0, self.dtype)
        h = self._history
        return {"phi": to_numpy(self.phi).copy(), "phi_hat": saved(self.phi_hat), "time": np.float64(self._time),
                "dt_current": np.float64(self._dt_current), "last_dt": np.float64(self._last_dt),
                "step_count": np.int64(self._step_count), "streams_used": np.int64(self._rng.streams_used),
                "prev_phi_hat": saved(h and h.phi_hat), "prev_n_hat": saved(h and h.n_hat),
                "prev_dt": np.float64(h.dt if h else 0.0)}

    @classmethod
    def from_state(cls, params: CahnHilliardParams, arrays: dict, backend: str = "auto",
                   devices=None) -> "CahnHilliardModel":
        """Rebuild from validated parameters and ``get_state()`` arrays (damaged arrays raise
        ParameterError('state', ...)): the constructor builds the model (split over ``devices`` as the
        constructor's option), then field, clock and streams are put back."""
        model = cls(params, backend=backend, devices=devices)
        s = _validate_state(model, arrays)
        model._rng = StreamRNG(model.xp, params.seed, s["streams_used"])
        model.phi = model.xp.asarray(s["phi"])
        model.phi_hat = model.xp.asarray(s["phi_hat"]) if params.integrator in SPECTRAL else None
        if s["history"] is not None:
            prev_hat, prev_n_hat, prev_dt = s["history"]
            model._history = History(model.xp.asarray(prev_hat), model.xp.asarray(prev_n_hat), prev_dt)
        model._time, model._dt_current, model._last_dt = s["time"], s["dt_current"], s["last_dt"]
        model._step_count = s["step_count"]
        model._obs_cache = None
        return model


def _bad(detail: str) -> ParameterError:
    return ParameterError("state", f"the saved state is damaged or not a latticelab Cahn-Hilliard state: {detail}")


def _validate_state(model: CahnHilliardModel, state) -> dict:
    try:
        out = {}
        for key in COUNTERS:
            value = np.asarray(state[key])
            if value.shape != () or value.dtype.kind not in "iu" or int(value) < 0:
                raise _bad(f"{key} must be a non-negative integer")
            out[key] = int(value)
            if problem := counter_problem(key, out[key]):
                raise _bad(problem)
        for key in ("time", "dt_current", "last_dt"):
            value = np.asarray(state[key])
            if value.shape != () or value.dtype.kind != "f" or not math.isfinite(float(value)) or float(value) < 0:
                raise _bad(f"{key} must be a finite non-negative number")
            out[key] = float(value)
        # no step is longer than the largest dt the schema allows: a clock beyond that is damaged
        if out["time"] > (out["step_count"] + 1) * COEFFICIENT_MAX:
            raise _bad(f"time = {out['time']:g} after {out['step_count']} steps of at most dt = {COEFFICIENT_MAX:g}")
        for key in ("dt_current", "last_dt"):
            if out[key] > COEFFICIENT_MAX:
                raise _bad(f"{key} = {out[key]:g} is above the largest dt ({COEFFICIENT_MAX:g})")
        phi, hat = np.asarray(state["phi"]), np.asarray(state["phi_hat"])
        history = _saved_history(state)
    except KeyError as exc:
        raise _bad(f"missing field {exc.args[0]!r}") from None
    except ParameterError:
        raise
    except Exception as exc:   # unreadable arrays, wrong types, truncated archives
        raise _bad(f"{type(exc).__name__}: {exc}") from None
    if phi.shape != model.shape or phi.dtype != model.dtype or not np.all(np.isfinite(phi)):
        raise _bad(f"phi must be finite {model.dtype} of shape {model.shape}")
    largest = model._diverged_limit()
    if phi.size and float(np.abs(phi).max()) > largest:
        raise _bad(f"phi has values up to |phi| = {float(np.abs(phi).max()):.3g}, beyond +-{largest:g} (a diverged "
                   "field)")
    out["history"] = None
    if model.params.integrator in SPECTRAL:
        expected = model._spectral_stepper().forward(model.xp.asarray(phi))
        shape, dtype = tuple(expected.shape), expected.dtype
        if hat.shape != shape or hat.dtype != dtype or not np.all(np.isfinite(hat)):
            raise _bad(f"phi_hat must be finite {dtype} of shape {shape}")
        if history is not None and model.params.integrator == "spectral-bdf2":
            for name, array in zip(("prev_phi_hat", "prev_n_hat"), history[:2]):
                if array.shape != shape or array.dtype != dtype or not np.all(np.isfinite(array)):
                    raise _bad(f"{name} must be finite {dtype} of shape {shape}")
            out["history"] = tuple(np.ascontiguousarray(a) for a in history[:2]) + (history[2],)
    out["phi"], out["phi_hat"] = np.ascontiguousarray(phi), np.ascontiguousarray(hat)
    return out


def _saved_history(state) -> tuple | None:
    """(prev_phi_hat, prev_n_hat, prev_dt) from a state, or None: none kept (prev_dt 0), or a state written
    before the second-order step existed (no such fields)."""
    if "prev_dt" not in state:
        return None
    dt = np.asarray(state["prev_dt"])
    if dt.shape != () or dt.dtype.kind != "f" or not math.isfinite(float(dt)) or float(dt) < 0:
        raise _bad("prev_dt must be a finite non-negative number")
    if float(dt) == 0:
        return None
    return np.asarray(state["prev_phi_hat"]), np.asarray(state["prev_n_hat"]), float(dt)


# ---- headless runs: `latticelab run cahn-hilliard --initial FILE.npy --pfhub-out FILE --until T` ---------------
def load_initial_field(path, shape: tuple[int, ...], largest: float = math.inf) -> np.ndarray:
    """The phi field in the .npy file ``path``, checked: a real (integer or floating) array of ``shape`` with
    finite values, none beyond +-``largest``. ParameterError("initial", ...) says what is wrong."""
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
            if magic[:4] == b"PK\x03\x04":
                raise ParameterError("initial", f"{path} is an .npz archive; give one array saved with numpy.save "
                                                "(.npy)")
            if magic != b"\x93NUMPY":
                raise ParameterError("initial", f"{path} is not a NumPy .npy file (it lacks the .npy header)")
            f.seek(0)
            data = np.load(f, allow_pickle=False)
    except ParameterError:
        raise
    except OSError as exc:
        raise ParameterError("initial", f"cannot read {path} ({exc.strerror or exc})") from None
    except (ValueError, EOFError) as exc:     # a damaged header or data, or Python objects (never unpickled)
        raise ParameterError("initial", f"{path} is not a readable .npy array ({exc})") from None
    if data.dtype.kind not in "fiu":
        raise ParameterError("initial", f"{path} holds {data.dtype} values; the field must be real numbers")
    if data.shape != tuple(shape):
        raise ParameterError("initial", f"{path} holds an array of shape {data.shape}; the grid is {tuple(shape)} "
                                        "(set --dim and --L to match it)")
    bad = int(np.count_nonzero(~np.isfinite(data))) if data.dtype.kind == "f" else 0
    if bad:
        plural = "s" if bad > 1 else ""
        raise ParameterError("initial", f"{path} has {bad} non-finite value{plural} (NaN or inf)")
    field = data.astype(np.float64)
    top = float(np.abs(field).max()) if field.size else 0.0
    if top > largest:
        raise ParameterError("initial", f"{path} has values up to |phi| = {top:.3g}; a field of these b and u lies "
                                        f"within +-{largest:g} ({INITIAL_AMPLITUDE:g} x its phase amplitude "
                                        "max(1, sqrt(b/u)))")
    return field


class CahnHilliardRun(RunHooks):
    """The model's part of a headless run: the field from --initial, the PFHub time series of --pfhub-out (the
    starting time, then every recorded step), and a last step shortened to land exactly on --until."""

    def __init__(self, values: dict):
        self.initial = values.get("initial")
        self.pfhub_out = values.get("pfhub_out")
        self.rows: list[tuple[float, float, float]] = []

    def start(self, model) -> None:
        if self.pfhub_out and model.params.preset == "none":
            raise ParameterError("pfhub_out", "the PFHub series needs the benchmark's parameters: add --preset "
                                              "pfhub-1a (periodic) or pfhub-1b (no-flux)")
        if self.initial:
            p = model.params
            largest = INITIAL_AMPLITUDE * phase_amplitude(p.b, p.u)
            model.set_field(load_initial_field(self.initial, model.shape, largest))
        if self.pfhub_out:
            self.rows.append(self._row(model))

    def step(self, model, until: float | None = None) -> None:
        if until is not None and until - model.time <= model.dt_current:
            model.advance_to(until)
        else:
            model.step(1)

    def after_step(self, model) -> None:
        if self.pfhub_out:
            self.rows.append(self._row(model))

    @staticmethod
    def _row(model) -> tuple[float, float, float]:
        from latticelab.sim.models.cahn_hilliard.pfhub import C_MID, W, pfhub_free_energy
        p = model.params
        volume = (p.L * p.dx) ** p.dim
        return model.time, pfhub_free_energy(model), C_MID * volume + W * model.observables()["mass"]

    def outputs(self, model) -> dict:
        if not self.pfhub_out:
            return {}

        def write(f):
            f.write("time,free_energy,mass\n")
            f.writelines(f"{t!r},{energy!r},{mass!r}\n" for t, energy, mass in self.rows)

        return {"pfhub_out": write}
