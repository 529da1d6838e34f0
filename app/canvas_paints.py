"""A VisPy canvas on a Qt OpenGL widget that draws only when its picture changed.

Qt sends a GL widget a paint event whenever its part of the window is repainted -- a dock tab raised beside it,
a menu closed over it, the window's layout redone -- and Qt's QOpenGLWidget then calls paintGL, where VisPy
draws the whole scene again. For the lattice view, unchanged, that cost 9-12 ms a paint on llvmpipe (most of
it the rasterizer running the draw at the widget's flush), in the frames that showed a dock tab or a menu while
the model was paused (bench responsiveness, traced).

``draw_only_when_changed`` keeps the widget's framebuffer between paints (QOpenGLWidget's PartialUpdate; by
default Qt discards it after each composition) and lets a draw through only when the canvas was asked to
draw since the last one: ``canvas.update()`` (which VisPy calls for every change of a visual, a camera or a
transform), a resize (a new framebuffer) or a new GL context. Any other paint shows the framebuffer as it is.
``SceneCanvas.render()`` (screenshots) draws by itself and is not affected.
"""
from __future__ import annotations


def draw_only_when_changed(canvas) -> bool:
    """Gate ``canvas``'s draws as the module says; False, the canvas left as it was, where its widget is not a
    QOpenGLWidget (another VisPy backend)."""
    from PySide6.QtOpenGLWidgets import QOpenGLWidget

    native = canvas.native
    if not isinstance(native, QOpenGLWidget):
        return False
    native.setUpdateBehavior(QOpenGLWidget.UpdateBehavior.PartialUpdate)
    asked = {"draw": True}
    original_update = canvas.update

    def update(node=None) -> None:
        if not canvas._drawing:          # a visual updated inside the draw is drawn by it already
            asked["draw"] = True
        original_update(node)

    def must_draw(event=None) -> None:
        asked["draw"] = True

    def gate(event) -> None:
        if not asked["draw"]:
            event.blocked = True         # neither VisPy's draw nor the listeners after it (frame counters)
            return
        asked["draw"] = False

    canvas.update = update
    canvas.events.resize.connect(must_draw, position="first")
    canvas.events.initialize.connect(must_draw, position="first")
    canvas.events.draw.connect(gate, position="first")
    return True
