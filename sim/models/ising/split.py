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

    def rebuild(self, lattice: RewiredLattice) -> None:
        """A new graph; the spins are kept."""
        spins = self.spins()
        self.engine = self._make(self.parts, self.exchanger, lattice.dim, lattice.L, lattice)
        self.load(spins)

    def load(self, spins) -> None:
        spins = np.ascontiguousarray(spins, dtype=np.int8)
        self.engine.load(spins)
        self._spins = spins

    def set_flips(self, flips) -> None:
        self._flips = np.asarray(flips, dtype=bool)

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
            self._flips = None

    def measured_sweep(self, T: float, rng, mask: str | None = "union") -> tuple[float, int, int]:
        """One sweep whose (bond sum, spin sum, flips) the kernels reduce as they go (a frame's per-step values)."""
        seed, first = rng.next_keys(1)
        self.engine.sweeps(T, seed, first, 1, mask, measure=True)
        self._spins = None
        if mask is not None:
            self._flips = None
        return self.engine.measured_totals()

    def clear_flips(self) -> None:
        self.engine.clear_flips()
        self._flips = None

    def measure(self) -> tuple[float, int]:
        return self.engine.measure()
