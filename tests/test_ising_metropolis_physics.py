"""The CUDA engine's packed Metropolis sweeps (exact lazy comparison on 8-bit bit planes, issue 39) sample the
right distribution: long runs against Onsager's energy and Yang's magnetisation at L = 256, and the 3D energy
against the reference engine's. (Exact enumeration of 4x4 lattices, regular and rewired: test_ising_exact.py.)"""
import numpy as np
import pytest

from latticelab.sim.models.ising.exact import onsager_energy, yang_magnetisation
from latticelab.sim.models.ising.model import IsingModel

from helpers import block_mean_and_error


def frame_series(model: IsingModel, sweeps: int, frame: int = 2000) -> dict[str, np.ndarray]:
    """Per-sweep energy and |magnetisation| per spin over ``sweeps`` sweeps, measured inside the packed sweeps."""
    parts = [model.advance(frame).observables for _ in range(sweeps // frame)]
    return {name: np.concatenate([p[name] for p in parts]) for name in ("energy", "abs_magnetisation")}


@pytest.mark.gpu
@pytest.mark.parametrize("T, start", [(1.8, "cold"), (2.0, "cold"), (2.6, "hot"), (3.0, "hot")])
def test_onsager_energy_and_yang_magnetisation_at_l256(T, start):
    """L = 256 (finite-size effects far below 5e-4 away from T_c), 400,000 measured sweeps after 10,000."""
    model = IsingModel(dim=2, L=256, T=T, seed=17, backend="cuda", start=start)
    model.step(10_000)
    series = frame_series(model, 400_000)
    energy, energy_err = block_mean_and_error(series["energy"], blocks=50)
    assert energy_err < 1e-4, f"T={T}: too short to resolve 5e-4 ({energy_err:.2e})"
    assert abs(energy - onsager_energy(T)) < 5e-4, (T, energy, energy_err, onsager_energy(T))
    if T < 2.2:
        magnet, magnet_err = block_mean_and_error(series["abs_magnetisation"], blocks=50)
        assert magnet_err < 1e-4, f"T={T}: too short to resolve 5e-4 ({magnet_err:.2e})"
        assert abs(magnet - yang_magnetisation(T)) < 5e-4, (T, magnet, magnet_err, yang_magnetisation(T))


@pytest.mark.gpu
@pytest.mark.parametrize("T, p", [(4.0, 0.0), (5.5, 0.0), (4.0, 0.01), (5.5, 0.01)])
def test_3d_energy_matches_the_reference_engine(T, p):
    """3D L = 64 (the packed kernel), regular and rewired: the mean energy of the CUDA engine against the
    reference engine's (engines.ReferenceEngine, the NumPy engine's code, here on CuPy arrays with its own
    cupy.random uniforms and float comparison) on the same graph, within five combined standard errors."""
    import cupy as cp
    from latticelab.sim.models.ising.engines import ReferenceEngine
    from latticelab.sim.rng import StreamRNG
    model = IsingModel(dim=3, L=64, T=T, p=p, seed=23, backend="cuda", start="cold" if T < 4.5 else "hot")
    model.step(2000)
    fast, fast_err = block_mean_and_error(frame_series(model, 20_000)["energy"], blocks=40)

    reference = ReferenceEngine(cp, model.graph)
    spins = cp.asarray(np.ones((64,) * 3, np.int8) if T < 4.5 else model.spins)
    rng = StreamRNG(cp, 29)
    for _ in range(1000):
        spins, _mask = reference.metropolis(spins, T, rng, want_mask=False)
    energies = np.empty(6000)
    for i in range(energies.size):
        spins, _mask = reference.metropolis(spins, T, rng, want_mask=False)
        energies[i] = -reference.measure(spins)[0] / model.n_sites
    slow, slow_err = block_mean_and_error(energies, blocks=40)
    assert abs(fast - slow) < 5 * np.hypot(fast_err, slow_err), (T, p, fast, fast_err, slow, slow_err)
