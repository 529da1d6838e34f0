"""Plots of the Graph dock (issue 12) as VisPy scene views, no Qt: the degree distribution and the small-world
curve (Watts & Strogatz's figure 2: clustering and path length relative to p = 0 against log10 p)."""
from __future__ import annotations

import numpy as np
from vispy import scene

from latticelab.render.spectral import _Plot

DEGREE_COLOUR = (0.95, 0.75, 0.2, 1.0)
CLUSTER_COLOUR = (0.35, 0.75, 1.0, 1.0)
PATH_COLOUR = (0.95, 0.45, 0.35, 1.0)
MARK_COLOUR = (0.85, 0.85, 0.85, 0.6)


class DegreePlot(_Plot):
    """Vertices per degree, as a step line (log10 of the count + 1, so hubs of scale-free graphs show)."""

    def _steps(self, parent_grid):
        yield from super()._steps(parent_grid, "degree distribution", "degree", "log10(1 + vertices)")
        self.line = scene.visuals.Line(np.zeros((2, 2), np.float32), color=DEGREE_COLOUR, width=2,
                                       parent=self.view.scene)
        self.data = None
        yield "line"

    def set_data(self, histogram) -> None:
        """Draw ``histogram`` (vertices per degree); an empty one clears the plot."""
        counts = np.asarray(histogram, np.float64)
        self.line.visible = counts.size > 0
        if counts.size == 0:
            self.data = None
            return
        self.data = counts
        x = np.repeat(np.arange(counts.size + 1, dtype=np.float64) - 0.5, 2)[1:-1]
        y = np.repeat(np.log10(1 + counts), 2)
        pts = np.column_stack([np.concatenate([[x[0]], x, [x[-1]]]), np.concatenate([[0], y, [0]])])
        self.line.set_data(pts.astype(np.float32))
        self._fit(pts[:, 0], pts[:, 1])


class SmallWorldPlot(_Plot):
    """C(p)/C(0) (blue) and l(p)/l(0) (red) against log10 p, points added as they arrive; a vertical line
    marks the running model's p."""

    def _steps(self, parent_grid):
        yield from super()._steps(parent_grid, "small world: C(p)/C(0) blue, l(p)/l(0) red", "log10 p", "ratio")
        self.clustering = scene.visuals.Markers(parent=self.view.scene)
        self.path = scene.visuals.Markers(parent=self.view.scene)
        for markers in (self.clustering, self.path):   # empty Markers have no bounds: a hidden point until data
            markers.set_data(np.zeros((1, 2), np.float32))
            markers.visible = False
        self.mark = scene.visuals.Line(np.zeros((2, 2), np.float32), color=MARK_COLOUR, width=1,
                                       parent=self.view.scene)
        self.data = None
        self.current_p = None
        yield "markers"

    def set_data(self, p, clustering_ratio, path_ratio, current_p: float | None = None) -> None:
        x = np.log10(np.asarray(p, np.float64))
        c = np.nan_to_num(np.asarray(clustering_ratio, np.float64))
        l_ = np.asarray(path_ratio, np.float64)
        self.data = (x, c, l_)
        self.current_p = current_p
        if x.size:
            self.clustering.set_data(np.column_stack([x, c]).astype(np.float32), face_color=CLUSTER_COLOUR, size=7)
            self.path.set_data(np.column_stack([x, l_]).astype(np.float32), face_color=PATH_COLOUR, size=7)
        self.clustering.visible = self.path.visible = bool(x.size)
        lo, hi = (float(x.min()), float(x.max())) if x.size else (-4.0, 0.0)
        if current_p is not None and current_p > 0:
            xm = float(np.log10(current_p))
            self.mark.set_data(np.array([[xm, 0], [xm, 1.05]], np.float32))
            self.mark.visible = True
            lo, hi = min(lo, xm), max(hi, xm)
        else:
            self.mark.visible = False
        self._fit(np.array([lo, hi]), np.array([0.0, 1.0]))
