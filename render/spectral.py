"""2D FFT magnitude image (thesis 003, figure 7.18), spherical-mean plot (figure 7.16) and cluster-size
histogram (figure 7.17) as VisPy scene views; no Qt.

Magnitudes and counts are never negative, so those axes start at zero; the histogram's two lines carry a key
in their own colours.

The image is reduced on the array's own device before it crosses to the host: a spectrum larger than
``MAX_IMAGE`` per side is block-reduced by the maximum (so single bright modes stay visible).
"""
from __future__ import annotations

import numpy as np
from vispy import scene

from latticelab.render.plots import TITLE_SPILL, X_AXIS_SPILL, Y_AXIS_SPILL
from latticelab.sim.analysis.spectral import SphericalMean, SphericalSummary
from latticelab.sim.backend import to_numpy

TEXT = (0.85, 0.85, 0.85, 1.0)
BACKGROUND = (0.11, 0.11, 0.13, 1.0)
MEAN_COLOUR = (0.35, 0.75, 1.0, 1.0)
SPREAD_COLOUR = (0.35, 0.75, 1.0, 0.45)
HIST_COLOUR = (0.95, 0.75, 0.2, 1.0)
HIST_DOWN_COLOUR = (0.4, 0.95, 0.45, 1.0)
MAX_IMAGE = 1024


def display_image(magnitude, gamma: float = 0.5, max_side: int = MAX_IMAGE) -> np.ndarray:
    """Greyscale image in [0, 1] on the host: magnitude / max, raised to ``gamma`` (black = weakest)."""
    if getattr(magnitude, "ndim", None) != 2:
        raise ValueError(f"magnitude must be a 2D array; got shape {getattr(magnitude, 'shape', None)}")
    m = magnitude
    factor = int(np.ceil(max(m.shape) / max_side))
    if factor > 1:
        h, w = (m.shape[0] // factor) * factor, (m.shape[1] // factor) * factor
        m = m[:h, :w].reshape(h // factor, factor, w // factor, factor).max(axis=(1, 3))
    top = float(m.max())
    m = m / (top if top > 0 else 1.0)
    if gamma != 1.0:
        m = m ** gamma
    return to_numpy(m).astype(np.float32, copy=False)


NICE_STEPS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten that is at least ``value`` > 0."""
    if not np.isfinite(value) or value <= 0:
        return value
    power = 10.0 ** np.floor(np.log10(value))
    for step in NICE_STEPS:
        if step * power >= value * (1 - 1e-12):
            return float(step * power)
    return float(10 * power)


def _own_init(cls):
    """The ``__init__`` that calling ``cls`` runs: the first class of its MRO up to ``_Plot`` defining one."""
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            return vars(klass)["__init__"]
    return object.__init__


class SpectrumImageView:
    """The 2D magnitude as a greyscale image with frequency zero at its centre."""

    def __init__(self, view: "scene.widgets.ViewBox", gamma: float = 0.5):
        self.view = view
        self.gamma = gamma
        self.image = scene.visuals.Image(np.zeros((2, 2), np.float32), cmap="grays", clim=(0.0, 1.0),
                                         interpolation="nearest", parent=view.scene)
        view.camera = scene.PanZoomCamera(aspect=1)
        view.camera.flip = (False, True, False)   # row 0 at the top, as an image
        self.shape = None
        self.displayed = None

    def set_spectrum(self, magnitude) -> None:
        self.show_image(display_image(magnitude, self.gamma))

    def show_image(self, img: np.ndarray) -> None:
        """Show an image made by ``display_image`` (e.g. in a worker thread)."""
        self.displayed = img
        self.image.set_data(img)
        if img.shape != self.shape:
            self.shape = img.shape
            self.view.camera.set_range(x=(0, img.shape[1]), y=(0, img.shape[0]), margin=0)
        self.image.update()


class _Plot:
    """A line plot with axes inside a grid cell.

    Making one costs a lot on a software renderer (each axis and title is text), so it can be made a piece at a
    time: ``in_steps`` is a generator that makes the plot in steps (title, y axis, view, x axis, then what the
    subclass adds) and returns it (``plot = yield from Plot.in_steps(...)``); calling the class makes it at once.
    A subclass adds its pieces by extending ``_steps`` (yielding after each); one that extends ``__init__``
    instead is still made by ``in_steps``, in a single step."""

    def __init__(self, *args, **kwargs):
        for _ in self._steps(*args, **kwargs):
            pass

    @classmethod
    def in_steps(cls, *args, **kwargs):
        """Make the plot a piece per step (yields each piece's name); returns the plot."""
        if _own_init(cls) is not _Plot.__init__:     # its own __init__ adds pieces ``_steps`` does not know
            yield cls.__name__
            return cls(*args, **kwargs)
        plot = cls.__new__(cls)
        yield from plot._steps(*args, **kwargs)
        return plot

    def _steps(self, parent_grid, title: str, x_label: str, y_label: str):
        grid = parent_grid
        self.title = scene.Label(title, color=TEXT, font_size=8)
        self.title.height_max = 20
        grid.add_widget(self.title, row=0, col=1)
        yield "title"
        self.y_axis = scene.AxisWidget(orientation="left", text_color=TEXT, axis_color=TEXT, tick_color=TEXT,
                                       axis_label=y_label, axis_font_size=7, tick_font_size=6,
                                       axis_label_margin=34, tick_label_margin=4)
        self.y_axis.width_max = 60
        grid.add_widget(self.y_axis, row=1, col=0)
        yield "y axis"
        self.view = grid.add_view(row=1, col=1, bgcolor=BACKGROUND, border_color=(0.3, 0.3, 0.35))
        self.view.camera = scene.PanZoomCamera(interactive=False)
        yield "view"
        self.x_axis = scene.AxisWidget(orientation="bottom", text_color=TEXT, axis_color=TEXT, tick_color=TEXT,
                                       axis_label=x_label, axis_font_size=7, tick_font_size=6,
                                       axis_label_margin=24, tick_label_margin=12)
        self.x_axis.height_max = 40
        grid.add_widget(self.x_axis, row=2, col=1)
        self.x_axis.link_view(self.view)
        self.y_axis.link_view(self.view)
        # on a canvas that caches its picture (render/cached_canvas.py) each part is a region, redrawn on its own
        canvas = getattr(parent_grid, "canvas", None)
        if hasattr(canvas, "add_region"):
            for widget, spill in ((self.title, TITLE_SPILL), (self.y_axis, Y_AXIS_SPILL), (self.view, (0, 0)),
                                  (self.x_axis, X_AXIS_SPILL)):
                canvas.add_region(widget, spill)
        yield "x axis"

    @property
    def data_parts(self) -> tuple:
        """The widgets new data changes (its view and the axes' ticks; not the title): on a canvas that caches
        its picture, the regions to redraw after ``set_data``."""
        return self.y_axis, self.view, self.x_axis

    def _fit(self, x, y, y_floor: float | None = None, nice_top: bool = False):
        """Fit the camera to the points; ``y_floor``: the y axis starts there (a quantity that is never below);
        ``nice_top``: the y axis ends at a round number (``nice_ceiling``), so data that moves a little from one
        update to the next leaves the axes as they are. The camera is only told of a change: a new range lays
        out and uploads the axes' tick labels again at the next draw."""
        x0, x1 = (float(np.min(x)), float(np.max(x))) if len(x) else (0.0, 1.0)
        y0, y1 = (float(np.min(y)), float(np.max(y))) if len(y) else (0.0, 1.0)
        if y_floor is not None:
            y0 = y_floor
        if x1 <= x0:
            x1 = x0 + 1
        if y1 <= y0:
            y1 = y0 + 1
        # the rect itself: set_range() pads every side by a fixed amount, which pushed these axes below zero
        height = 1.05 * (y1 - y0)
        if nice_top:
            height = nice_ceiling(height)
        rect = (x0, y0, x1 - x0, height)
        now = self.view.camera.rect
        if (now.left, now.bottom, now.width, now.height) != rect:
            self.view.camera.rect = rect


class SphericalMeanPlot(_Plot):
    """Spherical mean against log2 |k| (as the thesis' figure 7.16), with mean +- std when averaged."""

    def _steps(self, parent_grid):
        yield from super()._steps(parent_grid, "spherical mean", "log2 |k|", "mean |FFT|")
        self.mean_line = scene.visuals.Line(np.zeros((2, 2), np.float32), color=MEAN_COLOUR, width=2,
                                            parent=self.view.scene)
        self.band = scene.visuals.Line(np.zeros((2, 2), np.float32), color=SPREAD_COLOUR, connect="segments",
                                       parent=self.view.scene)
        self.data = None
        yield "lines"

    def set_data(self, spherical: SphericalMean | SphericalSummary) -> None:
        x = np.log2(spherical.k)
        y = np.asarray(spherical.mean, np.float64)
        std = getattr(spherical, "std", None)
        self.data = (x, y, std)
        self.mean_line.set_data(np.column_stack([x, y]).astype(np.float32))
        if std is not None and np.any(std > 0):
            seg = np.empty((2 * x.size, 2), np.float32)
            seg[0::2, 0] = seg[1::2, 0] = x
            lo, hi = np.maximum(y - std, 0.0), y + std      # a magnitude is never below zero
            seg[0::2, 1], seg[1::2, 1] = lo, hi
            self.band.set_data(seg)
            self.band.visible = True
        else:
            self.band.visible = False
            lo = hi = y
        self._fit(x, np.concatenate([lo, hi]), y_floor=0.0, nice_top=True)


class ClusterHistogramPlot(_Plot):
    """Number of clusters per size bin [2^i, 2^(i+1)) of two kinds (Ising: up and down spins) as two step lines."""

    def _steps(self, parent_grid):
        yield from super()._steps(parent_grid, "cluster sizes", "log2 cluster size", "clusters")
        self.up = scene.visuals.Line(np.zeros((2, 2), np.float32), color=HIST_COLOUR, width=2,
                                     parent=self.view.scene)
        self.down = scene.visuals.Line(np.zeros((2, 2), np.float32), color=HIST_DOWN_COLOUR, width=2,
                                       parent=self.view.scene)
        yield "lines"
        # the key, in the view's pixels at its top right (where the counts of large clusters are low)
        self.key = scene.visuals.Text(["up", "down"], color=np.array([HIST_COLOUR, HIST_DOWN_COLOUR]),
                                      font_size=7, anchor_x="right", anchor_y="center", parent=self.view)
        self.key.order = 10
        self.view.events.resize.connect(lambda event=None: self._place_key())
        self._place_key()
        self.data = None
        yield "key"

    def _place_key(self) -> None:
        width = float(self.view.size[0])
        self.key.pos = np.array([[width - 8, 10], [width - 8, 24]], np.float32)

    def set_labels(self, first: str, second: str) -> None:
        """Name the two lines (the model's kinds of cluster, e.g. "up" and "down")."""
        if list(self.key.text) != [first, second]:
            self.key.text = [first, second]

    @staticmethod
    def steps(edges, counts) -> np.ndarray:
        x = np.log2(np.asarray(edges, np.float64))
        x = np.append(x, x[-1] + 1)
        pts = np.empty((2 * counts.size + 2, 2), np.float32)
        pts[0] = (x[0], 0)
        pts[1:-1:2, 0], pts[2:-1:2, 0] = x[:-1], x[1:]
        pts[1:-1:2, 1] = pts[2:-1:2, 1] = counts
        pts[-1] = (x[-1], 0)
        return pts

    def set_data(self, edges, up_counts, down_counts, labels: tuple[str, str] | None = None) -> None:
        if labels is not None:
            self.set_labels(*labels)
        self.data = (np.asarray(edges), np.asarray(up_counts), np.asarray(down_counts))
        up = self.steps(edges, np.asarray(up_counts))
        down = self.steps(edges, np.asarray(down_counts))
        self.up.set_data(up)
        self.down.set_data(down)
        self._fit(up[:, 0], np.concatenate([up[:, 1], down[:, 1]]), y_floor=0.0, nice_top=True)
