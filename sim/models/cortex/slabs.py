"""The cortical network split into row slabs over several devices (thesis 003, section 8.4, Algorithm 63; issue 38).

The L x L grid's rows are cut into one slab per part (sim/multidevice/slabs.py), each held with the r rows on
each side that its receivers' sources can reach (|dy| <= r): the *halo*. A part keeps its own neurons' state
(potentials, recovery, the ring of pending inputs, the source lists of its receivers) and a copy of what phase 2
reads of its neighbours' neurons: their spike codes (the packed layout's halo array, rows of L + 2r bytes) or
their data bytes (the int32 layout, whose source indices point into the slab's rows with their halo). A step,
as Algorithm 63 orders it:

    phase 1 of the border rows (the r rows at each end, which the neighbours read)
    the border rows' spike codes sent into the neighbours' halos         } while
    phase 1 of the inner rows, phase 2 of the inner core (receivers     } the borders
      whose sources are all the part's own)                              } travel
    the EEG partial sums (and the probe neuron's potential) gathered on part 0
    phase 2 of the border receivers; part 0 also finishes the EEG sums into the trace

Every number a neuron draws is keyed by its global index and the step (kernels/phase1.cu's ``base``), a receiver
counts its sources in the same order as on one device, and the EEG partial sums are per chunk of a row
(phase1.cu), gathered in row order and added by the same reduction as on one device: the spike trains, the
membrane states, the ring and the EEG are the same bits on 1, 2 or 4 devices as on one.
"""
from __future__ import annotations

import contextlib

import numpy as np

from latticelab.sim.models.cortex.engines import (EV_MAX, THREADS, CortexState, CudaPhases, Inputs, Record,
                                                  connect_on_device, cuda_layout, layout_bytes_per_neuron)
from latticelab.sim.multidevice.exchange import Exchanger, Move, Part
from latticelab.sim.multidevice.slabs import Slab, SlabLayout
from latticelab.sim.params import ParameterError


def split_layout(L: int, r: int, parts: int, threads: int = THREADS) -> SlabLayout:
    """The row slabs of an L x L network of radius r over ``parts`` devices: each begins on a chunk boundary of
    phase 1's EEG partial sums (a multiple of CudaPhases.rows_per_chunk rows) and holds at least 2r rows (its two
    border bands must not overlap); ParameterError naming the devices otherwise."""
    rpc = 1 if L >= threads else threads // L
    units = -(-L // rpc)
    bounds = [min(L, rpc * (i * units // parts)) for i in range(parts + 1)]
    slabs = tuple(Slab(i, bounds[i], bounds[i + 1], r) for i in range(parts))
    if min(slab.size for slab in slabs) < 2 * r:
        blocks = f" in whole blocks of {rpc} rows" if rpc > 1 else ""
        raise ParameterError("devices", f"{L} rows cannot be split over {parts} devices with r = {r}: each device "
                                        f"needs at least 2 r = {2 * r} rows{blocks}; use fewer devices, a larger L or "
                                        f"a smaller r")
    return SlabLayout(L, slabs)


def device_bytes(L: int, k: int, r: int, parts: int, layout: str) -> int:
    """Each device's share: its rows' neurons (the source lists, the ring, the state) and the halo rows."""
    rows = -(-L // parts)
    lists = 4 * k if layout == "int32" else layout_bytes_per_neuron(k, L, r, "packed") - (L + 2 * r) ** 2 / L ** 2
    per_neuron = lists + 4 * EV_MAX + 18 + 16
    halo = (rows + 2 * r) * (L + 2 * r) if layout == "packed" else 2 * r * L
    return int(per_neuron * rows * L + halo)


class SlabCortex:
    """The network on ``parts``, stepped as the module docstring says (``overlap=False``: phase 1 of every row,
    the halos moved, phase 2 of every receiver, without the overlap). ``layout``: "packed" or "int32"."""

    def __init__(self, parts: list[Part], exchanger: Exchanger, L: int, k: int, r: int, layout: str,
                 threads: int = THREADS, overlap: bool = True):
        self.parts, self.exchanger = list(parts), exchanger
        self.L, self.k, self.r, self.layout_name, self.overlap = L, k, r, layout, overlap
        self.layout = split_layout(L, r, len(self.parts), threads)
        self.phases, self.states, self.full, self.partials = [], [], [], []
        for part, slab in zip(self.parts, self.layout.slabs):
            with part.use():
                phases = CudaPhases(part.xp, threads=threads, layout=layout)
                self.phases.append(phases)
                self.partials.append(part.xp.zeros(3 * phases.chunks(L, slab.size), part.xp.float64))
        # the inner rows' work runs on a stream of its own, so that it does not wait for the halos, which the
        # exchanger makes the update stream wait for (CUDA only; on the CPU every copy is made at once)
        self.inner_streams, self._events = [], []
        for part in self.parts:
            with part.use():
                cuda = part.xp.cuda if part.cuda else None
                self.inner_streams.append(cuda.Stream(non_blocking=True) if cuda else None)
                # (fork, join), recorded anew each step: a wait takes the event's state when it is issued
                self._events.append((cuda.Event(disable_timing=True), cuda.Event(disable_timing=True)) if cuda
                                    else None)
        # phase 1's inner rows of each slab: between the border bands of r rows widened to chunk boundaries
        rpc = self.phases[0].rows_per_chunk(L)
        self.inner_rows = []
        for slab in self.layout.slabs:
            low = min(slab.size, -(-r // rpc) * rpc)
            high = max(low, (slab.size - r) // rpc * rpc)
            self.inner_rows.append((low, high))
        with self.parts[0].use():
            xp = self.parts[0].xp
            self.gathered = xp.zeros(3 * self.phases[0].chunks(L, L), xp.float64)
            self.probe_v = xp.zeros(1, xp.float32)
        self.probe = 0
        self._moves = None

    # ---- building and loading ---------------------------------------------------------------------------------
    def build(self, seed: int, types, tv, delay) -> None:
        """The source lists of each slab's receivers (kernels/connect.cu) and the neurons' fixed parameters (host
        arrays over the whole grid: types, tv (2, N), delay)."""
        L, r = self.L, self.r
        self.states, self.full = [], []
        for part, slab in zip(self.parts, self.layout.slabs):
            xp = part.xp
            lo, hi = slab.start * L, slab.stop * L
            with part.use():
                lists = connect_on_device(xp, self.layout_name, seed, L, self.k, r, (slab.start, slab.stop),
                                          slab.offset)
                n = hi - lo
                common = dict(L=L, k=self.k, tv=xp.asarray(np.ascontiguousarray(tv[:, lo:hi])),
                              delay=xp.asarray(delay[lo:hi]), v=xp.zeros(n, xp.float32), u=xp.zeros(n, xp.float32),
                              ev=xp.zeros((EV_MAX, n), xp.float32), pad=r)
                if self.layout_name == "packed":
                    state = CortexState(sources=None, data=xp.asarray((types[lo:hi] << 1).astype(np.uint8)),
                                        packed=lists, halo=xp.zeros((slab.extent, L + 2 * r), xp.uint8), **common)
                    self.full.append(None)
                else:
                    full = xp.zeros((slab.extent, L), xp.uint8)
                    state = CortexState(sources=lists, data=full[r:r + slab.size].reshape(-1), **common)
                    self.full.append(full)
                self.states.append(state)
        self._moves = None

    def _halo_array(self, i: int):
        """Part i's rows that phase 2 reads: the spike codes (packed) or the data bytes (int32), with halos."""
        return self.states[i].halo if self.layout_name == "packed" else self.full[i]

    def load(self, v, u, data, ev, ev_idx: int) -> None:
        """The dynamic state (host arrays over the whole grid, as CortexState holds them; ``ev`` None: no pending
        input) into the slabs; the halos refreshed."""
        L = self.L
        for part, slab, s in zip(self.parts, self.layout.slabs, self.states):
            lo, hi = slab.start * L, slab.stop * L
            with part.use():
                xp = part.xp
                s.v[...] = xp.asarray(v[lo:hi])
                s.u[...] = xp.asarray(u[lo:hi])
                s.data[...] = xp.asarray(data[lo:hi])
                if ev is None:
                    s.ev[...] = 0
                else:
                    s.ev[...] = xp.asarray(np.ascontiguousarray(ev[:, lo:hi]))
                s.ev_idx = int(ev_idx)
                if s.halo is not None:
                    s.halo[...] = self._codes(xp, np.asarray(data), slab)
        self.exchanger.transfer(self._halo_moves(), overlap=False)

    def _codes(self, xp, data: np.ndarray, slab):
        """The slab's halo array of spike codes from the whole grid's data bytes (as phase 1 writes them)."""
        from latticelab.sim.models.cortex.network import halo_codes
        r, L = self.r, self.L
        whole = halo_codes(np, data, L, r).reshape(L + 2 * r, L + 2 * r)
        rows = (np.arange(slab.extent) + slab.offset) % L + r        # halo-array row of each local row
        return xp.asarray(np.ascontiguousarray(whole[rows]))

    def gather(self, name: str) -> np.ndarray:
        """A dynamic array over the whole grid on the host: "v", "u", "data" (N,) or "ev" (EV_MAX, N)."""
        from latticelab.sim.backend import to_numpy
        blocks = []
        for part, s in zip(self.parts, self.states):
            with part.use():
                blocks.append(to_numpy(getattr(s, name)))
        return np.concatenate(blocks, axis=-1)

    def value(self, name: str, index: int) -> float:
        """One neuron's ``name`` ("v" or "u")."""
        from latticelab.sim.backend import to_numpy
        i, j = self._owner(index)
        with self.parts[i].use():
            return float(to_numpy(getattr(self.states[i], name)[j:j + 1])[0])

    def _owner(self, index: int) -> tuple[int, int]:
        part = int(self.layout.owner(int(index) // self.L))
        return part, int(index) - self.layout.slabs[part].start * self.L

    @property
    def ev_idx(self) -> int:
        return self.states[0].ev_idx

    # ---- the exchange -----------------------------------------------------------------------------------------
    def _halo_moves(self) -> list[Move]:
        """Every part's r halo rows on each side from its neighbours' border rows (periodic)."""
        n, r = len(self.parts), self.r
        moves = []
        for i, slab in enumerate(self.layout.slabs):
            a = self._halo_array(i)
            first, end = slab.owned
            below, above = (i - 1) % n, (i + 1) % n
            b_end = self.layout.slabs[below].owned[1]
            moves.append(Move(i, a[first - r:first], below, self._halo_array(below)[b_end - r:b_end]))
            moves.append(Move(i, a[end:end + r], above, self._halo_array(above)[r:2 * r]))
        return moves

    def _gather_moves(self) -> list[Move]:
        """Every part's EEG partial sums into part 0's array of all of them (row order), and the probe neuron's
        potential into part 0."""
        phases = self.phases[0]
        moves = []
        for i, slab in enumerate(self.layout.slabs):
            at = 3 * phases.chunk_of_row(self.L, slab.start)          # three sums a chunk, chunk by chunk
            moves.append(Move(0, self.gathered[at:at + self.partials[i].size], i, self.partials[i]))
        owner, j = self._owner(self.probe)
        moves.append(Move(0, self.probe_v, owner, self.states[owner].v[j:j + 1]))
        return moves

    def set_probe(self, index: int) -> None:
        self.probe = int(index)
        self._moves = None

    def _planned(self):
        if self._moves is None:
            self._moves = (self._halo_moves(), self._gather_moves())
        return self._moves

    # ---- a step -----------------------------------------------------------------------------------------------
    def step(self, seed: int, step: int, inputs: Inputs, table: np.ndarray, w: int, record: Record,
             unions=None) -> None:
        """One step of every part (the module docstring); ``record`` names the trace row on part 0 (its probe
        is ignored: the probe neuron is ``probe``); ``unions``: per part, the uint8 bytes of the frame's union of
        spikes, or None."""
        halo_moves, gather_moves = self._planned()
        unions = unions or [None] * len(self.parts)
        # phase 1: the border bands (r rows, widened to whole chunks of the EEG sums) in one launch, then the inner
        # rows; phase 2: the inner core (receivers at least r rows from the slab's ends) while the halos travel, then
        # the border rows' receivers in one launch; without the overlap, every row at once
        none = (0, 0)
        inner1 = self.inner_rows if self.overlap else [none] * len(self.parts)
        inner2 = [(self.r, slab.size - self.r) if self.overlap else none for slab in self.layout.slabs]
        forks = []
        for i, (part, slab) in enumerate(zip(self.parts, self.layout.slabs)):
            with part.use():
                self._phase1(i, seed, step, inputs, unions[i], (0, slab.size), inner1[i])
                forks.append(self._fork(i) if self.overlap else None)
        self.exchanger.transfer(halo_moves, overlap=self.overlap)
        for i, (part, slab) in enumerate(zip(self.parts, self.layout.slabs)):
            s = self.states[i]
            with part.use(), self._inner(i, forks[i]):
                if self.overlap:
                    self._phase1(i, seed, step, inputs, unions[i], inner1[i], none)
                s.ev_idx = (s.ev_idx + 1) % EV_MAX
                if self.overlap:
                    self._phase2(i, table, w, None, inner2[i], none)
        self.exchanger.transfer(gather_moves, overlap=False)
        part0 = Record(record.trace, record.slot, record.last, 0, record.scale_e, record.scale_i)
        for i, (part, slab) in enumerate(zip(self.parts, self.layout.slabs)):
            with part.use():
                self._phase2(i, table, w, part0 if i == 0 else None, (0, slab.size), inner2[i])

    def _fork(self, i: int):
        """An event on part i's update stream now (after its border rows' phase 1), or None off CUDA."""
        part = self.parts[i]
        if not part.cuda:
            return None
        event = self._events[i][0]
        event.record(part.stream)
        return event

    @contextlib.contextmanager
    def _inner(self, i: int, fork):
        """Part i's inner rows' work: on its inner stream, after ``fork``; the update stream then waits for it
        (before the EEG sums are gathered and the border receivers' phase 2)."""
        stream = self.inner_streams[i]
        if fork is None or stream is None:
            yield
            return
        part = self.parts[i]
        stream.wait_event(fork)
        with stream:
            yield
        join = self._events[i][1]
        join.record(stream)
        part.stream.wait_event(join)

    def _phase1(self, i: int, seed: int, step: int, inputs: Inputs, union, rows, skip) -> None:
        slab = self.layout.slabs[i]
        self.phases[i].launch_phase1(self.states[i], seed, step, inputs, self.partials[i], union, rows,
                                     base=slab.start * self.L, wrap_rows=False, skip=skip)

    def _phase2(self, i: int, table, w: int, record, rows, skip) -> None:
        full = self.full[i]
        self.phases[i].launch_phase2(self.states[i], table, w, record, self.gathered, rows,
                                     data=None if full is None else full.reshape(-1), v=self.probe_v, skip=skip)

    def synchronize(self) -> None:
        self.exchanger.finish()


class SplitCortex:
    """The network of a model split over ``devices`` (CUDA ids; ``xp`` CuPy or the CPU emulator's stand-in):
    stepped by SlabCortex (``overlap``; ``layout`` "auto" as on one device, "packed" or "int32"), its halos moved
    by the ``exchanger`` kind ("peer" or "nccl"). The model sees host copies (``state``),
    made when asked and kept until the next step; the trace and the last observables live on part 0."""

    def __init__(self, xp, devices, params, exchanger: str = "peer", overlap: bool = True, layout: str = "auto",
                 threads: int = THREADS):
        from latticelab.sim.multidevice.exchange import make_exchanger, make_parts
        self.parts = make_parts(xp, devices)
        self.layout_name = cuda_layout(params.r) if layout == "auto" else layout
        self.engine = SlabCortex(self.parts, make_exchanger(self.parts, exchanger), params.L, params.k, params.r,
                                 self.layout_name, threads=threads, overlap=overlap)
        self._host = None
        self._tv = self._delay = None

    @property
    def xp(self):
        """The array module of part 0, where the trace lives."""
        return self.parts[0].xp

    def on_part0(self):
        return self.parts[0].use()

    def build(self, seed: int, neurons) -> None:
        """A new network from the seed's neurons (network.make_neurons), at its initial state."""
        self._tv, self._delay = neurons.tv, neurons.delay
        self.engine.build(seed, neurons.types, neurons.tv, neurons.delay)
        self.load(neurons.v, neurons.u, (neurons.types << 1).astype(np.uint8), None, 0)

    def load(self, v, u, data, ev, ev_idx: int) -> None:
        self.engine.load(v, u, data, ev, ev_idx)
        self._host = None

    def step(self, seed: int, step: int, inputs: Inputs, table, w: int, record: Record, unions=None) -> None:
        self.engine.step(seed, step, inputs, table, w, record, unions)
        self._host = None

    def state(self) -> CortexState:
        """The whole network on the host (source lists as the one-device model keeps them: the packed offsets
        of every receiver, or the int32 global indices); a copy, kept until the next step."""
        if self._host is None:
            e = self.engine
            g = e.gather
            sources, packed = self._lists()
            self._host = CortexState(L=e.L, k=e.k, sources=sources, data=g("data"), tv=self._tv,
                                     delay=self._delay, v=g("v"), u=g("u"), ev=g("ev"), ev_idx=e.ev_idx,
                                     packed=packed)
        return self._host

    def _lists(self):
        """(int32 global source indices, None) or (None, packed offsets) of every receiver, on the host."""
        e = self.engine
        if self.layout_name == "packed":
            return None, np.concatenate([to_host(p, s.packed) for p, s in zip(self.parts, e.states)], axis=1)
        blocks = []
        for part, slab, s in zip(self.parts, e.layout.slabs, e.states):
            local = to_host(part, s.sources).astype(np.int64)
            row = (local // e.L + slab.offset) % e.L
            blocks.append((row * e.L + local % e.L).astype(np.int32))
        return np.concatenate(blocks, axis=1), None

    def source_indices(self) -> np.ndarray:
        """int32 (k, N) global source indices (host), without gathering the neurons' state."""
        from latticelab.sim.models.cortex.network import unpack_sources
        sources, packed = self._lists()
        return sources if packed is None else unpack_sources(np, packed, self.engine.L, self.engine.k)

    def neuron(self, index: int) -> tuple[np.ndarray, int, float, float]:
        """(tv (2,), delay, v, u) of one neuron (host)."""
        e = self.engine
        return self._tv[:, index], int(self._delay[index]), e.value("v", index), e.value("u", index)

    def field(self, name: str) -> np.ndarray:
        """"v" or "data" over the whole grid (host), without gathering the rest."""
        if self._host is not None:
            return getattr(self._host, name)
        return self.engine.gather(name)

    def new_unions(self) -> list:
        unions = []
        for part, s in zip(self.parts, self.engine.states):
            with part.use():
                unions.append(part.xp.zeros(s.v.size, part.xp.uint8))
        return unions

    def gather_unions(self, unions) -> np.ndarray:
        return np.concatenate([to_host(p, u) for p, u in zip(self.parts, unions)]).astype(bool)

    def spikes(self, n_neurons: int, neurons=None) -> "SplitSpikes":
        return SplitSpikes(self, n_neurons, neurons)

    def synchronize(self) -> None:
        self.engine.synchronize()


def to_host(part: Part, array) -> np.ndarray:
    from latticelab.sim.backend import to_numpy
    with part.use():
        return to_numpy(array)


class SplitSpikes:
    """Spike recording of a split network (spikes.py): each part compacts the firing neurons of its share of the
    band on its device; the host joins them (sorted by step, then neuron: the one-device order)."""

    def __init__(self, split: SplitCortex, n_neurons: int, neurons=None):
        from latticelab.sim.models.cortex.spikes import CudaSpikes, SpikeTrains, check_band
        self.first, self.count = check_band(n_neurons, neurons)
        self.trains = SpikeTrains(self.first, self.count)
        self.split = split
        self._recorders = []            # (part index, global index of the part's neuron 0, CudaSpikes)
        L = split.engine.L
        for i, (part, slab) in enumerate(zip(split.parts, split.engine.layout.slabs)):
            lo, hi = max(self.first, slab.start * L), min(self.first + self.count, slab.stop * L)
            if lo < hi:
                with part.use():
                    recorder = CudaSpikes(part.xp, slab.size * L, (lo - slab.start * L, hi - lo))
                self._recorders.append((i, slab.start * L, recorder))

    def record(self, step: int) -> None:
        for i, _, recorder in self._recorders:
            with self.split.parts[i].use():
                recorder.record(self.split.engine.states[i].data, step)

    def drain(self) -> None:
        steps, indices = [], []
        for i, base, recorder in self._recorders:
            with self.split.parts[i].use():
                recorder.drain()
            s, idx = recorder.trains.arrays()
            steps.append(s)
            indices.append(idx.astype(np.int64) + base)
            recorder.trains = type(recorder.trains)(recorder.first, recorder.count)
        if steps:
            s, idx = np.concatenate(steps), np.concatenate(indices)
            order = np.lexsort((idx, s))
            self.trains.add(s[order], idx[order].astype(np.int32))

    def spikes(self) -> tuple[np.ndarray, np.ndarray]:
        self.drain()
        return self.trains.arrays()
