"""Properties of the small-world rewiring: colours, degrees, rates, restriction to dimensions, simplicity."""
import numpy as np
import pytest

from latticelab.sim.models.ising.lattice import build_lattice, lattice_edge_ends, parse_rewire_dims, site_colour
from latticelab.sim.params import ParameterError


def make(dim, L, p, dims="all", seed=3):
    return build_lattice(dim, L, p, dims, np.random.default_rng(seed))


@pytest.mark.parametrize("dim,L,p", [(2, 64, 0.05), (3, 16, 0.05), (2, 8, 0.9), (3, 8, 1.0)])
def test_graph_is_simple_bipartite_and_keeps_edge_count(dim, L, p):
    lat = make(dim, L, p)
    edges = lat.edges()
    n = L ** dim
    assert edges.shape == (dim * n, 2)
    a, b = edges[:, 0], edges[:, 1]
    assert np.all(a != b), "self-loop"
    keys = np.minimum(a, b) * n + np.maximum(a, b)
    assert np.unique(keys).size == keys.size, "duplicate edge"
    assert np.all(site_colour(a, dim, L) != site_colour(b, dim, L)), "edge inside one colour"
    degree = np.bincount(edges.ravel(), minlength=n)
    assert degree.sum() == 2 * dim * n


@pytest.mark.parametrize("dim,L,p", [(2, 256, 1e-2), (3, 32, 3e-2), (2, 128, 0.5)])
def test_rewired_fraction_matches_p(dim, L, p):
    lat = make(dim, L, p, seed=11)
    n_ends = 2 * dim * L ** dim
    q = p / 2
    sigma = np.sqrt(n_ends * q * (1 - q))
    assert abs(lat.rewired_ends - n_ends * q) < 5 * sigma
    # a fraction 1 - (1 - p/2)^2 ~ p of the edges has at least one end moved
    edges_hit = lat.rewired_edge_ids.size / (dim * L ** dim)
    expected = 1 - (1 - q) ** 2
    assert abs(edges_hit - expected) < 5 * np.sqrt(expected * (1 - expected) / (dim * L ** dim))


@pytest.mark.parametrize("dim,dims", [(2, "x"), (2, "y"), (3, "x"), (3, "xy"), (3, "z"), (3, "all")])
def test_rewiring_changes_only_the_chosen_coordinates(dim, dims):
    L = 32 if dim == 2 else 16
    lat = make(dim, L, 0.2, dims)
    axes = parse_rewire_dims(dims, dim)
    fixed = [ax for ax in range(dim) if ax not in axes]
    u0, v0 = lattice_edge_ends(lat.rewired_edge_ids, dim, L)
    shape = (L,) * dim
    moved_any = np.zeros(dim, dtype=bool)
    for old, new in ((u0, lat.new_edges[:, 0]), (v0, lat.new_edges[:, 1])):
        co, cn = np.unravel_index(old, shape), np.unravel_index(new, shape)
        for ax in fixed:
            assert np.array_equal(co[ax], cn[ax]), f"axis {ax} changed though only {dims} is rewired"
        for ax in axes:
            moved_any[ax] |= np.any(co[ax] != cn[ax])
    assert all(moved_any[ax] for ax in axes)


def test_new_ends_are_uniform_over_the_same_colour():
    L = 16
    lat = make(2, L, 1.0, seed=5)
    u0, v0 = lattice_edge_ends(lat.rewired_edge_ids, 2, L)
    moved = lat.new_edges[:, 1][lat.new_edges[:, 1] != v0]
    counts = np.bincount(moved, minlength=L * L)
    colours = site_colour(np.arange(L * L), 2, L)
    # Both colours are hit, and within a colour the counts are consistent with uniform (chi-square).
    for c in (0, 1):
        obs = counts[colours == c]
        exp = obs.mean()
        chi2 = ((obs - exp) ** 2 / exp).sum()
        dof = obs.size - 1
        assert chi2 < dof + 5 * np.sqrt(2 * dof)


@pytest.mark.parametrize("dim,L,p", [(2, 8, 0.4), (3, 6, 0.3)])
def test_explicit_adjacency_agrees_with_edge_list(dim, L, p):
    lat = make(dim, L, p, seed=2)
    n = L ** dim
    edges = lat.edges()
    expected = [[] for _ in range(n)]
    for a, b in edges:
        expected[a].append(b)
        expected[b].append(a)
    for site in range(n):
        assert sorted(lat.neighbours_of(site).tolist()) == sorted(expected[site]), site


def test_only_sites_touched_by_rewiring_store_adjacency():
    lat = make(2, 512, 1e-4)
    stored = sum(a.sites.size for a in lat.by_colour)
    assert 0 < stored <= 4 * lat.rewired_edge_ids.size
    assert sum(a.neighbours.nbytes + a.offsets.nbytes for a in lat.by_colour) < 512 ** 2 / 10


@pytest.mark.parametrize("spec", ["q", "xx", "", "xyz", 3])
def test_bad_rewire_dims_names_the_parameter(spec):
    with pytest.raises(ParameterError, match="rewire_dims"):
        parse_rewire_dims(spec, 2)
