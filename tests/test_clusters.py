"""sim/models/ising/clusters.py: like-spin clusters over the rewired graph against a brute-force breadth-first
search."""
from collections import deque

import numpy as np
import pytest

from latticelab.sim.analysis.components import label_by_hook_and_jump
from latticelab.sim.analysis.statistics import size_histogram
from latticelab.sim.models.ising.clusters import cluster_sizes, label_like_spin_clusters, like_spin_bonds
from latticelab.sim.models.ising.lattice import build_lattice


def bfs_labels(spins, lattice):
    """Brute force: adjacency lists from the graph's explicit edge list, BFS over equal spins."""
    flat = spins.reshape(-1)
    n = flat.size
    adj = [[] for _ in range(n)]
    for a, b in lattice.edges():
        adj[a].append(b)
        adj[b].append(a)
    labels = np.full(n, -1, dtype=np.int64)
    for start in range(n):
        if labels[start] >= 0:
            continue
        labels[start] = start  # starts are visited in increasing order: the smallest site of its cluster
        queue = deque([start])
        while queue:
            i = queue.popleft()
            for j in adj[i]:
                if labels[j] < 0 and flat[j] == flat[i]:
                    labels[j] = start
                    queue.append(j)
    return labels


CASES = [(2, 8, 0.0, "all"), (2, 10, 0.3, "all"), (2, 12, 0.2, "x"), (3, 6, 0.2, "all"),
         (3, 6, 0.25, "x"), (3, 8, 0.15, "xy"), (2, 16, 1.0, "y")]


@pytest.mark.parametrize("dim,L,p,dims", CASES)
@pytest.mark.parametrize("method", ["scipy", "hook-jump"])
def test_labels_match_brute_force_bfs_on_rewired_graphs(dim, L, p, dims, method):
    rng = np.random.default_rng(dim * 100 + L)
    lattice = build_lattice(dim, L, p, dims, rng)
    if p > 0:
        assert lattice.new_edges.shape[0] > 0
    for up_fraction in (0.5, 0.65):  # near and above site percolation
        spins = np.where(rng.random((L,) * dim) < up_fraction, 1, -1).astype(np.int8)
        got = label_like_spin_clusters(spins, lattice, method=method)
        np.testing.assert_array_equal(got, bfs_labels(spins, lattice))


def test_rewired_links_join_clusters_and_removed_lattice_edges_split_them():
    L = 8
    spins = -np.ones((L, L), np.int8)
    spins[1, 1] = spins[5, 5] = 1           # two isolated up spins, same colour (sum of coords even)
    lat = build_lattice(2, L, 0.0, "all", np.random.default_rng(0))
    sizes = cluster_sizes(spins, lat)
    assert list(sizes[1]) == [1, 1] and list(sizes[-1]) == [L * L - 2]
    # a rewired link between them: replace lattice edge (site 9 -> 10, axis x) by (9, 45)
    lat.rewired_edge_ids = np.array([9 * 2 + 1], np.int64)
    lat.new_edges = np.array([[9, 45]], np.int64)
    sizes = cluster_sizes(spins, lat)
    assert list(sizes[1]) == [2]
    # a line of up spins cut where its lattice edge was rewired away
    spins = -np.ones((L, L), np.int8)
    spins[3, :] = 1
    lat.rewired_edge_ids = np.array([(3 * L + 2) * 2 + 1, (3 * L + 6) * 2 + 1], np.int64)  # x-edges 2-3, 6-7
    lat.new_edges = np.array([[0, 2], [16, 18]], np.int64)                       # down-down links
    sizes = cluster_sizes(spins, lat)
    assert sorted(sizes[1]) == [4, 4]  # the ring of 8 cut twice
    assert np.sum(sizes[1]) + np.sum(sizes[-1]) == L * L


def test_hook_and_jump_on_long_paths():
    n = 5000
    rng = np.random.default_rng(3)
    order = rng.permutation(n)             # one long path visiting the sites in random order
    labels = label_by_hook_and_jump(n, order[:-1].astype(np.int64), order[1:].astype(np.int64), np)
    assert np.all(labels == 0)


def test_size_histogram_bins_by_powers_of_two():
    edges, counts = size_histogram(np.array([1, 1, 2, 3, 4, 7, 8, 64]), 64)
    assert list(edges) == [1, 2, 4, 8, 16, 32, 64]
    assert list(counts) == [2, 2, 2, 1, 0, 0, 1]
    assert counts.sum() == 8


def test_bad_shapes_and_methods_are_named():
    lat = build_lattice(2, 8, 0.0, "all", np.random.default_rng(0))
    with pytest.raises(ValueError, match="spins"):
        like_spin_bonds(np.ones((8, 6), np.int8), lat)
    with pytest.raises(ValueError, match="method"):
        label_like_spin_clusters(np.ones((8, 8), np.int8), lat, method="bfs")


def test_model_spins_and_graph():
    ising = pytest.importorskip("latticelab.sim.models.ising.model")
    m = ising.IsingModel(dim=3, L=8, T=4.5, p=0.1, rewire_dims="x", seed=2, backend="numpy")
    m.step(3)
    sizes = m.cluster_size_groups()      # the HasClusters capability the spectral dock uses
    np.testing.assert_array_equal(label_like_spin_clusters(m.spins, m.graph), bfs_labels(m.spins, m.graph))
    assert sizes["up"].sum() + sizes["down"].sum() == m.n_sites
    assert sizes["up"].sum() == (m.spins > 0).sum()


@pytest.mark.gpu
@pytest.mark.parametrize("dim,L,p,dims", [(2, 64, 0.05, "all"), (3, 24, 0.02, "x")])
def test_cupy_labels_match_scipy(dim, L, p, dims):
    import cupy
    rng = np.random.default_rng(7)
    lattice = build_lattice(dim, L, p, dims, rng)
    spins = np.where(rng.random((L,) * dim) < 0.55, 1, -1).astype(np.int8)
    ref = label_like_spin_clusters(spins, lattice, method="scipy")
    got = label_like_spin_clusters(cupy.asarray(spins), lattice, method="hook-jump")
    np.testing.assert_array_equal(got.get(), ref)
    auto = label_like_spin_clusters(cupy.asarray(spins), lattice)   # a GPU labeller if present
    np.testing.assert_array_equal(auto.get(), ref)
