"""Issue 16: the movie recorder (sim/recording.py: writer thread, bounded queue, atomic files, PNG fallback) and
the plot-data CSV (sim/export.py). Movies are read back with imageio-ffmpeg; nothing here is timed."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from latticelab.sim import export, io, recording
from latticelab.sim.recording import FrameRecorder, cells_image

imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")


def grey(level: int, shape=(18, 22)) -> np.ndarray:
    frame = np.empty((*shape, 4), np.uint8)
    frame[..., :3] = level
    frame[..., 3] = 255
    return frame


def read_movie(path) -> tuple[dict, list[np.ndarray]]:
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    return meta, [np.frombuffer(f, np.uint8).reshape(height, width, 3) for f in reader]


def test_mp4_has_every_frame_at_the_frame_rate_and_odd_sizes_are_padded(tmp_path):
    levels = [0, 40, 80, 120, 160, 200, 240]
    with FrameRecorder(tmp_path / "m.mp4", fps=7, queue_size=len(levels)) as recorder:
        for i, level in enumerate(levels):
            assert recorder.add(grey(level, (17, 21)), i)
    meta, frames = read_movie(tmp_path / "m.mp4")
    assert meta["size"] == (22, 18)                     # padded to even sizes for yuv420p
    assert meta["fps"] == pytest.approx(7)
    assert len(frames) == len(levels) == recorder.frames and recorder.dropped == 0
    means = [float(f[:17, :21].mean()) for f in frames]
    assert np.allclose(means, levels, atol=6), means    # lossy, but each frame is the one sent, in order
    assert [p.name for p in tmp_path.iterdir()] == ["m.mp4"]


def test_png_frames_are_exact_and_3d_pictures_are_tiled(tmp_path):
    rng = np.random.default_rng(1)
    cube = rng.integers(0, 256, (5, 4, 4, 4), dtype=np.uint8)
    tiled = cells_image(cube)
    assert tiled.shape == (2 * 5 - 1, 3 * 5 - 1, 4)     # 5 layers: 3 columns x 2 rows, one cell between
    np.testing.assert_array_equal(tiled[5:9, 5:9], cube[4])      # layer 4: row 1, column 1
    frames = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(3)] + [tiled[..., :3]]
    with FrameRecorder(tmp_path / "frames", fps=10, queue_size=4) as recorder:
        for i, frame in enumerate(frames):
            assert recorder.add(frame, i)
    import imageio.v3 as iio
    written = sorted((tmp_path / "frames").iterdir())
    assert [p.name for p in written] == [f"frame-00000{i}.png" for i in range(4)]
    for path, frame in zip(written[:3], frames):
        np.testing.assert_array_equal(iio.imread(path), frame)
    # a frame of another size (a resized window) is cropped or padded to the first one's
    np.testing.assert_array_equal(iio.imread(written[3]), tiled[:6, :5, :3])


def test_frames_are_due_every_n_steps_and_again_after_a_reset(tmp_path):
    recorder = FrameRecorder(tmp_path / "f", every=3)
    assert recorder.due(0)
    recorder.add(grey(0), 0)
    assert [s for s in range(1, 10) if recorder.due(s)] == [3, 4, 5, 6, 7, 8, 9]
    recorder.add(grey(0), 4)
    assert not recorder.due(6) and recorder.due(7)
    assert recorder.due(2)                               # the step count went back: a reset
    recorder.abort()
    assert list(tmp_path.iterdir()) == []


def test_a_full_queue_drops_and_counts_frames_instead_of_blocking(tmp_path, monkeypatch):
    entered, release = threading.Event(), threading.Event()
    real_fit = recording.fit

    def slow_fit(frame, height, width):
        entered.set()
        release.wait(60)
        return real_fit(frame, height, width)

    monkeypatch.setattr(recording, "fit", slow_fit)
    recorder = FrameRecorder(tmp_path / "frames", queue_size=2)
    assert recorder.add(grey(0), 0)
    assert entered.wait(60)                              # the writer holds frame 0 and waits
    accepted = [recorder.add(grey(10 * i), i) for i in range(1, 20)]
    assert accepted == [True, True] + [False] * 17       # two fit in the queue; the producer never waited
    assert recorder.dropped == 17
    release.set()
    result = recorder.close()
    assert (result.frames, result.dropped) == (3, 17)
    assert "17 dropped" in result.describe()
    assert len(list((tmp_path / "frames").iterdir())) == 3


def test_an_existing_file_is_kept_and_overwrite_replaces_it(tmp_path):
    target = tmp_path / "keep.mp4"
    target.write_bytes(b"precious")
    with pytest.raises(io.OutputExists, match="keep.mp4"):
        FrameRecorder(target)
    assert target.read_bytes() == b"precious" and [p.name for p in tmp_path.iterdir()] == ["keep.mp4"]
    (tmp_path / "folder").mkdir()
    with pytest.raises(io.OutputError, match="folder"):
        FrameRecorder(tmp_path / "folder")
    with FrameRecorder(target, overwrite=True) as recorder:
        recorder.add(grey(100), 0)
    assert len(read_movie(target)[1]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "keep.mp4"]


def test_a_failed_recording_leaves_nothing_and_says_why(tmp_path):
    recorder = FrameRecorder(tmp_path / "bad.mp4")
    recorder.add(np.zeros((4, 4), np.float32), 0)        # not an image: the writer fails
    with pytest.raises(io.OutputError, match="bad.mp4.*recording failed.*frame"):
        recorder.close()
    assert list(tmp_path.iterdir()) == []
    assert not recorder.add(grey(0), 1)                  # closed: refused, never blocks


def test_without_the_encoder_it_says_so_and_records_png_frames(tmp_path, monkeypatch):
    def missing():
        raise recording.EncoderMissing("the MP4 encoder is not installed (pip install imageio-ffmpeg)")

    monkeypatch.setattr(recording, "ffmpeg_executable", missing)
    with FrameRecorder(tmp_path / "run.mp4") as recorder:
        recorder.add(grey(50), 0)
    assert recorder.path == tmp_path / "run-frames"
    assert "pip install imageio-ffmpeg" in recorder.notes[0] and "run-frames" in recorder.notes[0]
    assert [p.name for p in (tmp_path / "run-frames").iterdir()] == ["frame-000000.png"]


def test_bad_frame_rate_and_interval_name_the_option(tmp_path):
    from latticelab.sim.params import ParameterError
    with pytest.raises(ParameterError, match="^fps:"):
        FrameRecorder(tmp_path / "a.mp4", fps=0)
    with pytest.raises(ParameterError, match="^record-every:"):
        FrameRecorder(tmp_path / "a.mp4", every=0)
    assert list(tmp_path.iterdir()) == []


# ---- the plot data as CSV ------------------------------------------------------------------------------
def test_plot_history_csv_reads_back_exactly_with_its_provenance(tmp_path):
    from latticelab.sim.runner import Runner
    runner = Runner("ising", {"dim": 2, "L": 8, "T": 2.0, "seed": 3}, backend="numpy", history_length=50)
    runner.advance(60, None)                              # more than the history holds: the last 50 are kept
    path = export.write_history_csv(tmp_path / "plots.csv", runner.model, runner.history)
    comment, columns = export.read_series_csv(path)
    times, values = runner.history.arrays()
    assert list(columns) == ["step", *runner.history.recorded, *runner.history.spreads]
    np.testing.assert_array_equal(columns["step"], times)
    assert columns["step"][0] == 11 and columns["step"][-1] == 60
    for name, series in values.items():
        np.testing.assert_array_equal(columns[name], series)
    assert "model ising" in comment and "backend numpy" in comment and "L=8" in comment and "T=2.0" in comment
    assert comment.startswith("latticelab 0.")
    with pytest.raises(io.OutputExists):
        export.write_history_csv(path, runner.model, runner.history)


def test_series_csv_names_the_time_after_the_model():
    from latticelab.sim.models import get_model
    assert export.time_column(get_model("cahn-hilliard")) == "simulated_time"
    with pytest.raises(ValueError, match="energy"):
        export.series_csv([0, 1], {"energy": [1.0]}, "step")
