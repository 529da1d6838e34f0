"""Work of the docks off the GUI thread, in one way: ``Background.run(job, ...)`` runs ``job(task)`` on the dock's
worker thread and delivers what came of it on the GUI thread (a queued Qt signal): its result to ``on_done``,
its failure (logged) to ``on_failed``, each ``task.emit(progress)`` to ``on_progress``, and ``on_finished(task)``
last in every case. ``task.cancel()`` (or ``Background.cancel_all``) asks the job to stop (it looks at
``task.cancelled()``) and keeps ``on_done`` and ``on_progress`` from being called. A job that must not share the
GUI process's interpreter goes to a worker process from there (app/stepping.py ``SharedProcess``).

Nothing is delivered once the Background's owner is gone (a closed window's dock).
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
from typing import Callable

from PySide6 import QtCore

log = logging.getLogger(__name__)


class Task:
    """One job given to a ``Background``: ask it to stop (``cancel``), look whether it was asked
    (``cancelled``), send progress from the job (``emit``), and read what came of it (``done``, ``result``)."""

    def __init__(self, background: "Background", on_progress: Callable | None):
        self._background = background
        self._on_progress = on_progress
        self._stop = threading.Event()
        self.future: concurrent.futures.Future | None = None

    def cancel(self) -> None:
        self._stop.set()
        if self.future is not None:
            self.future.cancel()        # not started yet: it never runs

    def cancelled(self) -> bool:
        return self._stop.is_set()

    def emit(self, progress) -> None:
        """(the job's thread) ``on_progress(progress)`` on the GUI thread, unless cancelled meanwhile."""
        if self._on_progress is not None:
            self._background._send(lambda: self._on_progress(progress) if not self.cancelled() else None)

    def done(self) -> bool:
        return self.future is not None and self.future.done()

    def result(self, timeout: float | None = None):
        """The job's return value, waiting for it up to ``timeout`` seconds; raises what the job raised."""
        return self.future.result(timeout)


class Background(QtCore.QObject):
    """The worker thread(s) of a dock (``workers`` jobs at a time, the others queued)."""

    _delivery = QtCore.Signal(object)       # a callable, run on the GUI thread

    def __init__(self, parent: QtCore.QObject, name: str, workers: int = 1):
        super().__init__(parent)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._delivery.connect(self._run_delivered, QtCore.Qt.ConnectionType.QueuedConnection)
        self.tasks: set[Task] = set()       # not finished yet
        self.closed = False                 # ``shutdown`` was called: new jobs are not run
        self.destroyed.connect(lambda *_, e=self._executor: e.shutdown(wait=False, cancel_futures=True))

    @property
    def busy(self) -> bool:
        return bool(self.tasks)

    def run(self, job: Callable[[Task], object], on_done: Callable[[object], object] | None = None,
            on_failed: Callable[[str], object] | None = None, on_progress: Callable[[object], object] | None = None,
            on_finished: Callable[[Task], object] | None = None, what: str = "background job") -> Task:
        """Start ``job(task)`` on the worker; the callbacks run on the GUI thread (see the module). A failure is
        logged as ``what`` and handed to ``on_failed`` as "ExceptionName: message"; given neither ``on_done`` nor
        ``on_failed``, ``on_finished`` takes the outcome from ``task.result()``."""
        task = Task(self, on_progress)
        if self.closed:                     # the dock is shutting down: the job is dropped, said in the log
            log.info("%s not started: the dock is closed", what)
            task.cancel()
            return task
        self.tasks.add(task)

        def delivered() -> None:
            self.tasks.discard(task)
            try:
                if not task.cancelled() and (on_done is not None or on_failed is not None):
                    self._report(task, on_done, on_failed, what)
            finally:
                if on_finished is not None:
                    on_finished(task)

        task.future = self._executor.submit(job, task)
        task.future.add_done_callback(lambda _future: self._send(delivered))
        return task

    @staticmethod
    def _report(task: Task, on_done, on_failed, what: str) -> None:
        try:
            result = task.result()
        except concurrent.futures.CancelledError:
            return
        except Exception as exc:        # reported in the dock; the window goes on
            log.error(what, exc_info=exc)
            if on_failed is not None:
                on_failed(f"{type(exc).__name__}: {exc}")
            return
        if on_done is not None:
            on_done(result)

    def _send(self, action: Callable[[], object]) -> None:
        try:
            self._delivery.emit(action)
        except RuntimeError:            # the owner is gone (a closed window): nobody waits for it
            pass

    def _run_delivered(self, action) -> None:
        action()

    def cancel_all(self) -> None:
        for task in list(self.tasks):
            task.cancel()

    def shutdown(self, wait: bool = False) -> None:
        """Cancel every job, and run no new one; with ``wait``, block until the one running returns (the window
        is closing)."""
        self.closed = True
        self.cancel_all()
        self._executor.shutdown(wait=wait, cancel_futures=True)
