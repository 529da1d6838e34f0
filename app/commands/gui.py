"""``latticelab gui`` (the default command): its options, and the window opened (app/gui.py), or, where no
window can open and the command was not asked for by name, a short headless run instead.

    latticelab gui --model ising --dim 3 --L 64 --T 4.0 --steps 200 --screenshot out.png --quit
"""
from __future__ import annotations

import argparse
import os
import sys

from latticelab.app.commands.options import (UsageError, add_backend_option, add_parameter_options,
                                             add_record_options, option_name, typed)

SCREENSHOT_KINDS = ("view", "cells", "window")


def add_command(sub, parser_class) -> argparse.ArgumentParser:
    """``gui`` with its options; returns its parser."""
    from latticelab.sim.models import all_models
    gui = sub.add_parser("gui", help="the desktop application (default when no command is given)")
    add_arguments(gui, all_models())
    gui.set_defaults(handler=None)
    return gui


def add_arguments(parser: argparse.ArgumentParser, models: dict) -> None:
    parser.add_argument("--model", choices=tuple(models), default=None,
                        help="the model to open (default: the last session's)")
    add_backend_option(parser)
    parser.add_argument("--devices", default=None, metavar="IDS",
                        help="the GPUs to split one run over, 'all' or ids like 0,1 (default: one device), for the "
                             "models that split (" + ", ".join(n for n, c in models.items() if c.splits_across_devices)
                             + "; 'latticelab run <model> --help' says what splits); the others run on one device")
    _add_parameters_by_model(parser, models)
    s = parser.add_argument_group("running and figures")
    s.add_argument("--steps", type=int, default=None, help="run this many steps, then pause (with --quit: default 0)")
    s.add_argument("--steps-per-frame", type=int, default=None,
                   help="at most this many steps per frame; 0: auto, as many as fit in a frame (the default on a "
                        "CUDA device; 1 on the CPU)")
    s.add_argument("--screenshot", metavar="PATH", default=None,
                   help="after --steps, write a PNG here (an existing file is kept: a free name is chosen)")
    s.add_argument("--screenshot-what", choices=SCREENSHOT_KINDS, default="view",
                   help="view: the canvas as shown; cells: one pixel per cell (3D unfolded); window: the whole window")
    s.add_argument("--peel", type=int, default=None, help="3D: layers removed from the top of the cube")
    s.add_argument("--unfold", action="store_true", help="3D: show the layers as a zigzag grid")
    s.add_argument("--show-links", action="store_true", help="show the model's marks (Ising: rewired sites and links)")
    s.add_argument("--no-highlight", action="store_true", help="do not highlight the cells changed in the last step")
    s.add_argument("--window-size", default=None, metavar="WxH", help="window size in pixels, e.g. 1400x860")
    s.add_argument("--quit", action="store_true", help="exit when the steps (and screenshot) are done")
    s.add_argument("--settings", metavar="FILE", default=None, help="keep preferences in this .ini file")
    add_record_options(parser.add_argument_group("movie of the view (as File > Record movie...; with --steps: "
                                                 "exactly one frame every N steps)"),
                       existing="an existing file is kept: a free name is chosen")


def _add_parameters_by_model(parser: argparse.ArgumentParser, models: dict) -> None:
    """The models' parameters as options, a group per model (each in its schema's order, with that model's own
    help and range); a parameter of several models (L, seed, dim) is listed once, in a group of its own, naming
    the models and without any one model's default or range."""
    owners: dict[str, list] = {}
    for cls in models.values():
        for name, info in cls.Params.fields().items():
            if info.get("cli", True):
                owners.setdefault(name, []).append(cls)
    shared = [name for name, classes in owners.items() if len(classes) > 1]
    group = parser.add_argument_group("parameters of several models (default: the last session's values, else "
                                      "the model's defaults; see 'latticelab run MODEL --help' for each one's "
                                      "range)")
    for name in shared:
        first = owners[name][0].Params.fields()[name]
        unit = f" [{first['unit']}]" if first.get("unit") else ""
        group.add_argument(option_name(name), dest=name, type=typed(first["type"]), default=None,
                           metavar=name.upper() if len(name) > 1 else name,
                           help=f"{first['label']}{unit} (a parameter of {', '.join(c.name for c in owners[name])})")
    for cls in models.values():
        own = [name for name in cls.Params.fields() if name in owners and name not in shared]
        if own:
            add_parameter_options(parser, [cls.Params], f"{cls.title} (--model {cls.name})", only=own)


def no_display_reason() -> str | None:
    """Why a window cannot open here (Qt would abort the process rather than raise), or None."""
    if os.environ.get("QT_QPA_PLATFORM") or sys.platform in ("darwin", "win32"):
        return None
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)"
    return None


def run(args, *, explicit: bool) -> int:
    """Open the window; without a display, ``latticelab gui`` (``explicit``) is a UsageError and the bare
    ``latticelab`` runs the first model headless for a few steps instead."""
    try:
        from latticelab.app.gui import run_gui
    except ImportError as exc:
        run_gui, reason = None, str(exc)
    else:
        reason = no_display_reason()
    if reason is None:
        return run_gui(args)
    if explicit:
        raise UsageError(f"gui: cannot open a window: {reason}; run under a desktop session or "
                         "xvfb-run, or use 'latticelab run <model>' for headless runs")
    print(f"latticelab: the GUI cannot start ({reason}); running a short headless simulation instead",
          file=sys.stderr)
    from latticelab.app.commands import run as run_command
    from latticelab.app.commands.options import Parser
    from latticelab.sim.models import model_names
    return run_command.run_model(run_command.parse([model_names()[0], "--steps", "200"], Parser))
