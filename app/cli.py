"""The ``latticelab`` command: the GUI (default) and headless runs; the composition root
(latticelab/__main__.py) adds the benchmarks through ``extra_commands``.

Bad input ends with one line naming the parameter and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import csv
import importlib
import logging
import os
import sys
import time



class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        raise UsageError(message)


def _add_model_arguments(p: argparse.ArgumentParser, *, defaults: dict) -> None:
    p.add_argument("--dim", type=int, default=defaults.get("dim", 2), help="2 or 3")
    p.add_argument("--L", type=int, default=defaults.get("L", 64), help="lattice side (even, >= 4)")
    p.add_argument("--T", type=float, default=defaults.get("T", 2.0), help="temperature (> 0)")
    p.add_argument("--p", type=float, default=0.0, help="rewiring probability in [0, 1]")
    p.add_argument("--rewire-dims", default="all", help="'all' or axes such as 'x', 'xy'")
    p.add_argument("--algorithm", default="metropolis", help="metropolis, wolff or a hybrid m:w such as 8:1")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--backend", default="auto", help="auto, cuda or numpy")
    p.add_argument("--start", default="hot", help="hot (random) or cold (all up)")


def build_parser(extra_commands=()) -> argparse.ArgumentParser:
    parser = _Parser(prog="latticelab", description="Interactive GPU laboratory for lattice and network models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the program decides and why")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    run = sub.add_parser("run", help="headless simulation, observables per step to CSV")
    run_models = run.add_subparsers(dest="model", parser_class=_Parser, required=True)
    ising = run_models.add_parser("ising", help="the rewired Ising model")
    _add_model_arguments(ising, defaults={})
    ising.add_argument("--steps", type=int, default=100, help="number of steps (sweeps or cluster flips)")
    ising.add_argument("--equilibrate", type=int, default=0, help="steps to run before recording")
    ising.add_argument("--csv", help="write one row per step with the observables to this file")
    ising.add_argument("--overwrite", action="store_true", help="replace an existing CSV file")

    gui = sub.add_parser("gui", help="the desktop application (default when no command is given)")
    try:
        importlib.import_module("latticelab.app.gui").add_arguments(gui)
    except ImportError as exc:
        gui.set_defaults(gui_unavailable=str(exc))

    for add_command in extra_commands:
        add_command(sub, _Parser)
    return parser


def run_ising(args) -> int:
    from latticelab.sim.models.ising.model import IsingModel
    if args.steps < 0 or args.equilibrate < 0:
        raise UsageError("--steps and --equilibrate must be non-negative integers")
    if args.csv and os.path.exists(args.csv) and not args.overwrite:
        raise UsageError(f"--csv: {args.csv} exists; choose another name or pass --overwrite")
    model = IsingModel(dim=args.dim, L=args.L, T=args.T, p=args.p, rewire_dims=args.rewire_dims,
                       algorithm=args.algorithm, seed=args.seed, backend=args.backend, start=args.start)
    out = open(args.csv, "w", newline="") if args.csv else None
    print(f"latticelab: {args.dim}D rewired Ising L={args.L} T={args.T} p={args.p} ({args.algorithm}) "
          f"on {model.backend_name} [{model.device_name}]", file=sys.stderr)
    model.step(args.equilibrate)
    fields = ["step", "energy", "magnetisation", "flipped_fraction"]
    writer = csv.DictWriter(out, fieldnames=fields) if out else None
    if writer:
        writer.writeheader()
    start = time.perf_counter()
    try:
        for _ in range(args.steps):
            model.step(1)
            if writer:
                writer.writerow({"step": model.step_count, **model.observables()})
    finally:
        if out:
            out.close()
    elapsed = time.perf_counter() - start
    obs = model.observables()
    print(f"step {model.step_count}: energy {obs['energy']:.6f}  |M| {obs['magnetisation']:.6f}  "
          f"flipped {obs['flipped_fraction']:.6f}  ({args.steps / max(elapsed, 1e-9):.1f} steps/s)")
    return 0


def _no_display_reason() -> str | None:
    """Why a window cannot open here (Qt would abort the process rather than raise), or None."""
    if os.environ.get("QT_QPA_PLATFORM") or sys.platform in ("darwin", "win32"):
        return None
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)"
    return None


def run_gui(args, *, explicit: bool) -> int:
    reason = getattr(args, "gui_unavailable", None) or _no_display_reason()
    if reason is None:
        return importlib.import_module("latticelab.app.gui").run_gui(args)
    if explicit:
        raise UsageError(f"gui: cannot open a window: {reason}; run under a desktop session or "
                         "xvfb-run, or use 'latticelab run ising' for headless runs")
    print(f"latticelab: the GUI cannot start ({reason}); running a short headless simulation instead",
          file=sys.stderr)
    return run_ising(build_parser().parse_args(["run", "ising", "--L", "128", "--steps", "200"]))


def main(argv: list[str] | None = None, extra_commands=()) -> int:
    """Run the command line; ``extra_commands`` are functions (subparsers, parser_class) that add commands
    whose parsers set a ``handler(args)`` default."""
    from latticelab.sim.params import ParameterError
    from latticelab.sim.backend import BackendError
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser(extra_commands)
        args = parser.parse_args(argv)
        logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        if args.command in (None, "gui"):
            explicit = args.command == "gui"
            if not explicit:
                args = parser.parse_args(["gui", *argv])
            return run_gui(args, explicit=explicit)
        if args.command == "run":
            return run_ising(args)
        return args.handler(args)
    except (UsageError, ParameterError, BackendError) as exc:
        print(f"latticelab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
