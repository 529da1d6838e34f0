"""The network of the cortical model: each neuron's type, dynamics parameters, delay and initial state
(thesis 003, Algorithm 59, InitKernel), and the connections (section 8.2; kernels/connect.cu is the CUDA
twin of ``connect``). Everything is a pure function of the seed (numbers.py gives the counters).

Layout (N = L*L neurons, flat index y*L + x):
    types    uint8 (N,)    0 excitatory, 1 inhibitory
    tv       float32 (2, N) the two varying dynamics parameters: (c, d) of an excitatory neuron, (a, b) of an
                            inhibitory one; the other two are constants (CONSTANTS)
    delay    uint8 (N,)    synaptic delay of the receiving neuron, 5 .. 15 ms
    v, u     float32 (N,)  initial membrane potential 30 - 95 r (in (-65, 30]) and recovery b v
    sources  int32 (k, N)  sources[j, i]: the j-th source of receiver i (consecutive receivers adjacent); on a
                            CUDA device with r <= 127 stored instead as packed 16-bit offsets (below)
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
        dx, dy = _connect_slots(seed, L, r, j0, j1)
        receiver = np.arange(n, dtype=np.int64)[None, :]
        x, y = receiver % L, receiver // L
        sources[j0:j1] = ((y + dy) % L) * L + (x + dx) % L
    return sources


def connect_offsets(seed: int, L: int, k: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dy), int8 (k, L*L) each: the offsets of the sources ``connect`` gives, as drawn (|dx|, |dy| <= r),
    for r <= PACKED_MAX_RADIUS (the twin of kernels/connect.cu's packed kernel)."""
    check_packable(r)
    n = L * L
    dx = np.empty((k, n), np.int8)
    dy = np.empty((k, n), np.int8)
    per_chunk = max(1, (1 << 20) // n)
    for j0 in range(0, k, per_chunk):
        j1 = min(k, j0 + per_chunk)
        dx[j0:j1], dy[j0:j1] = _connect_slots(seed, L, r, j0, j1)
    return dx, dy


def _connect_slots(seed: int, L: int, r: int, j0: int, j1: int) -> tuple[np.ndarray, np.ndarray]:
    """The drawn offsets (dx, dy), int64 (j1 - j0, L*L), of source slots j0 .. j1-1 of every receiver."""
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
    return dx.reshape(j1 - j0, n), dy.reshape(j1 - j0, n)


# ---- packed source lists (the CUDA layout for r <= 127) -----------------------------------------------------
# Each source is stored as its offset from the receiver, dx and dy one signed byte each (a 16-bit lane: dx in
# the low byte, dy in the high byte), four lanes to a 64-bit word: packed[m, i] holds sources 4m .. 4m+3 of
# receiver i in lanes 0 .. 3 (lanes beyond k are 0 and never read). Consecutive receivers are at consecutive
# words, so a warp reads 256 contiguous bytes per load (figure 8.3's coalescing, at 2 bytes a source instead of 4).
# The source of lane (dx, dy) is read from the halo copy of the spike codes: an (L + 2r)^2 byte array holding the
# periodic grid with r extra rows and columns on each side, so receiver i = (x, y) finds it at
# (y + r + dy) (L + 2r) + x + r + dx without wrapping.
PACKED_MAX_RADIUS = 127
LANES = 4


def check_packable(r: int) -> None:
    if not 1 <= r <= PACKED_MAX_RADIUS:
        raise ValueError(f"r = {r}: packed source offsets hold |dx|, |dy| <= {PACKED_MAX_RADIUS} (one signed byte "
                         f"each); use the int32 source lists for r > {PACKED_MAX_RADIUS}")


def packed_words(k: int) -> int:
    """64-bit words per receiver: ceil(k / 4)."""
    return (k + LANES - 1) // LANES


def pack_offsets(dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """uint64 (ceil(k/4), N) from int8 offsets (k, N) (layout above)."""
    k, n = dx.shape
    lanes = np.zeros((packed_words(k) * LANES, n, 2), np.int8)
    lanes[:k, :, 0], lanes[:k, :, 1] = dx, dy
    # lanes (4m + q, i, byte) -> word (m, i), lane q: bytes in the order (m, i, q, byte)
    words = lanes.reshape(packed_words(k), LANES, n, 2).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(words).reshape(packed_words(k), n, 2 * LANES).view(np.uint64)[:, :, 0]


def unpack_offsets(xp, packed, k: int):
    """(dx, dy) as int32 (k, N) arrays of ``xp`` from a packed array (of ``xp``)."""
    words, n = packed.shape
    lanes = packed.view(xp.int8).reshape(words, n, LANES, 2).transpose(0, 2, 1, 3).reshape(words * LANES, n, 2)
    return lanes[:k, :, 0].astype(xp.int32), lanes[:k, :, 1].astype(xp.int32)


def unpack_sources(xp, packed, L: int, k: int):
    """int32 (k, L*L) absolute source indices (as ``connect`` gives) from a packed array of ``xp``."""
    dx, dy = unpack_offsets(xp, packed, k)
    receiver = xp.arange(L * L, dtype=xp.int32)[None, :]
    x, y = receiver % L, receiver // L
    return (((y + dy) % L) * L + (x + dx) % L).astype(xp.int32)


def halo_side(L: int, r: int) -> int:
    return L + 2 * r


def halo_index(xp, L: int, r: int):
    """int64 ((L + 2r)^2,): the neuron whose code each halo byte holds (the periodic grid, padded by r)."""
    side = (xp.arange(halo_side(L, r), dtype=xp.int64) - r) % L
    return (side[:, None] * L + side[None, :]).reshape(-1)


HALO_EXCITATORY, HALO_INHIBITORY = 1, 32     # halo codes of a firing neuron (0: silent)


def halo_codes(xp, data, L: int, r: int):
    """uint8 ((L + 2r)^2,): the halo array phase 1 writes, from the data bytes (bit 0 fired, bit 1 type):
    1 for a firing excitatory neuron, 32 for a firing inhibitory one, 0 otherwise."""
    fired, inh = (data & 1) == 1, (data & 2) == 2
    codes = xp.where(fired, xp.where(inh, HALO_INHIBITORY, HALO_EXCITATORY), 0).astype(xp.uint8)
    return codes[halo_index(xp, L, r)]


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
