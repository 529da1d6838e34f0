"""Two costs VisPy pays again and again that latticelab's windows feel: both fixed by caching, behaviour unchanged.

1. Text: every ``TextVisual`` sets its font's 16 x 1024 RGBA spatial-filter kernel as a sampler on each draw
   (``program['u_kernel'] = font._kernel``, a NumPy array), and a program given an array for a sampler that
   already holds a texture re-uploads it (vispy/gloo/program.py). A plot dock with a dozen labels and axes sent
   17 such uploads (about 1 MiB) per redraw, measured. Each font now gets its kernel as a ``gloo.Texture2D``
   made once -- the texture VisPy would make from the array, with its default sampling.
2. Shaders: ``Program._parse_variables_from_code`` runs a dozen regular expressions over the whole GLSL source
   every time a program is (re)built; the window builds about a hundred programs, most with identical sources,
   which took 1.8 of the 7 s of opening a window on a software renderer (cProfile). The parse depends only on
   the source text, so its result is kept per source. A text met for the first time is parsed by
   ``_parsed_variables``, VisPy's parse with a linear comment cut (its regular expression backtracked over every
   line: 26 of the 64 ms of a label's first draw on llvmpipe, the longest step of making the Coarsening dock).

3. Glyphs: each text visual has its own font, which loads every glyph it meets through FreeType (copying the
   bitmap byte by byte into a Python list: 3 ms a glyph) and renders it to a signed distance field on the CPU
   (about 4 ms); one window meets 146 glyphs: 1.1 s. Both depend only on (face, size, character) and on
   (bitmap, stored size), so they are kept for the process; each font still computes its kerning pairs and
   stores the field in its own atlas.

4. Axis labels: every draw of an axis sets its label's rotation again, even when the angle is the same, and a
   text visual given a rotation uploads new position and rotation buffers at its next draw. A plot dock with six
   axes did that six times a redraw. The rotation is now set only when the angle changes.

5. Grid layout: every draw of a ``Grid`` reads its layout solver's solution back and sets each cell's position
   and size again (``_update_child_widget_dim``: NumPy's vectorize over solver variables, about 1 ms a grid on
   the host, 7 ms of a 48 ms draw of the live plots' canvas), although the solution changes only when the grid's
   rectangle changes or its solver is rebuilt. It is now skipped when neither happened since the last time: the
   cells would be given the positions they have. And a canvas's draw formats every drawn node's repr for VisPy's
   (disabled) profiler, where a ``Grid``'s repr prints its layout array (about 0.3 ms each): a grid's repr is now
   its address and shape.

6. Shader text: the first draw of each new visual converts its program's GLSL for the desktop (GLIR's
   ``convert_shader``, a pass over every line) and parses each shader function's declarations with a regular
   expression per line (``find_program_variables``), although the window's many axes, labels and lines share a
   handful of sources: about half of the 45 ms of an axis's first draw (cProfile, llvmpipe), the longest steps
   of making a model's plots ahead. Making a visual strips the indentation of each of its shader functions'
   code (``Function._clean_code``, line by line: the largest single cost of making an axis, 16 of 96 ms under
   cProfile) and parses each one's signature. All four depend only on the text, and are kept per text.

``install()`` is idempotent and runs when ``latticelab.render`` is imported.
"""
from __future__ import annotations

import functools
import re

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


def install() -> None:
    _install_font_kernel_texture()
    _install_parse_cache()
    _install_glyph_cache()
    _replace(vispy_axis.AxisVisual, "_prepare_draw", _rotate_label_when_turned)
    _replace(vispy_grid.Grid, "_update_child_widget_dim", _layout_only_when_changed)
    _replace(vispy_grid.Grid, "__repr__", _short_grid_repr)
    _replace(vispy_glir, "convert_shader", _kept_per_text)
    _replace(vispy_parsing, "find_program_variables", _variables_kept_per_text)
    _replace(vispy_parsing, "parse_function_signature", _signature_kept_per_text)
    _replace(vispy_function.Function, "_clean_code", _cleaned_code_kept_per_text)


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
    setattr(owner, name, replacement)


def _install_glyph_cache() -> None:
    _replace(vispy_text.SDFRendererCPU, "render_to_texture", _cached_distance_field)
    if vispy_text._load_glyph.__module__.endswith("_freetype"):   # the FreeType loader (Linux); not macOS's
        _replace(vispy_text, "_load_glyph", _cached_glyph_loading)


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


def _install_font_kernel_texture() -> None:
    def wrap(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            kernel = getattr(self, "_kernel", None)
            if isinstance(kernel, np.ndarray):
                self._kernel = gloo.Texture2D(kernel)
        return __init__

    _replace(vispy_text.TextureFont, "__init__", wrap)


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


def _install_parse_cache() -> None:
    def wrap(original):
        def _parse_variables_from_code(self, update_variables=True):
            source = "\n\n".join(shader.code for shader in self._shaders)
            parsed = _PARSED.get(source)
            if parsed is None:
                parsed = _PARSED[source] = _parsed_variables(source)
            self._code_variables = dict(parsed)
            if update_variables:
                self._process_pending_variables()
        return _parse_variables_from_code

    _replace(gloo_program.Program, "_parse_variables_from_code", wrap)
