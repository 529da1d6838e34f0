"""Small VisPy visuals for fields and plots; all of their data arrives through render/upload.py.

Each visual is a thin wrapper around a shader pair from shaders/: geometry is a handful of vertices, the
per-cell work happens in the fragment shaders reading one uint8 code texture and one 256-colour palette
texture (shaders/palette.glsl), whatever model the codes come from (sim/picture.py).
"""
from __future__ import annotations

import numpy as np
from vispy import gloo
from vispy.scene.visuals import create_visual_node
from vispy.visuals import Visual

from latticelab.render.shaders import fragment_with_palette, load_shader
from latticelab.render.unfold import UnfoldLayout
from latticelab.render.upload import PALETTE_SIZE, upload_buffer, upload_codes

_UNIT_SQUARE = np.array([[0, 0], [1, 0], [0, 1], [1, 1]], np.float32)


def code_texture(ndim: int, shape=None):
    """An r8 texture holding one byte code per cell, sampled without interpolation."""
    cls = gloo.Texture2D if ndim == 2 else gloo.Texture3D
    shape = shape or (1,) * ndim
    return cls(shape=tuple(shape) + (1,), format="red", internalformat="r8", interpolation="nearest",
               wrapping="clamp_to_edge")


def palette_texture():
    """A 256 x 1 RGBA texture holding a picture's palette, sampled at texel centres without interpolation."""
    # float texels: the shaders shade the model's exact colours (8-bit texels would round before shading)
    return gloo.Texture2D(np.zeros((1, PALETTE_SIZE, 4), np.float32), format="rgba", internalformat="rgba32f",
                          interpolation="nearest", wrapping="clamp_to_edge")


def _box_faces() -> tuple[np.ndarray, np.ndarray]:
    """Corners (36, 3) and outward normals (36, 3) of the unit cube's 12 triangles."""
    corners, normals = [], []
    for axis in range(3):
        for side in (0.0, 1.0):
            normal = np.zeros(3)
            normal[axis] = 1.0 if side else -1.0
            u, v = [a for a in range(3) if a != axis]
            quad = []
            for a, b in ((0, 0), (1, 0), (1, 1), (0, 0), (1, 1), (0, 1)):
                corner = np.zeros(3)
                corner[axis], corner[u], corner[v] = side, a, b
                quad.append(corner)
            if np.dot(np.cross(quad[1] - quad[0], quad[2] - quad[0]), normal) < 0:
                quad = quad[::-1]   # counter-clockwise seen from outside, so back faces can be culled
            corners += quad
            normals += [normal] * 6
    return np.array(corners, np.float32), np.array(normals, np.float32)


class _PaletteVisual(Visual):
    """A visual whose fragment shader colours byte codes through a palette texture (shaders/palette.glsl)."""

    def __init__(self, vert: str, frag: str, texture, palette):
        super().__init__(vcode=load_shader(vert), fcode=fragment_with_palette(frag))
        self.texture = texture
        self.palette = palette if palette is not None else palette_texture()
        self.shared_program["u_codes"] = self.texture
        self.shared_program["u_palette"] = self.palette

    def _prepare_transforms(self, view):
        view.view_program.vert["transform"] = view.get_transform()


class FieldImageVisual(_PaletteVisual):
    """A 2D field as one quad with one texel per cell; world units are cells (x = column, y = row)."""

    def __init__(self, texture=None, palette=None):
        super().__init__("lattice2d.vert", "lattice2d.frag", texture if texture is not None else code_texture(2),
                         palette)
        self._quad = gloo.VertexBuffer(_UNIT_SQUARE)
        self.shared_program["a_position"] = self._quad
        self.size = (1.0, 1.0)
        self.shared_program["u_size"] = self.size
        self._draw_mode = "triangle_strip"
        self.set_gl_state(depth_test=False, cull_face=False, blend=False)

    def show(self, picture, step: int = 1) -> None:
        """The codes of an (H, W) picture (render/upload.py: upload_codes; a split picture reduced by ``step``,
        stretched over its cells); the palette is the owner's."""
        upload_codes(self.texture, picture, step)
        self.set_size(picture.shape)

    def set_size(self, shape) -> None:
        size = (float(shape[1]), float(shape[0]))
        if size != self.size:  # a uniform set to its old value would still be sent to GL at every draw
            self.size = size
            self.shared_program["u_size"] = size
        self.update()

    def _compute_bounds(self, axis, view):
        return (0, self.size[axis]) if axis < 2 else (0, 0)


class FieldCubeVisual(_PaletteVisual):
    """A 3D field drawn as a solid block of cells; ``peel`` removes layers from the top (high z)."""

    def __init__(self, texture=None, palette=None):
        super().__init__("cube.vert", "cube.frag", texture if texture is not None else code_texture(3), palette)
        corners, normals = _box_faces()
        self._corners = gloo.VertexBuffer(corners)
        self._normals = gloo.VertexBuffer(normals)
        self.shared_program["a_corner"] = self._corners
        self.shared_program["a_normal"] = self._normals
        self.size = (1.0, 1.0, 1.0)
        self.peel = 0
        self.shared_program["u_size"] = self.size
        self.shared_program["u_peel"] = 0.0
        self._draw_mode = "triangles"
        self.set_gl_state(depth_test=True, cull_face=True, front_face="ccw", blend=False)

    def show(self, picture) -> None:
        """The codes of a (D, H, W) picture, cell [z, y, x] (render/upload.py: upload_codes)."""
        upload_codes(self.texture, picture)
        self.set_size(picture.shape)

    def set_size(self, shape) -> None:
        depth, height, width = shape
        size = (float(width), float(height), float(depth))
        if size != self.size:
            self.size = size
            self.shared_program["u_size"] = size
        self.update()

    def set_peel(self, layers: int) -> None:
        self.peel = int(layers)
        self.shared_program["u_peel"] = float(layers)
        self.update()

    def _compute_bounds(self, axis, view):
        return 0, self.size[axis]


class UnfoldedFieldVisual(_PaletteVisual):
    """The z-layers of a 3D code texture as a 2D grid of tiles in zigzag order (render/unfold.py)."""

    def __init__(self, texture, palette=None):
        super().__init__("unfold.vert", "unfold.frag", texture, palette)
        self.layout = UnfoldLayout(1)
        self._quad = gloo.VertexBuffer(_UNIT_SQUARE)
        self.shared_program["a_position"] = self._quad
        self.set_layout(UnfoldLayout(1))
        self._draw_mode = "triangle_strip"
        self.set_gl_state(depth_test=False, cull_face=False, blend=False)

    def set_layout(self, layout: UnfoldLayout) -> None:
        self.layout = layout
        self.shared_program["u_L"] = float(layout.L)
        self.shared_program["u_gap"] = float(layout.gap)
        self.shared_program["u_columns"] = float(layout.columns)
        self.shared_program["u_extent"] = tuple(float(e) for e in layout.extent)
        self.update()

    def _compute_bounds(self, axis, view):
        return (0, self.layout.extent[axis]) if axis < 2 else (0, 0)


class LinkGeometryVisual(Visual):
    """Links between cells as line segments (``rings=False``) or their end points as rings (``rings=True``).

    Positions are (N, 3) cell coordinates; fragments above ``top`` (peeled layers) are not drawn.
    """

    def __init__(self, rings: bool, colour, point_size: float = 11.0):
        vert = load_shader("links.vert")
        super().__init__(vcode=vert, fcode=load_shader("links.frag"))
        self._positions = gloo.VertexBuffer(np.zeros((1, 3), np.float32))
        self._count = 0
        self.shared_program["a_position"] = self._positions
        self.shared_program["u_colour"] = tuple(colour)
        self.shared_program["u_ring"] = 1.0 if rings else 0.0
        self.shared_program["u_point_size"] = float(point_size)
        self.shared_program["u_top"] = 1e9
        self._draw_mode = "points" if rings else "lines"
        self.set_gl_state(depth_test=False, blend=True, blend_func=("src_alpha", "one_minus_src_alpha"),
                          line_width=1.5)

    def set_style(self, colour, point_size: float) -> None:
        self.shared_program["u_colour"] = tuple(colour)
        self.shared_program["u_point_size"] = float(point_size)
        self.update()

    def set_top(self, top: float) -> None:
        """Hide fragments with z above ``top`` (cell units)."""
        self.shared_program["u_top"] = float(top)
        self.update()

    def set_positions(self, positions) -> None:
        positions = np.asarray(positions, np.float32).reshape(-1, 3)
        self._count = len(positions)
        if self._count:
            upload_buffer(self._positions, positions)
        self.update()

    def _prepare_transforms(self, view):
        view.view_program.vert["transform"] = view.get_transform()

    def _prepare_draw(self, view):
        return self._count > 0

    def _compute_bounds(self, axis, view):
        return None


class PolylineVisual(Visual):
    """One plot line through (x, y) points."""

    def __init__(self, colour):
        super().__init__(vcode=load_shader("polyline.vert"), fcode=load_shader("polyline.frag"))
        self._points = gloo.VertexBuffer(np.zeros((2, 2), np.float32))
        self._count = 0
        self.shared_program["a_position"] = self._points
        self.shared_program["u_colour"] = tuple(colour)
        self._draw_mode = "line_strip"
        self.set_gl_state(depth_test=False, blend=True, blend_func=("src_alpha", "one_minus_src_alpha"),
                          line_width=1.5)

    def set_points(self, points) -> None:
        self._count = len(points)
        if self._count:
            upload_buffer(self._points, points)
        self.update()

    def _prepare_transforms(self, view):
        view.view_program.vert["transform"] = view.get_transform()

    def _prepare_draw(self, view):
        return self._count > 1

    def _compute_bounds(self, axis, view):
        return None


FieldImage = create_visual_node(FieldImageVisual)
FieldCube = create_visual_node(FieldCubeVisual)
UnfoldedField = create_visual_node(UnfoldedFieldVisual)
LinkGeometry = create_visual_node(LinkGeometryVisual)
Polyline = create_visual_node(PolylineVisual)
