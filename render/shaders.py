"""Reads the GLSL sources kept in the top-level shaders/ folder."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

SHADER_DIR = Path(__file__).resolve().parent.parent / "shaders"


@lru_cache(maxsize=None)
def load_shader(name: str) -> str:
    """The text of shaders/<name>."""
    path = SHADER_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"shader {name!r} not found in {SHADER_DIR} (is the shaders/ folder installed?)")
    return path.read_text()


def fragment_with_palette(name: str) -> str:
    """A fragment shader preceded by the shared code-to-colour lookup (shaders/palette.glsl: ``cell_colour``)."""
    return load_shader("palette.glsl") + "\n" + load_shader(name)
