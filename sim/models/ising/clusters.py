"""Like-spin connected components over the rewired graph and their size distribution (thesis 003,
figure 7.17: two neighbours -- by a lattice edge or a rewired link -- belong to one cluster when their
spins are equal).

One entry point, ``label_like_spin_clusters(spins, lattice)``, hides the labelling method, so a faster
GPU labelling (the fast-kernel work) can take over without changes here or in callers:
* the module ``sim.models.ising.gpu.labelling``, with ``label_like_spin_clusters(spins, lattice)``, is
  used when present for CuPy spins;
* otherwise the generic labelling of sim/analysis/components.py runs on the like-spin bonds: NumPy spins
  through scipy.sparse.csgraph (``csgraph_labels``), CuPy spins through the vectorised hook-and-jump
  (``label_by_hook_and_jump``, array-module agnostic).
Labels are flat arrays over the sites (C order); a label is the smallest site id of its cluster.
"""
from __future__ import annotations

import numpy as np

from latticelab.sim.analysis.components import csgraph_labels, label_by_hook_and_jump
from latticelab.sim.backend import array_module, to_numpy
from latticelab.sim.models.ising.lattice import RewiredLattice

METHODS = ("auto", "scipy", "hook-jump")


def like_spin_bonds(spins, lattice: RewiredLattice):
    """(u, v) site arrays of the graph's edges whose two spins are equal, on the spins' device.

    Lattice edges come from the coordinates (site -> site + e_axis, periodic), minus the rewired ones;
    the rewiring's new edges are added. Nothing of size E is ever built on the host.
    """
    xp = array_module(spins)
    shape = tuple(spins.shape)
    if shape != (lattice.L,) * lattice.dim:
        raise ValueError(f"spins of shape {shape} do not fit the {lattice.dim}D lattice of side {lattice.L}")
    n = spins.size
    flat = spins.reshape(-1)
    site = xp.arange(n, dtype=xp.int64).reshape(shape)
    kept = xp.ones((n, lattice.dim), dtype=bool)
    if lattice.rewired_edge_ids.size:
        kept.reshape(-1)[xp.asarray(lattice.rewired_edge_ids)] = False
    us, vs = [], []
    for axis in range(lattice.dim):
        nb = xp.roll(site, -1, axis=axis).reshape(-1)          # site + e_axis, periodic
        bond = (flat == flat[nb]) & kept[:, axis]
        us.append(site.reshape(-1)[bond])
        vs.append(nb[bond])
    if lattice.new_edges.size:
        a = xp.asarray(lattice.new_edges[:, 0])
        b = xp.asarray(lattice.new_edges[:, 1])
        same = flat[a] == flat[b]
        us.append(a[same])
        vs.append(b[same])
    return xp.concatenate(us), xp.concatenate(vs)


def _gpu_labeller():
    try:
        from latticelab.sim.models.ising.gpu import labelling  # provided by the fast-kernel work, when it exists
    except ImportError:
        return None
    return getattr(labelling, "label_like_spin_clusters", None)


def label_like_spin_clusters(spins, lattice: RewiredLattice, method: str = "auto"):
    """Flat cluster labels (smallest site id of each like-spin component), on the spins' device."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    xp = array_module(spins)
    if method == "auto" and xp is not np:
        fast = _gpu_labeller()
        if fast is not None:
            return fast(spins, lattice)
    u, v = like_spin_bonds(spins, lattice)
    if method == "scipy" or (method == "auto" and xp is np):
        return xp.asarray(csgraph_labels(spins.size, u, v))
    return label_by_hook_and_jump(spins.size, u, v, xp)


def cluster_sizes(spins, lattice: RewiredLattice, method: str = "auto") -> dict[int, np.ndarray]:
    """Sizes of the like-spin clusters, by spin value: {+1: sizes of up clusters, -1: down clusters}
    (host int64 arrays, largest first)."""
    xp = array_module(spins)
    labels = label_like_spin_clusters(spins, lattice, method)
    counts = xp.bincount(labels, minlength=spins.size)
    roots = xp.nonzero(counts)[0]
    sizes = counts[roots]
    spin_of_root = spins.reshape(-1)[roots]
    out = {}
    for value in (1, -1):
        out[value] = np.sort(to_numpy(sizes[spin_of_root == value]).astype(np.int64))[::-1]
    return out

