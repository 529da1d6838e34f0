"""The Ising update engines: the vectorised NumPy/CuPy reference, and the choice of the CUDA engine when
the backend is CuPy (sim/models/ising/gpu/engine.py follows the same protocol)."""
from __future__ import annotations

import numpy as np

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.ising.lattice import RewiredLattice, lattice_edge_ends
from latticelab.sim.rng import StreamRNG


def make_engine(xp, lattice: RewiredLattice):
    """The update implementations for a backend: the fast CUDA kernels when present, else the reference."""
    if xp is not np:
        try:
            from latticelab.sim.models.ising.gpu.engine import CudaEngine
        except ImportError:
            pass
        else:
            return CudaEngine(xp, lattice)
    return ReferenceEngine(xp, lattice)


class ReferenceEngine:
    """Vectorised NumPy/CuPy updates: checkerboard Metropolis and breadth-first Wolff.

    The engine protocol (the CUDA engine in gpu/engine.py follows it): ``metropolis`` and ``wolff`` take
    (spins, T, rng, want_mask) and return (new spins, mask of flipped sites or None when not wanted);
    ``measure(spins)`` returns (sum over edges of s_i s_j, sum of spins) with one device sync.
    """

    def __init__(self, xp, lattice: RewiredLattice):
        from latticelab.sim.models.ising.metropolis import CheckerboardMetropolis
        from latticelab.sim.models.ising.wolff import WolffBFS
        self.xp = xp
        self.lattice = lattice
        self._metropolis = CheckerboardMetropolis(xp, lattice)
        self._wolff = WolffBFS(xp, lattice)
        u, v = lattice_edge_ends(lattice.rewired_edge_ids, lattice.dim, lattice.L)
        self._removed = (xp.asarray(u), xp.asarray(v))
        self._added = (xp.asarray(lattice.new_edges[:, 0]), xp.asarray(lattice.new_edges[:, 1]))

    def metropolis(self, spins, T: float, rng: StreamRNG, want_mask: bool = True):
        return self._metropolis.sweep(spins, T, rng.next_stream())

    def wolff(self, spins, T: float, rng: StreamRNG, want_mask: bool = True):
        return self._wolff.flip(spins, T, rng.next_stream())

    def swendsen_wang(self, spins, T: float, rng: StreamRNG, want_mask: bool = True):
        from latticelab.sim.models.ising.swendsen_wang import swendsen_wang_update
        return swendsen_wang_update(self.xp, self.lattice, spins, T, rng.next_key(), want_mask)

    def cluster_sizes(self, spins, T: float, key: tuple[int, int]) -> np.ndarray:
        from latticelab.sim.models.ising.swendsen_wang import fk_cluster_sizes
        return fk_cluster_sizes(self.lattice, spins, T, key)

    def measure(self, spins) -> tuple[float, int]:
        """(sum over edges of s_i s_j, sum of spins): the lattice's bonds, minus the rewired ones, plus
        their replacements."""
        xp = self.xp
        s = spins.astype(xp.int32)
        total = sum((s * xp.roll(s, -1, axis)).sum() for axis in range(s.ndim))
        flat = s.reshape(-1)
        if self._removed[0].size:
            total = total - (flat[self._removed[0]] * flat[self._removed[1]]).sum()
            total = total + (flat[self._added[0]] * flat[self._added[1]]).sum()
        bonds, spin_sum = (int(v) for v in to_numpy(xp.stack([xp.asarray(total), s.sum()])))
        return float(bonds), spin_sum
