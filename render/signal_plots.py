"""Line plots of the model analysis docks (app/signal_panel.py, app/coarsening_panel.py) as VisPy scene views; no
Qt: a signal against time (the pseudo-EEG, a neuron's potential, firing rates), a periodogram on a log power
scale (thesis 003, figure 8.11), and a length against time on log-log axes with a power-law guide line (the
coarsening of phase separation, t^(1/3)).

Each plot fills a VisPy grid cell with a title, labelled axes and a view (render/spectral.py ``_Plot``); its
``data`` attribute keeps what it last drew, for tests and exports (a spike raster: ``RasterPlot``). Each can be
made a piece at a time (``Plot.in_steps(...)``, a generator returning the plot) as well as at once (``Plot(...)``).
"""
from __future__ import annotations

import numpy as np
from vispy import scene

from latticelab.render.spectral import _Plot

EEG_COLOUR = (0.95, 0.75, 0.2, 1.0)
SPECTRUM_COLOUR = (0.35, 0.75, 1.0, 1.0)
PROBE_COLOUR = (0.4, 0.95, 0.45, 1.0)
RATE_COLOURS = ((1.0, 0.5, 0.45, 1.0), (0.7, 0.55, 1.0, 1.0))
LENGTH_COLOUR = (0.3, 0.9, 0.9, 1.0)
RASTER_COLOUR = (0.92, 0.92, 0.98, 1.0)
GUIDE_COLOUR = (0.85, 0.85, 0.85, 0.7)


def _line(view, colour, width=1.5):
    return scene.visuals.Line(np.zeros((2, 2), np.float32), color=colour, width=width, parent=view.scene)


class TimePlot(_Plot):
    """One or more series (``colours``: key -> RGBA) against a common time axis."""

    def _steps(self, parent_grid, title: str, x_label: str, y_label: str, colours: dict):
        yield from super()._steps(parent_grid, title, x_label, y_label)
        self.lines = {key: _line(self.view, colour) for key, colour in colours.items()}
        for line in self.lines.values():
            line.visible = False
        self.data = None
        yield "lines"

    def set_data(self, t, series: dict, x_range: tuple[float, float] | None = None) -> None:
        """``t``: (n,) times; ``series[key]``: (n,) values (NaN where undefined). ``x_range``: the time span to
        show (default: the data's)."""
        t = np.asarray(t, np.float64)
        self.data = (t, {k: np.asarray(v, np.float64) for k, v in series.items()})
        ys = []
        for key, line in self.lines.items():
            y = self.data[1].get(key)
            valid = np.zeros(0, bool) if y is None or y.size != t.size else np.isfinite(y)
            shown = int(valid.sum()) >= 2
            if shown:
                line.set_data(np.column_stack([t[valid], y[valid]]).astype(np.float32))
                ys.append(y[valid])
            line.visible = shown
        x = np.asarray(x_range if x_range is not None else (t[:1].tolist() + t[-1:].tolist()), np.float64)
        y = np.concatenate(ys) if ys else np.zeros(0)
        self._fit(x, y)


class RasterPlot(_Plot):
    """A spike raster: a dot at (time, neuron index) for each spike of a band of neurons."""

    def _steps(self, parent_grid, title: str, x_label: str, y_label: str):
        yield from super()._steps(parent_grid, title, x_label, y_label)
        self.markers = scene.visuals.Markers(parent=self.view.scene)
        self.markers.visible = False
        self.data = None
        yield "markers"

    def set_data(self, t, neurons, band: tuple[int, int], x_range: tuple[float, float] | None = None) -> None:
        """``t``: (n,) spike times; ``neurons``: (n,) their neurons' indices; ``band``: (first, count), the y
        range; ``x_range``: the time span to show (default: the spikes')."""
        t, neurons = np.asarray(t, np.float64), np.asarray(neurons, np.float64)
        self.data = (t, neurons)
        if t.size:
            self.markers.set_data(np.column_stack([t, neurons]).astype(np.float32), size=3, edge_width=0,
                                  face_color=RASTER_COLOUR, symbol="square")
        self.markers.visible = bool(t.size)
        x = np.asarray(x_range if x_range is not None else (t[:1].tolist() + t[-1:].tolist()), np.float64)
        self._fit(x, np.array([band[0] - 0.5, band[0] + band[1] - 0.5]))


class PeriodogramPlot(_Plot):
    """log10 of the power against frequency (the thesis's semi-log periodogram), up to ``f_max`` Hz."""

    def _steps(self, parent_grid, f_max: float, unit: str = ""):
        power = f"log10 power ({unit}^2)" if unit else "log10 power"
        yield from super()._steps(parent_grid, "periodogram", "frequency (Hz)", power)
        self.f_max = float(f_max)
        self.line = _line(self.view, SPECTRUM_COLOUR)
        self.line.visible = False
        self.data = None
        yield "line"

    def set_data(self, freqs, psd) -> None:
        f = np.asarray(freqs, np.float64)
        p = np.asarray(psd, np.float64)
        keep = (f <= self.f_max) & (p > 0)
        x, y = f[keep], np.log10(p[keep])
        self.data = (x, y)
        self.line.visible = x.size >= 2
        if self.line.visible:
            self.line.set_data(np.column_stack([x, y]).astype(np.float32))
        self._fit(np.array([0.0, self.f_max]), y)


class CoarseningPlot(_Plot):
    """log10 length against log10 time, with a guide line of slope ``exponent`` through the latest point."""

    def _steps(self, parent_grid, title: str, exponent: float, time_label: str = "time"):
        yield from super()._steps(parent_grid, title, f"log10 {time_label}", "log10 length")
        self.exponent = float(exponent)
        self.line = _line(self.view, LENGTH_COLOUR, width=2)
        self.guide = _line(self.view, GUIDE_COLOUR)
        self.line.visible = self.guide.visible = False
        self.data = None
        yield "lines"

    def set_data(self, t, length) -> None:
        t, length = np.asarray(t, np.float64), np.asarray(length, np.float64)
        keep = (t > 0) & (length > 0) & np.isfinite(t) & np.isfinite(length)
        x, y = np.log10(t[keep]), np.log10(length[keep])
        self.data = (x, y)
        shown = x.size >= 2
        self.line.visible = self.guide.visible = shown
        if not shown:
            self._fit(x, y)
            return
        self.line.set_data(np.column_stack([x, y]).astype(np.float32))
        # the guide spans the data's time range and passes through the latest point
        gx = np.array([x.min(), x[-1]])
        gy = y[-1] + self.exponent * (gx - x[-1])
        self.guide.set_data(np.column_stack([gx, gy]).astype(np.float32))
        self._fit(x, np.concatenate([y, gy]))
