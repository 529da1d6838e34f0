"""The network of the cortical model: each neuron's type, dynamics parameters, delay and initial state
(thesis 003, Algorithm 59, InitKernel), and the connections (section 8.2; kernels/connect.cu is the CUDA
twin of ``connect``). Everything is a pure function of the seed (numbers.py gives the counters).

Layout (N = L*L neurons, flat index y*L + x):
    types    uint8 (N,)    0 excitatory, 1 inhibitory
    tv       float32 (2, N) the two varying dynamics parameters: (c, d) of an excitatory neuron, (a, b) of an
                            inhibitory one; the other two are constants (CONSTANTS)
    delay    uint8 (N,)    synaptic delay of the receiving neuron, 5 .. 15 ms
    v, u     float32 (N,)  initial membrane potential 30 - 95 r (in (-65, 30]) and recovery b v
    sources  int32 (k, N)  sources[j, i]: the j-th source of receiver i (consecutive receivers adjacent)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from latticelab.sim.models.cortex.numbers import TAG_CONNECT, TAG_INIT, normal_pair, threshold32, uniform01, words

DELAY_MIN, DELAY_MAX = 5, 15
MAX_ATTEMPTS = 1000
# (a, b) of excitatory and (c, d) of inhibitory neurons, the same for every neuron of the type (section 8.1)
CONSTANTS = {"a_e": 0.02, "b_e": 0.2, "c_i": -65.0, "d_i": 2.0}


@dataclass
class Neurons:
    types: np.ndarray
    tv: np.ndarray
    delay: np.ndarray
    v: np.ndarray
    u: np.ndarray

    def dynamics(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(a, b, c, d) per neuron, float32."""
        return dynamics(self.types, self.tv)


def dynamics(types, tv):
    """(a, b, c, d) per neuron (float32) from the types and the varying parameters ``tv``."""
    inh = np.asarray(types) == 1
    f = np.float32
    a = np.where(inh, tv[0], f(CONSTANTS["a_e"])).astype(f)
    b = np.where(inh, tv[1], f(CONSTANTS["b_e"])).astype(f)
    c = np.where(inh, f(CONSTANTS["c_i"]), tv[0]).astype(f)
    d = np.where(inh, f(CONSTANTS["d_i"]), tv[1]).astype(f)
    return a, b, c, d


def make_neurons(seed: int, n: int, excitatory_fraction: float) -> Neurons:
    """Types (excitatory with probability ``excitatory_fraction``), the randomised Izhikevich parameters
    (excitatory c = -65 + 15 r^2, d = 8 - 6 r^2; inhibitory a = 0.02 + 0.08 r, b = 0.25 - 0.05 r), the delays and
    the initial potentials, from the counters (neuron, TAG_INIT)."""
    w = words(seed, TAG_INIT, np.arange(n))
    excitatory = w[0].astype(np.uint64) < np.uint64(threshold32(excitatory_fraction))
    types = np.where(excitatory, 0, 1).astype(np.uint8)
    r = uniform01(w[1])
    tv = np.empty((2, n), np.float32)
    tv[0] = np.where(excitatory, -65.0 + 15.0 * r * r, 0.02 + 0.08 * r)
    tv[1] = np.where(excitatory, 8.0 - 6.0 * r * r, 0.25 - 0.05 * r)
    b = np.where(excitatory, np.float32(CONSTANTS["b_e"]), tv[1]).astype(np.float32)
    v = (30.0 - uniform01(w[2]) * 95.0).astype(np.float32)
    u = (b * v).astype(np.float32)
    span = DELAY_MAX - DELAY_MIN + 1
    delay = (DELAY_MIN + ((w[3].astype(np.uint64) * np.uint64(span)) >> np.uint64(32))).astype(np.uint8)
    return Neurons(types, tv, delay, v, u)


def source_offsets(seed: int, receivers, slots, attempts, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """The rounded normal offsets (dx, dy) that attempt ``attempts`` draws for source ``slots`` of
    ``receivers``: floor(sigma z + 1/2) of a Box-Muller pair."""
    w = words(seed, TAG_CONNECT, receivers, slots, attempts)
    z0, z1 = normal_pair(w[0], w[1])
    return np.floor(sigma * z0 + 0.5).astype(np.int64), np.floor(sigma * z1 + 0.5).astype(np.int64)


def connect(seed: int, L: int, k: int, r: int) -> np.ndarray:
    """int32 (k, L*L): sources[j, i] is the j-th source of receiver i, drawn around i with sigma = r/3 within
    radius r, never i itself; duplicates are allowed (each counts). The NumPy twin of kernels/connect.cu,
    worked through in chunks of about 2^20 connections."""
    n = L * L
    sources = np.empty((k, n), np.int32)
    per_chunk = max(1, (1 << 20) // n)
    for j0 in range(0, k, per_chunk):
        j1 = min(k, j0 + per_chunk)
        sources[j0:j1] = _connect_slots(seed, L, r, j0, j1)
    return sources


def _connect_slots(seed: int, L: int, r: int, j0: int, j1: int) -> np.ndarray:
    n = L * L
    sigma = r / 3.0
    slot, receiver = np.divmod(np.arange(j0 * n, j1 * n, dtype=np.int64), n)
    dx = np.ones(slot.size, np.int64)
    dy = np.zeros(slot.size, np.int64)
    pending = np.arange(slot.size, dtype=np.int64)
    for attempt in range(MAX_ATTEMPTS):
        if pending.size == 0:
            break
        ox, oy = source_offsets(seed, receiver[pending], slot[pending], attempt, sigma)
        ok = (ox * ox + oy * oy <= r * r) & ((ox != 0) | (oy != 0))
        dx[pending[ok]], dy[pending[ok]] = ox[ok], oy[ok]
        pending = pending[~ok]
    x, y = receiver % L, receiver // L
    return (((y + dy) % L) * L + (x + dx) % L).astype(np.int32).reshape(j1 - j0, n)


def offset_probabilities(r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dy, p): every offset a source can have and its exact probability -- the normal (sigma = r/3) mass of
    the unit square around the offset, renormalised over the disc of radius r without the origin."""
    from scipy.special import ndtr
    sigma = r / 3.0
    span = np.arange(-r, r + 1)
    mass = ndtr((span + 0.5) / sigma) - ndtr((span - 0.5) / sigma)
    dx, dy = np.meshgrid(span, span, indexing="ij")
    p = np.outer(mass, mass)
    keep = (dx * dx + dy * dy <= r * r) & ((dx != 0) | (dy != 0))
    p = np.where(keep, p, 0.0)
    return dx[keep], dy[keep], p[keep] / p.sum()
