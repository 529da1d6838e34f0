"""What the application sets up for OpenGL before its windows exist (app/qt_compat.py prepare_gl_before_app), as
the real window sees it."""
from __future__ import annotations

from PySide6 import QtCore, QtGui


def test_window_composes_in_one_share_group_without_waiting_for_vsync(make_window):
    window = make_window(L=16)
    assert QtCore.QCoreApplication.testAttribute(QtCore.Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
    assert QtGui.QSurfaceFormat.defaultFormat().swapInterval() == 0
    # the top-level window composes the GL canvases and presents the result: its format is the one that counts
    assert window.windowHandle().requestedFormat().swapInterval() == 0
