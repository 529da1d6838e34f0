"""Work VisPy repeats that latticelab's windows feel, kept instead: each patch replaces one VisPy function with
one that gives the same result, computed once per input (docs/design/responsiveness.md says where it mattered).

The patches, by name (``PATCHES``):

- ``font-kernel-texture``: a font's 16 x 1024 filter kernel becomes a texture once, instead of an array that
  every draw of every text re-uploads as a sampler.
- ``program-parse``: ``Program._parse_variables_from_code`` kept per shader source, and a first parse that cuts
  comments line by line (VisPy's comment pattern backtracks over every line).
- ``glyph-loading`` and ``glyph-distance-field``: a glyph's FreeType bitmap and its signed distance field kept
  per (face, size, character); each font still computes its kerning and fills its own atlas.
- ``axis-label-rotation``: an axis sets its label's rotation only when the angle changed (a text given a
  rotation re-uploads its buffers at its next draw).
- ``grid-layout`` and ``grid-repr``: a grid places its cells again only when its rectangle or its solver
  changed; a grid's repr (formatted at every draw for VisPy's disabled profiler) is its address and shape.
- ``shader-conversion``, ``shader-variables``, ``shader-signature``, ``shader-clean-code``: GLIR's desktop
  conversion of a shader, the shader parser's variable scan and function signature, and a shader function's
  indentation stripping, kept per text.

They are applied only on the VisPy versions they were checked on (``VERIFIED_VISPY``, major.minor), because
several replace private functions; on any other version VisPy is left alone and one line is logged. Setting the
environment variable ``LATTICELAB_VISPY_SPEEDUPS=0`` (or off, no, false) leaves VisPy alone on every version.
Each replacement keeps VisPy's function as its ``original``; ``uninstall()`` puts them all back.
``install()`` is idempotent and runs when ``latticelab.render`` is imported. tests/test_vispy_speedups.py
compares every patched function with VisPy's own on a case.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
from typing import Callable

import numpy as np
import vispy.gloo.glir as vispy_glir
import vispy.gloo.program as gloo_program
import vispy.scene.widgets.grid as vispy_grid
import vispy.visuals.axis as vispy_axis
import vispy.visuals.shaders.function as vispy_function
import vispy.visuals.shaders.parsing as vispy_parsing
import vispy.visuals.text.text as vispy_text
from vispy import gloo

_MARK = "_latticelab_cached"
_PARSED: dict[str, dict] = {}
log = logging.getLogger(__name__)

ENVIRONMENT_SWITCH = "LATTICELAB_VISPY_SPEEDUPS"     # 0, off, no or false: leave VisPy alone
VERIFIED_VISPY = ("0.15", "0.16", "0.17")             # major.minor versions tests/test_vispy_speedups.py passed on


@dataclasses.dataclass(frozen=True)
class Patch:
    """``owner.attribute`` replaced by ``wrap(original)``."""
    name: str
    owner: object
    attribute: str
    wrap: Callable


def _patches() -> tuple[Patch, ...]:
    patches = [
        Patch("font-kernel-texture", vispy_text.TextureFont, "__init__", _kernel_as_texture),
        Patch("program-parse", gloo_program.Program, "_parse_variables_from_code", _parse_kept_per_source),
        Patch("glyph-distance-field", vispy_text.SDFRendererCPU, "render_to_texture", _cached_distance_field),
        Patch("axis-label-rotation", vispy_axis.AxisVisual, "_prepare_draw", _rotate_label_when_turned),
        Patch("grid-layout", vispy_grid.Grid, "_update_child_widget_dim", _layout_only_when_changed),
        Patch("grid-repr", vispy_grid.Grid, "__repr__", _short_grid_repr),
        Patch("shader-conversion", vispy_glir, "convert_shader", _kept_per_text),
        Patch("shader-variables", vispy_parsing, "find_program_variables", _variables_kept_per_text),
        Patch("shader-signature", vispy_parsing, "parse_function_signature", _signature_kept_per_text),
        Patch("shader-clean-code", vispy_function.Function, "_clean_code", _cleaned_code_kept_per_text),
    ]
    loader = getattr(vispy_text._load_glyph, "original", vispy_text._load_glyph)
    if loader.__module__.endswith("_freetype"):       # the FreeType loader (Linux); not macOS's
        patches.append(Patch("glyph-loading", vispy_text, "_load_glyph", _cached_glyph_loading))
    return tuple(patches)


def version_verified(version: str | None = None) -> bool:
    """Whether VisPy ``version`` (default: the installed one) is one the patches were checked on."""
    import vispy
    parts = (version or vispy.__version__).split(".")
    return ".".join(parts[:2]) in VERIFIED_VISPY


def switched_off() -> bool:
    return os.environ.get(ENVIRONMENT_SWITCH, "").strip().lower() in ("0", "off", "no", "false")


_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.info(message)


def install() -> bool:
    """Apply every patch, unless switched off or on a VisPy version they were not checked on (then say why, once).
    Returns whether the patches are in place."""
    import vispy
    if switched_off():
        _say_once(f"VisPy left unpatched: {ENVIRONMENT_SWITCH}={os.environ[ENVIRONMENT_SWITCH]}")
        return False
    if not version_verified():
        _say_once(f"VisPy {vispy.__version__} left unpatched: render/vispy_speedups.py was checked on VisPy "
                  f"{', '.join(VERIFIED_VISPY)} only (docs/architecture.md, \"VisPy patches\")")
        return False
    for patch in _patches():
        _replace(patch.owner, patch.attribute, patch.wrap)
    return True


def installed(name: str) -> bool:
    """Whether the patch ``name`` is in place."""
    patch = next(p for p in _patches() if p.name == name)
    return getattr(getattr(patch.owner, patch.attribute), _MARK, False)


def uninstall(names=None) -> None:
    """Put VisPy's own functions back (those of the patches ``names``, default all)."""
    for patch in _patches():
        current = getattr(patch.owner, patch.attribute)
        if (names is None or patch.name in names) and getattr(current, _MARK, False):
            setattr(patch.owner, patch.attribute, current.original)


SHADER_TEXTS_KEPT = 4096     # distinct texts kept by each cache (the window meets a few hundred)


def _kept_per_text(convert):
    """glir.convert_shader(backend_type, shader), a pure function of its two strings, kept per pair."""
    return functools.lru_cache(maxsize=SHADER_TEXTS_KEPT)(convert)


def _variables_kept_per_text(find):
    """parsing.find_program_variables(code), kept per code; each caller gets its own copy of the dict."""
    kept = functools.lru_cache(maxsize=SHADER_TEXTS_KEPT)(find)

    def find_program_variables(code):
        return dict(kept(code))

    find_program_variables.cache_info = kept.cache_info
    find_program_variables.original = find           # VisPy's own, for the tests
    return find_program_variables


def _signature_kept_per_text(parse):
    """parsing.parse_function_signature(code) -> (name, [(type, name), ...], return type), kept per code; each
    caller gets its own list of arguments."""
    kept = functools.lru_cache(maxsize=SHADER_TEXTS_KEPT)(parse)

    def parse_function_signature(code):
        name, args, rtype = kept(code)
        return name, list(args), rtype

    parse_function_signature.cache_info = kept.cache_info
    parse_function_signature.original = parse
    return parse_function_signature


def _cleaned_code_kept_per_text(clean):
    """Function._clean_code(self, code): the code without its common indentation; it reads nothing of ``self``,
    so it is kept per code."""
    kept = functools.lru_cache(maxsize=SHADER_TEXTS_KEPT)(lambda code: clean(None, code))

    def _clean_code(self, code):
        return kept(code)

    _clean_code.cache_info = kept.cache_info
    _clean_code.original = clean
    return _clean_code


def _layout_key(grid) -> tuple:
    """What the cells' positions depend on besides the solver: the grid's rectangle, padding, margin, spacing
    and shape."""
    rect = grid.rect
    return (tuple(rect.pos), tuple(rect.size), grid.padding, grid.margin, str(grid.spacing), grid._n_added,
            tuple(grid.grid_size))


def layout_pending(grid) -> bool:
    """Whether ``grid._update_child_widget_dim()`` would place its cells (not skip them as unchanged)."""
    state = vars(grid)           # VisPy's visuals refuse new attributes
    return (grid._need_solver_recreate or state.get("_latticelab_layout_key") != _layout_key(grid)
            or state.get("_latticelab_layout_solver") is not getattr(grid, "_solver", None))


def _layout_only_when_changed(original):
    """Grid._update_child_widget_dim, skipped while the solver is the same object, needs no rebuilding, and the
    layout key is the one of the last full run."""
    def _update_child_widget_dim(self):
        if not layout_pending(self):
            return
        key = _layout_key(self)
        state = vars(self)
        original(self)
        state["_latticelab_layout_key"] = key
        state["_latticelab_layout_solver"] = getattr(self, "_solver", None)

    _update_child_widget_dim.original = original    # VisPy's own, for the tests
    return _update_child_widget_dim


def _short_grid_repr(original):
    def __repr__(self):
        return f"<Grid at {hex(id(self))}: {'x'.join(map(str, self.grid_size))}>"

    return __repr__


def _rotate_label_when_turned(original):
    """AxisVisual._prepare_draw, setting the axis label's rotation only when the axis's angle on the canvas
    changed (VisPy sets it at every draw, which makes the label's text re-upload its vertices)."""
    def _prepare_draw(self, view):
        if self._pos is None:
            return False
        if self.axis_label is not None:
            angle = self._rotation_angle
            if vars(self).get("_latticelab_label_angle") != angle:
                self._axis_label_vis.rotation = angle
                vars(self)["_latticelab_label_angle"] = angle    # VisPy's visuals refuse new attributes
        if self._need_update:
            self._update_subvisuals()

    return _prepare_draw


class _Capture:
    """Stands in for the atlas texture to catch the bitmap VisPy's renderer writes into it."""
    value = None

    def __setitem__(self, where, value):
        self.value = np.array(value)


_GLYPHS: dict[tuple, np.ndarray] = {}
_LOADED: dict[tuple, dict] = {}


def _replace(owner, name: str, wrap) -> None:
    """Set ``owner.name`` to ``wrap(original)``, once: the replacement is marked, so installing again keeps it."""
    original = getattr(owner, name)
    if getattr(original, _MARK, False):
        return
    replacement = wrap(original)
    setattr(replacement, _MARK, True)
    replacement.original = original        # VisPy's own: for the tests and uninstall()
    setattr(owner, name, replacement)


def _cached_glyph_loading(loader):
    from vispy.util.fonts._freetype import _load_font

    def _load_glyph(font, char, glyphs):
        key = (font["face"], font["bold"], font["italic"], font["size"], char)
        loaded = _LOADED.get(key)
        if loaded is None:
            alone = {}
            loader(font, char, alone)        # VisPy's own loading, without the kerning of other glyphs
            loaded = _LOADED[key] = {k: v for k, v in alone[char].items() if k != "kerning"}
        glyph = dict(loaded, kerning={})
        glyphs[char] = glyph
        face = _load_font(font["face"], font["bold"], font["italic"])
        face.set_char_size(font["size"] * 64)
        for other_char, other in glyphs.items():     # kerning both ways with the glyphs this font has
            glyph["kerning"][other_char] = face.get_kerning(other_char, char).x / 64.0
            other["kerning"][char] = face.get_kerning(char, other_char).x / 64.0

    return _load_glyph


def _cached_distance_field(original):
    def render_to_texture(self, data, texture, offset, size):
        key = (data.shape, tuple(size), data.tobytes())
        bitmap = _GLYPHS.get(key)
        if bitmap is None:
            capture = _Capture()
            original(self, data, capture, (0, 0), size)
            bitmap = _GLYPHS[key] = capture.value
        texture[offset[1]:offset[1] + size[1], offset[0]:offset[0] + size[0], :] = bitmap

    return render_to_texture


def _kernel_as_texture(original):
    """TextureFont.__init__, with the font's filter kernel made a texture once (VisPy's array would be uploaded as
    a sampler at every draw of every text)."""
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        kernel = getattr(self, "_kernel", None)
        if isinstance(kernel, np.ndarray):
            self._kernel = gloo.Texture2D(kernel)
    return __init__


def _parse_original(program) -> dict:
    """VisPy's own parse of ``program``'s sources, bypassing the cache (for tests)."""
    _ORIGINAL_PARSE(program, update_variables=False)
    return dict(program._code_variables)


_ORIGINAL_PARSE = gloo_program.Program._parse_variables_from_code


# VisPy's declaration patterns without their leading ``\s*``: a match then starts at the keyword instead of at the
# whitespace before it, with the same groups; the leading ``\s*`` made the engine retry every start inside each
# run of indentation (quadratic in its length)
_DECLARATIONS = [(kind, re.compile(gloo_program.REGEX_VAR[kind].pattern.removeprefix(r"\s*"),
                                   gloo_program.REGEX_VAR[kind].flags))
                 for kind in ("uniform", "attribute", "varying", "const", "in", "out")]


def _parsed_variables(source: str) -> dict:
    """What VisPy's ``Program._parse_variables_from_code`` finds in ``source`` (the program's shaders joined),
    computed faster. VisPy strips comments with ``re.sub(r'(.*)(//.*)', r'\1', code, flags=re.M)``, which cuts
    each line at its *last* ``//`` but backtracks over every line without one: 26 of the 64 ms of a text label's
    first draw on llvmpipe (an 80 kB source). The same cut, line by line, takes 0.3 ms."""
    code = "\n".join(line[:line.rfind("//")] if "//" in line else line for line in source.split("\n"))
    variables = {}
    for keyword, pattern in _DECLARATIONS:
        kind = {"in": "attribute", "out": "varying"}.get(keyword, keyword)     # GLSL 1.3 names, as VisPy files them
        for m in pattern.finditer(code):
            gtype, name = m.group("type"), m.group("name")
            size = int(m.group("size")) if m.group("size") else -1
            if size >= 1:          # an array: each element, and the whole
                for i in range(size):
                    element = f"{name}[{i}]"
                    variables[element] = kind, gtype, element, -1
            variables[name] = ("uniform_array" if size >= 1 else kind), gtype, name, size
    return variables


def _parse_kept_per_source(original):
    """Program._parse_variables_from_code, its result kept per source text (first found by ``_parsed_variables``)."""
    def _parse_variables_from_code(self, update_variables=True):
        source = "\n\n".join(shader.code for shader in self._shaders)
        parsed = _PARSED.get(source)
        if parsed is None:
            parsed = _PARSED[source] = _parsed_variables(source)
        self._code_variables = dict(parsed)
        if update_variables:
            self._process_pending_variables()
    return _parse_variables_from_code
