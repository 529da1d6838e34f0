"""The Spectrum dock's exports (app/spectral_panel.py): the current (averaged) spectrum as NPZ, its spherical mean
or every mode as CSV, a 3D spectrum's iso-surface as VTU for ParaView (sim/analysis/spectral.py ``export``),
each written through the one save sequence (app/dialogs.py ``choose_output``)."""
from __future__ import annotations

from pathlib import Path

from PySide6 import QtWidgets

from latticelab.app.dialogs import ask_save_path, choose_output
from latticelab.sim.analysis import spectral
from latticelab.sim.model import main_field

FOLDER_KEY = "folders/export"    # the window's remembered export folder, shared with screenshots
EXPORTS = {  # kind: (file dialog filter, suffix, button text)
    "npz": ("Spectrum and spherical mean (*.npz)", ".npz", "Save NPZ…"),
    "spherical-csv": ("Spherical mean (*.csv)", ".csv", "Save mean CSV…"),
    "spectrum-csv": ("Spectrum, one row per mode (*.csv)", ".csv", "Save spectrum CSV…"),
    "iso-vtu": ("Iso-surface of a 3D spectrum for ParaView (*.vtu)", ".vtu", "Save iso-surface…"),
}


class SpectrumExports:
    """(a part of SpectralPanel) The buttons' exports of the dock's ``accumulator``, for its model (``_model``)
    at its iso value (``iso_value``); messages in its ``info`` line, a dialog for a failure when ``interactive``."""

    def record(self) -> spectral.SpectrumRecord:
        if self.accumulator.count == 0:
            raise ValueError("no spectrum yet: let the model run a step first")
        model = self._model()
        meta = {}
        if model is not None:
            meta = {"model": model.name, "field": main_field(model)[0], **model.params.model_dump(),
                    "step_count": model.step_count}
            if len(model.shape) == 3:
                meta["iso"] = self.iso_value()          # the surface the view shows (the iso-vtu export)
        return self.accumulator.record(**meta)

    def export(self, kind: str, path, confirm: bool = True) -> Path | None:
        """Write the current (averaged) spectrum. An existing file is replaced only after a yes to the
        question (interactive), otherwise a free name beside it is used; returns the path written."""
        if kind not in EXPORTS:
            raise ValueError(f"kind must be one of {', '.join(EXPORTS)}; got {kind!r}")
        written = choose_output(self, path, EXPORTS[kind][1], lambda to, overwrite: spectral.export(
            self.record(), to, kind, overwrite=overwrite), confirm=confirm and self.interactive, say=self._say,
            prefs=self.prefs, folder_key=FOLDER_KEY, what="saved", errors=(OSError, ValueError))
        if written is not None:
            self.info.setText(f"saved {written}")
        return written

    def _say(self, text: str, error: bool = False) -> None:
        """A message of the exports, in the dock's info line (a dialog too for a failure, when interactive)."""
        self.info.setText(text)
        if error:
            self.last_error = f"export failed: {text}"
            if self.interactive:
                QtWidgets.QMessageBox.warning(self, "Export failed", text)

    def export_dialog(self, kind: str) -> None:
        text, suffix, _ = EXPORTS[kind]
        folder = self.prefs.get(FOLDER_KEY) if self.prefs is not None else None
        path, _ = ask_save_path(self, f"Save {text}", folder, f"spectrum-{kind}{suffix}", text)
        if path:
            self.export(kind, path, confirm=True)
