"""Which OpenGL renderer a canvas draws with: a software one (Mesa's llvmpipe on a machine without GPU, where a
draw of many visuals takes tens of milliseconds and the views take measures to stay within a frame) or a GPU."""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

SOFTWARE_RENDERERS = ("llvmpipe", "softpipe", "swrast", "software", "swiftshader", "gdi generic", "basic render")


def is_software(renderer: str) -> bool:
    """Whether a GL_RENDERER string names a software renderer."""
    renderer = renderer.lower()
    return any(name in renderer for name in SOFTWARE_RENDERERS)


def current_is_software() -> bool | None:
    """Whether the current GL context renders in software; None when it cannot be asked (no current context)."""
    try:
        from vispy.gloo import gl
        return is_software(str(gl.glGetParameter(gl.GL_RENDERER)))
    except Exception as exc:
        log.debug("GL renderer unknown: %s", exc)
        return None
