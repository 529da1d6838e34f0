"""The clustering counts with the vertices partitioned over several devices (issue 38; seed 004, chapter 6):
every device holds the graph and counts the arcs of its share of the vertices; the per-vertex triangle and
square counts, joined in vertex order, must equal one device's and the SciPy path's (which tests/test_graph.py
checks against networkx). On the CPU the 'devices' are the CUDA emulator in one process; on the 2-GPU machine
(marked gpu) the GPUs."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.analysis import graph as G

from helpers import device_xp


def _graphs(xp):
    ws = G.watts_strogatz(300, 8, 0.1, seed=3, xp=xp)
    # a lattice with its checkerboard kept: no triangles, squares only
    side = 12
    cells = np.arange(side * side).reshape(side, side)
    edges = np.concatenate([np.stack([cells.ravel(), np.roll(cells, 1, axis=1).ravel()], 1),
                            np.stack([cells.ravel(), np.roll(cells, 1, axis=0).ravel()], 1)])
    return ws, G.from_edges(side * side, edges, xp=xp)


@pytest.mark.parametrize("devices", [(0, 1), (0, 1, 2)])
def test_counts_over_partitioned_vertices_equal_one_devices(devices):
    xp = device_xp("emulator")
    for g in _graphs(xp):
        tri, quad = G.partitioned_counts(g, devices, squares=True)
        one_tri, one_quad = G._host_counts(g, squares=True)
        np.testing.assert_array_equal(tri, G.to_numpy(one_tri))
        np.testing.assert_array_equal(quad, G.to_numpy(one_quad))
        cpu_tri, cpu_quad = G._cpu_counts(g.to(np), squares=True)
        np.testing.assert_array_equal(tri, cpu_tri)
        np.testing.assert_array_equal(quad, cpu_quad)
        assert G.clustering(g, devices=devices) == G.clustering(g)


def test_the_vertex_ranges_cover_every_vertex_once_with_about_equal_arcs():
    g = G.barabasi_albert(500, 3, seed=2)
    ranges = G.vertex_ranges(g, 3)
    assert ranges[0][0] == 0 and ranges[-1][1] == g.n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    arcs = [int(g.offsets[v1] - g.offsets[v0]) for v0, v1 in ranges]
    assert max(arcs) - min(arcs) <= int(g.degrees.max()) + 1


@pytest.mark.gpu
def test_counts_over_two_gpus_equal_one_gpus():
    xp = device_xp("cuda")
    if xp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    g = G.watts_strogatz(200_000, 20, 0.05, seed=1, xp=xp)
    assert G.clustering(g, devices=(0, 1)) == G.clustering(g)
