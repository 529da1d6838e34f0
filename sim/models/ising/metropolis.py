"""Checkerboard Metropolis on a rewired lattice, vectorised for NumPy and CuPy (thesis 003, 7.1.3).

Sites of one colour never share an edge, even after rewiring, so all of them are updated at once.
Unmodified sites sum their lattice neighbours by shifting the whole array; the few sites touched by
rewiring then get their field from their explicit adjacency.
"""
from __future__ import annotations

import numpy as np

from latticelab.sim.models.ising.graph_arrays import colour_adjacency
from latticelab.sim.models.ising.lattice import RewiredLattice


def checkerboard_colour(xp, dim: int, L: int):
    """Boolean array, True on colour-1 sites (odd coordinate sum)."""
    grids = xp.indices((L,) * dim, dtype=xp.int32).sum(axis=0)
    return (grids % 2).astype(bool)


def lattice_field(xp, spins):
    """Sum of the 2*dim lattice neighbours of every site (periodic)."""
    h = xp.zeros_like(spins)
    for axis in range(spins.ndim):
        h += xp.roll(spins, 1, axis)
        h += xp.roll(spins, -1, axis)
    return h


class CheckerboardMetropolis:
    def __init__(self, xp, lattice: RewiredLattice):
        self.xp = xp
        self.colour1 = checkerboard_colour(xp, lattice.dim, lattice.L)
        self.adjacency = colour_adjacency(xp, lattice)
        self.max_degree = lattice.max_degree
        self.field_dtype = xp.int8 if self.max_degree <= 60 else xp.int16
        self._table_T, self._table = None, None

    def _acceptance(self, T: float):
        """min(1, exp(-dE/T)) with dE = 2 s h, tabulated for s*h in [-k, k]; rebuilt only when T changes."""
        if T != self._table_T:
            k = self.max_degree
            table = np.minimum(1.0, np.exp(-2.0 * np.arange(-k, k + 1) / T)).astype(np.float32)
            self._table_T, self._table = T, self.xp.asarray(table)
        return self._table

    def _field(self, spins, colour: int):
        xp = self.xp
        h = lattice_field(xp, spins.astype(self.field_dtype, copy=False))
        adj = self.adjacency[colour]
        if adj.size:
            flat = spins.reshape(-1)
            sums = xp.bincount(adj.segment, weights=flat[adj.neighbours], minlength=adj.size)
            # index by coordinates: h follows spins' memory layout (zeros_like), and reshape(-1) of a
            # Fortran-ordered h would be a copy, silently dropping the rewired sites' fields
            h[xp.unravel_index(adj.sites, h.shape)] = sums.astype(h.dtype)
        return h

    def sweep(self, spins, T: float, gen):
        """One sweep (both colours); returns (new spins, mask of flipped sites)."""
        xp = self.xp
        k = self.max_degree
        table = self._acceptance(T)
        r = gen.random(spins.shape, dtype=np.float32)
        flipped = None
        for colour in (0, 1):
            h = self._field(spins, colour)
            sh = spins.astype(h.dtype) * h
            accept = r < table[(sh + k).astype(np.int16 if k > 60 else np.uint8)]
            accept &= self.colour1 if colour else ~self.colour1
            spins = xp.where(accept, -spins, spins)
            flipped = accept if flipped is None else flipped | accept
        return spins, flipped
