"""The benchmark's naive CuPy baseline must simulate the same physics it is compared with."""
import numpy as np
import pytest

from latticelab.sim.models.ising.exact import onsager_energy

from helpers import block_mean_and_error


@pytest.mark.gpu
def test_naive_baseline_reaches_onsager_energy():
    import cupy as cp

    from latticelab.bench.sim import naive_metropolis
    T, L = 3.0, 64
    sweep = naive_metropolis(cp, 2, L, T, seed=5)
    for _ in range(300):
        sweep()
    energy = np.empty(3000)
    for i in range(energy.size):
        sweep()
        s = sweep.spins.astype(cp.int32)
        energy[i] = -float((s * cp.roll(s, -1, 0) + s * cp.roll(s, -1, 1)).sum()) / L ** 2
    mean, err = block_mean_and_error(energy)
    assert abs(mean - onsager_energy(T)) < 5 * err + 2e-4, (mean, err, onsager_energy(T))
