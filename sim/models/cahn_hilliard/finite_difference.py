"""Explicit finite differences for the Cahn-Hilliard equation with second-order Runge-Kutta (seed 001, 3.1.3).

    mu        = -b phi + u phi^3 - K lap_h(phi)
    half      = phi + (dt/2) m lap_h(mu(phi))          stage 1
    phi_new   = phi + dt m lap_h(mu(half))             stage 2 (the midpoint rule)

lap_h is the (2 dim + 1)-point Laplacian, periodic or mirror (zero-flux: the ghost cell beyond a wall equals
the cell inside it). ``rk2_stage_twin`` is one stage in NumPy/CuPy array operations, in the same floating-point
order as the CUDA kernels of kernels/ch_rk2.cu (``CudaStage``; variants in KERNELS: row-blocked with warp
shuffles, cache-read; the GPU path runs DEFAULT_KERNEL, the benchmark times them all);
tests compare them. On the GPU a step
writes into two kept buffers in turn (``FiniteDifferenceStepper``): the half-step field and the new field are
never allocated during a run.

The discrete free energy the scheme dissipates uses forward differences for the gradient (``gradient_energy``):
sum over cell faces of (phi_right - phi_left)^2 / dx^2 equals -sum phi lap_h(phi) for both kinds of boundary,
so F_h = sum(-b/2 phi^2 + u/4 phi^4 + K/2 |grad_h phi|^2) dx^d is the Lyapunov function of the semi-discrete flow.
"""
from __future__ import annotations

import numpy as np

from latticelab.sim.models.cahn_hilliard import KERNEL_DIR

KERNEL_FILE = KERNEL_DIR / "ch_rk2.cu"
THREADS = 256                                  # the cache-read kernel's block (flat launch)


def _real(xp, dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


class Shifts:
    """Neighbour values along each axis for one boundary kind: ``plus(p, a)[i] = p[i + e_a]``,
    ``minus(p, a)[i] = p[i - e_a]`` (wrapped or mirrored)."""

    def __init__(self, xp, shape, boundary: str):
        self.xp, self.boundary = xp, boundary
        if boundary == "mirror":
            self._plus = [xp.asarray(np.minimum(np.arange(n) + 1, n - 1)) for n in shape]
            self._minus = [xp.asarray(np.maximum(np.arange(n) - 1, 0)) for n in shape]

    def plus(self, p, axis: int):
        if self.boundary == "periodic":
            return self.xp.roll(p, -1, axis)
        return self.xp.take(p, self._plus[axis], axis=axis)

    def minus(self, p, axis: int):
        if self.boundary == "periodic":
            return self.xp.roll(p, 1, axis)
        return self.xp.take(p, self._minus[axis], axis=axis)

    def neighbour_sum(self, p):
        """Sum of the 2 dim neighbours, in the kernel's order (+axis0, -axis0, +axis1, ...)."""
        s = None
        for a in range(p.ndim):
            for v in (self.plus(p, a), self.minus(p, a)):
                s = v if s is None else s + v
        return s

    def laplacian(self, p, inv_dx2):
        real = p.dtype.type
        return (self.neighbour_sum(p) - real(2 * p.ndim) * p) * real(inv_dx2)


def rk2_stage_twin(shifts: Shifts, base, evaluated, b, u, K, inv_dx2, hm):
    """``base + hm * lap_h(mu(evaluated))``: one RK2 stage, the NumPy/CuPy twin of ch_rk2_stage."""
    real = evaluated.dtype.type
    b, u, K, inv_dx2, hm = real(b), real(u), real(K), real(inv_dx2), real(hm)
    lap = shifts.laplacian(evaluated, inv_dx2)
    mu = u * evaluated * evaluated * evaluated - b * evaluated - K * lap
    lap_mu = (shifts.neighbour_sum(mu) - real(2 * evaluated.ndim) * mu) * inv_dx2
    return base + hm * lap_mu


# The stage kernels of kernels/ch_rk2.cu, by the name ``kernel=`` takes (same values, same bits; they differ in speed
# only, measured by `latticelab bench cahn-hilliard`, which times every one of them):
#   "rows"    ch_rk2_stage_rows<R = 8>: register blocking along y (a warp marches up 8 rows keeping a window of phi
#             rows and mu in registers, mu once per cell plus 2 halo rows) and warp shuffles along x; 2D/3D grid,
#             no div/mod, no shared memory
#   "rows16"  the same with 16 rows per warp (less halo work, half as many threads)
#   "cache"   ch_rk2_stage: one thread per cell, flat launch, mu recomputed at the cell and its 2*DIM neighbours
#             from phi read through the L1/L2 caches
KERNELS = ("rows", "rows16", "cache")
DEFAULT_KERNEL = "rows"                   # the fastest in `bench cahn-hilliard` (docs/design/cahn-hilliard.md)
ROWS = {"rows": 8, "rows16": 16}          # rows per warp of the row-blocked kernel (template parameter R)
ROWS_WARPS, ROWS_OUT = 4, 30              # its block: 32 x ROWS_WARPS threads; columns a warp writes (CH_ROWS_*)


def _check_kernel(kernel: str) -> str:
    if kernel not in KERNELS:
        raise ValueError(f"unknown finite-difference stage kernel {kernel!r}; choose one of {', '.join(KERNELS)}")
    return kernel


def kernel_name(dtype, dim: int, boundary: str, kernel: str = DEFAULT_KERNEL) -> str:
    real = "double" if np.dtype(dtype) == np.float64 else "float"
    mirror = "true" if boundary == "mirror" else "false"
    _check_kernel(kernel)
    if kernel in ROWS:
        return f"ch_rk2_stage_rows<{real}, {dim}, {mirror}, {ROWS[kernel]}>"
    return f"ch_rk2_stage<{real}, {dim}, {mirror}>"


def variant_kernels(kernel: str) -> tuple[str, ...]:
    """Every template instance of one variant (compiled into one module, on first use of the variant)."""
    return tuple(kernel_name(d, dim, bnd, kernel) for d in (np.float64, np.float32) for dim in (2, 3)
                 for bnd in ("periodic", "mirror"))


ALL_KERNELS = tuple(name for k in KERNELS for name in variant_kernels(k))


def rows_launch(dim: int, L: int, rows: int, slow: int | None = None) -> tuple[tuple, tuple]:
    """(grid, block) of the row-blocked kernel: x strips of ROWS_OUT columns, ROWS_WARPS strips of ``rows`` rows
    per block, one z plane per blockIdx.z in 3D; ``slow``: how many slow indices (2D rows, 3D planes) are
    written (default L)."""
    slow = L if slow is None else slow
    grid = (-(-L // ROWS_OUT), -(-(slow if dim == 2 else L) // (rows * ROWS_WARPS)), slow if dim == 3 else 1)
    return grid, (32, ROWS_WARPS, 1)


def launch(kernel: str, dim: int, L: int) -> tuple[tuple, tuple]:
    """(grid, block) of a stage kernel variant on an L^dim grid."""
    if kernel in ROWS:
        return rows_launch(dim, L, ROWS[kernel])
    return ((L ** dim + THREADS - 1) // THREADS,), (THREADS,)


class CudaStage:
    """One RK2 stage by a CUDA kernel of kernels/ch_rk2.cu (``kernel``: a name of KERNELS) on CuPy or on the CPU
    emulator's xp."""

    def __init__(self, xp, dtype, dim: int, boundary: str, kernel: str = DEFAULT_KERNEL):
        from latticelab.sim.gpu.kernels import get_kernel
        self.xp, self.real, self.dim, self.kernel_variant = xp, _real(xp, dtype), dim, _check_kernel(kernel)
        self.kernel = get_kernel(xp, KERNEL_FILE, kernel_name(dtype, dim, boundary, kernel), variant_kernels(kernel))

    def __call__(self, base, evaluated, out, b, u, K, inv_dx2, hm, slow: tuple[int, int] | None = None):
        """``out = base + hm lap_h(mu(evaluated))``. ``slow``: (first, end) local slow indices to write on a slab
        with two halo indices on each side (the row-blocked variants only; slabs.py); None: the whole grid."""
        L = int(evaluated.shape[-1])
        r = self.real
        args = (base, evaluated, out, np.int32(L), r(b), r(u), r(K), r(inv_dx2), r(hm))
        if self.kernel_variant not in ROWS:
            if slow is not None:
                raise ValueError(f"the {self.kernel_variant!r} stage kernel does not update slabs")
            self.kernel(*launch(self.kernel_variant, self.dim, L), args)
            return out
        first, end = (0, L) if slow is None else slow
        grid, block = rows_launch(self.dim, L, ROWS[self.kernel_variant], end - first)
        self.kernel(grid, block, args + (np.int32(first), np.int32(end)))
        return out


class FiniteDifferenceStepper:
    """RK2 steps of the field: a CUDA kernel on CuPy (``use_kernel``; the variant ``kernel``, DEFAULT_KERNEL
    unless set, also later through the attribute), else the array twin."""

    def __init__(self, xp, shape, dtype, boundary: str, use_kernel: bool, kernel: str = DEFAULT_KERNEL):
        self.xp, self.shape, self.dtype, self.boundary = xp, tuple(shape), np.dtype(dtype), boundary
        self.shifts = Shifts(xp, shape, boundary)
        self.use_kernel = use_kernel
        self._stages = {}
        self.kernel = _check_kernel(kernel)
        self._half = None
        self._out = []             # the two kept output buffers, written in turn

    @property
    def stage(self) -> CudaStage | None:
        """The kernel the next step runs (None: the array twin)."""
        if not self.use_kernel:
            return None
        if self.kernel not in self._stages:
            self._stages[self.kernel] = CudaStage(self.xp, self.dtype, len(self.shape), self.boundary, self.kernel)
        return self._stages[self.kernel]

    def step(self, phi, dt: float, m: float, b: float, u: float, K: float, dx: float):
        """phi after one RK2 step of length dt; ``phi`` itself is not modified. With the kernel the result is one
        of two kept buffers, used in turn (the one that is not ``phi``): it stays valid until the step after
        next."""
        inv_dx2 = 1.0 / (dx * dx)
        stage = self.stage
        if stage is None:
            half = rk2_stage_twin(self.shifts, phi, phi, b, u, K, inv_dx2, 0.5 * m * dt)
            return rk2_stage_twin(self.shifts, phi, half, b, u, K, inv_dx2, m * dt)
        if self._half is None:
            self._half = self.xp.empty(self.shape, self.dtype)
        half = stage(phi, phi, self._half, b, u, K, inv_dx2, 0.5 * m * dt)
        return stage(phi, half, self._output(avoid=phi), b, u, K, inv_dx2, m * dt)

    def _output(self, avoid):
        """A kept output buffer that is not ``avoid`` (made on first need; at most two)."""
        for buf in self._out:
            if buf is not avoid:
                return buf
        buf = self.xp.empty(self.shape, self.dtype)
        self._out.append(buf)
        return buf


def gradient_energy(xp, phi, boundary: str, dx: float) -> float:
    """sum over cell faces of (phi_right - phi_left)^2 / dx^2 (the walls of a mirror grid carry no face)."""
    total = 0.0
    for a in range(phi.ndim):
        if boundary == "periodic":
            d = xp.roll(phi, -1, a) - phi
        else:
            n = phi.shape[a]
            d = xp.take(phi, xp.arange(1, n), axis=a) - xp.take(phi, xp.arange(0, n - 1), axis=a)
        total += float((d.astype(xp.float64) ** 2).sum())
    return total / (dx * dx)
