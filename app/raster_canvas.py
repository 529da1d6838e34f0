"""VisPy canvases shown through Qt's raster paint system where OpenGL is drawn in software.

A QOpenGLWidget (VisPy's Qt canvas) makes Qt compose its whole top-level window with OpenGL at every paint of
any GL widget in it: the window's other widgets as one full-window texture, each GL widget's framebuffer as
another. With a GPU that costs nothing. With a software renderer (Mesa's llvmpipe, on a machine without GPU or
under Xvfb) it is rasterised pixel by pixel: 11-17 ms a paint for a window of 1400x860 with the machine idle,
30-37 ms beside a running model and an analysis worker on two cores -- whatever changed, even a small plot
(docs/design/responsiveness.md). That composition was most of the event-loop gaps over 50 ms the CPU window still had.

``RasterCanvasBackend`` is a VisPy canvas backend on a plain QWidget: VisPy draws into a framebuffer object of
an offscreen GL context of its own (in the application's share group, so textures and programs are shared as
before), the picture is read back (a memory copy on a software renderer) and painted with QPainter. The window
then has no GL widget and Qt's raster backing store flushes only the changed rectangles. A paint of an
unchanged canvas (a menu closed over it, a dock raised beside it) shows the picture it kept, without drawing.

``install_canvas_presentation`` makes VisPy's PySide6 backend build canvases this way when the window's models
run on the CPU and OpenGL turns out to be a software renderer; on a GPU the canvases stay QOpenGLWidgets
(CUDA-OpenGL interop writes into their textures, and reading pictures back from a GPU would stall it).
``LATTICELAB_CANVAS_PRESENTATION`` = ``raster`` or ``gl`` forces one (for comparisons and tests).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtOpenGL import QOpenGLFramebufferObject

log = logging.getLogger(__name__)

PRESENTATION_ENV = "LATTICELAB_CANVAS_PRESENTATION"
PRESENTATIONS = ("auto", "raster", "gl")
GL_BGRA = 0x80E1
GL_UNSIGNED_BYTE = 0x1401
GL_PACK_ALIGNMENT = 0x0D05

_read_pixels = None


def _gl_functions():
    """glReadPixels (into a caller's buffer; VisPy's wrapper returns a new bytes object and knows no BGRA) and
    glPixelStorei from the OpenGL library VisPy loads as well."""
    global _read_pixels
    if _read_pixels is None:
        name = ctypes.util.find_library("GL") or "libGL.so.1"
        lib = ctypes.CDLL(name)
        read = lib.glReadPixels
        read.argtypes = [ctypes.c_int] * 4 + [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        read.restype = None
        store = lib.glPixelStorei
        store.argtypes = [ctypes.c_uint, ctypes.c_int]
        store.restype = None
        _read_pixels = (read, store)
    return _read_pixels


def _backend_module():
    """VisPy's PySide6 backend module (imported through VisPy, which refuses a direct import of its Qt base)."""
    from vispy.app.backends import _pyside6
    return _pyside6


def _make_backend_class():
    """The backend class, built on VisPy's Qt base (its input events, size and title handling) and QWidget."""
    qt = _backend_module()._qt     # VisPy's Qt base module, as its PySide6 backend imported it

    class RasterCanvasBackend(qt.QtBaseCanvasBackend, QtWidgets.QWidget):
        """A VisPy canvas drawn offscreen and painted as an image (module docstring)."""

        def _init_specific(self, p, kwargs):
            surface_format = qt._set_config(p.context.config)
            surface_format.setSwapInterval(0)
            p.context.shared.add_ref("qt-raster", self)
            QtWidgets.QWidget.__init__(self, p.parent, QtCore.Qt.WindowType.Widget)
            self._gl = QtGui.QOpenGLContext()
            share = QtGui.QOpenGLContext.globalShareContext()
            if share is not None:
                self._gl.setShareContext(share)
            self._gl.setFormat(surface_format)
            if not self._gl.create():
                raise RuntimeError("could not make an OpenGL context for a canvas")
            self._surface = QtGui.QOffscreenSurface()
            self._surface.setFormat(self._gl.format())
            self._surface.create()
            self._fbo = None
            self._gl_initialized = False
            self._picture = None          # the last picture drawn (a QImage over self._upright)
            self._pixels = None           # the framebuffer as read back, rows bottom-up
            self._upright = None          # the same, rows top-down
            self._draw_asked = True       # VisPy asked for a draw since the last one
            self._initialized = True
            self.setAttribute(QtCore.Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
            self.setAttribute(QtCore.Qt.WidgetAttribute.WA_NoSystemBackground, True)
            self.setFocusPolicy(QtCore.Qt.FocusPolicy.WheelFocus)

        # ---- GL context and framebuffer ---------------------------------------------------------------------
        def _physical(self) -> tuple[int, int]:
            ratio = self.devicePixelRatioF()
            return max(1, round(self.width() * ratio)), max(1, round(self.height() * ratio))

        def _make_current(self) -> bool:
            if self._gl is None or not self._gl.makeCurrent(self._surface):
                return False
            size = self._physical()
            if self._fbo is None or (self._fbo.width(), self._fbo.height()) != size:
                self._fbo = QOpenGLFramebufferObject(
                    QtCore.QSize(*size), QOpenGLFramebufferObject.Attachment.CombinedDepthStencil)
            self._fbo.bind()
            return True

        def _vispy_set_current(self):
            if self._vispy_canvas is not None:
                self._make_current()

        def _vispy_swap_buffers(self):
            pass                          # the picture is read back from the framebuffer after each draw

        def _vispy_get_fb_bind_location(self):
            return self._fbo.handle() if self._fbo is not None else 0

        def _vispy_update(self):
            if self._vispy_canvas is None:
                return
            if not self._vispy_canvas._drawing:   # a visual changed inside the draw is drawn by it already
                self._draw_asked = True
            self.update()

        def _vispy_close(self):
            if self._gl is not None and self._gl.makeCurrent(self._surface):
                self._fbo = None          # released while its context is current
                self._gl.doneCurrent()
            self.close()

        # what the application asks of a QOpenGLWidget, answered alike
        def isValid(self) -> bool:
            return self._gl is not None and self._gl.isValid()

        def makeCurrent(self) -> None:
            self._make_current()

        def doneCurrent(self) -> None:
            if self._gl is not None:
                self._gl.doneCurrent()

        def context(self):
            return self._gl

        def defaultFramebufferObject(self) -> int:
            return self._vispy_get_fb_bind_location()

        def grabFramebuffer(self) -> QtGui.QImage:
            """The canvas drawn now, as QOpenGLWidget.grabFramebuffer gives it."""
            self._draw()
            return self._picture.copy() if self._picture is not None else QtGui.QImage()

        # ---- Qt events ----------------------------------------------------------------------------------------
        def resizeEvent(self, event):
            width, height = self._physical()
            self._vispy_set_physical_size(width, height)
            self._draw_asked = True
            if self._vispy_canvas is not None:
                self._vispy_canvas.events.resize(size=(self.width(), self.height()), physical_size=(width, height))

        def paintEvent(self, event):
            if self._vispy_canvas is None:
                return
            if self._draw_asked or self._picture is None or self._picture.size() != QtCore.QSize(*self._physical()):
                self._draw()
            if self._picture is None:
                return
            painter = QtGui.QPainter(self)
            painter.drawImage(QtCore.QPointF(0, 0), self._picture)
            painter.end()

        def _draw(self) -> None:
            """Draw the scene into the framebuffer and read it back into ``self._picture``."""
            self._draw_asked = False
            if self._vispy_canvas is None or not self._make_current():
                return
            if not self._gl_initialized:      # as QOpenGLWidget's initializeGL, before the first draw
                self._gl_initialized = True
                self._vispy_canvas.events.initialize()
            self._vispy_canvas.events.draw(region=None)
            context = self._vispy_canvas.context
            context.set_color_mask(False, False, False, True)   # opaque, as the window shows it
            context.clear(color=(0, 0, 0, 1), depth=False, stencil=False)
            context.set_color_mask(True, True, True, True)
            context.flush_commands()
            self._read_back()

        def _read_back(self) -> None:
            read, store = _gl_functions()
            width, height = self._fbo.width(), self._fbo.height()
            if self._pixels is None or self._pixels.shape != (height, width):
                self._pixels = np.empty((height, width), np.uint32)
                self._upright = np.empty((height, width), np.uint32)
            store(GL_PACK_ALIGNMENT, 4)
            self._fbo.bind()
            read(0, 0, width, height, GL_BGRA, GL_UNSIGNED_BYTE, self._pixels.ctypes.data)
            np.copyto(self._upright, self._pixels[::-1])      # GL's rows run bottom-up
            picture = QtGui.QImage(self._upright.data, width, height, width * 4, QtGui.QImage.Format.Format_RGB32)
            picture.setDevicePixelRatio(self.devicePixelRatioF())
            self._picture = picture

    return RasterCanvasBackend


_raster_class = None


def raster_backend_class():
    global _raster_class
    if _raster_class is None:
        _raster_class = _make_backend_class()
    return _raster_class


def software_renderer() -> bool | None:
    """Whether OpenGL here renders in software (asked of a small offscreen context); None when no context can be
    made. Needs a QGuiApplication."""
    from latticelab.render.gl_renderer import current_is_software
    context = QtGui.QOpenGLContext()
    surface = QtGui.QOffscreenSurface()
    surface.create()
    if not context.create() or not context.makeCurrent(surface):
        return None
    try:
        return current_is_software()
    finally:
        context.doneCurrent()


def requested_presentation() -> str:
    """``LATTICELAB_CANVAS_PRESENTATION`` (auto when unset); a ValueError naming it for anything else."""
    value = os.environ.get(PRESENTATION_ENV, "auto").strip().lower() or "auto"
    if value not in PRESENTATIONS:
        raise ValueError(f"{PRESENTATION_ENV} must be one of {', '.join(PRESENTATIONS)}; got {value!r}")
    return value


def install_canvas_presentation(gpu: bool) -> None:
    """Have VisPy's PySide6 backend choose, at the first canvas made, between its QOpenGLWidget canvas and
    ``RasterCanvasBackend`` (module docstring): raster where the models run on the CPU and the renderer is
    software, or where ``LATTICELAB_CANVAS_PRESENTATION=raster``; another value of it is named in a warning and
    the choice is made as for ``auto``. Call before any canvas is made."""
    try:
        requested = requested_presentation()
    except ValueError as exc:
        log.warning("%s; choosing as for auto", exc)
        requested = "auto"
    module = _backend_module()
    desktop = getattr(module, "_latticelab_desktop_backend", module.CanvasBackend)
    module._latticelab_desktop_backend = desktop
    if requested == "gl" or (requested == "auto" and gpu):
        module.CanvasBackend = desktop
        return
    chosen = {}

    def make_canvas_backend(vispy_canvas, **kwargs):
        if "class" not in chosen:
            raster = requested == "raster" or bool(software_renderer())
            if raster:
                try:
                    _gl_functions()
                except (OSError, AttributeError) as exc:   # no desktop OpenGL library to read pictures back with
                    log.warning("canvases stay OpenGL widgets: %s", exc)
                    raster = False
            chosen["class"] = raster_backend_class() if raster else desktop
            log.info("canvases presented %s", "as raster images" if raster else "as OpenGL widgets")
        return chosen["class"](vispy_canvas, **kwargs)

    module.CanvasBackend = make_canvas_backend


def presents_in_raster(canvas) -> bool:
    """Whether ``canvas`` (a VisPy canvas) is shown through ``RasterCanvasBackend``."""
    return _raster_class is not None and isinstance(canvas.native, _raster_class)
