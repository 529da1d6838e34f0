"""Steps that take longer than a frame run on a worker thread, so the window keeps answering.

A Swendsen-Wang sweep of a 2048^2 lattice takes seconds on NumPy: run on the GUI thread it would freeze menus,
shortcuts and every dock for that long. ``BackgroundStepper`` runs one ``model.advance(n)`` at a time on a
daemon thread (a closing window never waits for it) and hands the finished batch back to the frame loop, which
commits it to the runner on the GUI thread. While a batch is in flight the model belongs to the worker: the
window shows the last picture and defers anything that would change or read the whole state (a parameter, a
reset, a save) until the batch is in (MainWindow._when_idle).

On a CUDA device the frame loop stays on the GUI thread: kernel launches return at once, and the view's
CUDA-OpenGL interop must run in the thread that owns the GL context.
"""
from __future__ import annotations

import math
import threading
import time

BIG_MODEL_CELLS = 1 << 20   # a CPU model this large is stepped in the background before its cost is known


def wants_background(model, seconds_per_step: float | None, budget_s: float) -> bool:
    """Whether the next steps of ``model`` should run on the worker: only on the CPU, when one step is known to
    take more than half a frame's budget, or is not measured yet on a large model."""
    if getattr(model, "backend_name", "numpy") == "cuda":
        return False
    if seconds_per_step is None:
        return math.prod(model.shape) >= BIG_MODEL_CELLS
    return seconds_per_step > 0.5 * budget_s


class BackgroundStepper:
    """One ``model.advance(n)`` at a time on a worker thread."""

    def __init__(self):
        self._thread: threading.Thread | None = None
        self._result = None
        self._error: BaseException | None = None
        self.model = None           # the model being stepped
        self.steps = 0              # steps asked of it
        self.started = 0.0          # perf_counter at the start

    @property
    def busy(self) -> bool:
        return self._thread is not None

    def start(self, model, n: int) -> None:
        if self.busy:
            raise RuntimeError("a batch of steps is already running")
        self.model, self.steps, self.started = model, int(n), time.perf_counter()
        self._result, self._error = None, None

        def work():
            try:
                self._result = model.advance(int(n))
            except BaseException as exc:   # handed to the GUI thread, which reports it
                self._error = exc

        self._thread = threading.Thread(target=work, name="latticelab-steps", daemon=True)
        self._thread.start()

    def poll(self):
        """None while the batch runs; then (model, batch, seconds) once, raising the worker's exception if it
        failed."""
        if self._thread is None or self._thread.is_alive():
            return None
        self._thread = None
        seconds = time.perf_counter() - self.started
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self.model, self._result, seconds

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the batch is done (tests and shutdown); True when it is."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def elapsed(self) -> float:
        return time.perf_counter() - self.started if self.busy else 0.0
