"""A key to the colours of the field view: what each colour of the picture means, drawn over the view.

A picture (sim/picture.py) may say what its colours mean: ``legend``, (label, code) pairs for the kinds of cell
of a model with discrete states (Ising: spin down, spin up, flipped, rewired), and ``colour_bar`` for a real
field (label, unit, the values at the two ends of the colormap). ``LegendOverlay`` draws both in one small
panel: a swatch in the palette colour of each code beside its label, and a vertical bar of the palette's
colormap with the values at its ends and middle. The colours are taken from the picture's own palette, so the
key cannot disagree with the cells.

The panel lives in the pixels of the view's ViewBox (not in the scene, so it neither zooms nor rotates with
the camera) and goes to the corner of the view where it covers the fewest cells -- none when the view has room
beside or above the lattice. ``visible`` hides it. No Qt here: the window adds a menu action for that.

It is built only when what it shows changes (another legend, colour bar or palette), never per frame.
"""
from __future__ import annotations

import numpy as np
from vispy import scene
from vispy.visuals.transforms import STTransform

from latticelab.render.plots import one_font_manager
from latticelab.sim.picture import SCALAR_LEVELS

TEXT = (0.92, 0.92, 0.92, 1.0)
PANEL = (0.06, 0.06, 0.08, 0.78)
SWATCH_BORDER = (0.75, 0.75, 0.78, 1.0)
FONT_SIZE = 8
PAD = 6              # pixels inside the panel's edge
ROW = 16             # height of one legend row
SWATCH = 12          # side of a colour swatch
BAR = (12, 84)       # width and height of the colour bar (short: the key should fit beside the cells)
MARGIN = 6           # between the panel and the view's edge
CHAR = 6.6           # estimated width of one character at FONT_SIZE (the panel is sized from the labels)


class LegendOverlay:
    """The key of ``field_view``'s picture (render/field_view.py: FieldView), redrawn whenever the view shows a
    picture whose key differs. ``swatches`` and ``bar`` say where things are, in canvas pixels (tests, pickers)."""

    def __init__(self, field_view, visible: bool = True):
        self.field_view = field_view
        self.viewbox = field_view.viewbox
        self.node = scene.Node(parent=self.viewbox, name="legend")
        self.node.order = 1000                       # after the field's scene
        self.node.transform = STTransform()
        self.mesh = scene.visuals.Mesh(parent=self.node)
        self.mesh.set_gl_state("translucent", depth_test=False, cull_face=False)
        with one_font_manager():
            self.text = scene.visuals.Text("", color=TEXT, font_size=FONT_SIZE, anchor_x="left",
                                           anchor_y="center", parent=self.node)
        self.text.set_gl_state("translucent", depth_test=False)
        self.size = (0, 0)                # of the panel, in pixels
        self.offset = (0.0, 0.0)          # of its top-left corner in the ViewBox
        self.labels: tuple[str, ...] = ()
        self.legend: tuple = ()           # of the last picture shown: (label, code) pairs
        self.colour_bar = None            # of the last picture shown: a ColourBar or None
        self._swatches: list = []         # (label, code, (x, y, w, h) in panel pixels)
        self._bar = None                  # (x, y, w, h) in panel pixels, or None
        self.note = ""                    # a line under the key, without a swatch (``set_note``)
        self._last_picture = None
        self._key = None
        self._visible = visible
        self.node.visible = False
        field_view.overlays.append(self)
        self.viewbox.events.resize.connect(lambda event=None: self.place())
        canvas = self.viewbox.canvas
        if canvas is not None:   # the camera moves the cells between pictures: follow them before each draw
            canvas.events.draw.connect(lambda event=None: self.place(), position="first")

    # ---- showing -----------------------------------------------------------------------------
    @property
    def visible(self) -> bool:
        return self._visible

    @visible.setter
    def visible(self, on: bool) -> None:
        self._visible = bool(on)
        self.node.visible = self._visible and self.size != (0, 0)
        self.place()

    @property
    def has_content(self) -> bool:
        return self.size != (0, 0)

    def show(self, picture) -> None:
        """Take the key of ``picture``; rebuilt only when the legend, colour bar or palette differ from the last."""
        self._last_picture = picture
        palette = np.asarray(picture.palette, np.float32)
        key = (tuple(picture.legend), picture.colour_bar, palette.tobytes(), self.note)
        if key == self._key:
            return
        self._key = key
        self.legend, self.colour_bar = tuple(picture.legend), picture.colour_bar
        self._build(self.legend, self.colour_bar, palette)
        self.node.visible = self._visible and self.has_content
        self.place()

    def set_note(self, text: str) -> None:
        """A line of text under the key (what the picture leaves out, e.g. the highlight); "" for none."""
        if text == self.note:
            return
        self.note = text
        if self._last_picture is not None:
            self.show(self._last_picture)

    def _build(self, legend, colour_bar, palette) -> None:
        quads, colours, texts, positions = [], [], [], []
        self._swatches, self._bar = [], None
        y = PAD
        width = 0.0
        if colour_bar is not None:
            texts.append(colour_bar.title)
            positions.append((PAD, y + ROW / 2))
            width = max(width, CHAR * len(colour_bar.title))
            y += ROW
            bar_w, bar_h = BAR
            # one quad per colormap level, the highest value at the top
            edges = np.linspace(y + bar_h, y, SCALAR_LEVELS + 1)
            for level in range(SCALAR_LEVELS):
                quads.append((PAD, edges[level + 1], bar_w, edges[level] - edges[level + 1]))
                colours.append(palette[level])
            self._bar = (PAD, y, bar_w, bar_h)
            for value, at in ((colour_bar.vmax, y), (0.5 * (colour_bar.vmin + colour_bar.vmax), y + bar_h / 2),
                              (colour_bar.vmin, y + bar_h)):
                texts.append(f"{value:.3g}")
                positions.append((PAD + bar_w + 5, at))
            width = max(width, bar_w + 5 + CHAR * 7)
            y += bar_h + PAD
        for label, code in legend:
            top = y + (ROW - SWATCH) / 2
            quads.append((PAD - 1, top - 1, SWATCH + 2, SWATCH + 2))       # a light rim: black swatches stay seen
            colours.append(SWATCH_BORDER)
            quads.append((PAD, top, SWATCH, SWATCH))
            colours.append(palette[code])
            self._swatches.append((label, code, (PAD, top, SWATCH, SWATCH)))
            texts.append(label)
            positions.append((PAD + SWATCH + 6, y + ROW / 2))
            width = max(width, SWATCH + 6 + CHAR * len(label))
            y += ROW
        if self.note and quads:
            texts.append(self.note)
            positions.append((PAD, y + ROW / 2))
            width = max(width, CHAR * len(self.note))
            y += ROW
        if not quads:
            self.size, self.labels = (0, 0), ()
            return
        self.size = (int(np.ceil(width + 2 * PAD)), int(np.ceil(y + PAD - 2)))
        quads.insert(0, (0, 0) + self.size)                                 # the panel behind everything
        colours.insert(0, PANEL)
        vertices, faces = _quad_mesh(quads)
        face_colours = np.repeat(np.asarray(colours, np.float32), 2, axis=0)
        self.mesh.set_data(vertices=vertices, faces=faces, face_colors=face_colours)
        self.labels = tuple(texts)
        self.text.text = list(texts)
        self.text.pos = np.asarray(positions, np.float32)

    # ---- where -------------------------------------------------------------------------------
    def place(self) -> None:
        """Move the panel to the corner of the view where it covers the fewest cells."""
        if not self.has_content or not self._visible:
            return
        view_w, view_h = (float(v) for v in self.viewbox.size)
        w, h = self.size
        corners = ((view_w - w - MARGIN, MARGIN), (MARGIN, MARGIN),                 # top right, top left,
                   (view_w - w - MARGIN, view_h - h - MARGIN), (MARGIN, view_h - h - MARGIN))  # then bottom
        field = self._field_rect()
        best = min(corners, key=lambda c: _overlap((c[0], c[1], w, h), field))      # first corner wins ties
        best = (float(round(best[0])), float(round(best[1])))
        if best != self.offset:
            self.offset = best
            self.node.transform.translate = (best[0], best[1], 0, 0)

    def overlap_with_cells(self) -> float:
        """Pixels of the cells' bounding box the panel covers now (0 when it found room beside them)."""
        if not self.has_content or not self._visible:
            return 0.0
        return _overlap(self.offset + tuple(float(v) for v in self.size), self._field_rect())

    def _field_rect(self) -> tuple[float, float, float, float]:
        """(x, y, w, h) of the cells' bounding box in ViewBox pixels."""
        view = self.field_view
        if view.active_mode == "cube":
            L = float(view.L)
            corners = np.array([[x, y, z] for x in (0, L) for y in (0, L) for z in (0, L)])
        else:
            width, height = view._extent_2d()
            corners = np.array([[0, 0], [width, 0], [0, height], [width, height]], float)
        try:
            canvas_xy = view.world_to_canvas(corners)
            local = self.viewbox.get_transform("canvas", "visual").map(canvas_xy)
        except Exception:     # no canvas yet (not shown): assume the cells fill the view
            return (0.0, 0.0) + tuple(float(v) for v in self.viewbox.size)
        xy = local[:, :2] / local[:, 3:4]
        lo, hi = xy.min(axis=0), xy.max(axis=0)
        return float(lo[0]), float(lo[1]), float(hi[0] - lo[0]), float(hi[1] - lo[1])

    # ---- where things are, in canvas pixels -------------------------------------------------------
    def _to_canvas(self, rect) -> tuple[float, float, float, float]:
        x, y, w, h = rect
        mapped = self.mesh.get_transform("visual", "canvas").map([[x, y], [x + w, y + h]])
        (x0, y0), (x1, y1) = mapped[:, :2] / mapped[:, 3:4]
        return float(min(x0, x1)), float(min(y0, y1)), float(abs(x1 - x0)), float(abs(y1 - y0))

    @property
    def swatches(self) -> list[tuple[str, int, tuple[float, float, float, float]]]:
        """(label, code, (x, y, w, h) in canvas pixels) of each swatch shown."""
        return [(label, code, self._to_canvas(rect)) for label, code, rect in self._swatches]

    @property
    def bar(self) -> tuple[float, float, float, float] | None:
        """(x, y, w, h) of the colour bar in canvas pixels (vmax at the top), or None."""
        return None if self._bar is None else self._to_canvas(self._bar)

    @property
    def panel(self) -> tuple[float, float, float, float]:
        """(x, y, w, h) of the whole panel in canvas pixels."""
        return self._to_canvas((0, 0) + self.size)


def _quad_mesh(quads) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (4 per quad, z = 0) and faces (2 triangles per quad) of axis-aligned rectangles (x, y, w, h)."""
    q = np.asarray(quads, np.float32)
    x0, y0, x1, y1 = q[:, 0], q[:, 1], q[:, 0] + q[:, 2], q[:, 1] + q[:, 3]
    vertices = np.stack([np.stack([x0, y0], 1), np.stack([x1, y0], 1), np.stack([x1, y1], 1),
                         np.stack([x0, y1], 1)], axis=1).reshape(-1, 2)
    vertices = np.column_stack([vertices, np.zeros(len(vertices), np.float32)])
    base = (np.arange(len(q)) * 4)[:, None]
    faces = np.concatenate([base + [0, 1, 2], base + [0, 2, 3]], axis=1).reshape(-1, 3).astype(np.uint32)
    return vertices, faces


def _overlap(a, b) -> float:
    """Area shared by two rectangles (x, y, w, h)."""
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    return max(w, 0.0) * max(h, 0.0)
