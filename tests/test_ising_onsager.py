"""Equilibrium energy of the regular 2D lattice against Onsager's exact solution."""
import numpy as np
import pytest

from latticelab.sim.models.ising.exact import onsager_energy, yang_magnetisation
from latticelab.sim.models.ising.model import IsingModel

from helpers import BACKENDS, block_mean_and_error


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("T,algorithm,start", [(1.5, "metropolis", "cold"), (3.0, "metropolis", "hot"),
                                               (2.0, "wolff", "cold"), (3.2, "4:1", "hot")])
def test_energy_matches_onsager_away_from_tc(T, algorithm, start, backend):
    model = IsingModel(dim=2, L=64, T=T, algorithm=algorithm, seed=7, backend=backend, start=start)
    model.step(400)
    steps = 2000
    energy, magnet = np.empty(steps), np.empty(steps)
    for i in range(steps):
        model.step(1)
        obs = model.observables()
        energy[i], magnet[i] = obs["energy"], obs["abs_magnetisation"]
    mean, err = block_mean_and_error(energy)
    exact = onsager_energy(T)
    assert abs(mean - exact) < 5 * err + 2e-4, f"T={T}: <E>/N = {mean:.5f} +- {err:.5f}, Onsager {exact:.5f}"
    if T < 2.2:  # deep in the ordered phase the finite lattice's |M| is Yang's to high accuracy
        m_mean, m_err = block_mean_and_error(magnet)
        assert abs(m_mean - yang_magnetisation(T)) < 5 * m_err + 1e-3
