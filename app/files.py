"""Files the user makes: PNG screenshots and saved simulation states.

Writes go to a temporary file beside the target and are renamed into place, so an interrupted write never
leaves a damaged file under the user's name, and an existing file is only replaced when the caller says so.
"""
from __future__ import annotations

import os
import tempfile
import zipfile
import zlib
from pathlib import Path

import numpy as np

STATE_SUFFIX = ".npz"


class StateFileError(ValueError):
    """A state file cannot be read; the message says which file and why."""


def unique_path(path) -> Path:
    """``path`` if it does not exist, else the first free ``stem-N.suffix`` beside it."""
    path = Path(path)
    if not path.exists():
        return path
    n = 1
    while True:
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists():
            return candidate
        n += 1


def _atomic_write(path: Path, write) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent or ".")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_png(path, rgba: np.ndarray) -> Path:
    """Write an (H, W, 3|4) uint8 image as PNG."""
    import imageio.v3 as iio

    path = Path(path)
    _atomic_write(path, lambda tmp: iio.imwrite(tmp, np.ascontiguousarray(rgba), extension=".png"))
    return path


def write_state(path, state: dict) -> Path:
    """Save a model state (``IsingModel.get_state()``) as .npz."""
    path = Path(path)

    def write(tmp):
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **state)

    _atomic_write(path, write)
    return path


def read_state(path) -> dict:
    """Load every array of a state file; raise StateFileError for anything unreadable."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise StateFileError(f"{path}: no such file") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as exc:
        raise StateFileError(f"{path} is damaged or not a saved latticelab state "
                             f"({type(exc).__name__}: {exc})") from None
