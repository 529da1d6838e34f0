"""Like-spin connected components over the rewired graph and their size distribution (thesis 003,
figure 7.17: two neighbours -- by a lattice edge or a rewired link -- belong to one cluster when their
spins are equal).

One entry point, ``label_like_spin_clusters(spins, lattice)``, hides the labelling method, so a faster
GPU labelling (sim/gpu, from the fast-kernel work) can take over without changes here or in callers:
* a module ``sim.gpu.labelling`` with ``label_like_spin_clusters(spins, lattice)`` is used when present
  for CuPy spins;
* otherwise NumPy spins go through ``scipy.sparse.csgraph.connected_components`` and CuPy spins through a
  vectorised hook-and-jump labelling (``label_by_hook_and_jump``, array-module agnostic).
Labels are flat arrays over the sites (C order); a label is the smallest site id of its cluster.
"""
from __future__ import annotations

import numpy as np

from latticelab.sim.models.ising.lattice import RewiredLattice

METHODS = ("auto", "scipy", "hook-jump")


def _xp_of(array):
    if isinstance(array, np.ndarray):
        return np
    import cupy
    return cupy


def like_spin_bonds(spins, lattice: RewiredLattice):
    """(u, v) site arrays of the graph's edges whose two spins are equal, on the spins' device.

    Lattice edges come from the coordinates (site -> site + e_axis, periodic), minus the rewired ones;
    the rewiring's new edges are added. Nothing of size E is ever built on the host.
    """
    xp = _xp_of(spins)
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


def label_by_scipy(n_sites: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    graph = coo_matrix((np.ones(u.size, dtype=np.int8), (u, v)), shape=(n_sites, n_sites)).tocsr()
    _, comp = connected_components(graph, directed=False)
    # relabel each component by its smallest site, the convention of the other methods
    smallest = np.full(comp.max() + 1 if comp.size else 0, n_sites, dtype=np.int64)
    np.minimum.at(smallest, comp, np.arange(n_sites, dtype=np.int64))
    return smallest[comp]


def _scatter_min(xp, target, index, values):
    if xp is np:
        np.minimum.at(target, index, values)
    else:
        import cupyx
        cupyx.scatter_min(target, index, values)


def label_by_hook_and_jump(n_sites: int, u, v, xp=None):
    """Connected components by repeated hooking of roots onto smaller roots and pointer jumping.

    Invariant: label[i] <= i and label[label[i]] <= label[i]. Each round hooks the root of every
    still-split edge's larger end onto the smaller root, then compresses all paths to roots. The rounds
    needed grow like the log of the component diameter; every array operation is one vectorised call.
    """
    xp = xp or _xp_of(u)
    labels = xp.arange(n_sites, dtype=xp.int64)
    while u.size:
        lu, lv = labels[u], labels[v]
        split = lu != lv
        if not bool(split.any()):
            break
        u, v, lu, lv = u[split], v[split], lu[split], lv[split]
        low = xp.minimum(lu, lv)
        _scatter_min(xp, labels, xp.maximum(lu, lv), low)
        while True:  # pointer jumping until every site points at its root
            jumped = labels[labels]
            if not bool((jumped != labels).any()):
                break
            labels = jumped
    return labels


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
    xp = _xp_of(spins)
    if method == "auto" and xp is not np:
        fast = _gpu_labeller()
        if fast is not None:
            return fast(spins, lattice)
    u, v = like_spin_bonds(spins, lattice)
    if method == "scipy" or (method == "auto" and xp is np):
        host = (lambda a: a) if xp is np else (lambda a: a.get())
        return xp.asarray(label_by_scipy(spins.size, host(u), host(v)))
    return label_by_hook_and_jump(spins.size, u, v, xp)


def cluster_sizes(spins, lattice: RewiredLattice, method: str = "auto") -> dict[int, np.ndarray]:
    """Sizes of the like-spin clusters, by spin value: {+1: sizes of up clusters, -1: down clusters}
    (host int64 arrays, largest first)."""
    xp = _xp_of(spins)
    labels = label_like_spin_clusters(spins, lattice, method)
    counts = xp.bincount(labels, minlength=spins.size)
    roots = xp.nonzero(counts)[0]
    sizes = counts[roots]
    spin_of_root = spins.reshape(-1)[roots]
    out = {}
    for value in (1, -1):
        s = sizes[spin_of_root == value]
        s = s if xp is np else s.get()
        out[value] = np.sort(s.astype(np.int64))[::-1]
    return out


def size_histogram(sizes: np.ndarray, n_sites: int) -> tuple[np.ndarray, np.ndarray]:
    """Histogram of cluster sizes over powers of two: bin i counts clusters of size in [2^i, 2^(i+1)).

    Returns (bin lower edges, counts); the last edge covers the whole lattice.
    """
    top = int(np.floor(np.log2(max(n_sites, 1)))) + 1
    edges = 2 ** np.arange(top + 1, dtype=np.int64)
    counts, _ = np.histogram(np.asarray(sizes), bins=edges)
    return edges[:-1], counts.astype(np.int64)


def cluster_sizes_of_model(model, method: str = "auto") -> dict[int, np.ndarray]:
    """Cluster sizes of an ``IsingModel`` (its spins on its device, its rewired graph)."""
    return cluster_sizes(model.spins, model.graph, method)
