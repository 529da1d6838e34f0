"""The main window's file actions: screenshots (the view as drawn, one pixel per cell, or the whole window) as
PNG, and the simulation saved and loaded (sim/state.py). Each file goes through ``choose_output``
(app/dialogs.py): nothing the user made is silently replaced. A save or load asked while a worker owns the model
happens right after it (app/frame_loop.py ``when_idle``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from latticelab.app.dialogs import ask_save_path, choose_output
from latticelab.render import palette
from latticelab.render.cached_canvas import RegionCachedCanvas
from latticelab.render.unfold import UnfoldLayout
from latticelab.sim import io, state
from latticelab.sim.backend import BackendError
from latticelab.sim.params import ParameterError

EXPORT_KINDS = {
    "view": "Lattice view as shown, at the canvas's pixel size (*.png)",
    "cells": "Lattice cells, one pixel per cell; 3D unfolded (*.png)",
    "window": "Whole window (*.png)",
}
STATE_FILTER = "Saved states (*.npz)"


def default_export_name(model) -> str:
    """``latticelab-<model>-<shape>-<live scalars>-step<n>.png``."""
    shape = "x".join(str(n) for n in model.shape)
    scalars = "-".join(f"{k}{v:.4g}" for k, v in model.params.model_dump().items()
                       if isinstance(v, float) and model.params.fields()[k]["applies"] == "live")
    return f"latticelab-{model.name}-{shape}-{scalars}-step{model.step_count}.png".replace("--", "-")


def window_image(window: QtWidgets.QWidget) -> np.ndarray:
    """The whole window as RGBA uint8, the cached canvases' pictures completed first."""
    # the layouts asked for by texts that grew since the last pass of the event loop, done first: after a frame
    # of many steps (Steps / frame auto, a CUDA window's default) the status bar's label still had the width of
    # "step 0" and a scripted screenshot read "step 3" for step 300 (issue 41)
    QtWidgets.QApplication.sendPostedEvents(None, QtCore.QEvent.Type.LayoutRequest)
    complete_cached_pictures(window)
    image = window.grab().toImage().convertToFormat(QtGui.QImage.Format.Format_RGBA8888)
    width, height = image.width(), image.height()
    raw = np.frombuffer(image.constBits(), np.uint8).reshape(height, image.bytesPerLine())
    return raw[:, :width * 4].reshape(height, width, 4).copy()


def complete_cached_pictures(window: QtWidgets.QWidget) -> None:
    """Finish, at once, the pictures of the cached canvases on screen (the live plots, the docks' plots) whose
    redraw is spread over paints: a picture of the window shows them complete (a scripted screenshot taken
    while the live plots' first picture was still being drawn would show an empty plot dock)."""
    for widget in window.findChildren(QtWidgets.QWidget):
        canvas = getattr(widget, "_vispy_canvas", None)
        if not isinstance(canvas, RegionCachedCanvas) or not widget.isVisible():
            continue
        if not (canvas.stale or canvas.full_draws == 0):
            continue
        budget, canvas.budget_s = canvas.budget_s, None     # no budget: the whole picture in one draw
        try:
            canvas.update()
            widget.repaint()
        finally:
            canvas.budget_s = budget


def cells_image(rgba: np.ndarray) -> np.ndarray:
    """A picture's colours one pixel per cell; a 3D lattice's layers unfolded side by side."""
    if rgba.ndim == 3:
        return rgba
    L = rgba.shape[0]
    layout = UnfoldLayout(L)
    width, height = layout.extent
    image = np.empty((height, width, 4), np.uint8)
    image[:] = palette.rgba_bytes(palette.BACKGROUND)
    for z in range(L):
        x0, y0 = (int(v) for v in layout.tile_origin(z))
        image[y0:y0 + L, x0:x0 + L] = rgba[z]
    return image


class FileActions:
    """Capture, export, save and load for ``window`` (app/main_window.py)."""

    def __init__(self, window):
        self.window = window

    def _say(self, text: str, error: bool = False) -> None:
        if error:
            self.window.warn("Cannot write the file", text)
        else:
            self.window.show_message(text)

    def capture(self, what: str = "view") -> np.ndarray:
        """RGBA uint8 image: the canvas as drawn ("view"), one pixel per cell ("cells"), or the whole window
        ("window")."""
        window = self.window
        if what == "view":
            window.field_view.before_render()      # render() emits no draw event: give CUDA's textures back to GL
            return window.lattice_canvas.render(alpha=False)
        if what == "cells":
            return cells_image(window.picture().colours())
        if what == "window":
            return window_image(window)
        raise ValueError(f"what: must be one of {', '.join(EXPORT_KINDS)}; got {what!r}")

    def export_screenshot(self, path, what: str = "view", confirm: bool = True) -> Path | None:
        """Write a PNG. An existing file is replaced only if the user agrees (``confirm``); otherwise (scripted
        use) a free name beside it is chosen. Returns the path written, or None."""
        window = self.window
        written = choose_output(window, path, ".png", lambda to, overwrite: io.write_png(
            to, self.capture(what), overwrite=overwrite), confirm=confirm, say=self._say,
            prefs=window.prefs, folder_key="folders/export", what="exported")
        if written is not None:
            window.show_message(f"exported {written}")
        return written

    def _open_path(self, title: str, folder_key: str, name: str, filters: list[str], save: bool):
        folder = self.window.prefs.get(folder_key)
        if save:
            return ask_save_path(self.window, title, folder, name, ";;".join(filters))
        return QtWidgets.QFileDialog.getOpenFileName(self.window, title, folder or str(Path.cwd()),
                                                     ";;".join(filters))

    def export_dialog(self) -> None:
        path, chosen = self._open_path("Export screenshot", "folders/export",
                                       default_export_name(self.window.model), list(EXPORT_KINDS.values()), True)
        if path:
            what = next((k for k, v in EXPORT_KINDS.items() if v == chosen), "view")
            self.export_screenshot(path, what, confirm=True)

    # ==== save / load =========================================================================
    def save_state(self, path, confirm: bool = True) -> Path | None:
        window = self.window
        if window.frames.stepper.busy:   # the worker writes the arrays: save the state after its batch
            window.frames.when_idle(lambda: self.save_state(path, confirm), "save")
            return None
        model = window.model
        written = choose_output(window, path, state.SUFFIX, lambda to, overwrite: state.save_state(
            to, model, overwrite=overwrite), confirm=confirm, say=self._say,
            prefs=window.prefs, folder_key="folders/state", what="saved")
        if written is not None:
            window.show_message(f"saved state at step {model.step_count} to {written}")
        return written

    def load_state(self, path) -> bool:
        """Resume from a file, switching to the model it holds; a damaged file is reported and the running
        simulation is left untouched."""
        window = self.window
        if window.frames.busy():
            window.frames.when_idle(lambda: self.load_state(path), "load")
            return True
        try:
            model = state.load_state(path, backend=window.runner.backend)
        except (state.StateError, ParameterError, BackendError, MemoryError) as exc:
            window.warn("Cannot load state", f"not loaded: {exc}")
            return False
        except Exception as exc:   # anything else a foreign file may trigger: report, keep running
            window.warn("Cannot load state", f"not loaded: {path}: {type(exc).__name__}: {exc}")
            return False
        window.runner.load(model)
        window.prefs.set("folders/state", str(Path(path).parent.resolve()))
        window.lifecycle.after_model_change()
        window.show_message(f"loaded {path} ({window.model.title}, step {window.model.step_count})")
        return True

    def save_dialog(self) -> None:
        m = self.window.model
        shape = "x".join(str(n) for n in m.shape)
        name = f"latticelab-{m.name}-{shape}-step{m.step_count}{state.SUFFIX}"
        path, _ = self._open_path("Save state", "folders/state", name, [STATE_FILTER], save=True)
        if path:
            self.save_state(path, confirm=True)

    def load_dialog(self) -> None:
        path, _ = self._open_path("Load state", "folders/state", "", [STATE_FILTER, "All files (*)"], save=False)
        if path:
            self.load_state(path)
