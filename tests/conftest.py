"""Suite-wide test policy.

- ``@pytest.mark.gpu`` tests are skipped when no CUDA device is usable. The probe runs once, inside a
  function, and only when such a test was collected: nothing here imports CuPy at import time.
- ``@pytest.mark.slow`` tests are deselected unless a ``-m`` expression is given (``-m slow`` runs them).
- Without a display, Qt would abort the whole session on the first window; we fall back to Qt's
  ``offscreen`` platform so that GUI tests fail (or skip) one by one instead. Run GUI tests under Xvfb
  (``bash .ci/test`` does this).
- Each pytest-xdist worker gets an X display of its own (a private Xvfb, started in ``pytest_configure``) when
  the session runs on an X display and Xvfb is installed: workers sharing one display disturbed each other's
  windows -- a window of one process taking the focus or the pointer from another's test (the hover-readout
  and activation tests failed that way in CI runs). LATTICELAB_SHARED_DISPLAY=1 keeps the shared display (the
  GPU machine's recipe configures its one Xvfb for NVIDIA's GLX).
- After each test that made or closed a VisPy canvas or drove Qt (and before a test, when canvases were closed
  since), garbage is collected: closed windows and canvases
  (Qt and VisPy objects in reference cycles) are freed then, and not by a later, random collection that
  could run their finalisers inside another test's Qt event dispatch -- a canvas being shown -- and crash
  the process (segfault in VisPy's Qt backend ``event``, seen with PySide6 6.11.3 and 6.12.0).
"""
from __future__ import annotations

import gc
import os
import sys

import pytest

_cuda_probe: tuple[bool, str] | None = None
_no_display = False


def cuda_status() -> tuple[bool, str]:
    """(usable, reason): whether a CUDA device can run CuPy kernels, asked once per session."""
    global _cuda_probe
    if _cuda_probe is None:
        try:
            from latticelab.sim.backend import select_backend

            backend = select_backend("cuda")
            _cuda_probe = (True, f"CUDA device {backend.device_name}")
        except Exception as exc:  # BackendError, ImportError, a broken driver: all mean "no GPU here"
            _cuda_probe = (False, str(exc) or type(exc).__name__)
    return _cuda_probe


def _private_display_for_this_worker() -> None:
    """Start an Xvfb for this xdist worker and point DISPLAY at it (see the module's notes); it is stopped when
    the worker exits. Does nothing outside a worker, without an X display or Xvfb, or when asked not to."""
    import atexit
    import select
    import shutil
    import subprocess

    if not os.environ.get("PYTEST_XDIST_WORKER") or not os.environ.get("DISPLAY") \
            or os.environ.get("LATTICELAB_SHARED_DISPLAY") or os.environ.get("QT_QPA_PLATFORM", "xcb") != "xcb":
        return
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        return
    read_end, write_end = os.pipe()
    server = subprocess.Popen([xvfb, "-displayfd", str(write_end), "-screen", "0", "1600x1000x24", "-nolisten",
                               "tcp"], pass_fds=(write_end,), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_end)
    number = b""
    try:    # -displayfd: the server writes its display number once it accepts clients
        while not number.endswith(b"\n") and select.select([read_end], [], [], 20.0)[0]:
            chunk = os.read(read_end, 16)
            if not chunk:
                break
            number += chunk
    finally:
        os.close(read_end)
    if not number.strip().isdigit():
        server.terminate()      # the shared display, as before
        return
    os.environ["DISPLAY"] = f":{number.strip().decode()}"

    def stop() -> None:
        server.terminate()
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
    atexit.register(stop)


def pytest_configure(config: pytest.Config) -> None:
    global _no_display
    _private_display_for_this_worker()
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("QT_QPA_PLATFORM")):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        _no_display = True  # reported in the header below
    try:         # as the application does before its QApplication is made (app/qt_compat.py)
        from latticelab.app.qt_compat import prepare_gl_before_app
        prepare_gl_before_app(gpu=os.environ.get("LATTICELAB_GUI_BACKEND") == "cuda")
    except ImportError:  # no PySide6 here (the GPU machine's kernel tests)
        pass


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    if _no_display:
        lines.append("latticelab: no DISPLAY, using QT_QPA_PLATFORM=offscreen (GUI tests need Xvfb: bash .ci/test)")
    if not config.option.markexpr:
        lines.append("latticelab: slow tests deselected (select them with -m slow)")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.option.markexpr:
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]

    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items:
        usable, reason = cuda_status()
        if not usable:
            skip = pytest.mark.skip(reason=f"needs a usable CUDA device: {reason}")
            for item in gpu_items:
                item.add_marker(skip)


_canvas_events = [0]          # VisPy canvases made or closed in this process (counted once VisPy's app is loaded)
_collected_at = [0]           # the count at the last collection


def _count_canvas_events() -> None:
    """Count every VisPy canvas made or closed from now on (a wrapper on Canvas.__init__ and Canvas.close)."""
    from vispy.app import canvas as vispy_canvas
    cls = vispy_canvas.Canvas
    if getattr(cls, "_latticelab_counted", False):
        return

    def counted(method):
        def wrapper(self, *args, **kwargs):
            _canvas_events[0] += 1
            return method(self, *args, **kwargs)
        return wrapper

    cls.__init__, cls.close = counted(cls.__init__), counted(cls.close)
    cls._latticelab_counted = True


def _collect_if_canvases_changed(always: bool) -> None:
    if always or _canvas_events[0] != _collected_at[0]:
        gc.collect()
        _collected_at[0] = _canvas_events[0]


@pytest.fixture(autouse=True)
def _collect_closed_canvases(request):
    # autouse and without dependencies: set up first, torn down last, after qtbot and the canvas fixtures.
    # A full collection costs about a second in a process holding Qt and VisPy: it runs only where canvases
    # were made or closed since the last one (before the test: a module's windows closed after its last
    # test), and after every test that drove Qt (qtbot), not after each of the many tests that never draw.
    vispy_loaded = "vispy.app" in sys.modules
    if vispy_loaded:
        _count_canvas_events()
        _collect_if_canvases_changed(always=False)
    yield
    if "vispy.app" in sys.modules:
        _collect_if_canvases_changed(always=not vispy_loaded or "qtbot" in request.fixturenames)
        _count_canvas_events()
