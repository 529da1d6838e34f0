"""What the application sets up in Qt before any window exists: work-arounds for defects of particular binding
versions, one share group for the GL contexts, and how the window presents its frames."""
from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_applied = False
_SINGLETONS = (None, True, False)
_EXTRA_REFERENCES = 1 << 40


def protect_singletons() -> bool:
    """Give None, True and False an effectively infinite reference count on CPython < 3.12.

    PySide6 6.12 drops a reference to None on every call of a void C++ method (QLabel.setText,
    QSlider.setValue, ...) and one to True on every signal emission (measured: 100 calls, refcount -100;
    PySide6 6.11.3 drops none there but was seen aborting with 'deallocating True or False' at exit).
    From CPython 3.12 these objects are immortal and nothing happens; on 3.11 their counts reach zero
    after some tens of thousands of calls and the interpreter aborts ("deallocating None"), which a
    running window does within minutes. 2**40 extra references make them as immortal as in 3.12.
    Returns True when applied (once per process)."""
    global _applied
    if _applied or sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return _applied
    for singleton in _SINGLETONS:
        ctypes.c_ssize_t.from_address(id(singleton)).value += _EXTRA_REFERENCES
    _applied = True
    log.info("Python %d.%d: None, True and False made immortal (PySide6 drops references to them)",
             *sys.version_info[:2])
    return True


def share_gl_contexts() -> bool:
    """Put every OpenGL context the application makes into one share group (Qt.AA_ShareOpenGLContexts).

    A QOpenGLWidget (each VisPy canvas) gets a new GL context whenever it moves to another top-level window:
    a dock holding a canvas floated, docked again, or moved by View > Reset layout. Without a share group
    the new context knows none of the textures, buffers and shader programs VisPy made in the old one, and
    the canvas draws errors (Mesa) or crashes the process (NVIDIA). In one share group those objects live on;
    what a context never shares (framebuffer objects) is the holder's to make again
    (render/cached_canvas.py). Qt reads the attribute when the QApplication is made: call this before.
    Returns whether the attribute is set (False when a QApplication already exists without it)."""
    from PySide6 import QtCore, QtWidgets
    attribute = QtCore.Qt.ApplicationAttribute.AA_ShareOpenGLContexts
    if QtWidgets.QApplication.instance() is None:
        QtCore.QCoreApplication.setAttribute(attribute, True)
    return QtCore.QCoreApplication.testAttribute(attribute)


def compose_without_vsync() -> None:
    """Let Qt compose and present the window without waiting for the display's vertical refresh (swap interval 0
    in the default surface format, which the top-level window's composition of its GL widgets uses; VisPy's
    own canvases already ask for none). Call before the first window is made; ``prepare_gl_before_app`` does so
    for a window whose models run on a CUDA device (``presents_without_vsync``)."""
    from PySide6 import QtGui
    surface = QtGui.QSurfaceFormat.defaultFormat()
    if surface.swapInterval() != 0:
        surface.setSwapInterval(0)
        QtGui.QSurfaceFormat.setDefaultFormat(surface)


def presents_without_vsync(gpu: bool) -> bool:
    """Whether the window presents without vsync: where its models run on a CUDA device. There the frame loop runs
    back to back and the GUI thread's time bounds the sweeps; a presentation blocked until the next refresh took
    it: on one start of the H100 machine (NVIDIA's GLX under Xvfb) the paint events took 11.4-12.6 ms a frame with
    vsync and 8.0-9.1 without, and 2D 4096^2 ran at 62-70% of the headless rate against 79-83% (on another start,
    where the default did not block, the two were alike). On the CPU the frame loop runs on its timer and the
    models and analyses share the cores with the GUI thread: there a presentation that waits leaves the cores to
    them, and without it the Spectrum dock's longest gap with NumPy models on 2 cores of that machine (NVIDIA GL)
    was 45-119 ms over four runs against 34-40 ms (docs/design/window-gpu.md)."""
    return bool(gpu)


def prepare_gl_before_app(gpu: bool = False) -> bool:
    """What the application sets before its QApplication and windows are made: one share group for every GL
    context (``share_gl_contexts``; its result is returned) and, for a window whose models run on a CUDA device
    (``gpu``), presentation without vsync (``compose_without_vsync``); on the CPU with a software renderer, VisPy
    canvases painted as images (app/raster_canvas.py)."""
    shared = share_gl_contexts()
    if presents_without_vsync(gpu):
        compose_without_vsync()
    from latticelab.app.raster_canvas import install_canvas_presentation
    install_canvas_presentation(gpu)
    return shared
