"""Moving field snapshots off the simulation's critical path: a device-side copy, an asynchronous copy to
pinned host memory, and a writer thread.

``HostCopy.start(array)`` takes a snapshot of a NumPy or CuPy array. On CuPy the snapshot is first copied on
the device (on the simulation's stream, so the next step may overwrite the original at once), then copied to
pinned host memory on a stream of its own, and an event marks the end of that copy; ``result()`` waits for the
event only, in the writer thread. On NumPy it is one host copy.

``BackgroundWriter`` runs ``write(item)`` calls in one thread, in order. Its queue is bounded: when the writer
falls behind by ``depth`` items, ``put`` waits, so a fast simulation cannot fill the memory with snapshots. An
error in the thread is raised again by the next ``put`` or by ``close``, never lost.
"""
from __future__ import annotations

import queue
import threading

import numpy as np


class HostCopy:
    """A snapshot of one array on its way to the host; ``result()`` is the NumPy array (waits if needed)."""

    def __init__(self, array):
        if isinstance(array, np.ndarray) or not hasattr(array, "__cuda_array_interface__"):
            self._host = np.array(array, copy=True)
            self._event = None
            return
        import cupy
        snapshot = array.copy()                              # device to device, on the current stream
        ready = cupy.cuda.Event(block=False, disable_timing=True)
        ready.record()
        stream = cupy.cuda.Stream(non_blocking=True)
        stream.wait_event(ready)
        self._host = cupy.cuda.alloc_pinned_memory(snapshot.nbytes)
        self._host = np.frombuffer(self._host, snapshot.dtype, snapshot.size).reshape(snapshot.shape)
        snapshot.get(stream=stream, out=self._host, blocking=False)     # returns at once; the event marks the end
        self._event = cupy.cuda.Event(block=False, disable_timing=True)
        self._event.record(stream)
        self._keep = (snapshot, stream)                      # alive until the copy is done

    def result(self) -> np.ndarray:
        if self._event is not None:
            self._event.synchronize()
            self._event, self._keep = None, None
        return self._host


_STOP = object()


class BackgroundWriter:
    """Calls ``write(item)`` for every ``put(item)`` in a thread of its own, in order."""

    def __init__(self, write, depth: int = 4, name: str = "latticelab-output"):
        self._write = write
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                if self._error is None:
                    self._write(item)
            except BaseException as exc:        # kept for the caller's thread
                self._error = exc
            finally:
                self._queue.task_done()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def put(self, item) -> None:
        self._raise()
        self._queue.put(item)

    def flush(self) -> None:
        """Wait until every item put so far is written (errors raised)."""
        self._queue.join()
        self._raise()

    def close(self) -> None:
        """Write what is queued, stop the thread; raises an error of the thread."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
        self._raise()
