"""The two phases of a step of the cortical model (thesis 003, Algorithms 60 to 62), in NumPy and as CUDA
kernels (kernels/phase1.cu, kernels/phase2.cu) that compute the same numbers bit for bit.

A step at step index s (0, 1, ...):
    phase 1   every neuron: input I, reset if it fired, one Euler step, the delayed input of ring slot
              (ev_idx - delay) added and cleared, cap at 30 mV, fired = (v == 30); EEG partial sums
    ev_idx    += 1 (mod EV_MAX)
    phase 2   every neuron counts its firing sources per type and adds count W(t) to ring slots ev_idx + t

so a spike fired in step s is felt by a receiver with delay D in steps s + D + 1 + t, t = 0 .. w-1, with
amplitude W(t) = A exp(-t / tau) of the source's type.

``CortexState`` holds the arrays on the model's device; ``NumpyPhases`` and ``CudaPhases`` update it in place.
``CudaPhases`` runs on CuPy or on the CPU emulator of the kernels (sim/gpu/emulate.py), whose arrays are NumPy's.

The source lists are stored either as int32 indices (k, N) (``sources``; NumPy, and CUDA with r > 127) or as
packed 16-bit offsets with phase 1's halo array of spike codes (``packed``, ``halo``; CUDA with r <= 127, half
the bytes phase 2 reads per source; network.py describes the layout). Both give the same counts, so the same
spike trains.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from latticelab.sim.gpu.philox import split64
from latticelab.sim.models.cortex.network import (CONSTANTS, PACKED_MAX_RADIUS, halo_codes, halo_side,
                                                  packed_words, unpack_sources)
from latticelab.sim.models.cortex.numbers import TAG_INPUT, normal_pair, threshold32, words

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
W_MAX = 60                 # longest washout table (thesis: compile-time W_max)
EV_MAX = 75                # extra-volts ring length: W_MAX + the longest delay (15)
V_PEAK = 30.0              # mV: the cap, and the mark of a firing neuron
THREADS = 256
UNROLL = 4


class WashoutCutWarning(UserWarning):
    """3 x the larger effective tau exceeds the longest washout table: the PSPs are cut off early."""


@dataclass
class Inputs:
    """The per-step constants of phase 1 (float32, as the kernel receives them)."""
    current: tuple[np.float32, np.float32]     # effective I of excitatory, inhibitory neurons
    noise: tuple[np.float32, np.float32]
    boost: np.float32
    boost_threshold: int                       # boosted when its word 2 < this (0: never; at most 2^32 - 1)

    @classmethod
    def from_params(cls, params) -> "Inputs":
        eff = params.effective()
        f = np.float32
        return cls((f(eff["e"]["I"]), f(eff["i"]["I"])), (f(eff["e"]["n"]), f(eff["i"]["n"])), f(params.boost),
                   min(threshold32(params.boost_fraction), 2 ** 32 - 1))


def washout_length(params) -> tuple[int, bool]:
    """(w, cut): w = min(W_MAX, ceil(3 max(tau_e_eff, tau_i_eff))) steps (Algorithm 60; at least 1), and whether
    the W_MAX cap cut it."""
    eff = params.effective()
    wanted = 3.0 * max(eff["e"]["tau"], eff["i"]["tau"])
    w = max(1, min(W_MAX, math.ceil(wanted - 1e-9)))
    return w, wanted > W_MAX + 1e-9


def washout_tables(params, warn: bool = True) -> tuple[np.ndarray, int]:
    """(table, w): float32 (2, W_MAX) with W_e(t) = A_e_eff exp(-t / tau_e_eff) and W_i(t) likewise for
    t < w, zero beyond; w as ``washout_length``. Warns (WashoutCutWarning) when the cap cuts the tables."""
    w, cut = washout_length(params)
    if cut and warn:
        eff = params.effective()
        warnings.warn(f"washout: 3 x the effective tau ({3 * max(eff['e']['tau'], eff['i']['tau']):g} ms) exceeds "
                      f"the longest washout table ({W_MAX} steps); post-synaptic potentials are cut off after "
                      f"{W_MAX} ms", WashoutCutWarning, stacklevel=3)
    eff = params.effective()
    t = np.arange(W_MAX, dtype=np.float64)
    table = np.zeros((2, W_MAX), np.float32)
    table[0, :w] = eff["e"]["A"] * np.exp(-t[:w] / eff["e"]["tau"])
    table[1, :w] = eff["i"]["A"] * np.exp(-t[:w] / eff["i"]["tau"])
    return table, w


@dataclass
class CortexState:
    """The arrays of a running network (on the model's device) and the ring position."""
    L: int
    k: int
    sources: Any       # int32 (k, N), or None with the packed layout
    data: Any          # uint8 (N,): bit 0 fired in the last step, bit 1 type (1 inhibitory)
    tv: Any            # float32 (2, N)
    delay: Any         # uint8 (N,)
    v: Any             # float32 (N,)
    u: Any             # float32 (N,)
    ev: Any            # float32 (EV_MAX, N)
    ev_idx: int = 0
    packed: Any = None  # uint64 (ceil(k/4), N): the packed offsets (network.py), or None
    halo: Any = None    # uint8 ((L + 2 pad)^2,): the spike codes phase 1 writes for the packed layout, or None
    pad: int = 0        # the halo's margin: r

    @property
    def n(self) -> int:
        return self.L * self.L

    @property
    def layout(self) -> str:
        return "packed" if self.packed is not None else "int32"

    def source_indices(self, xp):
        """int32 (k, N) absolute source indices on ``xp`` (decoded from the packed offsets if need be)."""
        if self.packed is None:
            return self.sources
        return unpack_sources(xp, self.packed, self.L, self.k)

    def refresh_halo(self, xp) -> None:
        """Rewrite the halo from the data bytes (phase 1 does this each step; for a state set from outside)."""
        if self.halo is not None:
            self.halo[...] = halo_codes(xp, self.data, self.L, self.pad)


def cuda_layout(r: int) -> str:
    """The source layout a CUDA model uses by default: packed 16-bit offsets for r <= 127, else int32."""
    return "packed" if r <= PACKED_MAX_RADIUS else "int32"


def layout_bytes_per_neuron(k: int, L: int, r: int, layout: str) -> float:
    """Device bytes per neuron of the source storage: 4k (int32), or 8 ceil(k/4) plus the halo (packed)."""
    if layout == "packed":
        return 8 * packed_words(k) + halo_side(L, r) ** 2 / (L * L)
    return 4 * k


# ---- NumPy ------------------------------------------------------------------------------------------------------
def izhikevich_step(v, u, a, b, c, d, I, extra):
    """One step of Algorithm 61 for float32 arrays: reset where v >= 30 (v = c, u += d), Euler step of
    v' = 0.04 v^2 + 5 v + 140 - u + I, u' = a (b v - u), add ``extra`` (the delayed input), cap at 30.
    Returns (v, u, fired). The float32 operations in the kernel's order."""
    f = np.float32
    reset = ~(v < f(V_PEAK))
    u = np.where(reset, u + d, u).astype(f)
    v = np.where(reset, c, v).astype(f)
    dv = f(0.04) * v * v
    dv = dv + f(5.0) * v
    dv = dv + f(140.0)
    dv = dv - u
    dv = dv + I
    du = a * (b * v - u)
    nv = (v + dv) + extra
    nv = np.where(nv > f(V_PEAK), f(V_PEAK), nv).astype(f)
    return nv, (u + du).astype(f), ~(nv < f(V_PEAK))


def input_current(seed: int, step: int, n: int, types, inputs: Inputs) -> np.ndarray:
    """float32 (N,): I = I_type + n_type z + boost, at least 0; z and the boost draw from (neuron, TAG_INPUT,
    step) -- the twin of phase1.cu's input."""
    w = words(seed, TAG_INPUT, np.arange(n), *split64(step))
    z = normal_pair(w[0], w[1])[0].astype(np.float32)
    inh = types == 1
    base = np.where(inh, inputs.current[1], inputs.current[0]).astype(np.float32)
    noise = np.where(inh, inputs.noise[1], inputs.noise[0]).astype(np.float32)
    boost = np.where(w[2].astype(np.uint64) < np.uint64(inputs.boost_threshold), inputs.boost,
                     np.float32(0)).astype(np.float32)
    I = (base + z * noise) + boost
    return np.where(I > np.float32(0), I, np.float32(0)).astype(np.float32)


class NumpyPhases:
    """The two phases on NumPy arrays (the reference the kernels are compared with)."""

    xp = np

    def phase1(self, s: CortexState, seed: int, step: int, inputs: Inputs) -> np.ndarray:
        """Phase 1 in place; returns float64 [sum of excitatory v, firing excitatory, firing inhibitory]."""
        n = s.n
        types = (s.data >> 1) & 1
        I = input_current(seed, step, n, types, inputs)
        inh = types == 1
        f = np.float32
        a = np.where(inh, s.tv[0], f(CONSTANTS["a_e"])).astype(f)
        b = np.where(inh, s.tv[1], f(CONSTANTS["b_e"])).astype(f)
        c = np.where(inh, f(CONSTANTS["c_i"]), s.tv[0]).astype(f)
        d = np.where(inh, f(CONSTANTS["d_i"]), s.tv[1]).astype(f)
        slot = (s.ev_idx - s.delay.astype(np.int64)) % EV_MAX
        cells = np.arange(n)
        extra = s.ev[slot, cells]
        v, u, fired = izhikevich_step(s.v, s.u, a, b, c, d, I, extra)
        s.v[:], s.u[:] = v, u
        s.ev[slot, cells] = 0
        s.data[:] = (types << 1) | fired
        exc = ~inh
        return np.array([v[exc].astype(np.float64).sum(), np.count_nonzero(fired & exc),
                         np.count_nonzero(fired & inh)], np.float64)

    def phase2(self, s: CortexState, table: np.ndarray, w: int) -> None:
        """Phase 2 in place: count the firing sources per type, add their washout to the next w ring slots.

        The counts are the kernel's (integers, so the order does not matter), found from the other side: the
        receivers of the few firing neurons, from an outgoing-edge index built once per network."""
        out = self._outgoing(s)
        count_e = self._count(out, np.flatnonzero(s.data == 1), s.n)
        count_i = self._count(out, np.flatnonzero(s.data == 3), s.n)
        cells = np.flatnonzero(count_e | count_i)
        if cells.size == 0:
            return
        fe = count_e[cells].astype(np.float32)
        fi = count_i[cells].astype(np.float32)
        rows = ((s.ev_idx + np.arange(w)) % EV_MAX)[:, None]
        ring = s.ev[rows, cells[None, :]]
        ring = ring + fe[None, :] * table[0, :w, None]
        ring = ring + fi[None, :] * table[1, :w, None]
        s.ev[rows, cells[None, :]] = ring

    @staticmethod
    def _count(out, firing: np.ndarray, n: int) -> np.ndarray:
        offsets, receivers = out
        starts, ends = offsets[firing], offsets[firing + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(n, np.int64)
        index = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        return np.bincount(receivers[index], minlength=n)

    def prepare(self, s: CortexState) -> None:
        """Build what phase 2 needs of a new network (the outgoing-edge index) now rather than in the first
        step: the model calls this when it makes the network, so a window's first frame of a new cortex (built
        on a worker thread) does not sort a million connections (110 ms at L = 128, k = 100)."""
        self._outgoing(s)

    def _outgoing(self, s: CortexState):
        """(offsets, receivers): the receivers of source q are receivers[offsets[q]:offsets[q + 1]]."""
        cache = getattr(self, "_out_cache", None)
        if cache is None or cache[0] is not s.sources:
            flat = s.sources.reshape(-1)
            # a stable sort of 16-bit keys is NumPy's radix sort: five times faster than on the int32 indices
            keys = flat.astype(np.uint16) if s.n <= 1 << 16 else flat
            order = np.argsort(keys, kind="stable")
            offsets = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=s.n))]).astype(np.int64)
            cache = (s.sources, (offsets, (order % s.n).astype(np.int32)))
            self._out_cache = cache
        return cache[1]


# ---- CUDA (CuPy, or the CPU emulator) ---------------------------------------------------------------------------
def grid_for(count: int, threads: int = THREADS, most: int = 65535) -> int:
    return max(1, min(most, (count + threads - 1) // threads))


def connect_on_device(xp, layout: str, seed: int, L: int, k: int, r: int, rows: tuple[int, int] | None = None,
                      row_offset: int = 0):
    """The source lists of the receivers in rows ``rows`` (first, end; default all L) built by kernels/connect.cu
    on ``xp``: int32 (k, count) indices (``layout`` "int32"; row ``row_offset`` of the grid is row 0 of the
    index, so a slab's lists index its data bytes with their halo rows) or uint64 (ceil(k/4), count) packed
    offsets ("packed")."""
    from latticelab.sim.gpu.kernels import get_kernel
    first, end = rows if rows is not None else (0, L)
    count = (end - first) * L
    names = ("cortex_connect<256>", "cortex_connect_packed<256>")
    lo, hi = split64(seed)
    args = (np.int32(L), np.int32(k), np.int32(r), np.float64(r / 3.0), np.uint32(lo), np.uint32(hi),
            np.int32(first * L), np.int32(count), np.int32(row_offset))
    if layout == "packed":
        out = xp.empty((packed_words(k), count), xp.uint64)
        kernel = get_kernel(xp, KERNEL_DIR / "connect.cu", names[1], names)
    else:
        out = xp.empty((k, count), xp.int32)
        kernel = get_kernel(xp, KERNEL_DIR / "connect.cu", names[0], names)
    kernel((grid_for(out.size),), (256,), (out,) + args)
    return out


class CudaPhases:
    """The two phases as kernels/phase1.cu and kernels/phase2.cu on ``xp`` (CuPy or the emulator's stand-in).

    ``layout``: "auto" (packed offsets for r <= 127, int32 lists beyond), "packed" (refuses r > 127) or "int32";
    the model asks ``layout_for(r)`` when it builds the network. ``step`` is the model's step: the two launches,
    phase 2 also finishing the EEG sums into the trace (no other device operation per step)."""

    def __init__(self, xp, threads: int = THREADS, blocks: int | None = None, layout: str = "auto"):
        from latticelab.sim.gpu.kernels import get_kernel
        if layout not in ("auto", "packed", "int32"):
            raise ValueError(f"layout must be 'auto', 'packed' or 'int32'; got {layout!r}")
        self.xp = xp
        self.threads = threads
        self.blocks = blocks          # None: phase 1 one block per chunk, phase 2 one thread per neuron (<= 65535)
        self.layout = layout
        p1 = (f"cortex_phase1<{threads}, false>", f"cortex_phase1<{threads}, true>")
        p2 = (f"cortex_phase2<{threads}, {UNROLL}>", f"cortex_phase2_packed<{threads}, {UNROLL}>")
        self._phase1 = {False: get_kernel(xp, KERNEL_DIR / "phase1.cu", p1[0], p1),
                        True: get_kernel(xp, KERNEL_DIR / "phase1.cu", p1[1], p1)}
        self._phase2 = {False: get_kernel(xp, KERNEL_DIR / "phase2.cu", p2[0], p2),
                        True: get_kernel(xp, KERNEL_DIR / "phase2.cu", p2[1], p2)}
        self._partials = None
        self._table = None
        self._table_source = None
        self._dummy = {"u8": xp.zeros(1, xp.uint8), "f64": xp.zeros(4, xp.float64)}

    def prepare(self, s: CortexState) -> None:
        """Nothing to build ahead: the kernels read the source lists as they are."""

    def layout_for(self, r: int) -> str:
        """The source layout for radius r: "packed" or "int32" (``layout`` "packed" with r > 127 raises
        ValueError naming r)."""
        if self.layout == "int32":
            return "int32"
        if r > PACKED_MAX_RADIUS:
            if self.layout == "packed":
                raise ValueError(f"r = {r}: the packed source layout holds offsets up to {PACKED_MAX_RADIUS} "
                                 f"(one signed byte each); use layout 'auto' or 'int32' for larger r")
            return "int32"
        return "packed"

    def _grid(self, n: int) -> int:
        return self.blocks or grid_for(n, self.threads)

    def rows_per_chunk(self, L: int) -> int:
        """Rows of L neurons to one chunk of phase 1's EEG partial sums (kernels/phase1.cu): THREADS // L for
        narrow rows, else 1 (a wide row being ceil(L / threads) chunks). A slab must begin on a multiple."""
        return 1 if L >= self.threads else self.threads // L

    def chunk_of_row(self, L: int, row: int) -> int:
        """The index of the first chunk of row ``row`` (a chunk boundary), or the number of chunks of ``row``
        rows."""
        if L >= self.threads:
            return row * -(-L // self.threads)
        return -(-row // self.rows_per_chunk(L))

    def chunks(self, L: int, rows: int) -> int:
        """Phase 1's chunks (of its EEG partial sums) for ``rows`` rows of L neurons."""
        return self.chunk_of_row(L, rows)

    def partials(self, count: int):
        """A reusable float64 array of 3 ``count`` partial sums (phase 1 writes it, phase 2's record reads it)."""
        if self._partials is None or self._partials.size != 3 * count:
            self._partials = self.xp.zeros(3 * count, self.xp.float64)
        return self._partials

    def launch_phase1(self, s: CortexState, seed: int, step: int, inputs: Inputs, partials, union=None,
                      rows: tuple[int, int] | None = None, base: int = 0, wrap_rows: bool = True,
                      data=None, skip: tuple[int, int] = (0, 0)) -> None:
        """Phase 1 of the neurons of local rows ``rows`` (first, end; default all of ``s``; first a chunk
        boundary, end too unless it is the last row) but those of the rows ``skip`` (chunk boundaries), their EEG
        partial sums into ``partials`` (3 chunks(L, rows of s) doubles, chunk by chunk). A slab passes the
        global index ``base`` of its neuron 0, ``wrap_rows=False`` and, for the int32 layout, its data bytes
        without the halo rows (``data``)."""
        L = s.L
        n = s.v.size
        first, end = rows if rows is not None else (0, n // L)
        if end <= first:
            return
        chunk_first, chunk_end = self.chunk_of_row(L, first), self.chunk_of_row(L, end)
        skip_first, skip_end = self.chunk_of_row(L, skip[0]), self.chunk_of_row(L, skip[1])
        seed_lo, seed_hi = split64(seed)
        step_lo, step_hi = split64(step)
        u32, f32, i32 = np.uint32, np.float32, np.int32
        packed = s.packed is not None
        halo = s.halo if packed else self._dummy["u8"]
        grid = self.blocks or min(65535, chunk_end - chunk_first - (skip_end - skip_first))
        self._phase1[packed]((grid,), (self.threads,), (
            s.v, s.u, s.data if data is None else data, s.tv, s.delay, s.ev, partials, i32(n), i32(s.ev_idx),
            u32(seed_lo), u32(seed_hi), u32(step_lo), u32(step_hi), f32(inputs.current[0]), f32(inputs.current[1]),
            f32(inputs.noise[0]), f32(inputs.noise[1]), f32(inputs.boost), u32(inputs.boost_threshold),
            halo, i32(L), i32(s.pad), self._dummy["u8"] if union is None else union, i32(union is not None),
            i32(chunk_first), i32(chunk_end), i32(skip_first), i32(skip_end), np.int64(base), i32(wrap_rows)))

    def _launch_phase1(self, s: CortexState, seed: int, step: int, inputs: Inputs, union=None) -> int:
        count = self.chunks(s.L, s.n // s.L)
        self.launch_phase1(s, seed, step, inputs, self.partials(count), union)
        return count

    def phase1(self, s: CortexState, seed: int, step: int, inputs: Inputs, union=None):
        """Phase 1 in place; returns the three sums as a device array (float64 [3]). ``union``: a uint8 (N,)
        array whose bytes of the firing neurons are set to 1."""
        count = self._launch_phase1(s, seed, step, inputs, union)
        return self._partials.reshape(count, 3).sum(axis=0)

    def phase2(self, s: CortexState, table: np.ndarray, w: int, record: "Record | None" = None) -> None:
        """Phase 2 in place. ``record``: also finish the last phase 1's EEG sums into the trace (Record)."""
        self.launch_phase2(s, table, w, record, self._partials)

    def launch_phase2(self, s: CortexState, table: np.ndarray, w: int, record: "Record | None", partials,
                      rows: tuple[int, int] | None = None, data=None, v=None,
                      skip: tuple[int, int] = (0, 0)) -> None:
        """Phase 2 of the receivers of local rows ``rows`` (default all of ``s``) but those of the rows ``skip``
        (first, end); with ``record``, block 0 first
        adds ``partials`` into the trace. A slab passes its data bytes with the halo rows (``data``, the int32
        layout) and, when the probe neuron's potential was copied elsewhere, that array (``v``)."""
        xp = self.xp
        if table is not self._table_source:           # the model makes a new table on each change
            self._table_source = table
            self._table = xp.asarray(np.array(table, np.float32).reshape(-1))
        i32, f64 = np.int32, np.float64
        n = s.v.size
        first, end = rows if rows is not None else (0, n // s.L)
        if end <= first:
            return
        if record is None:
            tail = (i32(0), self._dummy["f64"], i32(0), s.v, i32(0), f64(0), f64(0), self._dummy["f64"], i32(0),
                    self._dummy["f64"])
        else:
            tail = (i32(1), partials, i32(partials.size // 3), s.v if v is None else v, i32(record.probe),
                    f64(record.scale_e), f64(record.scale_i), record.trace, i32(record.slot), record.last)
        tail += (i32(first * s.L), i32(end * s.L), i32(skip[0] * s.L), i32(skip[1] * s.L))
        if s.packed is not None:
            head = (s.packed, s.halo, s.ev, self._table, i32(n), i32(s.L), i32(s.pad), i32(s.k), i32(s.ev_idx),
                    i32(w))
        else:
            head = (s.sources, s.data if data is None else data, s.ev, self._table, i32(n), i32(s.k),
                    i32(s.ev_idx), i32(w))
        count = (end - first - (skip[1] - skip[0])) * s.L
        self._phase2[s.packed is not None]((self._grid(count),), (self.threads,), head + tail)

    def step(self, s: CortexState, seed: int, step: int, inputs: Inputs, table: np.ndarray, w: int,
             record: "Record", union=None) -> None:
        """One whole step: phase 1, ring index + 1, phase 2 with the EEG record -- two launches."""
        self._launch_phase1(s, seed, step, inputs, union)
        s.ev_idx = (s.ev_idx + 1) % EV_MAX
        self.phase2(s, table, w, record)


@dataclass
class Record:
    """Where phase 2 writes a step's observables: ``last`` (float64 [3]: eeg, firing_e, firing_i) and row
    ``slot`` of ``trace`` (float64 (rows, 4): the same and v of neuron ``probe``), scaled by 1 / the number of
    excitatory (eeg, firing_e) and inhibitory (firing_i) neurons."""
    trace: Any
    slot: int
    last: Any
    probe: int
    scale_e: float
    scale_i: float
