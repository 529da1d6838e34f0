"""When Python's cycle collector may pause the window: never with a full collection in the middle of a switch.

A full (generation 2) collection walks every container object that is not frozen, about a microsecond each, and
every thread waits while it runs: with a few models' plots made (hundreds of thousands of objects) that is 150-350
ms on the GUI thread. CPython starts one by itself once enough objects have outlived the young collections, and
that is what a switch does: a new model's form and plots are tens of thousands of long-lived Qt and VisPy
objects. Measured before this schedule (bench window --trace, the CPU): full collections of 30-150 ms inside the
staged steps of switches to Cahn-Hilliard and the cortex, their longest frame gaps.

``CollectorSchedule`` (made by ``freeze_after_start``, as the application does once its window is up):
- everything alive at start-up (modules, the window, its widgets and visuals) is collected once and frozen
  (``gc.freeze``: out of the collector's sight);
- while a switch is prepared (``hold``: a model built on the worker, its form and plots made a slice per frame)
  automatic full collections wait (the collector's third threshold is raised); the young ones go on;
- once the new model is swapped in (``settle``), a young collection, then everything alive is frozen too (the
  new form and plots live as long as the window) and the thresholds come back. A later full collection walks
  only what was made since.

Why this is safe: frozen objects are never examined again, so garbage among them that only the collector could
free (a reference cycle) would stay. The young collection before each freeze frees what a switch left in cycles
(tens of objects measured); what lives on is the window's. The objects that hold memory are models (their
arrays, on the host or the GPU): each one frozen is watched, and a model that was replaced and is still alive
at two checks a second apart sits in a reference cycle: then everything is unfrozen, collected once and frozen
again, without it (one pause, logged). The registered models are freed by reference counting
(tests/gui/test_dock_staging.py keeps one in a cycle on purpose).
"""
from __future__ import annotations

import gc
import logging
import weakref

log = logging.getLogger(__name__)

CHECK_MS = 1000                    # how often replaced models are looked for
HELD_THRESHOLD = 1 << 30          # the third threshold while a switch is prepared: no automatic full collection


class CollectorSchedule:
    """Holds full collections while the window prepares a switch and freezes what the switch made once it is
    done; watches the models frozen on the way (see the module)."""

    def __init__(self, window):
        from PySide6 import QtCore
        self.window = window
        self.thresholds = None            # the collector's thresholds while held (None: not held)
        self.collections_for_cycles = 0   # full collections run to free a replaced model in a reference cycle
        self._watched: list = []          # weak references to frozen models
        self._suspects: set = set()       # of those, ids of replaced ones still alive at the last check
        gc.collect()
        gc.freeze()
        self._watch(window.model)
        self.timer = QtCore.QTimer(window, interval=CHECK_MS)
        self.timer.timeout.connect(self.check)
        self.timer.start()

    @property
    def held(self) -> bool:
        return self.thresholds is not None

    def hold(self) -> None:
        """A switch is being prepared: no automatic full collection until ``settle``."""
        if self.thresholds is None:
            self.thresholds = gc.get_threshold()
            gc.set_threshold(self.thresholds[0], self.thresholds[1], HELD_THRESHOLD)

    def settle(self) -> None:
        """The switch is done: free what it left in cycles among the young objects, freeze what is alive, and
        let full collections run again (they now walk only what is made from here on)."""
        gc.collect(1)
        gc.freeze()
        if self.thresholds is not None:
            gc.set_threshold(*self.thresholds)
            self.thresholds = None
        self._watch(self.window.model)

    def _watch(self, model) -> None:
        if model is not None and not any(ref() is model for ref in self._watched):
            self._watched.append(weakref.ref(model))

    def check(self) -> None:
        """Forget the models reference counting freed; collect once for those replaced and alive twice running."""
        window = self.window
        models = [(ref, ref()) for ref in self._watched]
        self._watched = [ref for ref, model in models if model is not None]
        if window.model_preparing() or self.held:
            return
        replaced = {id(model) for _, model in models if model is not None and model is not window.model}
        del models
        cyclic = replaced & self._suspects
        self._suspects = replaced - cyclic
        if not cyclic:
            return
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.collections_for_cycles += 1
        alive = [ref for ref in self._watched if id(ref()) in cyclic]
        if alive:        # referenced from outside a cycle: no further collection would free it
            log.info("%d replaced model(s) still referenced after a full collection", len(alive))
            self._watched = [ref for ref in self._watched if ref not in alive]


def freeze_after_start(window) -> CollectorSchedule:
    """Collect and freeze everything alive now and give the window its collector schedule (the application
    calls this once its window is up; see the module)."""
    window.collector = CollectorSchedule(window)
    return window.collector
