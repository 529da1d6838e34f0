"""Keep VisPy's text from uploading a texture at every draw.

Every VisPy ``TextVisual`` sets its font's 16 x 1024 RGBA spatial-filter kernel as a shader sampler on each
draw (``program['u_kernel'] = font._kernel``). The kernel is a NumPy array, and a program given an array for a
sampler that already holds a texture re-uploads it (vispy/gloo/program.py). A plot dock with a dozen labels and
axes thus sent about 1 MiB to the GPU per redraw (17 uploads of 64 KiB, measured), and the lattice view's colour
key one per frame. Giving each font its kernel as a ``gloo.Texture2D`` made once -- the same texture VisPy would
create from the array, with its default sampling -- sends it once per font.

``install()`` wraps ``TextureFont.__init__``; it is idempotent and runs when ``latticelab.render`` is imported.
"""
from __future__ import annotations

import numpy as np
import vispy.visuals.text.text as vispy_text
from vispy import gloo

_MARK = "_latticelab_kernel_texture"


def install() -> None:
    font_class = vispy_text.TextureFont
    if getattr(font_class.__init__, _MARK, False):
        return
    original = font_class.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        kernel = getattr(self, "_kernel", None)
        if isinstance(kernel, np.ndarray):
            self._kernel = gloo.Texture2D(kernel)

    setattr(__init__, _MARK, True)
    font_class.__init__ = __init__
