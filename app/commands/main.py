"""The entry of the ``latticelab`` command: the parser made of the commands' own (app/commands/*.py), and every
way a command can end turned into one line and an exit status (2 for bad input, never a traceback)."""
from __future__ import annotations

import logging
import sys

from latticelab.app.commands import distributed, gui, prepare_gpu, run, sweep, tc
from latticelab.app.commands.options import Parser, UsageError, refuse_empty_values

COMMANDS = (run.add_command, gui.add_command, sweep.add_command, tc.add_command, prepare_gpu.add_command)


def build_parser(extra_commands=()) -> Parser:
    """The command line: the commands here, then ``extra_commands`` (functions (subparsers, parser_class) that
    add commands whose parsers set a ``handler(args)`` default)."""
    parser = Parser(prog="latticelab", description="Interactive GPU laboratory for lattice and network models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the program decides and why")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for add_command in (*COMMANDS, *extra_commands):
        add_command(sub, Parser)
    return parser


def _with_numpy_warnings_held(handler, args) -> int:
    """``handler(args)`` with the RuntimeWarnings (NumPy's overflow, invalid value ...) held back: a command that
    fails ends with its one line only (the warnings were on the way to it); one that succeeds says each warning
    once, in one line, after its work."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default", RuntimeWarning)      # once per place: the record stays small
        code = handler(args)
    for warning in caught:
        if issubclass(warning.category, RuntimeWarning):
            print(f"latticelab: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    return code


def main(argv: list[str] | None = None, extra_commands=()) -> int:
    """Run the command line (``extra_commands``: see ``build_parser``); returns the exit status."""
    from latticelab.sim.backend import BackendError
    from latticelab.sim.io import OutputError, OutputExists
    from latticelab.sim.params import ParameterError
    argv = list(sys.argv[1:] if argv is None else argv)
    # -v / --verbose is accepted anywhere before a "--" (latticelab -v, latticelab run ising -v, ...)
    end = argv.index("--") if "--" in argv else len(argv)
    verbose = any(a in ("-v", "--verbose") for a in argv[:end])
    argv = [a for a in argv[:end] if a not in ("-v", "--verbose")] + argv[end:]
    args = None
    try:
        parser = build_parser(extra_commands)
        args = parser.parse_args(argv)
        args.verbose = verbose
        refuse_empty_values(args)
        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        if args.command in (None, "gui"):
            explicit = args.command == "gui"
            if not explicit:
                args = parser.parse_args(["gui", *argv])
                args.verbose = verbose
            return gui.run(args, explicit=explicit)
        return _with_numpy_warnings_held(args.handler, args)
    except (UsageError, ParameterError, BackendError, OutputError) as exc:
        message = str(exc)
        if isinstance(exc, OutputExists) and getattr(args, "overwrite", None) is False:
            message = message.replace("allow overwriting", "give --overwrite to replace it")   # name the option
        print(f"latticelab: error: {message}", file=sys.stderr)
        distributed.end_job(2)
        return 2
    except KeyboardInterrupt:
        print("latticelab: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("latticelab: error: out of memory; choose a smaller model (see 'latticelab run <model> --help')",
              file=sys.stderr)
        distributed.end_job(2)
        return 2
    except Exception as exc:     # a bug: one line (the traceback with -v), never a wall of text
        if verbose:
            import traceback
            traceback.print_exc(file=sys.stderr)
        print(f"latticelab: internal error: {type(exc).__name__}: {exc} (a bug; -v shows where, please report it)",
              file=sys.stderr)
        distributed.end_job(1)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
