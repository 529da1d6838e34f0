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

Reading is bounded: ``load_state`` reads only the members it expects (the header, the schema's scalars and the
model's array names), parses each member's .npy header first (Python objects are never unpickled), and checks
the size the header declares against the size the archive declares and against the memory free here before
anything is decompressed. Arrays are handed to the model in C order and native byte order, whatever layout
the file stored.
"""
from __future__ import annotations

import os
import stat
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from latticelab.sim.io import write_atomic
from latticelab.sim.memory import host_available_bytes
from latticelab.sim.params import ParameterError

FORMAT = 2
SUFFIX = ".npz"
PARAM = "param."
HEADER = ("latticelab_state", "model", "model_format")
SCALAR_LIMIT = 1 << 16        # bytes a header field or parameter may declare


# what zipfile, zlib and numpy's .npy reader raise on damaged bytes
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, RuntimeError,
                struct.error, OverflowError, MemoryError)


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


def format_1_layout() -> tuple[str, dict]:
    """(model name, layout) of format-1 files (latticelab 0.1: one model, its parameters and counters at the top
    level, marked by ``format`` = 1): the registered model that declares ``Model.format_1_layout``."""
    from latticelab.sim.models import all_models
    readers = [(name, cls.format_1_layout) for name, cls in all_models().items() if cls.format_1_layout]
    if len(readers) != 1:
        raise RuntimeError(f"exactly one model must read format-1 states; found {[n for n, _ in readers]}")
    return readers[0]


def upgrade(state: dict) -> dict:
    """A state of an older layout in the current one (format 1 -> 2); the current layout unchanged."""
    if "latticelab_state" in state or "format" not in state:
        return state
    try:
        version = int(np.asarray(state["format"]).item())
    except (TypeError, ValueError):
        return state
    if version != 1:
        return state
    name, legacy = format_1_layout()
    out = {"latticelab_state": np.int64(FORMAT), "model": np.str_(name),
           "model_format": np.int64(legacy["model_format"])}
    out.update({PARAM + k: state[k] for k in legacy["params"] if k in state})
    out.update({PARAM + k: np.asarray(v) for k, v in legacy["defaults"].items()})
    out.update({k: state[k] for k in legacy["arrays"] if k in state})
    return out


def native(value, copy: bool = False):
    """``value`` as a C-ordered NumPy array in native byte order (scalars stay 0-d arrays); with ``copy`` never
    a view of ``value``."""
    a = np.asarray(value)
    if not a.dtype.isnative:
        return np.array(a, dtype=a.dtype.newbyteorder("="), order="C")
    if copy or not a.flags.c_contiguous:
        return np.array(a, order="C")      # (np.ascontiguousarray would make a 0-d array 1-d)
    return a


def restore(state, backend: str = "auto", source: str = "the saved state", *, devices=None, _fresh: bool = False):
    """The model a ``state_of`` dict describes, rebuilt on ``backend`` (a model that splits: over ``devices``, the
    run option); StateError when it cannot be. The model never shares memory with ``state``, and gets its arrays
    in C order and native byte order."""
    from latticelab.sim.models import get_model, model_names
    from latticelab.sim.multidevice.devices import device_option

    def bad(detail: str) -> StateError:
        return StateError(f"{source} is damaged or not a latticelab state: {detail}")

    state = upgrade(state)
    if "latticelab_state" not in state and "format" in state:
        raise StateError(f"{source} is a latticelab state of format {np.asarray(state['format']).item()!r}, "
                         "which this version does not read (it reads formats 1 and 2)")

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
    arrays = {k: native(v, copy=not _fresh) for k, v in state.items() if not k.startswith(PARAM) and k not in HEADER}
    try:
        params = cls.Params.create(**values)
        return cls.from_state(params, arrays, backend=backend, **device_option(cls, devices))
    except ParameterError as exc:
        if exc.parameter in ("devices", "distributed"):    # the run's option, not the file, is refused
            raise
        if exc.parameter == "state":
            raise StateError(f"{source}: {str(exc).removeprefix('state: ')}") from None
        raise bad(f"parameter {exc}") from None


def save_state(path, model, overwrite: bool = False) -> Path:
    """Write ``model``'s state to ``path`` (.npz) atomically; an existing file is kept unless ``overwrite``."""
    state = state_of(model)
    return write_atomic(path, lambda f: np.savez_compressed(f, **state), overwrite)


# ---- bounded reading ------------------------------------------------------------------------------
_state_names: dict[type, tuple[str, ...]] = {}


def state_array_names(cls) -> tuple[str, ...]:
    """The names of the arrays ``cls.get_state()`` returns: ``cls.state_arrays`` where the model declares
    them, else learnt once from its small example."""
    if cls not in _state_names:
        declared = getattr(cls, "state_arrays", None)
        if declared is None:
            declared = tuple(cls.create(backend="numpy", **cls.small_example).get_state())
        _state_names[cls] = tuple(declared)
    return _state_names[cls]


class _Archive:
    """A .npz opened for bounded reading; every error is a StateError naming the file."""

    def __init__(self, path: Path):
        self.path = path
        try:
            kind = os.stat(path).st_mode      # before opening: a FIFO's open waits for a writer, /dev/zero never ends
        except OSError:
            kind = None                        # zipfile says why below
        if kind is not None and not stat.S_ISREG(kind) and not stat.S_ISDIR(kind):
            raise StateError(f"{path} is not a regular file (a device, pipe or socket); a saved latticelab state is "
                             "a .npz file")
        try:
            self.zip = zipfile.ZipFile(path)
        except FileNotFoundError:
            raise StateError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise StateError(f"{path} is a folder, not a saved latticelab state") from None
        except PermissionError:
            raise StateError(f"{path}: permission denied; cannot read it") from None
        except zipfile.BadZipFile:
            what = _what_it_is(path)
            if what == "zip":
                raise self.damaged("truncated or damaged: the archive's directory is missing or unreadable") from None
            raise StateError(f"{path} is not a saved latticelab state (not a NumPy .npz archive: {what})") from None
        except _READ_ERRORS as exc:
            raise self.damaged(f"{type(exc).__name__}: {exc}") from None
        names = [info.filename for info in self.zip.infolist()]
        if len(set(names)) != len(names):
            self.close()
            raise self.damaged("an archive member appears twice")
        self.members = {n[:-4]: info for n, info in zip(names, self.zip.infolist()) if n.endswith(".npy")}

    def damaged(self, detail: str) -> StateError:
        return StateError(f"{self.path} is damaged or not a saved latticelab state ({detail})")

    def close(self) -> None:
        self.zip.close()

    def header(self, key: str):
        """(shape, dtype, header length) of member ``key`` from its .npy header, nothing else read."""
        info = self.members[key]
        try:
            with self.zip.open(info) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    raise ValueError(f"unsupported .npy version {version}")
                offset = f.tell()
        except _READ_ERRORS as exc:
            raise self.damaged(f"member {key!r}: {type(exc).__name__}: {exc}") from None
        if dtype.hasobject:
            raise StateError(f"{self.path} is not a saved latticelab state: member {key!r} holds Python "
                             "objects (pickled data), which latticelab never loads")
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if all(n >= 0 for n in shape) else -1
        if size < 0 or offset + size != info.file_size:
            raise self.damaged(f"member {key!r} declares {shape} {dtype} but the archive holds "
                               f"{info.file_size - offset} bytes of data")
        return shape, dtype, size

    def read(self, keys, limit: int | None = None, per_member: int | None = None,
             expected: tuple[int, str] | None = None) -> dict:
        """The members ``keys`` (those present), after checking every declared size: each against
        ``per_member``, all together against ``expected`` (bytes, and what they are: a model of the file's
        parameters) and ``limit`` (default: the free host memory); nothing is decompressed before."""
        keys = [k for k in keys if k in self.members]
        sizes = {}
        for key in keys:
            shape, dtype, size = self.header(key)
            if per_member is not None and size > per_member:
                raise self.damaged(f"member {key!r} declares {size:,} bytes ({shape} {dtype}); at most "
                                   f"{per_member:,} are allowed there")
            sizes[key] = size
        if expected is not None and sum(sizes.values()) > expected[0]:
            largest = max(sizes, key=sizes.get)
            shape, dtype, _ = self.header(largest)
            raise self.damaged(f"its arrays declare {sum(sizes.values()) / 2**20:,.1f} MiB ({largest!r}: {shape} "
                               f"{dtype}), more than {expected[1]} can hold; not read")
        limit = host_available_bytes() // 2 if limit is None else limit
        if sum(sizes.values()) > limit:
            raise StateError(f"{self.path}: its arrays declare {sum(sizes.values()) / 2**20:,.1f} MiB, more than "
                             f"the {limit / 2**20:,.1f} MiB this machine can take now; not loaded")
        out = {}
        for key in keys:
            try:
                with self.zip.open(self.members[key]) as f:
                    out[key] = native(np.lib.format.read_array(f, allow_pickle=False))
                    if f.read(1):    # reaching the end also makes zipfile check the member's CRC
                        raise ValueError("data after the array")
            except _READ_ERRORS as exc:
                raise self.damaged(f"member {key!r}: {type(exc).__name__}: {exc}") from None
        return out


def _what_it_is(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            start = f.read(512)
    except OSError:
        return "unreadable"
    if not start:
        return "the file is empty"
    if start.startswith(b"PK\x03\x04"):
        return "zip"
    if start.startswith(b"\x93NUMPY"):
        return "it is a single NumPy array"
    if start[:1] == b"\x80":
        return "it looks like a Python pickle, which latticelab never loads"
    if b"\0" not in start:
        return "it is a text file"
    return "unknown binary content"


def read_state(path, limit: int | None = None) -> dict:
    """Every array of a .npz file (sizes checked before reading, no pickles), or StateError naming it."""
    archive = _Archive(Path(path))
    try:
        return archive.read(list(archive.members), limit)
    finally:
        archive.close()


def _expected_bytes(cls, head: dict) -> tuple[int, str] | None:
    """(bytes, words) that the arrays of a ``cls`` model with the parameters in ``head`` can take at most: twice
    the model's own memory estimate on the CPU (which holds its state arrays and more) and 1 MiB; None when the
    parameters do not make a model (restore says why) or the model gives no estimate."""
    try:
        values = {f: np.asarray(head[PARAM + f]).item() for f in cls.Params.model_fields}
        params = cls.Params.create(**values)
        estimate = cls.estimate_bytes(params, "numpy")
    except Exception:        # missing or bad parameters: restore() names them
        return None
    if estimate is None:
        return None
    return 2 * int(estimate) + (1 << 20), f"a {cls.name} model of the file's parameters"


def load_state(path, backend: str = "auto", devices=None):
    """The model saved in ``path``, ready to continue exactly where it was saved (``devices``: the run option
    of a model that splits, sim/multidevice/devices.py).

    Only the expected members are read: first the header and parameters (each at most SCALAR_LIMIT bytes),
    then, for the model they name, its arrays (their declared sizes checked against the free memory)."""
    from latticelab.sim.models import get_model, model_names

    path = Path(path)
    archive = _Archive(path)
    try:
        if "latticelab_state" not in archive.members and "format" in archive.members:   # format 1
            legacy = format_1_layout()[1]
            head = archive.read(["format", *legacy["params"]], per_member=SCALAR_LIMIT)
            head.update(archive.read(legacy["arrays"]))
            head = upgrade(head)
        else:
            head = archive.read([k for k in archive.members if k in HEADER or k.startswith(PARAM)],
                                per_member=SCALAR_LIMIT)
        name = str(head["model"].item()) if "model" in head and head["model"].shape == () else None
        if name in model_names():
            cls = get_model(name)
            arrays = archive.read(state_array_names(cls), expected=_expected_bytes(cls, head))
            head.update({k: v for k, v in arrays.items() if k not in head})
    finally:
        archive.close()
    if "latticelab_state" in head:
        return restore(head, backend, source=str(path), devices=devices, _fresh=True)
    return restore(head, backend, source=str(path), devices=devices)
