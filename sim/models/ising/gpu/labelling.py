"""Connected-component labelling of bond graphs of the rewired lattice on the GPU (sim/kernels/labelling.cu).

``label_components(xp, lattice, spins, p_bond=1.0, key=(0, 0))`` is the entry point for other modules:
like-spin clusters with p_bond = 1 (geometric clusters), Fortuin-Kasteleyn clusters with p_bond =
1 - exp(-2/T). Labels are the smallest site index of each component, so they are the same whatever the
thread schedule, and equal to sim/labelling.py's CPU reference for the same key.
"""
from __future__ import annotations

import weakref

import numpy as np

from latticelab.sim.models.ising.gpu.graph import DeviceGraph
from latticelab.sim.gpu.kernels import get_kernel
from latticelab.sim.models.ising.gpu import KERNEL_DIR
from latticelab.sim.gpu.philox import bond_threshold, split64
from latticelab.sim.models.ising.lattice import RewiredLattice

THREADS = 256
# Tile shapes (x, y, z) of label_tiles: one site per thread, one warp per row of 32 sites (x is fixed at 32).
# Smaller tiles label faster but leave more faces to label_merge; these had the shortest label + merge + flip
# of the shapes compared by bench/tiles.py (docs/design/ising-kernels.md).
TILES = {2: (32, 8, 1), 3: (32, 8, 4)}


def grid_for(n: int, threads: int = THREADS, cap: int = 4096) -> int:
    return max(1, min(cap, -(-n // threads)))


class Labeller:
    """Labels the bond graph of one lattice; keeps the int32 label array between calls."""

    def __init__(self, xp, lattice: RewiredLattice, graph: DeviceGraph | None = None,
                 tile: tuple[int, int, int] | None = None):
        self.xp = xp
        self.lattice = lattice
        self.dim, self.L, self.n = lattice.dim, lattice.L, lattice.n_sites
        self.graph = graph if graph is not None else DeviceGraph(xp, lattice)
        tx, ty, tz = tile if tile is not None else TILES[self.dim]
        if tx != 32 or ty < 1 or tz < 1 or (self.dim == 2 and tz != 1) or tx * ty * tz > 1024:
            raise ValueError(f"tile: expected (32, TY, TZ) with TZ = 1 in 2D and at most 1024 sites; got {tile}")
        self.tile = (tx, ty, tz)
        self.tile_threads = tx * ty * tz
        names = (f"label_tiles<{self.dim}, {ty}, {tz}>", f"label_merge<{self.dim}, {ty}, {tz}>",
                 "label_compress<0>", "wolff_flip<0>", "cluster_flip<0>")
        self.kernels = {name.split("<")[0]: get_kernel(xp, KERNEL_DIR / "labelling.cu", name, names) for name in names}
        L = self.L
        self.tile_grid = (-(-L // tx), -(-L // ty), -(-L // tz) if self.dim == 3 else 1)
        faces = max(-(-L // t) for t in (tx, ty, tz)[:self.dim])
        most = max(faces * L ** (self.dim - 1), self.graph.n_rewired)
        self.merge_grid = (grid_for(most, THREADS, 1024), self.dim + (1 if self.graph.n_rewired else 0))
        self.labels = xp.empty(self.n, dtype=xp.int32)

    def label(self, spins, bond_probability: float, key: tuple[int, int]):
        """Label the components of the active bonds of ``spins`` (flat C order view kept on the device)."""
        g = self.graph
        seed_lo, seed_hi = split64(key[0])
        stream_lo, stream_hi = split64(key[1])
        threshold = np.uint64(bond_threshold(bond_probability))
        philox = (np.uint32(seed_lo), np.uint32(seed_hi), np.uint32(stream_lo), np.uint32(stream_hi))
        L = np.int32(self.L)
        self.kernels["label_tiles"](self.tile_grid, (self.tile_threads,),
                                    (spins, self.labels, L, *philox, threshold, g.has_modified,
                                     g.mod_bits, g.mod_rank, g.fwd_intact))
        self.kernels["label_merge"](self.merge_grid, (THREADS,),
                                    (spins, self.labels, L, *philox, threshold, g.has_modified, g.mod_bits,
                                     g.mod_rank, g.fwd_intact, g.new_u, g.new_v, np.int32(g.n_rewired)))
        return self.labels

    def compress(self):
        self.kernels["label_compress"]((grid_for(self.n),), (THREADS,), (self.labels, np.int32(self.n)))
        return self.labels


_cache: dict = {}


def _labeller(xp, lattice: RewiredLattice) -> Labeller:
    entry = _cache.get("last")
    if entry is not None and entry[0]() is lattice and entry[1] is xp:
        return entry[2]
    labeller = Labeller(xp, lattice)
    _cache["last"] = (weakref.ref(lattice), xp, labeller)
    return labeller


def label_components(xp, lattice: RewiredLattice, spins, p_bond: float = 1.0, key: tuple[int, int] = (0, 0)):
    """Component labels (int32, shape of ``spins``) of the graph of active bonds of the rewired lattice.

    An edge (i, j) of the lattice's current graph is active when s_i == s_j and, unless p_bond is 1, its
    Philox number under ``key`` = (seed, stream) is below p_bond (sim/gpu/philox.py). Each site's label is
    the smallest site index (flat C order) in its component. The array is a new one on every call.
    """
    spins = xp.ascontiguousarray(spins, dtype=xp.int8)
    if spins.size != lattice.n_sites:
        raise ValueError(f"spins: expected {lattice.n_sites} sites for this lattice; got {spins.size}")
    labeller = _labeller(xp, lattice)
    labeller.label(spins, p_bond, key)
    return labeller.compress().copy().reshape(spins.shape)


def label_like_spin_clusters(spins, lattice: RewiredLattice):
    """Flat labels of the like-spin clusters (p_bond = 1), on the spins' device: the hook sim/clusters.py uses."""
    if isinstance(spins, np.ndarray):
        raise TypeError("spins: the GPU labelling takes a CuPy array; NumPy spins go through sim/labelling.py")
    import cupy
    return label_components(cupy, lattice, spins, 1.0).reshape(-1)
