"""``latticelab gui``: opens the desktop application, or makes figures from a script.

    latticelab gui --dim 3 --L 64 --T 4.0 --steps 200 --screenshot out.png --quit

Parameters not given on the command line come from the last session (QSettings), else from defaults
(2D, L=512 on CPU / 2048 on a GPU, T just below T_c). Scripted runs (--quit) neither read nor write the
stored settings unless --settings names a file, so a figure depends only on its command line.
"""
from __future__ import annotations

import argparse
import logging
import sys

log = logging.getLogger(__name__)

SCREENSHOT_KINDS = ("view", "cells", "window")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model (default: the last session's values)")
    g.add_argument("--dim", type=int, default=None, help="2 or 3")
    g.add_argument("--L", type=int, default=None, help="lattice side (even, >= 4); default 512 (2D) / 64 (3D) "
                                                       "on CPU, 2048 / 256 on a GPU")
    g.add_argument("--T", type=float, default=None, help="temperature; default just below T_c")
    g.add_argument("--p", type=float, default=None, help="rewiring probability in [0, 1]")
    g.add_argument("--rewire-dims", default=None, help="'all' or axes such as 'x', 'xy'")
    g.add_argument("--algorithm", default=None, help="metropolis, wolff, swendsen-wang or a hybrid m:w such as 8:1")
    g.add_argument("--seed", type=int, default=None, help="random seed")
    g.add_argument("--backend", default="auto", help="auto (CUDA when usable), cuda or numpy")
    g.add_argument("--start", default="hot", choices=("hot", "cold"), help="initial spins: random or all up")
    s = parser.add_argument_group("running and figures")
    s.add_argument("--steps", type=int, default=None, help="run this many steps, then pause (with --quit: default 0)")
    s.add_argument("--steps-per-frame", type=int, default=None, help="at most this many steps per frame")
    s.add_argument("--screenshot", metavar="PATH", default=None,
                   help="after --steps, write a PNG here (an existing file is kept: a free name is chosen)")
    s.add_argument("--screenshot-what", choices=SCREENSHOT_KINDS, default="view",
                   help="view: the lattice canvas as shown; cells: one pixel per cell (3D unfolded); "
                        "window: the whole window")
    s.add_argument("--peel", type=int, default=None, help="3D: layers removed from the top of the cube")
    s.add_argument("--unfold", action="store_true", help="3D: show the layers as a zigzag grid")
    s.add_argument("--show-links", action="store_true", help="mark rewired sites and draw the rewired links")
    s.add_argument("--no-highlight", action="store_true", help="do not highlight the cells flipped in the last step")
    s.add_argument("--window-size", default=None, metavar="WxH", help="window size in pixels, e.g. 1400x860")
    s.add_argument("--quit", action="store_true", help="exit when the steps (and screenshot) are done")
    s.add_argument("--settings", metavar="FILE", default=None, help="keep preferences in this .ini file")


def _window_size(text: str | None):
    if not text:
        return None
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        width = height = 0
    if width < 200 or height < 200:
        from latticelab.sim.params import ParameterError
        raise ParameterError("window-size", f"must be WIDTHxHEIGHT with both >= 200, e.g. 1400x860; got {text!r}")
    return width, height


def resolve_parameters(args, prefs, gpu: bool):
    """Command line first, then stored preferences, then defaults."""
    from latticelab.app.session import DEFAULT_T, SimulationParameters, default_L

    def pick(value, key, fallback):
        if value is not None:
            return value
        stored = prefs.get(key)
        return fallback if stored is None else stored

    dim = pick(args.dim, "params/dim", 2)
    if dim not in (2, 3):
        return SimulationParameters(dim=dim)   # the model names the problem
    return SimulationParameters(
        dim=dim,
        L=pick(args.L, f"params/L{dim}", default_L(dim, gpu)),
        T=pick(args.T, f"params/T{dim}", DEFAULT_T[dim]),
        p=pick(args.p, "params/p", 0.0),
        rewire_dims=pick(args.rewire_dims, "params/rewire_dims", "all"),
        algorithm=pick(args.algorithm, "params/algorithm", "metropolis"),
        seed=pick(args.seed, "params/seed", 1),
        backend=args.backend,
        start=args.start,
    )


def run_gui(args) -> int:
    import vispy
    vispy.use(app="pyside6")
    from PySide6 import QtCore, QtWidgets

    from latticelab.app.main_window import MainWindow
    from latticelab.app.session import SimulationParameters
    from latticelab.app.settings import Preferences
    from latticelab.sim.backend import select_backend
    from latticelab.sim.params import ParameterError

    size = _window_size(args.window_size)
    if args.steps is not None and args.steps < 0:
        raise ParameterError("steps", f"must be a non-negative integer; got {args.steps}")
    qt_app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    qt_app.setOrganizationName("latticelab")
    qt_app.setApplicationName("latticelab")

    if args.settings:
        store = QtCore.QSettings(args.settings, QtCore.QSettings.Format.IniFormat)
    elif args.quit:
        store = None
    else:
        store = QtCore.QSettings()
    prefs = Preferences(store)
    gpu = select_backend(args.backend).is_gpu   # BackendError for an unusable --backend cuda
    params = resolve_parameters(args, prefs, gpu)
    try:
        window = MainWindow(params, prefs, interactive=not args.quit)
    except ParameterError as exc:
        from_settings = [k for k in ("dim", "L", "T", "p", "rewire_dims", "algorithm", "seed")
                         if getattr(args, k) is None and getattr(params, k) != getattr(SimulationParameters(), k)]
        if not from_settings:
            raise
        # A stored value that no longer works here (e.g. too large for this machine): start from defaults.
        prefs.problems.append(f"stored parameters not usable ({exc}); using defaults")
        params = resolve_parameters(args, Preferences(None), gpu)
        window = MainWindow(params, prefs, interactive=not args.quit)

    c = window.controls
    if args.steps_per_frame is not None:
        c.steps_per_frame.setValue(max(1, args.steps_per_frame))
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

    status = {"code": 0}

    def finish():
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
        QtCore.QTimer.singleShot(0, lambda: window.run_steps(args.steps or 0, then=finish))
    elif args.screenshot:
        QtCore.QTimer.singleShot(0, finish)
    code = qt_app.exec()
    return status["code"] or code
