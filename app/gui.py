"""The window of ``latticelab gui`` (its options: app/commands/gui.py) opened, or figures made from a script.

The model is --model, else the last session's, else the first registered. Its parameters not given on the
command line come from the last session (QSettings), else from the model's defaults (for the Ising model: 2D,
L=512 on CPU / 2048 on a GPU, T just below T_c). Scripted runs (--quit) neither read nor write the stored
settings unless --settings names a file, so a figure depends only on its command line.
"""
from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)


def _check_screenshot_path(path: str) -> None:
    """--screenshot's folder exists and is writable (OutputError naming the path) before the window opens and
    the steps run; an existing file is fine (a free name beside it is chosen, as the window does)."""
    from latticelab.sim.io import check_output
    target = Path(path)
    if target.suffix.lower() != ".png":
        target = target.with_name(target.name + ".png")
    check_output(target, overwrite=True)


# A window side beyond any screen (8K is 7680 pixels wide) and within what OpenGL drivers draw into: larger sizes
# ran out of memory in the window's first paint, over and over, instead of being refused.
MAX_WINDOW_SIDE = 8192


def _window_size(text: str | None):
    if not text:
        return None
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        width = height = 0
    if not (200 <= width <= MAX_WINDOW_SIDE and 200 <= height <= MAX_WINDOW_SIDE):
        from latticelab.sim.params import ParameterError
        raise ParameterError("window-size", f"must be WIDTHxHEIGHT with both in 200 .. {MAX_WINDOW_SIDE}, e.g. "
                                            f"1400x860; got {text!r}")
    return width, height


def resolve_model(args, prefs) -> str:
    from latticelab.sim.models import model_names
    stored = prefs.get("model")
    return args.model or (stored if stored in model_names() else model_names()[0])


def resolve_parameters(args, prefs, gpu: bool, model: str | None = None):
    """The model's parameters: command line first, then the stored preferences (of the variant the command
    line asks for, e.g. the Ising dimension), then the model's defaults."""
    from latticelab.app.commands.options import check_foreign_options, given_parameters
    from latticelab.app.settings import variant_key
    from latticelab.sim.models import all_models, get_model

    schema = get_model(model or resolve_model(args, prefs)).Params
    check_foreign_options(args, schema, [cls.Params for cls in all_models().values()])
    given = given_parameters(args, schema)
    stored = prefs.model_values(schema.model_name, schema)
    if any(name in given for name in schema.variant_fields):
        stored = prefs.model_values(schema.model_name, schema, variant_key(schema, {**stored, **given}))
    return schema.create(gpu=gpu, **{**stored, **given})


def run_gui(args) -> int:
    import vispy
    vispy.use(app="pyside6")
    from PySide6 import QtCore, QtWidgets

    from latticelab.app.main_window import MainWindow
    from latticelab.app.settings import MAX_STEPS_PER_FRAME, Preferences
    from latticelab.sim.backend import select_backend
    from latticelab.sim.params import ParameterError

    size = _window_size(args.window_size)
    if args.screenshot:
        _check_screenshot_path(args.screenshot)
    if args.steps is not None and args.steps < 0:
        raise ParameterError("steps", f"must be a non-negative integer; got {args.steps}")
    if args.steps_per_frame is not None and not 0 <= args.steps_per_frame <= MAX_STEPS_PER_FRAME:
        raise ParameterError("steps-per-frame", f"must be 0 (auto: as many as fit in a frame) or 1 .. "
                                                f"{MAX_STEPS_PER_FRAME}; got {args.steps_per_frame}")
    if args.record:
        from latticelab.app.commands.options import check_record_options
        check_record_options(args)
    gpu = select_backend(args.backend).is_gpu   # BackendError for an unusable --backend cuda
    from latticelab.app.qt_compat import prepare_gl_before_app
    prepare_gl_before_app(gpu)   # before the QApplication: one GL share group; on a device, no vsync
    qt_app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    qt_app.setOrganizationName("latticelab")
    qt_app.setApplicationName("latticelab")

    if args.settings:
        from latticelab.app.settings import check_settings_file
        store = QtCore.QSettings(str(check_settings_file(args.settings)), QtCore.QSettings.Format.IniFormat)
    elif args.quit:
        store = None
    else:
        from latticelab.app.settings import open_default_store
        store, refused = open_default_store()
        if refused:
            log.warning("%s", refused)
    prefs = Preferences(store)
    model = resolve_model(args, prefs)
    try:
        params = resolve_parameters(args, prefs, gpu, model)
        window = MainWindow(model, params, prefs, interactive=not args.quit, backend=args.backend,
                            devices=args.devices)
    except (ParameterError, MemoryError) as exc:
        from latticelab.app.commands.options import given_parameters
        from latticelab.sim.models import get_model
        given = given_parameters(args, get_model(model).Params)
        if prefs.store is None or (isinstance(exc, ParameterError) and exc.parameter in given):
            raise   # the command line's own values: exit 2 with the message
        # A stored value that no longer works here (e.g. too large for this machine): start from defaults.
        prefs.problems.append(f"stored parameters not usable ({exc}); using defaults")
        params = resolve_parameters(args, Preferences(None), gpu, model)
        window = MainWindow(model, params, prefs, interactive=not args.quit, backend=args.backend,
                            devices=args.devices)

    c = window.controls
    if args.steps_per_frame is not None:
        c.steps_per_frame.setValue(args.steps_per_frame)
    if args.unfold:
        c.unfold.setChecked(True)
    if args.show_links:
        c.show_links.setChecked(True)
    if args.no_highlight:
        c.highlight.setChecked(False)
    if args.peel is not None:
        c.peel.setValue(args.peel)
    if size:
        window.resize(*size)
    elif args.quit:
        window.resize(1400, 860)
    window.show()
    from latticelab.app.collector import freeze_after_start
    freeze_after_start(window)     # full collections kept out of switches (app/collector.py)

    status = {"code": 0}

    def start_recording():   # once the event loop runs (the view's GL context is ready), before any step
        if not window.recording.start(args.record, args.fps, args.record_every, confirm=False):
            status["code"] = 1

    if args.record:
        QtCore.QTimer.singleShot(0, start_recording)

    def finish():
        if args.record:
            result = window.recording.stop(wait=True)
            if result is None:
                status["code"] = 1
            else:
                print(f"latticelab: {result.describe()}")
        if args.screenshot and args.screenshot_what == "window":
            when_window_drawn(window, take_screenshot)
        else:
            take_screenshot()

    def take_screenshot():
        if args.screenshot:
            written = window.export_screenshot(args.screenshot, args.screenshot_what, confirm=False)
            if written is None:
                status["code"] = 1
            else:
                print(f"latticelab: wrote {written}")
        if args.quit:
            window.close()
            qt_app.exit(status["code"])

    if args.steps is not None or args.quit:
        # exactly the requested steps from the initial state: no frame may run before the count starts
        window.set_running(False)
        QtCore.QTimer.singleShot(0, lambda: (window.recording.run_steps if window.recording.recording
                                             else window.run_steps)(args.steps or 0, then=finish))
    elif args.screenshot:
        QtCore.QTimer.singleShot(0, finish)
    with close_on_signals(qt_app, window, status):
        log.info("window open; Ctrl+C (SIGINT) or SIGTERM closes it")
        code = qt_app.exec()
    return status["code"] or code


def when_window_drawn(window, then, timeout_s: float = 60.0) -> None:
    """Call ``then`` once the whole window shows the last step: the live plots refreshed with it and drawn whole
    (paused, they are drawn a piece per pass of the event loop) and no model change settling. The event loop
    runs meanwhile; after ``timeout_s`` ``then`` is called all the same. A scripted screenshot of the window
    taken right after a fast run would otherwise show plots not yet drawn."""
    import time

    from PySide6 import QtCore
    window.frames.update_plots(force=True)
    deadline = time.monotonic() + timeout_s

    def check():
        pending = (window.plot_canvas.stale and window.frames.plots_on_screen()) or window.settling()
        if pending and time.monotonic() < deadline:
            QtCore.QTimer.singleShot(20, check)
        else:
            then()

    QtCore.QTimer.singleShot(0, check)


@contextlib.contextmanager
def close_on_signals(qt_app, window, status: dict):
    """While the event loop runs, SIGINT and SIGTERM close the window as its Quit action does (settings are
    saved by its closeEvent) and end the application with 128 + the signal number. Python runs signal
    handlers only between bytecodes, which Qt's C++ loop never reaches on its own: the signal is written to a
    socket (signal.set_wakeup_fd) whose notifier wakes the loop. The handler itself does nothing, so no
    KeyboardInterrupt is ever raised inside a Qt override."""
    import signal
    import socket
    import threading

    from PySide6 import QtCore

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    received = []
    previous = {}
    try:
        old_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda signum, _frame: received.append(signum))
    except (ValueError, OSError):   # not possible here: leave the defaults
        reader.close()
        writer.close()
        yield
        return
    notifier = QtCore.QSocketNotifier(reader.fileno(), QtCore.QSocketNotifier.Type.Read)

    def on_signal():
        try:
            data = reader.recv(64)
        except OSError:
            data = b""
        signums = [*received, *data]
        received.clear()
        if not any(n in (signal.SIGINT, signal.SIGTERM) for n in signums):
            return
        signum = next(n for n in signums if n in (signal.SIGINT, signal.SIGTERM))
        print(f"latticelab: {signal.Signals(signum).name} received; closing the window", file=sys.stderr)
        status["code"] = 128 + signum
        window.close()
        qt_app.exit(128 + signum)

    notifier.activated.connect(on_signal)
    try:
        yield
    finally:
        notifier.setEnabled(False)
        signal.set_wakeup_fd(old_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        reader.close()
        writer.close()

