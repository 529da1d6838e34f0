"""Persistent preferences (QSettings): last parameters, view options, folders, window layout.

Every value is read through a checker; a missing or broken value falls back to its default and the
problem is reported (one line per key), never raised.
"""
from __future__ import annotations

import math

from PySide6 import QtCore

from latticelab.sim import params as checks


def _int(value) -> int:
    if isinstance(value, bool):
        raise ValueError("not an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("not an integer")
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


def _positive_float(value) -> float:
    return checks.check_T(_float(value))


def _dim(value) -> int:
    return checks.check_dim(_int(value))


def _p(value) -> float:
    return checks.check_p(_float(value))


def _algorithm(value) -> str:
    checks.parse_algorithm(str(value))
    return str(value)


def _rewire_dims(value) -> str:
    text = str(value)
    if text != "all" and (not text or any(c not in "xyz" for c in text)):
        raise ValueError("not 'all' or axis letters")
    return text


def _seed(value) -> int:
    return checks.check_seed(_int(value))


def _L(value) -> int:
    value = _int(value)
    if value < 4 or value % 2 or value > 1 << 16:
        raise ValueError("not an even size >= 4")
    return value


def _steps(value) -> int:
    value = _int(value)
    if not 1 <= value <= 100000:
        raise ValueError("not in 1 .. 100000")
    return value


def _peel(value) -> int:
    value = _int(value)
    if value < 0:
        raise ValueError("negative")
    return value


def _text(value) -> str:
    return str(value)


# key: (checker, default); None defaults mean "chosen at run time"
SCHEMA = {
    "params/dim": (_dim, 2),
    "params/L2": (_L, None),
    "params/L3": (_L, None),
    "params/T2": (_positive_float, None),
    "params/T3": (_positive_float, None),
    "params/p": (_p, 0.0),
    "params/rewire_dims": (_rewire_dims, "all"),
    "params/algorithm": (_algorithm, "metropolis"),
    "params/seed": (_seed, 1),
    "run/steps_per_frame": (_steps, 1),
    "run/adaptive": (_bool, True),
    "view/highlight": (_bool, True),
    "view/show_links": (_bool, False),
    "view/peel": (_peel, 0),
    "view/unfold": (_bool, False),
    "folders/export": (_text, ""),
    "folders/state": (_text, ""),
}


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
