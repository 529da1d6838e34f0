"""Writing files the user makes: never over an existing file unless asked, always atomically.

Every writer in latticelab (states, screenshots, spectra, benchmark results) goes through ``write_atomic``:
the content is written to a temporary file beside the target, flushed to disk, and only then moved to the
target name, so an interrupted write leaves either the old file or the complete new one, never a damaged
file under the user's name. Without ``overwrite`` the move refuses an existing target even against a writer
racing us (a hard link cannot replace a file).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def free_path(path) -> Path:
    """``path`` if nothing is there, else the first free ``stem-1.suffix``, ``stem-2.suffix``, ..."""
    path = Path(path)
    if not path.exists():
        return path
    for i in range(1, 100000):
        candidate = path.with_name(f"{path.stem}-{i}{path.suffix}")
        if not candidate.exists():
            return candidate
    raise FileExistsError(f"no free name next to {path}")


@contextlib.contextmanager
def open_atomic(path, overwrite: bool = False, binary: bool = True):
    """Yield a file object whose content appears at ``path`` only when the block ends without an error.

    An existing ``path`` raises FileExistsError (before anything is written) unless ``overwrite``; the new
    file follows the umask like any other file the user creates.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists already; choose another name or allow overwriting")
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"newline": ""})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)      # fails if the name was taken meanwhile
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path, write, overwrite: bool = False, binary: bool = True) -> Path:
    """``write(file)`` into a temporary file, then move it to ``path`` (see ``open_atomic``)."""
    with open_atomic(path, overwrite, binary) as f:
        write(f)
    return Path(path)


def write_png(path, rgba, overwrite: bool = False) -> Path:
    """Write an (H, W, 3|4) uint8 image as PNG."""
    import imageio.v3 as iio
    import numpy as np

    return write_atomic(path, lambda f: f.write(iio.imwrite("<bytes>", np.ascontiguousarray(rgba), extension=".png")),
                        overwrite)
