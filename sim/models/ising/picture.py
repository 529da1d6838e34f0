"""How the Ising model is drawn: one state code per site and the thesis's colours (figure 7.15, Algorithm 55).

State code (one uint8 per site):
    bit 0  spin up (+1)
    bit 1  flipped in the last steps (highlight)
    bit 2  site touched by rewiring (marks)

Spin down is green and spin up black (the thesis's colours); a cell flipped since the last frame is drawn
blue (it is now down) or vermilion (it is now up), so the highlight says which way a cluster went; rewired
sites are magenta. The thesis's highlight colours (darker green, grey) could not be told from the spins at full
view; these two have a WCAG contrast ratio of at least 3 against both spin colours (tests/test_picture_legend.py)
and differ in hue from each other and from the magenta marks. Only the palette changed: the codes are the same.
``legend`` names the codes for the key drawn beside the view (render/legend.py).
``encode_codes`` is the NumPy/CuPy twin of ``cell_code`` in kernels/picture_codes.cuh, which the GPU path
composes with the texture writer so that encoding and upload are one pass.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from latticelab.sim.picture import CellEncoder, Picture

SPIN_UP = 1
FLIPPED = 2
REWIRED = 4

SPIN_DOWN_COLOUR = (0.0, 1.0, 0.0, 1.0)
SPIN_UP_COLOUR = (0.0, 0.0, 0.0, 1.0)
FLIPPED_TO_DOWN = (0.0, 0.45, 1.0, 1.0)     # azure
FLIPPED_TO_UP = (0.85, 0.25, 0.0, 1.0)      # vermilion
REWIRED_SITE = (1.0, 0.15, 0.6, 1.0)
LINK = (1.0, 0.15, 0.6, 0.85)


def encode_codes(xp, spins, flipped=None, rewired=None, _f0=0.0, _f1=0.0):
    """uint8 state codes for a spin array of any shape, computed by ``xp`` where the spins live."""
    if xp is not np and hasattr(xp, "ElementwiseKernel"):  # CuPy: one fused kernel instead of five array passes
        return _cupy_kernel(xp)(spins, False if flipped is None else flipped, False if rewired is None else rewired)
    codes = (spins > 0).astype(xp.uint8)
    if flipped is not None:
        codes |= flipped.astype(xp.uint8) << 1
    if rewired is not None:
        codes |= rewired.astype(xp.uint8) << 2
    return codes


_kernels: dict = {}


def _cupy_kernel(cupy):
    if "codes" not in _kernels:
        _kernels["codes"] = cupy.ElementwiseKernel(
            "S spin, bool flipped, bool rewired", "uint8 code",
            "code = (spin > 0 ? 1 : 0) | (flipped ? 2 : 0) | (rewired ? 4 : 0)", "latticelab_ising_codes")
    return _kernels["codes"]


ENCODER = CellEncoder("ising-state", encode_codes, Path(__file__).resolve().parent / "kernels" / "picture_codes.cuh")


@functools.lru_cache(maxsize=None)
def palette(show_flipped: bool = True, show_rewired: bool = False) -> np.ndarray:
    """(256, 4) float32 RGBA for every state code (read-only, made once per combination: a picture is made every
    frame, and building the table every time would be a measurable share of a fast frame)."""
    codes = np.arange(256)
    up = (codes & SPIN_UP) > 0
    flipped = ((codes & FLIPPED) > 0) & show_flipped
    rewired = ((codes & REWIRED) > 0) & show_rewired
    table = np.empty((256, 4))
    table[:] = SPIN_DOWN_COLOUR
    table[up] = SPIN_UP_COLOUR
    table[flipped & ~up] = FLIPPED_TO_DOWN
    table[flipped & up] = FLIPPED_TO_UP
    table[rewired] = REWIRED_SITE
    table = table.astype(np.float32)
    table.flags.writeable = False
    return table


def legend(show_flipped: bool, show_rewired: bool) -> tuple[tuple[str, int], ...]:
    """(label, code) of each kind of cell the picture can show (sim/picture.py: Picture.legend)."""
    entries = [("spin down", 0), ("spin up", SPIN_UP)]
    if show_flipped:
        entries += [("flipped to down", FLIPPED), ("flipped to up", FLIPPED | SPIN_UP)]
    if show_rewired:
        entries += [("rewired site", REWIRED)]
    return tuple(entries)


def ising_picture(xp, spins, highlight=None, rewired=None, links=None) -> Picture:
    """The picture of spins with an optional highlight mask and rewired-site mask (+ links to draw)."""
    show_flipped, show_rewired = highlight is not None, rewired is not None
    return Picture(xp, tuple(spins.shape), ENCODER, (spins, highlight, rewired), palette(show_flipped, show_rewired),
                   links=links, legend=legend(show_flipped, show_rewired))


def split_ising_picture(slabs, show_flipped: bool, show_rewired: bool, links=None) -> Picture:
    """The picture of a run split over devices: its ``slabs`` (sim/multidevice/picture.py: SlabbedPicture,
    each part's an ``ising_picture`` of its own slab) with the palette and key of the whole lattice."""
    return Picture(np, slabs.shape, ENCODER, (), palette(show_flipped, show_rewired), links=links,
                   legend=legend(show_flipped, show_rewired), slabs=slabs)
