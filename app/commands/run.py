"""``latticelab run <model>``: a model stepped headless, its observables printed or written as CSV.

The run records ``--steps`` steps or until the model's time reaches ``--until``, after ``--equilibrate`` steps
(the loop: sim/headless.py). The model's own options (``Model.run_options``: input files, extra outputs) act
through its ``RunHooks``; ``--record`` makes a movie of the recorded steps (sim/recording.py), ``--output`` a
store of its fields (sim/output), ``--save-state`` a state file to continue with ``--load-state``. Every output
path is checked before the run starts. With ``--distributed`` every process of an MPI job runs the command, rank
0 writing and printing (app/commands/distributed.py).
"""
from __future__ import annotations

import argparse
import math
import os
import sys

from latticelab.app.commands.options import (UsageError, add_backend_option, add_parameter_options,
                                             add_record_options, check_record_options, given_parameters,
                                             option_name, typed)

DEFAULT_STEPS = 100


def add_command(sub, parser_class) -> None:
    """``run`` and one subcommand per registered model, its options made from the model's schema."""
    from latticelab.sim.models import all_models

    run = sub.add_parser("run", help="headless simulation, observables per step to CSV")
    run_models = run.add_subparsers(dest="model", parser_class=parser_class, required=True)
    for name, cls in all_models().items():
        p = run_models.add_parser(name, help=cls.title)
        add_parameter_options(p, [cls.Params], f"{cls.title} (default: the model's defaults)")
        g = p.add_argument_group("running")
        add_backend_option(g)
        g.add_argument("--devices", default=None, metavar="IDS", help=devices_help(cls))
        g.add_argument("--distributed", action="store_true",
                       help="split the run over the processes of an MPI job, one per GPU (or NumPy slab): start it "
                            "with mpirun -n N; rank 0 writes the outputs (docs/multigpu.md)"
                            + ("" if cls.splits_across_devices else "; this model runs in one process only"))
        g.add_argument("--steps", type=int, default=None, help=f"number of steps to record (default {DEFAULT_STEPS})")
        g.add_argument("--until", type=typed(float), default=None, metavar="T",
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


def parse(argv: list[str], parser_class=argparse.ArgumentParser) -> argparse.Namespace:
    """The arguments of ``latticelab run ARGV...`` (``ARGV`` without the word ``run``)."""
    parser = parser_class(prog="latticelab")
    add_command(parser.add_subparsers(dest="command", parser_class=parser_class), parser_class)
    return parser.parse_args(["run", *argv])


def devices_help(cls) -> str:
    """The help of ``--devices`` for one model: what it splits, or that it runs on one device."""
    if not cls.splits_across_devices:
        return "the GPUs to split one run over: this model runs on one device only"
    return ("the GPUs to split one run over, 'all' or ids like 0,1 (default: one device); "
            + (cls.devices_note or "slabs with halos, the same result as on one device"))


def add_output_options(group) -> None:
    """--output and --every: fields and observables in a format other tools read (sim/output)."""
    from latticelab.sim.output import known_suffixes
    group.add_argument("--output", metavar="PATH", default=None,
                       help=f"write fields and observables; the format follows the suffix: {known_suffixes()} "
                            "(docs/output.md)")
    group.add_argument("--every", type=typed(int), default=1, metavar="N",
                       help="with --output: a snapshot of the fields every N steps (default 1)")


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


def run_length(args) -> tuple[int | None, float | None]:
    """(steps, until): exactly one of them, checked."""
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


def check_outputs(args, cls) -> dict[str, str]:
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


def say(text: str) -> None:
    print(f"latticelab: {text}", file=sys.stderr)


def run_model(args) -> int:
    """The handler of ``latticelab run <model>`` (see ``run_steps``); with ``--distributed``, in every process of
    the MPI job, rank 0 writing and printing (app/commands/distributed.py). Returns the exit status."""
    from latticelab.app.commands import distributed
    from latticelab.sim.params import ParameterError
    try:
        job = distributed.join(args, UsageError)
        with distributed.quiet_unless_root(job):
            return run_steps(args, job)
    except ParameterError as exc:
        if exc.parameter == "distributed":      # the option, as typed
            raise UsageError(f"--{exc}") from None
        raise


def build_model(cls, args, given: dict, devices):
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
    """The arguments checked, the model built (or loaded) and started, the run (sim/headless.py), the last
    observables with the pace on stdout. ``job``: the MPI job of a --distributed run, whose rank 0 alone writes
    the files (the others compute the same and discard it). Returns the exit status."""
    from latticelab.sim.headless import RunPlan, RunTooLong, run_headless
    from latticelab.sim.models import get_model
    from latticelab.sim.params import ParameterError, derived_values

    cls = get_model(args.model)
    steps, until = run_length(args)
    if args.record:
        check_record_options(args)
    outputs = check_outputs(args, cls)
    given = given_parameters(args, cls.Params)
    model = build_model(cls, args, given, job.devices if job is not None else args.devices)
    hooks = cls.run_hooks({o.name: getattr(args, o.name) for o in cls.run_options})
    try:
        hooks.start(model)
    except ParameterError as exc:         # the model's own inputs (a file): name the option
        raise UsageError(f"{option_name(exc.parameter)}: {str(exc).removeprefix(exc.parameter + ': ')}") from None
    movie = recorder(args)
    summary = " ".join(f"{k}={v}" for k, v in model.params.model_dump().items())
    split = (f", split over {job.size} MPI processes (halos by {job.transport})"
             if job is not None and job.size > 1 else "")
    announce = [f"{cls.title} {summary} on {model.backend_name} [{model.device_name}]{split}"]
    derived = {} if args.load_state else derived_values(model.params, given)
    if derived:
        announce.append("not given, so derived from the other parameters: "
                        + ", ".join(f"{option_name(k)} {v!r} (default {cls.Params.model_fields[k].default!r})"
                                    for k, v in derived.items()))
    plan = RunPlan(equilibrate=args.equilibrate, steps=steps, until=until, csv=args.csv, overwrite=args.overwrite,
                   files={o.name: getattr(args, o.name) for o in cls.run_options},
                   outputs=outputs, open_output=lambda model: open_output(args, model),
                   recorder=movie, record=args.record, save_state=args.save_state,
                   writes=job is None or job.root, announce=tuple(announce))
    try:
        result = run_headless(model, hooks, plan, say)
    except RunTooLong as exc:
        raise UsageError(f"--until: {exc} or a smaller --until") from None
    if result.signum is not None:
        return 128 + result.signum
    for note in hooks.notes():
        say(note)
    obs = model.observables()
    clock = f" ({cls.time_label} {model.time:g})" if until is not None else ""
    print(f"step {model.step_count}{clock}: " + "  ".join(f"{k} {v:.6f}" for k, v in obs.items())
          + f"  ({result.done / max(result.elapsed, 1e-9):.1f} steps/s)")
    return 0


def open_output(args, model):
    """The writer of --output (None without it)."""
    if not args.output:
        return None
    from latticelab.sim.output import open_output
    inputs = {o.name: getattr(args, o.name) for o in type(model).run_options if not o.output and getattr(args, o.name)}
    return open_output(args.output, model, every=args.every, overwrite=args.overwrite, inputs=inputs)


def recorder(args):
    """The movie recorder of ``--record`` (None without it); its notes (an encoder fallback) on stderr."""
    if not args.record:
        return None
    from latticelab.sim.recording import FrameRecorder
    check_record_options(args)
    made = FrameRecorder(args.record, fps=args.fps, every=args.record_every, overwrite=args.overwrite,
                         keep_every_frame=True)     # a run waits for its encoder: every frame asked for
    for note in made.notes:
        say(note)
    return made
