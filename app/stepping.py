"""Steps that take longer than a frame run in the background, so the window keeps answering.

A Swendsen-Wang sweep of a 2048^2 lattice takes seconds on NumPy: run on the GUI thread it would freeze menus,
shortcuts and every dock for that long. ``BackgroundStepper`` runs one ``model.advance(n)`` at a time off the
GUI thread and hands the finished batch back to the frame loop, which commits it to the runner on the GUI thread.
While a batch is in flight the model belongs to the stepper: the window shows the last picture and defers
anything that would change or read the whole state (a parameter, a reset, a save) until the batch is in
(MainWindow._when_idle).

Where the steps run. A worker *thread* shares the interpreter's lock (the GIL) with the GUI thread, and long C
calls that keep it -- scipy.sparse.csgraph's labelling, scikit-image, ``np.unique``, ``ufunc.at`` -- froze the
frame loop for hundreds of milliseconds although the step ran "in the background" (issue 16: a Swendsen-Wang
step of a 2048^2 lattice held it for up to 0.3 s at a time). So a NumPy model that can take its state back in
place (sim/model.py: ResumesInPlace) is stepped in a worker *process* (``ModelProcess``: one persistent child,
a fresh interpreter without Qt, holding a copy of the model). Each batch ships the model's exact save/resume
state (sim/state.py ``state_of``: the parameters and ``get_state()``) to the child, which brings its copy to
that state (in place when its parameters are the same, else rebuilt as a saved state is loaded), runs
``advance(n)`` and sends back the StepBatch and the new ``get_state()``; the stepper's thread puts that into the
window's model with ``set_state``. The trajectory is the one of stepping in place (the same code from the same
state; tests/gui/test_stepping_process.py). Other models (and a model whose ``advance`` was replaced on the
instance, which a child cannot repeat) are stepped on the worker thread as before; a child that cannot start or
dies mid-batch costs that batch a thread step, never a result.

How the messages travel. The child's stdin and stdout are one end of a Unix socket pair; the parent reads a
reply with one ``recv_into`` call (MSG_WAITALL), holding no GIL until all of it is in. Read from a pipe, a reply
came in 64 KiB pieces, and the reading thread took the GIL back after each: a 3D L = 128 spectrum (42 MB: its
running mean and variance and the volume) was some 640 hand-overs. In one traced event-loop gap of 81 ms the GUI
thread was blocked (neither running nor waiting for a core) for 55 ms while such a reply arrived (bench
responsiveness, Spectrum dock running; the GIL is the likely holder, not proven). Paired runs before and after
showed no difference in the longest gaps, which other causes dominate. Pipes remain where a socket pair cannot be
had. NumPy arrays travel beside the pickle, not inside it (``_message_parts``): neither side copies them with
the GIL held (a 42 MB reply's ``pickle.loads`` alone had held it for 7 ms). With the GUI thread running Python
meanwhile, a 42 MB reply took 1.9-2.0 s to arrive through pipes, 78-103 ms through the socket with the arrays
pickled, 44-57 ms with them out of band (eight calls each, this 2-core host).

On a CUDA device the frame loop stays on the GUI thread: kernel launches return at once, and the view's
CUDA-OpenGL interop must run in the thread that owns the GL context.
"""
from __future__ import annotations

import logging
import math
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time

log = logging.getLogger(__name__)

BIG_MODEL_CELLS = 1 << 20   # a CPU model this large is stepped in the background before its cost is known
USE_PROCESS = True          # step ResumesInPlace NumPy models in a worker process (False: always a thread)
CHILD_NICENESS = 5          # the worker processes' scheduling priority below the window's

# The worker processes' memory: their own settings, under the user's (an environment that sets one keeps it).
# NumPy asks Linux for transparent huge pages for every large array (madvise), and each first touch of one is a
# 2 MB page fault. On the 2-core KVM test host a worker stepping Swendsen-Wang 2048^2 made some 21 000 of them in
# 50 s, and with them moments of tens of ms in which both cores ran 3-13x slow for every process (a reference
# loop in a process of its own saw it: bench/reference_loop.py), the window's own work included: its last
# event-loop gaps over 50 ms (53-91 ms) came at such moments. The worker alone, 2 minutes: 11 and 14 runs of the
# reference loop 3x slow or more in two tries, none in three without huge pages. Then glibc keeps freed arrays
# of up to 32 MB (the most it allows) for the next ones instead of handing the memory back and faulting it in
# again page by page: without that, the small pages made a step 20% slower (9.5 M faults in 50 s); with it a
# step took 5-12% less time than with huge pages (docs/design/responsiveness.md).
WORKER_ENVIRONMENT = {
    "NUMPY_MADVISE_HUGEPAGE": "0",
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),   # freed memory above this at the heap's top goes back to the system
}


def wants_background(model, seconds_per_step: float | None, budget_s: float) -> bool:
    """Whether the next steps of ``model`` should run on the worker: only on the CPU, when one step is known to
    take more than half a frame's budget, or is not measured yet on a large model."""
    if getattr(model, "backend_name", "numpy") == "cuda":
        return False
    if seconds_per_step is None:
        return math.prod(model.shape) >= BIG_MODEL_CELLS
    return seconds_per_step > 0.5 * budget_s


# ==== the worker process ===========================================================================
class ProcessGone(RuntimeError):
    """The worker process could not be started, or died during a call."""


def _portable(exc: BaseException) -> tuple:
    """An exception as plain values (ParameterError's constructor takes two arguments, which pickling an
    exception does not give back)."""
    return (type(exc).__name__, str(exc), getattr(exc, "parameter", None))


def _rebuilt(error: tuple) -> BaseException:
    from latticelab.sim.params import ParameterError
    kind, text, parameter = error
    if parameter is not None:
        return ParameterError(parameter, text.removeprefix(f"{parameter}: "))
    if kind == "MemoryError":
        return MemoryError(text)
    return RuntimeError(f"{kind} in the worker process: {text}")


def _in_place_possible(model, state) -> bool:
    """Whether the child's ``model`` can take ``state`` with ``set_state`` (same model, same parameters)."""
    import numpy as np

    from latticelab.sim.model import ResumesInPlace
    from latticelab.sim.state import PARAM
    if model is None or not isinstance(model, ResumesInPlace):
        return False
    if str(np.asarray(state.get("model")).item()) != model.name:
        return False
    values = {k[len(PARAM):]: np.asarray(v).item() for k, v in state.items() if k.startswith(PARAM)}
    return values == model.params.model_dump()


def _message_parts(message) -> list:
    """``message`` as the parts written in turn: a header (the pickle's length, the number of large buffers and
    each one's length, 8 bytes each, little-endian), the pickle, then the buffers. Contiguous NumPy arrays travel
    out of band (pickle protocol 5): their bytes are written from the arrays themselves, not copied into the
    pickle first, and read into buffers the arrays are then made on (no copy with the GIL held either way)."""
    buffers = []
    data = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    header = struct.pack(f"<QQ{len(raws)}Q", len(data), len(raws), *(r.nbytes for r in raws))
    return [header, data, *raws]


def _message_from(read_exactly):
    """The next message of ``_message_parts``, its parts read by ``read_exactly(n) -> bytearray``."""
    size, count = struct.unpack("<QQ", read_exactly(16))
    lengths = struct.unpack(f"<{count}Q", read_exactly(8 * count)) if count else ()
    data = read_exactly(size)
    return pickle.loads(data, buffers=[read_exactly(n) for n in lengths])


def _send(stream, message) -> None:
    """One message on a binary stream (the child's side)."""
    for part in _message_parts(message):
        stream.write(part)
    stream.flush()


def _read_exactly(read_into, n: int) -> bytearray:
    """``n`` bytes, read by ``read_into(view) -> count`` (0: the other end is gone, EOFError) until all are in."""
    buffer = bytearray(n)
    view, got = memoryview(buffer), 0
    while got < n:
        k = read_into(view[got:])
        if not k:
            raise EOFError("the other end closed the stream")
        got += k
    return buffer


def _receive(stream):
    """The next message of ``_send`` on a binary stream (the child's side); EOFError when the other end is
    gone."""
    return _message_from(lambda n: _read_exactly(stream.readinto, n))


class SocketChannel:
    """The parent's end of the socket pair to a child: messages as ``_send`` writes them, each part read with the
    GIL released until it is all in (``recv_into`` with MSG_WAITALL: one call, not one per pipe-full)."""

    def __init__(self, end: socket.socket):
        self.end = end
        self.receive_calls = 0        # recv_into calls so far (tests: a message is one call, or a few)

    def send(self, message) -> None:
        for part in _message_parts(message):
            self.end.sendall(part)    # a blocking send on a Unix socket: one call with the GIL released

    def receive(self):
        return _message_from(lambda n: _read_exactly(self._receive_into, n))

    def _receive_into(self, view) -> int:
        """As much of ``view`` as comes before the other end closes: all of it, unless a signal cut the wait
        short (then the caller asks again for the rest)."""
        self.receive_calls += 1
        return self.end.recv_into(view, len(view), socket.MSG_WAITALL)

    def close(self) -> None:
        self.end.close()


class PipeChannel:
    """The same over the child's stdin and stdout pipes, where no socket pair can be had."""

    def __init__(self, process):
        self.process = process

    def send(self, message) -> None:
        _send(self.process.stdin, message)

    def receive(self):
        return _receive(self.process.stdout)

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass


def _socket_pair():
    """A connected Unix socket pair (parent end, child end), or None where the platform has none."""
    if not hasattr(socket, "AF_UNIX") or not hasattr(socket, "MSG_WAITALL"):
        return None
    try:
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None


def _serve(requests, replies) -> None:
    """The child's loop: (function, state, args) in, ("ok", function(model, *args)) or ("error", ...) out; the
    model is brought to ``state`` first (None: left as it is). Ends on None or when the parent is gone."""
    from latticelab.sim.state import HEADER, PARAM, restore
    model = None
    while True:
        try:
            message = _receive(requests)
        except (EOFError, OSError):
            return
        if message is None:
            return
        try:
            function, state, args = message
            if state is not None:
                if _in_place_possible(model, state):
                    model.set_state({k: v for k, v in state.items()
                                     if not k.startswith(PARAM) and k not in HEADER})
                else:
                    model = None          # free the old copy before the new one is built
                    model = restore(state, backend="numpy", source="the window's model", _fresh=True)
            reply = ("ok", function(model, *args))
        except BaseException as exc:      # handed to the caller, which raises it
            reply = ("error", _portable(exc))
        try:
            _send(replies, reply)
        except (BrokenPipeError, OSError):
            return
        except Exception as exc:          # a result that does not pickle
            _send(replies, ("error", _portable(exc)))


def child_main() -> None:
    """The worker process: requests on stdin, replies on what was stdout (both the child's end of the socket
    pair, or two pipes); anything the child prints goes to stderr, so it never mixes with the replies."""
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if hasattr(os, "nice"):   # below the window: on a machine of few cores the GUI thread gets a core when it asks
        try:
            os.nice(CHILD_NICENESS)
        except OSError:
            pass
    _serve(requests, replies)


class ModelProcess:
    """A persistent worker process holding a copy of a model; ``call`` runs a function on it.

    The child is a fresh interpreter started on the first call and kept (``python -c``: it imports latticelab,
    NumPy and SciPy, nothing of Qt or the GL context, and never re-runs the caller's main script). Messages go
    through its stdin and stdout as pickles; it ends when the parent closes its stdin or exits. Calls are
    serialised; each blocks the calling thread (never the GUI thread) until the child answers, without holding
    the GIL while it waits."""

    def __init__(self, name: str = "latticelab-model"):
        self.name = name
        self._lock = threading.Lock()
        self._process = None
        self._channel: SocketChannel | PipeChannel | None = None
        self.calls = 0
        self.failed: str | None = None   # why the child could not be started (then it is not tried again)

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _ensure(self):
        if self.alive:
            return self._process
        self._stop()
        if self.failed is not None:
            raise ProcessGone(self.failed)
        if getattr(sys, "frozen", False):
            self.failed = "a frozen application cannot start a Python worker process"
            raise ProcessGone(self.failed)
        code = (f"import sys; sys.path[:0] = {[p for p in sys.path if isinstance(p, str)]!r}; "
                "from latticelab.app.stepping import child_main; child_main()")
        pair = _socket_pair()
        ends = (pair[1].fileno(),) * 2 if pair else (subprocess.PIPE, subprocess.PIPE)
        try:
            self._process = subprocess.Popen([sys.executable, "-c", code], stdin=ends[0], stdout=ends[1],
                                             bufsize=0, close_fds=True, env={**WORKER_ENVIRONMENT, **os.environ})
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            if pair:
                pair[0].close()
            self.failed = f"the worker process could not start: {type(exc).__name__}: {exc}"
            raise ProcessGone(self.failed) from exc
        finally:
            if pair:
                pair[1].close()       # the child holds its end now: its exit is seen as the end of the stream
        self._channel = SocketChannel(pair[0]) if pair else PipeChannel(self._process)
        return self._process

    def call(self, function, state, *args):
        """``function(model, *args)`` in the child, its copy of the model first brought to ``state`` (a
        sim/state.py ``state_of`` dict, or None to leave it). ``function`` must be importable by name (a
        module-level function); raises what it raised (ParameterError and MemoryError as themselves, others as
        RuntimeError), or ProcessGone."""
        with self._lock:
            self._ensure()
            try:
                self._channel.send((function, state, args))
                status, value = self._channel.receive()
            except (EOFError, OSError) as exc:
                self._stop()
                raise ProcessGone(f"the worker process ended during a call ({type(exc).__name__})") from exc
            self.calls += 1
        if status == "ok":
            return value
        raise _rebuilt(value)

    def _stop(self) -> None:
        process, self._process = self._process, None
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()           # the child reads the end of its input and returns
        if process is None:
            return
        try:
            process.wait(2.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(2.0)

    def kill(self) -> None:
        """End the child now, also during a call (the window closing while a long one runs): the calling thread's
        wait for the reply then ends with ``ProcessGone``; the next call starts a new child."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()

    def close(self) -> None:
        """End the child (tests; an application simply exits, which closes the child's stdin)."""
        with self._lock:
            if self.alive:
                try:
                    self._channel.send(None)
                except OSError:
                    pass
            self._stop()


def _advance_in_child(model, n: int):
    """The child's part of a batch: the steps, then the state they left."""
    batch = model.advance(int(n))
    return batch, model.get_state()


def steps_elsewhere(model) -> bool:
    """Whether ``model``'s batches can run in the worker process: a NumPy model that takes a state back in
    place, with the class's own ``advance`` and ``step`` (a replacement on the instance stays here)."""
    from latticelab.sim.model import ResumesInPlace
    return (USE_PROCESS and getattr(model, "backend_name", "numpy") == "numpy"
            and isinstance(model, ResumesInPlace) and not {"advance", "step"} & set(vars(model)))


# ==== the stepper ==================================================================================

class SharedProcess:
    """One ``ModelProcess`` for a module's jobs, made by the first thread that asks (``get``); ``started`` is it,
    or None while none was asked for."""

    def __init__(self, name: str):
        self.name = name
        self._lock = threading.Lock()
        self.started: ModelProcess | None = None

    def get(self) -> ModelProcess:
        with self._lock:
            if self.started is None:
                self.started = ModelProcess(self.name)
            return self.started


class ModelAccess:
    """When a reader of the window's model (an analysis dock) may copy its arrays: not while the window's stepping
    worker writes them (``busy``). A reader refused then asks (``retry``) the window to run it once the batch is
    committed and before the next one starts (app/main_window.py ``when_model_free``), at most one request
    outstanding. Without it a reader that tries on its own timer finds the model free only in the one frame
    between two batches, and a large CPU model running in the background could keep the Spectrum dock from ever
    updating. Without a window (a dock on its own): never busy."""

    def __init__(self, window=None):
        self.window = window
        self.asked = False

    def busy(self) -> bool:
        return bool(getattr(getattr(self.window, "stepper", None), "busy", False))

    def retry(self, action) -> None:
        when_free = getattr(self.window, "when_model_free", None)
        if when_free is None or self.asked:
            return
        self.asked = True

        def run() -> None:
            self.asked = False
            action()

        when_free(run)


class BackgroundStepper:
    """One ``model.advance(n)`` at a time off the GUI thread: in the worker process when the model allows it
    (``steps_elsewhere``), else on a worker thread."""

    def __init__(self):
        self._thread: threading.Thread | None = None
        self._result = None
        self._error: BaseException | None = None
        self._process: ModelProcess | None = None
        self.model = None           # the model being stepped
        self.steps = 0              # steps asked of it
        self.started = 0.0          # perf_counter at the start
        self.where = ""             # "process" or "thread": where the last batch ran

    @property
    def busy(self) -> bool:
        return self._thread is not None

    @property
    def process(self) -> ModelProcess:
        if self._process is None:
            self._process = ModelProcess("latticelab-steps")
        return self._process

    def start(self, model, n: int) -> None:
        if self.busy:
            raise RuntimeError("a batch of steps is already running")
        self.model, self.steps, self.started = model, int(n), time.perf_counter()
        self._result, self._error = None, None
        elsewhere = steps_elsewhere(model)

        def work():
            try:
                self._result = self._advance_elsewhere(model, int(n)) if elsewhere else None
                if self._result is None:
                    self.where = "thread"
                    self._result = model.advance(int(n))
            except BaseException as exc:   # handed to the GUI thread, which reports it
                self._error = exc

        self._thread = threading.Thread(target=work, name="latticelab-steps", daemon=True)
        self._thread.start()

    def _advance_elsewhere(self, model, n: int):
        """The batch in the worker process, its state put back into ``model``; None when the process is not
        usable (the caller steps here instead: nothing of ``model`` has changed then)."""
        from latticelab.sim.state import state_of
        try:
            batch, arrays = self.process.call(_advance_in_child, state_of(model), n)
        except ProcessGone as exc:
            log.warning("stepping on a worker thread: %s", exc)
            return None
        model.set_state(arrays)
        self.where = "process"
        return batch

    def poll(self):
        """None while the batch runs; then (model, batch, seconds) once, raising the worker's exception if it
        failed."""
        if self._thread is None or self._thread.is_alive():
            return None
        self._thread = None
        seconds = time.perf_counter() - self.started
        # the stepper lets go of the model and its batch: a replaced model is then freed at once (by reference
        # counting; it held the last model of a kind until its next batch)
        model, result, self.model, self._result = self.model, self._result, None, None
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return model, result, seconds

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the batch is done (tests and shutdown); True when it is."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def elapsed(self) -> float:
        return time.perf_counter() - self.started if self.busy else 0.0

    def close(self) -> None:
        """End the worker process, if one was started (after the batch in flight)."""
        self.wait()
        if self._process is not None:
            self._process.close()
