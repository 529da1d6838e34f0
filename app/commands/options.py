"""What the commands share: the parser that ends a mistake with one line (``UsageError``, exit 2), and the
options made from the models' parameter schemas (sim/params.py), so that ``latticelab run <model>`` and
``latticelab gui`` always list exactly what a model accepts, with its help text, unit and limits."""
from __future__ import annotations

import argparse
import math

from latticelab.sim.params import allowed_text

BACKENDS = ("auto", "cuda", "numpy")


class UsageError(Exception):
    """A mistake on the command line: ``latticelab: error: <message>``, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        raise UsageError(message)


def option_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def typed(kind: type):
    """argparse type: ints and floats parsed as such (a wrong one named in one line), everything else kept as
    text."""
    if kind not in (int, float):
        return str
    what = "an integer" if kind is int else "a number"

    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}; got {text!r}") from None
    return parse


def add_backend_option(parser) -> None:
    parser.add_argument("--backend", default="auto", choices=BACKENDS, help="auto (CUDA when usable), cuda or numpy")


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
            group.add_argument(option_name(name), dest=name, type=typed(info["type"]), default=None,
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
    group.add_argument("--record-every", type=typed(int), default=1, metavar="N",
                       help="one frame every N steps (default 1)")
    group.add_argument("--fps", type=typed(float), default=25.0, metavar="F",
                       help="frames per second of the movie (default 25)")


def check_record_options(args) -> None:
    """--record-every and --fps in range (UsageError naming the option), before anything starts."""
    if args.record_every < 1:
        raise UsageError(f"--record-every: must be an integer >= 1 (steps between frames); got {args.record_every}")
    if not (math.isfinite(args.fps) and 0.1 <= args.fps <= 1000):
        raise UsageError(f"--fps: must be a number of frames per second in [0.1, 1000]; got {args.fps!r}")


def refuse_empty_values(args) -> None:
    """An option given an empty value (``--csv ""``, ``--initial ""``) is a mistake, not a wish to leave it out:
    UsageError naming it (argparse keeps "" as it is, and a test of truth would then skip the option silently)."""
    for name, value in vars(args).items():
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"{option_name(name)}: an empty value; give one, or leave the option out")
