"""Persistent preferences (QSettings): the last model and its parameters, view options, folders, window layout.

Model parameters are stored per model and per *variant* (ModelParams.variant_fields: the Ising model keeps
one set per dimension), under ``models/<model>/<variant>/<field>``, and read back through the model's own
schema, so the settings never declare a parameter again. Every value is checked on reading; a missing or
broken value falls back to its default and the problem is reported (one line per key), never raised.
"""
from __future__ import annotations

import math
import os
import stat
from pathlib import Path

from PySide6 import QtCore

from latticelab.app.settings_text import serialized_object_key
from latticelab.sim.params import ModelParams, ParameterError


def _int(value) -> int:
    if isinstance(value, bool):
        raise ValueError("not an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("not an integer")
    if isinstance(value, str):
        value = value.strip()
    return int(value)


def _float(value) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


def _bool(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError("not a boolean")


AUTO_STEPS = 0                  # "Steps / frame" auto: as many steps as fit in the frame's time budget
MAX_STEPS_PER_FRAME = 100000


def _steps(value) -> int:
    value = _int(value)
    if not (value == AUTO_STEPS or 1 <= value <= MAX_STEPS_PER_FRAME):
        raise ValueError(f"not {AUTO_STEPS} (auto) or 1 .. {MAX_STEPS_PER_FRAME}")
    return value


def default_steps_per_frame(backend_name: str, model_class=None) -> int:
    """The Steps / frame a window starts with where none was chosen: auto on a CUDA device, whose speed is why one
    runs there (a 4096^2 Ising lattice sweeps some 30,000 times a second; one sweep a frame would show 60 of
    them); on the CPU what the model declares (sim/model.py ``cpu_pace``): 1 by default, where each frame shows
    one step and the cells it changed (the step-through view), and where one step of a large lattice fills a
    frame anyway."""
    if backend_name == "cuda":
        return AUTO_STEPS
    return int(getattr(model_class, "cpu_pace", 1))


def _peel(value) -> int:
    value = _int(value)
    if value < 0:
        raise ValueError("negative")
    return value


def _text(value) -> str:
    return str(value)


# Window-level keys: (checker, default). Model parameters are not listed here: their schema checks them.
SCHEMA = {
    "model": (_text, ""),
    "run/steps_per_frame": (_steps, None),    # None: the backend's default (default_steps_per_frame)
    "run/adaptive": (_bool, True),
    "view/highlight": (_bool, True),
    "view/show_links": (_bool, False),
    "view/peel": (_peel, 0),
    "view/unfold": (_bool, False),
    "view/legend": (_bool, True),         # the colour key over the lattice (app/colour_key.py)
    "folders/export": (_text, ""),
    "folders/state": (_text, ""),
    "folders/study": (_text, ""),         # the Study dock's last study file or table (app/study_panel.py)
}

_CONVERT = {int: _int, float: _float, str: _text, bool: _bool}

# INI sections latticelab writes (QSettings puts top-level keys such as "model" under [General]).
KNOWN_SECTIONS = {"General", "models", "run", "view", "folders", "window", "spectral"}
SETTINGS_SIZE_LIMIT = 4 << 20


def check_settings_file(path) -> Path:
    """``path`` if it may be used as a settings file (``--settings``): missing (it will be made), empty, or
    an INI file holding latticelab's settings. Anything else, a folder, a device, a saved state, a text of
    notes, another program's INI, raises ParameterError('settings', ...) and is never written."""
    path = Path(path)

    def refuse(why: str):
        raise ParameterError("settings", f"{path} {why}; --settings must name a latticelab settings (.ini) "
                                         "file or a new file name")

    try:
        st = os.stat(path)
    except FileNotFoundError:
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            refuse(f"cannot be made: the folder {folder} does not exist")
        return path
    except OSError as exc:
        refuse(f"cannot be read ({exc.strerror or exc})")
    if stat.S_ISDIR(st.st_mode):
        refuse("is a folder")
    if not stat.S_ISREG(st.st_mode):
        refuse("is not a regular file")
    if st.st_size > SETTINGS_SIZE_LIMIT:
        refuse(f"is {st.st_size:,} bytes, far more than any settings file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        refuse(f"cannot be read ({exc.strerror or exc})")
    if data.startswith(b"PK\x03\x04") or data.startswith(b"\x93NUMPY"):
        refuse("is a NumPy file (a saved state?), not a settings file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        refuse("is binary data, not a settings file")
    if "\0" in text:
        refuse("is binary data, not a settings file")
    key = serialized_object_key(text)
    if key is not None:
        refuse(f"holds a serialized object (@Variant) under {key}, which latticelab never loads")
    sections = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.add(line[1:-1].strip())
        elif "=" not in line or not line.split("=", 1)[0].strip():
            refuse(f"is not a settings file (line {number} is neither [section] nor key=value)")
    if text.strip() and not sections & KNOWN_SECTIONS:
        refuse("holds no latticelab settings (another program's file?)")
    return path


def open_default_store() -> tuple[QtCore.QSettings | None, str | None]:
    """The user's settings (QSettings' default file for this application, without the organization-wide and
    system fallbacks) and None; or (None, why) where that file holds a serialized object: Qt would unpickle it on
    the first read, so the window starts from the defaults and does not write that file."""
    store = QtCore.QSettings()
    store.setFallbacksEnabled(False)      # only the one file checked below is read
    path = Path(store.fileName())
    try:
        text = path.read_bytes().decode("utf-8", errors="replace") if path.is_file() else ""
    except OSError:
        text = ""                          # unreadable: Qt reads nothing from it either
    key = serialized_object_key(text)
    if key is None:
        return store, None
    return None, (f"settings file {path} holds a serialized object (@Variant) under {key}, which latticelab never "
                  "loads: starting from the defaults, and this session's settings are not saved (remove that line)")


def variant_key(schema: type[ModelParams], values: dict) -> str:
    """'dim=3' for the Ising model's 3D variant; 'default' for schemas without variants."""
    parts = [f"{name}={values[name]}" for name in schema.variant_fields if name in values]
    return ",".join(parts) or "default"


class Preferences:
    """Typed access to a QSettings store; ``problems`` lists values that were ignored."""

    def __init__(self, store: QtCore.QSettings | None):
        self.store = store
        self.problems: list[str] = []

    def get(self, key: str):
        checker, default = SCHEMA[key]
        if self.store is None or not self.store.contains(key):
            return default
        raw = self.store.value(key)
        try:
            return checker(raw)
        except (TypeError, ValueError) as exc:
            self.problems.append(f"setting {key}={raw!r} ignored ({exc}); using the default")
            return default

    def set(self, key: str, value) -> None:
        if self.store is not None:
            self.store.setValue(key, value)

    def clear(self, key: str) -> None:
        """Forget ``key``: ``get`` gives its default again."""
        if self.store is not None:
            self.store.remove(key)

    # ---- model parameters --------------------------------------------------------------------------
    def _prefix(self, model: str, variant: str) -> str:
        return f"models/{model}/{variant}/"

    def last_variant(self, model: str) -> str | None:
        if self.store is None:
            return None
        key = f"models/{model}/variant"
        return str(self.store.value(key)) if self.store.contains(key) else None

    def model_values(self, model: str, schema: type[ModelParams], variant: str | None = None) -> dict:
        """The stored parameter values of ``model`` (of ``variant``, else of its last variant) that its schema
        accepts, as plain Python values. A stored value the schema refuses is dropped and reported."""
        variant = variant or self.last_variant(model)
        if self.store is None or variant is None:
            return {}
        prefix = self._prefix(model, variant)
        values = {}
        for name, info in schema.fields().items():
            key = prefix + name
            if not self.store.contains(key):
                continue
            raw = self.store.value(key)
            try:
                values[name] = _CONVERT.get(info["type"], _text)(raw)
            except (TypeError, ValueError) as exc:
                self.problems.append(f"setting {key}={raw!r} ignored ({exc}); using the default")
        # check them together with the schema (ranges, and combinations such as L with dim), dropping the bad
        while values:
            try:
                schema.create(**values)
                break
            except ParameterError as exc:
                name = exc.parameter if exc.parameter in values else next(iter(values))
                self.problems.append(f"setting {prefix + name}={values.pop(name)!r} ignored ({exc}); "
                                     "using the default")
        return values

    def set_model_values(self, model: str, params: ModelParams) -> None:
        """Remember ``params`` as the last values of ``model`` (and of their variant)."""
        if self.store is None:
            return
        values = params.model_dump()
        variant = variant_key(type(params), values)
        for name, value in values.items():
            self.store.setValue(self._prefix(model, variant) + name, value)
        self.store.setValue(f"models/{model}/variant", variant)

    # ---- window layout -----------------------------------------------------------------------------
    def get_bytes(self, key: str) -> QtCore.QByteArray | None:
        if self.store is None or not self.store.contains(key):
            return None
        raw = self.store.value(key)
        if isinstance(raw, QtCore.QByteArray):
            return raw
        if isinstance(raw, (bytes, bytearray)):
            return QtCore.QByteArray(bytes(raw))
        self.problems.append(f"setting {key} is not window layout data; using the default layout")
        return None

    def sync(self) -> None:
        if self.store is not None:
            self.store.sync()
