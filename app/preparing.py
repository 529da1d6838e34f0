"""New models are built on a worker thread, so switching model, dimension or lattice size never freezes the window.

Building a large model takes long: arrays allocated and filled, a graph generated, and on a CUDA device the
model's kernels compiled by NVRTC the first time they are used (seconds each with a cold cache). ``ModelPreparer``
runs ``build_model`` on a daemon thread while the window keeps stepping and drawing the model it has; the frame
loop polls it and swaps the finished model in on the GUI thread, in one short step (MainWindow._poll_preparation);
what the window shows of a new kind of model (its form, its plots) is made meanwhile, a slice per frame
(app/staging.py), so the swap only shows it.

One build runs at a time. A request made while one runs supersedes it: the running build's model is thrown away
when it is done and the latest request is built next. Nothing here touches the running model.
"""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from latticelab.sim.model import HasProbe, HasSignal


def build_model(cls, params, backend: str, devices=None):
    """A new ``cls`` model from validated ``params``, ready to step at full speed: on a CUDA device its kernels
    are compiled here (``warm_up``), not at its first frame. ``devices``: the window's devices option (models
    that split use it). Tests replace this function to make a build slow."""
    from latticelab.sim.multidevice.devices import device_option
    model = cls(params, backend=backend, **device_option(cls, devices))
    if model.backend_name == "cuda":
        warm_up(model)
    return model


def warm_up(model) -> None:
    """Run what a frame runs once (a batch of steps, its observables, the picture), then reset the model: the
    compiled kernels stay in the process's caches and the model is back at its initial state (a reset restarts
    the random streams from the seed, as a new model does)."""
    batch = model.advance(2)
    if not isinstance(batch.observables, dict):
        batch.observables.result()
    model.observables()
    if isinstance(model, HasSignal):
        # what the Signal dock reads at its first refresh: the trace's indexing kernels (CuPy's own, compiled on
        # first use: 150 ms on the GUI thread in a switch to the cortex on the H100 with a cold kernel cache)
        model.trace(since=0)
    if isinstance(model, HasProbe):
        # and its readout of the picked cell: a strided column copied to the host, whose copy kernel CuPy
        # compiled on the GUI thread at the first refresh (107 ms, switch to the cortex, H100, cold cache)
        model.probe_info(model.probe)
    picture = model.picture(model.changed(), False)
    # the view's texture writers too: compiled on the GUI thread at the swap, they stalled the first switch to
    # Cahn-Hilliard on the H100 for 242 ms (bench window, a cold kernel cache)
    from latticelab.render.interop import prepare_picture_kernels
    prepare_picture_kernels(picture)
    model.reset()


def current_device(model) -> int | None:
    """The CUDA device ``model`` lives on, for the worker thread to use (each thread has its own current device);
    None off CUDA. CuPy is only looked up, never imported, here."""
    if getattr(model, "backend_name", "numpy") != "cuda":
        return None
    cupy = sys.modules.get("cupy")
    return None if cupy is None else cupy.cuda.Device().id


@dataclass
class Job:
    """One model being built: ``what`` for the status bar; ``on_ready(result)`` / ``on_error(exc)`` run on the GUI
    thread when it is done, unless it was superseded."""
    build: Callable[[], Any]
    what: str
    on_ready: Callable[[Any], None]
    on_error: Callable[[BaseException], None]
    device: int | None = None
    started: float = field(default_factory=time.perf_counter)
    superseded: bool = False
    result: Any = None
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def run(self) -> None:
        try:
            if self.device is None:
                self.result = self.build()
            else:
                cupy = sys.modules["cupy"]
                with cupy.cuda.Device(self.device):
                    self.result = self.build()
        except BaseException as exc:     # handed to the GUI thread, which reports it
            self.error = exc

    @property
    def done(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()


class ModelPreparer:
    """At most one build on a worker thread, and the latest request waiting behind it."""

    def __init__(self):
        self.job: Job | None = None
        self._next: Job | None = None

    @property
    def busy(self) -> bool:
        """A build runs, waits, or is done and not yet taken by ``poll``."""
        return self.job is not None

    @property
    def what(self) -> str:
        job = self._next or self.job
        return job.what if job is not None else ""

    def building(self) -> bool:
        """A build runs on the worker now (not done, not only waiting to be taken by ``poll``)."""
        return self.job is not None and not self.job.done

    def elapsed(self) -> float:
        return time.perf_counter() - self.job.started if self.job is not None else 0.0

    def start(self, job: Job) -> None:
        """Build ``job``'s model; a build already running is superseded (its model is dropped when done)."""
        if self.job is not None:
            self.job.superseded = True
            self._next = job
            return
        self._launch(job)

    def _launch(self, job: Job) -> None:
        self.job = job
        job.started = time.perf_counter()
        job.thread = threading.Thread(target=job.run, name="latticelab-prepare", daemon=True)
        job.thread.start()

    def poll(self) -> Job | None:
        """The finished job, once (None while it runs, or when it was superseded: then the next one starts)."""
        job = self.job
        if job is None or not job.done:
            return None
        self.job = None
        if self._next is not None:
            waiting, self._next = self._next, None
            self._launch(waiting)
        return None if job.superseded else job

    def cancel(self) -> None:
        """Drop the running build's result and any waiting request (the window is closing)."""
        if self.job is not None:
            self.job.superseded = True
        self._next = None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the running build is done (tests, scripts); True when it is."""
        job = self.job
        if job is not None and job.thread is not None:
            job.thread.join(timeout)
            return not job.thread.is_alive()
        return True
