"""Writing files the user makes: never over an existing file unless asked, always atomically.

Every writer in latticelab (states, screenshots, spectra, CSV runs, benchmark results) goes through ``open_atomic``
/ ``write_atomic``: the content is written to a temporary file beside the target, flushed and fsynced, and only
then moved to the target name, so an interrupted write leaves either the old file or the complete new one, never a
damaged file under the user's name. A temporary file left by a writer killed mid-write (kill -9) is removed by the
next write of the same name in that folder (``remove_stale_parts``). Without ``overwrite`` the move refuses an
existing target even against a writer racing us (a hard link cannot replace a file). New files follow the umask
like any other file the user creates.

Every failure is an ``OutputError`` (an OSError) whose message names the target path, never the temporary
file, and says why in words ("the folder does not exist", "no space left on the device", ...).
``check_output`` runs the same checks before long work starts, so a run is not lost to a typo in a path.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import time
from pathlib import Path

try:
    import fcntl           # POSIX: the lock that tells a live writer's temporary from a dead one's
except ImportError:        # elsewhere no temporary is removed
    fcntl = None

_REASONS = {
    errno.ENOENT: "the folder does not exist",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EISDIR: "it is a folder",
    errno.EEXIST: "it exists already; choose another name or allow overwriting",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EXDEV: "the temporary file and the target are on different file systems",
}


class OutputError(OSError):
    """A file could not be written; ``str()`` is one line naming the target and the reason."""

    def __init__(self, path, reason: str, code: int | None = None):
        super().__init__(code or 0, reason)
        self.path = Path(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: cannot write: {self.reason}"


class OutputExists(OutputError, FileExistsError):
    """The target exists and overwriting was not allowed."""


def _reason(exc: OSError) -> str:
    return _REASONS.get(exc.errno, exc.strerror or type(exc).__name__)


def current_umask() -> int:
    """The process's umask (read from /proc where possible, so no other thread sees it changed)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_output(path, overwrite: bool = False) -> Path:
    """Raise OutputError unless ``path`` can be written (a regular file or a free name in an existing,
    writable folder; an existing file only with ``overwrite``). Checked again when the file is written."""
    path = Path(path)
    if str(path) == "" or path.name in ("", ".", ".."):
        raise OutputError(path, "it is not a file name")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(path, _reason(exc), exc.errno) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(path, "it is a folder", errno.EISDIR)
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(path, "it is not a regular file (a device, pipe or socket); choose a file name")
        if not overwrite:
            raise OutputExists(path, _REASONS[errno.EEXIST], errno.EEXIST)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise OutputError(path, f"the folder {folder} does not exist" if not folder.exists()
                          else f"{folder} is not a folder", errno.ENOENT)
    if not os.access(folder, os.W_OK | os.X_OK):
        probe_error = errno.EROFS if _read_only_fs(folder) else errno.EACCES
        raise OutputError(path, f"{_REASONS[probe_error]} in {folder}", probe_error)
    return path


def _read_only_fs(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def free_path(path) -> Path:
    """``path`` if nothing is there, else the first free ``stem-1.suffix``, ``stem-2.suffix``, ..."""
    path = Path(path)
    if not os.path.lexists(path):
        return path
    for i in range(1, 100000):
        candidate = path.with_name(f"{path.stem}-{i}{path.suffix}")
        if not os.path.lexists(candidate):
            return candidate
    raise OutputError(path, "no free name next to it")


# When this process began writing files: a temporary file of ours older than this, that no live writer holds
# (below), was left by a process killed mid-write (kill -9, a power cut).
_STARTED = time.time()
_RANDOM = re.compile(r"[a-z0-9_]{8}")       # tempfile's random part of a name


def hold(fd: int) -> None:
    """Mark the temporary file ``fd`` as in use by this process (an advisory lock, released when the process
    ends however it ends): ``remove_stale_parts`` leaves it alone."""
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def remove_stale_parts(folder: Path, name: str, suffix: str = ".part") -> list[Path]:
    """Remove the temporaries that writers of ``name`` left in ``folder`` when killed mid-write: our own naming
    pattern only (``.NAME.XXXXXXXX<suffix>``, a regular file), older than this process, and held by no live
    writer (a writer holds its file's lock until it ends). Returns the paths removed; never raises."""
    removed = []
    prefix = f".{name}."
    if fcntl is None:
        return removed
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        middle = entry.name[len(prefix):-len(suffix)] if entry.name.endswith(suffix) else ""
        if not (entry.name.startswith(prefix) and _RANDOM.fullmatch(middle)):
            continue
        try:
            if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_mtime >= _STARTED:
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)       # fails while its writer lives
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


class AtomicFile:
    """A file written under a temporary name beside ``path`` and moved to ``path`` by ``commit`` (flushed and
    fsynced first), or removed by ``discard``: for a writer that decides at its end whether what it wrote is kept
    (``latticelab run --csv`` streams its rows and keeps the finished ones when interrupted). ``open_atomic`` is
    the usual way in: commit when its block ends, discard on an error.

    An existing ``path`` raises OutputError (before anything is written) unless ``overwrite``; a folder, a
    device or a missing folder always do. Errors name ``path``, never the temporary file."""

    def __init__(self, path, overwrite: bool = False, binary: bool = True):
        self.path = check_output(path, overwrite)
        self.overwrite = overwrite
        folder = self.path.parent if str(self.path.parent) else Path(".")
        remove_stale_parts(folder, self.path.name)
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".part", dir=folder)
        except OSError as exc:
            reason = f"cannot create files in {folder}" if exc.errno == errno.ENOENT else _reason(exc)
            raise OutputError(self.path, reason, exc.errno) from None
        hold(fd)
        try:
            os.fchmod(fd, 0o666 & ~current_umask())
            self.file = os.fdopen(fd, "wb" if binary else "w",
                                  **({} if binary else {"newline": "", "encoding": "utf-8"}))
        except OSError as exc:
            os.close(fd)
            self._remove()
            raise OutputError(self.path, _reason(exc), exc.errno) from None

    def commit(self) -> Path:
        """Flush, fsync and move the file to its name; OutputError (the temporary file removed) if that fails."""
        try:
            with self.file:
                self.file.flush()
                os.fsync(self.file.fileno())
            if self.overwrite:
                os.replace(self._tmp, self.path)
            else:
                os.link(self._tmp, self.path)      # fails if the name was taken meanwhile
                os.unlink(self._tmp)
        except FileExistsError:
            self._remove()
            raise OutputExists(self.path, _REASONS[errno.EEXIST], errno.EEXIST) from None
        except OSError as exc:
            self._remove()
            raise OutputError(self.path, _reason(exc), exc.errno) from None
        return self.path

    def discard(self) -> None:
        """Close and remove the temporary file: the target stays as it was."""
        with contextlib.suppress(OSError):
            self.file.close()
        self._remove()

    def _remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)


@contextlib.contextmanager
def open_atomic(path, overwrite: bool = False, binary: bool = True):
    """Yield a file object whose content appears at ``path`` only when the block ends without an error (see
    ``AtomicFile``)."""
    target = AtomicFile(path, overwrite, binary)
    try:
        yield target.file
    except BaseException as exc:
        target.discard()
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise OutputError(target.path, _reason(exc), exc.errno) from None
        raise
    target.commit()


def write_atomic(path, write, overwrite: bool = False, binary: bool = True) -> Path:
    """``write(file)`` into a temporary file, then move it to ``path`` (see ``open_atomic``)."""
    with open_atomic(path, overwrite, binary) as f:
        write(f)
    return Path(path)


def write_png(path, rgba, overwrite: bool = False) -> Path:
    """Write an (H, W, 3|4) uint8 image as PNG."""
    import imageio.v3 as iio
    import numpy as np

    data = iio.imwrite("<bytes>", np.ascontiguousarray(rgba), extension=".png")   # encode before opening
    return write_atomic(path, lambda f: f.write(data), overwrite)
