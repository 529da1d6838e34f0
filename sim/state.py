"""Saved states of any model: one .npz file holding the model's name, its parameters and its arrays.

Layout (format 2)::

    latticelab_state   2 (this layout's number)
    model              the registry name ("ising")
    model_format       the model's own state version (Model.state_format)
    param.<name>       one scalar per field of the model's parameter schema
    <name>             the model's arrays and counters (Model.get_state())

``save_state`` writes it atomically; ``load_state`` reads it, checks it and rebuilds the model of the name it
holds. A damaged, truncated or foreign file, or one of an unknown model, raises StateError naming the file;
nothing is rebuilt from a file that does not pass the checks.
"""
from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from latticelab.sim.io import write_atomic
from latticelab.sim.params import ParameterError

FORMAT = 2
SUFFIX = ".npz"
PARAM = "param."


class StateError(ValueError):
    """A state cannot be used; the message names the file (when there is one) and says why."""


def state_of(model) -> dict[str, np.ndarray]:
    """The complete state of ``model`` as a flat dict of NumPy arrays (what a state file holds)."""
    state = {"latticelab_state": np.int64(FORMAT), "model": np.str_(model.name),
             "model_format": np.int64(model.state_format)}
    for name, value in model.params.model_dump().items():
        state[PARAM + name] = np.asarray(value)
    for name, value in model.get_state().items():
        if name in state or name.startswith(PARAM):
            raise ValueError(f"{model.name}: get_state() uses the reserved name {name!r}")
        state[name] = value
    return state


def restore(state, backend: str = "auto", source: str = "the saved state"):
    """The model a ``state_of`` dict describes, rebuilt on ``backend``; StateError when it cannot be."""
    from latticelab.sim.models import get_model, model_names

    def bad(detail: str) -> StateError:
        return StateError(f"{source} is damaged or not a latticelab state: {detail}")

    try:
        layout = int(np.asarray(state["latticelab_state"]).item())
        name = str(np.asarray(state["model"]).item())
        model_format = int(np.asarray(state["model_format"]).item())
    except KeyError as exc:
        raise bad(f"missing field {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise bad(f"{type(exc).__name__}: {exc}") from None
    if layout > FORMAT:
        raise StateError(f"{source} was written by a newer latticelab (state layout {layout}; this version "
                         f"reads {FORMAT}); update latticelab to load it")
    if layout != FORMAT:
        raise bad(f"state layout {layout} is not supported (this version reads {FORMAT})")
    if name not in model_names():
        raise StateError(f"{source} holds a model named {name!r}, which this latticelab does not have "
                         f"(it has {', '.join(model_names())})")
    cls = get_model(name)
    if model_format > cls.state_format:
        raise StateError(f"{source} was written by a newer latticelab ({name} state format {model_format}; "
                         f"this version reads {cls.state_format})")
    if model_format != cls.state_format:
        raise bad(f"{name} state format {model_format} is not supported (this version reads {cls.state_format})")
    values = {}
    for field in cls.Params.model_fields:
        key = PARAM + field
        if key not in state:
            raise bad(f"missing parameter {field!r}")
        value = np.asarray(state[key])
        if value.shape != ():
            raise bad(f"parameter {field!r} is not a scalar")
        values[field] = value.item()
    arrays = {k: v for k, v in state.items()
              if not k.startswith(PARAM) and k not in ("latticelab_state", "model", "model_format")}
    try:
        params = cls.Params.create(**values)
        return cls.from_state(params, arrays, backend=backend)
    except ParameterError as exc:
        if exc.parameter == "state":
            raise StateError(f"{source}: {str(exc).removeprefix('state: ')}") from None
        raise bad(f"parameter {exc}") from None


def save_state(path, model, overwrite: bool = False) -> Path:
    """Write ``model``'s state to ``path`` (.npz) atomically; an existing file is kept unless ``overwrite``."""
    state = state_of(model)
    return write_atomic(path, lambda f: np.savez_compressed(f, **state), overwrite)


def read_state(path) -> dict:
    """Every array of a state file, or StateError naming the file."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            if not hasattr(archive, "files"):
                raise StateError(f"{path} is a single NumPy array, not a saved latticelab state")
            return {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise StateError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise StateError(f"{path} is a folder, not a saved latticelab state") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as exc:
        reason = "it is not a NumPy .npz archive" if "pickle" in str(exc) else f"{type(exc).__name__}: {exc}"
        raise StateError(f"{path} is damaged or not a saved latticelab state ({reason})") from None


def load_state(path, backend: str = "auto"):
    """The model saved in ``path``, ready to continue exactly where it was saved."""
    return restore(read_state(path), backend, source=str(path))
