"""Recording movies of a simulation: frames in, an MP4 file (or a folder of PNG frames) out, encoded on a writer
thread so that whoever makes the frames (the window's GUI thread, a headless run) never waits for the encoder.

    recorder = FrameRecorder("run.mp4", fps=25, every=10)     # checks the path now; an existing file is kept
    for ...:
        model.step(1)
        if recorder.due(model.step_count):
            recorder.add(model.picture().colours())            # a full queue drops the frame (the window's way)
    result = recorder.close()                                   # RecordingResult: path, frames, dropped

Formats, from the path: ``*.mp4`` is H.264 video through imageio-ffmpeg (it brings its own ffmpeg); any other
name is a folder of PNG frames ``frame-000000.png``, ``frame-000001.png``, ... When the MP4 encoder is missing,
the recorder says so (``notes``) and writes PNG frames into ``<stem>-frames/`` beside the asked path instead.

Frames are (H, W, 3|4) uint8 images; the first fixes the movie's size, later ones of another size (a resized
window) are cropped or padded with black to it. H.264 in yuv420p needs even sizes: the first frame's size is
rounded up to even numbers by padding.

Files appear atomically: the movie (or the frame folder) is written under a temporary name beside the target
and moved to the target name by ``close``, never over an existing file unless ``overwrite``; ``abort``, or an
error, leaves nothing behind. The queue between producer and writer is bounded (``queue_size``): when the
writer falls behind, ``add`` drops the frame and counts it (``dropped``) instead of blocking, so that a window
never waits for the encoder; a headless run asks for every frame (``keep_every_frame``): ``add`` then waits
for room in the queue, and the movie holds every frame that was due.

Frames at cell resolution: ``cells_image`` lays a 3D picture's layers out as tiles (2D pictures are used as they
are).
"""
from __future__ import annotations

import contextlib
import errno
import math
import os
import queue
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from latticelab.sim import io

MOVIE_SUFFIXES = (".mp4",)
FRAME_PATTERN = "frame-{:06d}.png"
_STOP = object()


class EncoderMissing(RuntimeError):
    """The MP4 encoder (imageio-ffmpeg and its ffmpeg) cannot be used here; the message says why."""


def ffmpeg_executable() -> str:
    """Path of the ffmpeg that imageio-ffmpeg brings (or finds); EncoderMissing with the reason otherwise."""
    try:
        import imageio_ffmpeg
    except ImportError:
        raise EncoderMissing("the MP4 encoder is not installed (pip install imageio-ffmpeg)") from None
    try:
        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as exc:      # RuntimeError when no ffmpeg binary can be found
        raise EncoderMissing(f"imageio-ffmpeg finds no ffmpeg executable ({exc})") from None


def is_movie(path) -> bool:
    return Path(path).suffix.lower() in MOVIE_SUFFIXES


def check_target(path, overwrite: bool = False) -> Path:
    """Raise OutputError unless a recording can go to ``path``: a movie file (an existing one only with
    ``overwrite``) or a new folder for PNG frames (never an existing one)."""
    path = io.check_output(path, overwrite=overwrite and is_movie(path))
    if not is_movie(path) and os.path.lexists(path):
        raise io.OutputExists(path, "it exists already; choose another name (a new folder for the frames)",
                              errno.EEXIST)
    return path


def cells_image(rgba: np.ndarray) -> np.ndarray:
    """An (H, W, C) image of a picture's cell colours (``Picture.colours()``): 2D as it is; 3D as its layers
    side by side in a near-square grid of tiles, one black cell between tiles."""
    rgba = np.asarray(rgba)
    if rgba.ndim == 3:
        return rgba
    if rgba.ndim != 4:
        raise ValueError(f"rgba: must be (H, W, C) or (L, H, W, C) cell colours; got shape {rgba.shape}")
    layers, height, width, channels = rgba.shape
    columns = max(1, math.ceil(math.sqrt(layers)))
    rows = math.ceil(layers / columns)
    image = np.zeros((rows * (height + 1) - 1, columns * (width + 1) - 1, channels), np.uint8)
    if channels == 4:
        image[..., 3] = 255
    for z in range(layers):
        r, c = divmod(z, columns)
        image[r * (height + 1):r * (height + 1) + height, c * (width + 1):c * (width + 1) + width] = rgba[z]
    return image


def fit(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """``frame``'s RGB cropped or padded with black to (height, width, 3)."""
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[2] not in (3, 4) or frame.dtype != np.uint8:
        raise ValueError(f"frame: must be an (H, W, 3|4) uint8 image; got {frame.dtype} {frame.shape}")
    rgb = frame[:height, :width, :3]
    if rgb.shape[:2] == (height, width):
        return np.ascontiguousarray(rgb)
    out = np.zeros((height, width, 3), np.uint8)
    out[:rgb.shape[0], :rgb.shape[1]] = rgb
    return out


@dataclass
class RecordingResult:
    path: Path            # the movie file or the frame folder
    frames: int           # frames written
    dropped: int          # frames dropped because the writer was behind
    fps: float
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        kind = "movie" if is_movie(self.path) else "PNG frames in"
        dropped = f", {self.dropped} dropped (the encoder was behind)" if self.dropped else ""
        plural = "s" if self.frames != 1 else ""
        return f"recorded {self.frames} frame{plural} at {self.fps:g} fps: {kind} {self.path}{dropped}"


class FrameRecorder:
    """Frames to a movie (``*.mp4``) or a folder of PNGs, encoded on a writer thread; see the module docstring.

    ``fps``: the movie's frame rate; ``every``: ``due(step)`` is true when at least this many steps passed since
    the last frame added (the first frame is always due); ``keep_every_frame``: ``add`` waits for the writer
    rather than drop a frame. Path problems raise OutputError here, before any frame.
    """

    def __init__(self, path, fps: float = 25.0, every: int = 1, overwrite: bool = False, queue_size: int = 8,
                 quality: int = 8, keep_every_frame: bool = False):
        from latticelab.sim.params import ParameterError
        if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0.1 <= fps <= 1000:
            raise ParameterError("fps", f"must be a number of frames per second in [0.1, 1000]; got {fps!r}")
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise ParameterError("record-every", f"must be an integer >= 1 (steps between frames); got {every!r}")
        if queue_size < 1:
            raise ValueError(f"queue_size: must be >= 1; got {queue_size!r}")
        self.fps, self.every, self.overwrite, self.quality = float(fps), int(every), overwrite, quality
        self.keep_every_frame = keep_every_frame
        self.notes: list[str] = []
        path = Path(path)
        self.movie = is_movie(path)
        if self.movie:
            try:
                self._ffmpeg = ffmpeg_executable()
            except EncoderMissing as exc:
                self.movie = False
                fallback = io.free_path(path.with_name(f"{path.stem}-frames"))
                self.notes.append(f"{exc}; recording PNG frames into {fallback} instead of {path.name}")
                path = fallback
        self.path = check_target(path, overwrite and self.movie)      # OutputError: one line, now
        self._held: int | None = None
        self._temporary = self._make_temporary()
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self.accepted = 0               # frames queued by add()
        self.frames = 0                 # written by the writer thread
        self.dropped = 0
        self.error: BaseException | None = None
        self._last_step: int | None = None
        self._size: tuple[int, int] | None = None
        self._closed = False
        self._result: RecordingResult | None = None
        self._thread = threading.Thread(target=self._write_all, name="latticelab-recorder", daemon=True)
        self._thread.start()

    # ---- producer side ----------------------------------------------------------------------
    def due(self, step: int) -> bool:
        """Whether the frame of step ``step`` should be added: the first, then every ``every`` steps (a step
        count that went back, after a reset, starts again)."""
        last = self._last_step
        return last is None or step < last or step - last >= self.every

    def add(self, frame: np.ndarray, step: int | None = None) -> bool:
        """Queue a frame (the recorder keeps the array: pass a fresh one). Returns False when it was dropped
        (queue full, unless ``keep_every_frame``: then it waits) or the recorder has failed or is closed."""
        if step is not None:
            self._last_step = int(step)
        if self._closed or self.error is not None:
            return False
        if self._size is None:
            height, width = np.asarray(frame).shape[:2]
            self._size = (height + height % 2, width + width % 2) if self.movie else (height, width)
        try:
            # a failed writer drains the queue until stop(), so a waiting put always ends
            self._queue.put(frame, block=self.keep_every_frame)
        except queue.Full:
            self.dropped += 1
            return False
        self.accepted += 1
        return True

    def has_room(self) -> bool:
        """Whether ``add`` would queue a frame now without dropping or waiting (a closed or failed recorder
        has room: ``add`` returns at once)."""
        return self._closed or self.error is not None or not self._queue.full()

    @property
    def recording(self) -> bool:
        return not self._closed

    # ---- writer thread ----------------------------------------------------------------------
    def _make_temporary(self) -> Path:
        folder = self.path.parent if str(self.path.parent) else Path(".")
        try:
            if self.movie:
                io.remove_stale_parts(folder, self.path.name, ".part" + self.path.suffix)
                fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".part" + self.path.suffix,
                                            dir=folder)
                io.hold(fd)
                os.fchmod(fd, 0o666 & ~io.current_umask())
                self._held = fd                # kept open (and locked) until the movie is moved or discarded
                return Path(name)
            made = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", suffix=".part", dir=folder))
            os.chmod(made, 0o777 & ~io.current_umask())
            return made
        except OSError as exc:
            raise io.OutputError(self.path, exc.strerror or str(exc), exc.errno) from None

    def _write_all(self) -> None:
        encoder = None
        try:
            while True:
                frame = self._queue.get()
                if frame is _STOP:
                    break
                height, width = self._size
                rgb = fit(frame, height, width)
                if self.movie:
                    if encoder is None:
                        encoder = self._movie_encoder(width, height)
                    encoder.send(rgb)
                else:
                    import imageio.v3 as iio
                    iio.imwrite(self._temporary / FRAME_PATTERN.format(self.frames), rgb, extension=".png")
                self.frames += 1
        except BaseException as exc:      # reported by close() and ``error``; the producer keeps going
            self.error = exc
            while self._queue.get() is not _STOP:     # drain until stop(), so that nothing waits on a dead writer
                pass
        finally:
            if encoder is not None:
                try:
                    encoder.close()
                except BaseException as exc:
                    self.error = self.error or exc

    def _movie_encoder(self, width: int, height: int):
        import imageio_ffmpeg
        encoder = imageio_ffmpeg.write_frames(
            str(self._temporary), (width, height), fps=self.fps, codec="libx264", quality=self.quality,
            pix_fmt_in="rgb24", pix_fmt_out="yuv420p", macro_block_size=1, ffmpeg_log_level="error",
            output_params=["-f", "mp4"])
        encoder.send(None)               # start ffmpeg
        return encoder

    # ---- finishing --------------------------------------------------------------------------
    def stop(self) -> None:
        """No more frames: the writer finishes what is queued (``close`` waits for it and moves the file)."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)       # the writer drains the queue, so this waits at most for one frame

    @property
    def finished(self) -> bool:
        """Whether the writer thread is done (after ``stop``)."""
        return not self._thread.is_alive()

    def close(self) -> RecordingResult:
        """Stop, wait for the writer and move the movie (or frame folder) to its name. Raises OutputError when
        the recording could not be written (nothing is left behind then). Calling it again returns the result."""
        if self._result is not None:
            return self._result
        self.stop()
        self._thread.join()
        try:
            if self.error is not None:
                raise io.OutputError(self.path, f"the recording failed: {type(self.error).__name__}: {self.error}")
            if self.frames == 0 and self.movie:
                raise io.OutputError(self.path, "no frame was recorded")
            self._move_into_place()
        except BaseException:
            self._discard()
            raise
        self._result = RecordingResult(self.path, self.frames, self.dropped, self.fps, list(self.notes))
        return self._result

    def abort(self) -> None:
        """Stop and leave nothing behind."""
        self.stop()
        self._thread.join()
        self._discard()

    def _release(self) -> None:
        """Close the descriptor that marks the movie's temporary file as ours (io.hold)."""
        if self._held is not None:
            with contextlib.suppress(OSError):
                os.close(self._held)
            self._held = None

    def _discard(self) -> None:
        self._release()
        with contextlib.suppress(OSError):
            if self._temporary.is_dir():
                shutil.rmtree(self._temporary)
            else:
                self._temporary.unlink()

    def _move_into_place(self) -> None:
        try:
            if self.movie:
                with open(self._temporary, "rb") as f:
                    os.fsync(f.fileno())
                if self.overwrite:
                    os.replace(self._temporary, self.path)
                else:
                    os.link(self._temporary, self.path)        # fails if the name was taken meanwhile
                    os.unlink(self._temporary)
            else:
                if os.path.lexists(self.path):
                    raise FileExistsError(errno.EEXIST, "exists", str(self.path))
                os.rename(self._temporary, self.path)
            self._release()         # moved: nothing of ours is left to mark (a failure keeps it for _discard)
        except FileExistsError:
            raise io.OutputExists(self.path, "it was created by someone else during the recording; the recording "
                                             "was not kept", errno.EEXIST) from None
        except OSError as exc:
            raise io.OutputError(self.path, exc.strerror or str(exc), exc.errno) from None

    def __enter__(self) -> "FrameRecorder":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()
