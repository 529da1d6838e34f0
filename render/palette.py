"""Colours of the lattice views, after the thesis (figure 7.15 and Algorithm 55).

Spin down is green and spin up black; a cell flipped in the last step is drawn darker green (it is now
down) or grey (it is now up), so the highlight says which way the cluster went. The shaders receive these
values as uniforms, and ``colourise`` applies the same table on the array side for cell-exact exports.
"""
from __future__ import annotations

import numpy as np

from latticelab.render.upload import FLIPPED, REWIRED, SPIN_UP, to_host

SPIN_DOWN = (0.0, 1.0, 0.0, 1.0)
SPIN_UP_COLOUR = (0.0, 0.0, 0.0, 1.0)
FLIPPED_TO_DOWN = (0.0, 0.6, 0.0, 1.0)
FLIPPED_TO_UP = (0.35, 0.35, 0.35, 1.0)
REWIRED_SITE = (1.0, 0.15, 0.6, 1.0)
LINK = (1.0, 0.15, 0.6, 0.85)
BACKGROUND = (0.16, 0.16, 0.19, 1.0)


def shader_uniforms(show_flipped: bool = True, show_rewired: bool = False) -> dict:
    """Uniform values for shaders/state_colour.glsl."""
    return {
        "u_colour_down": SPIN_DOWN, "u_colour_up": SPIN_UP_COLOUR,
        "u_colour_down_flipped": FLIPPED_TO_DOWN, "u_colour_up_flipped": FLIPPED_TO_UP,
        "u_colour_rewired": REWIRED_SITE,
        "u_show_flipped": float(show_flipped), "u_show_rewired": float(show_rewired),
    }


def colour_table(show_flipped: bool = True, show_rewired: bool = False) -> np.ndarray:
    """(256, 4) uint8 RGBA for every state code, the same mapping as the fragment shader."""
    codes = np.arange(256)
    up = (codes & SPIN_UP) > 0
    flipped = ((codes & FLIPPED) > 0) & show_flipped
    rewired = ((codes & REWIRED) > 0) & show_rewired
    table = np.empty((256, 4))
    table[:] = SPIN_DOWN
    table[up] = SPIN_UP_COLOUR
    table[flipped & ~up] = FLIPPED_TO_DOWN
    table[flipped & up] = FLIPPED_TO_UP
    table[rewired] = REWIRED_SITE
    return np.round(table * 255).astype(np.uint8)


def colourise(state, show_flipped: bool = True, show_rewired: bool = False) -> np.ndarray:
    """RGBA uint8 image (host) of a uint8 state array: one pixel per cell."""
    return colour_table(show_flipped, show_rewired)[to_host(state)]


def rgba_bytes(colour) -> np.ndarray:
    """A float RGBA colour as the uint8 values a framebuffer holds."""
    return np.round(np.asarray(colour) * 255).astype(np.uint8)
