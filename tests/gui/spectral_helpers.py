"""Shared by the Spectrum dock's window tests: a window with the dock shown and a spectrum computed, and the
pixels of the spectrum's own view box."""
from __future__ import annotations

import numpy as np

from latticelab.app.main_window import MainWindow
from latticelab.app.spectral_panel import SpectralPanel, install


def open_window(qtbot, **params):
    window = MainWindow("ising", dict(seed=3, **params), interactive=False, backend="numpy")
    qtbot.addWidget(window)
    window.set_running(False)
    window.resize(1500, 950)
    window.show()
    qtbot.waitExposed(window)
    panel = window.findChild(SpectralPanel) or install(window)
    panel.show()
    panel.raise_()
    window.model.step(20)
    assert panel.refresh(force=True), panel.last_error
    # its first draw tells the dock whether the renderer is a software one (and so how the 3D view stages its
    # mesh); a canvas shown as an image (app/raster_canvas.py) is first drawn in the window's next paint
    qtbot.waitUntil(lambda: panel.software_gl is not None, timeout=10000)
    return window, panel


def main_cell_pixels(panel):
    """The rendered pixels of the spectrum's own view box (left part of the spectral canvas)."""
    img = panel.canvas.render()[..., :3].astype(np.int32)
    to_canvas = panel.main_cell.transforms.get_transform("visual", "canvas")
    rect = panel.main_cell.rect
    (x0, y0), (x1, y1) = (to_canvas.map([x, y])[:2] for x, y in ((rect.left, rect.bottom), (rect.right, rect.top)))
    scale = img.shape[1] / panel.canvas.size[0]
    x0, x1 = sorted((int(x0 * scale), int(x1 * scale)))
    y0, y1 = sorted((int(y0 * scale), int(y1 * scale)))
    return img[y0 + 2:y1 - 2, x0 + 2:x1 - 2]


def settled(panel) -> bool:
    """The dock shows its final picture: the cached canvas's first picture is complete (it is drawn over several
    paints, its grids laid out first) and the 3D view's mesh is drawn for the view's size and camera as they are
    now (a first mesh drawn before the layout settled is drawn again: render/isosurface.py StagedPicture)."""
    canvas, view = panel.canvas, panel._spectrum_view
    first_picture = canvas.full_draws > 0 or canvas.caching is False
    return first_picture and not canvas.stale and not getattr(view, "staging", False)
