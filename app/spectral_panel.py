"""A dock with the spectral views (thesis 003, section 7.4): the FFT magnitude of the running model's main
field (the first of ``model.fields()``) -- a greyscale image in 2D, iso-surfaces with an iso slider in 3D --
its spherical mean, the cluster-size histogram of models that have clusters (sim/model.py: HasClusters),
averaging over steps, and CSV/NPZ export.

The panel pulls from the window's model on its own timer (a few times a second, only while visible), so
the window needs one line to add it: ``spectral_panel.install(window)``. It notices on its own when the
model or its parameters change, restarts the average and redraws.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from PySide6 import QtCore, QtWidgets
from vispy import scene

from latticelab.app.dialogs import confirm_replace
from latticelab.render.isosurface import SpectrumIsoView
from latticelab.render.plots import one_font_manager
from latticelab.render.spectral import ClusterHistogramPlot, SphericalMeanPlot, SpectrumImageView
from latticelab.sim.analysis import spectral
from latticelab.sim.io import free_path
from latticelab.sim.analysis.statistics import size_histogram
from latticelab.sim.model import HasClusters, main_field

log = logging.getLogger(__name__)

REFRESH_MS = 300
CPU_CLUSTER_LIMIT = 1 << 21      # sites: above this, cluster sizes on the CPU are left to the user to ask
ISO_STEPS = 1000
FOLDER_KEY = "folders/export"    # the window's remembered export folder, shared with screenshots
EXPORTS = {  # kind: (file dialog filter, suffix, button text)
    "npz": ("Spectrum and spherical mean (*.npz)", ".npz", "Save NPZ…"),
    "spherical-csv": ("Spherical mean (*.csv)", ".csv", "Save mean CSV…"),
    "spectrum-csv": ("Spectrum, one row per mode (*.csv)", ".csv", "Save spectrum CSV…"),
}


class SpectralPanel(QtWidgets.QDockWidget):
    """Spectral views of ``model_source()`` (any model: its main field)."""

    def __init__(self, model_source: Callable[[], object], parent=None, prefs=None, interactive: bool = True,
                 refresh_ms: int = REFRESH_MS):
        super().__init__("Spectrum", parent, objectName="spectral_dock")
        self.model_source = model_source
        self.prefs = prefs
        self.interactive = interactive
        self.accumulator = spectral.SpectrumAccumulator()
        self.magnitude = None
        self.last_record = None
        self.last_error = ""
        self._identity = None
        self._shown_step = None
        self._spectrum_view = None
        with one_font_manager():
            self._build()
        self.visibilityChanged.connect(self._visibility_changed)
        self.timer = QtCore.QTimer(self, interval=refresh_ms)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    # ==== construction ==========================================================================
    def _build(self) -> None:
        body = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(body)
        layout.setContentsMargins(4, 4, 4, 4)
        self.canvas = scene.SceneCanvas(keys=None, app="pyside6", bgcolor=(0.08, 0.08, 0.1, 1.0),
                                        size=(760, 440), show=False)
        self.canvas.native.setObjectName("spectral_canvas")
        self.canvas.native.setMinimumSize(360, 240)
        self.grid = self.canvas.central_widget.add_grid(spacing=4, margin=4)
        self.main_cell = self.grid.add_view(row=0, col=0, row_span=2, bgcolor=(0, 0, 0, 1))
        self.main_cell.stretch = (1.4, 1)
        mean_grid = self.grid.add_grid(row=0, col=1)
        hist_grid = self.grid.add_grid(row=1, col=1)
        self.mean_plot = SphericalMeanPlot(mean_grid)
        self.hist_plot = ClusterHistogramPlot(hist_grid)
        layout.addWidget(self.canvas.native, 1)

        row = QtWidgets.QHBoxLayout()
        self.iso_label = QtWidgets.QLabel("iso 0.500")
        self.iso_slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal, objectName="iso_slider")
        self.iso_slider.setRange(1, ISO_STEPS - 1)
        self.iso_slider.setValue(ISO_STEPS // 2)
        self.iso_slider.setToolTip("3D: iso value as a fraction of the largest magnitude; "
                                   "higher values peel away the weaker layers")
        self.iso_slider.valueChanged.connect(self._iso_moved)
        row.addWidget(QtWidgets.QLabel("iso"))
        row.addWidget(self.iso_slider, 1)
        row.addWidget(self.iso_label)
        layout.addLayout(row)

        row = QtWidgets.QHBoxLayout()
        self.average_box = QtWidgets.QCheckBox("Average over steps", objectName="average_box")
        self.average_box.setToolTip("Scattering patterns add: average the spectra of successive steps")
        self.average_box.toggled.connect(lambda _: self.reset_average())
        self.clusters_box = QtWidgets.QCheckBox("Cluster sizes", objectName="clusters_box")
        self.clusters_box.setChecked(True)
        self.clusters_box.toggled.connect(lambda _: self.refresh(force=True))
        reset = QtWidgets.QPushButton("Reset average")
        reset.clicked.connect(self.reset_average)
        row.addWidget(self.average_box)
        row.addWidget(self.clusters_box)
        row.addWidget(reset)
        row.addStretch(1)
        layout.addLayout(row)
        row = QtWidgets.QHBoxLayout()  # exports on a row of their own, so the dock stays narrow
        for kind, (text, _, label) in EXPORTS.items():
            button = QtWidgets.QPushButton(label, objectName=f"export_{kind}", toolTip=f"Save the {text}")
            button.clicked.connect(lambda _=False, k=kind: self.export_dialog(k))
            row.addWidget(button)
        row.addStretch(1)
        layout.addLayout(row)
        self.info = QtWidgets.QLabel("", objectName="spectral_info", wordWrap=True)
        # the line names every live parameter: let it wrap rather than widen the dock
        self.info.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
        layout.addWidget(self.info)
        self.setWidget(body)

    # ==== model tracking ========================================================================
    def _model(self):
        try:
            return self.model_source()
        except Exception as exc:  # the window may be rebuilding its model
            log.debug("no model: %s", exc)
            return None

    @staticmethod
    def identity(model) -> tuple:
        """What, when changed, makes earlier spectra incomparable (restarts the average)."""
        return (id(model), tuple(model.shape), model.params)

    def reset_average(self) -> None:
        self.accumulator.reset()
        self._shown_step = None
        self.refresh(force=True)

    # ==== updates ===============================================================================
    def on_screen(self) -> bool:
        # A dock tabified behind another can still report isVisible(); its visible region is empty.
        return self.isVisible() and not self.visibleRegion().isEmpty()

    def _visibility_changed(self, visible: bool) -> None:
        if visible:
            QtCore.QTimer.singleShot(0, lambda: self.refresh(force=True))

    def refresh(self, force: bool = False) -> bool:
        """Recompute from the model when it moved on (or when forced) while on screen; returns whether it did."""
        if not self.on_screen():
            return False
        model = self._model()
        if model is None:
            return False
        identity = self.identity(model)
        step = getattr(model, "step_count", None)
        if identity != self._identity:
            self._identity = identity
            self.accumulator.reset()
            self._set_dimension(len(model.shape))
        elif not force and step is not None and step == self._shown_step:
            return False
        self._shown_step = step
        try:
            self._update_from(model)
        except Exception as exc:  # keep the app running; say what went wrong
            self.last_error = f"spectrum update failed: {type(exc).__name__}: {exc}"
            log.exception("spectral panel")
            self.info.setText(self.last_error)
            return False
        return True

    def _set_dimension(self, ndim: int) -> None:
        if self._spectrum_view is not None and self._spectrum_ndim == ndim:
            return
        # a fresh ViewBox for the new kind of view (image or 3D), in the same grid cell
        self.grid.remove_widget(self.main_cell)
        self.main_cell.parent = None
        self.main_cell = self.grid.add_view(row=0, col=0, row_span=2, bgcolor=(0, 0, 0, 1))
        self.main_cell.stretch = (1.4, 1)
        with one_font_manager():
            self._spectrum_view = (SpectrumImageView(self.main_cell) if ndim == 2
                                   else SpectrumIsoView(self.main_cell))
        self._spectrum_ndim = ndim
        self.iso_slider.setEnabled(ndim == 3)
        if ndim == 3:
            self._spectrum_view.iso = self.iso_value()

    def _update_from(self, model) -> None:
        t0 = time.perf_counter()
        field_name, field = main_field(model)
        mag = spectral.fft_magnitude(field)
        if self.average_box.isChecked():
            self.accumulator.add(mag)
            shown = self.accumulator.mean
        else:
            self.accumulator.reset()
            self.accumulator.add(mag)
            shown = mag
        self.magnitude = shown
        self._spectrum_view.set_spectrum(shown)
        self.mean_plot.set_data(self.accumulator.spherical())
        clusters = ""
        n_cells = int(field.size)
        if self.clusters_box.isChecked() and isinstance(model, HasClusters):
            if n_cells <= CPU_CLUSTER_LIMIT or model.backend_name == "cuda":
                groups = model.cluster_size_groups()
                (first, a), (second, b) = list(groups.items())[:2]
                edges, counts_a = size_histogram(a, n_cells)
                _, counts_b = size_histogram(b, n_cells)
                self.hist_plot.set_data(edges, counts_a, counts_b)
                largest = max([s[0] for s in groups.values() if s.size] or [0])
                clusters = f" | clusters: {a.size} {first}, {b.size} {second}, largest {largest}"
            else:
                clusters = " | cluster sizes off above 2M cells on the CPU"
        self.last_error = ""
        live = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in model.params.model_dump().items() if k in type(model.params).names("live"))
        self.info.setText(f"{field_name}, step {model.step_count} | {live} | averaged over "
                          f"{self.accumulator.count} | {1e3 * (time.perf_counter() - t0):.0f} ms{clusters}")
        self.canvas.update()

    # ==== iso value =============================================================================
    def iso_value(self) -> float:
        return self.iso_slider.value() / ISO_STEPS

    def _iso_moved(self, _position: int) -> None:
        iso = self.iso_value()
        self.iso_label.setText(f"iso {iso:.3f}")
        if isinstance(self._spectrum_view, SpectrumIsoView):
            try:
                self._spectrum_view.set_iso(iso)
            except Exception as exc:
                self.last_error = f"iso-surface failed: {type(exc).__name__}: {exc}"
                log.exception("iso surface")
                self.info.setText(self.last_error)
            self.canvas.update()

    # ==== export ================================================================================
    def record(self) -> spectral.SpectrumRecord:
        if self.accumulator.count == 0:
            raise ValueError("no spectrum yet: let the model run a step first")
        model = self._model()
        meta = {}
        if model is not None:
            meta = {"model": model.name, "field": main_field(model)[0], **model.params.model_dump(),
                    "step_count": model.step_count}
        return self.accumulator.record(**meta)

    def export(self, kind: str, path, confirm: bool = True) -> Path | None:
        """Write the current (averaged) spectrum. An existing file is replaced only after a yes to the
        question (interactive), otherwise a free name beside it is used; returns the path written."""
        if kind not in EXPORTS:
            raise ValueError(f"kind must be one of {', '.join(EXPORTS)}; got {kind!r}")
        path = Path(path)
        suffix = EXPORTS[kind][1]
        if path.suffix.lower() != suffix:
            path = path.with_name(path.name + suffix)
        overwrite = False
        if path.exists():
            if confirm and self.interactive:
                if not confirm_replace(self, path):
                    return None
                overwrite = True
            else:
                path = free_path(path)
        try:
            written = spectral.export(self.record(), path, kind, overwrite=overwrite)
        except (OSError, ValueError) as exc:
            self.last_error = f"export failed: {exc}"
            self.info.setText(self.last_error)
            if self.interactive:
                QtWidgets.QMessageBox.warning(self, "Export failed", str(exc))
            return None
        if self.prefs is not None:
            self.prefs.set(FOLDER_KEY, str(written.parent.resolve()))
        self.info.setText(f"saved {written}")
        return written


    def export_dialog(self, kind: str) -> None:
        text, suffix, _ = EXPORTS[kind]
        folder = (self.prefs.get(FOLDER_KEY) if self.prefs is not None else None) or str(Path.cwd())
        name = f"spectrum-{kind}{suffix}"
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, f"Save {text}", str(Path(folder) / name), text,
            options=QtWidgets.QFileDialog.Option.DontConfirmOverwrite)  # we ask ourselves, once
        if path:
            self.export(kind, path, confirm=True)


def install(window, area=QtCore.Qt.DockWidgetArea.RightDockWidgetArea) -> SpectralPanel:
    """Add the panel to a main window that has a ``model`` attribute (the one-line hook).

    With a live-plot dock present the panel becomes a tab beside it, so the lattice view keeps its
    space; the panel only computes while its tab is shown.
    """
    panel = SpectralPanel(lambda: window.model, parent=window, prefs=getattr(window, "prefs", None),
                          interactive=getattr(window, "interactive", True))
    window.addDockWidget(area, panel)
    plots = getattr(window, "plot_dock", None)
    if isinstance(plots, QtWidgets.QDockWidget):
        window.tabifyDockWidget(plots, panel)
        plots.raise_()
    window.spectral_panel = panel
    return panel
