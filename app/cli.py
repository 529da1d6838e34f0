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
import logging
import os
import sys
import time

from latticelab.sim.params import allowed_text

BACKENDS = ("auto", "cuda", "numpy")
DEFAULT_STEPS = 100
CHECK_EVERY = 1000      # without --csv, a run's observables are checked (finite) every this many steps
MAX_RUN_STEPS = 1e10    # an --until run whose pace would need more steps than this is stopped with a message


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


def add_parameter_options(parser: argparse.ArgumentParser, schemas, title: str, only=None) -> None:
    """One option per schema field (the union over ``schemas``, first declaration wins; ``only``: these
    fields), default None: values not given come from the model's suggested defaults (or, in the GUI, the
    last session)."""
    group = parser.add_argument_group(title)
    seen = set()
    for schema in schemas:
        for name, info in schema.fields().items():
            if name in seen or not info.get("cli", True) or (only is not None and name not in only):
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


def add_record_options(group, existing: str = "an existing file is kept unless --overwrite") -> None:
    """--record, --record-every, --fps: a movie of the run (``latticelab run`` and the scripted ``latticelab gui``);
    ``existing`` says what happens to an existing file."""
    group.add_argument("--record", metavar="PATH", default=None,
                       help=f"record a movie: *.mp4, or a new folder for PNG frames ({existing})")
    group.add_argument("--record-every", type=_typed(int), default=1, metavar="N",
                       help="one frame every N steps (default 1)")
    group.add_argument("--fps", type=_typed(float), default=25.0, metavar="F",
                       help="frames per second of the movie (default 25)")


def check_record_options(args) -> None:
    """--record-every and --fps in range (UsageError naming the option), before anything starts."""
    import math
    if args.record_every < 1:
        raise UsageError(f"--record-every: must be an integer >= 1 (steps between frames); got {args.record_every}")
    if not (math.isfinite(args.fps) and 0.1 <= args.fps <= 1000):
        raise UsageError(f"--fps: must be a number of frames per second in [0.1, 1000]; got {args.fps!r}")


def add_output_options(group) -> None:
    """--output and --every: fields and observables in a format other tools read (sim/output)."""
    from latticelab.sim.output import known_suffixes
    group.add_argument("--output", metavar="PATH", default=None,
                       help=f"write fields and observables; the format follows the suffix: {known_suffixes()} "
                            "(docs/output.md)")
    group.add_argument("--every", type=_typed(int), default=1, metavar="N",
                       help="with --output: a snapshot of the fields every N steps (default 1)")


def _open_output(args, model):
    """The writer of --output (None without it)."""
    if not args.output:
        return None
    from latticelab.sim.output import open_output
    inputs = {o.name: getattr(args, o.name) for o in type(model).run_options if not o.output and getattr(args, o.name)}
    return open_output(args.output, model, every=args.every, overwrite=args.overwrite, inputs=inputs)


def devices_help(cls) -> str:
    """The help of ``--devices`` for one model: what it splits, or that it runs on one device."""
    if not cls.splits_across_devices:
        return "the GPUs to split one run over: this model runs on one device only"
    return ("the GPUs to split one run over, 'all' or ids like 0,1 (default: one device); "
            + (cls.devices_note or "slabs with halos, the same result as on one device"))


def add_model_run_options(parser: argparse.ArgumentParser, cls) -> None:
    """The extra inputs and outputs a model declares for headless runs (``Model.run_options``, sim/model.py)."""
    if not cls.run_options:
        return
    group = parser.add_argument_group(f"{cls.title}: inputs and outputs")
    for option in cls.run_options:
        if option.name in cls.Params.model_fields:
            raise ValueError(f"{cls.name}: run option {option.name!r} is also a parameter")   # a bug in the model
        group.add_argument(option_name(option.name), dest=option.name, default=None, metavar=option.metavar,
                           help=option.help)


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
        g.add_argument("--devices", default=None, metavar="IDS", help=devices_help(cls))
        g.add_argument("--distributed", action="store_true",
                       help="split the run over the processes of an MPI job, one per GPU (or NumPy slab): start it "
                            "with mpirun -n N; rank 0 writes the outputs (docs/multigpu.md)"
                            + ("" if cls.splits_across_devices else "; this model runs in one process only"))
        g.add_argument("--steps", type=int, default=None, help=f"number of steps to record (default {DEFAULT_STEPS})")
        g.add_argument("--until", type=_typed(float), default=None, metavar="T",
                       help=f"record until the model's time ({cls.time_label}) reaches T, instead of a number of steps")
        g.add_argument("--equilibrate", type=int, default=0, help="steps to run before recording")
        g.add_argument("--csv", help="write one row per step with the observables to this file")
        g.add_argument("--overwrite", action="store_true", help="replace existing output files")
        g.add_argument("--load-state", metavar="PATH", default=None,
                       help="continue the run saved in this state file (.npz; its parameters are the run's)")
        g.add_argument("--save-state", metavar="PATH", default=None,
                       help="save the model's state at the end (.npz), to continue it with --load-state or in "
                            "the window")
        add_output_options(g)
        add_record_options(p.add_argument_group("movie (frames at one pixel per cell; 3D: the layers as tiles)"))
        add_model_run_options(p, cls)
        p.set_defaults(handler=run_model)

    gui = sub.add_parser("gui", help="the desktop application (default when no command is given)")
    try:
        importlib.import_module("latticelab.app.gui").add_arguments(gui, models)
    except ImportError as exc:
        gui.set_defaults(gui_unavailable=str(exc))
    gui.set_defaults(handler=None)
    importlib.import_module("latticelab.app.study_cli").add_study_commands(sub, _Parser)   # sweep, tc (issue 11)
    importlib.import_module("latticelab.app.kernel_cache").add_command(sub, _Parser)      # prepare-gpu

    for add_command in extra_commands:
        add_command(sub, _Parser)
    return parser


class Interrupted(Exception):
    """SIGINT or SIGTERM during a headless run."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """SIGINT and SIGTERM as Interrupted, raised where the run is, except inside ``held()``: a signal that comes
    there is raised at its end (a step's bookkeeping, its count and its CSV row, is done whole or not at all)."""

    def __init__(self):
        self._held = False
        self._pending: int | None = None

    def stop(self, signum, _frame):
        if self._held:
            self._pending = signum
            return
        raise Interrupted(signum)

    @contextlib.contextmanager
    def held(self):
        self._held = True
        try:
            yield
        finally:
            self._held = False
        if self._pending is not None:
            raise Interrupted(self._pending)


@contextlib.contextmanager
def _interruptible():
    """SIGINT and SIGTERM raise Interrupted inside the block (in the main thread), so a run stops between
    steps with a message instead of a traceback; the previous handlers come back afterwards. Yields the
    ``_Signals`` whose ``held()`` defers them."""
    import signal
    import threading
    signals = _Signals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return
    previous = {sig: signal.signal(sig, signals.stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield signals
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_length(args) -> tuple[int | None, float | None]:
    """(steps, until): exactly one of them, checked."""
    import math
    if args.steps is not None and args.until is not None:
        raise UsageError("give --steps or --until, not both")
    if args.equilibrate < 0:
        raise UsageError(f"--equilibrate: must be a non-negative integer; got {args.equilibrate}")
    if args.until is not None:
        if not (math.isfinite(args.until) and args.until > 0):
            raise UsageError(f"--until: must be a finite time > 0; got {args.until!r}")
        return None, float(args.until)
    steps = DEFAULT_STEPS if args.steps is None else args.steps
    if steps < 0:
        raise UsageError(f"--steps: must be a non-negative integer; got {steps}")
    return steps, None


def _check_outputs(args, cls) -> dict[str, str]:
    """{option: path} of every file the run writes, each checked now (OutputError before any work)."""
    from latticelab.sim.io import check_output
    outputs = {"--csv": args.csv, "--save-state": args.save_state}
    outputs.update({option_name(o.name): getattr(args, o.name) for o in cls.run_options if o.output})
    outputs = {k: v for k, v in outputs.items() if v}
    if args.output:
        from latticelab.sim.output import output_format
        output_format(args.output)
        if args.every < 1:
            raise UsageError(f"--every: must be an integer >= 1 (steps between snapshots); got {args.every}")
        outputs["--output"] = args.output
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        key = os.path.abspath(path)
        if key in seen or (args.record and key == os.path.abspath(args.record)):
            raise UsageError(f"{option}: {path} is also the file of {seen.get(key, '--record')}; give each "
                             "output its own name")
        seen[key] = option
        if option == "--output":
            from latticelab.sim.output import check_target
            check_target(path, overwrite=args.overwrite)
        else:
            check_output(path, overwrite=args.overwrite)
    if args.record:
        from latticelab.sim.recording import check_target
        check_target(args.record, overwrite=args.overwrite)
    return outputs


def _progress(total: float, description: str, unit: str, stream, leave: bool = True):
    """A tqdm bar with the time left on a terminal (``leave``: its last state stays on the screen); a bar that
    shows nothing otherwise (pipes, files, CI)."""
    from tqdm import tqdm
    whole = float(total).is_integer()
    counts = "{n_fmt}/{total_fmt}" if whole else "{n:.4g}/{total:.4g}"
    return tqdm(total=int(total) if whole else float(total), desc=description, unit=unit, file=stream,
                disable=not (hasattr(stream, "isatty") and stream.isatty()), leave=leave, dynamic_ncols=True,
                bar_format="{l_bar}{bar}| " + counts + " {unit} [{elapsed}<{remaining}]")


def run_model(args) -> int:
    """``latticelab run <model>`` (see ``run_steps``); with ``--distributed``, in every process of the MPI job,
    rank 0 writing and printing (app/distributed_run.py)."""
    from latticelab.app import distributed_run
    from latticelab.sim.params import ParameterError
    try:
        job = distributed_run.join(args, UsageError)
        with distributed_run.quiet_unless_root(job):
            return run_steps(args, job)
    except ParameterError as exc:
        if exc.parameter == "distributed":      # the option, as typed
            raise UsageError(f"--{exc}") from None
        raise


def _build_model(cls, args, given: dict, devices):
    """The model of a run: made from the parameters given, or continuing ``--load-state``'s file."""
    from latticelab.sim.params import ParameterError
    if args.load_state:
        from latticelab.sim.state import StateError, load_state
        if given:
            raise UsageError(f"{option_name(next(iter(given)))}: the parameters come from the --load-state file; "
                             "leave it out")
        inputs = [o.name for o in cls.run_options if not o.output and getattr(args, o.name)]
        if inputs:
            raise UsageError(f"{option_name(inputs[0])}: the run continues the --load-state file; leave it out")
        try:
            model = load_state(args.load_state, backend=args.backend, devices=devices)
        except (StateError, OSError) as exc:
            raise UsageError(f"--load-state: {exc}") from None
        if model.name != cls.name:
            raise UsageError(f"--load-state: {args.load_state} holds a {model.name} model; continue it with "
                             f"latticelab run {model.name}")
        return model
    try:
        return cls.create(backend=args.backend, devices=devices, **given)
    except ParameterError as exc:
        if exc.parameter in given or exc.parameter not in cls.Params.model_fields or not given:
            raise
        chosen = " ".join(f"{option_name(k)} {v!r}" for k, v in given.items())
        what = str(exc).removeprefix(exc.parameter + ": ")
        raise ParameterError(exc.parameter, f"{what} ({option_name(exc.parameter)} was not given: its default "
                                            f"does not go with {chosen})") from None


def run_steps(args, job=None) -> int:
    """``latticelab run <model>``: steps a model headless and prints (or writes as CSV) its observables.

    The run records ``--steps`` steps or until the model's time reaches ``--until``, after ``--equilibrate``
    steps. The model's own options (``Model.run_options``: input files, extra outputs) act through its
    ``RunHooks``; ``--record`` makes a movie of the recorded steps (sim/recording.py). The CSV rows are
    streamed to a temporary file beside ``--csv`` as they come (memory does not grow with the run) and moved to
    its name when the run ends; interrupted (SIGINT, SIGTERM) after some recorded steps, the finished rows are
    moved there all the same, and the message says how many. The other outputs are written atomically when the
    run is complete, so an interrupted run leaves the old files (or none); the output paths are checked before
    the run starts. On a terminal a progress bar shows the time left. ``job``: the MPI job of a --distributed
    run, whose rank 0 alone writes the files (the others compute the same and discard it)."""
    import signal

    from latticelab.app.distributed_run import Discarded
    from latticelab.sim import export
    from latticelab.sim.io import AtomicFile, open_atomic
    from latticelab.sim.model import check_finite
    from latticelab.sim.models import get_model
    from latticelab.sim.output import record_step
    from latticelab.sim.params import ParameterError, derived_values

    cls = get_model(args.model)
    steps, until = _run_length(args)
    if args.record:
        check_record_options(args)
    outputs = _check_outputs(args, cls)
    given = given_parameters(args, cls.Params)
    root = job is None or job.root
    model = _build_model(cls, args, given, job.devices if job is not None else args.devices)
    hooks = cls.run_hooks({o.name: getattr(args, o.name) for o in cls.run_options})
    try:
        hooks.start(model)
    except ParameterError as exc:         # the model's own inputs (a file): name the option
        raise UsageError(f"{option_name(exc.parameter)}: {str(exc).removeprefix(exc.parameter + ': ')}") from None
    recorder = _recorder(args)
    output = None
    names = [o.name for o in cls.declared_observables]
    time_column = export.time_column(cls)
    table = None
    if args.csv:
        table = AtomicFile(args.csv, overwrite=args.overwrite, binary=False) if root else Discarded()
    writer, rows = None, 0
    phase, done, bar = "equilibration", 0, None
    elapsed = 0.0
    try:
        if table is not None:
            writer = csv.DictWriter(table.file, fieldnames=[time_column, *names])
            writer.writeheader()
        with _interruptible() as signals:
            summary = " ".join(f"{k}={v}" for k, v in model.params.model_dump().items())
            split = (f", split over {job.size} MPI processes (halos by {job.transport})"
                     if job is not None and job.size > 1 else "")
            print(f"latticelab: {cls.title} {summary} on {model.backend_name} [{model.device_name}]{split}",
                  file=sys.stderr)
            derived = {} if args.load_state else derived_values(model.params, given_parameters(args, cls.Params))
            if derived:
                print("latticelab: not given, so derived from the other parameters: "
                      + ", ".join(f"{option_name(k)} {v!r} (default {cls.Params.model_fields[k].default!r})"
                                  for k, v in derived.items()), file=sys.stderr)
            if args.equilibrate:
                bar = _progress(args.equilibrate, "equilibrating", "steps", sys.stderr, leave=False)
            for done in range(1, args.equilibrate + 1):
                hooks.before_step(model)
                hooks.step(model)
                bar.update(1)
            if bar is not None:
                bar.close()
            phase, done = "recording", 0
            if until is None:
                bar = _progress(steps, "recording", "steps", sys.stderr)
            else:
                bar = _progress(max(until - model.time, 0.0), "recording", cls.time_label, sys.stderr)
            _record_frame(recorder, model)
            output = _open_output(args, model)
            if output is not None:
                output.snapshot(model)
            start = time.perf_counter()
            clock_start = model.time
            while (done < steps) if until is None else (model.time < until):
                hooks.before_step(model)
                before = model.time
                hooks.step(model, until)
                hooks.after_step(model)
                if until is not None and done and done % CHECK_EVERY == 0:
                    clock_start = _check_time_left(model, until, clock_start, cls.time_label)
                values = model.observables() if writer or done % CHECK_EVERY == 0 else None
                if values is not None:
                    check_finite(model, values)     # a diverged run ends with one line, not rows of NaN
                with signals.held():        # the step is counted with its row
                    done += 1
                    if writer:
                        writer.writerow({time_column: model.time, **values})
                        rows += 1
                _record_frame(recorder, model)
                if output is not None:
                    record_step(output, model)
                bar.update(1 if until is None else min(model.time, until) - before)
            elapsed = time.perf_counter() - start
            bar.close()
            check_finite(model, model.observables())
            phase = "writing"
            if table is not None:
                table, finished = None, table
                finished.commit()
            for option, write in hooks.outputs(model).items():
                with (open_atomic(getattr(args, option), overwrite=args.overwrite, binary=False) if root
                      else open(os.devnull, "w")) as f:
                    write(f)
                print(f"latticelab: wrote {getattr(args, option)}", file=sys.stderr)
            if args.save_state:
                _save_state(args, model, root)
            if recorder is not None:
                result, recorder = recorder.close(), None
                print(f"latticelab: {result.describe()}", file=sys.stderr)
            if output is not None:
                output.close()
                print(f"latticelab: {output.describe()}", file=sys.stderr)
                output = None
    except Interrupted as exc:
        if bar is not None:
            bar.close()
        if recorder is not None:
            recorder.abort()
        kept_rows = rows > 0          # written below, or already in the writing phase
        if table is not None:
            table, unfinished = None, table
            if kept_rows:
                unfinished.commit()     # the rows of the finished steps: what the run got to
            else:
                unfinished.discard()
        if output is not None:             # what it holds up to here stays readable (and appendable)
            output.close()
            outputs.pop("--output", None)
            print(f"latticelab: {output.describe()} up to step {model.step_count}", file=sys.stderr)
        total = args.equilibrate if phase == "equilibration" else (steps if until is None else None)
        completed = done - 1 if done and phase == "equilibration" else done    # the loop's step was cut short
        how_far = (f" of {total} steps" if total is not None
                   else f" steps ({cls.time_label} {model.time:g} of {until:g})")
        where = (f"while writing {', '.join(outputs.values())}" if phase == "writing"
                 else f"during {phase} after {completed}{how_far}")
        kept = "".join(f"; the {rows} finished rows were written to {path}" if kept_rows and option == "--csv"
                       else f"; {path} was left as it was" if os.path.exists(path) else f"; {path} was not written"
                       for option, path in outputs.items())
        if args.record:
            kept += f"; the recording {args.record} was not kept"
        print(f"latticelab: interrupted ({signal.Signals(exc.signum).name}) {where}{kept}", file=sys.stderr)
        return 128 + exc.signum
    except BaseException:
        if recorder is not None:
            recorder.abort()
        if table is not None:
            table.discard()
        if output is not None:
            output.abort()
        raise
    for note in hooks.notes():
        print(f"latticelab: {note}", file=sys.stderr)
    obs = model.observables()
    clock = f" ({cls.time_label} {model.time:g})" if until is not None else ""
    print(f"step {model.step_count}{clock}: " + "  ".join(f"{k} {v:.6f}" for k, v in obs.items())
          + f"  ({done / max(elapsed, 1e-9):.1f} steps/s)")
    return 0


def _save_state(args, model, root: bool) -> None:
    """--save-state: the model's state (gathered in every process of a distributed run), written by rank 0."""
    import numpy as np

    from latticelab.sim.io import write_atomic
    from latticelab.sim.state import state_of
    state = state_of(model)
    if root:
        write_atomic(args.save_state, lambda f: np.savez_compressed(f, **state), args.overwrite)
    print(f"latticelab: saved the state in {args.save_state}", file=sys.stderr)


def _check_time_left(model, until: float, since: float, time_label: str) -> float:
    """After CHECK_EVERY more steps of an --until run: UsageError when, at the pace of those steps, the time left
    would take more than MAX_RUN_STEPS steps (a time step too small to get anywhere: the run would never end).
    Returns the time to measure the next pace from."""
    pace = (model.time - since) / CHECK_EVERY
    left = until - model.time
    if left > 0 and not (pace > 0 and left / pace <= MAX_RUN_STEPS):
        steps = f"{left / pace:.3g} more steps" if pace > 0 else "steps without end (the time does not advance)"
        raise UsageError(f"--until: reaching {time_label} {until:g} at {pace:.3g} a step would take {steps}; "
                         f"at most {MAX_RUN_STEPS:.0e} are run: choose a larger time step or a smaller --until")
    return model.time


def _recorder(args):
    """The movie recorder of ``--record`` (None without it); its notes (an encoder fallback) on stderr."""
    if not args.record:
        return None
    from latticelab.sim.recording import FrameRecorder
    check_record_options(args)
    recorder = FrameRecorder(args.record, fps=args.fps, every=args.record_every, overwrite=args.overwrite,
                             keep_every_frame=True)     # a run waits for its encoder: every frame asked for
    for note in recorder.notes:
        print(f"latticelab: {note}", file=sys.stderr)
    return recorder


def _record_frame(recorder, model) -> None:
    """Add the model's picture at one pixel per cell when a frame is due (the writer thread encodes it)."""
    if recorder is not None and recorder.due(model.step_count):
        from latticelab.sim.recording import cells_image
        recorder.add(cells_image(model.picture().colours()), model.step_count)


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


def _refuse_empty_values(args) -> None:
    """An option given an empty value (``--csv ""``, ``--initial ""``) is a mistake, not a wish to leave it out:
    UsageError naming it (argparse keeps "" as it is, and a test of truth would then skip the option silently)."""
    for name, value in vars(args).items():
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"{option_name(name)}: an empty value; give one, or leave the option out")


def _end_job(code: int) -> None:
    """After an error in a --distributed run, end all its processes (the others would wait for this one)."""
    mpi = sys.modules.get("latticelab.sim.multidevice.mpi")       # imported only by a --distributed run
    job = mpi.current_job() if mpi is not None else None
    if job is not None:
        job.abort(code)


def main(argv: list[str] | None = None, extra_commands=()) -> int:
    """Run the command line; ``extra_commands`` are functions (subparsers, parser_class) that add commands
    whose parsers set a ``handler(args)`` default."""
    from latticelab.sim.backend import BackendError
    from latticelab.sim.params import ParameterError
    from latticelab.sim.io import OutputError, OutputExists
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
        _refuse_empty_values(args)
        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        if args.command in (None, "gui"):
            explicit = args.command == "gui"
            if not explicit:
                args = parser.parse_args(["gui", *argv])
                args.verbose = verbose
            return run_gui(args, explicit=explicit)
        return _with_numpy_warnings_held(args.handler, args)
    except (UsageError, ParameterError, BackendError, OutputError) as exc:
        message = str(exc)
        if isinstance(exc, OutputExists) and getattr(args, "overwrite", None) is False:
            message = message.replace("allow overwriting", "give --overwrite to replace it")   # name the option
        print(f"latticelab: error: {message}", file=sys.stderr)
        _end_job(2)
        return 2
    except KeyboardInterrupt:
        print("latticelab: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("latticelab: error: out of memory; choose a smaller model (see 'latticelab run <model> --help')",
              file=sys.stderr)
        _end_job(2)
        return 2
    except Exception as exc:     # a bug: one line (the traceback with -v), never a wall of text
        if verbose:
            import traceback
            traceback.print_exc(file=sys.stderr)
        print(f"latticelab: internal error: {type(exc).__name__}: {exc} (a bug; -v shows where, please report it)",
              file=sys.stderr)
        _end_job(1)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
