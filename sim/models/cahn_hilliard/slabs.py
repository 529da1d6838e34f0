"""Finite-difference RK2 steps of one Cahn-Hilliard field split into slabs over several devices (issue 38).

The field's slowest axis (rows in 2D, planes in 3D) is cut into one slab per part (sim/multidevice/slabs.py),
each held with two halo indices on each side: a stage's mu needs phi's neighbours, and lap(mu) mu's. Each stage
runs the row-blocked kernel of kernels/ch_rk2.cu on the slab's owned indices (``CudaStage(..., slow=...)``), then
the halos of what it wrote are moved from the neighbours (sim/multidevice/exchange.py): the half step's before
the second stage, the new field's before the next step. At a mirror wall the first and last slabs fill their
outer halos with the mirror images of their own border, as the kernel's ghost cells are on one device. Every
cell's value comes from the same operations on the same operands, so the field after n steps equals, bit for
bit, the one-device stepper's (FiniteDifferenceStepper with the same kernel), on any number of parts. A step
uses no global sum; the observables' sums are taken over the gathered field.

The spectral integrators need the whole field's transform: they stay on one device.
"""
from __future__ import annotations

import numpy as np

from latticelab.sim.models.cahn_hilliard.finite_difference import DEFAULT_KERNEL, ROWS, CudaStage
from latticelab.sim.multidevice.exchange import Exchanger, Move, Part, local_indices
from latticelab.sim.multidevice.slabs import split_slow_axis

HALO = 2          # slow indices: mu's neighbour's neighbour


class SlabFiniteDifference:
    """RK2 steps of a field of shape (L,) * dim split over ``parts`` (``kernel``: a row-blocked variant)."""

    def __init__(self, parts: list[Part], exchanger: Exchanger, dim: int, L: int, dtype, boundary: str,
                 kernel: str = DEFAULT_KERNEL):
        if kernel not in ROWS:
            raise ValueError(f"a split field steps with a row-blocked stage kernel ({', '.join(ROWS)}); got {kernel!r}")
        self.parts, self.exchanger, self.dim, self.L = list(parts), exchanger, dim, L
        self.dtype, self.boundary = np.dtype(dtype), boundary
        self.layout = split_slow_axis(L, len(parts), HALO)
        self.arrays = []           # per part: {"phi", "half", "new"} (placeholders for another process's part)
        self.stages = []           # per part: its stage kernel (None for another process's part)
        for part, slab in zip(self.parts, self.layout.slabs):
            shape = (slab.extent,) + (L,) * (dim - 1)
            with part.use():
                xp = part.xp
                self.arrays.append({name: xp.zeros(shape, dtype=self.dtype) for name in ("phi", "half", "new")})
                self.stages.append(CudaStage(xp, self.dtype, dim, boundary, kernel) if part.local else None)
        self.here = local_indices(self.parts)      # the parts this process runs (all but in an MPI job)

    def _halo_moves(self, name: str) -> list[Move]:
        """The moves that fill every part's halos of array ``name`` (made for the arrays now under that name)."""
        n, h = len(self.parts), HALO
        moves = []
        for i, slab in enumerate(self.layout.slabs):
            a = self.arrays[i][name]
            first, end = slab.owned
            below, above = (i - 1) % n, (i + 1) % n
            b_end = self.layout.slabs[below].owned[1]
            if self.boundary == "mirror" and i == 0:         # global -1, -2: the images of 0, 1
                moves += [Move(i, a[first - 1 - k], i, a[first + k]) for k in range(h)]
            else:
                moves.append(Move(i, a[first - h:first], below, self.arrays[below][name][b_end - h:b_end]))
            if self.boundary == "mirror" and i == n - 1:     # global L, L + 1: the images of L - 1, L - 2
                moves += [Move(i, a[end + k], i, a[end - 1 - k]) for k in range(h)]
            else:
                moves.append(Move(i, a[end:end + h], above, self.arrays[above][name][h:2 * h]))
        return moves

    def load(self, phi: np.ndarray) -> None:
        """The field (host array of shape (L,) * dim) into the slabs, halos included."""
        phi = np.asarray(phi, dtype=self.dtype)
        for part, slab, arrays in self.local(self.parts, self.layout.slabs, self.arrays):
            first, end = slab.owned
            with part.use():
                arrays["phi"][first:end] = part.xp.asarray(phi[slab.start:slab.stop])
        self.exchanger.transfer(self._halo_moves("phi"))

    def field(self) -> np.ndarray:
        """The whole field on the host."""
        out = np.empty((self.L,) * self.dim, dtype=self.dtype)
        for part, slab, arrays in self.local(self.parts, self.layout.slabs, self.arrays):
            first, end = slab.owned
            with part.use():
                block = arrays["phi"][first:end]
                out[slab.start:slab.stop] = block.get() if hasattr(block, "get") else block
        self.exchanger.share(out, [(s.start, s.stop) for s in self.layout.slabs])
        return out

    def local(self, *per_part):
        """The per-part sequences' entries of the parts this process runs, zipped."""
        return ([seq[i] for seq in per_part] for i in self.here)

    def step(self, n: int, dt: float, m: float, b: float, u: float, K: float, dx: float) -> None:
        """n RK2 steps: stage 1 into the half field, its halos moved, stage 2 into the new field, its halos
        moved; the new field is then the field."""
        inv_dx2 = 1.0 / (dx * dx)
        for _ in range(int(n)):
            stages = (("phi", "phi", "half", 0.5 * m * dt), ("phi", "half", "new", m * dt))
            for stage_base, evaluated, out, hm in stages:
                for part, slab, arrays, stage in self.local(self.parts, self.layout.slabs, self.arrays,
                                                             self.stages):
                    with part.use():
                        stage(arrays[stage_base], arrays[evaluated], arrays[out], b, u, K, inv_dx2, hm,
                              slow=slab.owned)
                self.exchanger.transfer(self._halo_moves(out), overlap=False)
            for arrays in self.arrays:        # every part's, so that the moves name the same arrays everywhere
                arrays["phi"], arrays["new"] = arrays["new"], arrays["phi"]

    def synchronize(self) -> None:
        self.exchanger.finish()



def split_refusal(params, devices: int):
    """Why a Cahn-Hilliard model with ``params`` cannot run split over ``devices`` devices (a ParameterError
    naming ``devices``), or None."""
    from latticelab.sim.params import ParameterError
    if params.integrator != "finite-difference":
        return ParameterError("devices", "a run split over several devices integrates by finite differences only; "
                                         "the spectral integrators transform the whole field and stay on one "
                                         f"device; got integrator {params.integrator!r}")
    if params.thermal > 0:
        return ParameterError("devices", "a run split over several devices has no thermal noise (its noise is drawn "
                                         "over the whole field, on one device); set thermal 0")
    try:
        split_slow_axis(params.L, devices, HALO)
    except ParameterError as exc:
        return exc
    return None


def device_bytes_per_part(dim: int, L: int, parts: int, item: int) -> int:
    """Each device's share: the field, the half step and the new field over its slab and halos."""
    return int(3 * item * (-(-L // parts) + 2 * HALO) * L ** (dim - 1))


class SplitField:
    """The field of a model split over ``devices`` (CUDA ids; ``xp`` CuPy or the CPU emulator's stand-in):
    stepped by SlabFiniteDifference and moved by the ``exchanger`` kind; the model gets host copies of the field,
    made when asked and kept until the next step."""

    def __init__(self, xp, devices, dim: int, L: int, dtype, boundary: str, exchanger: str = "peer"):
        from latticelab.sim.multidevice.exchange import make_exchanger, make_parts
        self.parts = make_parts(xp, devices)
        self.engine = SlabFiniteDifference(self.parts, make_exchanger(self.parts, exchanger), dim, L, dtype,
                                           boundary)
        self._field = None

    def load(self, phi) -> None:
        phi = np.ascontiguousarray(phi, dtype=self.engine.dtype)
        self.engine.load(phi)
        self._field = phi

    def field(self) -> np.ndarray:
        if self._field is None:
            self._field = self.engine.field()
        return self._field

    def step(self, n: int, dt: float, m: float, b: float, u: float, K: float, dx: float) -> None:
        self.engine.step(n, dt, m, b, u, K, dx)
        self._field = None

    @property
    def all_local(self) -> bool:
        """Whether this process runs every part (not so in an MPI job: the others' slabs are elsewhere)."""
        return all(getattr(part, "local", True) for part in self.parts)

    def value_at(self, index) -> float:
        """The field's value at cell ``index`` (slow axis first), read where its slab lives."""
        index = tuple(int(i) for i in index)
        if not self.all_local:
            return float(self.field()[index])
        engine = self.engine
        owner = int(engine.layout.owner(index[0]))
        slab = engine.layout.slabs[owner]
        with self.parts[owner].use():
            return float(engine.arrays[owner]["phi"][(index[0] - slab.offset,) + index[1:]].item())

    def picture_slabs(self, picture_of, highlight=None):
        """The split picture's slabs (sim/multidevice/picture.py): per part, ``picture_of(xp, values, mask)`` of
        its owned cells of the field (a view of the kept ones, on its device) and of the rows of the host
        ``highlight`` mask (or None), encoded where the slab lives."""
        from latticelab.sim.multidevice.picture import PictureSlab, SlabbedPicture, host_rows, kept_range, kept_slices
        engine = self.engine
        mask = None if highlight is None else np.asarray(highlight, dtype=bool)

        def maker(i, part, slab):
            def picture(step):
                first, count = kept_range(slab.start, slab.stop, step)
                values = engine.arrays[i]["phi"][kept_slices(first - slab.offset, count, step, engine.dim)]
                marks = None if mask is None else host_rows(mask, part, slab.start, slab.stop, step)
                return picture_of(part.xp, values, marks)
            return picture

        return SlabbedPicture((engine.L,) * engine.dim, tuple(
            PictureSlab(part, slab.start, slab.stop, maker(i, part, slab))
            for i, (part, slab) in enumerate(zip(self.parts, engine.layout.slabs))))

    def finite(self) -> bool:
        """Whether every owned cell is finite (reduced on each device; the parts' answers summed)."""
        engine = self.engine
        bad = []
        for part, slab, arrays in engine.local(self.parts, engine.layout.slabs, engine.arrays):
            first, end = slab.owned
            with part.use():
                bad.append(int(not bool(part.xp.isfinite(arrays["phi"][first:end]).all())))
        return engine.exchanger.sum_in_order(bad) == 0
