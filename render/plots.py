"""Live plots: one scrolling line per observable, each with its own y axis, sharing the step axis.

Built inside a VisPy scene widget (``canvas.central_widget`` or any grid cell); no Qt involved.
"""
from __future__ import annotations

import numpy as np
from vispy import scene

import contextlib

import vispy.visuals.text.text as vispy_text

from latticelab.render.visuals import Polyline

PLOT_BACKGROUND = (0.11, 0.11, 0.13, 1.0)
TEXT = (0.85, 0.85, 0.85, 1.0)
COLOURS = ((0.95, 0.75, 0.2, 1.0), (0.35, 0.75, 1.0, 1.0), (0.4, 0.95, 0.45, 1.0), (0.7, 0.55, 1.0, 1.0),
           (1.0, 0.5, 0.45, 1.0), (0.3, 0.9, 0.9, 1.0), (0.9, 0.9, 0.9, 1.0))


def series_for(observables) -> tuple:
    """(key, title, colour) for each declared observable (sim/model.py: Observable), then the running
    standard deviation of those declared with ``spread`` (keys ``<name>_std``, as sim/runner.py records)."""
    rows = [(o.name, f"{o.label}{f' [{o.unit}]' if o.unit else ''}") for o in observables]
    rows += [(f"{o.name}_std", f"std of {o.label} (window)") for o in observables if o.spread]
    return tuple((key, title, COLOURS[i % len(COLOURS)]) for i, (key, title) in enumerate(rows))


class LivePlots:
    """Stacked plots of ``series`` ((key, title, colour) rows, see ``series_for``); ``update(times, values)``
    redraws them over the given times (steps or simulated time, ``x_label``)."""

    def __init__(self, parent_widget, series, x_label: str = "step"):
        self.x_label = x_label
        with one_font_manager():
            self._build(parent_widget, series)

    def _build(self, parent_widget, series) -> None:
        self.parent_widget = parent_widget
        self.grid = parent_widget.add_grid(spacing=0, margin=4)
        self.series = series
        self.views, self.lines = {}, {}
        for row, (key, title, colour) in enumerate(series):
            cell = self.grid.add_grid(row=row, col=0, spacing=0)
            label = scene.Label(title, color=TEXT, font_size=7)
            label.height_max = 16
            cell.add_widget(label, row=0, col=1)
            y_axis = scene.AxisWidget(orientation="left", text_color=TEXT, axis_color=TEXT, tick_color=TEXT,
                                      axis_font_size=6, tick_font_size=6, tick_label_margin=4)
            y_axis.width_max = 52
            cell.add_widget(y_axis, row=1, col=0)
            view = cell.add_view(row=1, col=1, bgcolor=PLOT_BACKGROUND, border_color=(0.3, 0.3, 0.35))
            view.camera = scene.PanZoomCamera(interactive=False)
            y_axis.link_view(view)
            self.lines[key] = Polyline(colour, parent=view.scene)
            self.views[key] = view
        bottom = self.grid.add_grid(row=len(series), col=0, spacing=0)
        bottom.height_max = 26
        spacer = bottom.add_widget(row=0, col=0)
        spacer.width_max = 52
        self.x_axis = scene.AxisWidget(orientation="bottom", text_color=TEXT, axis_color=TEXT, tick_color=TEXT,
                                       axis_font_size=6, tick_font_size=6, tick_label_margin=12)
        bottom.add_widget(self.x_axis, row=0, col=1)

    def update(self, steps, values: dict) -> None:
        """steps: (n,) step numbers; values[key]: (n,) floats (NaN where undefined)."""
        steps = np.asarray(steps, np.float64)
        x0, x1 = (steps[0], steps[-1]) if len(steps) else (0.0, 1.0)
        if x1 <= x0:
            x1 = x0 + 1.0
        for key, _, _ in self.series:
            y = np.asarray(values.get(key, ()), np.float64)
            valid = np.isfinite(y)
            points = np.column_stack([steps[valid] - x0, y[valid]]) if len(y) == len(steps) else np.zeros((0, 2))
            self.lines[key].set_points(points)
            y0, y1 = _padded_range(points[:, 1]) if len(points) else (0.0, 1.0)
            # x is drawn relative to x0 so float32 vertices stay exact after millions of steps
            self.views[key].camera.rect = (0.0, y0, x1 - x0, y1 - y0)
        self.x_axis.axis.domain = (x0, x1)

    def remove(self) -> None:
        """Take the plots out of their parent widget (before plots of another model are made)."""
        self.parent_widget.remove_widget(self.grid)
        self.grid.parent = None

    def clear(self) -> None:
        self.update(np.zeros(0), {})


def _padded_range(y: np.ndarray, min_span: float = 1e-3) -> tuple[float, float]:
    lo, hi = float(y.min()), float(y.max())
    span = max(hi - lo, min_span, 1e-3 * max(abs(lo), abs(hi)))
    middle = 0.5 * (lo + hi)
    return middle - 0.55 * span, middle + 0.55 * span


@contextlib.contextmanager
def one_font_manager():
    """Let every text visual created inside share one font manager. VisPy otherwise renders each glyph
    again for every label and axis, which takes seconds on software GL. All of them live in this canvas."""
    shared = vispy_text.FontManager()
    original = vispy_text.FontManager
    vispy_text.FontManager = lambda method="cpu": shared
    try:
        yield
    finally:
        vispy_text.FontManager = original
