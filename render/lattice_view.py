"""The lattice view: 2D image, 3D block with peeling, or 3D unfolded grid, inside one VisPy ViewBox.

It takes state codes (render/upload.py: encode_state) as NumPy or CuPy arrays and knows nothing of Qt:
the window (app/) owns the canvas and passes a ViewBox in; a headless EGL canvas works the same way.
The owner gives the canvas ``bgcolor=palette.BACKGROUND``; the view draws no background of its own, since a
ViewBox bgcolor is one more full-view VisPy program per frame, about as costly on the host as the lattice.
"""
from __future__ import annotations

import numpy as np
from vispy import scene

from latticelab.render import interop, palette
from latticelab.render.unfold import UnfoldLayout
from latticelab.render.visuals import LatticeCube, LatticeImage, LinkGeometry, UnfoldedLattice, state_texture

MODES_3D = ("cube", "unfold")
MAX_LINKS_DRAWN = 20_000


class LatticeView:
    """Shows one lattice state; ``set_state`` picks 2D or 3D from the array's shape."""

    def __init__(self, viewbox: scene.widgets.ViewBox):
        self.viewbox = viewbox  # no bgcolor: the canvas's clear colour (palette.BACKGROUND) is the background
        self.texture_3d = state_texture(3)
        self.image = LatticeImage(parent=viewbox.scene)
        self.cube = LatticeCube(texture=self.texture_3d, parent=viewbox.scene)
        self.unfolded = UnfoldedLattice(self.texture_3d, parent=viewbox.scene)
        self.links = LinkGeometry(False, palette.LINK, parent=viewbox.scene)
        self.endpoints = LinkGeometry(True, palette.LINK, parent=viewbox.scene)
        self.links.order = self.endpoints.order = 10  # drawn after the lattice
        self.camera_2d = scene.PanZoomCamera(aspect=1, flip=(False, True, False))
        self.camera_3d = scene.TurntableCamera(fov=30, elevation=28, azimuth=-35)
        self.dim = 2
        self.L = 1
        self.mode_3d = "cube"
        self.peel = 0
        self.show_flipped = True
        self.show_rewired = False
        self.links_shown = 0
        self.links_total = 0
        self._link_sites = np.zeros((0, 2), np.int64)
        self._apply_mode()

    # ---- data --------------------------------------------------------------------------------
    def set_state(self, state) -> None:
        """Show uint8 state codes of shape (L, L) or (L, L, L); NumPy or CuPy."""
        self._show(state, "state", lambda visual: visual.set_state(state))

    def show_spins(self, xp, spins, flipped=None, rewired_mask=None) -> None:
        """Show spins and optional bool masks, encoded on the arrays' own device (``xp``); on a CUDA-GL
        canvas straight into the texture (render/upload.py: upload_state)."""
        self._show(spins, "spins", lambda visual: visual.set_spins(xp, spins, flipped, rewired_mask))

    def before_step(self) -> None:
        """Call before advancing the simulation whose state the next ``show_spins``/``set_state`` shows: on a
        CUDA-GL canvas the lattice texture is mapped for CUDA now, so step and texture write run as one CUDA
        phase (render/interop.py: CanvasInterop.acquire). A draw without that upload is still safe."""
        canvas = self.viewbox.canvas
        if canvas is not None:
            interop.interop_for(canvas).acquire()

    def _show(self, array, name: str, upload) -> None:
        dim, L = array.ndim, array.shape[0]
        if dim not in (2, 3) or any(n != L for n in array.shape):
            raise ValueError(f"{name}: must be a square (L, L) or cubic (L, L, L) array; got shape {array.shape}")
        geometry_changed = (dim, L) != (self.dim, self.L)
        self.dim, self.L = dim, L
        if dim == 2:
            upload(self.image)
        else:
            upload(self.cube)
            if geometry_changed:
                self.unfolded.set_layout(UnfoldLayout(L))
            self.unfolded.update()
        if geometry_changed:
            self.peel = min(self.peel, L - 1)
            self.cube.set_peel(self.peel)
            self._apply_mode()
            self._update_link_positions()
            self.reset_camera()

    def set_links(self, edges, L: int, dim: int) -> None:
        """Rewired links to draw: (R, 2) flat site indices (None or empty: no links)."""
        edges = np.zeros((0, 2), np.int64) if edges is None else np.asarray(edges, np.int64).reshape(-1, 2)
        self.links_total = len(edges)
        if len(edges) > MAX_LINKS_DRAWN:  # an even subsample keeps the picture representative
            edges = edges[np.linspace(0, len(edges) - 1, MAX_LINKS_DRAWN).astype(np.int64)]
        self._link_sites = edges
        self._link_geometry = (L, dim)
        self.links_shown = len(edges)
        self._update_link_positions()

    # ---- options -----------------------------------------------------------------------------
    def set_mode_3d(self, mode: str) -> None:
        if mode not in MODES_3D:
            raise ValueError(f"mode: must be one of {', '.join(MODES_3D)}; got {mode!r}")
        if mode != self.mode_3d:
            self.mode_3d = mode
            self._apply_mode()
            self._update_link_positions()
            self.reset_camera()

    def set_peel(self, layers: int) -> None:
        """Remove ``layers`` layers from the top of the 3D block (0 .. L-1)."""
        self.peel = int(min(max(layers, 0), max(self.L - 1, 0)))
        self.cube.set_peel(self.peel)
        self._update_link_top()

    def set_highlights(self, show_flipped: bool, show_rewired: bool) -> None:
        self.show_flipped, self.show_rewired = bool(show_flipped), bool(show_rewired)
        for visual in (self.image, self.cube, self.unfolded):
            visual.set_palette(self.show_flipped, self.show_rewired)
        self._apply_mode()

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

    @property
    def active_mode(self) -> str:
        return "2d" if self.dim == 2 else self.mode_3d

    def _extent_2d(self) -> tuple[float, float]:
        if self.dim == 3:
            return self.unfolded.layout.extent
        return self.L, self.L

    def _apply_mode(self) -> None:
        mode = self.active_mode
        self.image.visible = mode == "2d"
        self.cube.visible = mode == "cube"
        self.unfolded.visible = mode == "unfold"
        self.links.visible = self.endpoints.visible = self.show_rewired and self.links_shown > 0
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
        L, dim = self._link_geometry
        coords = np.stack(np.unravel_index(self._link_sites.reshape(-1), (L,) * dim), axis=1)  # (2R, dim)
        if dim == 2:
            positions = np.column_stack([coords[:, 1] + 0.5, coords[:, 0] + 0.5, np.zeros(len(coords))])
        elif self.mode_3d == "unfold":
            flat = UnfoldLayout(L).unfold_positions(coords) + 0.5
            positions = np.column_stack([flat, np.zeros(len(coords))])
        else:
            positions = coords[:, ::-1] + 0.5  # (x, y, z)
        # in the 3D block the links are seen through the cells: thinner marks keep the cube readable
        see_through = dim == 3 and self.mode_3d == "cube"
        colour = palette.LINK[:3] + ((0.45,) if see_through else (palette.LINK[3],))
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
