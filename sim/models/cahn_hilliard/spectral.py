"""The semi-implicit spectral steps of the Cahn-Hilliard equation (Chen and Shen, Comput. Phys. Commun. 108
(1998) 147), with a linear stabilising term (Zhu, Chen, Shen, Tikare 1999; Shen and Yang 2010).

First order ("spectral"), stabilised semi-implicit Euler:

    (phi' - phi) / dt = m lap( f'(phi) - S phi + S phi' - K lap phi' ),     f'(phi) = -b phi + u phi^3

so in transform space, with lap -> -k^2, N = f'(phi) - S phi = u phi^3 - (b + S) phi and a = dt m k^2,

    phi_hat' = (phi_hat - a N_hat) / (1 + a (S + K k^2)).

With S >= max|f''| / 2 over the values phi takes the scheme decreases the (spectral) free energy for every dt
(Shen and Yang 2010), so large steps stay stable.

Second order ("spectral-bdf2"), stabilised SBDF2 (Shen and Yang 2010, section 3): the time derivative by the
two-step backward difference, the nonlinear term extrapolated from the last two steps and the stabiliser
S (phi' - phi*) about the same extrapolation phi* = (1 + w) phi - w phi_prev. With a variable step (w = dt /
dt_prev, the ratio to the previous step) the backward difference is

    ((1 + 2w)/(1 + w) phi' - (1 + w) phi + w^2/(1 + w) phi_prev) / dt = m lap( N* + (S - K lap) phi' ),
    N* = (1 + w) N - w N_prev,

which for w = 1 is the usual (3 phi' - 4 phi + phi_prev) / (2 dt) with 2 N - N_prev. Written for the increment
phi_hat' - phi_hat, with c = (1 + 2w)/(1 + w), g = w^2/(1 + w) and D = S + K k^2,

    phi_hat' = phi_hat + (g (phi_hat - phi_hat_prev) - a (D phi_hat + N*_hat)) / (c + a D),

so the k = 0 mode (a = 0, and phi_hat = phi_hat_prev there) is left exactly unchanged. The step keeps phi_hat
and N_hat of the previous step (``History``), so it still costs two transforms. The first step, and any step
whose ratio w is above MAX_RATIO (variable-step BDF2 is zero-stable only for w < 1 + sqrt 2; a live change of
dt, or the step after a shortened landing step, can jump further), is the first-order step: the scheme
restarts. A change of m, b, u or K restarts it too (the model drops the history). The energy is not proved to
decrease for every dt as for the first-order step; for moderate steps it does (tests).

Periodic boundaries use the real FFT (k = 2 pi n / (L dx)); mirror (zero-flux) boundaries the orthonormal
type-II cosine transform, whose modes cos(pi n (i + 1/2) / L) = cos(k x) at the cell centres x = (i + 1/2) dx
satisfy dphi/dn = dmu/dn = 0 at the walls (k = pi n / (L dx)). NumPy uses scipy.fft; CuPy cupyx.scipy.fft,
except for periodic grids, where the step calls two cuFFT plans made once per shape directly (``DirectFFT``)
and the pointwise passes are the CUDA kernels of kernels/ch_spectral.cu (``SpectralKernels``): the forward
transform of N writes into a kept buffer, the update kernel (k^2 from the index and three per-axis tables,
``axis_tables``: no k^2 grid is read) writes phi_hat' and a copy scaled by 1/n that the inverse transform may
destroy (C2R transforms overwrite their input: cupyx copies it first, and then divides the output by n in
another pass, unless told otherwise), and the inverse writes phi' into a kept buffer. A step is then four
passes -- nonlinear term, forward transform, update, inverse -- with no allocation. ``direct=False`` keeps the
earlier path (cupyx functions, CuPy elementwise kernels reading a k^2 grid) for comparison in the benchmark.

Adaptive steps without noise on that path can be decided on the device (``step_control``, ``DeviceControl``;
model.py runs them in chunks): the nonlinear pass of each step also reduces the previous step's statistics,
the update computes the step's dt from them exactly as model.adapted_dt does and records it, and the host reads
the dt log back once per chunk instead of synchronising every step. Same fields, same dt sequence.

The k = 0 mode is left exactly unchanged by both updates, so the mass is conserved to round-off without
accumulating: phi is always the inverse transform of a phi_hat whose mean coefficient never changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from latticelab.sim.models.cahn_hilliard.params import phase_amplitude


def stabiliser(b: float, u: float) -> float:
    """S = max |f''(phi)| / 2 over |phi| <= max(1, sqrt(b/u)): f'' = -b + 3 u phi^2 ranges over [-b, 3 u a^2 - b]."""
    a = phase_amplitude(b, u)
    return 0.5 * max(abs(b), 3.0 * u * a * a - b)


def wavenumbers_squared(shape, dx: float, boundary: str) -> np.ndarray:
    """k^2 on the transform grid (float64, host): rfftn's half grid for periodic, dctn's grid for mirror."""
    axes = []
    for a, n in enumerate(shape):
        if boundary == "periodic":
            k = 2 * np.pi * (np.fft.rfftfreq(n, d=dx) if a == len(shape) - 1 else np.fft.fftfreq(n, d=dx))
        else:
            k = np.pi * np.arange(n) / (n * dx)
        axes.append(k)
    grids = np.meshgrid(*axes, indexing="ij", sparse=True)
    return sum(g ** 2 for g in grids)


def rfft_weights(shape) -> np.ndarray:
    """How many full-grid modes each column of the real FFT's last axis stands for (1 or 2)."""
    n = shape[-1]
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w


MAX_RATIO = 2.0     # largest dt / dt_prev taken by the second-order step; above it, a first-order restart


@dataclass(frozen=True)
class History:
    """What the second-order step keeps of the previous step: phi_hat and N_hat there, and its length."""
    phi_hat: Any
    n_hat: Any
    dt: float


def bdf2_coefficients(ratio: float) -> tuple[float, float, float, float]:
    """(c, g, e0, e1) of the variable-step SBDF2 update for w = dt / dt_prev (module docstring):
    c = (1 + 2w)/(1 + w), g = w^2/(1 + w), N* = e0 N - e1 N_prev with e0 = 1 + w, e1 = w."""
    w = float(ratio)
    return (1 + 2 * w) / (1 + w), w * w / (1 + w), 1 + w, w


def axis_tables(shape, dx: float) -> np.ndarray:
    """k_a^2 of each axis of the periodic half spectrum (float64, host), concatenated: the tables the CUDA updates
    sum into k^2 (ch_spectral.cu ch_mode), in the order and precision of ``wavenumbers_squared``."""
    parts = []
    for a, n in enumerate(shape):
        k = 2 * np.pi * (np.fft.rfftfreq(n, d=dx) if a == len(shape) - 1 else np.fft.fftfreq(n, d=dx))
        parts.append(k ** 2)
    return np.concatenate(parts)


def k2_from_tables(shape, tables: np.ndarray, dtype) -> np.ndarray:
    """The NumPy twin of ch_mode's k^2: the per-axis tables summed in double over the half grid, then rounded."""
    sizes = [*shape[:-1], shape[-1] // 2 + 1]
    offsets = np.cumsum([0, *sizes])
    axes = [tables[offsets[a]:offsets[a + 1]] for a in range(len(shape))]
    grids = np.meshgrid(*axes, indexing="ij", sparse=True)
    total = grids[0] + grids[1]
    for g in grids[2:]:
        total = total + g
    return total.astype(dtype)


KERNEL_FILE = "ch_spectral.cu"
UPDATE_BLOCK = (32, 8, 1)           # CH_UPDATE_X, CH_UPDATE_Y of ch_spectral.cu
NONLINEAR_THREADS = 256             # CH_NONLINEAR_THREADS


def _spectral_kernel_names() -> tuple[str, ...]:
    names = []
    for real in ("float", "double"):
        names += [f"ch_nonlinear<{real}>", f"ch_nonlinear_change<{real}>"]
        for dim in (2, 3):
            names.append(f"ch_spectral_update<{real}, {dim}>")
            names += [f"ch_sbdf2_update<{real}, {dim}, {noise}>" for noise in ("false", "true")]
            names += [f"ch_spectral_update_control<{real}, {dim}, {o}>" for o in ("false", "true")]
    return tuple(names)


SPECTRAL_KERNELS = _spectral_kernel_names()


def update_launch(shape) -> tuple[tuple, tuple]:
    """(grid, block) of the half-spectrum updates: 32 x 8 threads over (last axis, the other axes flattened)."""
    nl = shape[-1] // 2 + 1
    rows = int(np.prod(shape[:-1]))
    return (-(-nl // UPDATE_BLOCK[0]), -(-rows // UPDATE_BLOCK[1]), 1), UPDATE_BLOCK


class SpectralKernels:
    """The CUDA kernels of kernels/ch_spectral.cu for one periodic grid (CuPy, or the CPU emulator's xp): the
    nonlinear term, the first-order and SBDF2 updates with host coefficients, and the updates with the step-size
    control on the device. Arrays are the stepper's (C-contiguous; complex as (re, im) pairs)."""

    def __init__(self, xp, shape, dtype, dx: float):
        from latticelab.sim.gpu.kernels import get_kernel
        from latticelab.sim.models.cahn_hilliard import KERNEL_DIR
        self.xp, self.shape, self.dtype = xp, tuple(shape), np.dtype(dtype)
        self.real = self.dtype.type
        self.dim = len(shape)
        if self.dim not in (2, 3):
            raise ValueError(f"ch_spectral: 2D or 3D grids; got {shape}")
        real = "double" if self.dtype == np.float64 else "float"
        path = KERNEL_DIR / KERNEL_FILE

        def kernel(name):
            return get_kernel(xp, path, name, SPECTRAL_KERNELS)

        self._nonlinear = kernel(f"ch_nonlinear<{real}>")
        self._nonlinear_change = kernel(f"ch_nonlinear_change<{real}>")
        self._update = kernel(f"ch_spectral_update<{real}, {self.dim}>")
        self._sbdf2 = {noisy: kernel(f"ch_sbdf2_update<{real}, {self.dim}, {'true' if noisy else 'false'}>")
                       for noisy in (False, True)}
        self._control = {o: kernel(f"ch_spectral_update_control<{real}, {self.dim}, {'true' if o else 'false'}>")
                         for o in (False, True)}
        self.tables = xp.asarray(axis_tables(shape, dx))
        self.n = int(np.prod(shape))
        self.mode_args = (np.int32(shape[0]), np.int32(shape[1] if self.dim == 3 else 0),
                          np.int32(shape[-1] // 2 + 1))
        self.launch = update_launch(shape)
        self.flat = ((-(-self.n // NONLINEAR_THREADS),), (NONLINEAR_THREADS,))
        from latticelab.sim.models.cahn_hilliard.change_kernel import change_launch
        self.reducing = (change_launch(self.n)[0], (NONLINEAR_THREADS,))

    def nonlinear(self, phi, out, u, bs):
        """out = u phi^3 - bs phi."""
        r = self.real
        self._nonlinear(*self.flat, (phi, out, np.int64(self.n), r(u), r(bs)))
        return out

    def nonlinear_change(self, phi, prev, out, u, bs, result, clear):
        """out = u phi^3 - bs phi, and the keys of max |phi - prev|, max prev, max -prev into ``result``
        (max-reduced: it must start zeroed); ``clear`` zeroed. ``prev`` may be ``out``."""
        r = self.real
        self._nonlinear_change(*self.reducing, (phi, prev, out, np.int64(self.n), r(u), r(bs), result, clear))
        return out

    def update(self, ph, nh, out, scaled, dtm, stab, grad, inv_n):
        r = self.real
        self._update(*self.launch, (ph, nh, out, scaled, self.tables, *self.mode_args, r(dtm), r(stab), r(grad),
                                    r(inv_n)))

    def sbdf2(self, ph, pm, nh, nm, eta, out, scaled, dtm, stab, grad, c, g, e0, e1, inv_n):
        r = self.real
        noisy = eta is not None
        self._sbdf2[noisy](*self.launch, (ph, pm, nh, nm, eta if noisy else nh, out, scaled, self.tables,
                                          *self.mode_args, r(dtm), r(stab), r(grad), r(c), r(g), r(e0), r(e1),
                                          r(inv_n)))

    def control(self, order2: bool, ph, pm, nh, nm, out, scaled, m, stab, grad, inv_n, stats, dt_log, index: int,
                dt_host: float, dt_prev_host: float, have_history: bool, dt_min, dt_max, max_change, growth, shrink):
        r, f = self.real, np.float64
        self._control[bool(order2)](*self.launch, (
            ph, pm, nh, nm, out, scaled, self.tables, *self.mode_args, f(m), r(stab), r(grad), r(inv_n), stats,
            dt_log, np.int32(index), f(dt_host), f(dt_prev_host), np.int32(bool(have_history)), f(dt_min),
            f(dt_max), f(max_change), f(growth), f(shrink), f(MAX_RATIO)))


class DeviceControl:
    """The device side of a run of adaptive steps decided on the device: two result slots of three keys each
    (used in turn: each reducing launch zeroes the other), the dt log of the run, and its read-back (one
    synchronisation: the dt log and the last step's statistics, copied to pinned memory on CUDA)."""

    def __init__(self, xp, chunk: int):
        self.xp, self.chunk = xp, int(chunk)
        self.words = xp.zeros(6, np.uint64)
        self._slots = (self.words[:3], self.words[3:])
        self._slot = 0
        self.dt_log = xp.zeros(self.chunk, np.float64)
        self._cuda = hasattr(xp, "cuda")
        if self._cuda:
            import cupyx
            self.host_dt = cupyx.empty_pinned((self.chunk,), dtype=np.float64)
            self.host_words = cupyx.empty_pinned((3,), dtype=np.uint64)
        self._change = None

    def next_slots(self):
        """(result, clear) for the next reducing launch."""
        result, clear = self._slots[self._slot], self._slots[1 - self._slot]
        self._slot = 1 - self._slot
        return result, clear

    def finish(self, steps: int, new, old) -> tuple[np.ndarray, np.ndarray]:
        """(dt of each step, the three keys of the last step's statistics), after one ch_change launch on the
        last step (``new`` against ``old``) and one synchronisation."""
        from latticelab.sim.gpu.kernels import get_kernel
        from latticelab.sim.models.cahn_hilliard.change_kernel import CHANGE_FILE, CHANGE_KERNELS, change_launch
        kernel = get_kernel(self.xp, CHANGE_FILE, CHANGE_KERNELS[new.dtype == np.float64], CHANGE_KERNELS)
        result, clear = self.next_slots()
        kernel(*change_launch(new.size), (new, old, np.int64(new.size), result, clear))
        if not self._cuda:
            return np.array(self.dt_log[:steps], copy=True), np.array(result, copy=True)
        runtime = self.xp.cuda.runtime
        stream = self.xp.cuda.get_current_stream()
        runtime.memcpyAsync(self.host_dt.ctypes.data, self.dt_log.data.ptr, steps * 8, runtime.memcpyDeviceToHost,
                            stream.ptr)
        runtime.memcpyAsync(self.host_words.ctypes.data, result.data.ptr, result.nbytes, runtime.memcpyDeviceToHost,
                            stream.ptr)
        stream.synchronize()
        return self.host_dt[:steps].copy(), self.host_words.copy()


class DirectFFT:
    """The real FFT of one periodic grid through two cuFFT plans made once (CuPy only): ``forward(x, out)`` and
    ``inverse(x, out)`` write into the given arrays; the inverse is unnormalised and destroys ``x``."""

    def __init__(self, xp, shape, dtype):
        import cupyx.scipy.fft as cufft_api
        from cupy.cuda import cufft
        axes = tuple(range(len(shape)))
        real = xp.empty(shape, dtype)
        half = xp.empty(half_shape(shape), np.result_type(dtype, np.complex64))
        self.r2c = cufft_api.get_fft_plan(real, axes=axes, value_type="R2C")
        self.c2r = cufft_api.get_fft_plan(half, shape=tuple(shape), axes=axes, value_type="C2R")
        self.forward_flag, self.inverse_flag = cufft.CUFFT_FORWARD, cufft.CUFFT_INVERSE

    def forward(self, x, out):
        self.r2c.fft(x, out, self.forward_flag)
        return out

    def inverse(self, x, out):
        self.c2r.fft(x, out, self.inverse_flag)
        return out


def half_shape(shape) -> tuple[int, ...]:
    """The shape of the real FFT's output: the last axis n // 2 + 1."""
    return (*shape[:-1], shape[-1] // 2 + 1)


class Buffers:
    """Arrays kept between steps, handed out by kind so that a step never allocates: ``take(kind, avoid)`` is a
    buffer of that kind that is none of the arrays in ``avoid`` (the step's inputs), made on first need."""

    def __init__(self, xp):
        self.xp, self._kinds = xp, {}

    def take(self, kind: str, shape, dtype, avoid=()):
        pool = self._kinds.setdefault(kind, [])
        for buf in pool:
            if not any(buf is a for a in avoid):
                return buf
        buf = self.xp.empty(shape, dtype)
        pool.append(buf)
        return buf


class SpectralStepper:
    """Semi-implicit stabilised steps of (phi, phi_hat) on NumPy (scipy.fft) or CuPy (cupyx.scipy.fft, or cuFFT
    plans called directly for periodic grids when ``direct``): ``step`` (first order) and ``step_bdf2``."""

    def __init__(self, xp, shape, dtype, boundary: str, dx: float, gpu: bool, direct: bool = True):
        self.xp, self.shape, self.dtype, self.boundary = xp, tuple(shape), np.dtype(dtype), boundary
        self.real = self.dtype.type
        if gpu:
            import cupyx.scipy.fft as fft
        else:
            import scipy.fft as fft
        self.fft = fft
        self.gpu = gpu
        self.k2 = xp.asarray(wavenumbers_squared(shape, dx, boundary).astype(self.dtype))
        self.n_cells = int(np.prod(shape))
        if boundary == "periodic":
            self.weights = xp.asarray(rfft_weights(shape))
        self.direct = bool(direct and gpu and boundary == "periodic")
        self._direct_fft = None
        self._buffers = Buffers(xp)
        self._kernels = None
        self.dx = dx
        self.spectral_kernels = None      # SpectralKernels of the direct path, made on first use (tests may set it)

    # ---- transforms -------------------------------------------------------------------------
    def forward(self, phi):
        if self.boundary == "periodic":
            return self.fft.rfftn(phi)
        return self.fft.dctn(phi, type=2, norm="ortho")

    def inverse(self, phi_hat):
        if self.boundary == "periodic":
            return self.fft.irfftn(phi_hat, s=self.shape)
        return self.fft.idctn(phi_hat, type=2, norm="ortho")

    # ---- the steps --------------------------------------------------------------------------
    def step(self, phi, phi_hat, dt: float, m: float, b: float, u: float, K: float, S: float, noise=None):
        """(phi', phi_hat') after one first-order step of length dt; the inputs are not modified. ``noise``: a
        real-space increment (the thermal noise of the step) added to the explicit side, so the implicit
        operator damps its short waves as it damps everything else there."""
        new_phi, new_hat, _ = self._first_order(phi, phi_hat, dt, m, b, u, K, S, noise)
        return new_phi, new_hat

    def step_bdf2(self, phi, phi_hat, history: History | None, dt: float, m: float, b: float, u: float, K: float,
                  S: float, noise=None):
        """(phi', phi_hat', history') after one second-order step of length dt from (phi, phi_hat) and the
        previous step's ``history``; a first-order step when there is none or dt / history.dt > MAX_RATIO (see
        the module docstring). The inputs (history included) are not modified."""
        if history is None or not 0 < dt <= MAX_RATIO * history.dt:
            keep = () if history is None else (history.phi_hat, history.n_hat)
            new_phi, new_hat, n_hat = self._first_order(phi, phi_hat, dt, m, b, u, K, S, noise, keep)
        else:
            new_phi, new_hat, n_hat = self._second_order(phi, phi_hat, history, dt, m, b, u, K, S, noise)
        return new_phi, new_hat, History(phi_hat, n_hat, dt)

    def _with_noise(self, phi_hat, noise):
        return phi_hat if noise is None else phi_hat + self.forward(noise)

    def _first_order(self, phi, phi_hat, dt, m, b, u, K, S, noise, keep=()):
        """(phi', phi_hat', N_hat): N_hat is the transform of the nonlinear term at phi (the next step's history).
        ``keep``: arrays the step must not overwrite besides its inputs."""
        r = self.real
        explicit = self._with_noise(phi_hat, noise)
        if self.direct:
            n_hat, out_phi = self._nonlinear_direct(phi, u, b + S, avoid=keep)
            new_hat = self._buffers.take("hat", phi_hat.shape, phi_hat.dtype, avoid=(phi_hat, *keep))
            scaled = self._buffers.take("scratch", phi_hat.shape, phi_hat.dtype)
            self._spectral_kernels().update(explicit, n_hat, new_hat, scaled, r(dt * m), r(S), r(K),
                                            r(1.0 / self.n_cells))
            return self._direct().inverse(scaled, out_phi), new_hat, n_hat
        if self.gpu:
            nonlinear = self._cupy_kernels()[0]
            n_hat = self.forward(nonlinear(phi, r(u), r(b + S)))
            new_hat = self._cupy_kernels()[1](explicit, n_hat, self.k2, r(dt * m), r(S), r(K))
        else:
            n_hat = self.forward(r(u) * phi * phi * phi - r(b + S) * phi)
            a = r(dt * m) * self.k2
            new_hat = (explicit - a * n_hat) / (r(1) + a * (r(S) + r(K) * self.k2))
        return self.inverse(new_hat), new_hat, n_hat

    def _second_order(self, phi, phi_hat, history: History, dt, m, b, u, K, S, noise):
        """(phi', phi_hat', N_hat) after one SBDF2 step (module docstring); ``noise`` is added to the rise."""
        r = self.real
        c, g, e0, e1 = (r(v) for v in bdf2_coefficients(dt / history.dt))
        if not self.gpu:
            n_hat = self.forward(r(u) * phi * phi * phi - r(b + S) * phi)
            a = r(dt * m) * self.k2
            d = r(S) + r(K) * self.k2
            rise = g * (phi_hat - history.phi_hat) - a * (d * phi_hat + (e0 * n_hat - e1 * history.n_hat))
            if noise is not None:
                rise = rise + self.forward(noise)
            new_hat = phi_hat + rise / (c + a * d)
            return self.inverse(new_hat), new_hat, n_hat
        if self.direct:
            n_hat, out_phi = self._nonlinear_direct(phi, u, b + S, avoid=(phi_hat, history.n_hat))
            eta = None if noise is None else self.forward(noise)
            new_hat = self._buffers.take("hat", phi_hat.shape, phi_hat.dtype, avoid=(phi_hat, history.phi_hat))
            scaled = self._buffers.take("scratch", phi_hat.shape, phi_hat.dtype)
            self._spectral_kernels().sbdf2(phi_hat, history.phi_hat, n_hat, history.n_hat, eta, new_hat, scaled,
                                           r(dt * m), r(S), r(K), c, g, e0, e1, r(1.0 / self.n_cells))
            return self._direct().inverse(scaled, out_phi), new_hat, n_hat
        n_hat = self.forward(self._cupy_kernels()[0](phi, r(u), r(b + S)))
        args = [phi_hat, history.phi_hat, n_hat, history.n_hat]
        if noise is not None:
            args.append(self.forward(noise))
        args += [self.k2, r(dt * m), r(S), r(K), c, g, e0, e1]
        new_hat, _ = self._bdf2_kernel(noise is not None)(*args, r(1))
        return self.inverse(new_hat), new_hat, n_hat

    def step_control(self, phi, phi_hat, history: History | None, prev, index: int, control: DeviceControl,
                     dt: float, m: float, b: float, u: float, K: float, S: float, order2: bool, limits):
        """(phi', phi_hat', N_hat) after step ``index`` of a run of adaptive steps decided on the device (direct
        path, no noise): its dt is ``dt`` at index 0, else the one the device derives from the statistics of the
        previous step (``phi`` against ``prev``, reduced by this step's nonlinear pass) and records in
        ``control.dt_log``. ``order2``: the SBDF2 step (``history``: the previous step's arrays; its dt is used at
        index 0 only). ``limits``: (dt_min, dt_max, max_change, growth, shrink) of model.adapted_dt."""
        r = self.real
        kernels = self._spectral_kernels()
        keep = () if history is None else (history.phi_hat, history.n_hat)
        work = self._buffers.take("real", self.shape, self.dtype, avoid=(phi,))
        result, clear = control.next_slots()
        kernels.nonlinear_change(phi, phi if prev is None else prev, work, u, b + S, result, clear)
        n_hat = self._buffers.take("n_hat", half_shape(self.shape), np.result_type(self.dtype, np.complex64),
                                   avoid=(phi_hat, *keep))
        self._direct().forward(work, n_hat)
        new_hat = self._buffers.take("hat", phi_hat.shape, phi_hat.dtype, avoid=(phi_hat, *keep))
        scaled = self._buffers.take("scratch", phi_hat.shape, phi_hat.dtype)
        pm, nm = (history.phi_hat, history.n_hat) if history is not None else (phi_hat, n_hat)
        prev_dt = history.dt if history is not None and index == 0 else 0.0
        kernels.control(order2, phi_hat, pm, n_hat, nm, new_hat, scaled, m, r(S), r(K), r(1.0 / self.n_cells),
                        result, control.dt_log, index, dt, prev_dt, history is not None, *limits)
        return self._direct().inverse(scaled, work), new_hat, n_hat

    # ---- the CuPy pieces --------------------------------------------------------------------
    def _direct(self) -> DirectFFT:
        if self._direct_fft is None:
            self._direct_fft = DirectFFT(self.xp, self.shape, self.dtype)
        return self._direct_fft

    def _nonlinear_direct(self, phi, u, bs, avoid):
        """(N_hat, a real buffer free for phi'): the nonlinear term written into a kept real buffer that is not
        ``phi``, transformed into a kept half-spectrum buffer that is none of ``avoid``; the real buffer is then
        free again (the inverse transform writes phi' there)."""
        r = self.real
        work = self._buffers.take("real", self.shape, self.dtype, avoid=(phi,))
        self._spectral_kernels().nonlinear(phi, work, r(u), r(bs))
        n_hat = self._buffers.take("n_hat", half_shape(self.shape), np.result_type(self.dtype, np.complex64),
                                   avoid=avoid)
        self._direct().forward(work, n_hat)
        return n_hat, work

    def kernel_xp(self):
        """The array module the direct path's kernels run on (CuPy, or the CPU emulator's in tests)."""
        return self._spectral_kernels().xp

    def _spectral_kernels(self) -> SpectralKernels:
        if self.spectral_kernels is None:
            self.spectral_kernels = SpectralKernels(self.xp, self.shape, self.dtype, self.dx)
        return self.spectral_kernels

    def _cupy_kernels(self):
        """(nonlinear, cupyx first-order update): CuPy elementwise kernels of the earlier (cupyx) path, which
        the mirror (cosine transform) grids still take."""
        if self._kernels is None:
            xp = self.xp
            nonlinear = xp.ElementwiseKernel("T p, T u, T bs", "T n", "n = u * p * p * p - bs * p",
                                             "latticelab_ch_nonlinear")
            update = xp.ElementwiseKernel(
                "C ph, C nh, R k2, R dtm, R stab, R grad", "C out",
                "const R a = dtm * k2; out = (ph - nh * a) / (R(1) + a * (stab + grad * k2));",
                "latticelab_ch_spectral_update")
            self._kernels = (nonlinear, update)
        return self._kernels

    def _bdf2_kernel(self, noisy: bool):
        """The SBDF2 update of the earlier (cupyx) path: out = ph + (g (ph - pm) - a (D ph + e0 nh - e1 nm)
        [+ eta]) / (c + a D) and scaled = out * inv_n."""
        key = "bdf2-noise" if noisy else "bdf2"
        cache = self.__dict__.setdefault("_bdf2_kernels", {})
        if key not in cache:
            eta = ", C eta" if noisy else ""
            plus = " + eta" if noisy else ""
            cache[key] = self.xp.ElementwiseKernel(
                f"C ph, C pm, C nh, C nm{eta}, R k2, R dtm, R stab, R grad, R c, R g, R e0, R e1, R inv_n",
                "C out, C scaled",
                "const R a = dtm * k2; const R d = stab + grad * k2;"
                f"out = ph + (g * (ph - pm) - a * (d * ph + (e0 * nh - e1 * nm)){plus}) / (c + a * d);"
                "scaled = out * inv_n;",
                f"latticelab_ch_sbdf2_update{'_noise' if noisy else ''}")
        return cache[key]

    # ---- energy -----------------------------------------------------------------------------
    def gradient_energy(self, phi_hat) -> float:
        """sum over cells of |grad phi|^2 with the spectral gradient (Parseval), in units of 1/dx^0."""
        xp = self.xp
        power = xp.abs(phi_hat).astype(xp.float64) ** 2 * self.k2.astype(xp.float64)
        if self.boundary == "periodic":
            return float((power * self.weights).sum()) / self.n_cells
        return float(power.sum())
