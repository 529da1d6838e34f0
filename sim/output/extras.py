"""The optional libraries of the writers (a missing one is reported in one line naming the extra to install),
and publishing a file that a library writes by name (``write_by_name``)."""
from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
from pathlib import Path

from latticelab.sim.io import OutputError, OutputExists


class MissingExtra(OutputError):
    """A writer's optional library is not installed: the message names the extra that brings it."""

    def __init__(self, path, modules: tuple[str, ...], extra: str):
        names = " and ".join(modules)
        super().__init__(path, f"writing this format needs {names}; install them with "
                               f"pip install 'latticelab[{extra}]'")


def require(path, *modules: str, extra: str = "io"):
    """Import ``modules`` (returned in order); MissingExtra naming the extra when one is missing."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtra(path, tuple(missing), extra)
    return tuple(importlib.import_module(m) for m in modules)


def write_by_name(path, write, overwrite: bool = False, suffix: str = "") -> Path:
    """For libraries that write to a file name (pynwb, meshio): ``write(temporary_name)`` beside ``path``, then
    the file moved to ``path`` (an existing one only with ``overwrite``; a link cannot replace a file, so a
    racing writer is not overwritten either). Nothing is left under either name when it fails; errors name
    ``path``. ``suffix``: the temporary name's ending, for libraries that look at it."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=f".part{suffix}", dir=folder)
    os.close(fd)
    try:
        write(tmp)
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise OutputExists(target, "it exists already; choose another name or allow overwriting") from None
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise OutputError(target, exc.strerror or str(exc), exc.errno) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
