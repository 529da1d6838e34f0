"""Packed checkerboard Metropolis of one Ising lattice split into slabs over several devices (issue 38).

The lattice's slowest axis (rows y in 2D, layers z in 3D) is cut into one slab per part (sim/multidevice/
slabs.py); each part holds its slab in the packed layout of metropolis_multispin.cu (one bit per spin, the two
colours' words apart) with one halo row (2D) or layer (3D) on each side, and runs the very same kernel with the
slab fields of its parameter block set: rows are numbered locally, while colours, random numbers and site
numbers are global, so every site draws the same number and takes the same decision as on one device. A run
on 1, 2 or 4 parts ends in the same state, bit for bit, as CudaEngine on one device.

A half-sweep of colour c, on every part: the two border rows (which the neighbours read), then the halo move
of their colour-c words (Exchanger.transfer, on the copy streams), then the interior while the borders travel.
The next half-sweep reads the other colour only, so the halos of colour c are needed just before it.

Rewired edges whose ends live on different parts: a modified site's neighbour outside its slab and halos is an
entry ``-1 - j`` of its CSR row, j indexing the part's ``remote`` array; after the half-sweep that updated those
neighbours, each owner gathers their bits into a small buffer and moves it into the requester's ``remote``.
With many modified sites (CudaEngine's N/1000 rule) each part decides its own before each colour's passes
(multispin_decide_modified, global colour indices, the part's own decision bits), as CudaEngine does.

A frame of the window (``frame_sweeps``) runs its sweeps back to back in the same way, replayed from captured
graphs on CUDA, each sweep reducing its bonds, spin sum and flips into a slot of each part's totals in its own
launches (as CudaEngine.metropolis_frame on one device); the totals reach the host in one copy per part.

The CPU runs the same decomposition in one process: the kernels under the CUDA emulator (sim/gpu/emulate.py) on
NumPy slabs, moved by LocalExchanger (tests/test_multidevice_ising.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from latticelab.sim.gpu.kernels import get_kernel
from latticelab.sim.models.ising.gpu import KERNEL_DIR
from latticelab.sim.models.ising.gpu.engine import (BLOCK_THREADS, INLINE_MODIFIED_BELOW, MAX_FRAME_SWEEPS,
                                                    MS_MEASURE, MS_SLOT_SHIFT, MS_UNION_FLIPS, MS_WRITE_FLIPS,
                                                    PARAMS_WORDS, metropolis_thresholds, params_head,
                                                    whole_warp_rows)
from latticelab.sim.models.ising.graph_arrays import merged_adjacency
from latticelab.sim.models.ising.lattice import RewiredLattice, lattice_edge_ends
from latticelab.sim.multidevice.exchange import Exchanger, Move, Part, local_indices
from latticelab.sim.multidevice.slabs import Slab, split_slow_axis

DEEP_HALO = 8                # halo depth of a 2D lattice without rewired sites (see _replay); others: 1
LARGEST_GRAPH = 64          # sweeps in the largest captured multi-device graph
CHUNK_SITES = 1 << 22        # sites packed, unpacked or measured per array operation (bounds the temporaries)
_MASK32 = 0xFFFFFFFF
FRAME_FLAGS = MS_WRITE_FLIPS | MS_UNION_FLIPS | MS_MEASURE    # a frame's sweep: flips ORed, totals in its slot


@dataclass
class _Geometry:
    """Where a global site lives in a part's packed slab."""
    dim: int
    L: int                   # side of the fast axes (x; and y in 3D)
    total: int               # global length of the slow axis
    slab: Slab

    @property
    def plane(self) -> int:          # sites per slow index
        return self.L ** (self.dim - 1)

    @property
    def plane_rows(self) -> int:     # packed rows per slow index
        return self.L ** (self.dim - 2)

    @property
    def rows(self) -> int:           # packed rows of one colour, halos included
        return self.slab.extent * self.plane_rows

    @property
    def words(self) -> int:          # packed words, both colours
        return 2 * self.rows * (self.L // 64)

    def local_slow(self, g: np.ndarray) -> np.ndarray:
        """Local slow index of global slow indices g: owned, the innermost halos, or -1 (another part's)."""
        s = self.slab
        return np.where((g >= s.start) & (g < s.stop), g - s.offset,
                        np.where(g == (s.start - 1) % self.total, s.halo - 1,
                                 np.where(g == s.stop % self.total, s.halo + s.size, -1)))

    def positions(self, sites: np.ndarray) -> np.ndarray:
        """Local packed bit positions of global C-order site numbers (-1 where the site is not held here)."""
        sites = np.asarray(sites, dtype=np.int64)
        g, rest = np.divmod(sites, self.plane)
        y, x = np.divmod(rest, self.L) if self.dim == 3 else (np.zeros_like(rest), rest)
        j = self.local_slow(g)
        colour = (x + y + g) & 1
        pos = (colour * self.rows + j * self.plane_rows + y) * (self.L // 2) + (x >> 1)
        return np.where(j >= 0, pos, -1)

    def owned(self, sites: np.ndarray) -> np.ndarray:
        g = np.asarray(sites, dtype=np.int64) // self.plane
        return (g >= self.slab.start) & (g < self.slab.stop)


@dataclass
class _Gather:
    """Bits this part sends to ``dst_part`` before the half-sweeps of one colour: from the words ``word`` >>
    ``shift`` of its packed slab into ``buffer``, then moved into ``dst`` (a slice of the requester's remote)."""
    dst_part: int
    word: object
    shift: object
    buffer: object
    dst: object = None


@dataclass
class _PartState:
    part: Part
    geometry: _Geometry
    packed: object
    flips: object
    arrays: dict                      # device arrays the parameter blocks point to
    has_modified: int
    colour_rows: tuple = (0, 0)       # the CSR rows (owned modified sites) of colour 0, of colour 1
    blocks: dict = field(default_factory=dict)       # range name -> (params array, grid, block, count)
    gathers: tuple = ((), ())         # per colour of the requesting half-sweep: this part's _Gathers
    ends: tuple | None = None         # (index into the rewired-end arrays, local positions) of the ends held


def _address(array) -> int:
    return int(array.ctypes.data) if isinstance(array, np.ndarray) else int(array.data.ptr)


def _to_device(xp, array):
    return xp.asarray(np.ascontiguousarray(array))


def _part_rewired(lattice: RewiredLattice | None, geometry: _Geometry, adjacency):
    """The modified sites this part owns, in its packed order (colour 0's, then colour 1's), with their packed
    positions and neighbours' entries (local positions or -1 - remote index); their count per colour; the remote
    sites per colour of the requesting site, sorted (needing colour, site)."""
    n_words = geometry.words
    empty = dict(words=np.zeros(1, np.uint32), rank=np.zeros(1, np.uint32), offsets=np.zeros(1, np.int32),
                 neighbours=np.zeros(1, np.int32), positions=np.zeros(1, np.int32))
    nothing = (np.empty(0, np.int64), np.empty(0, np.int64))
    if adjacency is None:
        return 0, empty, (0, 0), nothing
    sites, offsets, neighbours = adjacency
    mine = geometry.owned(sites)
    if not mine.any():
        return 0, empty, (0, 0), nothing
    degrees_all = np.diff(offsets)
    sites, degrees, starts = sites[mine], degrees_all[mine], offsets[:-1][mine]
    pos = geometry.positions(sites)
    order = np.argsort(pos, kind="stable")
    pos, sites, degrees, starts = pos[order], sites[order], degrees[order], starts[order]
    owner = np.repeat(np.arange(sites.size), degrees)
    within = np.arange(int(degrees.sum())) - np.repeat(np.cumsum(degrees) - degrees, degrees)
    nb = neighbours[starts[owner] + within]
    local = geometry.positions(nb)
    remote_mask = local < 0
    # remote neighbours, grouped by the colour of the site that reads them (the half-sweep needing them)
    L = geometry.L
    reader_colour = (pos[owner] >= geometry.rows * (L // 2)).astype(np.int64)
    keys = np.unique(np.stack([reader_colour[remote_mask], nb[remote_mask]], axis=1), axis=0) \
        if remote_mask.any() else np.empty((0, 2), np.int64)
    entries = local.copy()
    if keys.size:
        idx = np.searchsorted(keys[:, 0] * (geometry.total * geometry.plane) + keys[:, 1],
                              reader_colour[remote_mask] * (geometry.total * geometry.plane) + nb[remote_mask])
        entries[remote_mask] = -1 - idx
    word_of = pos >> 5
    words = np.bincount(word_of, weights=(np.uint64(1) << (pos & 31).astype(np.uint64)).astype(np.float64),
                        minlength=n_words).astype(np.uint64).astype(np.uint32)
    counts = np.bincount(word_of, minlength=n_words)
    rank = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.uint32)
    arrays = dict(words=words, rank=rank, offsets=np.concatenate([[0], np.cumsum(degrees)]).astype(np.int32),
                  neighbours=entries.astype(np.int32), positions=pos.astype(np.int32))
    colour0 = int(np.count_nonzero(pos < geometry.rows * (L // 2)))
    remote = tuple(keys[keys[:, 0] == c, 1] for c in (0, 1))
    return 1, arrays, (colour0, int(pos.size) - colour0), remote


class SlabMetropolis:
    """Metropolis sweeps of one lattice split into slabs over ``parts`` (see the module docstring).

    ``lattice``: the rewired lattice (square, side L), or None for a plain periodic lattice of ``rows`` slow
    indices by L (the benchmark's weak scaling: the same L^dim per device). ``overlap``: update the borders
    first and the interior while the halos travel (False: one launch per half-sweep, then the moves).
    ``graphs``: replay plain sweeps from captured CUDA graphs where the exchanger allows it. ``depth``: halo
    planes on each side (default DEEP_HALO for a 2D lattice without rewired sites, else 1; see _replay).
    ``inline_modified``: the modified sites decided by the packed pass itself (True) or, before each colour's
    passes, by multispin_decide_modified, one thread per owned modified site (False); by default CudaEngine's
    rule (inline when they are at most N/1000). The decisions are the same either way."""

    def __init__(self, parts: list[Part], exchanger: Exchanger, dim: int, L: int,
                 lattice: RewiredLattice | None = None, rows: int | None = None, overlap: bool = True,
                 graphs: bool = True, depth: int | None = None, inline_modified: bool | None = None):
        if L % 64:
            raise ValueError(f"the packed sweeps need L a multiple of 64; got {L}")
        self.parts, self.exchanger, self.dim, self.L = list(parts), exchanger, dim, L
        self.lattice = lattice
        self.total = int(rows) if rows is not None else L
        rewired = lattice is not None and lattice.modified_sites.size > 0
        if depth is None:
            depth = DEEP_HALO if dim == 2 and not rewired and self.total // len(parts) >= 2 * DEEP_HALO else 1
        if depth > 1 and (rewired or depth % 2):
            raise ValueError(f"deep halos need an even depth and a lattice without rewired sites; got {depth}")
        self.depth = int(depth)
        self.layout = split_slow_axis(self.total, len(parts), self.depth)
        self.overlap = overlap
        self.n_sites = self.total * L ** (dim - 1)
        self.max_k = max(lattice.max_degree, 2 * dim) if lattice is not None else 2 * dim
        self._T = None
        n_modified = int(lattice.modified_sites.size) if lattice is not None else 0
        if inline_modified is None:
            inline_modified = n_modified * INLINE_MODIFIED_BELOW <= self.n_sites
        self.modified_apart = int(rewired and not inline_modified)
        adjacency = None
        if lattice is not None and lattice.modified_sites.size:
            adj = merged_adjacency(np, lattice)
            adjacency = (np.asarray(adj.sites), np.asarray(adj.offsets), np.asarray(adj.neighbours))
        W = L // 64
        self._bx = min(W, 32)
        self._by = whole_warp_rows(self._bx, L)
        self.here_indices = local_indices(self.parts)     # the parts this process runs (all but in an MPI job)
        xp = self.parts[self.here_indices[0]].xp
        names = (f"metropolis_multispin<{dim}, 10>", "multispin_set_base", "multispin_advance_base",
                 "multispin_decide_modified")
        kernel = lambda name: get_kernel(xp, KERNEL_DIR / "metropolis_multispin.cu", name, names)  # noqa: E731
        self._sweep, self._set_base, self._advance_base, self._decide_kernel = (kernel(name) for name in names)
        self._graphs: dict[int, object] = {}
        self._capture = graphs and all(p.cuda for p in self.parts) and exchanger.capturable
        self.states: list[_PartState] = []
        remotes = []
        for part, slab in zip(self.parts, self.layout.slabs):
            geometry = _Geometry(dim, L, self.total, slab)
            has_modified, host, colour_rows, remote = _part_rewired(lattice, geometry, adjacency)
            remotes.append(remote)
            with part.use():
                pxp = part.xp
                arrays = {name: _to_device(pxp, a) for name, a in host.items()}
                # per measured sweep of a frame (lattice bonds, spin sum, flips): slot i for its sweep i
                arrays["totals"] = pxp.zeros((MAX_FRAME_SWEEPS, 3), dtype=pxp.uint64)
                arrays["remote"] = pxp.zeros(max(1, sum(r.size for r in remote)), dtype=pxp.uint32)
                # the slab's decisions, a bit per CSR row, and a word to spare (as CudaEngine's "decided")
                arrays["decided"] = pxp.zeros(sum(colour_rows) // 32 + 2, dtype=pxp.uint32)
                state = _PartState(part, geometry, pxp.zeros(geometry.words, dtype=pxp.uint32),
                                   pxp.zeros(geometry.words, dtype=pxp.uint32), arrays, has_modified, colour_rows)
            self.states.append(state)
        self.here = [self.states[i] for i in self.here_indices]
        self._plan_gathers(remotes)
        self._plan_halos()
        self._plan_ends()
        for state in self.states:
            self._make_blocks(state)

    # ---- plans made once ---------------------------------------------------------------------------------------
    def _planes(self, state: _PartState, colour: int, j0: int, j1: int):
        """The colour's words of local slow indices j0 .. j1 - 1 (contiguous)."""
        g = state.geometry
        return state.packed.reshape(2, g.slab.extent, g.plane_rows * (self.L // 64))[colour, j0:j1]

    def _plan_halos(self) -> None:
        """Per colour: the moves that fill every part's innermost halo planes from its neighbours' border planes
        (``_halo_moves``); for both colours together, those that fill all ``depth`` halo planes on each side
        (``_deep_moves``)."""
        n, h = len(self.states), self.depth
        self._halo_moves, self._deep_moves = [], []
        for colour in (0, 1):
            moves = []
            for i, state in enumerate(self.states):
                below, above = self.states[(i - 1) % n], self.states[(i + 1) % n]
                size, below_size = state.geometry.slab.size, below.geometry.slab.size
                for depth, moves_of in ((1, moves), (h, self._deep_moves)):
                    moves_of.append(Move(i, self._planes(state, colour, h - depth, h), (i - 1) % n,
                                         self._planes(below, colour, below_size + h - depth, below_size + h)))
                    moves_of.append(Move(i, self._planes(state, colour, size + h, size + h + depth), (i + 1) % n,
                                         self._planes(above, colour, h, h + depth)))
            self._halo_moves.append(moves)

    def _plan_gathers(self, remotes) -> None:
        """For each part and colour of the reading half-sweep: which owner sends which bits where."""
        self._gather_moves = [[], []]
        for i, state in enumerate(self.states):
            remote = remotes[i]
            base = 0
            for colour in (0, 1):
                sites = remote[colour]
                if sites.size:
                    owners = self.layout.owner(sites // state.geometry.plane)
                    for e in np.unique(owners):
                        chosen = sites[owners == e]
                        start = base + int(np.flatnonzero(owners == e)[0])
                        owner = self.states[int(e)]
                        pos = owner.geometry.positions(chosen)
                        with owner.part.use():
                            oxp = owner.part.xp
                            gather = _Gather(i, _to_device(oxp, pos >> 5),
                                             _to_device(oxp, (pos & 31).astype(np.uint32)),
                                             oxp.zeros(chosen.size, dtype=oxp.uint32))
                        with state.part.use():
                            gather.dst = state.arrays["remote"][start:start + chosen.size]
                        owner.gathers = tuple(list(g) + ([gather] if c == colour else [])
                                              for c, g in enumerate(owner.gathers))
                        self._gather_moves[colour].append(Move(i, gather.dst, int(e), gather.buffer))
                base += sites.size

    def _plan_ends(self) -> None:
        """The rewired edges' ends (removed u, v, new u, v) each part holds, for the bond sum's correction: the
        ends ordered by owner (``_ends_order``), part i's the block ``_ends_blocks[i]`` of that order."""
        self._ends = None
        if self.lattice is None or not self.lattice.rewired_edge_ids.size:
            return
        u0, v0 = lattice_edge_ends(self.lattice.rewired_edge_ids, self.dim, self.L)
        new = self.lattice.new_edges.reshape(-1, 2)
        self._ends = np.stack([u0, v0, new[:, 0], new[:, 1]]).astype(np.int64)
        flat = self._ends.reshape(-1)
        owner = self.layout.owner(flat // self.states[0].geometry.plane)
        self._ends_order = np.argsort(owner, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=len(self.states)))])
        self._ends_blocks = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
        for state, (first, end) in zip(self.states, self._ends_blocks):
            held = self._ends_order[first:end]
            pos = state.geometry.positions(flat[held])
            with state.part.use():
                state.ends = (held, _to_device(state.part.xp, pos >> 5),
                              _to_device(state.part.xp, (pos & 31).astype(np.uint32)))

    def _make_blocks(self, state: _PartState) -> None:
        """The kernel's parameter blocks of this part, one per range of slow indices a launch updates."""
        slab, h = state.geometry.slab, self.depth
        first, end = slab.owned
        ranges = {"owned": (first, end), "lower": (first, first + 1), "upper": (end - 1, end),
                  "interior": (first + 1, end - 1)}
        # a deep halo's period (see _replay): half-sweep t updates every plane whose neighbours are still
        # current, the halos shrinking by one plane a half-sweep down to the owned ones at t = depth - 1
        ranges.update({f"deep{t}": (t + 1, slab.extent - t - 1) for t in range(h - 1)})
        ranges[f"deep{h - 1}"] = (first, end)
        if h > 1:
            # a measured period (frame_sweeps) updates the owned planes with the measuring launch and the halo
            # planes of deep{t} apart, unmeasured: each site is counted once, by its owner
            ranges.update({f"deep{t}-below": (t + 1, first) for t in range(h - 1)})
            ranges.update({f"deep{t}-above": (end, slab.extent - t - 1) for t in range(h - 1)})
        W = self.L // 64
        for name, (first, end) in ranges.items():
            count = end - first
            if count <= 0:
                continue
            if self.dim == 2:
                grid = (-(-W // self._bx), -(-count // self._by), 1)
            else:
                grid = (-(-W // self._bx), -(-self.L // self._by), count)
            with state.part.use():
                params = state.part.xp.zeros(PARAMS_WORDS, dtype=state.part.xp.uint64)
            state.blocks[name] = (params, grid, (self._bx, self._by), (first, end))

    def _set_temperature(self, T: float) -> None:
        if T == self._T:
            return
        table, regular = metropolis_thresholds(self.max_k, T)
        for state in self.here:
            slab, a = state.geometry.slab, state.arrays
            with state.part.use():
                a["table"] = _to_device(state.part.xp, table)
                pointers = [_address(x) for x in (state.flips, a["table"], a["words"], a["rank"], a["offsets"],
                                                  a["neighbours"], a["positions"], a["decided"], a["totals"])]
                head = params_head(pointers, regular, state.has_modified, state.has_modified and self.modified_apart)
                for params, _grid, _block, (first, end) in state.blocks.values():
                    # then the frame position (stream base 0, slot base 0) and the slab fields
                    tail = [0, self.total << 32, _address(a["remote"]),
                            slab.extent | (slab.offset & _MASK32) << 32, first | end << 32]
                    block = np.concatenate([head, np.array(tail, dtype=np.uint64)])
                    assert block.size == PARAMS_WORDS
                    if isinstance(params, np.ndarray):
                        params[...] = block
                    else:
                        params.set(block)
        self._T = T

    # ---- spins in and out --------------------------------------------------------------------------------------
    def _row_parity(self, xp, state: _PartState, j0: int, h: int):
        """Parity (global slow index + y) of the packed rows of local slow indices j0 .. j0 + h - 1."""
        g = state.geometry
        slow = xp.arange(j0, j0 + h, dtype=xp.int64) + g.slab.offset
        if self.dim == 3:
            return ((slow[:, None] + xp.arange(self.L, dtype=xp.int64)[None, :]) & 1).reshape(-1)
        return slow & 1

    def _chunks(self, first: int, end: int):
        step = max(1, CHUNK_SITES // (self.L ** (self.dim - 1)))
        for j0 in range(first, end, step):
            yield j0, min(end, j0 + step) - j0

    def load(self, spins: np.ndarray) -> None:
        """Put host int8 +-1 spins (shape (total,) + (L,) * (dim - 1)) into the slabs, halos and gathered bits
        included."""
        W = self.L // 64
        for state in self.here:
            slab, g = state.geometry.slab, state.geometry
            with state.part.use():
                xp = state.part.xp
                packed = state.packed.reshape(2, g.rows, W)
                for j0, h in self._chunks(*slab.owned):
                    rows = xp.asarray(spins[j0 + slab.offset:j0 + slab.offset + h]).reshape(-1, self.L)
                    down = rows < 0
                    par = self._row_parity(xp, state, j0, h)[:, None]
                    even, odd = down[:, 0::2], down[:, 1::2]
                    r0 = j0 * g.plane_rows
                    for colour, bits in ((0, xp.where(par == 0, even, odd)), (1, xp.where(par == 0, odd, even))):
                        weights = xp.left_shift(xp.uint32(1), xp.arange(32, dtype=xp.uint32))
                        packed[colour, r0:r0 + h * g.plane_rows] = (
                            bits.reshape(-1, W, 32).astype(xp.uint32) * weights).sum(axis=-1, dtype=xp.uint32)
        self._refresh(0)
        self._refresh(1)
        self.exchanger.finish()

    def load_random(self, seed: int) -> None:
        """A hot start drawn on the devices (independent random spins, not keyed like a model's reset): for
        benchmarks of lattices too large to draw on the host quickly."""
        W = self.L // 64
        for state in self.here:
            g, (first, end) = state.geometry, state.geometry.slab.owned
            with state.part.use():
                xp = state.part.xp
                words = state.packed.reshape(2, g.rows, W)
                xp.random.seed(seed + g.slab.index)
                halves = xp.random.randint(0, 1 << 16, size=(2, (end - first) * g.plane_rows, W, 2)).astype(xp.uint32)
                words[:, first * g.plane_rows:end * g.plane_rows] = halves[..., 0] | (halves[..., 1] << 16)
        self._refresh(0)
        self._refresh(1)
        self.exchanger.finish()

    def _unpacked(self, state: _PartState, words, j0: int, h: int):
        """The down bits (0/1, uint8) of local slow indices j0 .. j0 + h - 1 from packed-layout ``words``, in
        C order: shape (h * plane_rows, L)."""
        xp, g, W = state.part.xp, state.geometry, self.L // 64
        view = words.reshape(2, g.rows, W)[:, j0 * g.plane_rows:(j0 + h) * g.plane_rows]
        return self._unpack(xp, view, self._row_parity(xp, state, j0, h))

    def _unpack(self, xp, view, parity):
        """Down bits (0/1, uint8), shape (rows, L), of the packed rows ``view`` (2, rows, L / 64), each row's
        colour order given by its ``parity``."""
        bits = ((view[..., None] >> xp.arange(32, dtype=xp.uint32)) & 1).astype(xp.uint8).reshape(2, -1, self.L // 2)
        par = parity[:, None]
        out = xp.empty((bits.shape[1], self.L), dtype=xp.uint8)
        out[:, 0::2] = xp.where(par == 0, bits[0], bits[1])
        out[:, 1::2] = xp.where(par == 0, bits[1], bits[0])
        return out

    def _unpacked_rows(self, state: _PartState, words, local):
        """As ``_unpacked`` for a 2D slab's local rows ``local`` (an array of local slow indices, any order)."""
        xp = state.part.xp
        view = words.reshape(2, state.geometry.rows, self.L // 64)[:, local]
        return self._unpack(xp, view, (local + state.geometry.slab.offset) & 1)

    def _gather_host(self, which: str) -> np.ndarray:
        shape = (self.total,) + (self.L,) * (self.dim - 1)
        out = np.empty(shape, dtype=np.int8 if which == "spins" else bool)
        for state in self.here:
            slab = state.geometry.slab
            with state.part.use():
                xp = state.part.xp
                words = state.packed if which == "spins" else state.flips
                for j0, h in self._chunks(*slab.owned):
                    bits = self._unpacked(state, words, j0, h)
                    host = (1 - 2 * bits.astype(xp.int8)) if which == "spins" else bits.astype(bool)
                    host = host.get() if hasattr(host, "get") else host
                    out[j0 + slab.offset:j0 + slab.offset + h] = host.reshape((h,) + shape[1:])
        if out.dtype == bool:
            self.exchanger.share(out.view(np.uint8), [(s.start, s.stop) for s in self.layout.slabs])
        else:
            self.exchanger.share(out, [(s.start, s.stop) for s in self.layout.slabs])
        return out

    def owned_cells(self, index: int, step: int = 1, flips: bool = True):
        """Part ``index``'s owned spins (int8 +-1) and, with ``flips``, its flip mask (bool; else None), on the part's
        device (call inside ``part.use()``): the slow indices that are multiples of ``step``
        (sim/multidevice/picture.py: kept_range) and every ``step``-th cell of the other axes (2D only when step
        > 1). What a split picture encodes where the slab lives."""
        from latticelab.sim.multidevice.picture import kept_range
        state = self.states[index]
        slab, xp = state.geometry.slab, state.part.xp
        if step > 1 and self.dim != 2:
            raise ValueError(f"step: only 2D slabs are reduced; got {step}")
        first, count = kept_range(slab.start, slab.stop, step)
        local = first - slab.offset
        shape = (count,) + (self.L,) * (self.dim - 1)
        out = [xp.empty((count, -(-self.L // step)) if step > 1 else shape, dtype=dtype)
               for dtype in ((xp.int8, xp.bool_) if flips else (xp.int8,))]
        rows = max(1, CHUNK_SITES // (self.L ** (self.dim - 1)))
        for r0 in range(0, count, rows):
            n = min(count, r0 + rows) - r0
            j = local + r0 * step
            for target, words in zip(out, (state.packed, state.flips)):
                if step == 1:
                    bits = self._unpacked(state, words, j, n).reshape((n,) + shape[1:])
                else:      # 2D: one packed row per slow index; the kept rows only, then every step-th column
                    bits = self._unpacked_rows(state, words, j + step * xp.arange(n, dtype=xp.int64))[:, ::step]
                target[r0:r0 + n] = (1 - 2 * bits.astype(xp.int8)) if words is state.packed else bits
        return out[0], (out[1] if flips else None)

    def spin_at(self, index) -> int:
        """The spin (+1 or -1) of the site at ``index`` (its lattice coordinates, slow axis first), read from the
        one packed word that holds it on its owner's device."""
        site = int(np.ravel_multi_index(tuple(int(i) for i in index), (self.total,) + (self.L,) * (self.dim - 1)))
        owner = int(self.layout.owner(site // self.L ** (self.dim - 1)))
        state = self.states[owner]
        position = int(state.geometry.positions(np.array([site]))[0])
        with state.part.use():
            word = int(state.packed[position >> 5].item())
        return -1 if (word >> (position & 31)) & 1 else 1

    def spins(self) -> np.ndarray:
        """The whole lattice's spins on the host (int8 +-1)."""
        return self._gather_host("spins")

    def flip_mask(self) -> np.ndarray:
        """The sites flipped by the last sweep run with ``want_mask`` (host bool)."""
        return self._gather_host("flips")

    # ---- sweeps ------------------------------------------------------------------------------------------------
    def _launch(self, state: _PartState, name: str, flags: int, seed, stream) -> None:
        block = state.blocks.get(name)
        if block is None:
            return
        params, grid, threads, _range = block
        self._sweep(grid, threads, (state.packed, params, np.int32(self.L), np.int32(flags), seed, stream))

    def _decide_modified(self, state: _PartState, colour: int, seed, stream) -> None:
        """With modified sites decided apart: the part's own modified sites of ``colour``, one thread each, into
        its decision bits, before that colour's packed passes (which only read them)."""
        count = state.colour_rows[colour]
        if not (self.modified_apart and count):
            return
        first_row = 0 if colour == 0 else state.colour_rows[0]
        threads = (first_row & 31) + count
        half = np.uint32(state.geometry.rows * (self.L // 2))
        params = state.blocks["owned"][0]
        self._decide_kernel((-(-threads // BLOCK_THREADS),), (BLOCK_THREADS,),
                            (state.packed, params, np.int32(first_row), np.int32(count), np.int32(colour), half,
                             seed, stream))

    def _refresh(self, colour: int) -> None:
        """Move the colour's halos, and the gathered bits the other colour's half-sweeps read, to every part."""
        moves = list(self._halo_moves[colour]) + self._fill_gathers(1 - colour)
        self.exchanger.transfer(moves)

    def _fill_gathers(self, reading_colour: int) -> list[Move]:
        """Each owner's bits read by the modified sites of ``reading_colour`` on other parts, into its buffers."""
        moves = self._gather_moves[reading_colour]
        if not moves:
            return []
        for state in self.here:
            for gather in state.gathers[reading_colour]:
                with state.part.use():
                    xp = state.part.xp
                    xp.take(state.packed, gather.word, out=gather.buffer)
                    xp.right_shift(gather.buffer, gather.shift, out=gather.buffer)
                    xp.bitwise_and(gather.buffer, xp.uint32(1), out=gather.buffer)
        return list(moves)

    def clear_flips(self) -> None:
        """Zero the flip words (before sweeps that OR their flips into them)."""
        for state in self.here:
            with state.part.use():
                state.flips.fill(0)

    def sweeps(self, T: float, seed: int, first_stream: int, n: int, mask: str | None = None,
               measure: bool = False) -> None:
        """n sweeps, sweep i keyed by (seed, first_stream + i): the same as CudaEngine.metropolis_sweeps with
        rng.next_keys(n). ``mask``: "last" -- the last sweep writes its flips (``flip_mask``); "union" -- every
        sweep ORs its flips into the flip words (after ``clear_flips``: the union of a frame's); None: neither.
        ``measure``: the kernels reduce each part's lattice bonds, spin sum and flips of sweep i into its totals'
        slot i (``measured_totals``: those of one measured sweep). Plain sweeps on CUDA run from captured graphs
        (``_replay``); the others launch directly (a frame's measured sweeps: ``frame_sweeps``)."""
        n = int(n)
        if mask == "last" and n > 1:
            self.sweeps(T, seed, first_stream, n - 1)
            first_stream, n = first_stream + n - 1, 1
        if mask is None and not measure and n >= 2:
            self._set_temperature(T)
            if self._capture and self._replay(seed, first_stream, n):
                return
            periods = n - n % max(1, self.depth // 2) if self.depth > 1 else 0
            if periods:
                self.exchanger.transfer(self._deep_moves, overlap=False)
                self._launch_periods(seed, first_stream, periods)
                first_stream, n = first_stream + periods, n - periods
        if measure:
            self._zero_totals()
        if n:
            self._launch_sweeps(T, seed, first_stream, n, mask, measure)

    @property
    def measures_frames(self) -> bool:
        """Whether ``frame_sweeps`` applies: every part in this process and no rewired edges (their bond
        correction pairs spins of different parts after each sweep: ``measured_totals``)."""
        return self._ends is None and len(self.here) == len(self.states)

    def frame_sweeps(self, T: float, seed: int, first_stream: int, n: int) -> "FrameTotals":
        """n sweeps for one frame of the window, back to back on every part (as CudaEngine.metropolis_frame on
        one device): sweep i keyed by (seed, first_stream + i), its lattice bonds, spin sum and flips reduced by
        its own launches into slot i of each part's totals, every sweep ORing its flips into the flip words (the
        frame's union). Nothing waits for the host: on CUDA the sweeps replay captured graphs and each part's
        totals follow them to pinned host memory (FrameTotals, read once when the frame is shown). Needs
        ``measures_frames``."""
        if not self.measures_frames:
            raise ValueError("frame_sweeps needs every part in this process and a lattice without rewired edges")
        n = int(n)
        self._set_temperature(T)
        self.clear_flips()
        totals = FrameTotals(self, n)
        done = 0
        while done < n:
            chunk = min(MAX_FRAME_SWEEPS, n - done)
            self._zero_totals()
            first = first_stream + done
            if not (self._capture and self._replay(seed, first, chunk, measured=True)):
                periods = chunk - chunk % max(1, self.depth // 2) if self.depth > 1 else 0
                if periods:
                    self.exchanger.transfer(self._deep_moves, overlap=False)
                    self._launch_periods(seed, first, periods, measured=True)
                if chunk > periods:
                    self._launch_sweeps(T, seed, first + periods, chunk - periods, "union", True, periods)
            totals.copy(done, chunk)
            done += chunk
        totals.finish()
        return totals

    def _zero_totals(self) -> None:
        for state in self.here:
            with state.part.use():
                state.arrays["totals"].fill(0)

    def _launch_sweeps(self, T: float, seed: int, first_stream: int, n: int, mask: str | None = None,
                       measure: bool = False, first_slot: int = 0) -> None:
        """The launches and moves of n sweeps, sweep i with stream argument first_stream + i and, with
        ``measure``, totals slot first_slot + i (added to the parameter blocks' stream and slot bases: 0 outside a
        replay)."""
        self._set_temperature(T)
        seed64 = np.uint64(seed)
        for i in range(int(n)):
            stream = np.uint64(first_stream + i)
            mask_flag = {"last": MS_WRITE_FLIPS if i == n - 1 else 0, "union": MS_WRITE_FLIPS | MS_UNION_FLIPS,
                         None: 0}[mask] | (MS_MEASURE | (first_slot + i) << MS_SLOT_SHIFT if measure else 0)
            for colour in (0, 1):
                flags = colour | mask_flag
                if self.overlap:
                    for state in self.here:
                        with state.part.use():
                            self._decide_modified(state, colour, seed64, stream)
                            self._launch(state, "lower", flags, seed64, stream)
                            self._launch(state, "upper", flags, seed64, stream)
                    self.exchanger.transfer(self._halo_moves[colour])
                    for state in self.here:
                        with state.part.use():
                            self._launch(state, "interior", flags, seed64, stream)
                    gathers = self._fill_gathers(1 - colour)
                    if gathers:
                        self.exchanger.transfer(gathers)
                else:
                    for state in self.here:
                        with state.part.use():
                            self._decide_modified(state, colour, seed64, stream)
                            self._launch(state, "owned", flags, seed64, stream)
                    self._refresh(colour)

    # ---- captured sweeps ---------------------------------------------------------------------------------------
    # The host's cost of a sweep's launches and moves (a dozen CUDA calls per part and half-sweep, from Python)
    # exceeds a small slab's device time: strong scaling was launch-bound. So K sweeps (K a power of two up to
    # LARGEST_GRAPH) are captured once into one CUDA graph spanning every GPU -- each part's launches on its
    # streams, the moves between them, their events as the graph's edges -- with stream arguments 0 .. K-1
    # relative to the parameter blocks' stream base, which the graph's last nodes advance by K (as FrameReplay
    # does on one device). A run of n sweeps sets the base, replays the graphs of n's binary digits on the first
    # part's update stream, and puts the base back to 0.
    def _blocks(self):
        for state in self.here:
            for params, *_ in state.blocks.values():
                yield state, params

    def _set_bases(self, stream_base: int) -> None:
        for state, params in self._blocks():
            with state.part.use():
                self._set_base((1,), (1,), (params, np.uint64(stream_base), np.int32(0)))

    def _sizes(self, n: int) -> list[int]:
        """The graph sizes a run of n sweeps replays, largest first."""
        sizes, k = [], LARGEST_GRAPH
        while n:
            if n >= k:
                sizes.append(k)
                n -= k
            else:
                k >>= 1
        return sizes

    def _replay(self, seed: int, first_stream: int, n: int, measured: bool = False) -> bool:
        """Run n plain sweeps (``measured``: a frame's, see frame_sweeps; totals slots from 0) from captured
        graphs; False (nothing run) when capture failed: then never again."""
        sizes = self._sizes(n)
        for k in set(sizes):
            if (k, seed, measured) not in self._graphs:
                graph = self._captured(k, seed, measured)
                if graph is None:
                    self._capture = False
                    return False
                self._graphs[(k, seed, measured)] = graph
        origin = self.states[0].part
        self._set_bases(first_stream)
        if self.depth > 1:
            # every halo plane current: a period's precondition
            self.exchanger.transfer(self._deep_moves, overlap=False)
        self._join(origin)
        with origin.xp.cuda.Device(origin.device):
            for k in sizes:
                self._graphs[(k, seed, measured)].launch(origin.stream)
        self._fork(origin)
        self._set_bases(0)
        return True

    def _join(self, origin: Part) -> None:
        """The origin's update stream waits for all work queued on every part's streams."""
        for state in self.here:
            part = state.part
            for stream in (part.stream, part.copy_stream):
                if stream is not origin.stream:
                    event = part.event(stream)
                    with origin.xp.cuda.Device(origin.device):
                        origin.stream.wait_event(event)

    def _fork(self, origin: Part) -> None:
        """Every part's streams wait for the work queued so far on the origin's update stream."""
        event = origin.event(origin.stream)
        for state in self.here:
            part = state.part
            with part.xp.cuda.Device(part.device):
                for stream in (part.stream, part.copy_stream):
                    if stream is not origin.stream:
                        stream.wait_event(event)

    def _launch_periods(self, seed: int, first_stream: int, k: int, measured: bool = False,
                        first_slot: int = 0) -> None:
        """k sweeps (stream arguments first_stream .. + k-1) in periods of ``depth`` half-sweeps: each part updates
        its owned planes and as much of its halos as is still current, exactly as their owners do (the numbers are keyed
        by global site and sweep), and only at a period's end are all halo planes moved. One exchange every
        ``depth`` half-sweeps instead of every one: the GPUs wait for each other that much less often.
        ``measured``: a frame's sweeps (frame_sweeps), sweep i measured into slot first_slot + i by the owned
        planes' launch, the halo planes updated apart."""
        seed64 = np.uint64(seed)
        for i in range(k):
            stream = np.uint64(first_stream + i)
            for colour in (0, 1):
                t = (2 * i + colour) % self.depth
                for state in self.here:
                    with state.part.use():
                        if measured:
                            flags = colour | FRAME_FLAGS | (first_slot + i) << MS_SLOT_SHIFT
                            self._launch(state, "owned", flags, seed64, stream)
                            self._launch(state, f"deep{t}-below", colour, seed64, stream)
                            self._launch(state, f"deep{t}-above", colour, seed64, stream)
                        else:
                            self._launch(state, f"deep{t}", colour, seed64, stream)
                if t == self.depth - 1:
                    self.exchanger.transfer(self._deep_moves, overlap=False)

    def _captured(self, k: int, seed: int, measured: bool = False):
        """A CUDA graph of k sweeps (stream arguments 0 .. k-1; ``measured``: a frame's, totals slots 0 .. k-1)
        and the stream and slot bases' advance by k, or None when the driver refuses the capture (the direct
        launches give the same result, only with more host work)."""
        origin = self.states[0].part
        self.synchronize()
        self.exchanger.forget_pending()
        try:
            with origin.xp.cuda.Device(origin.device):
                origin.stream.begin_capture()
            try:
                self._fork(origin)
                if self.depth > 1 and 2 * k % self.depth == 0:
                    self._launch_periods(seed, 0, k, measured)
                elif measured:
                    self._launch_sweeps(self._T, seed, 0, k, "union", measure=True)
                else:
                    self._launch_sweeps(self._T, seed, 0, k)
                for state, params in self._blocks():
                    with state.part.use():
                        self._advance_base((1,), (1,), (params, np.int32(k)))
                self._join(origin)
            finally:
                with origin.xp.cuda.Device(origin.device):
                    graph = origin.stream.end_capture()
                self.exchanger.forget_pending()
            return graph
        except Exception as exc:
            import logging
            logging.getLogger(__name__).warning("multi-device CUDA graph capture failed (%s: %s); launching "
                                                "directly", type(exc).__name__, exc)
            return None

    def synchronize(self) -> None:
        self.exchanger.finish()

    # ---- measurements ------------------------------------------------------------------------------------------
    def measure(self) -> tuple[float, int]:
        """(sum over edges of s_i s_j, sum of spins), each part's share reduced on its device and the shares
        summed on the host in part order (integers: exact for any cut)."""
        bonds, spin_sum = [], []
        for state in self.here:
            slab = state.geometry.slab
            b = s = 0
            with state.part.use():
                xp = state.part.xp
                first, end = slab.owned
                for j0, h in self._chunks(first, end):
                    # the chunk's planes and the next one (a halo after the last chunk): the slow-axis bonds
                    down = self._unpacked(state, state.packed, j0, h + 1).reshape((h + 1,) + (self.L,) * (self.dim - 1))
                    spins = 1 - 2 * down.astype(xp.int32)
                    own = spins[:h]
                    total = (own * spins[1:]).sum(dtype=xp.int64) + (own * xp.roll(own, -1, -1)).sum(dtype=xp.int64)
                    if self.dim == 3:
                        total += (own * xp.roll(own, -1, -2)).sum(dtype=xp.int64)
                    b += int(total)
                    s += int(own.sum(dtype=xp.int64))
            bonds.append(b)
            spin_sum.append(s)
        total_bonds = self.exchanger.sum_in_order(bonds) + self._rewired_correction()
        return float(total_bonds), int(self.exchanger.sum_in_order(spin_sum))

    def measured_totals(self) -> tuple[float, int, int]:
        """(bond sum, spin sum, flips) of the one sweep run with ``measure``: the parts' totals summed in part
        order, plus the rewired edges' correction of the bond sum for the current spins."""
        rows = []
        for state in self.here:
            with state.part.use():
                totals = state.arrays["totals"][0]
                rows.append((totals.get() if hasattr(totals, "get") else totals.copy()).view(np.int64))
        lattice, spins, flips = (self.exchanger.sum_in_order([int(r[k]) for r in rows]) for k in range(3))
        return float(lattice + self._rewired_correction()), int(spins), int(flips)

    def _rewired_correction(self) -> int:
        """Sum of s_u s_v over the new edges minus over the lattice edges rewiring removed."""
        if self._ends is None:
            return 0
        by_owner = np.zeros(self._ends.size, dtype=np.int64)
        for state, i in zip(self.here, self.here_indices):
            _held, word, shift = state.ends
            with state.part.use():
                xp = state.part.xp
                bits = (xp.take(state.packed, word) >> shift) & 1
                bits = bits.get() if hasattr(bits, "get") else bits
            first, end = self._ends_blocks[i]
            by_owner[first:end] = 1 - 2 * bits.astype(np.int64)
        self.exchanger.share(by_owner, self._ends_blocks)
        values = np.empty_like(by_owner)
        values[self._ends_order] = by_owner
        ends = values.reshape(4, -1)
        return int((ends[2] * ends[3]).sum() - (ends[0] * ends[1]).sum())


class FrameTotals:
    """A frame's per-sweep totals (frame_sweeps) on their way to the host: on CUDA each part's rows copied into
    pinned memory behind its sweeps (cudaMemcpyAsync on its update stream), with events around the frame on the
    first part's stream for its device time; under the CPU emulator copied at once. ``result()``: the (n, 3)
    int64 rows (bond sum, spin sum, flips), the parts' added in part order. The PendingTotals interface of
    gpu/engine.py, so the model wraps either alike."""

    def __init__(self, engine: SlabMetropolis, n: int):
        self._engine = engine
        self._origin = engine.here[0].part
        self._cuda = self._origin.cuda
        self._rows = []
        self._start = self._end = None
        for state in engine.here:
            if self._cuda:
                import cupyx
                with state.part.use():
                    self._rows.append(cupyx.empty_pinned((n, 3), dtype=np.uint64))
            else:
                self._rows.append(np.empty((n, 3), dtype=np.uint64))
        if self._cuda:
            with self._origin.use():      # events belong to the device current when they are made
                self._start, self._end = (self._origin.xp.cuda.Event() for _ in range(2))
                self._start.record(self._origin.stream)

    def copy(self, first: int, count: int) -> None:
        """Each part's slots 0 .. count - 1 into rows first .. first + count - 1, behind the work queued."""
        for state, rows in zip(self._engine.here, self._rows):
            totals = state.arrays["totals"][:count]
            if not self._cuda:
                rows[first:first + count] = totals
                continue
            with state.part.use():
                runtime = state.part.xp.cuda.runtime
                runtime.memcpyAsync(rows[first:].ctypes.data, totals.data.ptr, totals.nbytes,
                                    runtime.memcpyDeviceToHost, state.part.stream.ptr)

    def finish(self) -> None:
        """The end event, on the first part's stream once every part's copies are done."""
        if self._cuda:
            self._engine._join(self._origin)
            with self._origin.use():
                self._end.record(self._origin.stream)

    def ready(self) -> bool:
        return not self._cuda or self._end.done

    def result(self) -> np.ndarray:
        if self._cuda:
            self._end.synchronize()
        total = None
        for rows in self._rows:            # integers: exact in any order; part order as sum_in_order
            rows = rows.view(np.int64)
            total = rows.copy() if total is None else total + rows
        return total

    def device_seconds(self) -> float | None:
        if not self._cuda:
            return None
        self._end.synchronize()
        return self._origin.xp.cuda.get_elapsed_time(self._start, self._end) / 1000.0


def device_bytes_per_part(dim: int, L: int, parts: int, rewired_entries: float = 0.0) -> int:
    """Bytes on each device: the packed slab and flip words (two bits per site with halos), the unpacking and
    measuring temporaries (CHUNK_SITES sites at 12 bytes), the modified sites' arrays (about 8 bytes per
    adjacency entry and per packed word of bits and ranks)."""
    slab = -(-L // parts) + 2 * DEEP_HALO
    sites = slab * L ** (dim - 1)
    return int(2 * sites // 8 + sites // 4 + 12 * CHUNK_SITES + 8 * rewired_entries / parts)
