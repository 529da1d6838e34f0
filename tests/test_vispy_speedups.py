"""render/vispy_speedups.py caches what VisPy recomputes; these check, patch by patch, that the patched function
gives what VisPy's own gives on a case (``TESTED`` names the test of each patch), and that the patches are applied
only on a checked VisPy version and not when switched off."""
from __future__ import annotations

import contextlib
import logging

import numpy as np
import pytest

import latticelab.render  # noqa: F401  (installs the speedups)
from latticelab.render import vispy_speedups

from helpers import scene_canvas


def test_parsed_shader_variables_equal_vispys_own_parse():
    from vispy import gloo
    vertex = "uniform mat4 u_m; attribute vec2 a_pos; varying float v_x; // uniform float commented\n" \
             "void main() { v_x = a_pos.x; gl_Position = u_m * vec4(a_pos, 0.0, 1.0); }"
    fragment = "uniform vec4 u_colour[3]; varying float v_x; void main() { gl_FragColor = u_colour[1] * v_x; }"
    first, second = gloo.Program(vertex, fragment), gloo.Program(vertex, fragment)   # second: from the cache
    original = vispy_speedups._parse_original(gloo.Program(vertex, fragment))
    assert first._code_variables == second._code_variables == original
    assert "u_colour[2]" in original and "commented" not in str(original)


def test_the_fast_parse_finds_what_vispys_parse_finds():
    """The parse made faster (comments cut line by line, declarations matched from their keyword) against VisPy's
    own, on the programs of text, lines, markers, an image and a mesh, and on text with the cases its comment cut
    has: two ``//`` on a line (VisPy cuts at the last), declarations over several lines, arrays, defaults, ``in``
    and ``out`` and indentation."""
    from vispy import gloo, scene
    from vispy.gloo.program import VertexShader
    canvas = scene_canvas(120)
    view = canvas.central_widget.add_view()
    visuals = [scene.visuals.Text("T = 2.27", parent=view.scene),
               scene.visuals.Line(np.random.default_rng(1).random((20, 2)), parent=view.scene),
               scene.visuals.Markers(pos=np.random.default_rng(2).random((5, 2)), parent=view.scene),
               scene.visuals.Image(np.random.default_rng(3).random((8, 8)).astype(np.float32), parent=view.scene),
               scene.visuals.Mesh(vertices=np.random.default_rng(4).random((3, 3)), faces=np.array([[0, 1, 2]]),
                                  parent=view.scene)]
    canvas.render()

    def programs(visual):
        if getattr(visual, "_program", None) is not None:
            yield visual._program
        for part in getattr(visual, "_subvisuals", ()):
            yield from programs(part)
    sources = ["\n\n".join(shader.code for shader in program._shaders)
               for visual in visuals for program in programs(visual)]
    assert len(sources) >= len(visuals)
    sources.append("uniform float u_a; // uniform float u_hidden; // a second comment\n"
                   "  uniform   highp vec4\n    u_colours [3] ;\nconst float c_k = 1.5;\n"
                   "in vec2 a_in; out vec3 v_out;   // out float v_gone;\n"
                   "attribute vec2 a_pos; varying float v_x;\n\tuniform mat4 u_m;//uniform float u_no;\n")
    for source in sources:
        program = gloo.Program()
        program._shaders = [VertexShader(source)]      # the parse reads only its shaders' code
        assert vispy_speedups._parsed_variables(source) == vispy_speedups._parse_original(program)
    assert "u_colours[2]" in vispy_speedups._parsed_variables(sources[-1])
    found = vispy_speedups._parsed_variables(sources[-1])
    assert "u_hidden" in found and "v_gone" not in found and "u_no" not in found    # cut at the last "//", as VisPy
    canvas.close()


def test_glyphs_from_the_cache_equal_vispys_and_keep_their_kerning():
    import vispy.visuals.text.text as vispy_text
    from vispy.util.fonts._freetype import _load_glyph as vispy_load
    font = {"face": "OpenSans", "bold": False, "italic": False, "size": 7}
    ours, theirs = {}, {}
    for char in "AVAW7":
        if char not in ours:
            vispy_text._load_glyph(font, char, ours)
            vispy_load(font, char, theirs)
    for char, glyph in theirs.items():
        np.testing.assert_array_equal(ours[char]["bitmap"], glyph["bitmap"])
        assert ours[char]["offset"] == glyph["offset"] and ours[char]["advance"] == glyph["advance"]
        assert ours[char]["kerning"] == glyph["kerning"], char


def _text_canvas(text: str, size: int):
    """A canvas with ``text`` in white in the middle of a view; returns the canvas and the view."""
    from vispy import scene
    canvas = scene_canvas(160)
    view = canvas.central_widget.add_view()
    view.camera = scene.PanZoomCamera(rect=(0, 0, 1, 1))
    scene.visuals.Text(text, color="white", font_size=size, pos=(0.5, 0.5), parent=view.scene)
    return canvas, view


def test_text_draws_the_same_pixels_with_cached_glyphs_and_kernel_texture():
    from vispy import scene
    canvas, view = _text_canvas("Ising 2.269 AV", 14)
    first = canvas.render(alpha=False)
    assert (first[..., :3] > 128).sum() > 50                                     # the text is drawn
    scene.visuals.Text("Ising 2.269 AV", color="white", font_size=14, pos=(0.5, 0.5), parent=view.scene)
    again = canvas.render(alpha=False)                                           # a second font, from the caches
    assert (again[..., :3] > 0).sum() >= (first[..., :3] > 0).sum()
    view.scene.children[-1].parent = None
    np.testing.assert_array_equal(canvas.render(alpha=False), first)
    import vispy.visuals.text.text as vispy_text
    font = vispy_text.FontManager().get_font("OpenSans")
    from vispy import gloo
    assert isinstance(font._kernel, gloo.Texture2D)
    canvas.close()


def _cells(grid) -> list[tuple]:
    return [tuple(np.round(np.r_[w.pos, w.size], 6)) for *_, w in grid._grid_widgets.values()]


def test_a_grid_lays_its_cells_out_as_vispy_does_and_only_again_when_its_rectangle_changes():
    canvas = scene_canvas(200)
    grid = canvas.central_widget.add_grid(spacing=2)
    left, right = grid.add_widget(row=0, col=0), grid.add_widget(row=0, col=1)
    left.width_max = 40
    grid.add_widget(row=1, col=0, col_span=2)
    vispys_own = type(grid)._update_child_widget_dim.original
    for size in ((200, 200), (320, 180)):
        canvas.size = size
        canvas.render()                   # a draw: the (patched) layout runs
        ours = _cells(grid)
        vispys_own(grid)                  # VisPy's layout from the same solver and rectangle
        assert _cells(grid) == ours, size
        assert ours[0][2] == 40 and abs(ours[1][2] - (size[0] - 40 - 2)) < 1.0   # the columns fill the width
    # nothing changed since the last layout: a draw leaves the cells where they are, even moved by hand
    right.pos = (5, 5)
    grid._update_child_widget_dim()
    assert tuple(right.pos) == (5, 5)
    canvas.size = (300, 180)              # a new rectangle: laid out again
    grid._update_child_widget_dim()
    assert tuple(right.pos) != (5, 5)
    assert "Grid at" in repr(grid) and "2x2" in repr(grid)
    canvas.close()


def test_shader_texts_converted_and_parsed_once_give_vispys_own_results():
    """The programs of an axis, a label and a line: the same visuals made again (in a second canvas) convert and
    parse no text again, and for each of their shader templates the kept conversion and parse equal VisPy's own."""
    import vispy.gloo.glir as vispy_glir
    import vispy.visuals.shaders.parsing as vispy_parsing
    from vispy import scene

    def plots():
        canvas = scene_canvas(120)
        grid = canvas.central_widget.add_grid()
        axis = grid.add_widget(scene.AxisWidget(orientation="left", axis_label="energy [J]"), row=0, col=0)
        grid.add_widget(scene.Label("magnetisation per spin"), row=0, col=1)
        view = grid.add_view(row=1, col=1)
        line = scene.visuals.Line(np.random.default_rng(1).random((50, 2)), parent=view.scene)
        canvas.render()
        return canvas, [axis.axis._text, axis.axis._ticks._line_visual, line._line_visual]

    convert, find = vispy_glir.convert_shader, vispy_parsing.find_program_variables
    first, _ = plots()
    converted, parsed = convert.cache_info(), find.cache_info()
    second, visuals = plots()
    assert convert.cache_info().misses == converted.misses and find.cache_info().misses == parsed.misses
    assert convert.cache_info().hits > converted.hits and find.cache_info().hits > parsed.hits
    sources = [fn.code for v in visuals for fn in (v._program.vert, v._program.frag)]
    assert len(sources) >= 4
    from vispy.visuals.shaders.function import Function
    signature, clean = vispy_parsing.parse_function_signature, Function._clean_code
    for code in sources:
        assert find(code) == find.original(code) and find(code) is not find(code)   # each caller its own dict
        assert convert("desktop", code) == convert.__wrapped__("desktop", code)
        assert signature(code) == signature.original(code) and signature(code)[1] is not signature(code)[1]
        indented = "\n".join("    " + line for line in code.split("\n"))
        assert clean(None, indented) == clean.original(None, indented) == clean.original(None, code)
    assert signature.cache_info().hits > 0 and clean.cache_info().hits > 0
    first.close()
    second.close()


@contextlib.contextmanager
def _without(*names):
    """VisPy's own functions for the patches ``names`` while the block runs; the patches again after it."""
    vispy_speedups.uninstall(names)
    try:
        yield
    finally:
        assert vispy_speedups.install()


def test_text_with_the_kernel_as_a_texture_draws_vispys_pixels():
    def drawn():
        canvas, _ = _text_canvas("T_c = 2.269 AVW", 13)
        picture = canvas.render(alpha=False)
        canvas.close()
        return picture

    ours = drawn()
    with _without("font-kernel-texture"):
        theirs = drawn()
    assert (ours[..., :3] > 128).sum() > 50
    np.testing.assert_array_equal(ours, theirs)


def test_a_kept_distance_field_is_vispys():
    import vispy.visuals.text.text as vispy_text
    renderer = vispy_text.SDFRendererCPU()
    patched = type(renderer).render_to_texture
    bitmap = np.zeros((40, 30), np.uint8)
    bitmap[8:32, 10:14] = 255                  # a glyph-like bar with a foot
    bitmap[28:32, 6:24] = 255
    size = (10, 13)
    ours, again, theirs = (np.zeros((20, 20, 3), np.float32) for _ in range(3))   # an atlas: 3 channels
    patched(renderer, bitmap, ours, (3, 4), size)
    patched(renderer, bitmap, again, (3, 4), size)          # from the cache
    patched.original(renderer, bitmap, theirs, (3, 4), size)
    assert np.abs(theirs).sum() > 0
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(again, theirs)


def test_an_axis_turning_its_label_only_when_turned_draws_vispys_pixels():
    from vispy import scene

    def drawn():
        canvas = scene_canvas(160)
        grid = canvas.central_widget.add_grid()
        axis = grid.add_widget(scene.AxisWidget(orientation="left", axis_label="energy [J]"), row=0, col=0)
        view = grid.add_view(row=0, col=1)
        axis.link_view(view)
        view.camera = scene.PanZoomCamera(rect=(0, -2, 1, 2))
        canvas.render(alpha=False)
        picture = canvas.render(alpha=False)           # the second draw: the label's rotation set (or kept)
        angle = axis.axis._axis_label_vis.rotation
        canvas.close()
        return picture, angle

    ours, our_angle = drawn()
    with _without("axis-label-rotation"):
        theirs, their_angle = drawn()
    assert our_angle == their_angle != 0
    np.testing.assert_array_equal(ours, theirs)


def test_a_grids_short_repr_names_its_shape():
    from vispy import scene
    grid = scene.widgets.Grid()
    grid.add_widget(row=1, col=2)
    ours = repr(grid)
    theirs = type(grid).__repr__.original(grid)
    assert ours == f"<Grid at {hex(id(grid))}: 2x3>" and ours != theirs


TESTED = {
    "font-kernel-texture": test_text_with_the_kernel_as_a_texture_draws_vispys_pixels,
    "program-parse": test_parsed_shader_variables_equal_vispys_own_parse,
    "glyph-loading": test_glyphs_from_the_cache_equal_vispys_and_keep_their_kerning,
    "glyph-distance-field": test_a_kept_distance_field_is_vispys,
    "axis-label-rotation": test_an_axis_turning_its_label_only_when_turned_draws_vispys_pixels,
    "grid-layout": test_a_grid_lays_its_cells_out_as_vispy_does_and_only_again_when_its_rectangle_changes,
    "grid-repr": test_a_grids_short_repr_names_its_shape,
    "shader-conversion": test_shader_texts_converted_and_parsed_once_give_vispys_own_results,
    "shader-variables": test_shader_texts_converted_and_parsed_once_give_vispys_own_results,
    "shader-signature": test_shader_texts_converted_and_parsed_once_give_vispys_own_results,
    "shader-clean-code": test_shader_texts_converted_and_parsed_once_give_vispys_own_results,
}


def test_every_patch_is_installed_and_has_a_test():
    names = {patch.name for patch in vispy_speedups._patches()}
    assert names <= set(TESTED), f"patches without a test: {sorted(names - set(TESTED))}"
    assert all(vispy_speedups.installed(name) for name in names)


def _originals():
    return {p.name: getattr(p.owner, p.attribute).original for p in vispy_speedups._patches()}


def test_an_unchecked_vispy_version_is_left_alone_and_said_once(monkeypatch, caplog):
    import vispy
    originals = _originals()
    monkeypatch.setattr(vispy, "__version__", "0.13.4")
    vispy_speedups.uninstall()
    try:
        with caplog.at_level(logging.INFO, logger=vispy_speedups.__name__):
            assert vispy_speedups.install() is False
            assert vispy_speedups.install() is False
        for patch in vispy_speedups._patches():
            assert getattr(patch.owner, patch.attribute) is originals[patch.name], patch.name
        said = [r.getMessage() for r in caplog.records if "0.13.4" in r.getMessage()]
        assert len(said) == 1 and "left unpatched" in said[0]
    finally:
        monkeypatch.undo()
        assert vispy_speedups.install()
    assert not vispy_speedups.version_verified("0.14.3") and vispy_speedups.version_verified("0.17.3")


@pytest.mark.parametrize("value", ["0", "off"])
def test_the_environment_switch_leaves_vispy_alone(monkeypatch, value):
    originals = _originals()
    vispy_speedups.uninstall()
    monkeypatch.setenv(vispy_speedups.ENVIRONMENT_SWITCH, value)
    try:
        assert vispy_speedups.install() is False
        for patch in vispy_speedups._patches():
            assert getattr(patch.owner, patch.attribute) is originals[patch.name], patch.name
    finally:
        monkeypatch.delenv(vispy_speedups.ENVIRONMENT_SWITCH)
        assert vispy_speedups.install()
