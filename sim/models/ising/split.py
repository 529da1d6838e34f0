"""An Ising model's state when one run is split over several devices (the ``devices`` run option).

``SplitRun`` holds the slabs (gpu/slabs.py SlabMetropolis) and hands the model host copies of the spins and of
the flips, made when asked and kept until the next sweep. Only Metropolis splits: Wolff grows one cluster
from one site and Swendsen-Wang labels clusters across the whole lattice, so they stay on one device
(``split_refusal`` says so).
"""
from __future__ import annotations

import numpy as np

from latticelab.sim.models.ising.lattice import RewiredLattice
from latticelab.sim.multidevice.exchange import make_exchanger, make_parts
from latticelab.sim.multidevice.slabs import split_slow_axis
from latticelab.sim.params import ParameterError


def split_refusal(params, devices: int) -> ParameterError | None:
    """Why a model with ``params`` cannot run split over ``devices`` devices, or None."""
    if params.algorithm != "metropolis":
        return ParameterError("devices", "a run split over several devices updates by Metropolis only (algorithm "
                                         f"'metropolis'; Wolff and Swendsen-Wang stay on one device); got "
                                         f"{params.algorithm!r}")
    if params.L % 64:
        return ParameterError("devices", f"a run split over several devices needs L a multiple of 64 (the packed "
                                         f"sweeps); got L = {params.L}")
    try:
        split_slow_axis(params.L, devices, 1)
    except ParameterError as exc:
        return exc
    return None


class SplitRun:
    """The spins of one lattice in slabs over ``devices`` (CUDA ids; ``xp`` CuPy, or the CPU emulator's stand-in
    with any ids), swept by SlabMetropolis and moved by the ``exchanger`` kind ("peer" or "nccl")."""

    def __init__(self, xp, devices, lattice: RewiredLattice, exchanger: str = "peer"):
        from latticelab.sim.models.ising.gpu.slabs import SlabMetropolis
        self._make = SlabMetropolis
        self.parts = make_parts(xp, devices)
        self.exchanger = make_exchanger(self.parts, exchanger)
        self.engine = SlabMetropolis(self.parts, self.exchanger, lattice.dim, lattice.L, lattice)
        self._spins = self._flips = None
        self._device_flips = DeviceFlips(self)     # stands for the flip words now on the devices
        self._rewired_slabs: dict = {}             # (mask id, part, step) -> the part's rows of the rewired mask

    def rebuild(self, lattice: RewiredLattice) -> None:
        """A new graph; the spins are kept."""
        spins = self.spins()
        self.engine = self._make(self.parts, self.exchanger, lattice.dim, lattice.L, lattice)
        self.load(spins)

    def load(self, spins) -> None:
        spins = np.ascontiguousarray(spins, dtype=np.int8)
        self.engine.load(spins)
        self._spins = spins

    def load_random(self, seed: int) -> None:
        """Independent random spins drawn on the devices (SlabMetropolis.load_random; not the model's keyed hot
        start): for benchmarks of lattices too large to draw on the host quickly."""
        self.engine.load_random(seed)
        self._spins = None

    def set_flips(self, flips) -> None:
        self._flips = np.asarray(flips, dtype=bool)
        self._device_flips = DeviceFlips(self)    # the devices' flip words no longer are the flips

    def spins(self) -> np.ndarray:
        if self._spins is None:
            self._spins = self.engine.spins()
        return self._spins

    def flips(self) -> np.ndarray:
        if self._flips is None:
            self._flips = self.engine.flip_mask()
        return self._flips

    def sweeps(self, T: float, rng, n: int, mask: str | None = "last") -> None:
        seed, first = rng.next_keys(n)
        self.engine.sweeps(T, seed, first, n, mask)
        self._spins = None
        if mask is not None:
            self._new_flips()

    def _new_flips(self) -> None:
        self._flips = None
        self._device_flips = DeviceFlips(self)

    def device_flips(self) -> "DeviceFlips":
        """The flips as they are now in the devices' flip words, not copied anywhere (see DeviceFlips)."""
        return self._device_flips

    @property
    def all_local(self) -> bool:
        """Whether this process runs every part (not so in an MPI job: the others' slabs are elsewhere)."""
        return all(getattr(part, "local", True) for part in self.parts)

    def spin_at(self, index) -> int:
        if not self.all_local:
            return int(self.spins()[tuple(int(i) for i in index)])
        return self.engine.spin_at(index)

    def picture_slabs(self, highlight=None, rewired=None):
        """The split picture's slabs (sim/multidevice/picture.py): per part, its owned spins with the
        ``highlight`` (a DeviceFlips: the flip words, never copied to the host; any other mask: its rows, copied
        to the part) and the ``rewired`` site mask (a host bool array of
        the lattice's shape, or None), reduced and encoded on the part's device (picture.py: ising_picture)."""
        from latticelab.sim.models.ising.picture import ising_picture
        from latticelab.sim.multidevice.picture import PictureSlab, SlabbedPicture, host_rows
        engine = self.engine
        on_devices = isinstance(highlight, DeviceFlips)      # a stale one: the flip words now there
        host_highlight = None if highlight is None or on_devices else np.asarray(highlight, dtype=bool)

        def maker(i, part, slab):
            def picture(step):
                spins, flips = engine.owned_cells(i, step, flips=on_devices)
                if host_highlight is not None:
                    flips = host_rows(host_highlight, part, slab.start, slab.stop, step)
                marks = None
                if rewired is not None:
                    key = (id(rewired), i, step)
                    if key not in self._rewired_slabs:
                        self._rewired_slabs = {k: v for k, v in self._rewired_slabs.items() if k[0] == id(rewired)}
                        self._rewired_slabs[key] = (rewired, host_rows(rewired, part, slab.start, slab.stop, step))
                    marks = self._rewired_slabs[key][1]
                return ising_picture(part.xp, spins, flips, marks)
            return picture

        slabs = tuple(PictureSlab(part, slab.start, slab.stop, maker(i, part, slab))
                      for i, (part, slab) in enumerate(zip(self.parts, engine.layout.slabs)))
        shape = (engine.total,) + (engine.L,) * (engine.dim - 1)
        return SlabbedPicture(shape, slabs)

    def frame(self, T: float, rng, n: int):
        """n sweeps for a frame, back to back on the devices (gpu/slabs.py frame_sweeps): their per-sweep totals
        on the way to the host (FrameTotals), the flips' union left on the devices; None where the engine
        measures sweep by sweep (``measured_sweep``: rewired edges, or parts in other processes)."""
        if not self.engine.measures_frames:
            return None
        seed, first = rng.next_keys(n)
        totals = self.engine.frame_sweeps(T, seed, first, n)
        self._spins = None
        self._new_flips()
        return totals

    def measured_sweep(self, T: float, rng, mask: str | None = "union") -> tuple[float, int, int]:
        """One sweep whose (bond sum, spin sum, flips) the kernels reduce as they go (a frame's per-step values)."""
        seed, first = rng.next_keys(1)
        self.engine.sweeps(T, seed, first, 1, mask, measure=True)
        self._spins = None
        if mask is not None:
            self._new_flips()
        return self.engine.measured_totals()

    def clear_flips(self) -> None:
        self.engine.clear_flips()
        self._new_flips()

    def measure(self) -> tuple[float, int]:
        return self.engine.measure()


class DeviceFlips:
    """The flips of a split run as the devices hold them (the union of a frame's, or the last sweep's): what a
    frame's ``StepBatch.changed`` is, so that the window's highlight is encoded from the flip words where they
    live instead of gathered to the host every frame. Read as an array (``numpy.asarray``), it is the host copy
    (``SplitRun.flips()``) -- as long as no later sweep has replaced the flip words."""

    def __init__(self, run: SplitRun):
        self._run = run

    @property
    def current(self) -> bool:
        return self._run.device_flips() is self

    @property
    def shape(self) -> tuple[int, ...]:
        engine = self._run.engine
        return (engine.total,) + (engine.L,) * (engine.dim - 1)

    dtype = np.dtype(bool)
    ndim = property(lambda self: len(self.shape))

    def __array__(self, dtype=None, copy=None):
        if not self.current:
            raise RuntimeError("these flips have been replaced by later sweeps")
        flips = self._run.flips()
        return flips if dtype is None else flips.astype(dtype)

    def sum(self, *args, **kwargs):
        return np.asarray(self).sum(*args, **kwargs)
