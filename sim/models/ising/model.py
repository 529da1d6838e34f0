"""The small-world rewired Ising model (thesis 003, chapter 7): H = -sum over edges s_i s_j, J = k_B = 1."""
from __future__ import annotations

import logging

import numpy as np

from latticelab.sim import params
from latticelab.sim.backend import select_backend, to_numpy
from latticelab.sim.models.ising.lattice import RewiredLattice, build_lattice, lattice_edge_ends, parse_rewire_dims
from latticelab.sim.memory import check_fits
from latticelab.sim.params import ParameterError
from latticelab.sim.rng import StreamRNG

log = logging.getLogger(__name__)

STATE_FORMAT = 1
OBSERVATION_STREAMS = 2 ** 63  # stream numbers of observables that draw random bonds


def make_engine(xp, lattice: RewiredLattice):
    """The update implementations for a backend: the fast CUDA kernels when present, else the reference."""
    if xp is not np:
        try:
            from latticelab.sim.models.ising.gpu.engine import CudaEngine
        except ImportError:
            pass
        else:
            return CudaEngine(xp, lattice)
    return ReferenceEngine(xp, lattice)


class ReferenceEngine:
    """Vectorised NumPy/CuPy updates: checkerboard Metropolis and breadth-first Wolff.

    The engine protocol (the CUDA engine in sim/gpu follows it): ``metropolis`` and ``wolff`` take
    (spins, T, rng, want_mask) and return (new spins, mask of flipped sites or None when not wanted);
    ``measure(spins)`` returns (sum over edges of s_i s_j, sum of spins) with one device sync.
    """

    def __init__(self, xp, lattice: RewiredLattice):
        from latticelab.sim.models.ising.metropolis import CheckerboardMetropolis
        from latticelab.sim.models.ising.wolff import WolffBFS
        self.xp = xp
        self.lattice = lattice
        self._metropolis = CheckerboardMetropolis(xp, lattice)
        self._wolff = WolffBFS(xp, lattice)
        u, v = lattice_edge_ends(lattice.rewired_edge_ids, lattice.dim, lattice.L)
        self._removed = (xp.asarray(u), xp.asarray(v))
        self._added = (xp.asarray(lattice.new_edges[:, 0]), xp.asarray(lattice.new_edges[:, 1]))

    def metropolis(self, spins, T: float, rng: StreamRNG, want_mask: bool = True):
        return self._metropolis.sweep(spins, T, rng.next_stream())

    def wolff(self, spins, T: float, rng: StreamRNG, want_mask: bool = True):
        return self._wolff.flip(spins, T, rng.next_stream())

    def swendsen_wang(self, spins, T: float, rng: StreamRNG, want_mask: bool = True):
        from latticelab.sim.models.ising.swendsen_wang import swendsen_wang_update
        return swendsen_wang_update(self.xp, self.lattice, spins, T, rng.next_key(), want_mask)

    def cluster_sizes(self, spins, T: float, key: tuple[int, int]) -> np.ndarray:
        from latticelab.sim.models.ising.swendsen_wang import fk_cluster_sizes
        return fk_cluster_sizes(self.lattice, spins, T, key)

    def measure(self, spins) -> tuple[float, int]:
        """(sum over edges of s_i s_j, sum of spins): the lattice's bonds, minus the rewired ones, plus
        their replacements."""
        xp = self.xp
        s = spins.astype(xp.int32)
        total = sum((s * xp.roll(s, -1, axis)).sum() for axis in range(s.ndim))
        flat = s.reshape(-1)
        if self._removed[0].size:
            total = total - (flat[self._removed[0]] * flat[self._removed[1]]).sum()
            total = total + (flat[self._added[0]] * flat[self._added[1]]).sum()
        bonds, spin_sum = (int(v) for v in to_numpy(xp.stack([xp.asarray(total), s.sum()])))
        return float(bonds), spin_sum


class IsingModel:
    """Rewired Ising model on a periodic 2D/3D lattice, updated by Metropolis, Wolff or a hybrid."""

    def __init__(self, dim: int = 2, L: int = 64, T: float = 2.0, p: float = 0.0, rewire_dims: str = "all",
                 algorithm: str = "metropolis", seed: int = 0, backend: str = "auto", start: str = "hot"):
        self.dim = params.check_dim(dim)
        self.L = params.check_L(L, self.dim)
        self._T = params.check_T(T)
        p = params.check_p(p)
        parse_rewire_dims(rewire_dims, self.dim)
        self._schedule = params.parse_algorithm(algorithm)
        self._algorithm = algorithm
        self.seed = params.check_seed(seed)
        if start not in ("hot", "cold"):
            raise ParameterError("start", f"must be 'hot' or 'cold'; got {start!r}")
        self._backend = select_backend(backend)
        self.xp = self._backend.xp
        check_fits(self.dim, self.L, self._backend)
        self._rng = StreamRNG(self.xp, self.seed)
        self.step_count = 0
        self._phase = 0
        self._build_graph(p, rewire_dims)
        self.reset(start)

    # ---- parameters -------------------------------------------------------------------------
    @property
    def backend_name(self) -> str:
        return self._backend.name

    @property
    def device_name(self) -> str:
        return self._backend.device_name

    @property
    def T(self) -> float:
        return self._T

    @T.setter
    def T(self, value) -> None:
        self._T = params.check_T(value)

    @property
    def p(self) -> float:
        return self.graph.p

    @property
    def rewire_dims(self) -> str:
        return self.graph.rewire_dims

    @property
    def algorithm(self) -> str:
        return self._algorithm

    @algorithm.setter
    def algorithm(self, value) -> None:
        self._schedule = params.parse_algorithm(value)
        self._algorithm = value
        self._phase = 0

    @property
    def n_sites(self) -> int:
        return self.L ** self.dim

    def set_rewiring(self, p=None, rewire_dims=None) -> None:
        """Rebuild the graph with a new p and/or rewired dimensions; the spins are kept."""
        p = self.graph.p if p is None else params.check_p(p)
        rewire_dims = self.graph.rewire_dims if rewire_dims is None else rewire_dims
        parse_rewire_dims(rewire_dims, self.dim)
        self._build_graph(p, rewire_dims)

    def _build_graph(self, p: float, rewire_dims: str, lattice: RewiredLattice | None = None) -> None:
        if lattice is None:
            lattice = build_lattice(self.dim, self.L, p, rewire_dims, self._rng.host_stream())
        self.graph = lattice
        self._engine = make_engine(self.xp, lattice)

    def reset(self, start: str = "hot", seed: int | None = None) -> None:
        """New spins: "hot" (independent random) or "cold" (all up); a new seed restarts the random streams."""
        if start not in ("hot", "cold"):
            raise ParameterError("start", f"must be 'hot' or 'cold'; got {start!r}")
        if seed is not None:
            self.seed = params.check_seed(seed)
            self._rng = StreamRNG(self.xp, self.seed)
        shape = (self.L,) * self.dim
        if start == "cold":
            host = np.ones(shape, dtype=np.int8)
        else:
            host = (self._rng.host_stream().integers(0, 2, size=shape, dtype=np.int8) * 2 - 1).astype(np.int8)
        self.spins = self.xp.asarray(host)
        self.flipped = self.xp.zeros(shape, dtype=bool)
        self._flipped_count = None
        self.step_count = 0
        self._phase = 0

    # ---- dynamics ---------------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance n steps: a Metropolis sweep or one Wolff cluster flip each, following the schedule."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ParameterError("n", f"must be a non-negative integer number of steps; got {n!r}")
        sweeps = getattr(self._engine, "metropolis_sweeps", None)
        if sweeps is not None and n > 1 and self._schedule == ("metropolis",):
            # the engine runs the n sweeps at once, one rng key per sweep in order: the same trajectory
            self.spins, self.flipped = sweeps(self.spins, self._T, self._rng, int(n), want_mask=True)
            self._flipped_count = None
            self.step_count += int(n)
            return
        for i in range(int(n)):
            update = getattr(self._engine, self._schedule[self._phase].replace("-", "_"))
            last = i == n - 1
            self.spins, mask = update(self.spins, self._T, self._rng, want_mask=last)
            if last:
                self.flipped = mask
                self._flipped_count = None
            self._phase = (self._phase + 1) % len(self._schedule)
            self.step_count += 1

    # ---- measurements -----------------------------------------------------------------------
    def observables(self) -> dict[str, float]:
        """Energy per spin, |magnetisation| per spin, and the fraction of spins flipped in the last step."""
        n = self.n_sites
        if self._flipped_count is None:
            self._flipped_count = int(self.flipped.sum())
        bonds, spin_sum = self._engine.measure(self.spins)
        return {"energy": -bonds / n, "magnetisation": abs(spin_sum) / n, "flipped_fraction": self._flipped_count / n}

    def cluster_sizes(self) -> np.ndarray:
        """Sizes of the Fortuin-Kasteleyn clusters (bond probability 1 - exp(-2/T)) of the current spins,
        largest first (host int64). The bonds come from a stream of their own keyed by the step count, so
        observing never changes the trajectory."""
        return self._engine.cluster_sizes(self.spins, self._T, (self.seed, OBSERVATION_STREAMS + self.step_count))

    def edges(self) -> np.ndarray:
        return self.graph.edges()

    def rewired_edges(self) -> np.ndarray:
        return self.graph.new_edges.copy()

    def rewired_site_mask(self):
        """Backend bool array marking sites whose adjacency was changed by rewiring."""
        mask = np.zeros(self.n_sites, dtype=bool)
        mask[self.graph.modified_sites] = True
        return self.xp.asarray(mask.reshape((self.L,) * self.dim))

    # ---- save / resume ----------------------------------------------------------------------
    def get_state(self) -> dict:
        """Everything needed to resume the run exactly, as NumPy arrays and scalars."""
        g = self.graph
        return {
            "format": np.int64(STATE_FORMAT),
            "dim": np.int64(self.dim), "L": np.int64(self.L), "T": np.float64(self._T),
            "p": np.float64(g.p), "rewire_dims": np.str_(g.rewire_dims), "algorithm": np.str_(self._algorithm),
            "seed": np.uint64(self.seed), "streams_used": np.int64(self._rng.streams_used),
            "step_count": np.int64(self.step_count), "phase": np.int64(self._phase),
            "rewired_ends": np.int64(g.rewired_ends),
            "spins": to_numpy(self.spins).copy(), "flipped": to_numpy(self.flipped).copy(),
            "rewired_edge_ids": g.rewired_edge_ids.copy(), "new_edges": g.new_edges.copy(),
        }

    @classmethod
    def from_state(cls, state, backend: str = "auto") -> "IsingModel":
        """Rebuild a model from ``get_state()``; a damaged state raises ParameterError('state', ...)."""
        from latticelab.sim.models.ising.state import validate_state
        s = validate_state(state)
        model = cls.__new__(cls)
        model.dim, model.L = s["dim"], s["L"]
        model._T = s["T"]
        model._algorithm = s["algorithm"]
        model._schedule = params.parse_algorithm(s["algorithm"])
        model.seed = s["seed"]
        model._backend = select_backend(backend)
        model.xp = model._backend.xp
        check_fits(model.dim, model.L, model._backend)
        model._rng = StreamRNG(model.xp, model.seed, s["streams_used"])
        lattice = RewiredLattice(dim=model.dim, L=model.L, p=s["p"], rewire_dims=s["rewire_dims"],
                                 rewired_edge_ids=s["rewired_edge_ids"], new_edges=s["new_edges"],
                                 rewired_ends=s["rewired_ends"])
        model._build_graph(s["p"], s["rewire_dims"], lattice)
        model.spins = model.xp.asarray(s["spins"])
        model.flipped = model.xp.asarray(s["flipped"])
        model._flipped_count = None
        model.step_count = s["step_count"]
        model._phase = s["phase"] % len(model._schedule)
        return model
