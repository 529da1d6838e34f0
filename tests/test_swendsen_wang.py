"""Swendsen-Wang: exact enumeration on the CPU and GPU paths, and the kernels against the CPU reference."""
import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.ising.exact import exact_averages
from latticelab.sim.models.ising.model import IsingModel
from latticelab.sim.models.ising.swendsen_wang import swendsen_wang_update
from latticelab.sim.models.ising.lattice import build_lattice
from latticelab.sim.rng import StreamRNG

from helpers import BACKENDS, DEVICES, block_mean_and_error, device_xp, random_spins, sample

GRAPHS = {"regular 4x4": 0.0, "rewired 4x4": 0.35}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_long_run_averages_match_exact_enumeration(graph, backend):
    p = GRAPHS[graph]
    for i, T in enumerate((1.6, 2.4, 3.5)):
        model = IsingModel(dim=2, L=4, T=T, p=p, algorithm="swendsen-wang", seed=200 + i, backend=backend)
        if p:
            assert len(model.rewired_edges()) > 0
        exact = exact_averages(model.edges(), model.n_sites, T)
        for name, values in sample(model, 4000, burn_in=100).items():
            mean, err = block_mean_and_error(values)
            assert abs(mean - exact[name]) < 5 * err + 1e-9, (
                f"{graph} T={T}: <{name}> = {mean:.5f} +- {err:.5f}, exact {exact[name]:.5f}")


@pytest.mark.parametrize("device", DEVICES)
def test_kernels_reproduce_the_cpu_reference_step_by_step(device):
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    xp = device_xp(device)
    cases = [(2, 16, 0.1), (2, 70, 0.01), (3, 8, 0.05)]
    if device == "cuda":
        cases += [(2, 256, 0.01), (3, 48, 0.02)]
    for dim, L, p in cases:
        lattice = build_lattice(dim, L, p, "all", np.random.default_rng(L))
        engine = CudaEngine(xp, lattice)
        host = random_spins((L,) * dim, seed=4)
        spins = xp.asarray(host)
        rng = StreamRNG(xp, 12)
        for T in (1.5, 2.269, 4.0, 4.5115):
            host, host_mask = swendsen_wang_update(np, lattice, host, T, (rng.seed, rng.streams_used))
            spins, mask = engine.swendsen_wang(spins, T, rng, want_mask=True)
            np.testing.assert_array_equal(to_numpy(spins), host, err_msg=f"{dim}D L={L} T={T}")
            np.testing.assert_array_equal(to_numpy(mask), host_mask)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_cluster_sizes_and_reproducibility(backend):
    kw = dict(dim=2, L=32, T=2.269, p=0.02, algorithm="swendsen-wang", backend=backend)
    a, b = IsingModel(seed=3, **kw), IsingModel(seed=3, **kw)
    a.step(4)
    before = to_numpy(a.spins).copy()
    sizes = a.cluster_sizes()   # observing draws from its own stream: the trajectory stays the same
    assert sizes.sum() == a.n_sites and np.all(np.diff(sizes) <= 0) and sizes[0] > 1
    np.testing.assert_array_equal(sizes, a.cluster_sizes())
    a.step(1)
    changed = before != to_numpy(a.spins)
    np.testing.assert_array_equal(to_numpy(a.flipped), changed)
    assert 0.2 < changed.mean() < 0.8  # about half the spins, cluster by cluster
    b.step(5)
    np.testing.assert_array_equal(to_numpy(a.spins), to_numpy(b.spins))
