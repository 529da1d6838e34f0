"""Philox4x32-10 on the host: the NumPy twin of sim/kernels/philox.cuh, and the counter conventions.

Philox4x32-10 (Salmon, Moraes, Dror & Shaw, SC'11; Random123) maps a 128-bit counter and a 64-bit key to
four 32-bit words. The kernels key it with the run's seed and put (index, tag, stream) in the counter, so
every random number of a run is a pure function of (seed, stream, tag, index): a trajectory does not depend
on the launch configuration, and the NumPy references below reproduce the GPU's choices exactly.

Counter = (index, tag, stream low 32 bits, stream high 32 bits); key = (seed low, seed high).
"""
from __future__ import annotations

import math

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10

# Tags separate the random numbers one update draws for different purposes.
TAG_METROPOLIS = 0      # + colour: top 8 bits of each site's number, as bit planes (see metropolis_numbers)
TAG_METROPOLIS_LOW = 8  # + colour: low 56 bits, drawn by the kernels only when the top 8 bits tie
TAG_BOND = 2            # lattice edge (site, axis): 2D word 2*(site%2)+axis of call site//2; 3D word axis of site
TAG_NEW_BOND = 3        # rewired edge j: word 0 of the call for j
TAG_CLUSTER_FLIP = 4    # Swendsen-Wang: a cluster flips when word 0 of the call for its root is odd
TAG_WOLFF_SEED = 5      # Wolff: the seed site, from words 0 and 1 of the call for index 0

_U32 = np.uint64(0xFFFFFFFF)


def split64(value: int) -> tuple[int, int]:
    value = int(value)
    if not 0 <= value < 2 ** 64:
        raise ValueError(f"a Philox key or stream must be in [0, 2**64); got {value}")
    return value & 0xFFFFFFFF, value >> 32


def philox4x32(counter, key) -> np.ndarray:
    """Philox4x32-10 of counters (4 arrays or scalars, broadcast) under key (k0, k1): a (4, n) uint32 array."""
    c = [np.atleast_1d(np.asarray(part, dtype=np.uint64)) & _U32 for part in counter]
    c = list(np.broadcast_arrays(*c))
    c = [part.copy() for part in c]
    k0, k1 = np.uint64(int(key[0]) & 0xFFFFFFFF), np.uint64(int(key[1]) & 0xFFFFFFFF)
    m0, m1 = np.uint64(M0), np.uint64(M1)
    shift = np.uint64(32)
    for _ in range(ROUNDS):
        p0 = c[0] * m0
        p1 = c[2] * m1
        c = [(p1 >> shift) ^ c[1] ^ k0, p1 & _U32, (p0 >> shift) ^ c[3] ^ k1, p0 & _U32]
        k0 = (k0 + np.uint64(W0)) & _U32
        k1 = (k1 + np.uint64(W1)) & _U32
    return np.stack(c).astype(np.uint32)


def draw(key: tuple[int, int], tag: int, index) -> np.ndarray:
    """The four words the kernels draw for (seed, stream) = key, a tag and indices: (4, n) uint32."""
    seed, stream = key
    s_lo, s_hi = split64(stream)
    return philox4x32((np.asarray(index, dtype=np.int64), tag, s_lo, s_hi), split64(seed))


def threshold32(probability) -> np.ndarray:
    """uint32 thresholds t with P(r < t) = floor(p * 2**32) / 2**32 for a uniform 32-bit r (p < 1)."""
    p = np.clip(np.asarray(probability, dtype=np.float64), 0.0, 1.0)
    return np.minimum(np.floor(p * 2.0 ** 32), 2.0 ** 32 - 1).astype(np.uint32)


def bond_threshold(probability: float) -> int:
    """64-bit threshold for 'r < t' with a 32-bit r: 2**32 means always (p = 1), 0 never."""
    p = min(max(float(probability), 0.0), 1.0)
    return 2 ** 32 if p >= 1.0 else int(np.floor(p * 2.0 ** 32))


def threshold64(probability) -> np.ndarray:
    """uint64 thresholds P = floor(p * 2**64) for a 64-bit uniform R: P(R < P) = P / 2**64 (0 <= p < 1; p = 1
    gives 2**64 - 1). Exact: the double p times 2**64 is exact, only the floor rounds, so P / 2**64 is the double
    itself whenever p >= 2**-11 and within 2**-64 of it below that."""
    p = np.clip(np.asarray(probability, dtype=np.float64), 0.0, 1.0)
    flat = [min(int(math.ldexp(float(v), 64)), 2 ** 64 - 1) for v in p.reshape(-1)]
    return np.array(flat, dtype=np.uint64).reshape(p.shape)


def metropolis_numbers(key: tuple[int, int], colour: int, sites: np.ndarray) -> np.ndarray:
    """The 64-bit number R (uint64) each site of colour ``colour`` compares with its threshold in a half-sweep
    (sim/models/ising/kernels/metropolis_numbers.cuh; C-order sites of a lattice with even L).

    Site s has the colour index q = s // 2. Bit 7 - j of R's top byte (j = 0 the most significant) is bit
    q % 16 + 16 (j % 2) of word j // 2 of the call (q // 16, TAG_METROPOLIS + colour); the low 56 bits are word 0
    (bits 55..24) and the top 24 bits of word 1 of the call (q, TAG_METROPOLIS_LOW + colour). The kernels draw
    the low bits only when the top byte ties the threshold's; this twin draws all 64 and compares them whole.
    """
    q = np.asarray(sites, dtype=np.int64) >> 1
    groups, where = np.unique(q >> 4, return_inverse=True)
    calls = draw(key, TAG_METROPOLIS + colour, groups).astype(np.uint64)
    slot = (q & 15).astype(np.uint64)
    top = np.zeros(q.size, dtype=np.uint64)
    for j in range(8):
        bit = (calls[j >> 1, where] >> (slot + np.uint64(16 * (j & 1)))) & np.uint64(1)
        top = (top << np.uint64(1)) | bit
    tail = draw(key, TAG_METROPOLIS_LOW + colour, q).astype(np.uint64)
    low = (tail[0] << np.uint64(24)) | (tail[1] >> np.uint64(8))
    return (top << np.uint64(56)) | low


def bond_uniforms(key: tuple[int, int], n_sites: int, dim: int) -> np.ndarray:
    """(n_sites, dim) uint32: the number deciding lattice edge (site, axis)."""
    if dim == 2:  # two x-neighbours share a call: word 2 * (site % 2) + axis of call site // 2
        words = draw(key, TAG_BOND, np.arange((n_sites + 1) // 2))
        return words.T.reshape(-1, 2)[:n_sites]
    return draw(key, TAG_BOND, np.arange(n_sites))[:dim].T


def philox4x32_scalar(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """One Philox4x32-10 call on Python integers (cheaper than NumPy for a single counter)."""
    c0, c1, c2, c3 = (int(v) & 0xFFFFFFFF for v in counter)
    k0, k1 = int(key[0]) & 0xFFFFFFFF, int(key[1]) & 0xFFFFFFFF
    for _ in range(ROUNDS):
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & 0xFFFFFFFF, (p0 >> 32) ^ c3 ^ k1, p0 & 0xFFFFFFFF
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return c0, c1, c2, c3


def wolff_seed_site(key: tuple[int, int], n_sites: int) -> int:
    """The Wolff seed site of an update: words 0 and 1 of the call (0, TAG_WOLFF_SEED) as a 64-bit number mod N."""
    seed, stream = key
    words = philox4x32_scalar((0, TAG_WOLFF_SEED, *split64(stream)), split64(seed))
    return ((words[1] << 32) | words[0]) % n_sites
