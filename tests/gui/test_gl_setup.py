"""What the application sets up for OpenGL before its windows exist (app/qt_compat.py prepare_gl_before_app), as
the real window sees it."""
from __future__ import annotations

import os

from PySide6 import QtCore

from latticelab.app.qt_compat import presents_without_vsync
from latticelab.app.raster_canvas import presents_in_raster


def test_window_composes_in_one_share_group_and_without_vsync_only_on_a_device(make_window):
    window = make_window(L=16)
    gpu = window.model.backend_name == "cuda"
    assert gpu == (os.environ.get("LATTICELAB_GUI_BACKEND") == "cuda")      # as tests/conftest.py prepared it
    assert presents_without_vsync(True) and not presents_without_vsync(False)
    assert QtCore.QCoreApplication.testAttribute(QtCore.Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
    if presents_in_raster(window.lattice_canvas):
        return     # no GL widget: Qt flushes the window's raster backing store (tests/gui/test_raster_canvas.py)
    # the top-level window composes the GL canvases and presents the result: its format is the one that counts.
    # (Its requested format takes VisPy's canvases' 0 either way; the format it was given is 1, Qt's default, unless
    # the default surface format says 0.)
    assert window.windowHandle().format().swapInterval() == (0 if gpu else 1)
