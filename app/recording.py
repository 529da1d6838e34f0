"""Recordings and data export in the window's File menu (issue 16): the live plots' series as CSV, the plots as
PNG, and a movie of the view (MP4 or PNG frames) with a frame rate and "one frame every n steps".

The work is not the window's: the CSV text comes from sim/export.py, the movie is encoded by sim/recording.py's
writer thread (a bounded queue; a frame the encoder cannot take at once is dropped and counted, never waited
for). This module only wires them to the window:

- frames are the view as drawn (``window.capture("view")``), taken on the GUI thread (it owns the GL context)
  by a timer of our own that polls ``window.model.step_count``: a frame is taken once at least ``every`` steps
  have passed since the last one, so the frame loop needs no hook (with many steps per frame a frame may come
  later than exactly n steps: the loop's frames are the only states ever drawn);
- a "REC" label in the status bar shows the frames taken and dropped while recording;
- stopping hands the end of the encoding to the writer thread and reports when the file is in place, so the
  window never waits for the encoder; closing the window finishes the recording first.

Installed with one line: ``recording.install(window)``; the window then has ``window.recording``.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from latticelab.app.dialogs import ask_save_path, choose_output, confirm_replace
from latticelab.sim import export, io
from latticelab.sim.params import ParameterError
from latticelab.sim.recording import FrameRecorder, is_movie

log = logging.getLogger(__name__)

POLL_MS = 15            # how often the step count is looked at while recording (the frame loop's interval)
FINISH_POLL_MS = 50     # how often a stopped recording is checked for its writer being done
FORMATS = {"mp4": "MP4 video (*.mp4)", "png": "PNG frames in a new folder"}


class RecordDialog(QtWidgets.QDialog):
    """Where to record, as what, at which frame rate, one frame every how many steps."""

    def __init__(self, parent, start_path: str, fps: float, every: int):
        super().__init__(parent)
        self.setWindowTitle("Record movie")
        self.setObjectName("record_dialog")
        form = QtWidgets.QFormLayout(self)
        self.format = QtWidgets.QComboBox(objectName="record_format")
        for key, text in FORMATS.items():
            self.format.addItem(text, key)
        self.path = QtWidgets.QLineEdit(start_path, objectName="record_path")
        self.path.setMinimumWidth(420)
        browse = QtWidgets.QPushButton("Browse...", objectName="record_browse")
        browse.clicked.connect(self._browse)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.path, 1)
        row.addWidget(browse)
        self.fps = QtWidgets.QDoubleSpinBox(objectName="record_fps", minimum=1.0, maximum=240.0, decimals=1,
                                            value=fps, suffix=" fps")
        self.every = QtWidgets.QSpinBox(objectName="record_every", minimum=1, maximum=10_000_000, value=every)
        self.every.setToolTip("one frame once at least this many steps have passed since the last frame")
        form.addRow("Format", self.format)
        form.addRow("File or folder", row)
        form.addRow("Frame rate", self.fps)
        form.addRow("Record every n steps", self.every)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok
                                             | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.format.currentIndexChanged.connect(self._format_changed)

    def _format_changed(self) -> None:
        path = Path(self.path.text() or "latticelab-movie")
        stem = path.with_suffix("") if path.suffix.lower() == ".mp4" else path
        self.path.setText(str(stem.with_name(stem.name + ".mp4") if self.format.currentData() == "mp4" else stem))

    def _browse(self) -> None:
        if self.format.currentData() == "mp4":
            path, _ = QtWidgets.QFileDialog.getSaveFileName(
                self, "Record movie", self.path.text(), FORMATS["mp4"],
                options=QtWidgets.QFileDialog.Option.DontConfirmOverwrite)
        else:
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "New folder for the PNG frames", self.path.text())
        if path:
            self.path.setText(path)

    def values(self) -> tuple[str, float, int]:
        path = self.path.text().strip()
        if self.format.currentData() == "mp4" and not is_movie(path):
            path += ".mp4"
        return path, self.fps.value(), self.every.value()


class Recording(QtCore.QObject):
    """The File menu's exports and the movie recorder of one window (``window.recording``)."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.recorder: FrameRecorder | None = None
        self._scripted = False        # run_steps: every due frame is kept (waits for the encoder, never drops)
        self.finishing: list[FrameRecorder] = []     # stopped, writer still encoding what was queued
        self.last_result = None                      # the RecordingResult of the last finished recording
        self.fps, self.every = 25.0, 1
        self._poll = QtCore.QTimer(self, interval=POLL_MS)
        self._poll.timeout.connect(self.poll)
        self._finish_timer = QtCore.QTimer(self, interval=FINISH_POLL_MS)
        self._finish_timer.timeout.connect(self._check_finished)
        self._exports: list = []                     # (path, Future) of data exports being written
        self._export_timer = QtCore.QTimer(self, interval=FINISH_POLL_MS)
        self._export_timer.timeout.connect(self._check_exports)
        self.label = QtWidgets.QLabel("", objectName="status_recording")
        self.label.setStyleSheet("QLabel { color: #ff3030; font-weight: bold; }")
        self.label.setContentsMargins(6, 0, 6, 0)
        self.label.setToolTip("Recording a movie of the view (File > Stop recording)")
        self.label.hide()
        window.statusBar().insertPermanentWidget(0, self.label)
        self._build_actions()

    # ---- menu -------------------------------------------------------------------------------
    def _action(self, text, slot, tip, name, shortcut=None) -> QtGui.QAction:
        action = QtGui.QAction(text, self.window)
        action.setObjectName(name)
        action.setToolTip(tip)
        action.setStatusTip(tip)
        if shortcut:
            action.setShortcut(QtGui.QKeySequence(shortcut))
            action.setShortcutContext(QtCore.Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(slot)
        self.window.addAction(action)
        return action

    def _build_actions(self) -> None:
        w = self.window
        self.export_data_action = self._action(
            "Export plot data...", self.export_data_dialog,
            "Save the live plots' series as CSV (time, every observable; a header line with model, parameters, "
            "code version and backend)", "export_plot_data_action")
        self.export_fields_action = self._action(
            "Export data...", self.export_fields_dialog,
            "Save the fields now and the plotted observables for other tools: a Zarr store (xarray, napari), "
            "VTK (ParaView) or, for spiking networks, an NWB file of the recorded spikes", "export_fields_action")
        self.export_plots_action = self._action("Export plots as PNG...", self.export_plots_dialog,
                                                "Save the live plots as drawn, as PNG", "export_plots_action")
        self.record_action = self._action("Record movie...", self.record_dialog,
                                          "Record the view as a movie (MP4) or PNG frames (Ctrl+R)",
                                          "record_action", "Ctrl+R")
        self.stop_action = self._action("Stop recording", lambda: self.stop(), "Stop the recording and keep the file",
                                        "stop_record_action")
        self.stop_action.setEnabled(False)
        file_menu = next((a.menu() for a in w.menuBar().actions() if a.menu() is not None
                          and a.menu().title().replace("&", "") == "File"), None)
        if file_menu is None:        # a window without a File menu still gets the shortcuts (addAction above)
            return
        actions = file_menu.actions()
        export_action = w.export_action
        after_exports = None       # right after "Export screenshot...", else at the end
        if export_action in actions and actions.index(export_action) + 1 < len(actions):
            after_exports = actions[actions.index(export_action) + 1]
        file_menu.insertActions(after_exports, [self.export_fields_action, self.export_data_action,
                                                self.export_plots_action])
        quit_action = w.quit_action
        before = None
        if quit_action in actions:
            i = actions.index(quit_action)
            before = actions[i - 1] if i > 0 and actions[i - 1].isSeparator() else quit_action
        separator = QtGui.QAction(self.window)
        separator.setSeparator(True)
        file_menu.insertActions(before, [separator, self.record_action, self.stop_action])

    # ---- messages ---------------------------------------------------------------------------
    def _say(self, text: str, error: bool = False) -> None:
        if error:
            self.window.warn("Recording and export", text)
        else:
            self.window.show_message(text)

    def _default_name(self, suffix: str) -> str:
        return self.window.default_export_name().removesuffix(".png") + suffix

    def _ask_path(self, title: str, suffix: str, filters: str) -> str | None:
        w = self.window
        if not w.interactive:
            return None
        path, _ = ask_save_path(w, title, w.prefs.get("folders/export"), self._default_name(suffix), filters)
        return path or None

    # ---- plot data and plot images ----------------------------------------------------------
    def _export(self, path, suffix: str, confirm: bool, write) -> Path | None:
        """Write one export file through ``write(path, overwrite)`` (app/dialogs.py ``choose_output``: nothing
        replaced unasked, a failure said, the folder remembered). Returns the path written, or None."""
        return choose_output(self.window, path, suffix, write, confirm=confirm, say=self._say,
                             prefs=self.window.prefs, folder_key="folders/export")

    def export_data(self, path, confirm: bool = True) -> Path | None:
        """Write the live plots' series as CSV (sim/export.py); returns the path written, or None."""
        w = self.window
        path = self._export(path, ".csv", confirm, lambda to, overwrite: export.write_history_csv(
            to, w.model, w.runner.history, overwrite=overwrite))
        if path is not None:
            w.show_message(f"exported the plot data ({len(w.runner.history)} samples) to {path}")
        return path

    def export_fields(self, path, confirm: bool = True):
        """Write the fields now and the plot history in the format of ``path``'s suffix (sim/output); the copy
        is taken now and the file written by a worker thread, the window told when it is done. Returns the
        writing's Future, or None when nothing is written (a refused name, a kept file, an error said)."""
        from latticelab.sim.output import export_now, output_format
        w = self.window
        path = Path(path)
        try:
            output_format(path)
        except ParameterError as exc:
            self._say(str(exc), error=True)
            return None
        started = []

        def start(to, overwrite):
            started.append(export_now(to, w.model, w.runner.history.arrays(), overwrite=overwrite))

        path = choose_output(w, path, "", start, confirm=confirm, say=self._say, prefs=w.prefs,
                             folder_key="folders/export", errors=(OSError, ParameterError), replace_folders=True)
        if path is None:
            return None
        future = started[0]
        w.show_message(f"exporting the data to {path} ...")
        self._exports.append((path, future))
        self._export_timer.start()
        return future

    def _check_exports(self) -> None:
        for path, future in [e for e in self._exports if e[1].done()]:
            self._exports.remove((path, future))
            error = future.exception()
            if error is None:
                self.window.show_message(f"exported the data to {path}")
            else:
                self._say(f"could not write {path}: {error}", error=True)
        if not self._exports:
            self._export_timer.stop()

    def export_fields_dialog(self) -> None:
        self._export_dialog("Export data", ".zarr", "Zarr store (*.zarr);;NWB file, spike trains (*.nwb);;"
                            "ParaView time series (*.pvd);;Legacy VTK (*.vtk)", self.export_fields)

    def export_plots(self, path, confirm: bool = True) -> Path | None:
        """Write the live plots as drawn (the plot canvas rendered) as PNG; returns the path, or None."""
        path = self._export(path, ".png", confirm, lambda to, overwrite: io.write_png(
            to, self.window.plot_canvas.render(alpha=False), overwrite=overwrite))
        if path is not None:
            self.window.show_message(f"exported the plots to {path}")
        return path

    def _export_dialog(self, title: str, suffix: str, filters: str, export_to) -> None:
        path = self._ask_path(title, suffix, filters)
        if path:
            export_to(path, confirm=True)

    def export_data_dialog(self) -> None:
        self._export_dialog("Export plot data", ".csv", "CSV tables (*.csv)", self.export_data)

    def export_plots_dialog(self) -> None:
        self._export_dialog("Export plots", ".png", "PNG images (*.png)", self.export_plots)

    # ---- the movie --------------------------------------------------------------------------
    @property
    def recording(self) -> bool:
        return self.recorder is not None

    def record_dialog(self) -> None:
        w = self.window
        if self.recording or not w.interactive:
            return
        folder = w.prefs.get("folders/export") or str(Path.cwd())
        dialog = RecordDialog(w, str(Path(folder) / self._default_name(".mp4")), self.fps, self.every)
        if dialog.exec() == QtWidgets.QDialog.DialogCode.Accepted:
            path, fps, every = dialog.values()
            if path:
                self.start(path, fps, every, confirm=True)

    def start(self, path, fps: float = 25.0, every: int = 1, confirm: bool = True) -> bool:
        """Start recording the view into ``path`` (``*.mp4``, or a new folder of PNG frames). An existing movie is
        replaced only if the user agrees (``confirm``), else a free name is used. Returns whether it started."""
        if self.recording:
            self.stop()
        path = Path(path)
        overwrite = False
        if os.path.lexists(path):
            if is_movie(path) and confirm and path.is_file():
                if not confirm_replace(self.window, path):
                    self.window.show_message(f"not recording: {path.name} exists and was kept")
                    return False
                overwrite = True
            else:                            # scripts, and frame folders: never into an existing one
                path = io.free_path(path)
        try:
            recorder = FrameRecorder(path, fps=fps, every=every, overwrite=overwrite)
        except (ParameterError, OSError) as exc:
            self._say(f"not recording: {exc}", error=True)
            return False
        for note in recorder.notes:          # the MP4 encoder is missing: PNG frames instead
            self._say(note, error=True)
        self.recorder, self.fps, self.every = recorder, float(fps), int(every)
        self.window.prefs.set("folders/export", str(recorder.path.parent.resolve()))
        self.record_action.setEnabled(False)
        self.stop_action.setEnabled(True)
        self.label.show()
        self._show_count()
        self.poll()                          # the first frame: the state as it is now
        self._poll.start()
        self.window.show_message(f"recording to {recorder.path} ({fps:g} fps, one frame every {every} "
                                 f"step{'s' if every != 1 else ''})")
        return True

    def poll(self) -> None:
        """Take a frame of the view when one is due (called by the timer; tests may call it directly)."""
        recorder = self.recorder
        if recorder is None:
            return
        if recorder.error is not None:
            self.stop()
            return
        step = self.window.model.step_count
        if self._scripted and not recorder.has_room():
            return                    # a scripted movie keeps every frame: this one is taken when there is room
        if recorder.due(step):
            recorder.add(self.window.capture("view"), step)
            self._show_count()

    def run_steps(self, n: int, then=None) -> None:
        """Scripted recording (``latticelab gui --record ... --steps N``): run ``n`` steps through the window's
        frame loop in pieces of ``every`` steps and take a frame after each piece, so the movie has exactly one
        frame per ``every`` steps (plus the first) whatever the steps per frame; then call ``then``."""
        every = self.recorder.every if self.recorder is not None else max(n, 1)
        self._scripted = True

        def piece(remaining: int) -> None:
            recorder = self.recorder
            if recorder is not None and not recorder.has_room():
                # the encoder is behind: a scripted movie must hold every frame, so wait for it (the event
                # loop keeps running) instead of dropping this one
                QtCore.QTimer.singleShot(10, lambda: piece(remaining))
                return
            self.poll()
            if remaining <= 0:
                if then is not None:
                    then()
                return
            size = min(every, remaining)
            self.window.run_steps(size, then=lambda: piece(remaining - size))

        piece(int(n))

    def _show_count(self) -> None:
        r = self.recorder
        if r is None:
            return
        taken = r.accepted
        dropped = f", {r.dropped} dropped" if r.dropped else ""
        self.label.setText(f"\u25cf REC {taken} frame{'s' if taken != 1 else ''}{dropped}")

    def stop(self, wait: bool = False):
        """Stop recording. The writer finishes the queued frames on its thread and the file is moved into place
        when it is done (``wait``: here and now, returning the RecordingResult; else reported later)."""
        recorder, self.recorder = self.recorder, None
        self._scripted = False
        self._poll.stop()
        self.label.hide()
        self.record_action.setEnabled(True)
        self.stop_action.setEnabled(False)
        if recorder is None:
            return None
        recorder.stop()
        self.finishing.append(recorder)
        if wait:
            return self._finish(recorder)
        self.window.show_message(f"finishing {recorder.path.name} ...")
        self._finish_timer.start()
        return None

    def _check_finished(self) -> None:
        for recorder in [r for r in self.finishing if r.finished]:
            self._finish(recorder)
        if not self.finishing:
            self._finish_timer.stop()

    def _finish(self, recorder: FrameRecorder):
        if recorder in self.finishing:
            self.finishing.remove(recorder)
        try:
            result = recorder.close()
        except OSError as exc:
            self._say(f"the recording was not kept: {exc}", error=True)
            return None
        self.last_result = result
        self.window.show_message(result.describe())
        return result

    def shutdown(self) -> None:
        """The window closes: finish every recording (the files are moved into place)."""
        self.stop(wait=True)
        for recorder in list(self.finishing):
            self._finish(recorder)

    def eventFilter(self, watched, event) -> bool:
        if watched is self.window and event.type() == QtCore.QEvent.Type.Close:
            self.shutdown()
        return False


def install(window) -> Recording:
    """Add the File menu's plot exports and movie recording to a main window."""
    recording = Recording(window)
    window.installEventFilter(recording)
    app = QtWidgets.QApplication.instance()
    if app is not None:
        app.aboutToQuit.connect(recording.shutdown)
    return recording
