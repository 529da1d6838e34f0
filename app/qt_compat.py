"""Work-arounds for defects of particular Qt binding versions, applied once before any window exists."""
from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_applied = False


def _pyside_version() -> tuple[int, ...]:
    import PySide6
    return tuple(int(part) for part in PySide6.__version__.split(".")[:2] if part.isdigit())


def protect_none_refcount() -> bool:
    """PySide6 6.12 drops one reference to None on every call of a void C++ method. On CPython >= 3.12
    None is immortal and nothing happens; on 3.11 the count reaches zero after some tens of thousands of
    calls and the interpreter aborts ("deallocating None"). Adding 2**40 references to None gives it the
    same immortality for any realistic run. Returns True when the fix was applied."""
    global _applied
    if _applied or sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return _applied
    if _pyside_version()[:2] != (6, 12):
        return False
    ctypes.c_ssize_t.from_address(id(None)).value += 1 << 40
    _applied = True
    log.info("PySide6 %s on Python %d.%d: None made immortal (PySide6 6.12 drops None references)",
             ".".join(map(str, _pyside_version())), *sys.version_info[:2])
    return True
