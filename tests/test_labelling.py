"""Connected-component labelling: the CPU reference (sim/models/ising/swendsen_wang.py and
sim/analysis/components.py) and the GPU kernels (sim/gpu/labelling.py).

The CPU reference is checked against scipy.ndimage.label on the regular lattice (with the periodic seams
joined by hand) and against an independent NumPy union-find on rewired graphs with random bonds; the
kernels must then give the same labels element by element (labels are the smallest site of a component).
"""
import numpy as np
import pytest
from scipy import ndimage

from latticelab.sim.backend import to_numpy
from latticelab.sim.analysis.components import component_sizes, union_find_labels
from latticelab.sim.models.ising.lattice import build_lattice
from latticelab.sim.models.ising.swendsen_wang import active_bonds, label_components

from helpers import DEVICES, device_xp, random_spins


def same_partition(a, b) -> bool:
    """Two labellings describe the same components (whatever the label values)."""
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    pairs = np.unique(np.stack([a, b]), axis=1).shape[1]
    return pairs == np.unique(a).size == np.unique(b).size


def ndimage_periodic_labels(spins: np.ndarray) -> np.ndarray:
    """Like-spin clusters of a periodic lattice: scipy.ndimage.label per spin value, seams joined by union-find."""
    labels = np.zeros(spins.shape, dtype=np.int64)
    offset = 0
    for value in (1, -1):
        lab, count = ndimage.label(spins == value)
        labels[lab > 0] = lab[lab > 0] + offset
        offset += count
    parent = np.arange(offset + 1)

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for axis in range(spins.ndim):
        first = np.take(labels, 0, axis=axis).reshape(-1)
        last = np.take(labels, -1, axis=axis).reshape(-1)
        same = np.take(spins, 0, axis=axis).reshape(-1) == np.take(spins, -1, axis=axis).reshape(-1)
        for a, b in zip(first[same], last[same]):
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    return np.vectorize(root)(labels)


@pytest.mark.parametrize("dim,L", [(2, 8), (2, 33), (3, 6), (3, 11)])
def test_regular_lattice_matches_ndimage_label(dim, L):
    lattice = build_lattice(dim, L, 0.0, "all", np.random.default_rng(0))
    for up in (0.3, 0.5, 0.6):
        spins = random_spins((L,) * dim, seed=L, up=up)
        ours = label_components(np, lattice, spins)
        assert same_partition(ours, ndimage_periodic_labels(spins))
        # labels are the smallest site of each component
        flat = ours.reshape(-1)
        assert np.all(flat <= np.arange(flat.size)) and np.all(flat[flat] == flat)


def test_ndimage_comparison_can_fail():
    """Without the periodic seams the partitions differ: the comparison above is not vacuous."""
    lattice = build_lattice(2, 16, 0.0, "all", np.random.default_rng(0))
    spins = np.ones((16, 16), dtype=np.int8)
    spins[:, 8] = -1  # an up band that wraps around x
    assert not same_partition(label_components(np, lattice, spins), ndimage.label(spins == 1)[0] - (spins == -1))


@pytest.mark.parametrize("dim,L,p,dims", [(2, 12, 0.2, "all"), (2, 16, 1.0, "y"), (3, 6, 0.3, "x"),
                                          (3, 8, 0.1, "all")])
def test_rewired_graph_matches_an_independent_union_find(dim, L, p, dims):
    lattice = build_lattice(dim, L, p, dims, np.random.default_rng(dim + L))
    assert lattice.new_edges.shape[0] > 0
    spins = random_spins((L,) * dim, seed=1)
    for p_bond, key in ((1.0, (0, 0)), (0.7, (3, 4)), (0.3, (3, 5))):
        csgraph = label_components(np, lattice, spins, p_bond, key)
        union_find = label_components(np, lattice, spins, p_bond, key, method="union-find")
        np.testing.assert_array_equal(csgraph, union_find)
    # the bonds are edges of the rewired graph, each joining equal spins
    u, v = active_bonds(lattice, spins, 0.5, (1, 1))
    edges = {tuple(sorted(e)) for e in lattice.edges().tolist()}
    assert {tuple(sorted(e)) for e in zip(u.tolist(), v.tolist())} <= edges
    assert np.all(spins.reshape(-1)[u] == spins.reshape(-1)[v])


def test_union_find_on_a_chain_and_isolated_sites():
    labels = union_find_labels(6, np.array([4, 3, 1]), np.array([3, 2, 0]))
    np.testing.assert_array_equal(labels, [0, 0, 2, 2, 2, 5])


def test_bond_probability_is_honoured():
    lattice = build_lattice(2, 64, 0.0, "all", np.random.default_rng(0))
    spins = np.ones((64, 64), dtype=np.int8)
    for p_bond in (0.2, 0.6):
        u, _ = active_bonds(lattice, spins, p_bond, (9, 9))
        n = lattice.n_edges
        assert abs(u.size / n - p_bond) < 5 * np.sqrt(p_bond * (1 - p_bond) / n)


def test_component_sizes_sum_to_the_lattice():
    lattice = build_lattice(2, 20, 0.05, "all", np.random.default_rng(2))
    sizes = component_sizes(label_components(np, lattice, random_spins((20, 20), 3)))
    assert sizes.sum() == 400 and np.all(np.diff(sizes) <= 0)


LABEL_CASES = {
    # tiles are 32 x 8 (2D) and 32 x 8 x 4 (3D): cover one tile, several, partial ones and wrap-only seams
    "emulator": [(2, 16, 0.0), (2, 70, 0.02), (2, 130, 0.0), (3, 8, 0.05), (3, 18, 0.02), (3, 34, 0.0)],
    "cuda": [(2, 16, 0.0), (2, 70, 0.02), (2, 512, 0.01), (2, 1000, 0.0), (3, 8, 0.05), (3, 34, 0.02),
             (3, 100, 0.01), (3, 64, 0.2)],
}


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_labels_equal_the_cpu_reference(device):
    from latticelab.sim.models.ising.gpu.labelling import label_components as device_labels
    xp = device_xp(device)
    for dim, L, p in LABEL_CASES[device]:
        lattice = build_lattice(dim, L, p, "all", np.random.default_rng(L))
        spins = random_spins((L,) * dim, seed=L, up=0.55)
        for p_bond, key in ((1.0, (0, 0)), (0.59, (21, 2)), (0.8, (2 ** 40, 2 ** 35))):
            expected = label_components(np, lattice, spins, p_bond, key)
            got = device_labels(xp, lattice, xp.asarray(spins), p_bond, key)
            np.testing.assert_array_equal(to_numpy(got), expected, err_msg=f"{dim}D L={L} p={p} p_bond={p_bond}")
        np.testing.assert_array_equal(component_sizes(got), component_sizes(expected))   # counted on the device


@pytest.mark.parametrize("device", DEVICES)
def test_every_tile_shape_gives_the_same_labels(device):
    """Tile shapes only change how the work is split between label_tiles and label_merge, never the labels."""
    from latticelab.sim.models.ising.gpu.labelling import Labeller
    xp = device_xp(device)
    shapes = {2: [(32, 32, 1), (32, 16, 1), (32, 4, 1), (32, 1, 1)], 3: [(32, 4, 8), (32, 2, 16), (32, 1, 1)]}
    for dim, L in ((2, 40), (3, 12)):
        lattice = build_lattice(dim, L, 0.03, "all", np.random.default_rng(5))
        spins = random_spins((L,) * dim, seed=5, up=0.5)
        for p_bond, key in ((1.0, (0, 0)), (0.6, (8, 9))):
            expected = label_components(np, lattice, spins, p_bond, key).reshape(-1)
            for tile in shapes[dim]:
                labeller = Labeller(xp, lattice, tile=tile)
                labeller.label(xp.asarray(spins).reshape(-1), p_bond, key)
                np.testing.assert_array_equal(to_numpy(labeller.compress()), expected, err_msg=f"tile {tile}")


@pytest.mark.gpu
def test_like_spin_hook_for_sim_clusters():
    import cupy
    from latticelab.sim.models.ising.clusters import label_like_spin_clusters
    lattice = build_lattice(3, 24, 0.02, "x", np.random.default_rng(7))
    spins = random_spins((24,) * 3, seed=7, up=0.55)
    got = label_like_spin_clusters(cupy.asarray(spins), lattice)  # goes through sim.gpu.labelling
    np.testing.assert_array_equal(got.get(), label_components(np, lattice, spins).reshape(-1))
