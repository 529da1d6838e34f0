"""The rewired lattice as the kernels read it (sim/kernels/rewired.cuh), built once per graph.

Unmodified sites need nothing: their neighbours follow from their coordinates. For the modified ones:
a bit per site (``mod_bits``) with a running count per 32-bit word (``mod_rank``), which give a modified
site's row in the site-sorted CSR adjacency of all modified sites (``offsets``, ``neighbours``) without a
search; ``fwd_intact`` says which of a modified site's forward lattice edges survived rewiring. The removed
lattice edges and their replacements (``removed_*``, ``new_*``) serve the energy and the cluster bonds.
At p = 0 the arrays are one-element placeholders and ``has_modified`` is 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from latticelab.sim.models.ising.graph_arrays import merged_adjacency
from latticelab.sim.models.ising.lattice import RewiredLattice, lattice_edge_ends


@dataclass
class HostGraph:
    n_sites: int
    has_modified: int
    mod_bits: np.ndarray     # uint32, ceil(N / 32)
    mod_rank: np.ndarray     # uint32, ceil(N / 32)
    offsets: np.ndarray      # int32, M + 1
    neighbours: np.ndarray   # int32
    fwd_intact: np.ndarray   # uint8, M
    removed_u: np.ndarray    # int32, R
    removed_v: np.ndarray
    new_u: np.ndarray
    new_v: np.ndarray
    max_k: int               # largest |s*h| any site can have


def _nonempty(a: np.ndarray) -> np.ndarray:
    return a if a.size else np.zeros(1, dtype=a.dtype)


def host_graph(lattice: RewiredLattice) -> HostGraph:
    dim, n = lattice.dim, lattice.n_sites
    words = (n + 31) // 32
    adj = merged_adjacency(np, lattice)
    sites = np.asarray(adj.sites, dtype=np.int64)
    word_of, bit_of = sites >> 5, (sites & 31).astype(np.uint64)
    # Distinct sites of one word have distinct bits, so their sum is their OR.
    mod_bits = np.bincount(word_of, weights=(np.uint64(1) << bit_of).astype(np.float64),
                           minlength=words).astype(np.uint64).astype(np.uint32)
    counts = np.bincount(word_of, minlength=words)
    mod_rank = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.uint32)
    ids = sites[:, None] * dim + np.arange(dim)
    rewired = lattice.rewired_edge_ids
    if rewired.size:
        pos = np.minimum(np.searchsorted(rewired, ids), rewired.size - 1)
        intact = rewired[pos] != ids
    else:
        intact = np.ones(ids.shape, dtype=bool)
    fwd_intact = (intact * (1 << np.arange(dim))).sum(axis=1).astype(np.uint8)
    u0, v0 = lattice_edge_ends(rewired, dim, lattice.L)
    new = lattice.new_edges.reshape(-1, 2)
    return HostGraph(
        n_sites=n, has_modified=int(sites.size > 0), mod_bits=mod_bits, mod_rank=mod_rank,
        offsets=np.asarray(adj.offsets, dtype=np.int32), neighbours=_nonempty(np.asarray(adj.neighbours, np.int32)),
        fwd_intact=_nonempty(fwd_intact), removed_u=_nonempty(u0.astype(np.int32)),
        removed_v=_nonempty(v0.astype(np.int32)), new_u=_nonempty(new[:, 0].astype(np.int32)),
        new_v=_nonempty(new[:, 1].astype(np.int32)), max_k=max(lattice.max_degree, 2 * dim))


class DeviceGraph:
    """HostGraph's arrays on the device (``xp``), plus the counts the launches need."""

    def __init__(self, xp, lattice: RewiredLattice):
        host = host_graph(lattice)
        self.host = host
        self.n_rewired = int(lattice.rewired_edge_ids.size)
        self.has_modified = np.int32(host.has_modified)
        for name in ("mod_bits", "mod_rank", "offsets", "neighbours", "fwd_intact",
                     "removed_u", "removed_v", "new_u", "new_v"):
            setattr(self, name, xp.asarray(getattr(host, name)))
        self.max_k = host.max_k
