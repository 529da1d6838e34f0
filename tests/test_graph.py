"""Network analysis (sim/analysis/graph.py, issue 12) against networkx as the oracle, on small graphs of every
kind: periodic square lattices, rings, rewired Ising lattices, Watts-Strogatz and Barabasi-Albert graphs (ours
and networkx's), the cortex's connection graph. The CUDA kernels (kernels/graph_counts.cu,
kernels/graph_generate.cu) run on the CPU emulator here and on a real GPU under the gpu marker; both must give
the CPU path's numbers exactly."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import DEVICES, device_xp

from latticelab.sim.analysis import graph as G

nx = pytest.importorskip("networkx")


def as_graph(nxg) -> tuple:
    nxg = nx.convert_node_labels_to_integers(nxg)
    edges = np.array(list(nxg.edges()), dtype=np.int64).reshape(-1, 2)
    return nxg, G.from_edges(nxg.number_of_nodes(), edges)


def nx_of(g: G.Graph):
    h = nx.Graph()
    h.add_nodes_from(range(g.n))
    h.add_edges_from(g.edges().tolist())
    return h


def check_against_networkx(g: G.Graph, h, paths: bool = True) -> G.Clustering:
    """Every measure of ``g`` equals networkx's on ``h`` (the same graph)."""
    c = G.clustering(g)
    assert c.newman == pytest.approx(nx.transitivity(h), abs=1e-12)
    assert c.mean_local == pytest.approx(nx.average_clustering(h), abs=1e-12)
    local = nx.clustering(h)
    np.testing.assert_allclose(G.local_clustering(g), [local[v] for v in range(g.n)], atol=1e-12)
    square = nx.square_clustering(h)
    np.testing.assert_allclose(G.square_clustering(g), [square[v] for v in range(g.n)], atol=1e-12)
    assert c.mean_square == pytest.approx(np.mean([square[v] for v in range(g.n)]), abs=1e-12)
    assert c.triangles == sum(nx.triangles(h).values()) // 3
    assert c.bipartite == nx.is_bipartite(h)
    np.testing.assert_array_equal(G.degree_histogram(g), nx.degree_histogram(h))
    comps = sorted((len(s) for s in nx.connected_components(h)), reverse=True)
    got = G.components(g)
    assert got.count == len(comps) and got.sizes.tolist() == comps
    if paths:
        largest = h.subgraph(max(nx.connected_components(h), key=len))
        pl = G.mean_path_length(g)
        assert pl.exact and pl.error == 0.0
        assert pl.mean == pytest.approx(nx.average_shortest_path_length(largest), rel=1e-12)
    return c


# ---- the square lattice and rings: known values -----------------------------------------------------------
@pytest.mark.parametrize("L", [5, 8])
def test_periodic_square_lattice(L):
    """No triangles (C = 0); each vertex has 4 squares among its 6 neighbour pairs and potential
    3 x 16 - 12 - 4 = 32, so c4 = 1/8 everywhere."""
    h, g = as_graph(nx.grid_2d_graph(L, L, periodic=True))
    c = check_against_networkx(g, h)
    assert c.newman == 0.0 and c.triangles == 0 and c.mean_local == 0.0
    np.testing.assert_allclose(G.square_clustering(g), 1 / 8)
    assert c.bipartite is (L % 2 == 0) and c.measure == ("square" if L % 2 == 0 else "newman")


@pytest.mark.parametrize("k", [4, 6, 10])
def test_ring_lattice_clustering(k):
    """A ring of n vertices joined to their k nearest neighbours: C = 3 (k - 2) / (4 (k - 1)), and the
    mean path length is known in closed form for n = 2 m h + 1 ... (networkx checks it)."""
    h, g = as_graph(nx.watts_strogatz_graph(41, k, 0.0))
    c = check_against_networkx(g, h)
    assert c.newman == pytest.approx(3 * (k - 2) / (4 * (k - 1)), rel=1e-12)
    assert c.mean_local == pytest.approx(3 * (k - 2) / (4 * (k - 1)), rel=1e-12)


def test_our_ring_is_the_networkx_ring():
    g = G.watts_strogatz(50, 6, 0.0)
    assert sorted(map(tuple, g.edges().tolist())) == sorted(tuple(sorted(e)) for e in
                                                             nx.watts_strogatz_graph(50, 6, 0.0).edges())


# ---- the models' graphs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dim, L, p, dims", [(2, 8, 0.3, "all"), (2, 10, 0.1, "x"), (3, 4, 0.5, "all")])
def test_rewired_ising_lattice_stays_bipartite(dim, L, p, dims):
    """The rewired lattice keeps its checkerboard colouring: C = 0 at every p, clustering is c4."""
    from latticelab.sim.models.ising.model import IsingModel
    model = IsingModel(dim=dim, L=L, T=2.0, p=p, rewire_dims=dims, seed=3, backend="numpy")
    g = G.graph_of(model)
    assert g.n == L ** dim and g.n_edges == dim * L ** dim
    c = check_against_networkx(g, nx_of(g))
    assert c.newman == 0.0 and c.bipartite and c.measure == "square"
    assert 0 < c.mean_square < 1 / 8 + 1e-12 or dim == 3


def test_cortex_connection_graph():
    """The cortex's directed connections (duplicates allowed) are analysed as the undirected simple graph."""
    from latticelab.sim.models import get_model
    cls = get_model("cortex")
    model = cls.create(backend="numpy", **cls.small_example)
    edges = model.edges()
    g = G.graph_of(model)
    h = nx.Graph()
    h.add_nodes_from(range(g.n))
    h.add_edges_from(edges.tolist())
    assert g.n_edges == h.number_of_edges()
    check_against_networkx(g, h)


def test_graph_of_needs_the_capability():
    with pytest.raises(G.GraphError, match="does not expose a graph"):
        G.graph_of(object())


# ---- generated graphs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: nx.watts_strogatz_graph(120, 6, 0.2, seed=1),
    lambda: nx.barabasi_albert_graph(150, 3, seed=2),
    lambda: nx_of(G.watts_strogatz(120, 8, 0.15, seed=5)),
    lambda: nx_of(G.barabasi_albert(150, 2, seed=6)),
    lambda: nx.disjoint_union(nx.cycle_graph(7), nx.complete_graph(5)),
], ids=["nx-ws", "nx-ba", "ws", "ba", "disconnected"])
def test_against_networkx(make):
    h, g = as_graph(make())
    check_against_networkx(g, h)


def test_watts_strogatz_generator():
    """Simple graph with nk/2 edges; C follows Barrat & Weigt's C(0) (1 - p)^3 for the ring rewired this way."""
    n, k, p = 3000, 10, 0.1
    g = G.watts_strogatz(n, k, p, seed=11)
    assert g.n_edges == n * k // 2
    e = g.edges()
    moved = np.mean(((e[:, 1] - e[:, 0]) % n > k // 2) & ((e[:, 0] - e[:, 1]) % n > k // 2))
    assert moved == pytest.approx(p * (1 - 2 * (k // 2) / n), abs=0.015)
    c0 = 3 * (k - 2) / (4 * (k - 1))
    assert G.clustering(g, squares=False).newman == pytest.approx(c0 * (1 - p) ** 3, abs=0.02)
    assert not np.array_equal(g.edges(), G.watts_strogatz(n, k, p, seed=12).edges())
    np.testing.assert_array_equal(g.edges(), G.watts_strogatz(n, k, p, seed=11).edges())


def test_barabasi_albert_generator():
    """Degrees: a heavy tail (hubs far above the mean 2m), P(k) ~ k^-3 in the middle; a few repeats lost."""
    n, m = 4000, 3
    g = G.barabasi_albert(n, m, seed=7)
    deg = np.asarray(g.degrees)
    expected = m * (m + 1) // 2 + (n - m - 1) * m
    assert 0.97 * expected <= g.n_edges <= expected
    assert deg.max() > 15 * m and abs(deg.mean() - 2 * m) < 0.2
    assert G.components(g).count == 1
    # the tail: P(K >= k) ~ k^-2 for a BA graph, so P(K >= 4m) / P(K >= 2m) ~ 1/4
    ratio = np.mean(deg >= 4 * m) / np.mean(deg >= 2 * m)
    assert 0.15 < ratio < 0.35


# ---- path lengths ------------------------------------------------------------------------------------------
def test_sampled_path_length_within_its_error_bar():
    g = G.watts_strogatz(1500, 6, 0.05, seed=2)
    exact = G.mean_path_length(g)
    inside = 0
    for seed in range(12):
        est = G.mean_path_length(g, samples=60, seed=seed)
        assert not est.exact and est.error > 0 and est.sources == 60
        assert abs(est.mean - exact.mean) < 4 * est.error
        inside += abs(est.mean - exact.mean) < 2 * est.error
    assert inside >= 9   # about 95 % expected within two standard errors


# ---- bad graphs --------------------------------------------------------------------------------------------
def test_bad_graphs_get_clear_errors():
    with pytest.raises(G.GraphError, match="at least one vertex"):
        G.from_edges(0, np.zeros((0, 2), int))
    with pytest.raises(G.GraphError, match="self-loops are not allowed.*vertex 2"):
        G.from_edges(4, [[0, 1], [2, 2]])
    assert G.from_edges(4, [[0, 1], [2, 2]], loops="drop").n_edges == 1
    with pytest.raises(G.GraphError, match=r"in \[0, 4\); got 4"):
        G.from_edges(4, [[0, 4]])
    with pytest.raises(G.GraphError, match="shape"):
        G.from_edges(4, np.zeros((3, 3), int))
    with pytest.raises(G.GraphError, match="integer"):
        G.from_edges(4, np.zeros((3, 2), float))
    lonely = G.from_edges(3, np.zeros((0, 2), int))
    assert G.clustering(lonely).newman == 0.0 and G.components(lonely).count == 3
    with pytest.raises(G.GraphError, match="at least two vertices"):
        G.mean_path_length(lonely)
    with pytest.raises(G.GraphError, match="k must be even"):
        G.watts_strogatz(10, 3, 0.1)
    with pytest.raises(G.GraphError, match="m must be"):
        G.barabasi_albert(5, 5)
    with pytest.raises(G.GraphError, match="samples"):
        G.mean_path_length(G.watts_strogatz(20, 4, 0), samples=1)
    # repeated and reversed pairs collapse to one undirected edge
    assert G.from_edges(3, [[0, 1], [1, 0], [0, 1], [1, 2]]).n_edges == 2


# ---- the kernel path (emulator on the CPU, CuPy under the gpu marker) ---------------------------------------
def _kernel_graphs():
    from latticelab.sim.models.ising.model import IsingModel
    model = IsingModel(dim=2, L=8, T=2.0, p=0.4, seed=1, backend="numpy")
    return [G.graph_of(model, xp=np), G.watts_strogatz(60, 6, 0.2, seed=3), G.barabasi_albert(70, 4, seed=4),
            as_graph(nx.disjoint_union(nx.complete_graph(6), nx.path_graph(4)))[1]]


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_counts_equal_the_cpu_path(device):
    xp = device_xp(device)
    for g in _kernel_graphs():
        d = g.to(xp)
        assert d.uses_kernels and not g.uses_kernels
        np.testing.assert_array_equal(G.to_numpy(G.triangle_counts(d)), G.triangle_counts(g))
        np.testing.assert_array_equal(G.to_numpy(G.square_counts(d)), G.square_counts(g))
        np.testing.assert_array_equal(G.component_labels(d), G.component_labels(g))
        assert G.clustering(d) == G.clustering(g)
        assert G.mean_path_length(d) == G.mean_path_length(g)


@pytest.mark.parametrize("device", DEVICES)
def test_generators_equal_on_every_module(device):
    xp = device_xp(device)
    for make in (lambda m: G.watts_strogatz(300, 8, 0.3, seed=9, xp=m),
                 lambda m: G.barabasi_albert(300, 5, seed=9, xp=m),
                 lambda m: G.watts_strogatz(40, 6, 1.0, seed=2, xp=m)):
        np.testing.assert_array_equal(make(xp).edges(), make(np).edges())


def test_arc_counts_refuse_the_numpy_path():
    with pytest.raises(G.GraphError, match="kernels"):
        G.arc_counts(G.watts_strogatz(20, 4, 0), "triangles")


# ---- the small-world curve --------------------------------------------------------------------------------
def test_rewiring_field_comes_from_the_schema(monkeypatch):
    from latticelab.sim.models import get_model
    ising = get_model("ising")
    assert G.rewiring_field(ising) == "p"
    monkeypatch.setattr(ising.Params, "rewiring_field", "no_such_field", raising=False)
    assert G.rewiring_field(ising) is None
    assert G.rewiring_field(get_model("cahn-hilliard")) is None


def test_small_world_curve_of_the_rewired_lattice(monkeypatch):
    """Clustering (square, the lattice being bipartite) and path length both fall with p, the path length
    first (Watts & Strogatz's picture)."""
    from latticelab.sim.models import get_model
    ising = get_model("ising")
    model = ising.create(backend="numpy", dim=2, L=16, T=2.0, p=0.0, seed=4)
    seen = []
    curve = G.small_world_curve(model, [0.01, 0.1, 1.0], samples=None, on_point=lambda c: seen.append(len(c.points)))
    assert seen == [0, 1, 2, 3] and curve.measure == "square" and curve.field == "p"
    p, c, l = curve.ratios()
    np.testing.assert_allclose(p, [0.01, 0.1, 1.0])
    assert curve.reference.clustering.mean_square == pytest.approx(1 / 8)
    assert np.all(c <= 1.0 + 1e-12) and c[-1] < 0.3 and l[-1] < 0.6 and np.all(np.diff(l) < 0)
    assert model.params.p == 0.0   # the running model is left alone
    stop = G.small_world_curve(model, [0.1, 0.2], samples=8, cancelled=lambda: True)
    assert stop.points == []


def test_small_world_curve_needs_a_rewiring_parameter():
    from latticelab.sim.models import get_model
    cls = get_model("cortex")
    with pytest.raises(G.GraphError, match="rewiring"):
        G.small_world_curve(cls.create(backend="numpy", **cls.small_example), [0.1])
