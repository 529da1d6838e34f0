"""A dock holding a canvas floated and docked again: its QOpenGLWidget moves to another top-level window, which
gives it a new GL context unless the application's contexts share their objects (app/qt_compat.py:
share_gl_contexts). Without that, the live plots drew GL errors on Mesa (and crashed on NVIDIA): their shader
programs, buffers and glyph textures did not exist in the new context.

Pixels on screen are read with ``grabFramebuffer()`` (a paint of the widget, through the plot cache where it is
on); the reference is ``canvas.render()``, the whole scene drawn directly in the same context.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtCore  # noqa: E402

from latticelab.render.plots import COLOURS, TEXT  # noqa: E402

from gui_helpers import on_screen as shown  # noqa: E402


def pixels_of(image: np.ndarray, colour) -> int:
    rgb = np.round(np.asarray(colour[:3]) * 255).astype(int)
    return int((np.abs(image - rgb).max(axis=2) <= 12).sum())


class GLErrors(logging.Handler):
    """VisPy's reports of visuals it failed to draw (it logs them and goes on)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_plots_floated_and_docked_again_draw_their_lines_and_labels(make_window, qtbot):
    window = make_window(L=16, T=2.2, seed=3)
    qtbot.waitUntil(lambda: window.plots is not None and window.plots.built, timeout=30000)
    done = []
    window.run_steps(30, then=lambda: done.append(True))
    qtbot.waitUntil(lambda: bool(done), timeout=30000)
    canvas = window.plot_canvas
    errors = GLErrors()
    logging.getLogger("vispy").addHandler(errors)
    try:
        for floating in (True, False):
            window.plot_dock.setFloating(floating)
            window.plot_dock.show()
            window.plot_dock.raise_()
            qtbot.waitUntil(lambda: window.plot_dock.isFloating() == floating and canvas.native.isVisible(),
                            timeout=5000)
            qtbot.wait(50)
            canvas.update()        # at a new size the picture is drawn anew over a few paints (render/cached_canvas.py)
            qtbot.waitUntil(lambda: not getattr(canvas, "stale", False), timeout=10000)
            picture = shown(canvas)
            assert pixels_of(picture, COLOURS[0]) > 20, f"floating={floating}: no line of the first plot"
            assert pixels_of(picture, TEXT) > 50, f"floating={floating}: no titles or tick labels"
            reference = canvas.render(alpha=False).astype(int)
            if reference.shape == picture.shape:
                assert float((np.abs(reference - picture).max(axis=2) > 8).mean()) < 0.01
    finally:
        logging.getLogger("vispy").removeHandler(errors)
    assert not [m for m in errors.messages if "rror" in m], errors.messages[:3]
    assert window.dockWidgetArea(window.plot_dock) != QtCore.Qt.DockWidgetArea.NoDockWidgetArea
