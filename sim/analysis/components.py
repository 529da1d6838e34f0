"""Connected components of a graph given as edge lists (u, v) over sites 0 .. n-1: the one generic,
model-free labelling path.

Convention: a site's label is the smallest site index of its component, so every method -- and the GPU
labelling kernels of a model -- gives the very same label array, comparable element by element.

* ``csgraph_labels``: scipy.sparse.csgraph on the host, the CPU path.
* ``union_find_labels``: an independent vectorised NumPy union-find, to cross-check the CPU path.
* ``label_by_hook_and_jump``: hook-and-jump on the edges' own array module (NumPy or CuPy), used for
  CuPy arrays when no faster labelling kernels exist.
* ``min_site_labels`` turns any component ids into smallest-site labels; ``component_sizes`` measures them.

Which edges make the graph (like spins, random bonds, rewired links) is the model's business.
"""
from __future__ import annotations

import numpy as np

from latticelab.sim.backend import array_module, to_numpy


def min_site_labels(component) -> np.ndarray:
    """Relabel component ids (any integers per site) by the smallest site index of each component (int64, flat)."""
    component = to_numpy(component).reshape(-1)
    n = component.size
    if n and component.dtype.kind in "iu" and component.min() >= 0 and component.max() < n:
        # dense ids (what connected_components gives): one scatter-min, no sort
        smallest = np.full(int(component.max()) + 1, n, dtype=np.int64)
        np.minimum.at(smallest, component, np.arange(n, dtype=np.int64))
        return smallest[component]
    _, first, inverse = np.unique(component, return_index=True, return_inverse=True)
    return first[inverse.reshape(-1)].astype(np.int64)


def csgraph_labels(n: int, u, v) -> np.ndarray:
    """Smallest-site labels (host int64, flat) of the undirected graph on ``n`` sites with edges (u[k], v[k]),
    by scipy.sparse.csgraph.connected_components. Edges on a device are copied to the host.

    The edges go in as a directed CSR graph (rows sorted by counting, float64 weights: what csgraph works on,
    so it copies nothing) whose weakly connected components are the undirected graph's components; building
    the CSR arrays here costs a third of what a COO matrix's conversions cost on small lattices."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components
    u, v = to_numpy(u).reshape(-1), to_numpy(v).reshape(-1)
    order = np.argsort(u, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    graph = csr_matrix((np.ones(u.size), v[order].astype(np.int32), indptr), shape=(n, n))
    _, component = connected_components(graph, directed=True, connection="weak")
    return min_site_labels(component)


def union_find_labels(n: int, u, v) -> np.ndarray:
    """Smallest-site labels by vectorised union-find: hook every edge's larger root onto its smaller one,
    then compress paths to the roots, until every edge joins two sites of one root."""
    parent = np.arange(n, dtype=np.int64)
    u, v = to_numpy(u).astype(np.int64, copy=False), to_numpy(v).astype(np.int64, copy=False)
    while True:
        while True:  # full compression: parent[i] is a root
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand
        ru, rv = parent[u], parent[v]
        differ = ru != rv
        if not differ.any():
            return parent
        hi, lo = np.maximum(ru[differ], rv[differ]), np.minimum(ru[differ], rv[differ])
        np.minimum.at(parent, hi, lo)


def _scatter_min(xp, target, index, values):
    """target[index] = min(target[index], values), repeated indices included."""
    if xp is np or hasattr(xp.minimum, "at"):   # CuPy has ufunc.at since v13
        xp.minimum.at(target, index, values)
    else:
        import cupyx
        cupyx.scatter_min(target, index, values)


def label_by_hook_and_jump(n_sites: int, u, v, xp=None):
    """Smallest-site labels (int64, flat, on the edges' array module) by repeated hooking of roots onto
    smaller roots and pointer jumping.

    Invariant: label[i] <= i and label[label[i]] <= label[i]. Each round hooks the root of every
    still-split edge's larger end onto the smaller root, then compresses all paths to roots. The rounds
    needed grow like the log of the component diameter; every array operation is one vectorised call.
    """
    xp = xp or array_module(u)
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


def component_sizes(labels) -> np.ndarray:
    """Sizes of the components of a label array (NumPy or CuPy, counted on its own device), host int64,
    largest first."""
    xp = array_module(labels)
    counts = xp.bincount(labels.reshape(-1))
    return np.sort(to_numpy(counts[counts > 0]).astype(np.int64))[::-1]
