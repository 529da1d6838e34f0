"""Wolff single-cluster update on a rewired lattice, by breadth-first growth (thesis 003, 7.2).

The cluster is the connected component of a random seed site in the random graph of like-spin bonds,
each kept with probability 1 - exp(-2/T). Growing it one frontier at a time tests every bond at most
once, which gives that component's distribution whatever the order the frontier is processed in.
"""
from __future__ import annotations

import math

from latticelab.sim.models.ising.graph_arrays import gather_neighbours, merged_adjacency
from latticelab.sim.models.ising.lattice import RewiredLattice


class WolffBFS:
    def __init__(self, xp, lattice: RewiredLattice):
        self.xp = xp
        self.dim, self.L = lattice.dim, lattice.L
        self.adjacency = merged_adjacency(xp, lattice)

    def _neighbours(self, frontier):
        xp, dim, L = self.xp, self.dim, self.L
        adj = self.adjacency
        if adj.size:
            pos = xp.minimum(xp.searchsorted(adj.sites, frontier), adj.size - 1)
            modified = adj.sites[pos] == frontier
            regular = frontier[~modified]
            explicit = gather_neighbours(xp, adj, pos[modified])
        else:
            regular, explicit = frontier, None
        parts = []
        for axis in range(dim):
            stride = L ** (dim - 1 - axis)
            coord = (regular // stride) % L
            parts.append(regular + (((coord + 1) % L) - coord) * stride)
            parts.append(regular + (((coord - 1) % L) - coord) * stride)
        if explicit is not None:
            parts.append(explicit)
        return xp.concatenate(parts)

    def flip(self, spins, T: float, gen):
        """Grow and flip one cluster; returns (new spins, mask of the cluster's sites)."""
        xp = self.xp
        p_add = -math.expm1(-2.0 / T)
        flat = spins.reshape(-1)
        n = flat.size
        seed = xp.asarray(gen.integers(0, n, size=1)).astype(xp.int64)
        in_cluster = xp.zeros(n, dtype=bool)
        in_cluster[seed] = True
        spin = flat[seed]
        frontier = seed
        while frontier.size:
            candidates = self._neighbours(frontier)
            candidates = candidates[(flat[candidates] == spin) & ~in_cluster[candidates]]
            if candidates.size == 0:
                break
            bonds = gen.random(int(candidates.size), dtype=xp.float32) < p_add
            frontier = xp.unique(candidates[bonds])
            in_cluster[frontier] = True
        mask = in_cluster.reshape(spins.shape)
        return xp.where(mask, -spins, spins), mask
