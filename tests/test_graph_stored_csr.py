"""The rewired lattice measured through the adjacency it stores (HasGraph's optional ``adjacency_csr``) gives
the same graph, clustering and path lengths as the CSR rebuilt from its edge list."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.analysis import graph as G
from latticelab.sim.models.ising.model import IsingModel


@pytest.mark.parametrize("dim,L,p,rewire_dims", [(2, 16, 0.0, "all"), (2, 16, 0.2, "all"), (2, 24, 1.0, "x"),
                                                 (3, 8, 0.1, "all"), (3, 6, 0.6, "zy")])
def test_stored_csr_equals_the_rebuilt_one(dim, L, p, rewire_dims):
    model = IsingModel(dim=dim, L=L, p=p, rewire_dims=rewire_dims, seed=3, backend="numpy")
    stored = G.graph_of(model)
    rebuilt = G.graph_of(model, stored=False)
    np.testing.assert_array_equal(stored.offsets, rebuilt.offsets)
    np.testing.assert_array_equal(stored.neighbours, rebuilt.neighbours)
    assert G.clustering(stored) == G.clustering(rebuilt)
    assert G.mean_path_length(stored) == G.mean_path_length(rebuilt)


def test_the_stored_path_is_the_one_used(monkeypatch):
    model = IsingModel(dim=2, L=16, p=0.3, seed=1, backend="numpy")
    expected = G.clustering(G.graph_of(model, stored=False))
    monkeypatch.setattr(model, "edges", lambda: (_ for _ in ()).throw(AssertionError("edges() was rebuilt")))
    assert G.clustering(G.graph_of(model)) == expected


def test_a_damaged_stored_csr_is_refused():
    with pytest.raises(G.GraphError, match="adjacency_csr"):
        G.stored_graph(4, np.array([0, 1, 2]), np.array([1, 0]))
    with pytest.raises(G.GraphError, match=r"cell indices in \[0, 2\)"):
        G.stored_graph(2, np.array([0, 1, 2]), np.array([1, 5]))
