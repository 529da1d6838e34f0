"""Colours of the views themselves, not of any model: the background behind the cells and the default colour
of links. What a cell looks like is the model's business (sim/picture.py: a Picture's palette)."""
from __future__ import annotations

import numpy as np

BACKGROUND = (0.16, 0.16, 0.19, 1.0)
LINK = (1.0, 0.15, 0.6, 0.85)   # links drawn over the cells (the thesis's magenta, as its rewired sites)


def rgba_bytes(colour) -> np.ndarray:
    """A float RGBA colour as the uint8 values a framebuffer holds."""
    return np.round(np.asarray(colour) * 255).astype(np.uint8)
