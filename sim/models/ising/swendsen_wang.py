"""Connected components of bond graphs on the rewired lattice: the CPU reference and the CPU cluster updates.

The bond graph: an edge (i, j) of the lattice's current graph is active when s_i == s_j and, for bond
probability p < 1, its Philox4x32 number under key = (seed, stream) is below p, drawn exactly as the GPU
kernels draw it (sim/gpu/philox.py): lattice edge (site, axis) -> word ``axis`` of the call
(site, TAG_BOND), rewired edge j -> word 0 of (j, TAG_NEW_BOND). Labels are the smallest site index of
each component, so CPU and GPU results can be compared element by element.

Components come from the generic labelling of sim/analysis/components.py: scipy.sparse.csgraph
(``csgraph_labels``), cross-checked by its independent NumPy union-find (``union_find_labels``).
``swendsen_wang_update`` is the CPU Swendsen-Wang step of ReferenceEngine.
"""
from __future__ import annotations

import math

import numpy as np

from latticelab.sim.analysis.components import component_sizes, csgraph_labels, union_find_labels
from latticelab.sim.backend import to_numpy
from latticelab.sim.gpu import philox
from latticelab.sim.models.ising.lattice import RewiredLattice, lattice_edge_ends


def _intact_lattice_edges(lattice: RewiredLattice) -> np.ndarray:
    """(N, dim) bool: lattice edge (site, axis) is still in the graph."""
    intact = np.ones(lattice.n_edges, dtype=bool)
    intact[lattice.rewired_edge_ids] = False
    return intact.reshape(lattice.n_sites, lattice.dim)


def active_bonds(lattice: RewiredLattice, spins, p_bond: float = 1.0, key: tuple[int, int] = (0, 0)):
    """(u, v) int64 arrays of the active edges: lattice edges first (site order), then the rewired ones."""
    dim, L, n = lattice.dim, lattice.L, lattice.n_sites
    flat = to_numpy(spins).reshape(-1)
    if flat.size != n:
        raise ValueError(f"spins: expected {n} sites for this lattice; got {flat.size}")
    threshold = philox.bond_threshold(p_bond)
    sites = np.arange(n, dtype=np.int64)
    ids = (sites[:, None] * dim + np.arange(dim)).reshape(-1)
    u, v = lattice_edge_ends(ids, dim, L)
    on = _intact_lattice_edges(lattice).reshape(-1) & (flat[u] == flat[v])
    if threshold <= 0xFFFFFFFF:
        on &= philox.bond_uniforms(key, n, dim).reshape(-1).astype(np.uint64) < threshold
    new = lattice.new_edges.reshape(-1, 2)
    nu, nv = new[:, 0], new[:, 1]
    new_on = flat[nu] == flat[nv]
    if threshold <= 0xFFFFFFFF and new.shape[0]:
        new_on &= philox.draw(key, philox.TAG_NEW_BOND, np.arange(new.shape[0]))[0].astype(np.uint64) < threshold
    return np.concatenate([u[on], nu[new_on]]), np.concatenate([v[on], nv[new_on]])


def label_components(xp, lattice: RewiredLattice, spins, p_bond: float = 1.0, key: tuple[int, int] = (0, 0),
                     method: str = "csgraph"):
    """Component labels (int64, shape of ``spins``, on ``xp``) of the active bonds; see the module docstring."""
    u, v = active_bonds(lattice, spins, p_bond, key)
    if method == "csgraph":
        labels = csgraph_labels(lattice.n_sites, u, v)
    elif method == "union-find":
        labels = union_find_labels(lattice.n_sites, u, v)
    else:
        raise ValueError(f"method must be 'csgraph' or 'union-find'; got {method!r}")
    return xp.asarray(labels.reshape((lattice.L,) * lattice.dim))


def fk_bond_probability(T: float) -> float:
    """Fortuin-Kasteleyn bond probability 1 - exp(-2/T) (J = k_B = 1)."""
    return -math.expm1(-2.0 / T)


def swendsen_wang_update(xp, lattice: RewiredLattice, spins, T: float, key: tuple[int, int], want_mask: bool = True):
    """One Swendsen-Wang sweep on the CPU, drawing exactly what the GPU draws: returns (spins, mask or None).

    Every cluster of the FK bond graph flips when word 0 of the Philox call (root, TAG_CLUSTER_FLIP) is odd.
    """
    labels = to_numpy(label_components(np, lattice, spins, fk_bond_probability(T), key)).reshape(-1)
    roots = np.unique(labels)
    flips_root = (philox.draw(key, philox.TAG_CLUSTER_FLIP, roots)[0] & 1).astype(bool)
    flip = flips_root[np.searchsorted(roots, labels)].reshape(spins.shape)
    mask = xp.asarray(flip)
    new = xp.where(mask, -spins, spins).astype(spins.dtype)
    return new, (mask if want_mask else None)


def fk_cluster_sizes(lattice: RewiredLattice, spins, T: float, key: tuple[int, int]) -> np.ndarray:
    """Sizes of the Fortuin-Kasteleyn clusters of ``spins`` at T, bonds drawn under ``key``, largest first."""
    return component_sizes(label_components(np, lattice, spins, fk_bond_probability(T), key))
