"""Helpers shared by the GUI tests: answering dialogs and reading cell colours off rendered images."""
from __future__ import annotations

import numpy as np


def activate(qtbot, window) -> None:
    """Make ``window`` the active window (shortcuts need one; Xvfb has no window manager to do it). Asked again at
    each look: the CI's two test processes share one X display, and a window of the other one can take the focus
    after a single request (a fresh-clone run failed so, with this window never active for 15 s)."""
    from PySide6 import QtWidgets

    def active() -> bool:
        if QtWidgets.QApplication.activeWindow() is window:
            return True
        window.raise_()
        window.activateWindow()
        return False

    qtbot.waitUntil(active, timeout=15000)


def answer_next_dialog(qtbot, button_text: str, found: list | None = None):
    """Click ``button_text`` on the next modal dialog (a QMessageBox) as soon as it appears."""
    from PySide6 import QtCore, QtWidgets

    def click():
        dialog = QtWidgets.QApplication.activeModalWidget()
        if dialog is None:
            QtCore.QTimer.singleShot(20, click)
            return
        if found is not None:
            found.append(dialog.text() if hasattr(dialog, "text") else dialog.windowTitle())
        for button in dialog.findChildren(QtWidgets.QAbstractButton):
            if button.text().replace("&", "") == button_text:
                button.click()
                return
        raise AssertionError(f"no button {button_text!r} on dialog {dialog.windowTitle()!r}")

    QtCore.QTimer.singleShot(20, click)


def cell_centres_2d(L: int, z: float | None = None) -> np.ndarray:
    """World coordinates of every cell centre, rows of (x, y[, z]) in spins[y, x] order."""
    y, x = np.mgrid[0:L, 0:L]
    points = np.column_stack([x.ravel() + 0.5, y.ravel() + 0.5])
    if z is not None:
        points = np.column_stack([points, np.full(len(points), z)])
    return points


def pixels_at(image: np.ndarray, canvas_xy: np.ndarray) -> np.ndarray:
    """RGB of the rendered image at canvas coordinates (N, 2)."""
    cols = np.floor(canvas_xy[:, 0]).astype(int)
    rows = np.floor(canvas_xy[:, 1]).astype(int)
    assert cols.min() >= 0 and rows.min() >= 0 and cols.max() < image.shape[1] and rows.max() < image.shape[0], \
        "cells outside the rendered canvas"
    return image[rows, cols, :3].astype(int)


def expected_rgb(codes, show_flipped=True, show_rewired=False, shade=1.0) -> np.ndarray:
    from latticelab.sim.models.ising.picture import palette
    table = palette(show_flipped, show_rewired)[:, :3].astype(float)
    return np.round(table[np.asarray(codes).ravel()] * 255 * shade).astype(int)


def type_into(box, text) -> None:
    """Type ``text`` into a line edit and press Enter (what a user does)."""
    box.setText(str(text))
    box.editingFinished.emit()


def choose(combo, text: str) -> None:
    """Pick ``text`` in a combo box as a user would (an editable one: type it and press Enter)."""
    if combo.isEditable():
        combo.setCurrentText(text)
        combo.lineEdit().editingFinished.emit()
        return
    index = combo.findText(text)
    assert index >= 0, f"{text!r} is not offered by {combo.objectName()}"
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def on_screen(canvas) -> np.ndarray:
    """RGB (ints) of ``canvas`` as its widget paints it: one paint through whatever the canvas draws on screen
    (a cached canvas's picture), read back with ``grabFramebuffer()``."""
    from PySide6 import QtGui
    image = canvas.native.grabFramebuffer().convertToFormat(QtGui.QImage.Format.Format_RGBA8888)
    width, height = image.width(), image.height()
    raw = np.frombuffer(image.constBits(), np.uint8).reshape(height, image.bytesPerLine())
    return raw[:, :width * 4].reshape(height, width, 4)[..., :3].astype(int).copy()

