"""CudaEngine: the fast CUDA implementation of the engine protocol of ../engines.py (ReferenceEngine).

metropolis / wolff / swendsen_wang take (spins, T, rng, want_mask) and return (spins, mask or None);
metropolis_sweeps(spins, T, rng, n, want_mask) does n Metropolis sweeps at once on a packed copy of the spins
(one bit per spin, sim/kernels/metropolis_multispin.cu) with the very same random numbers and decisions;
measure(spins) returns (sum over edges of s_i s_j, sum of spins). Spins stay int8 +-1 in their (L,)*dim
C-order array and are updated in place (the same array is returned). Every update takes one key from
rng.next_key() and draws all its random numbers inside the kernels from Philox4x32-10 (sim/gpu/philox.py),
so a trajectory depends only on (seed, stream), and resuming from a saved stream count is exact.
"""
from __future__ import annotations

import math

import numpy as np

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.ising.gpu.graph import DeviceGraph
from latticelab.sim.gpu.kernels import get_kernel
from latticelab.sim.models.ising.gpu import KERNEL_DIR
from latticelab.sim.models.ising.gpu import multispin
from latticelab.sim.analysis.components import component_sizes
from latticelab.sim.models.ising.gpu.labelling import THREADS, Labeller, grid_for
from latticelab.sim.gpu.philox import split64, threshold64, wolff_seed_site
from latticelab.sim.models.ising.lattice import RewiredLattice

BLOCK_THREADS = 256
INLINE_MODIFIED_BELOW = 1000  # chunk kernel handles modified sites itself when they are < N/1000


MAX_FRAME_SWEEPS = 1024    # measured sweeps per packed frame launch sequence (longer frames run in chunks)
PARAMS_WORDS = 30          # struct MultispinParams in 64-bit words (metropolis_multispin.cu)
PARAMS_HEAD = 25           # the words the host writes for a temperature (up to modified_apart)
LARGEST_GRAPH = 128        # sweeps in the largest captured frame graph (larger frames replay it several times)
# flags of metropolis_multispin (metropolis_multispin.cu)
MS_WRITE_FLIPS, MS_UNION_FLIPS, MS_MEASURE, MS_SLOT_SHIFT = 2, 4, 8, 4


def whole_warp_rows(bx: int, L: int) -> int:
    """Rows per block for blocks of bx words: at most BLOCK_THREADS threads and a whole number of warps (the
    measured sweep reduces with full-warp shuffles), never more rows than the lattice has."""
    step = 32 // math.gcd(bx, 32)
    return max(step, min(L, BLOCK_THREADS // bx) // step * step)


def metropolis_thresholds(max_k: int, T: float) -> tuple[np.ndarray, tuple[np.uint64, np.uint64, np.uint64]]:
    """Host uint64 thresholds floor(exp(-2k/T) 2^64) for k = s*h in 0..max_k (k = 0 is never looked up: k <= 0
    always flips), and those of k = 2, 4, 6 (the regular sites' cases) as scalars (metropolis_numbers.cuh)."""
    host = threshold64(np.exp(-2.0 * np.arange(max_k + 1) / T))
    return host, tuple(np.uint64(threshold64(math.exp(-2.0 * i / T))) for i in (2, 4, 6))


def params_head(pointers: list[int], regular, has_modified: int, modified_apart: int) -> np.ndarray:
    """The first PARAMS_HEAD words of struct MultispinParams: its 9 pointers (flips, thresholds, mod_words,
    mod_rank, mod_offsets, mod_neighbours, mod_positions, mod_decided, totals), t2, t4, t6 (uint64), the masks
    of their top bytes (3 x 8 uint32: bit j of the byte set -> all ones) and has_modified, modified_apart."""
    masks = np.array([[0xFFFFFFFF if (int(t) >> (63 - j)) & 1 else 0 for j in range(8)] for t in regular],
                     dtype=np.uint32)
    block = np.concatenate([np.array(list(pointers) + [int(t) for t in regular], dtype=np.uint64),
                            masks.reshape(-1).view(np.uint64),
                            np.array([int(has_modified) | int(modified_apart) << 32], dtype=np.uint64)])
    assert block.size == PARAMS_HEAD
    return block


def chunk_words(L: int) -> int | None:
    """32-bit words per thread of the SIMD Metropolis kernel, or None for the one-site-per-thread kernel."""
    if L % 16 == 0:
        return 4
    if L % 4 == 0:
        return 1
    return None


class PendingTotals:
    """A frame's per-sweep totals on their way to the host: copied into pinned memory behind the sweeps on the
    current stream (cudaMemcpyAsync), with events around the frame for its device time."""

    def __init__(self, xp, n: int):
        import cupyx
        self._xp = xp
        self.host = cupyx.empty_pinned((n, 3), dtype=np.uint64)
        self.start, self.end = xp.cuda.Event(), xp.cuda.Event()
        self.start.record()

    def copy_rows(self, device_rows, first: int) -> None:
        runtime = self._xp.cuda.runtime
        stream = self._xp.cuda.get_current_stream()
        runtime.memcpyAsync(self.host[first:].ctypes.data, device_rows.data.ptr, device_rows.nbytes,
                            runtime.memcpyDeviceToHost, stream.ptr)

    def finish(self) -> None:
        self.end.record()

    def ready(self) -> bool:
        return self.end.done

    def result(self) -> np.ndarray:
        self.end.synchronize()
        return self.host.view(np.int64)

    def device_seconds(self) -> float:
        self.end.synchronize()
        return self._xp.cuda.get_elapsed_time(self.start, self.end) / 1000.0


class FrameReplay:
    """The launches of a frame's sweeps, K at a time, each sweep taking its stream and totals slot relative to the
    frame's position in the parameter block: sweep i of K launches the two colour passes (each after its modified
    sites' own launch when they are decided apart; then the rewired edges' bond correction) with stream i and
    slot i, then multispin_advance_base moves the position on by K. On a
    CUDA device each K (a power of two up to LARGEST_GRAPH) is captured once into a CUDA graph and replayed with
    one launch; under the CPU emulator, and wherever capture fails, the same launches are made directly. A
    frame of n sweeps runs the graphs of n's binary digits (LARGEST_GRAPH several times), in decreasing order.
    The launches' arguments are fixed (the kernels, the packed lattice and the parameter block belong to the
    engine, and ``seed`` is the model's), so a replay needs nothing from the host but its launch. With
    ``measure=False`` the sweeps only update the spins (no totals, no flip words): metropolis_sweeps' replay.
    Inside a capture of the caller's own (a graph of a whole metropolis_sweeps), the launches are made directly."""

    def __init__(self, engine, ms: dict, seed: int, measure: bool = True):
        self.engine, self.ms, self.seed, self.measure = engine, ms, seed, measure
        self.graphs: dict[int, object] = {}
        self.capture = not isinstance(ms["totals"], np.ndarray)    # CuPy: capture graphs; the emulator: direct
        self._stream = None

    def run(self, n: int) -> None:
        while n >= LARGEST_GRAPH:
            self._replay(LARGEST_GRAPH)
            n -= LARGEST_GRAPH
        k = LARGEST_GRAPH
        while n:
            k >>= 1
            if n & k:
                self._replay(k)
                n -= k

    def launch(self, k: int) -> None:
        """The launches of k sweeps, made directly on the current stream."""
        ms = self.ms
        packed, params = ms["packed"], ms["params"]
        ends, n_rewired = ms["rewired_ends"]
        rewired_launch = ((grid_for(n_rewired, BLOCK_THREADS, 1024),), (BLOCK_THREADS,))
        for i in range(k):
            flags = (MS_WRITE_FLIPS | MS_MEASURE | MS_UNION_FLIPS | (i << MS_SLOT_SHIFT)) if self.measure else 0
            self.engine._packed_sweep(ms, flags, self.seed, i)
            if n_rewired and self.measure:
                ms["measure_rewired"](*rewired_launch, (packed, ends, np.int32(n_rewired), params, np.int32(i)))
        ms["advance_base"]((1,), (1,), (params, np.int32(k)))

    def _replay(self, k: int) -> None:
        if not self.capture or self.engine.xp.cuda.get_current_stream().is_capturing():
            self.launch(k)
            return
        graph = self.graphs.get(k)
        if graph is None:
            graph = self._captured(k)
            if graph is None:
                self.launch(k)
                return
            self.graphs[k] = graph
        graph.launch(self.engine.xp.cuda.get_current_stream())

    def _captured(self, k: int):
        """A CUDA graph of ``launch(k)``, or None (capture turned off for this replay) if the driver refuses.
        Captured on a non-blocking stream of its own in CuPy's default mode (relaxed): a model being built on
        the window's worker thread meanwhile (app/preparing.py) may allocate and copy without disturbing it."""
        cuda = self.engine.xp.cuda
        if self._stream is None:
            self._stream = cuda.Stream(non_blocking=True)
        try:
            with self._stream:
                self._stream.begin_capture()
                try:
                    self.launch(k)
                finally:
                    graph = self._stream.end_capture()
            return graph
        except Exception as exc:       # the direct launches give the same result, only slower
            import logging
            logging.getLogger(__name__).warning("CUDA graph capture failed (%s: %s); launching directly",
                                                type(exc).__name__, exc)
            self.capture = False
            return None


class CudaEngine:
    def __init__(self, xp, lattice: RewiredLattice, inline_modified: bool | None = None):
        self.xp = xp
        self.lattice = lattice
        self.dim, self.L, self.n = lattice.dim, lattice.L, lattice.n_sites
        self.graph = DeviceGraph(xp, lattice)
        self.words = chunk_words(self.L)
        dim = self.dim
        n_modified = int(lattice.modified_sites.size)
        # Few modified sites: the chunk kernel (and the packed sweep) handles them itself. Many: a kernel of their
        # own per colour, one thread each over coalesced per-colour lists, so the chunk kernel's (the packed
        # sweep's) warps never wait on them.
        if inline_modified is None:
            inline_modified = n_modified * INLINE_MODIFIED_BELOW <= self.n
        self.inline_modified = bool(inline_modified)
        if self.words:
            inline = "true" if self.inline_modified else "false"
            metro = f"metropolis_chunks<{dim}, {self.words}, {inline}>"
            lattice_sum = f"measure_lattice<{dim}, {self.words}, {BLOCK_THREADS}>"
            per_row = self.L // (4 * self.words)
            bx = min(per_row, 32)
            by = max(1, min(self.L, BLOCK_THREADS // bx))
            self._metro_launch = ((-(-per_row // bx), -(-self.L // by), self.L if dim == 3 else 1), (bx, by))
            self._measure_grid = grid_for(self.n // (4 * self.words), BLOCK_THREADS, 2048)
        else:
            self.inline_modified = True
            metro = f"metropolis_sites<{dim}>"
            lattice_sum = f"measure_sites<{dim}, {BLOCK_THREADS}>"
            self._metro_launch = ((-(-self.n // BLOCK_THREADS),), (BLOCK_THREADS,))
            self._measure_grid = grid_for(self.n, BLOCK_THREADS, 2048)
        names = (metro, "metropolis_modified<0>")
        self._metropolis = get_kernel(xp, KERNEL_DIR / "metropolis.cu", metro, names)
        self._colour_lists = []
        if not self.inline_modified:
            self._metropolis_modified = get_kernel(xp, KERNEL_DIR / "metropolis.cu", names[1], names)
            for adj in lattice.by_colour:
                count = int(adj.sites.size)
                arrays = tuple(xp.asarray(a.astype(np.int32) if a.size else np.zeros(1, np.int32))
                               for a in (adj.sites, adj.offsets, adj.neighbours))
                self._colour_lists.append((arrays, np.int32(count), (grid_for(count, BLOCK_THREADS, 1 << 30),)))
        names = (lattice_sum, f"measure_rewired<{BLOCK_THREADS}>")
        self._measure_lattice = get_kernel(xp, KERNEL_DIR / "measure.cu", names[0], names)
        self._measure_rewired = get_kernel(xp, KERNEL_DIR / "measure.cu", names[1], names)
        self._labeller = None
        self._multispin = None
        self._thresholds_for = None
        self._no_mask = xp.zeros(16, dtype=xp.uint8)

    # ---- helpers ------------------------------------------------------------------------------------
    def _spins(self, spins):
        xp = self.xp
        if spins.dtype != xp.int8 or not spins.flags.c_contiguous:
            spins = xp.ascontiguousarray(spins, dtype=xp.int8)
        return spins

    def _thresholds(self, T: float):
        """Device table of the 64-bit Metropolis thresholds floor(exp(-2k/T) 2^64) for k = s*h in 0..max_k (k = 0
        is never looked up: k <= 0 always flips), and the regular ones for k = 2, 4, 6 (metropolis_numbers.cuh)."""
        if self._thresholds_for is None or self._thresholds_for[0] != T:
            host, regular = metropolis_thresholds(self.graph.max_k, T)
            self._thresholds_for = (T, self.xp.asarray(host), regular)
        return self._thresholds_for[1], self._thresholds_for[2]

    @staticmethod
    def _philox_args(key: tuple[int, int]):
        seed_lo, seed_hi = split64(key[0])
        stream_lo, stream_hi = split64(key[1])
        return np.uint32(seed_lo), np.uint32(seed_hi), np.uint32(stream_lo), np.uint32(stream_hi)

    @property
    def labeller(self) -> Labeller:
        if self._labeller is None:
            self._labeller = Labeller(self.xp, self.lattice, self.graph)
        return self._labeller

    def _mask(self, spins, want_mask: bool):
        return self.xp.empty(spins.shape, dtype=bool) if want_mask else self._no_mask

    # ---- updates ------------------------------------------------------------------------------------
    def metropolis(self, spins, T: float, rng, want_mask: bool = True):
        """One checkerboard sweep (both colours): two launches, four when modified sites have their own."""
        spins = self._spins(spins)
        mask = self._mask(spins, want_mask)
        table, regular = self._thresholds(T)
        philox = self._philox_args(rng.next_key())
        g = self.graph
        grid, block = self._metro_launch
        L, write = np.int32(self.L), np.int32(want_mask)
        tail = (g.has_modified, g.mod_bits, g.mod_rank, g.offsets, g.neighbours)
        for colour in (np.int32(0), np.int32(1)):
            if self.words:
                args = (spins, mask, L, colour, write, *philox, table, *regular, *tail)
            else:
                args = (spins, mask, L, colour, write, *philox, table, *tail)
            self._metropolis(grid, block, args)
            if self._colour_lists:
                (sites, offsets, neighbours), count, modified_grid = self._colour_lists[int(colour)]
                if count:
                    self._metropolis_modified(modified_grid, (BLOCK_THREADS,),
                                              (spins, mask, colour, write, *philox, table, sites, offsets,
                                               neighbours, count))
        return spins, (mask if want_mask else None)

    def metropolis_sweeps(self, spins, T: float, rng, n: int, want_mask: bool = True):
        """n checkerboard sweeps, each keyed by its own rng.next_key() in order: the same trajectory (and the
        last sweep's mask) as n calls of ``metropolis``. When L is a multiple of 64 the sweeps run on a packed
        copy (pack, the sweeps replayed from CUDA graphs (FrameReplay), unpack into ``spins`` in place);
        otherwise sweep by sweep."""
        n = int(n)
        if n < 2 or not multispin.supports(self.L):
            mask = None
            for i in range(n):
                spins, mask = self.metropolis(spins, T, rng, want_mask=want_mask and i == n - 1)
            return spins, mask
        spins = self._spins(spins)
        ms = self._multispin_kernels(T)
        grid, block, L, packed, params = ms["launch"] + (ms["L"], ms["packed"], ms["params"])
        seed, first_stream = rng.next_keys(n)
        replay = self._replay(ms, "sweeps_replay", seed, measure=False)
        ms["pack"](grid, block, (spins, packed, L))
        # sweeps 0 .. n-2 from captured graphs (Python's cost per launch would otherwise limit the sweeps at
        # 4096^2), the last one directly, writing its flip words when the mask is wanted
        ms["set_base"]((1,), (1,), (params, np.uint64(first_stream), np.int32(0)))
        replay.run(n - 1)
        self._packed_sweep(ms, MS_WRITE_FLIPS if want_mask else 0, seed, 0)
        ms["set_base"]((1,), (1,), (params, np.uint64(0), np.int32(0)))   # as other launches expect it
        mask = self._mask(spins, want_mask)
        ms["unpack"](grid, block, (spins, mask, packed, ms["flips"], L, np.int32(want_mask)))
        return spins, (mask if want_mask else None)

    @staticmethod
    def _packed_sweep(ms: dict, flags: int, seed: int, stream: int) -> None:
        """The launches of one packed sweep with ``flags`` (metropolis_multispin's, the colour bit left 0) and the
        stream ``stream`` (relative to the parameter block's frame position): per colour, the modified sites'
        own launch when they are decided apart (multispin_decide_modified), then the packed pass."""
        grid, block, L, packed, params = ms["launch"] + (ms["L"], ms["packed"], ms["params"])
        seed, stream = np.uint64(seed), np.uint64(stream)
        for colour in (0, 1):
            apart = ms["decide_launches"][colour]
            if apart is not None:
                decide_grid, first_row, count = apart
                ms["decide"](decide_grid, (BLOCK_THREADS,), (packed, params, first_row, count, np.int32(colour),
                                                             ms["half"], seed, stream))
            ms["sweep"](grid, block, (packed, params, L, np.int32(flags | colour), seed, stream))

    def _replay(self, ms: dict, name: str, seed: int, measure: bool) -> FrameReplay:
        """The engine's FrameReplay ``name`` for the model's seed (rebuilt when the seed changes)."""
        replay = ms.get(name)
        if replay is None or replay.seed != seed:
            replay = ms[name] = FrameReplay(self, ms, seed, measure=measure)
        return replay

    def metropolis_frame(self, spins, T: float, rng, n: int, wait: bool = True):
        """n Metropolis sweeps for one frame of the window, on the packed lattice (L a multiple of 64): the same
        trajectory as n calls of ``metropolis``, plus what the frame shows, computed in the same launches --
        the union of the n sweeps' flips (the highlight) and each sweep's (bond sum, spin sum, flips), reduced
        on the device and copied to the host once. Returns (spins, union mask, host int64 array (n, 3)), or with
        ``wait=False`` on a CUDA device (spins, union mask, PendingTotals): the copy is queued behind the sweeps
        and the host goes on (to draw the frame) while the device works.

        The sweeps take their Philox stream and totals slot relative to the frame's position in the parameter
        block (multispin_set_base), so that on a CUDA device they are replayed from captured graphs
        (FrameReplay): a few graph launches a frame instead of two or three kernel launches a sweep, whose
        Python cost kept the host busy for as long as the device took to run them."""
        n = int(n)
        spins = self._spins(spins)
        ms = self._multispin_kernels(T)
        grid, block, L, packed, params = ms["launch"] + (ms["L"], ms["packed"], ms["params"])
        totals = ms["totals"]
        pending = None if wait or isinstance(totals, np.ndarray) else PendingTotals(self.xp, n)
        seed, first_stream = rng.next_keys(n)
        replay = self._replay(ms, "replay", seed, measure=True)
        ms["pack"](grid, block, (spins, packed, L))
        ms["flips"].fill(0)        # every sweep ORs its flips in: the union of the frame's
        rows = []
        done = 0
        while done < n:
            chunk = min(MAX_FRAME_SWEEPS, n - done)
            totals[:chunk].fill(0)
            ms["set_base"]((1,), (1,), (params, np.uint64(first_stream + done), np.int32(0)))
            replay.run(chunk)
            if pending is None:
                rows.append(to_numpy(totals[:chunk]).view(np.int64).copy())
            else:
                pending.copy_rows(totals[:chunk], done)
            done += chunk
        ms["set_base"]((1,), (1,), (params, np.uint64(0), np.int32(0)))   # as other launches expect it
        mask = self.xp.empty(spins.shape, dtype=bool)
        ms["unpack"](grid, block, (spins, mask, packed, ms["flips"], L, np.int32(1)))
        if pending is not None:
            pending.finish()
            return spins, mask, pending
        return spins, mask, np.concatenate(rows)

    def _packed_rewired_ends(self):
        """Device int32 (R, 4) [removed u, removed v, new u, new v] as packed bit positions, and R."""
        host = self.graph.host
        count = self.graph.n_rewired
        if not count:
            return self.xp.zeros(4, dtype=self.xp.int32), 0
        ends = np.column_stack([multispin.bit_position(a[:count], self.dim, self.L)
                                for a in (host.removed_u, host.removed_v, host.new_u, host.new_v)])
        return self.xp.asarray(ends.astype(np.int32)), count

    def _multispin_kernels(self, T: float) -> dict:
        """The packed kernels, their buffers and the device parameter block for temperature T."""
        xp = self.xp
        if self._multispin is None:
            dim, L = self.dim, self.L
            names = (f"metropolis_multispin<{dim}, 10>", f"multispin_pack<{dim}>", f"multispin_unpack<{dim}>")
            all_names = names + ("multispin_measure_rewired", "multispin_set_base", "multispin_advance_base",
                                 "multispin_decide_modified")

            def kernel(name):
                return get_kernel(xp, KERNEL_DIR / "metropolis_multispin.cu", name, all_names)
            rewired = multispin.packed_rewired(self.lattice)
            # many modified sites: decided apart, one thread each, before each colour's packed pass (the packed
            # pass's own loop over them is serial per word); few: inline, sparing two launches a sweep
            apart = bool(rewired.has_modified) and not self.inline_modified
            decide_launches = [None, None]
            first_row = 0
            for colour, count in enumerate(rewired.colour_rows):
                if apart and count:
                    threads = (first_row & 31) + count
                    decide_launches[colour] = ((-(-threads // BLOCK_THREADS),), np.int32(first_row), np.int32(count))
                first_row += count
            W = L // 64
            bx = min(W, 32)
            by = whole_warp_rows(bx, L)
            self._multispin = {
                "sweep": kernel(names[0]),
                "pack": kernel(names[1]),
                "unpack": kernel(names[2]),
                "set_base": kernel("multispin_set_base"),
                "advance_base": kernel("multispin_advance_base"),
                "launch": ((-(-W // bx), -(-L // by), L if dim == 3 else 1), (bx, by)),
                "L": np.int32(L),
                "packed": xp.zeros(self.n // 32, dtype=xp.uint32),
                "flips": xp.zeros(self.n // 32, dtype=xp.uint32),
                "totals": xp.zeros((MAX_FRAME_SWEEPS, 3), dtype=xp.uint64),
                "measure_rewired": kernel("multispin_measure_rewired"),
                "decide": kernel("multispin_decide_modified"),
                "decide_launches": decide_launches,
                "modified_apart": int(apart),
                "half": np.uint32(self.n // 2),
                # a bit per CSR row, and a word to spare: the packed pass reads the word after its first row's
                "decided": xp.zeros(rewired.positions.size // 32 + 2, dtype=xp.uint32),
                # struct MultispinParams (one fixed buffer: captured graphs hold its address)
                "params": xp.zeros(PARAMS_WORDS, dtype=xp.uint64),
                "rewired_ends": self._packed_rewired_ends(),
                "has_modified": rewired.has_modified,
                "rewired": tuple(xp.asarray(a) for a in (rewired.words, rewired.rank, rewired.offsets,
                                                         rewired.neighbours, rewired.positions)),
                "params_T": None,
            }
        ms = self._multispin
        if ms["params_T"] != T:
            table, regular = self._thresholds(T)
            # struct MultispinParams' head (params_head); the frame position and the slab fields (all zero on
            # one device) after it are left as they are. Written in the stream's order (CuPy's set copies
            # synchronously), so sweeps already queued keep the old temperature.
            pointers = [self._address(a) for a in (ms["flips"], table, *ms["rewired"], ms["decided"], ms["totals"])]
            block = params_head(pointers, regular, ms["has_modified"], ms["modified_apart"])
            head = ms["params"][:block.size]
            if isinstance(head, np.ndarray):
                head[...] = block
            else:
                head.set(block)
            ms["table"], ms["params_T"] = table, T
        return ms

    def _address(self, array) -> int:
        """Device address of an array (a host address under the CPU emulator, where arrays are NumPy's)."""
        return int(array.ctypes.data) if isinstance(array, np.ndarray) else int(array.data.ptr)

    def wolff(self, spins, T: float, rng, want_mask: bool = True):
        """One Wolff cluster: label all bonds (p = 1 - exp(-2/T)), flip the component of a random seed site."""
        spins = self._spins(spins)
        mask = self._mask(spins, want_mask)
        key = rng.next_key()
        labeller = self.labeller
        labeller.label(spins, -math.expm1(-2.0 / T), key)
        seed_site = wolff_seed_site(key, self.n)
        labeller.kernels["wolff_flip"]((grid_for(self.n),), (THREADS,),
                                       (spins, mask, labeller.labels, np.int32(self.n), np.int32(seed_site),
                                        np.int32(want_mask)))
        return spins, (mask if want_mask else None)

    def swendsen_wang(self, spins, T: float, rng, want_mask: bool = True):
        """One Swendsen-Wang sweep: label all bonds, flip every cluster with probability 1/2."""
        spins = self._spins(spins)
        mask = self._mask(spins, want_mask)
        key = rng.next_key()
        labeller = self.labeller
        labeller.label(spins, -math.expm1(-2.0 / T), key)
        labeller.kernels["cluster_flip"]((grid_for(self.n),), (THREADS,),
                                         (spins, mask, labeller.labels, np.int32(self.n), *self._philox_args(key),
                                          np.int32(want_mask)))
        return spins, (mask if want_mask else None)

    # ---- observables --------------------------------------------------------------------------------
    def measure(self, spins) -> tuple[float, int]:
        """(sum over edges of s_i s_j, sum of spins): one pass over the lattice, one over the rewired edges."""
        spins = self._spins(spins)
        totals = self.xp.zeros(2, dtype=self.xp.uint64)
        self._measure_lattice((self._measure_grid,), (BLOCK_THREADS,), (spins, np.int32(self.L), totals))
        g = self.graph
        if g.n_rewired:
            self._measure_rewired((grid_for(g.n_rewired, BLOCK_THREADS, 1024),), (BLOCK_THREADS,),
                                  (spins, g.removed_u, g.removed_v, g.new_u, g.new_v, np.int32(g.n_rewired), totals))
        bonds, spin_sum = (int(v) for v in to_numpy(totals).view(np.int64))
        return float(bonds), spin_sum

    def measure_into(self, spins, out) -> None:
        """Add (bond sum, spin sum) of ``spins`` to the device uint64 array ``out`` (2 or more elements, two's
        complement) without copying anything to the host: a frame measures each step this way and copies once."""
        spins = self._spins(spins)
        self._measure_lattice((self._measure_grid,), (BLOCK_THREADS,), (spins, np.int32(self.L), out))
        g = self.graph
        if g.n_rewired:
            self._measure_rewired((grid_for(g.n_rewired, BLOCK_THREADS, 1024),), (BLOCK_THREADS,),
                                  (spins, g.removed_u, g.removed_v, g.new_u, g.new_v, np.int32(g.n_rewired), out))

    def cluster_sizes(self, spins, T: float, key: tuple[int, int]) -> np.ndarray:
        """Sizes of the Fortuin-Kasteleyn clusters of ``spins`` at T (bonds drawn under ``key``), largest first."""
        labeller = self.labeller
        labeller.label(self._spins(spins), -math.expm1(-2.0 / T), key)
        return component_sizes(labeller.compress())
