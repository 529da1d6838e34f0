"""The ``latticelab`` command: the GUI (default) and headless runs of any registered model; the composition
root (latticelab/__main__.py) adds the benchmarks through ``extra_commands``.

The options of ``latticelab run <model>`` and ``latticelab gui`` are made from the models' parameter schemas
(sim/params.py), so they always list exactly what the model accepts, with its help text, unit and limits.
Bad input ends with one line naming the parameter and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import io as text_io
import logging
import os
import sys
import time

from latticelab.sim.params import allowed_text

BACKENDS = ("auto", "cuda", "numpy")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        raise UsageError(message)


def option_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _typed(kind: type):
    """argparse type: ints and floats parsed as such, everything else kept as text."""
    if kind is int:
        def parse_int(text: str):
            try:
                return int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"must be an integer; got {text!r}") from None
        return parse_int
    if kind is float:
        def parse_float(text: str):
            try:
                return float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None
        return parse_float
    return str


def add_parameter_options(parser: argparse.ArgumentParser, schemas, title: str) -> None:
    """One option per schema field (the union over ``schemas``, first declaration wins), default None:
    values not given come from the model's suggested defaults (or, in the GUI, the last session)."""
    group = parser.add_argument_group(title)
    seen = set()
    for schema in schemas:
        for name, info in schema.fields().items():
            if name in seen or not info.get("cli", True):
                continue
            seen.add(name)
            unit = f" [{info['unit']}]" if info.get("unit") else ""
            group.add_argument(option_name(name), dest=name, type=_typed(info["type"]), default=None,
                               metavar=name.upper() if len(name) > 1 else name,
                               help=f"{info['help']}{unit}; {allowed_text(schema, name)}")


def given_parameters(args, schema) -> dict:
    """The parameter values given on the command line for ``schema``."""
    return {name: getattr(args, name) for name in schema.model_fields if getattr(args, name, None) is not None}


def check_foreign_options(args, schema, all_schemas) -> None:
    """An option of another model's schema given for this model: say so rather than ignore it."""
    own = set(schema.model_fields)
    for other in all_schemas:
        for name in other.model_fields:
            if name not in own and getattr(args, name, None) is not None:
                raise UsageError(f"{option_name(name)} is not a parameter of {schema.model_name}")


def build_parser(extra_commands=()) -> argparse.ArgumentParser:
    from latticelab.sim.models import all_models

    models = all_models()
    parser = _Parser(prog="latticelab", description="Interactive GPU laboratory for lattice and network models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the program decides and why")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    run = sub.add_parser("run", help="headless simulation, observables per step to CSV")
    run_models = run.add_subparsers(dest="model", parser_class=_Parser, required=True)
    for name, cls in models.items():
        p = run_models.add_parser(name, help=cls.title)
        add_parameter_options(p, [cls.Params], f"{cls.title} (default: the model's defaults)")
        g = p.add_argument_group("running")
        g.add_argument("--backend", default="auto", choices=BACKENDS, help="auto (CUDA when usable), cuda or numpy")
        g.add_argument("--steps", type=int, default=100, help="number of steps to record")
        g.add_argument("--equilibrate", type=int, default=0, help="steps to run before recording")
        g.add_argument("--csv", help="write one row per step with the observables to this file")
        g.add_argument("--overwrite", action="store_true", help="replace an existing CSV file")
        p.set_defaults(handler=run_model)

    gui = sub.add_parser("gui", help="the desktop application (default when no command is given)")
    try:
        importlib.import_module("latticelab.app.gui").add_arguments(gui, models)
    except ImportError as exc:
        gui.set_defaults(gui_unavailable=str(exc))
    gui.set_defaults(handler=None)
    importlib.import_module("latticelab.app.study_cli").add_study_commands(sub, _Parser)   # sweep, tc (issue 11)

    for add_command in extra_commands:
        add_command(sub, _Parser)
    return parser


class Interrupted(Exception):
    """SIGINT or SIGTERM during a headless run."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _interruptible():
    """SIGINT and SIGTERM raise Interrupted inside the block (in the main thread), so a run stops between
    steps with a message instead of a traceback; the previous handlers come back afterwards."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_model(args) -> int:
    """``latticelab run <model>``: steps a model headless and prints (or writes as CSV) its observables.

    The CSV is kept in memory and written atomically when the run is complete, so an interrupted run leaves
    the old file (or none); the output path is checked before the run starts."""
    import signal

    from latticelab.sim.io import check_output, open_atomic
    from latticelab.sim.models import get_model

    cls = get_model(args.model)
    if args.steps < 0 or args.equilibrate < 0:
        raise UsageError("--steps and --equilibrate must be non-negative integers")
    if args.csv:
        check_output(args.csv, overwrite=args.overwrite)   # OutputError: one line, before any work
    model = cls.create(backend=args.backend, **given_parameters(args, cls.Params))
    names = [o.name for o in cls.declared_observables]
    time_column = cls.time_label.replace(" ", "_")
    rows = text_io.StringIO() if args.csv else None
    writer = csv.DictWriter(rows, fieldnames=[time_column, *names]) if rows else None
    if writer:
        writer.writeheader()
    phase, done = "equilibration", 0
    try:
        with _interruptible():
            summary = " ".join(f"{k}={v}" for k, v in model.params.model_dump().items())
            print(f"latticelab: {cls.title} {summary} on {model.backend_name} [{model.device_name}]",
                  file=sys.stderr)
            for done in range(1, args.equilibrate + 1):
                model.step(1)
            phase, done = "recording", 0
            start = time.perf_counter()
            for done in range(1, args.steps + 1):
                model.step(1)
                if writer:
                    writer.writerow({time_column: model.time, **model.observables()})
            elapsed = time.perf_counter() - start
            phase = "writing"
            if rows is not None:
                with open_atomic(args.csv, overwrite=args.overwrite, binary=False) as f:
                    f.write(rows.getvalue())
    except Interrupted as exc:
        total = args.equilibrate if phase == "equilibration" else args.steps
        where = (f"while writing {args.csv}" if phase == "writing"
                 else f"during {phase} after {done - 1 if done else 0} of {total} steps")
        kept = ""
        if args.csv:
            kept = (f"; {args.csv} was left as it was" if os.path.exists(args.csv)
                    else f"; {args.csv} was not written")
        print(f"latticelab: interrupted ({signal.Signals(exc.signum).name}) {where}{kept}", file=sys.stderr)
        return 128 + exc.signum
    obs = model.observables()
    print(f"step {model.step_count}: " + "  ".join(f"{k} {v:.6f}" for k, v in obs.items())
          + f"  ({args.steps / max(elapsed, 1e-9):.1f} steps/s)")
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
                         "xvfb-run, or use 'latticelab run <model>' for headless runs")
    print(f"latticelab: the GUI cannot start ({reason}); running a short headless simulation instead",
          file=sys.stderr)
    from latticelab.sim.models import model_names
    first = model_names()[0]
    return run_model(build_parser().parse_args(["run", first, "--steps", "200"]))


def main(argv: list[str] | None = None, extra_commands=()) -> int:
    """Run the command line; ``extra_commands`` are functions (subparsers, parser_class) that add commands
    whose parsers set a ``handler(args)`` default."""
    from latticelab.sim.backend import BackendError
    from latticelab.sim.params import ParameterError
    from latticelab.sim.io import OutputError
    argv = list(sys.argv[1:] if argv is None else argv)
    # -v / --verbose is accepted anywhere before a "--" (latticelab -v, latticelab run ising -v, ...)
    end = argv.index("--") if "--" in argv else len(argv)
    verbose = any(a in ("-v", "--verbose") for a in argv[:end])
    argv = [a for a in argv[:end] if a not in ("-v", "--verbose")] + argv[end:]
    try:
        parser = build_parser(extra_commands)
        args = parser.parse_args(argv)
        args.verbose = verbose
        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        if args.command in (None, "gui"):
            explicit = args.command == "gui"
            if not explicit:
                args = parser.parse_args(["gui", *argv])
                args.verbose = verbose
            return run_gui(args, explicit=explicit)
        return args.handler(args)
    except (UsageError, ParameterError, BackendError, OutputError) as exc:
        print(f"latticelab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("latticelab: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("latticelab: error: out of memory; choose a smaller model (see 'latticelab run <model> --help')",
              file=sys.stderr)
        return 2
    except Exception as exc:     # a bug: one line (the traceback with -v), never a wall of text
        if verbose:
            import traceback
            traceback.print_exc(file=sys.stderr)
        print(f"latticelab: internal error: {type(exc).__name__}: {exc} (a bug; -v shows where, please report it)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
