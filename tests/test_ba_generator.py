"""The Barabasi-Albert generator of thesis 003, section 5.2 (sim/analysis/graph.py ``ba_thesis_edges``).

Against the known BA results: exactly m (m + 1) / 2 + (n - m - 1) m edges, no self-loops or repeated pairs,
mean degree 2m (up to the core's share), and the degree distribution of the growing network with
preferential attachment, P(k) = 2 m (m + 1) / (k (k + 1) (k + 2)) for k >= m (Dorogovtsev, Mendes & Samukhin
2000; Bollobas et al. 2001), whose tail is the 2 m^2 / k^3 of Barabasi & Albert: its complementary
distribution is P(K >= k) = m (m + 1) / (k (k + 1)).
"""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.analysis import graph as G


def exact_edges(n: int, m: int) -> int:
    return m * (m + 1) // 2 + (n - m - 1) * m


@pytest.mark.parametrize("n,m", [(1000, 1), (3000, 3), (2000, 5)])
def test_exact_edge_count_without_loops_or_repeats(n, m):
    edges = G.ba_thesis_edges(n, m, seed=5)
    assert edges.shape == (exact_edges(n, m), 2)
    assert not np.any(edges[:, 0] == edges[:, 1])
    keys = np.minimum(edges[:, 0], edges[:, 1]) * n + np.maximum(edges[:, 0], edges[:, 1])
    assert np.unique(keys).size == keys.size
    # every new vertex t joins exactly m earlier vertices
    new = edges[m * (m + 1) // 2:]
    assert np.all(new[:, 1] < new[:, 0])
    np.testing.assert_array_equal(np.bincount(new[:, 0], minlength=n)[m + 1:], m)
    g = G.barabasi_albert(n, m, seed=5)
    assert g.n_edges == exact_edges(n, m)
    assert G.components(g).count == 1


def test_degree_distribution_follows_the_ba_law():
    n, m = 8000, 3
    deg = np.asarray(G.barabasi_albert(n, m, seed=1).degrees)
    assert deg.min() == m
    assert deg.mean() == pytest.approx(2 * exact_edges(n, m) / n) and abs(deg.mean() - 2 * m) < 0.01
    for k in (m, 2 * m, 3 * m, 4 * m, 6 * m, 10 * m):
        expected = m * (m + 1) / (k * (k + 1))
        observed = np.mean(deg >= k)
        sigma = np.sqrt(expected * (1 - expected) / deg.size)
        assert abs(observed - expected) < 4 * sigma + 0.002, (k, observed, expected)
    # the k^-3 tail: the maximum-likelihood exponent of the discrete tail k >= 4m (Clauset et al. 2009's
    # approximation) is close to 3
    tail = deg[deg >= 4 * m]
    alpha = 1 + tail.size / np.sum(np.log(tail / (4 * m - 0.5)))
    assert 2.7 < alpha < 3.3


def test_hubs_are_the_oldest_vertices():
    deg = np.asarray(G.barabasi_albert(4000, 2, seed=3).degrees)
    assert deg[:100].mean() > 5 * deg[-1000:].mean()


def test_same_graph_for_the_same_seed_and_another_for_another():
    a = G.barabasi_albert(500, 4, seed=1).edges()
    np.testing.assert_array_equal(a, G.barabasi_albert(500, 4, seed=1).edges())
    assert not np.array_equal(a, G.barabasi_albert(500, 4, seed=2).edges())


def test_batagelj_brandes_stays_an_option_and_bad_methods_are_named():
    g = G.barabasi_albert(2000, 3, seed=7, method="batagelj-brandes")
    assert 0.97 * exact_edges(2000, 3) <= g.n_edges <= exact_edges(2000, 3)
    with pytest.raises(G.GraphError, match="method must be one of thesis, batagelj-brandes"):
        G.barabasi_albert(100, 3, method="prim")
    with pytest.raises(G.GraphError, match=r"m must be in \[1, n\)"):
        G.ba_thesis_edges(4, 4)


def test_smallest_case_takes_the_whole_core():
    # n = m + 2: the one new vertex joins m of the m + 1 core vertices, all of equal degree
    edges = G.ba_thesis_edges(6, 4, seed=0)
    assert edges.shape == (exact_edges(6, 4), 2)
    assert np.unique(edges[-4:, 1]).size == 4
