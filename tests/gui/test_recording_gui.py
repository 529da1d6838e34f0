"""Issue 16 in the window: File > Export plot data / Export plots as PNG / Record movie..., the REC indicator,
and the scripted ``latticelab gui --record``. Movies are read back (PNG frames exactly, MP4 with
imageio-ffmpeg); nothing is timed: steps run through the window's own frame loop and the tests wait for them.
Windows are slow to build on CI, so each test checks several things of one window."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim import export

imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")


def file_menu_texts(window) -> list[str]:
    menu = next(a.menu() for a in window.menuBar().actions() if a.menu() and "File" in a.menu().title())
    return [a.text() for a in menu.actions() if not a.isSeparator()]


def run_recorded(qtbot, window, steps: int) -> None:
    done = []
    window.recording.run_steps(steps, then=lambda: done.append(True))
    qtbot.waitUntil(lambda: bool(done), timeout=60000)


def test_png_recording_with_the_rec_indicator_and_plot_exports(make_window, qtbot, tmp_path, monkeypatch):
    import imageio.v3 as iio
    out = tmp_path / "out"
    out.mkdir()
    window = make_window(L=16, size=(900, 700))
    rec = window.recording
    texts = file_menu_texts(window)
    assert {"Export plot data...", "Export plots as PNG...", "Record movie...", "Stop recording"} <= set(texts)
    assert not rec.label.isVisible() and not rec.stop_action.isEnabled()

    # a movie as PNG frames, one every 2 steps
    assert rec.start(out / "frames", fps=10, every=2, confirm=False)
    assert rec.label.isVisible() and rec.stop_action.isEnabled() and "REC" in rec.label.text()
    assert not rec.record_action.isEnabled()
    run_recorded(qtbot, window, 6)
    assert window.model.step_count == 6
    assert "REC 4 frames" in rec.label.text()
    result = rec.stop(wait=True)
    assert not rec.label.isVisible() and not rec.stop_action.isEnabled() and rec.record_action.isEnabled()
    assert (result.frames, result.dropped) == (4, 0)              # steps 0, 2, 4, 6
    files = sorted((out / "frames").iterdir())
    assert len(files) == 4
    last = iio.imread(files[-1])
    view = window.capture("view")[..., :3]                        # paused: the view still shows step 6
    np.testing.assert_array_equal(last, view)
    assert not np.array_equal(iio.imread(files[0]), last)         # the lattice changed between them

    # the dialog's choices: MP4 gets its suffix, PNG frames a folder name
    from latticelab.app.recording import RecordDialog
    dialog = RecordDialog(window, str(out / "movie"), 12.0, 3)
    assert dialog.values() == (str(out / "movie.mp4"), 12.0, 3)
    dialog.format.setCurrentIndex(dialog.format.findData("png"))
    assert dialog.values() == (str(out / "movie"), 12.0, 3)
    dialog.deleteLater()

    # the live plots' data as CSV: exactly the history, with its provenance; an existing file is kept
    path = rec.export_data(out / "plots", confirm=False)
    assert path == out / "plots.csv"
    comment, columns = export.read_series_csv(path)
    times, values = window.runner.history.arrays()
    assert columns["step"].tolist() == times.tolist() and times[-1] == 6
    for name, series in values.items():
        np.testing.assert_array_equal(columns[name], series)
    assert "model ising" in comment and "backend numpy" in comment and "L=16" in comment
    assert rec.export_data(out / "plots.csv", confirm=False) == out / "plots-1.csv"

    # the plots as drawn
    png = iio.imread(rec.export_plots(out / "plots.png", confirm=False))
    width, height = window.plot_canvas.size
    assert png.shape[0] >= height and png.shape[1] >= width        # the canvas at its (device) pixel size
    assert len(np.unique(png.reshape(-1, png.shape[2]), axis=0)) > 10   # curves and text, not a blank canvas

    # a scripted recording keeps every frame when the encoder falls behind: it waits for room, never drops
    import time

    from latticelab.sim import recording as sim_recording
    fit = sim_recording.fit
    monkeypatch.setattr(sim_recording, "fit", lambda *a: (time.sleep(0.3), fit(*a))[1])    # a slow writer
    assert rec.start(out / "slow", fps=10, every=1, confirm=False)
    rec.recorder._queue.maxsize = 1               # room for one frame: nearly every frame finds the writer busy
    run_recorded(qtbot, window, 12)
    result = rec.stop(wait=True)
    assert (result.frames, result.dropped) == (13, 0)             # steps 6 .. 18
    assert len(list((out / "slow").iterdir())) == 13


def test_mp4_recording_takes_a_free_name_and_finishes_off_the_gui_thread(make_window, qtbot, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    window = make_window(L=16, size=(900, 700))
    rec = window.recording
    (out / "movie.mp4").write_bytes(b"precious")
    assert rec.start(out / "movie.mp4", fps=8, every=1, confirm=False)
    run_recorded(qtbot, window, 3)
    assert rec.stop() is None                                     # the writer finishes on its own thread
    qtbot.waitUntil(lambda: rec.last_result is not None, timeout=60000)
    result = rec.last_result
    assert result.path == out / "movie-1.mp4" and "recorded 4 frames" in window.last_message
    assert (out / "movie.mp4").read_bytes() == b"precious"
    frames, _ = imageio_ffmpeg.count_frames_and_secs(str(result.path))
    assert frames == result.frames == 4                           # steps 0, 1, 2, 3
    reader = imageio_ffmpeg.read_frames(str(result.path))
    meta = next(reader)
    height, width = window.capture("view").shape[:2]
    assert meta["size"] == (width + width % 2, height + height % 2) and meta["fps"] == pytest.approx(8)
    frame = np.frombuffer(next(reader), np.uint8).reshape(meta["size"][1], meta["size"][0], 3)
    assert frame.std() > 20                                       # a picture, not a blank frame
    assert sorted(p.name for p in out.iterdir()) == ["movie-1.mp4", "movie.mp4"]


def test_scripted_gui_records_exactly_one_frame_every_n_steps(tmp_path):
    # a process of its own, as a user runs it: the command's QApplication.exec() and quit must not leave their
    # state in the test process (later window tests found their docks unraisable after an in-process run)
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run([sys.executable, "-m", "latticelab", "gui", "--model", "ising", "--backend", "numpy",
                           "--L", "16", "--steps", "10", "--steps-per-frame", "3", "--record", "run.mp4",
                           "--record-every", "4", "--fps", "5", "--window-size", "900x700", "--quit"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    out, code = done.stdout, done.returncode
    assert code == 0, out + done.stderr[-2000:]
    frames, _ = imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "run.mp4"))
    assert frames == 3 and "recorded 3 frames at 5 fps" in out      # steps 0, 4, 8
