"""The packed (multi-spin-coded) layout of sim/kernels/metropolis_multispin.cu, and its rewired-site arrays.

One bit per spin (1 = spin -1), 32 sites of one colour per uint32 word. A row holds the sites with one y (2D)
or one (z, y) (3D), r = z*L + y; its sites of colour c are x = 2i + o, o = (c + y + z) % 2, and site i sits at
bit i % 32 of word (c * rows + r) * (L // 64) + i // 32, i.e. at bit position c * N/2 + r * L/2 + i.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from latticelab.sim.models.ising.graph_arrays import merged_adjacency
from latticelab.sim.models.ising.lattice import RewiredLattice


def supports(L: int) -> bool:
    """The packed kernels need whole words of each colour in a row: L a multiple of 64."""
    return L % 64 == 0


def bit_position(sites, dim: int, L: int) -> np.ndarray:
    """Bit position of each C-order site index in the packed layout."""
    sites = np.asarray(sites, dtype=np.int64)
    n = L ** dim
    row, x = np.divmod(sites, L)
    y = row % L
    z = row // L if dim == 3 else 0
    colour = (x + y + z) & 1
    return colour * (n // 2) + row * (L // 2) + (x >> 1)


@dataclass
class PackedRewired:
    """Modified sites for the packed kernel: a bit per site in packed layout, CSR rows in packed order (so
    colour 0's rows, then colour 1's, and a word's modified sites in consecutive rows)."""
    has_modified: int
    words: np.ndarray       # uint32, N / 32
    rank: np.ndarray        # uint32, N / 32: modified sites in the words before
    offsets: np.ndarray     # int32, M + 1
    neighbours: np.ndarray  # int32 packed bit positions
    positions: np.ndarray   # int32, M: each row's packed bit position
    colour_rows: tuple[int, int]  # rows of colour 0, of colour 1


def packed_rewired(lattice: RewiredLattice) -> PackedRewired:
    dim, L, n = lattice.dim, lattice.L, lattice.n_sites
    adj = merged_adjacency(np, lattice)
    sites = np.asarray(adj.sites, dtype=np.int64)
    offsets = np.asarray(adj.offsets, dtype=np.int64)
    neighbours = np.asarray(adj.neighbours, dtype=np.int64)
    n_words = n // 32
    if sites.size == 0:
        one = np.zeros(1, dtype=np.uint32)
        return PackedRewired(0, one, one, np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32),
                             (0, 0))
    pos = bit_position(sites, dim, L)
    order = np.argsort(pos, kind="stable")
    pos = pos[order]
    degrees = np.diff(offsets)[order]
    starts = offsets[:-1][order]
    owner = np.repeat(np.arange(sites.size), degrees)
    within = np.arange(int(degrees.sum())) - np.repeat(np.cumsum(degrees) - degrees, degrees)
    packed_neighbours = bit_position(neighbours[starts[owner] + within], dim, L)
    word_of = pos >> 5
    # distinct sites of one word have distinct bits, so their sum is their OR
    words = np.bincount(word_of, weights=(np.uint64(1) << (pos & 31).astype(np.uint64)).astype(np.float64),
                        minlength=n_words).astype(np.uint64).astype(np.uint32)
    counts = np.bincount(word_of, minlength=n_words)
    rank = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.uint32)
    new_offsets = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int32)
    colour0 = int(np.searchsorted(pos, n // 2))
    return PackedRewired(1, words, rank, new_offsets, packed_neighbours.astype(np.int32), pos.astype(np.int32),
                         (colour0, int(pos.size) - colour0))


def pack(spins: np.ndarray) -> np.ndarray:
    """NumPy twin of multispin_pack: int8 +-1 spins -> uint32 words (tests)."""
    dim, L = spins.ndim, spins.shape[0]
    flat = spins.reshape(-1)
    bits = np.zeros(flat.size, dtype=np.uint8)
    bits[bit_position(np.arange(flat.size), dim, L)] = flat < 0
    return np.packbits(bits, bitorder="little").view(np.uint32)


def unpack(words: np.ndarray, shape) -> np.ndarray:
    """Inverse of ``pack``."""
    dim, L = len(shape), shape[0]
    bits = np.unpackbits(np.asarray(words, dtype=np.uint32).view(np.uint8), bitorder="little")
    n = L ** dim
    down = bits[bit_position(np.arange(n), dim, L)].astype(bool)
    return np.where(down, -1, 1).astype(np.int8).reshape(shape)
