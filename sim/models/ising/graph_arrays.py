"""The rewired lattice's explicit adjacency as backend arrays, shared by the reference updates."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from latticelab.sim.models.ising.lattice import ModifiedAdjacency, RewiredLattice, regular_neighbours


@dataclass
class Adjacency:
    """CSR adjacency of some modified sites on the backend, plus each entry's owner row (``segment``)."""
    sites: object
    offsets: object
    neighbours: object
    segment: object

    @classmethod
    def from_host(cls, xp, adj: ModifiedAdjacency) -> "Adjacency":
        segment = np.repeat(np.arange(adj.sites.size, dtype=np.int64), adj.degrees)
        return cls(*(xp.asarray(a) for a in (adj.sites, adj.offsets, adj.neighbours, segment)))

    @property
    def size(self) -> int:
        return int(self.sites.size)


def colour_adjacency(xp, lattice: RewiredLattice) -> tuple[Adjacency, Adjacency]:
    return tuple(Adjacency.from_host(xp, adj) for adj in lattice.by_colour)


def merged_adjacency(xp, lattice: RewiredLattice) -> Adjacency:
    """One CSR over all modified sites (both colours), sorted by site."""
    a, b = lattice.by_colour
    sites = np.concatenate([a.sites, b.sites])
    order = np.argsort(sites, kind="stable")
    degrees = np.concatenate([a.degrees, b.degrees])[order]
    starts = np.concatenate([a.offsets[:-1], b.offsets[:-1] + a.neighbours.size])[order]
    neighbours_all = np.concatenate([a.neighbours, b.neighbours])
    total = int(degrees.sum())
    owner = np.repeat(np.arange(sites.size), degrees)
    within = np.arange(total) - np.repeat(np.cumsum(degrees) - degrees, degrees)
    neighbours = neighbours_all[starts[owner] + within] if total else np.empty(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    merged = ModifiedAdjacency(sites=sites[order], offsets=offsets, neighbours=neighbours.astype(np.int64))
    return Adjacency.from_host(xp, merged)


def gather_neighbours(xp, adj: Adjacency, rows):
    """Concatenated neighbour lists of the CSR rows ``rows`` (works on NumPy and CuPy)."""
    starts = adj.offsets[rows]
    counts = adj.offsets[rows + 1] - starts
    ends = xp.cumsum(counts)
    total = int(ends[-1]) if ends.size else 0
    if total == 0:
        return xp.empty(0, dtype=adj.neighbours.dtype)
    idx = xp.arange(total)
    owner = xp.searchsorted(ends, idx, side="right")
    return adj.neighbours[starts[owner] + idx - (ends[owner] - counts[owner])]


def full_adjacency(lattice: RewiredLattice) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64, neighbours int32): the whole rewired graph in CSR form (host), from what the lattice
    stores -- its CSR rows for the modified sites, the lattice neighbours (from coordinates) for the others.
    Rows are sorted, every edge is in both rows, no self-loops: the form sim/analysis/graph.py measures."""
    dim, n = lattice.dim, lattice.n_sites
    degree = np.full(n, 2 * dim, dtype=np.int64)
    for adj in lattice.by_colour:
        degree[adj.sites] = adj.degrees
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(degree, out=offsets[1:])
    neighbours = np.empty(int(offsets[-1]), dtype=np.int32)
    plain = np.ones(n, dtype=bool)
    plain[lattice.modified_sites] = False
    sites = np.flatnonzero(plain)
    rows = np.sort(regular_neighbours(sites, dim, lattice.L), axis=1)
    neighbours[(offsets[sites][:, None] + np.arange(2 * dim)).ravel()] = rows.ravel()
    for adj in lattice.by_colour:     # stored rows are sorted (lattice._modified_adjacency sorts them)
        within = np.arange(adj.neighbours.size) - np.repeat(adj.offsets[:-1], adj.degrees)
        neighbours[np.repeat(offsets[adj.sites], adj.degrees) + within] = adj.neighbours
    return offsets, neighbours
