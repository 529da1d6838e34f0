"""The cortical spiking network of thesis 003, chapter 8, on the model protocol (sim/model.py).

``CortexModel`` builds the network from the seed (network.py), keeps its arrays on the chosen device
(engines.CortexState) and steps it with the NumPy phases or, on CuPy, the CUDA kernels (engines.py). Each
step also records the pseudo-EEG (mean membrane potential of the excitatory neurons, mV) and the fractions
of firing excitatory and inhibitory neurons in a ring of recent steps on the device (``trace``), so a batch run or
a plot dock can take many steps' values in one copy. On CUDA a step is two kernel launches and nothing else
(phase 2 writes the trace row), and ``advance(n)`` (a window frame) copies the frame's observables once; the
source lists are packed 16-bit offsets for r <= 127 (network.py), int32 indices beyond.
"""
from __future__ import annotations

import math

import numpy as np

from latticelab.sim.backend import to_numpy
from latticelab.sim.memory import check_fits
from latticelab.sim.model import EffectiveValue, Impulse, Model, Observable, SignalColumn, StepBatch
from latticelab.sim.models.cortex.engines import (EV_MAX, THREADS, V_PEAK, CortexState, CudaPhases, Inputs,
                                                  NumpyPhases, Record, connect_on_device, cuda_layout,
                                                  layout_bytes_per_neuron,
                                                  washout_tables)
from latticelab.sim.models.cortex.network import connect, dynamics, halo_side, make_neurons
from latticelab.sim.model import RunHooks, RunOption
from latticelab.sim.models.cortex.params import CortexParams
from latticelab.sim.models.cortex.study import STUDY
from latticelab.sim.params import ParameterError
from latticelab.sim.picture import scalar_picture
from latticelab.sim.rng import counter_problem

V_LOW, V_HIGH = -80.0, 30.0         # the picture's range (mV)
TRACE_STEPS = 16384                 # steps of EEG and firing fractions kept on the device


def bytes_per_neuron(k: int, L: int | None = None, r: int | None = None, layout: str = "int32") -> float:
    """Device memory per neuron: the source lists (int32: 4k; packed: 8 ceil(k/4) and the halo of spike codes,
    (L + 2r)^2 / L^2 bytes), ring 4 EV_MAX, v, u, tv 16, data and delay 2, temporaries 16."""
    lists = 4 * k if layout == "int32" else layout_bytes_per_neuron(k, L, r, layout)
    return lists + 4 * EV_MAX + 18 + 16


# Building the connections on NumPy (network.connect, in chunks of about 2^20 connections, at least one slot of
# every neuron) takes about this many bytes per connection of a chunk: int64 slots, receivers, offsets, the
# pending list and the Philox words (measured with tracemalloc: 184 +- 1 at k = 10 .. 200).
CONNECT_BYTES_PER_CONNECTION = 184
CONNECT_CHUNK = 1 << 20
# The NumPy phase 2 delivers spikes through an outgoing-edge index (engines.py NumpyPhases._outgoing), built
# once per network by a stable argsort of the k n sources: int64 order, its int64 remainder and the int32
# receivers kept (plus uint16 sort keys where n <= 2^16), beside the int32 sources. Bytes per connection:
OUTGOING_BUILD_BYTES = 4 + 8 + 8 + 4
# A step gathers the receivers of the firing neurons (an int64 index, its int64 arange and sum, the int32
# receivers: 28 bytes a firing connection) and adds their washout to w <= EV_MAX ring rows (three float32
# temporaries); the estimate allows for a quarter of the network firing in one step.
STEP_BYTES_PER_FIRING_CONNECTION = 28
FIRING_ALLOWED = 0.25

# What a saved state's arrays may hold. The largest input one step can deliver is k A / lambda = 1000 x 100 /
# 0.01 = 1e7 mV (the schema's bounds); 1e12 leaves room for any run of them, and refuses damaged values (1e30).
V_FLOOR = -1e12
STATE_RANGES = (("v", V_FLOOR, V_PEAK, "membrane potentials, mV"), ("u", -1e12, 1e12, "recovery variables"),
                ("ev", -1e12, 1e12, "pending inputs, mV"))


class CortexModel(Model):
    """Izhikevich neurons on a periodic L x L grid with k incoming connections each (thesis 003, chapter 8).

    ``CortexModel(params)`` or ``CortexModel(L=64, k=50, r=8, backend="numpy")`` (keywords checked by the
    schema, CortexParams). One step is 1 ms.
    """

    name = "cortex"
    title = "Cortical spiking network"
    splits_across_devices = True       # row slabs with r-row halos (slabs.py; thesis Algorithm 63)
    splits_across_processes = False    # over the GPUs of one process, not an MPI job's processes
    split_options: dict = {}           # SplitCortex's exchanger, overlap and layout (tests and benchmarks)
    devices_note = ("the grid's rows in slabs with r-row halos of spike flags (thesis Algorithm 63): the same spikes, "
                    "states and EEG bit for bit as on one GPU")
    Params = CortexParams
    declared_observables = (
        Observable("eeg", "pseudo-EEG (mean excitatory v)", unit="mV"),
        Observable("firing_e", "excitatory firing fraction", spread=True),
        Observable("firing_i", "inhibitory firing fraction"),
    )
    time_label = "time (ms)"
    field_units = {"v": "mV", "fired": "1"}
    state_format = 1
    cpu_pace = 0     # auto: at one 1 ms step a frame the first periodogram came after half a minute
    small_example = {"L": 16, "k": 10, "r": 4}
    # extra inputs and outputs of `latticelab run cortex` (sim/model.py RunOption; CortexRun below)
    run_options = (
        RunOption("schedule", "apply the live-parameter changes of this TOML schedule ([[change]] tables with a "
                              "step and the values; see sim/models/cortex/schedule.py) before their steps",
                  metavar="FILE.toml"),
        RunOption("qeeg_out", "write the qEEG metrics of the pseudo-EEG as CSV, one row per periodogram update "
                              "(every 512 steps once 1024 are recorded): entropy, peak, median and edge "
                              "frequencies, relative band powers", output=True),
    )

    @classmethod
    def run_hooks(cls, values: dict) -> "CortexRun":
        return CortexRun(values)
    # capabilities (sim/model.py): HasSignal, HasProbe, HasEffectiveParameters, HasImpulse
    signal_rate = 1000.0                # Hz: one sample per 1 ms step
    signal_columns = (
        SignalColumn("eeg", "pseudo-EEG (mean excitatory v)", "mV", "signal"),
        SignalColumn("firing_e", "excitatory", "", "fraction"),
        SignalColumn("firing_i", "inhibitory", "", "fraction"),
        SignalColumn("probe_v", "membrane potential of the picked neuron", "mV", "probe"),
    )
    probe_label = "neuron"
    study = STUDY      # what a study measures (sim/studies/capability.py; cortex/study.py)
    # the thesis's sample configuration (section 8.3): a boost to 10% of the neurons for 50 steps, "a brief
    # external impulse or even to jump start the simulation"
    impulse = Impulse("Boost", (("boost_fraction", 0.1),), 50,
                      "extra input (Boost, mV/ms) to 10% of the neurons, drawn anew each step, for 50 ms")

    @classmethod
    def estimate_bytes(cls, params: CortexParams, backend_name: str) -> int:
        """Peak bytes from L and k. On a GPU: running (bytes_per_neuron; kernels/connect.cu writes the sources, or
        the packed offsets for r <= 127, directly). On NumPy the largest of: building the connections (the int32
        sources plus one chunk's scratch), building the outgoing-edge index of phase 2 (the sort, beside the
        sources and the neurons' state), and running (sources, receivers and offsets kept, the neurons' state,
        and a step's temporaries)."""
        n, k = params.L ** 2, params.k
        if backend_name == "cuda":
            return int(math.ceil(bytes_per_neuron(k, params.L, params.r, cuda_layout(params.r)) * n))
        neuron = bytes_per_neuron(0)                       # the ring, v, u, tv, data, delay and temporaries
        slots_per_chunk = min(k, max(1, CONNECT_CHUNK // n))
        building = (4 * k + CONNECT_BYTES_PER_CONNECTION * slots_per_chunk + 24) * n
        keys = 2 * k if n <= 1 << 16 else 0
        outgoing = (4 * k + OUTGOING_BUILD_BYTES * k + keys + neuron) * n
        step = STEP_BYTES_PER_FIRING_CONNECTION * FIRING_ALLOWED * k + 12 * EV_MAX
        running = (8 * k + 8 + neuron + step) * n
        return int(math.ceil(max(building, outgoing, running)))

    @classmethod
    def estimate_bytes_per_device(cls, params: CortexParams, backend_name: str, devices: int) -> int:
        """Each device's share of a split run: its rows' neurons and the halo rows (slabs.py)."""
        if devices == 1:
            return cls.estimate_bytes(params, backend_name)
        from latticelab.sim.models.cortex.slabs import device_bytes
        return device_bytes(params.L, params.k, params.r, devices, cuda_layout(params.r))

    def __init__(self, params: CortexParams | None = None, backend: str = "auto", *, phases=None, devices=None,
                 **values):
        """``devices``: the GPUs one run is split over ("0,1", "all", ids; default one device): the grid's rows in
        slabs (slabs.py), the same spikes, states and EEG as on one device; the arrays the model shows are then
        host copies."""
        from latticelab.sim.multidevice.devices import resolve_devices
        params = self._setup(params, backend, values)
        self._devices = resolve_devices(type(self), devices, self._backend)
        self._split = None
        if len(self._devices) > 1:
            from latticelab.sim.models.cortex.slabs import split_layout
            split_layout(params.L, params.r, len(self._devices), self.split_options.get("threads", THREADS))
        check_fits(type(self), params, self._backend, self._devices)
        if len(self._devices) > 1:
            from latticelab.sim.models.cortex.slabs import SplitCortex
            self._split = SplitCortex(self.xp, self._devices, params, **self.split_options)
            self.xp = np                 # what the model shows (fields, pictures, states) lives on the host
            phases = None
        elif phases is None:
            phases = CudaPhases(self.xp) if self._backend.is_gpu else NumpyPhases()
        self._phases = phases
        self.reset()

    @property
    def devices(self) -> tuple[int, ...]:
        """The devices the run is split over (one: not split)."""
        return self._devices

    @property
    def state(self) -> CortexState:
        """The network's arrays: on the model's device, or a host copy of a split run's (slabs.py)."""
        return self._split.state() if self._split is not None else self._state

    @state.setter
    def state(self, value: CortexState) -> None:
        self._state = value

    # ---- parameters -------------------------------------------------------------------------
    @property
    def L(self) -> int:
        return self._params.L

    @property
    def n_neurons(self) -> int:
        return self._params.L ** 2

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.L, self.L)

    @property
    def step_count(self) -> int:
        return self._step_count

    def update(self, **changes) -> None:
        """Live changes: inputs, noise, boost, A, tau and the drug factors. A bad value raises ParameterError
        and leaves the model as it was. A washout longer than 60 steps is cut (with a WashoutCutWarning)."""
        self._params = self._validated("live", changes)
        self._apply_inputs()

    def _apply_inputs(self) -> None:
        self._inputs = Inputs.from_params(self._params)
        self._table, self._w = washout_tables(self._params)

    def reset(self, seed: int | None = None) -> None:
        """A new network and initial state from the seed (types, dynamics, delays, connections, potentials)."""
        self._params = self._validated("reset", {} if seed is None else {"seed": seed})
        p = self._params
        xp = self.xp
        neurons = make_neurons(p.seed, p.L ** 2, p.excitatory_fraction)
        self._types = neurons.types
        if self._split is not None:
            self._split.build(p.seed, neurons)
            xp = self._split.xp                     # the trace and the last observables live on part 0
        else:
            sources, packed, halo, pad = self._make_sources()
            self.state = CortexState(
                L=p.L, k=p.k, sources=sources, data=xp.asarray(neurons.types << 1),
                tv=xp.asarray(neurons.tv), delay=xp.asarray(neurons.delay), v=xp.asarray(neurons.v),
                u=xp.asarray(neurons.u), ev=xp.zeros((EV_MAX, p.L ** 2), xp.float32), ev_idx=0,
                packed=packed, halo=halo, pad=pad)
            self.state.refresh_halo(self._phases.xp)
            self._phases.prepare(self.state)
        self._n_exc = int(np.count_nonzero(neurons.types == 0))
        self._n_inh = p.L ** 2 - self._n_exc
        self._scale = np.array([1.0 / max(self._n_exc, 1), 1.0 / max(self._n_exc, 1), 1.0 / max(self._n_inh, 1)])
        self._scale_device = None
        self._step_count = 0
        with self._on_trace_device():
            self._trace = xp.zeros((TRACE_STEPS, 4), xp.float64)
            self._last = xp.asarray(self._sums_to_observables(np.array(
                [float(neurons.v[neurons.types == 0].astype(np.float64).sum()), 0.0, 0.0])))
        self._trace_xp = xp
        self.probe = 0
        self._drained = 0
        self._apply_inputs()

    def _make_sources(self):
        """(sources, packed, halo, pad): int32 lists (NumPy; CUDA with r > 127) or, on CUDA with r <= 127, the
        packed offsets and an empty halo of margin r (CudaPhases.layout_for)."""
        p = self._params
        if isinstance(self._phases, CudaPhases):
            xp = self._phases.xp
            try:
                layout = self._phases.layout_for(p.r)
            except ValueError as exc:
                raise ParameterError("r", str(exc)) from None
            lists = connect_on_device(xp, layout, p.seed, p.L, p.k, p.r)
            if layout == "packed":
                return None, lists, xp.zeros(halo_side(p.L, p.r) ** 2, xp.uint8), p.r
            return lists, None, None, 0
        return self.xp.asarray(connect(p.seed, p.L, p.k, p.r)), None, None, 0

    def _on_trace_device(self):
        """A context with the device and stream of the trace current (part 0 of a split run: its update stream
        wrote the trace, and a copy on another stream would not wait for it)."""
        import contextlib
        return self._split.on_part0() if self._split is not None else contextlib.nullcontext()

    def _sums_to_observables(self, sums):
        """[eeg, firing_e, firing_i] from [sum of excitatory v, firing excitatory, firing inhibitory]."""
        if isinstance(sums, np.ndarray):
            return sums * self._scale
        if self._scale_device is None:
            self._scale_device = self._phases.xp.asarray(self._scale)
        return sums * self._scale_device

    # ---- dynamics ---------------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance n steps of 1 ms (phase 1, ring index + 1, phase 2 each; Algorithm 60)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ParameterError("n", f"must be a non-negative integer number of steps; got {n!r}")
        self._steps(int(n))

    def _steps(self, n: int, union=None) -> None:
        seed = self._params.seed
        if self._split is not None:
            record = Record(self._trace, 0, self._last, self._probe, float(self._scale[0]), float(self._scale[2]))
            for _ in range(n):
                record.slot = self._step_count % TRACE_STEPS
                self._split.step(seed, self._step_count, self._inputs, self._table, self._w, record, union)
                self._step_count += 1
                if self._spikes is not None:
                    self._spikes.record(self._step_count)
            return
        s = self.state
        if isinstance(self._phases, CudaPhases):
            # two launches a step; phase 2 finishes the EEG sums into the trace and ``_last`` itself
            record = Record(self._trace, 0, self._last, self._probe, float(self._scale[0]), float(self._scale[2]))
            for _ in range(n):
                record.slot = self._step_count % TRACE_STEPS
                self._phases.step(s, seed, self._step_count, self._inputs, self._table, self._w, record, union)
                self._step_count += 1
                if self._spikes is not None:
                    self._spikes.record(s.data, self._step_count)
            return
        for _ in range(n):
            sums = self._phases.phase1(s, seed, self._step_count, self._inputs)
            s.ev_idx = (s.ev_idx + 1) % EV_MAX
            self._phases.phase2(s, self._table, self._w)
            self._last = self._sums_to_observables(sums)
            slot = self._step_count % TRACE_STEPS
            self._trace[slot, :3] = self._last
            self._trace[slot, 3] = s.v[self._probe]
            self._step_count += 1
            if self._spikes is not None:
                self._spikes.record(s.data, self._step_count)

    def advance(self, n: int, wait: bool = True) -> StepBatch:
        """n steps for a frame (the same trajectory as n calls of ``step(1)``): on the kernels, the union of the
        neurons that fired is set by phase 1 and the observables come from the device trace in one copy per
        frame (per TRACE_STEPS steps); on NumPy, the default step by step."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n: must be a positive integer number of steps; got {n!r}")
        if self._split is None and not isinstance(self._phases, CudaPhases):
            return super().advance(n)
        n = int(n)
        if self._split is not None:
            union = self._split.new_unions()
        else:
            xp = self._phases.xp
            union = xp.zeros(self.n_neurons, xp.uint8)
        first = self._step_count
        rows = []
        while self._step_count < first + n:
            start = self._step_count
            chunk = min(first + n - start, TRACE_STEPS)
            self._steps(chunk, union)
            a, b = start % TRACE_STEPS, start % TRACE_STEPS + chunk
            with self._on_trace_device():
                if b <= TRACE_STEPS:
                    rows.append(to_numpy(self._trace[a:b, :3]))
                else:
                    rows += [to_numpy(self._trace[a:, :3]), to_numpy(self._trace[:b - TRACE_STEPS, :3])]
        values = np.concatenate(rows)
        times = np.arange(first + 1, first + n + 1, dtype=np.float64)
        observed = {"eeg": values[:, 0].copy(), "firing_e": values[:, 1].copy(), "firing_i": values[:, 2].copy()}
        fired = self._split.gather_unions(union) if self._split is not None else union.view(xp.bool_)
        return StepBatch(n, times, observed, fired.reshape(self.shape))

    # ---- spike trains (RecordsSpikes, sim/model.py; spikes.py) -------------------------------------------
    _spikes = None

    def record_spikes(self, neurons=None):
        """Record from now on which neurons of ``neurons`` (None: all; a range, or (first, count)) fire in each
        step; returns the recording (its ``spikes()``: steps and neuron indices). Replaces an earlier one."""
        from latticelab.sim.models.cortex.spikes import CudaSpikes, NumpySpikes
        if self._split is not None:
            self._spikes = self._split.spikes(self.n_neurons, neurons)
        elif isinstance(self._phases, CudaPhases):
            self._spikes = CudaSpikes(self._phases.xp, self.n_neurons, neurons)
        else:
            self._spikes = NumpySpikes(self.n_neurons, neurons)
        return self._spikes

    def stop_recording_spikes(self):
        """End the recording (its spikes stay readable); returns it, or None when none was on."""
        recording, self._spikes = self._spikes, None
        if recording is not None:
            recording.drain()
        return recording

    @property
    def spike_recording(self):
        return self._spikes

    def changed(self):
        """Neurons that fired in the last step."""
        return self.fired

    @property
    def fired(self):
        data = self._split.field("data") if self._split is not None else self.state.data
        return ((data & 1) == 1).reshape(self.shape)

    @property
    def v(self):
        v = self._split.field("v") if self._split is not None else self.state.v
        return v.reshape(self.shape)

    # ---- measurements -----------------------------------------------------------------------
    def observables(self) -> dict[str, float]:
        """Pseudo-EEG (mV) and the firing fractions of the excitatory and inhibitory neurons in the last step."""
        with self._on_trace_device():
            last = to_numpy(self._last)
        eeg, fe, fi = (float(x) for x in last)
        return {"eeg": eeg, "firing_e": fe, "firing_i": fi}

    @property
    def probe(self) -> int:
        """The neuron whose membrane potential ``trace`` records (a neuron picked in the view)."""
        return self._probe

    @probe.setter
    def probe(self, index: int) -> None:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < self.n_neurons:
            raise ParameterError("probe", f"must be a neuron index in [0, {self.n_neurons - 1}]; got {index!r}")
        self._probe = int(index)
        if self._split is not None:
            self._split.engine.set_probe(self._probe)

    def trace(self, since: int | None = None) -> np.ndarray:
        """Host (m, 5) array of [time in ms after the step, eeg, firing_e, firing_i, v of the probe neuron] for the
        steps after ``since`` (default: after the last ``trace`` call), at most the last TRACE_STEPS steps; one
        copy from the device."""
        start = self._drained if since is None else int(since)
        start = max(start, self._step_count - TRACE_STEPS, 0)
        self._drained = self._step_count
        steps = np.arange(start, self._step_count)
        if not steps.size:
            return np.zeros((0, 5))
        with self._on_trace_device():
            rows = to_numpy(self._trace[self._trace_xp.asarray(steps % TRACE_STEPS)])
        return np.column_stack([steps + 1, rows])

    def fields(self) -> dict:
        return {"v": self.v, "fired": self.fired}

    def neuron(self, index: int) -> dict:
        """One neuron, for a plot of its potential: type, a, b, c, d, delay, v and u now (one small copy)."""
        if not 0 <= int(index) < self.n_neurons:
            raise ParameterError("neuron", f"must be an index in [0, {self.n_neurons - 1}]; got {index!r}")
        i = int(index)
        if self._split is not None:             # one neuron's numbers, not the whole network gathered
            tv, delay, v, u = self._split.neuron(i)
        else:
            s = self.state
            tv, delay = to_numpy(s.tv[:, i]), int(to_numpy(s.delay[i:i + 1])[0])
            v, u = float(to_numpy(s.v[i:i + 1])[0]), float(to_numpy(s.u[i:i + 1])[0])
        a, b, c, d = (float(x[0]) for x in dynamics(self._types[i:i + 1], tv[:, None]))
        return {"index": i, "x": i % self.L, "y": i // self.L,
                "type": "inhibitory" if self._types[i] else "excitatory", "a": a, "b": b, "c": c, "d": d,
                "delay": delay, "v": v, "u": u}

    def effective(self) -> dict:
        """Base and drug-modified A, tau, I and noise per type, and the washout length in use."""
        return {**self._params.effective(), "w": self._w}

    def probe_info(self, index: int) -> dict:
        """HasProbe: the neuron's type, a, b, c, d, delay, v and u (``neuron``)."""
        return self.neuron(index)

    def effective_parameters(self) -> tuple[EffectiveValue, ...]:
        """HasEffectiveParameters: A, tau, I and noise per type as set and as the drug factors make them
        (equations 8.4, 8.5), then the boost: its amplitude and the mean extra input per neuron it gives now
        (amplitude x boosted fraction; 0 while no boost is active)."""
        p = self._params
        effective = p.effective()
        units = {"A": "mV", "tau": "ms", "I": "mV/ms", "n": "mV/ms"}
        rows = [EffectiveValue(f"{name}_{kind}", units[name], float(getattr(p, f"{name}_{kind}")),
                               float(effective[kind][name]))
                for kind in ("e", "i") for name in ("A", "tau", "I", "n")]
        rows.append(EffectiveValue("boost (mean input)", "mV/ms", float(p.boost), float(p.boost * p.boost_fraction)))
        return tuple(rows)

    def edges(self) -> np.ndarray:
        """(N k, 2) int64 [source, receiver] of every connection (host; large: N k rows)."""
        if self._split is not None:
            sources = self._split.source_indices()
        else:
            sources = to_numpy(self.state.source_indices(self._phases.xp))
        receivers = np.broadcast_to(np.arange(self.n_neurons), sources.shape)
        return np.column_stack([sources.reshape(-1).astype(np.int64), receivers.reshape(-1).astype(np.int64)])

    def picture(self, highlight=None, marks: bool = False):
        """Membrane potential from -80 to 30 mV through 'inferno'; highlighted cells (the runner passes the
        neurons that fired since the last frame) in white."""
        return scalar_picture(self.xp, self.v, V_LOW, V_HIGH, "inferno", highlight,
                              label="membrane potential v", unit="mV", highlight_label="fired")

    # ---- save / resume ----------------------------------------------------------------------
    def get_state(self) -> dict:
        """The dynamic arrays (potentials, recovery, fired bits, the ring of pending PSPs) and counters; the
        network itself is rebuilt from the seed, and its types are kept to check that."""
        s = self.state
        with self._on_trace_device():
            last = to_numpy(self._last).astype(np.float64)
        return {"step_count": np.int64(self._step_count), "ev_idx": np.int64(s.ev_idx),
                "v": to_numpy(s.v).copy(), "u": to_numpy(s.u).copy(), "data": to_numpy(s.data).copy(),
                "ev": to_numpy(s.ev).copy(), "last": last.copy()}

    @classmethod
    def from_state(cls, params: CortexParams, arrays: dict, backend: str = "auto", devices=None) -> "CortexModel":
        """Rebuild from validated parameters and ``get_state()`` arrays; damaged arrays raise
        ParameterError('state', ...). ``devices``: resume split over these devices (a state saved by a split run
        and by a one-device run are the same arrays)."""
        n = params.L ** 2
        expected = {"step_count": ((), np.integer), "ev_idx": ((), np.integer), "v": ((n,), np.float32),
                    "u": ((n,), np.float32), "data": ((n,), np.uint8), "ev": ((EV_MAX, n), np.float32),
                    "last": ((3,), np.float64)}
        values = {}
        for key, (shape, kind) in expected.items():
            if key not in arrays:
                raise ParameterError("state", f"the saved state has no {key!r}")
            a = np.asarray(arrays[key])
            ok = a.shape == shape and (np.issubdtype(a.dtype, kind) if kind is np.integer else a.dtype == kind)
            if not ok:
                wanted = "an integer" if kind is np.integer else np.dtype(kind).name
                raise ParameterError("state", f"{key!r} should be {wanted} of shape {shape}; got {a.dtype} {a.shape}")
            values[key] = a
        step_count, ev_idx = int(values["step_count"]), int(values["ev_idx"])
        if step_count < 0 or not 0 <= ev_idx < EV_MAX or step_count % EV_MAX != ev_idx:
            raise ParameterError("state", f"step_count {step_count} and ev_idx {ev_idx} do not match")
        if problem := counter_problem("step_count", step_count):
            raise ParameterError("state", problem)
        for key, low, high, what in STATE_RANGES:
            a = values[key]
            bad = a[~(np.isfinite(a) & (a >= low) & (a <= high))]
            if bad.size:
                raise ParameterError("state", f"{key!r} ({what}) must be finite numbers in [{low:g}, {high:g}]; "
                                              f"got {float(bad.flat[0]):g}")
        eeg, fe, fi = (float(x) for x in values["last"])
        if not (V_FLOOR <= eeg <= V_PEAK and 0 <= fe <= 1 and 0 <= fi <= 1):
            raise ParameterError("state", f"'last' (the last step's EEG in mV and firing fractions) must be finite, "
                                          f"the EEG in [{V_FLOOR:g}, {V_PEAK:g}] and the fractions in [0, 1]; got "
                                          f"{eeg:g}, {fe:g}, {fi:g}")
        model = cls(params, backend=backend, devices=devices)
        if not np.array_equal(values["data"] >> 1, model._types):
            raise ParameterError("state", "the neuron types differ from those the seed gives: the state was saved "
                                          "by a different network")
        if model._split is not None:
            model._split.load(values["v"], values["u"], values["data"], values["ev"], ev_idx)
        else:
            xp, s = model.xp, model.state
            s.v, s.u, s.data, s.ev = (xp.asarray(values[k]) for k in ("v", "u", "data", "ev"))
            s.ev_idx = ev_idx
            s.refresh_halo(model._phases.xp)
        model._step_count = step_count
        with model._on_trace_device():
            model._last = model._trace_xp.array(values["last"], dtype=model._trace_xp.float64, copy=True)
        model._drained = step_count
        return model


# ---- headless runs: `latticelab run cortex --schedule FILE.toml --qeeg-out FILE` ------------------------------
class CortexRun(RunHooks):
    """The model's part of a headless run: a schedule's changes before their steps (equilibration included),
    and the qEEG metrics (sim/analysis/qeeg.py) of the recorded pseudo-EEG after each periodogram update."""

    def __init__(self, values: dict):
        self.schedule_path = values.get("schedule")
        self.qeeg_out = values.get("qeeg_out")
        self.schedule = None
        self.periodogram = None
        self.samples = 0
        self.rows: list[tuple[float, dict]] = []

    def start(self, model) -> None:
        from latticelab.sim.analysis.qeeg import Periodogram
        from latticelab.sim.models.cortex.schedule import ScheduleError, read_schedule
        if self.schedule_path:
            try:
                self.schedule = read_schedule(self.schedule_path, type(model.params), base=model.params)
            except ScheduleError as exc:
                raise ParameterError("schedule", str(exc)) from None
        if self.qeeg_out:
            self.periodogram = Periodogram()

    def before_step(self, model) -> None:
        if self.schedule is not None:
            self.schedule.apply(model)

    def after_step(self, model) -> None:
        if self.periodogram is not None:
            self.samples += 1
            if self.periodogram.push([model.observables()["eeg"]]):
                self.rows.append((model.time, self.periodogram.metrics()))

    def outputs(self, model) -> dict:
        if not self.qeeg_out:
            return {}
        from latticelab.sim.analysis.qeeg import metrics
        freqs = self.periodogram.freqs
        names = list(metrics(freqs, np.ones_like(freqs)))

        def write(f):
            f.write(",".join(["time_ms", *names]) + "\n")
            f.writelines(",".join([repr(float(t)), *(repr(float(m[n])) for n in names)]) + "\n" for t, m in self.rows)

        return {"qeeg_out": write}

    def notes(self) -> list[str]:
        if self.qeeg_out and not self.rows:
            return [f"{self.qeeg_out} has no qEEG rows: the run recorded {self.samples} EEG samples, and the first "
                    f"periodogram needs {self.periodogram.segment} (record more steps)"]
        return []
