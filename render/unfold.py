"""The unfolded view of a 3D lattice: its L z-layers as a grid of L x L tiles in zigzag order
(thesis figure 7.13). shaders/unfold.frag computes the same mapping per fragment."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class UnfoldLayout:
    L: int

    @property
    def columns(self) -> int:
        return max(1, math.ceil(math.sqrt(self.L)))

    @property
    def rows(self) -> int:
        return math.ceil(self.L / self.columns)

    @property
    def gap(self) -> int:
        """Empty cells between neighbouring tiles."""
        return max(1, self.L // 16)

    @property
    def pitch(self) -> int:
        return self.L + self.gap

    @property
    def extent(self) -> tuple[int, int]:
        """(width, height) of the whole grid in cells."""
        return self.columns * self.pitch - self.gap, self.rows * self.pitch - self.gap

    def tile_of_layer(self, z):
        """(row, column) of the tile showing layer z: rows fill left to right, then right to left."""
        z = np.asarray(z)
        row = z // self.columns
        offset = z % self.columns
        column = np.where(row % 2 == 0, offset, self.columns - 1 - offset)
        return row, column

    def tile_origin(self, z):
        """(x, y) cell coordinates of the top-left corner of layer z's tile."""
        row, column = self.tile_of_layer(z)
        return column * self.pitch, row * self.pitch

    def unfold_positions(self, zyx):
        """Map (N, 3) site coordinates (z, y, x) to (N, 2) unfolded cell coordinates (x, y)."""
        zyx = np.asarray(zyx)
        x0, y0 = self.tile_origin(zyx[:, 0])
        return np.stack([x0 + zyx[:, 2], y0 + zyx[:, 1]], axis=1)
