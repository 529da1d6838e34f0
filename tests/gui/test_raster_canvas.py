"""VisPy canvases shown as images where OpenGL is drawn in software (app/raster_canvas.py): the picture on screen
is the scene the canvas draws, upright and in its colours; a paint of an unchanged canvas draws nothing; input
reaches VisPy; and the window then holds no GL widget, so Qt never composes it with OpenGL."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from PySide6 import QtCore, QtGui
from PySide6.QtOpenGLWidgets import QOpenGLWidget
from vispy import scene

from latticelab.app import raster_canvas
from latticelab.app.raster_canvas import presents_in_raster, requested_presentation


def _raster_or_skip(canvas) -> None:
    if not presents_in_raster(canvas):
        pytest.skip("canvases are OpenGL widgets here (a hardware renderer or LATTICELAB_CANVAS_PRESENTATION=gl)")


def _as_array(image: QtGui.QImage) -> np.ndarray:
    image = image.convertToFormat(QtGui.QImage.Format.Format_RGB888)
    data = np.frombuffer(image.constBits(), np.uint8, image.sizeInBytes())
    return data.reshape(image.height(), image.bytesPerLine())[:, :image.width() * 3].reshape(
        image.height(), image.width(), 3).astype(int)


@pytest.fixture
def quadrant_canvas(qtbot):
    """A canvas showing four coloured quadrants (red top left, green top right, blue bottom left, white bottom
    right), pixel for pixel."""
    canvas = scene.SceneCanvas(keys=None, app="pyside6", size=(160, 120), show=False, bgcolor="black")
    qtbot.addWidget(canvas.native)
    view = canvas.central_widget.add_view()
    picture = np.zeros((120, 160, 3), np.float32)
    picture[:60, :80] = (1, 0, 0)
    picture[:60, 80:] = (0, 1, 0)
    picture[60:, :80] = (0, 0, 1)
    picture[60:, 80:] = (1, 1, 1)
    image = scene.visuals.Image(picture, parent=view.scene, interpolation="nearest")
    view.camera = scene.PanZoomCamera(rect=(0, 0, 160, 120), flip=(False, True))
    canvas.native.resize(160, 120)
    canvas.native.show()
    qtbot.waitExposed(canvas.native)
    yield canvas, image
    canvas.close()


def test_the_picture_on_screen_is_the_scene_upright(quadrant_canvas, qtbot):
    canvas, _ = quadrant_canvas
    _raster_or_skip(canvas)
    reference = canvas.render(alpha=False)[..., :3].astype(int)       # the scene drawn directly, offscreen
    assert (reference[10, 10] == (255, 0, 0)).all() and (reference[110, 150] == (255, 255, 255)).all()
    shown = _as_array(canvas.native.grab().toImage())                   # what Qt paints of the widget
    assert shown.shape == reference.shape
    assert np.abs(shown - reference).max() <= 2
    grabbed = _as_array(canvas.native.grabFramebuffer())
    assert np.abs(grabbed - reference).max() <= 2


def test_an_unchanged_canvas_is_painted_without_a_draw(quadrant_canvas, qtbot):
    canvas, image = quadrant_canvas
    _raster_or_skip(canvas)
    draws = []
    canvas.events.draw.connect(lambda event: draws.append(1))
    canvas.native.repaint()                   # nothing asked since the last draw: the kept picture
    assert draws == []
    shown = _as_array(canvas.native.grab().toImage())
    assert (shown[10, 10] == (255, 0, 0)).all()
    new = np.zeros((120, 160, 3), np.float32)
    new[...] = (0, 1, 1)
    image.set_data(new)                       # VisPy asks for a draw
    canvas.native.repaint()
    assert draws == [1]
    assert (_as_array(canvas.native.grab().toImage())[60, 80] == (0, 255, 255)).all()


def test_mouse_input_reaches_vispy(quadrant_canvas, qtbot):
    canvas, _ = quadrant_canvas
    _raster_or_skip(canvas)
    moves = []
    canvas.events.mouse_move.connect(lambda event: moves.append(tuple(event.pos)))
    event = QtGui.QMouseEvent(QtCore.QEvent.Type.MouseMove, QtCore.QPointF(40, 30), QtCore.QPointF(40, 30),
                              QtCore.Qt.MouseButton.NoButton, QtCore.Qt.MouseButton.NoButton,
                              QtCore.Qt.KeyboardModifier.NoModifier)
    QtCore.QCoreApplication.sendEvent(canvas.native, event)
    assert moves and moves[-1] == (40, 30)


def test_the_window_has_no_gl_widget_and_shows_the_lattice(make_window, qtbot):
    window = make_window(L=16)
    _raster_or_skip(window.lattice_canvas)
    assert window.findChildren(QOpenGLWidget) == []
    qtbot.waitUntil(lambda: window.lattice_canvas.native.grab().toImage().width() > 0, timeout=5000)
    reference = window.lattice_canvas.render(alpha=False)[..., :3].astype(int)
    shown = _as_array(window.lattice_canvas.native.grab().toImage())
    assert shown.shape == reference.shape
    assert np.mean(np.abs(shown - reference).max(axis=2) > 2) < 0.001


def test_the_presentation_setting_is_checked(qapp, monkeypatch, caplog):
    monkeypatch.setenv(raster_canvas.PRESENTATION_ENV, "Raster")
    assert requested_presentation() == "raster"
    monkeypatch.setenv(raster_canvas.PRESENTATION_ENV, "fast")
    with pytest.raises(ValueError, match=f"{raster_canvas.PRESENTATION_ENV} must be one of auto, raster, gl"):
        requested_presentation()
    # the application goes on, choosing as for auto, and says why
    gpu = os.environ.get("LATTICELAB_GUI_BACKEND") == "cuda"
    with caplog.at_level(logging.WARNING, logger=raster_canvas.__name__):
        raster_canvas.install_canvas_presentation(gpu)     # as tests/conftest.py did, the value aside
    assert any(f"{raster_canvas.PRESENTATION_ENV} must be one of" in r.getMessage() and "as for auto" in r.getMessage()
               for r in caplog.records)
    canvas = scene.SceneCanvas(keys=None, app="pyside6", size=(40, 30), show=False)
    try:
        assert presents_in_raster(canvas) == (not gpu and bool(raster_canvas.software_renderer()))
    finally:
        canvas.close()
