"""The small-world rewired Ising model (thesis 003, chapter 7): H = -sum over edges s_i s_j, J = k_B = 1.

``IsingModel`` implements the model protocol (sim/model.py) on top of the rewired lattice (lattice.py) and the
update engines (engines.py: the NumPy/CuPy reference; gpu/engine.py: the CUDA kernels).
"""
from __future__ import annotations

import logging

import numpy as np

from latticelab.sim.backend import to_numpy
from latticelab.sim.memory import check_fits
from latticelab.sim.model import Model, Observable, StepBatch
from latticelab.sim.models.ising.engines import make_engine
from latticelab.sim.models.ising.footprint import device_bytes, host_peak_bytes
from latticelab.sim.models.ising.graph_arrays import full_adjacency
from latticelab.sim.models.ising.lattice import RewiredLattice, build_lattice
from latticelab.sim.models.ising.params import IsingParams, parse_algorithm
from latticelab.sim.models.ising.picture import ising_picture, split_ising_picture
from latticelab.sim.models.ising.study import STUDY
from latticelab.sim.params import ParameterError
from latticelab.sim.rng import StreamRNG

log = logging.getLogger(__name__)

OBSERVATION_STREAMS = 2 ** 63  # stream numbers of observables that draw random bonds
FIRST_RUN_STREAM = 1           # stream 0 builds the initial graph; the initial spins and the steps follow


def _observables_of_totals(totals: np.ndarray, n_sites: int) -> dict[str, np.ndarray]:
    """Per-step observables from the (bond sum, spin sum, flips) rows a frame reduced on the device."""
    sites = float(n_sites)
    return {"energy": -totals[:, 0] / sites, "abs_magnetisation": np.abs(totals[:, 1]) / sites,
            "flipped_fraction": totals[:, 2] / sites}


class _PendingIsingObservables:
    """PendingObservables (sim/model.py) over a frame's totals still being copied (gpu/engine.py PendingTotals)."""

    def __init__(self, totals, n_sites: int):
        self._totals, self._n_sites = totals, n_sites

    def ready(self) -> bool:
        return self._totals.ready()

    def result(self) -> dict[str, np.ndarray]:
        return _observables_of_totals(self._totals.result(), self._n_sites)

    def device_seconds(self) -> float | None:
        return self._totals.device_seconds()


class IsingModel(Model):
    """Rewired Ising model on a periodic 2D/3D lattice, updated by Metropolis, Wolff, Swendsen-Wang or a hybrid.

    ``IsingModel(params)`` or ``IsingModel(dim=2, L=64, T=2.0, ..., backend="numpy")`` (keywords are checked
    by the schema, IsingParams).
    """

    name = "ising"
    title = "Rewired Ising model"
    Params = IsingParams
    declared_observables = (
        Observable("abs_magnetisation", "|M| per spin"),
        Observable("energy", "energy per spin", unit="J", spread=True),
        Observable("flipped_fraction", "fraction flipped (Wolff: cluster size)", spread=True),
    )
    state_format = 1
    marks_label = "Show rewired links"
    study = STUDY      # what a study measures (sim/studies/capability.py; ising/study.py)
    splits_across_devices = True       # Metropolis only (split.py)
    devices_note = ("Metropolis sweeps split into slabs, the same spins bit for bit as on one GPU; Wolff and "
                    "Swendsen-Wang stay on one device")
    small_example = {"dim": 2, "L": 16, "T": 2.3, "p": 0.05, "algorithm": "2:1"}
    # latticelab 0.1 saved Ising states only, parameters and counters at the top level (sim/state.py upgrades them)
    format_1_layout = {"model_format": 1,
                       "params": ("seed", "dim", "L", "T", "p", "rewire_dims", "algorithm"),
                       "defaults": {"start": "hot"},    # reset-only parameters 0.1 did not store
                       "arrays": ("streams_used", "step_count", "phase", "rewired_ends", "spins", "flipped",
                                  "rewired_edge_ids", "new_edges")}

    @classmethod
    def estimate_bytes(cls, params: IsingParams, backend_name: str) -> int:
        """Peak bytes from dim, L, p and the algorithm (footprint.py: graph building, engine, scratch arrays)."""
        schedule = parse_algorithm(params.algorithm)
        if backend_name == "cuda":
            return device_bytes(params.dim, params.L, params.p, schedule)
        return host_peak_bytes(params.dim, params.L, params.p, schedule)

    @classmethod
    def estimate_bytes_per_device(cls, params: IsingParams, backend_name: str, devices: int) -> int:
        """Each device's share of a run split over ``devices`` GPUs: its packed slab, flips and the modified
        sites it owns (gpu/slabs.py)."""
        if devices == 1:
            return cls.estimate_bytes(params, backend_name)
        from latticelab.sim.models.ising.footprint import rewiring_counts
        from latticelab.sim.models.ising.gpu.slabs import device_bytes_per_part
        return device_bytes_per_part(params.dim, params.L, devices, rewiring_counts(params.dim, params.L,
                                                                                   params.p).entries)

    def __init__(self, params: IsingParams | None = None, backend: str = "auto", *,
                 lattice: RewiredLattice | None = None, devices=None, **values):
        """``devices``: the GPUs one run is split over ("0,1", "all", ids; default one device): Metropolis sweeps
        on slabs of the lattice (split.py); the spins and flips the model shows are then host copies."""
        from latticelab.sim.multidevice.devices import resolve_devices
        params = self._setup(params, backend, values)
        self._devices = resolve_devices(type(self), devices, self._backend)
        self._split = None
        self._device_xp = self.xp
        if len(self._devices) > 1:
            from latticelab.sim.models.ising.split import split_refusal
            refusal = split_refusal(params, len(self._devices))
            if refusal is not None:
                raise refusal
            self.xp = np                 # what the model shows (fields, pictures) lives on the host
        check_fits(type(self), params, self._backend, self._devices)
        self._schedule = parse_algorithm(params.algorithm)
        self._rng = StreamRNG(self.xp, params.seed)
        self._step_count = 0
        self._phase = 0
        self._build_graph(params.p, params.rewire_dims, lattice)
        self.reset()

    # ---- parameters -------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._params.dim

    @property
    def L(self) -> int:
        return self._params.L

    @property
    def seed(self) -> int:
        return self._params.seed

    @property
    def T(self) -> float:
        return self._params.T

    @T.setter
    def T(self, value) -> None:
        self.update(T=value)

    @property
    def p(self) -> float:
        return self.graph.p

    @property
    def rewire_dims(self) -> str:
        return self.graph.rewire_dims

    @property
    def algorithm(self) -> str:
        return self._params.algorithm

    @algorithm.setter
    def algorithm(self, value) -> None:
        self.update(algorithm=value)

    @property
    def n_sites(self) -> int:
        return self.L ** self.dim

    @property
    def devices(self) -> tuple[int, ...]:
        """The devices the run is split over (one: not split)."""
        return self._devices

    @property
    def spins(self):
        """The spins (int8 +-1, the lattice's shape): on the model's device, or a host copy of a split run's."""
        return self._split.spins() if self._split is not None else self._spins

    @spins.setter
    def spins(self, value) -> None:
        if self._split is not None:
            self._split.load(value)
        else:
            self._spins = value

    @property
    def flipped(self):
        """The sites the last step flipped (after ``advance(n)``: any of its steps)."""
        return self._split.flips() if self._split is not None else self._flipped

    @flipped.setter
    def flipped(self, value) -> None:
        if self._split is not None:
            self._split.set_flips(value)
        else:
            self._flipped = value

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.L,) * self.dim

    @property
    def step_count(self) -> int:
        return self._step_count

    def update(self, **changes) -> None:
        """Live changes: T, p, rewire_dims, algorithm. A new p or rewire_dims rebuilds the graph and keeps the
        spins. A bad value raises ParameterError and leaves the model as it was."""
        new = self._validated("live", changes)
        if self._split is not None and new.algorithm != self._params.algorithm:
            from latticelab.sim.models.ising.split import split_refusal
            refusal = split_refusal(new, len(self._devices))
            if refusal is not None:
                raise ParameterError("algorithm", str(refusal).removeprefix("devices: "))
        if (new.p, new.rewire_dims) != (self.graph.p, self.graph.rewire_dims):
            self._build_graph(new.p, new.rewire_dims)
        if new.algorithm != self._params.algorithm:
            self._schedule = parse_algorithm(new.algorithm)
            self._phase = 0
        self._params = new

    def set_rewiring(self, p=None, rewire_dims=None) -> None:
        """Rebuild the graph with a new p and/or rewired dimensions; the spins are kept."""
        self.update(**{k: v for k, v in (("p", p), ("rewire_dims", rewire_dims)) if v is not None})

    def _build_graph(self, p: float, rewire_dims: str, lattice: RewiredLattice | None = None) -> None:
        if lattice is None:
            used = self._rng.streams_used
            try:
                lattice = build_lattice(self.dim, self.L, p, rewire_dims, self._rng.host_stream())
            except ParameterError:
                # a refused graph takes no random stream: the run goes on (and saves) as if it was never asked for
                self._rng.streams_used = used
                raise
        if len(self._devices) > 1:
            self._split_graph(lattice)
            engine = None
        else:
            engine = make_engine(self.xp, lattice)   # before the graph is replaced: a failure leaves both as they were
        self.graph, self._engine = lattice, engine
        self._rewired_mask = None

    def _split_graph(self, lattice: RewiredLattice) -> None:
        from latticelab.sim.models.ising.split import SplitRun
        if self._split is None:
            self._split = SplitRun(self._device_xp, self._devices, lattice)
        else:
            self._split.rebuild(lattice)

    def reset(self, start: str | None = None, seed: int | None = None) -> None:
        """New spins: "hot" (independent random) or "cold" (all up). The random streams restart from the seed
        (after stream 0, which built the first graph), so the same seed always gives the same run."""
        new = self._validated("reset", {k: v for k, v in (("start", start), ("seed", seed)) if v is not None})
        self._rng = StreamRNG(self.xp, new.seed, FIRST_RUN_STREAM)
        self._params = new
        if new.start == "cold":
            host = np.ones(self.shape, dtype=np.int8)
        else:
            host = (self._rng.host_stream().integers(0, 2, size=self.shape, dtype=np.int8) * 2 - 1).astype(np.int8)
        self.spins = self.xp.asarray(host)
        self.flipped = self.xp.zeros(self.shape, dtype=bool)
        self._flipped_count = None
        self._step_count = 0
        self._phase = 0

    # ---- dynamics ---------------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance n steps: a Metropolis sweep or one Wolff cluster flip each, following the schedule."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ParameterError("n", f"must be a non-negative integer number of steps; got {n!r}")
        T = self._params.T
        if self._split is not None:
            if n:
                self._split.sweeps(T, self._rng, int(n), mask="last")
                self._flipped_count = None
                self._step_count += int(n)
            return
        sweeps = getattr(self._engine, "metropolis_sweeps", None)
        if sweeps is not None and n > 1 and self._schedule == ("metropolis",):
            # the engine runs the n sweeps at once, one rng key per sweep in order: the same trajectory
            self.spins, self.flipped = sweeps(self.spins, T, self._rng, int(n), want_mask=True)
            self._flipped_count = None
            self._step_count += int(n)
            return
        for i in range(int(n)):
            update = getattr(self._engine, self._schedule[self._phase].replace("-", "_"))
            last = i == n - 1
            self.spins, mask = update(self.spins, T, self._rng, want_mask=last)
            if last:
                self.flipped = mask
                self._flipped_count = None
            self._phase = (self._phase + 1) % len(self._schedule)
            self._step_count += 1

    def changed(self):
        """Sites flipped by the last step (for n > 1 Metropolis sweeps at once: by the last sweep; after
        ``advance(n)``: by any of its n steps)."""
        return self.flipped

    def advance(self, n: int, wait: bool = True) -> StepBatch:
        """n steps for a frame: the same trajectory as n calls of ``step(1)``, the observables after each step and
        the union of their flips. On a CUDA device nothing is copied to the host per step: Metropolis-only runs on
        the packed kernels, which reduce each sweep's energy, magnetisation and flips in the sweep's own launches
        and OR the flip words (metropolis_multispin.cu); other schedules measure each step into a device buffer.
        Either way one copy per frame. On NumPy: the default, step by step."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n: must be a positive integer number of steps; got {n!r}")
        n = int(n)
        engine, T = self._engine, self._params.T
        if self._split is not None:
            return self._advance_split(n, wait)
        if getattr(engine, "measure_into", None) is None:
            return super().advance(n)
        xp = self.xp
        if self._schedule == ("metropolis",) and getattr(engine, "metropolis_frame", None) is not None \
                and engine.words and self.L % 64 == 0:
            self.spins, union, totals = engine.metropolis_frame(self.spins, T, self._rng, n, wait=wait)
        else:
            device_totals = xp.zeros((n, 3), dtype=xp.uint64)
            union = None
            for i in range(n):
                update = getattr(engine, self._schedule[self._phase].replace("-", "_"))
                self.spins, mask = update(self.spins, T, self._rng, want_mask=True)
                union = mask.copy() if union is None else xp.logical_or(union, mask, out=union)
                engine.measure_into(self.spins, device_totals[i])
                device_totals[i, 2] = xp.count_nonzero(mask)
                self._phase = (self._phase + 1) % len(self._schedule)
            totals = to_numpy(device_totals).view(np.int64)
        self.flipped = union
        self._flipped_count = None
        first = self._step_count
        self._step_count += n
        times = np.arange(first + 1, first + n + 1, dtype=np.float64)
        if isinstance(totals, np.ndarray):
            return StepBatch(n, times, _observables_of_totals(totals, self.n_sites), union)
        return StepBatch(n, times, _PendingIsingObservables(totals, self.n_sites), union)

    def _advance_split(self, n: int, wait: bool) -> StepBatch:
        """A frame of a split run: each sweep's bond sum, spin sum and flips reduced by the kernels on every
        device and summed in device order; the flips' union kept on the devices until shown. The sweeps run back
        to back, their totals copied once (SplitRun.frame; with ``wait=False`` still on their way); a lattice with
        rewired edges, or split over processes, is measured sweep by sweep."""
        pending = self._split.frame(self._params.T, self._rng, n)
        if pending is None:
            self._split.clear_flips()
            totals = np.empty((n, 3), dtype=np.int64)
            for i in range(n):
                totals[i] = self._split.measured_sweep(self._params.T, self._rng)
        elif wait:
            totals = pending.result()
        self._flipped_count = None
        first = self._step_count
        self._step_count += n
        times = np.arange(first + 1, first + n + 1, dtype=np.float64)
        observables = (_observables_of_totals(totals, self.n_sites) if pending is None or wait
                       else _PendingIsingObservables(pending, self.n_sites))
        return StepBatch(n, times, observables, self._split.device_flips())

    def _measure(self) -> tuple[float, int]:
        return self._split.measure() if self._split is not None else self._engine.measure(self.spins)

    # ---- measurements -----------------------------------------------------------------------
    def observables(self) -> dict[str, float]:
        """Energy per spin, |magnetisation| per spin, and the fraction of spins flipped in the last step."""
        n = self.n_sites
        if self._flipped_count is None:
            self._flipped_count = int(self.flipped.sum())
        bonds, spin_sum = self._measure()
        return {"energy": -bonds / n, "abs_magnetisation": abs(spin_sum) / n,
                "flipped_fraction": self._flipped_count / n}

    def energy_and_magnetisation(self) -> tuple[float, float]:
        """Energy per spin and signed magnetisation per spin (the HasMagnetisation capability): the engine
        reduces (bond sum, spin sum) on the spins' device(s) and copies the two numbers back."""
        bonds, spin_sum = self._measure()
        return -bonds / self.n_sites, spin_sum / self.n_sites

    def fields(self) -> dict:
        return {"spins": self.spins}

    def main_field_at(self, index) -> tuple[str, int]:
        """("spins", the spin at ``index``): read from its device, also for a split run (no gather)."""
        if self._split is not None:
            return "spins", self._split.spin_at(index)
        return "spins", int(self.spins[tuple(int(i) for i in index)])

    def cluster_sizes(self) -> np.ndarray:
        """Sizes of the Fortuin-Kasteleyn clusters (bond probability 1 - exp(-2/T)) of the current spins,
        largest first (host int64). The bonds come from a stream of their own keyed by the step count, so
        observing never changes the trajectory."""
        key = (self.seed, OBSERVATION_STREAMS + self._step_count)
        if self._split is not None:        # on the host, from the gathered spins
            from latticelab.sim.models.ising.swendsen_wang import fk_cluster_sizes
            return fk_cluster_sizes(self.graph, self.spins, self.T, key)
        return self._engine.cluster_sizes(self.spins, self.T, key)

    def cluster_size_groups(self) -> dict[str, np.ndarray]:
        """Sizes of the like-spin clusters (thesis figure 7.17) of up and of down spins, largest first."""
        from latticelab.sim.models.ising.clusters import cluster_sizes
        sizes = cluster_sizes(self.spins, self.graph)
        return {"up": sizes[1], "down": sizes[-1]}

    def edges(self) -> np.ndarray:
        return self.graph.edges()

    def adjacency_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """The graph as the lattice stores it, in CSR form (the optional HasGraph method, sim/model.py)."""
        return full_adjacency(self.graph)

    def rewired_edges(self) -> np.ndarray:
        return self.graph.new_edges.copy()

    def rewired_site_mask(self):
        """Backend bool array marking sites whose adjacency was changed by rewiring (cached per graph)."""
        if self._rewired_mask is None:
            mask = np.zeros(self.n_sites, dtype=bool)
            mask[self.graph.modified_sites] = True
            self._rewired_mask = self.xp.asarray(mask.reshape(self.shape))
        return self._rewired_mask

    def picture(self, highlight=None, marks: bool = False):
        """Spins with the highlight mask; with ``marks`` the rewired sites and links too. A split run's picture is
        made of its slabs, each encoded on its own device (split.py: SplitRun.picture_slabs)."""
        if self._split is not None:
            if self._split.all_local:
                rewired = self.rewired_site_mask() if marks else None
                slabs = self._split.picture_slabs(highlight, rewired)
                return split_ising_picture(slabs, highlight is not None, marks,
                                           self.graph.new_edges if marks else None)
            highlight = None if highlight is None else np.asarray(highlight, dtype=bool)   # an MPI job: gathered
        if not marks:
            return ising_picture(self.xp, self.spins, highlight)
        return ising_picture(self.xp, self.spins, highlight, self.rewired_site_mask(), self.graph.new_edges)

    # ---- save / resume ----------------------------------------------------------------------
    def get_state(self) -> dict:
        """The arrays and counters that, with the parameters, resume the run exactly."""
        g = self.graph
        return {
            "streams_used": np.int64(self._rng.streams_used), "step_count": np.int64(self._step_count),
            "phase": np.int64(self._phase), "rewired_ends": np.int64(g.rewired_ends),
            "spins": to_numpy(self.spins).copy(), "flipped": to_numpy(self.flipped).copy(),
            "rewired_edge_ids": g.rewired_edge_ids.copy(), "new_edges": g.new_edges.copy(),
        }

    def set_state(self, arrays: dict) -> None:
        """The ``get_state()`` arrays of an Ising model with these parameters, put into this one in place (the
        ResumesInPlace capability): spins, flips, random-stream position and counters; the graph is rebuilt
        only when the arrays hold another one. Damaged arrays raise ParameterError('state', ...) first."""
        from latticelab.sim.models.ising.state import validate_arrays
        params = self._params
        s = validate_arrays(params, arrays)
        g = self.graph
        same_graph = (s["rewired_ends"] == g.rewired_ends
                      and np.array_equal(s["rewired_edge_ids"], g.rewired_edge_ids)
                      and np.array_equal(s["new_edges"], np.asarray(g.new_edges).reshape(-1, 2)))
        if not same_graph:
            self._build_graph(params.p, params.rewire_dims, _saved_lattice(params, s))
        self._put_back(params, s)

    def _put_back(self, params: IsingParams, s: dict) -> None:
        """The spins, the random-stream position and the counters of validated state arrays ``s``."""
        self._rng = StreamRNG(self.xp, params.seed, s["streams_used"])
        self.spins = self.xp.asarray(s["spins"])
        self.flipped = self.xp.asarray(s["flipped"])
        self._flipped_count = None
        self._step_count = s["step_count"]
        self._phase = s["phase"] % len(self._schedule)

    @classmethod
    def from_state(cls, params: IsingParams, arrays: dict, backend: str = "auto", devices=None) -> "IsingModel":
        """Rebuild from validated parameters and ``get_state()`` arrays; damaged arrays raise
        ParameterError('state', ...). The constructor builds the model on the saved graph (split over
        ``devices`` as the constructor's option); the spins, the random-stream position and the counters are then
        put back."""
        from latticelab.sim.models.ising.state import validate_arrays
        s = validate_arrays(params, arrays)
        model = cls(params, backend=backend, lattice=_saved_lattice(params, s), devices=devices)
        model._put_back(params, s)
        return model


def _saved_lattice(params: IsingParams, s: dict) -> RewiredLattice:
    """The rewired lattice that validated state arrays ``s`` describe (its rewiring as saved, not redrawn)."""
    return RewiredLattice(dim=params.dim, L=params.L, p=params.p, rewire_dims=params.rewire_dims,
                          rewired_edge_ids=s["rewired_edge_ids"], new_edges=s["new_edges"],
                          rewired_ends=s["rewired_ends"])
