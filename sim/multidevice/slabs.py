"""Slabs: the slowest axis of a lattice (rows in 2D, layers in 3D) cut into one contiguous piece per device.

Each part owns the slow indices ``start .. stop - 1`` and keeps ``halo`` more on each side, copies of its
neighbours' border (periodic: the first part's lower halo is the last part's top). Locally the part's arrays
run over ``extent = size + 2 halo`` slow indices, local index j being global index ``j + offset`` (mod L),
``offset = start - halo``. The owned indices split into the two borders (the ``halo`` indices at each end,
which the neighbours read) and the interior, so that the interior's update can run while the borders travel
(the thesis's inner core and border, 003 section 8.4, Algorithm 63).
"""
from __future__ import annotations

from dataclasses import dataclass

from latticelab.sim.params import ParameterError


@dataclass(frozen=True)
class Slab:
    index: int
    start: int     # first owned global slow index
    stop: int      # one past the last
    halo: int

    @property
    def size(self) -> int:
        return self.stop - self.start

    @property
    def extent(self) -> int:
        """Slow indices held locally: the owned ones and both halos."""
        return self.size + 2 * self.halo

    @property
    def offset(self) -> int:
        """Global slow index of local index 0 (negative for the first slab: its lower halo wraps)."""
        return self.start - self.halo

    def owns(self, global_index) -> bool:
        return self.start <= global_index < self.stop

    # local slow-index ranges (first, end)
    @property
    def owned(self) -> tuple[int, int]:
        return self.halo, self.halo + self.size

    @property
    def lower_border(self) -> tuple[int, int]:
        return self.halo, 2 * self.halo

    @property
    def upper_border(self) -> tuple[int, int]:
        return self.size, self.size + self.halo

    @property
    def interior(self) -> tuple[int, int]:
        return 2 * self.halo, self.size

    @property
    def lower_halo(self) -> tuple[int, int]:
        return 0, self.halo

    @property
    def upper_halo(self) -> tuple[int, int]:
        return self.size + self.halo, self.size + 2 * self.halo


@dataclass(frozen=True)
class SlabLayout:
    extent: int                  # global length of the slow axis
    slabs: tuple[Slab, ...]

    @property
    def parts(self) -> int:
        return len(self.slabs)

    def owner(self, global_index):
        """The index of the slab owning each global slow index (NumPy arrays or ints)."""
        import numpy as np
        starts = np.array([s.start for s in self.slabs])
        return np.searchsorted(starts, np.asarray(global_index) % self.extent, side="right") - 1


def split_slow_axis(extent: int, parts: int, halo: int, what: str = "L") -> SlabLayout:
    """Cut ``extent`` slow indices into ``parts`` slabs as equal as possible (the first ones one larger), each
    at least 2 halo long (two borders that do not overlap). Raises ParameterError naming ``what`` otherwise."""
    if parts < 1:
        raise ParameterError("devices", f"need at least one device; got {parts}")
    smallest = extent // parts
    if smallest < 2 * halo:
        raise ParameterError(what, f"{extent} cannot be split over {parts} devices with halos of {halo}: each "
                                   f"slab needs at least {2 * halo}; use fewer devices or a larger {what}")
    slabs, start = [], 0
    for i in range(parts):
        size = smallest + (1 if i < extent % parts else 0)
        slabs.append(Slab(i, start, start + size, halo))
        start += size
    return SlabLayout(extent, tuple(slabs))
