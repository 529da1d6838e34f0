"""The optional libraries of the writers: a missing one is reported in one line naming the extra to install."""
from __future__ import annotations

import importlib
import importlib.util

from latticelab.sim.io import OutputError


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
