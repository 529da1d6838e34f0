"""The semi-implicit spectral step of the Cahn-Hilliard equation (Chen and Shen, Comput. Phys. Commun. 108
(1998) 147), with a linear stabilising term (Zhu, Chen, Shen, Tikare 1999; Shen and Yang 2010):

    (phi' - phi) / dt = m lap( f'(phi) - S phi + S phi' - K lap phi' ),     f'(phi) = -b phi + u phi^3

so in transform space, with lap -> -k^2 and N = f'(phi) - S phi = u phi^3 - (b + S) phi,

    phi_hat' = (phi_hat - dt m k^2 N_hat) / (1 + dt m k^2 (S + K k^2)).

The explicit part is only the nonlinearity; the stiff fourth-order term and the stabiliser are implicit. With
S >= max|f''| / 2 over the values phi takes the scheme decreases the (spectral) free energy for every dt
(Shen and Yang 2010), so large steps stay stable; it is first order in time. Periodic boundaries use the real
FFT (k = 2 pi n / (L dx)); mirror (zero-flux) boundaries the orthonormal type-II cosine transform, whose modes
cos(pi n (i + 1/2) / L) = cos(k x) at the cell centres x = (i + 1/2) dx satisfy dphi/dn = dmu/dn = 0 at the walls
(k = pi n / (L dx)). NumPy uses scipy.fft, CuPy cupyx.scipy.fft (cuFFT; CuPy caches the plans per shape). The
step keeps phi_hat from the previous step, so one step costs two transforms (N forward, phi_hat' back): on
CuPy the nonlinear term and the transform-space update are each one fused elementwise kernel.

The k = 0 mode is left exactly unchanged by the update (k^2 = 0), so the mass is conserved to round-off without
accumulating: phi is always the inverse transform of a phi_hat whose mean coefficient never changes.
"""
from __future__ import annotations

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


class SpectralStepper:
    """Semi-implicit stabilised steps of (phi, phi_hat) on NumPy (scipy.fft) or CuPy (cupyx.scipy.fft)."""

    def __init__(self, xp, shape, dtype, boundary: str, dx: float, gpu: bool):
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
        self._kernels = None

    # ---- transforms -------------------------------------------------------------------------
    def forward(self, phi):
        if self.boundary == "periodic":
            return self.fft.rfftn(phi)
        return self.fft.dctn(phi, type=2, norm="ortho")

    def inverse(self, phi_hat):
        if self.boundary == "periodic":
            return self.fft.irfftn(phi_hat, s=self.shape)
        return self.fft.idctn(phi_hat, type=2, norm="ortho")

    # ---- the step ---------------------------------------------------------------------------
    def step(self, phi, phi_hat, dt: float, m: float, b: float, u: float, K: float, S: float, noise=None):
        """(phi', phi_hat') after one step of length dt; the inputs are not modified. ``noise``: a real-space
        increment (the thermal noise of the step) added to the explicit side, so the implicit operator damps its
        short waves as it damps everything else there."""
        r = self.real
        if noise is not None:
            phi_hat = phi_hat + self.forward(noise)
        if self.gpu:
            nonlinear, update = self._cupy_kernels()
            n_hat = self.forward(nonlinear(phi, r(u), r(b + S)))
            new_hat = update(phi_hat, n_hat, self.k2, r(dt * m), r(S), r(K))
        else:
            n_hat = self.forward(r(u) * phi * phi * phi - r(b + S) * phi)
            a = r(dt * m) * self.k2
            new_hat = (phi_hat - a * n_hat) / (r(1) + a * (r(S) + r(K) * self.k2))
        return self.inverse(new_hat), new_hat

    def _cupy_kernels(self):
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

    # ---- energy -----------------------------------------------------------------------------
    def gradient_energy(self, phi_hat) -> float:
        """sum over cells of |grad phi|^2 with the spectral gradient (Parseval), in units of 1/dx^0."""
        xp = self.xp
        power = xp.abs(phi_hat).astype(xp.float64) ** 2 * self.k2.astype(xp.float64)
        if self.boundary == "periodic":
            return float((power * self.weights).sum()) / self.n_cells
        return float(power.sum())
