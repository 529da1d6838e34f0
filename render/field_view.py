"""The field view: whatever a model hands it (a ``Picture``, sim/picture.py) as a 2D image, a 3D block with
peeling, or a 3D unfolded grid, inside one VisPy ViewBox, with the picture's links drawn over the cells.

A picture is one byte code per cell and a 256-colour palette: Ising states and a real field through a colormap
(``scalar_picture``) are drawn the same way, by the same shaders (shaders/palette.glsl). The codes go into an
r8 texture through render/upload.py -- on a CUDA-GL canvas by one kernel that encodes and stores at once -- and
the palette into a 256 x 1 RGBA texture. What the cells mean (highlights, marks) is in the palette the model
chose; the view holds no per-model state.

The view knows nothing of Qt: the window (app/) owns the canvas and passes a ViewBox in; a headless EGL canvas
works the same way. The owner gives the canvas ``bgcolor=palette.BACKGROUND``; the view draws no background of
its own, since a ViewBox bgcolor is one more full-view VisPy program per frame, about as costly on the host as
the field.

Per frame: ``before_step()`` before the simulation advances, then ``show(model.picture(...))``.
"""
from __future__ import annotations

import numpy as np
from vispy import scene

from latticelab.render import interop, palette
from latticelab.render.unfold import UnfoldLayout
from latticelab.render.upload import upload_palette
from latticelab.sim.backend import to_numpy
from latticelab.sim.multidevice.picture import reduction_step
from latticelab.render.visuals import FieldCube, FieldImage, LinkGeometry, UnfoldedField, code_texture, palette_texture

MODES_3D = ("cube", "unfold")
MAX_LINKS_DRAWN = 20_000


class FieldView:
    """Shows one picture at a time; ``show`` picks 2D or 3D from the picture's shape.

    2D pictures may be (H, W); 3D ones must be cubes (L, L, L) (peeling and the unfolded grid count layers of
    the side L). ``link_colour``: RGBA of the links drawn over the cells.
    """

    def __init__(self, viewbox: scene.widgets.ViewBox, link_colour=palette.LINK):
        self.viewbox = viewbox  # no bgcolor: the canvas's clear colour (palette.BACKGROUND) is the background
        self.palette_texture = palette_texture()
        self.texture_3d = code_texture(3)
        self.image = FieldImage(palette=self.palette_texture, parent=viewbox.scene)
        self.cube = FieldCube(texture=self.texture_3d, palette=self.palette_texture, parent=viewbox.scene)
        self.unfolded = UnfoldedField(self.texture_3d, self.palette_texture, parent=viewbox.scene)
        self.link_colour = tuple(float(c) for c in link_colour)
        self.links = LinkGeometry(False, self.link_colour, parent=viewbox.scene)
        self.endpoints = LinkGeometry(True, self.link_colour, parent=viewbox.scene)
        self.links.order = self.endpoints.order = 10  # drawn after the cells
        self.camera_2d = scene.PanZoomCamera(aspect=1, flip=(False, True, False))
        self.camera_3d = scene.TurntableCamera(fov=30, elevation=28, azimuth=-35)
        self.shape: tuple[int, ...] = (1, 1)
        self.dim = 2
        self.L = 1
        self.mode_3d = "cube"
        self.peel = 0
        self._peel_asked = 0              # the peel asked for, kept when a smaller or not yet shown cube clamps it
        self.legend: tuple = ()           # of the last picture: (label, code) pairs for a key
        self.value_range = None           # of the last picture: the field values at codes 0 and 253, or None
        self.overlays: list = []          # drawn over the view and told of every picture: ``show(picture)``
                                          # (render/legend.py: LegendOverlay appends itself)
        self.links_shown = 0
        self.links_total = 0
        self._link_sites = np.zeros((0, 2), np.int64)
        self._links_source = None         # the links array last shown (a new array object means new links)
        self._links_source_shape = None
        self._palette = None              # bytes of the palette in the texture
        self._apply_mode()

    # ---- data --------------------------------------------------------------------------------
    def show(self, picture) -> None:
        """Draw a picture (sim/picture.py): its codes through its palette, in 2D for an (H, W) shape and in 3D
        for (L, L, L), and its links, if any, over the cells. The arrays may be NumPy or CuPy; on a CUDA-GL
        canvas CuPy pictures are encoded straight into the texture (render/upload.py: upload_codes).

        Links are uploaded again only when ``picture.links`` is another array object (or changes shape) than
        the last one: a model whose links change must hand a new array."""
        shape = tuple(int(n) for n in picture.shape)
        if len(shape) not in (2, 3) or min(shape) < 1 or (len(shape) == 3 and len(set(shape)) != 1):
            raise ValueError(f"picture: must be an (H, W) image or an (L, L, L) cube; got shape {shape}")
        geometry_changed = shape != self.shape
        self.shape, self.dim, self.L = shape, len(shape), shape[0]
        self._set_palette(picture.palette)
        if self.dim == 2:
            # a picture split over devices comes reduced where the view has fewer pixels than it has cells
            self.image.show(picture, 1 if picture.slabs is None else reduction_step(shape, self.view_pixels()))
        else:
            self.cube.show(picture)
            if geometry_changed:
                self.unfolded.set_layout(UnfoldLayout(self.L))
            self.unfolded.update()
        self.legend, self.value_range = picture.legend, picture.value_range
        for overlay in self.overlays:
            overlay.show(picture)
        links_changed = self._set_links(picture.links)
        if geometry_changed:
            # the peel asked for before this cube was shown (a peel restored at start-up, set while the view
            # still held its first 1x1 picture) applies to it, clamped to its height
            self.peel = int(min(max(self._peel_asked, 0), max(self.L - 1, 0)))
            self.cube.set_peel(self.peel)
            self._apply_mode()
        if geometry_changed or links_changed:
            self._update_link_positions()
        if geometry_changed:
            self.reset_camera()

    def view_pixels(self) -> tuple[int, int]:
        """The view's size in device pixels (width, height)."""
        canvas = self.viewbox.canvas
        scale = getattr(canvas, "pixel_scale", 1) if canvas is not None else 1
        width, height = self.viewbox.size
        return max(1, int(round(width * scale))), max(1, int(round(height * scale)))

    def before_render(self) -> None:
        """Call before drawing the canvas outside its draw event (``canvas.render()``): textures the last
        ``before_step`` mapped for CUDA are unmapped, as the draw event's hook would do."""
        canvas = self.viewbox.canvas
        if canvas is not None:
            interop.interop_for(canvas).unmap_all()

    def before_step(self) -> None:
        """Call before advancing the simulation whose picture the next ``show`` draws: on a CUDA-GL canvas the
        code textures are mapped for CUDA now, so step and texture write run as one CUDA phase
        (render/interop.py: CanvasInterop.acquire). A draw without that upload is still safe."""
        canvas = self.viewbox.canvas
        if canvas is not None:
            interop.interop_for(canvas).acquire()

    def _set_palette(self, colours) -> None:
        host = np.ascontiguousarray(to_numpy(colours), np.float32)
        data = host.tobytes()
        if data != self._palette:  # 4 KiB compared: cheaper than any upload, and most frames keep the palette
            upload_palette(self.palette_texture, host)
            self._palette = data
            for visual in (self.image, self.cube, self.unfolded):
                visual.update()

    def _set_links(self, links) -> bool:
        """Take the picture's links; True if they differ from those shown (another array object or shape)."""
        shape = None if links is None else tuple(links.shape)
        if links is self._links_source and shape == self._links_source_shape:
            return False
        self._links_source, self._links_source_shape = links, shape
        edges = np.zeros((0, 2), np.int64) if links is None else to_numpy(links).astype(np.int64).reshape(-1, 2)
        self.links_total = len(edges)
        if len(edges) > MAX_LINKS_DRAWN:  # an even subsample keeps the picture representative
            edges = edges[np.linspace(0, len(edges) - 1, MAX_LINKS_DRAWN).astype(np.int64)]
        self._link_sites = edges
        self.links_shown = len(edges)
        return True

    # ---- options -----------------------------------------------------------------------------
    def set_mode_3d(self, mode: str) -> None:
        """How a 3D picture is drawn: "cube" (a block, peeled from the top) or "unfold" (its layers as tiles)."""
        if mode not in MODES_3D:
            raise ValueError(f"mode: must be one of {', '.join(MODES_3D)}; got {mode!r}")
        if mode != self.mode_3d:
            self.mode_3d = mode
            self._apply_mode()
            self._update_link_positions()
            self.reset_camera()

    def set_peel(self, layers: int) -> None:
        """Remove ``layers`` layers from the top of the 3D block (0 .. L-1)."""
        self._peel_asked = int(layers)
        self.peel = int(min(max(layers, 0), max(self.L - 1, 0)))
        self.cube.set_peel(self.peel)
        self._update_link_top()

    def reset_camera(self) -> None:
        if self.viewbox.camera is self.camera_3d:
            L = float(self.L)
            self.camera_3d.center = (L / 2, L / 2, L / 2)
            self.camera_3d.scale_factor = 2.2 * L
            self.camera_3d.set_range(x=(0, L), y=(0, L), z=(0, L), margin=0.08)
        else:
            width, height = self._extent_2d()
            self.camera_2d.set_range(x=(0, width), y=(0, height), margin=0.02)

    # ---- geometry helpers (also used by tests to find cells on screen) -------------------------
    def world_to_canvas(self, points) -> np.ndarray:
        """Canvas pixel coordinates (x, y) of world points (cell units), (N, 2) or (N, 3)."""
        points = np.asarray(points, float)
        if points.shape[1] == 2:
            points = np.column_stack([points, np.zeros(len(points))])
        node = self.cube if self.dim == 3 and self.mode_3d == "cube" else self.image
        mapped = node.get_transform("visual", "canvas").map(points)
        return mapped[:, :2] / mapped[:, 3:4]

    def cell_at(self, canvas_pos) -> tuple[int, ...] | None:
        """The index of the cell under canvas pixel ``canvas_pos`` (x, y; logical pixels, as VisPy mouse events
        give them), in the array order of the picture's shape: (row, column) in 2D, (z, y, x) in the unfolded
        3D grid; None outside the cells, between the unfolded tiles, or in the 3D block view (a point on screen
        is no single cell there). Index a model's ``fields()`` arrays with it."""
        mode = self.active_mode
        if mode == "cube":
            return None
        node = self.image if mode == "2d" else self.unfolded
        mapped = np.asarray(node.get_transform("canvas", "visual").map([float(canvas_pos[0]),
                                                                        float(canvas_pos[1])]), float)
        x, y = mapped[0] / mapped[3], mapped[1] / mapped[3]
        if not (np.isfinite(x) and np.isfinite(y)) or x < 0 or y < 0:
            return None
        column, row = int(np.floor(x)), int(np.floor(y))
        if mode == "2d":
            return (row, column) if row < self.shape[0] and column < self.shape[1] else None
        layout = UnfoldLayout(self.L)
        (tile_row, y_in), (tile_column, x_in) = divmod(row, layout.pitch), divmod(column, layout.pitch)
        if x_in >= self.L or y_in >= self.L or tile_column >= layout.columns:
            return None
        # the tiles run left to right on even rows and right to left on odd ones (UnfoldLayout.tile_of_layer)
        offset = tile_column if tile_row % 2 == 0 else layout.columns - 1 - tile_column
        z = tile_row * layout.columns + offset
        return (z, y_in, x_in) if z < self.L else None

    @property
    def active_mode(self) -> str:
        """"2d", "cube" or "unfold"."""
        return "2d" if self.dim == 2 else self.mode_3d

    def _extent_2d(self) -> tuple[float, float]:
        if self.dim == 3:
            return self.unfolded.layout.extent
        return self.shape[1], self.shape[0]

    def _apply_mode(self) -> None:
        mode = self.active_mode
        self.image.visible = mode == "2d"
        self.cube.visible = mode == "cube"
        self.unfolded.visible = mode == "unfold"
        self.links.visible = self.endpoints.visible = self.links_shown > 0
        camera = self.camera_3d if mode == "cube" else self.camera_2d
        if self.viewbox.camera is not camera:
            self.viewbox.camera = camera
            self.reset_camera()

    def _update_link_positions(self) -> None:
        if not len(self._link_sites):
            self.links.set_positions(np.zeros((0, 3)))
            self.endpoints.set_positions(np.zeros((0, 3)))
            self._apply_mode()
            return
        dim = self.dim
        coords = np.stack(np.unravel_index(self._link_sites.reshape(-1), self.shape), axis=1)  # (2R, dim)
        if dim == 2:
            positions = np.column_stack([coords[:, 1] + 0.5, coords[:, 0] + 0.5, np.zeros(len(coords))])
        elif self.mode_3d == "unfold":
            flat = UnfoldLayout(self.L).unfold_positions(coords) + 0.5
            positions = np.column_stack([flat, np.zeros(len(coords))])
        else:
            positions = coords[:, ::-1] + 0.5  # (x, y, z)
        # in the 3D block the links are seen through the cells: thinner marks keep the cube readable
        see_through = dim == 3 and self.mode_3d == "cube"
        colour = self.link_colour[:3] + ((0.45,) if see_through else (self.link_colour[3],))
        self.links.set_style(colour, 11.0)
        self.endpoints.set_style(colour, 6.0 if see_through else 11.0)
        self.links.set_positions(positions)
        self.endpoints.set_positions(np.unique(positions, axis=0))
        self._update_link_top()
        self._apply_mode()

    def _update_link_top(self) -> None:
        top = self.L - self.peel if self.dim == 3 and self.mode_3d == "cube" else 1e9
        self.links.set_top(top)
        self.endpoints.set_top(top)
