"""The Study dock's plot as a VisPy scene view, no Qt: one measure of a study against a parameter as points
with error bars joined by lines, one colour per series (a value of a second parameter, a branch of a ramp) with
a legend; for a critical-temperature study -- the Binder cumulant U, the heat capacity C_v or the
susceptibility chi against T, one series per lattice size L -- the estimated T_c as a vertical line with its
error band and a caption (thesis 003, figures 7.26 and 7.27).

The data come ready from sim/studies/tc.py (``curve_points``, ``analyse_group``): this module only draws.
"""
from __future__ import annotations

import math

import numpy as np
from vispy import scene

from latticelab.render.spectral import TEXT, _Plot

# one saturated colour per L, far apart in hue, so each series can be found in the rendered pixels
SERIES_COLOURS = ((1.0, 0.35, 0.3, 1.0), (0.3, 0.7, 1.0, 1.0), (0.35, 0.9, 0.35, 1.0), (1.0, 0.8, 0.2, 1.0),
                  (0.8, 0.45, 1.0, 1.0), (0.2, 0.95, 0.9, 1.0), (1.0, 0.5, 0.85, 1.0), (0.85, 0.85, 0.85, 1.0))
MARK_COLOUR = (0.95, 0.95, 0.95, 1.0)
BAND_COLOUR = (1.0, 1.0, 1.0, 0.3)
QUANTITIES = {   # table column -> (plot title, y-axis label)
    "binder": ("Binder cumulant U(T)", "U"),
    "heat_capacity": ("heat capacity per spin C_v(T)", "C_v"),
    "susceptibility": ("susceptibility per spin chi(T)", "chi"),
}
MARKER_SIZE = 9
LEGEND_WIDTH = 70      # pixels from the right edge of the plot where the legend starts
LEGEND_LINE = 15       # pixels between legend lines
LEGEND_CHAR = 6        # pixels a legend character takes (font size 7), for long series names


def series_colour(index: int) -> tuple:
    return SERIES_COLOURS[index % len(SERIES_COLOURS)]


class StudyPlot(_Plot):
    """``set_data(curves, quantity, t_c)``: curves maps L -> (T, mean, error) arrays (tc.curve_points);
    ``t_c`` is (T_c, error) or None. ``colours`` maps each shown L to its colour."""

    def __init__(self, parent_grid):
        title, y_label = QUANTITIES["binder"]
        super().__init__(parent_grid, title, "T", y_label)
        self.y_axis.axis.axis_label_margin = 40
        self.lines = scene.visuals.Line(np.zeros((2, 2), np.float32), connect="segments", width=1.5,
                                        parent=self.view.scene)
        self.mark = scene.visuals.Line(np.zeros((2, 2), np.float32), color=MARK_COLOUR, width=2,
                                       parent=self.view.scene)
        self.band = scene.visuals.Line(np.zeros((4, 2), np.float32), color=BAND_COLOUR, connect="segments",
                                       width=1, parent=self.view.scene)
        self.markers = scene.visuals.Markers(parent=self.view.scene)            # drawn last: on top
        self.markers.set_data(np.zeros((1, 2), np.float32))    # empty Markers have no bounds
        # captions in the view's own pixel frame (children of the view box, not of its scene)
        # (the view's y axis points down, so a text hanging below its position is anchored at its "bottom")
        self.caption = scene.visuals.Text("", color=TEXT, font_size=7, anchor_x="left", anchor_y="bottom",
                                          pos=(8, 6), parent=self.view)
        self.legend: list = []
        self.view.events.resize.connect(lambda event: self._place_legend())
        for visual in (self.lines, self.markers, self.mark, self.band):
            visual.visible = False
        self.quantity = "binder"
        self.curves: dict = {}
        self.colours: dict = {}
        self.t_c = None

    def set_data(self, curves: dict, quantity: str = "binder", t_c: tuple[float, float] | None = None,
                 x_label: str = "T", label: str | None = None) -> None:
        """``curves``: series -> (x, mean, error), in legend order (an int series is a size: "L = 8"); ``quantity``
        a table column (the Binder-study ones have their own titles), ``label`` its name for people."""
        self.quantity, self.curves, self.t_c = quantity, dict(curves), t_c
        title, y_label = QUANTITIES.get(quantity, (f"{label or quantity} against {x_label}", quantity))
        self.title.text = title
        self.y_axis.axis.axis_label = y_label
        self.x_axis.axis.axis_label = x_label
        self.colours = {key: series_colour(i) for i, key in enumerate(curves)}
        self._draw_series()
        self._draw_legend()
        xs = [c[0] for c in curves.values()]
        ys = [np.concatenate([c[1] - c[2], c[1] + c[2]]) for c in curves.values()]
        x = np.concatenate(xs) if xs else np.zeros(0)
        y = np.concatenate(ys) if ys else np.zeros(0)
        self._draw_t_c(x, y)
        if x.size:
            pad = 0.04 * (float(x.max() - x.min()) or 1.0)
            x = np.concatenate([x, [x.min() - pad, x.max() + pad]])
        if y.size:
            top = float(y.max() + 0.25 * ((y.max() - y.min()) or 1.0))   # room for the captions
            y = np.concatenate([y, [top]])
        self._fit(x, y)

    def _draw_series(self) -> None:
        points, point_colours, segments, segment_colours = [], [], [], []
        for L, (T, mean, err) in self.curves.items():
            colour = self.colours[L]
            xy = np.column_stack([T, mean])
            points.append(xy)
            point_colours += [colour] * len(T)
            for a, b in zip(xy[:-1], xy[1:]):                       # the curve
                segments += [a, b]
            for t, m, e in zip(T, mean, err):                       # error bars
                if e > 0:
                    segments += [(t, m - e), (t, m + e)]
            segment_colours += [colour] * (len(segments) - len(segment_colours))
        if points:
            self.markers.set_data(np.concatenate(points).astype(np.float32), face_color=np.array(point_colours),
                                  edge_color=(0.05, 0.05, 0.05, 1.0), edge_width=1, size=MARKER_SIZE)
        self.markers.visible = bool(points)
        if segments:
            self.lines.set_data(np.array(segments, np.float32), color=np.array(segment_colours, np.float32))
        self.lines.visible = bool(segments)

    def _draw_legend(self) -> None:
        for text in self.legend:
            text.parent = None
        self.legend = [scene.visuals.Text(f"L = {L}" if isinstance(L, int) else str(L), color=colour, font_size=7,
                                          anchor_x="left", anchor_y="bottom",
                                          parent=self.view) for L, colour in self.colours.items()]
        self._place_legend()

    def _place_legend(self) -> None:
        width = float(self.view.size[0])
        room = max([LEGEND_WIDTH] + [LEGEND_CHAR * len(t.text) + 8 for t in self.legend])
        for i, text in enumerate(self.legend):
            text.pos = (max(width - room, 8.0), 6 + LEGEND_LINE * i)

    def _draw_t_c(self, x, y) -> None:
        t_c = self.t_c
        shown = t_c is not None and t_c[0] is not None and math.isfinite(t_c[0]) and y.size > 0
        self.mark.visible = self.band.visible = False
        if not shown:
            self.caption.text = ""
            return
        T, err = float(t_c[0]), float(t_c[1])
        lo, hi = float(y.min()), float(y.max() + 0.25 * ((y.max() - y.min()) or 1.0))
        self.mark.set_data(np.array([[T, lo], [T, hi]], np.float32))
        self.mark.visible = True
        if math.isfinite(err) and err > 0:
            self.band.set_data(np.array([[T - err, lo], [T - err, hi], [T + err, lo], [T + err, hi]], np.float32))
            self.band.visible = True
        self.caption.text = f"T_c = {T:.5g}" + (f" ± {err:.2g}" if math.isfinite(err) else "")

    def data_to_canvas(self, xy) -> np.ndarray:
        """Canvas pixel coordinates (x right, y down) of data points (N, 2): where a test looks for them."""
        transform = self.view.scene.node_transform(self.view.canvas.scene)
        return transform.map(np.asarray(xy, np.float64))[:, :2]
