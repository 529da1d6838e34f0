"""Work-arounds for defects of particular Qt binding versions, applied once before any window exists."""
from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_applied = False
_SINGLETONS = (None, True, False)
_EXTRA_REFERENCES = 1 << 40


def protect_singletons() -> bool:
    """Give None, True and False an effectively infinite reference count on CPython < 3.12.

    PySide6 6.12 drops a reference to None on every call of a void C++ method (QLabel.setText,
    QSlider.setValue, ...) and one to True on every signal emission (measured: 100 calls, refcount -100;
    PySide6 6.11.3 drops none there but was seen aborting with 'deallocating True or False' at exit).
    From CPython 3.12 these objects are immortal and nothing happens; on 3.11 their counts reach zero
    after some tens of thousands of calls and the interpreter aborts ("deallocating None"), which a
    running window does within minutes. 2**40 extra references make them as immortal as in 3.12.
    Returns True when applied (once per process)."""
    global _applied
    if _applied or sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return _applied
    for singleton in _SINGLETONS:
        ctypes.c_ssize_t.from_address(id(singleton)).value += _EXTRA_REFERENCES
    _applied = True
    log.info("Python %d.%d: None, True and False made immortal (PySide6 drops references to them)",
             *sys.version_info[:2])
    return True

