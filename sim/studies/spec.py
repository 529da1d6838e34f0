"""Study files: a grid of model parameters and how to measure at each point, read from TOML and validated
against the model's own schema and study capability (capability.py) before anything runs.

```toml
model = "ising"                 # any registered model that declares the study capability

[parameters]                    # fixed parameters (fields of the model's schema)
dim = 2
algorithm = "swendsen-wang"

[grid]                          # every combination is one point: a list, {start, stop, num} (linear) or
L = [8, 16, 32]                 # {start, stop, num, scale = "log"}
T = {start = 2.20, stop = 2.34, num = 8}

[[schedule]]                    # changes of live parameters at model times within each point (optional)
at = 400
T = 2.3

[ramp]                          # optional: up (and back down) through values of one live parameter in one
parameter = "T"                 # continuing run, a row per stage tagged branch = up / down
values = [2.2, 2.3, 2.4]
down = true
settle = 100                    # model time at each new value before its window (default: equilibrate)

[run]                           # times in the model's own units (sweeps, ms, simulated time)
equilibrate = 500               # before the first sample
decorrelate = 1                 # between samples
measurements = 2000             # samples per window
repeats = 4                     # seeds 1..4 (or grid.seed)
backend = "auto"                # auto, cuda or numpy
blocks = 32                     # blocks for the errors (at most measurements)
measures = ["energy", "binder"] # default: every measure the model has

[quick.run]                     # `sweep --quick`: these keys replace the file's own
measurements = 200
```

Every bad value is reported with its key and the line it is on (``StudyError``, all problems at once). The
number of points is counted from the grid before any is built (at most MAX_POINTS).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pydantic
from pydantic import ConfigDict, Field

from latticelab.sim.params import ParameterError

MAX_POINTS = 100_000        # points (simulations) of one study, counted before any is built
MAX_STAGES = 10_000


class StudyError(ParameterError):
    """A study file is wrong; ``problems`` lists (key, line or None, message); ``str()`` names them all."""

    def __init__(self, path, problems: list[tuple[str, int | None, str]]):
        self.path = str(path)
        self.problems = problems
        ValueError.__init__(self, self._text())
        self.parameter = problems[0][0] if problems else "study"

    def _text(self) -> str:
        lines = [f"{self.path}: {key}{f' (line {line})' if line else ''}: {message}"
                 for key, line, message in self.problems]
        return "\n".join(lines) if len(lines) < 2 else f"{len(lines)} problems in the study file:\n" + "\n".join(lines)

    def __str__(self) -> str:
        return self._text()


class Range(pydantic.BaseModel):
    """{start, stop, num}: ``num`` evenly spaced values from start to stop (both included); with
    ``scale = "log"`` evenly spaced in the logarithm (start and stop > 0)."""
    model_config = ConfigDict(extra="forbid", strict=True)
    start: float
    stop: float
    num: int = Field(ge=1, le=MAX_POINTS)
    scale: Literal["linear", "log"] = "linear"

    def values(self) -> list[float]:
        if self.scale == "log":
            if self.start <= 0 or self.stop <= 0:
                raise ValueError("a log range needs start > 0 and stop > 0")
            return [float(f"{v:.12g}") for v in np.geomspace(self.start, self.stop, self.num)]
        return [float(round(v, 12)) for v in np.linspace(self.start, self.stop, self.num)]


Number = int | float


class RunSettings(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    equilibrate: Number = Field(ge=0, description="model time (its own units) before the first sample")
    decorrelate: Number = Field(gt=0, description="model time between two samples")
    measurements: int = Field(ge=2, le=10_000_000, description="samples per measurement window")
    backend: Literal["auto", "cuda", "numpy"] = "auto"
    blocks: int | None = Field(None, ge=2, description="blocks for the errors (at most measurements; default: 32, "
                                                        "fewer for short windows)")
    measures: list[str] | None = None
    quantities: list[str] | None = None          # the earlier name of ``measures``
    repeats: int | None = Field(None, ge=1, le=10_000, description="seeds 1..repeats (instead of grid.seed)")


class RampSettings(pydantic.BaseModel):
    """Up (and back down) through ``values`` of one live parameter in one continuing run: a row per stage."""
    model_config = ConfigDict(extra="forbid", strict=True)
    parameter: str
    values: list[Any] | Range
    down: bool = True
    settle: Number | None = Field(None, ge=0, description="model time at each new value before its window")


class StudyFile(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    model: str
    parameters: dict[str, Any] = {}
    grid: dict[str, list[Any] | Range] = {}
    run: RunSettings
    schedule: list[dict[str, Any]] = []
    ramp: RampSettings | None = None
    quick: dict[str, Any] | None = None


@dataclass(frozen=True)
class Point:
    """One task of a sweep: a model, all its parameters (validated), and how to measure. Picklable, so it
    can travel to a Dask worker; ``key`` identifies it in the results table (resume). With a ramp it gives
    one row per stage (``stages``: (branch, value) pairs), keyed ``<key>-<stage>``."""
    model: str
    params: tuple[tuple[str, Any], ...]
    equilibrate: float
    decorrelate: float
    measurements: int
    blocks: int = 32
    backend: str = "auto"
    quantities: tuple[str, ...] = ()              # the measures recorded
    schedule: tuple[tuple[float, tuple[tuple[str, Any], ...]], ...] = ()
    ramp_parameter: str | None = None
    stages: tuple[tuple[str, Any], ...] = ()
    settle: float | None = None

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def protocol(self) -> dict:
        """How a point is measured, apart from its parameters: rows of one table share it."""
        out = {"equilibrate": self.equilibrate, "decorrelate": self.decorrelate,
               "measurements": self.measurements, "blocks": self.blocks}
        if self.schedule:
            out["schedule"] = [[at, dict(values)] for at, values in self.schedule]
        if self.ramp_parameter:
            out["ramp"] = {"parameter": self.ramp_parameter, "stages": [list(s) for s in self.stages],
                           "settle": self.settle}
        return out

    @property
    def key(self) -> str:
        """Stable id of what is measured (not of where: the backend is left out)."""
        text = json.dumps([self.model, sorted(self.params), self.equilibrate, self.decorrelate,
                           self.measurements, self.blocks, self.protocol], sort_keys=True, default=str)
        return hashlib.sha1(text.encode()).hexdigest()[:16]

    @property
    def row_keys(self) -> tuple[str, ...]:
        if not self.stages:
            return (self.key,)
        return tuple(f"{self.key}-{i}" for i in range(len(self.stages)))


@dataclass
class Study:
    path: str
    model: str
    points: list[Point]
    quantities: tuple[str, ...]
    unavailable: dict[str, str] = field(default_factory=dict)
    grid_keys: tuple[str, ...] = ()
    ramp: str | None = None

    @property
    def measures(self) -> tuple[str, ...]:
        return self.quantities


_BOUNDS = {"greater_than": (">", "gt"), "greater_than_equal": (">=", "ge"), "less_than": ("<", "lt"),
           "less_than_equal": ("<=", "le")}


# ---- where a key is in the file -------------------------------------------------------------------------
_HEADER = re.compile(r"^\s*\[\s*([^\]\s]+)\s*\]")
_KEY = re.compile(r"^\s*\"?([A-Za-z0-9_\-]+)\"?\s*=")


def key_line(text: str, path: tuple[str, ...]) -> int | None:
    """1-based line of the key ``path`` (section..., key) in TOML ``text``, or of its nearest parent."""
    path = tuple(str(p) for p in path)
    lines = text.splitlines()
    for depth in range(len(path), 0, -1):
        section, key = ".".join(path[:depth - 1]), path[depth - 1]
        current = ""
        for number, line in enumerate(lines, 1):
            header = _HEADER.match(line)
            if header:
                current = header.group(1)
                if current == ".".join(path[:depth]):
                    return number
                continue
            match = _KEY.match(line)
            if match and current == section and match.group(1) == key:
                return number
    return None


_UNION_TAGS = ("list[any]", "Range", "int", "float", "RampSettings")


def _pydantic_problems(exc: pydantic.ValidationError, text: str) -> list[tuple[str, int | None, str]]:
    problems, done = [], set()
    errors = exc.errors(include_url=False)
    for error in errors:
        raw_loc = tuple(str(p) for p in error["loc"])
        union = next((p for p in raw_loc if p in ("list[any]", "Range")), None)
        loc = tuple(p for p in raw_loc if p not in _UNION_TAGS)
        kind = error["type"]
        if union and len(loc) >= 2 and (loc[0] == "grid" or loc[:2] == ("ramp", "values")):
            name = ".".join(loc[:2])
            inside_range = union == "Range" and len(loc) > 2 and kind != "model_type"
            if not inside_range:
                # a value that fits neither form: one message, unless its range part is what is wrong
                if any(tuple(map(str, e["loc"][:3])) == (*loc[:2], "Range") and len(e["loc"]) > 3
                       and e["type"] != "model_type" for e in errors) or name in done:
                    continue
                done.add(name)
                problems.append((name, key_line(text, loc[:2]),
                                 f"must be a list of values or {{start, stop, num}}; got {error.get('input')!r}"))
                continue
        if kind == "extra_forbidden":
            allowed = {(): "model, parameters, grid, run, schedule, ramp, quick",
                       ("run",): ", ".join(RunSettings.model_fields), ("ramp",): ", ".join(RampSettings.model_fields)}
            message = f"unknown key; allowed: {allowed.get(loc[:-1], 'start, stop, num, scale')}"
        elif kind == "missing":
            message = "is required"
        elif kind in _BOUNDS:
            bound = (error.get("ctx") or {}).get(_BOUNDS[kind][1])
            message = f"must be {_BOUNDS[kind][0]} {bound}; got {error.get('input')!r}"
        elif kind in ("int_type", "int_parsing", "int_from_float"):
            message = f"must be an integer; got {error.get('input')!r}"
        elif kind in ("float_type", "float_parsing"):
            message = f"must be a number; got {error.get('input')!r}"
        else:
            message = f"{error['msg'][:1].lower()}{error['msg'][1:]}; got {error.get('input')!r}"
        key = ".".join(loc) or "study"
        if (key, message) in done or (key in done and kind in ("int_type", "float_type")):
            continue
        done.add((key, message))
        done.add(key)
        problems.append((key, key_line(text, loc), message))
    return problems


# ---- writing ---------------------------------------------------------------------------------------------
def toml_value(value) -> str:
    """A TOML literal for the values a study holds: text, booleans, numbers, lists and {start, stop, num}."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} cannot be written to a study file")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)          # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"{value!r} ({type(value).__name__}) cannot be written to a study file")


def study_text(model: str, parameters: dict, grid: dict, run: dict, ramp: dict | None = None) -> str:
    """The study file (TOML) for these sections; ``parse_study`` reads it back (the Study dock's form)."""
    lines = [f"model = {toml_value(model)}", "", "[parameters]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in parameters.items()]
    lines += ["", "[grid]"] + [f"{k} = {toml_value(v)}" for k, v in grid.items()]
    if ramp:
        lines += ["", "[ramp]"] + [f"{k} = {toml_value(v)}" for k, v in ramp.items()]
    lines += ["", "[run]"] + [f"{k} = {toml_value(v)}" for k, v in run.items() if v is not None]
    return "\n".join(lines) + "\n"


# ---- loading ---------------------------------------------------------------------------------------------
def load_study(path, quick: bool = False) -> Study:
    """Read and validate a study file; raise StudyError listing every problem (nothing runs on a bad file).
    ``quick``: with the file's [quick] tables merged over its own (fewer points, shorter runs)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StudyError(path, [("study", None, f"cannot be read: {exc.strerror or exc}")]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise StudyError(path, [("study", line, f"is not UTF-8 text (byte {exc.start}); a study file is TOML "
                                                "in UTF-8")]) from None
    return parse_study(text, str(path), quick=quick)


def _merge_quick(raw: dict, text: str, problems: list) -> dict:
    """The file's sections with its [quick] tables merged over them (key by key, one level deep)."""
    quick = raw.pop("quick", None)
    if quick is None:
        problems.append(("quick", None, "the study file has no [quick] section; add [quick.grid] / [quick.run] "
                                        "tables with the values of a quick run"))
        return raw
    for section, values in quick.items():
        if section not in ("parameters", "grid", "run", "ramp") or not isinstance(values, dict):
            problems.append((f"quick.{section}", key_line(text, ("quick", section)),
                             "must be a table: one of quick.parameters, quick.grid, quick.run, quick.ramp"))
            continue
        merged = dict(raw.get(section) or {})
        merged.update(values)
        raw[section] = merged
    return raw


def count_points(grid: dict, repeats: int | None) -> int:
    """How many points a grid gives, from the lengths of its values (nothing is built)."""
    n = 1
    for value in grid.values():
        n *= value.num if isinstance(value, Range) else len(value)
    return n * (repeats or 1)


def parse_study(text: str, path: str = "<study>", quick: bool = False) -> Study:
    from latticelab.sim.models import get_model, model_names
    from latticelab.sim.studies.capability import all_measures, capability, unavailable_measures

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+)", str(exc))
        line = getattr(exc, "lineno", None) or (int(found.group(1)) if found else None)
        raise StudyError(path, [("study", line, f"not valid TOML: {exc}")]) from None
    problems: list[tuple[str, int | None, str]] = []
    if quick:
        raw = _merge_quick(raw, text, problems)
    try:
        spec = StudyFile.model_validate(raw)
    except pydantic.ValidationError as exc:
        problems += _pydantic_problems(exc, text)
        spec = _repaired(raw, exc)            # the file's other sections are still checked below
        if spec is None:
            raise StudyError(path, problems) from None

    if spec.model not in model_names():
        raise StudyError(path, [("model", key_line(text, ("model",)),
                                 f"must be one of {', '.join(model_names())}; got {spec.model!r}")])
    cls = get_model(spec.model)
    if capability(cls) is None:
        raise StudyError(path, [("model", key_line(text, ("model",)),
                                 f"model {spec.model!r} declares no study capability (no measures); models with "
                                 "one: " + ", ".join(n for n in model_names() if capability(get_model(n))))])
    schema = cls.Params
    fields = tuple(schema.model_fields)
    live = set(schema.names("live"))
    run = spec.run

    def where(*keys):
        return key_line(text, keys)

    for section, names in (("parameters", spec.parameters), ("grid", spec.grid)):
        for name in names:
            if name not in schema.model_fields:
                problems.append((f"{section}.{name}", where(section, name),
                                 f"is not a parameter of {spec.model}; allowed: {', '.join(fields)}"))
    for name in sorted(set(spec.parameters) & set(spec.grid)):
        problems.append((f"grid.{name}", where("grid", name), "is also given in [parameters]"))
    if run.blocks is None:
        from latticelab.sim.analysis.critical import n_blocks_for
        run = run.model_copy(update={"blocks": n_blocks_for(run.measurements)})
    elif run.blocks > run.measurements:
        problems.append(("run.blocks", where("run", "blocks"),
                         f"must be <= run.measurements ({run.measurements}): each block needs a sample; "
                         f"got {run.blocks}"))
    grid_spec = dict(spec.grid)
    if run.repeats is not None:
        if "seed" in grid_spec or "seed" in spec.parameters:
            problems.append(("run.repeats", where("run", "repeats"), "give either run.repeats or a seed "
                                                                     "(grid.seed or parameters.seed), not both"))
        else:
            grid_spec["seed"] = list(range(1, run.repeats + 1))
    total = count_points(grid_spec, None)
    if total > MAX_POINTS:
        sizes = " x ".join(str(v.num if isinstance(v, Range) else len(v)) for v in grid_spec.values())
        problems.append(("grid", where("grid"), f"gives {total:,} points ({sizes}); at most {MAX_POINTS:,} are "
                                                "allowed: split the study or use fewer values"))
        raise StudyError(path, problems)
    grid = {}
    for name, value in grid_spec.items():
        try:
            grid[name] = value.values() if isinstance(value, Range) else list(value)
        except ValueError as exc:
            problems.append((f"grid.{name}", where("grid", name), str(exc)))
            continue
        if not grid[name]:
            problems.append((f"grid.{name}", where("grid", name), "is an empty list"))

    # measures: what the study asks for against what the model can give
    available = all_measures(cls)
    missing = unavailable_measures(cls)
    asked_key = "run.measures" if run.measures is not None or run.quantities is None else "run.quantities"
    asked = run.measures if run.measures is not None else run.quantities
    if run.measures is not None and run.quantities is not None:
        problems.append(("run.quantities", where("run", "quantities"), "give run.measures only (quantities is "
                                                                       "its earlier name)"))
    if asked is None:
        measures = tuple(m for m in available if m not in missing)
    else:
        measures = tuple(dict.fromkeys(asked))
        for m in measures:
            if m not in available:
                problems.append((asked_key, where("run", asked_key.split(".")[1]),
                                 f"{m!r} is not a measure of {spec.model}; allowed: {', '.join(available)}"))
            elif m in missing:
                problems.append((asked_key, where("run", asked_key.split(".")[1]), f"{m}: {missing[m]}"))

    # the schedule: [[schedule]] tables with `at` (model time) and live parameters
    schedule = []
    for i, entry in enumerate(spec.schedule):
        key = f"schedule[{i + 1}]"
        line = _nth_table_line(text, "schedule", i)
        at = entry.get("at")
        bad_time = isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at) or at < 0
        if bad_time:
            problems.append((f"{key}.at", line, f"must be a model time >= 0 (when the change applies); got {at!r}"))
        values = {k: v for k, v in entry.items() if k != "at"}
        if not values:
            problems.append((key, line, "changes nothing; give at least one live parameter"))
        for name in values:
            if name not in live:
                problems.append((f"{key}.{name}", line, f"is not a live parameter of {spec.model} (one that changes "
                                                        f"on a running model); allowed: {', '.join(sorted(live))}"))
        if not bad_time:
            schedule.append((float(at), tuple(values.items())))
    schedule.sort(key=lambda c: c[0])

    # the ramp: up (and down) through values of one live parameter, one row per stage
    ramp, stages = spec.ramp, ()
    if ramp is not None:
        if ramp.parameter not in live:
            problems.append(("ramp.parameter", where("ramp", "parameter"),
                             f"must be a live parameter of {spec.model}; allowed: {', '.join(sorted(live))}; "
                             f"got {ramp.parameter!r}"))
        elif ramp.parameter in grid or ramp.parameter in spec.parameters:
            problems.append(("ramp.parameter", where("ramp", "parameter"),
                             f"{ramp.parameter} is ramped: leave it out of [grid] and [parameters]"))
        try:
            up = ramp.values.values() if isinstance(ramp.values, Range) else list(ramp.values)
        except ValueError as exc:
            up = []
            problems.append(("ramp.values", where("ramp", "values"), str(exc)))
        if len(up) < 2:
            problems.append(("ramp.values", where("ramp", "values"), "needs at least two values"))
        down = list(reversed(up[:-1])) if ramp.down else []
        stages = tuple([("up", v) for v in up] + [("down", v) for v in down])
        if len(stages) > MAX_STAGES:
            problems.append(("ramp.values", where("ramp", "values"), f"gives {len(stages):,} stages; at most "
                                                                     f"{MAX_STAGES:,}"))
    if problems:
        raise StudyError(path, problems)

    # every point through the model's schema: a bad value names the key it came from
    points, seen_errors = [], set()
    names = list(grid)
    for combo in itertools.product(*(grid[n] for n in names)):
        values = {**spec.parameters, **dict(zip(names, combo))}
        try:
            params = schema.create(gpu=False, **values)
            state = params
            for at, changes in schedule:                       # each change valid with the values before it
                try:
                    state = state.replace(**dict(changes))
                except ParameterError as exc:
                    raise _Located(f"schedule.{exc.parameter}", str(exc).removeprefix(f"{exc.parameter}: ")
                                   + f" (the change at {at:g})") from None
            for branch, value in stages:
                try:
                    state.replace(**{ramp.parameter: value})
                except ParameterError as exc:
                    raise _Located("ramp.values", str(exc)) from None
        except _Located as exc:
            if (exc.key, exc.message) not in seen_errors:
                seen_errors.add((exc.key, exc.message))
                top = exc.key.split(".")[0]
                problems.append((exc.key, where(*exc.key.split(".")[:2]) if top == "ramp" else where(top),
                                 exc.message))
            continue
        except ParameterError as exc:
            section = "grid" if exc.parameter in grid else "parameters" if exc.parameter in spec.parameters else None
            key = f"{section}.{exc.parameter}" if section else exc.parameter
            message = str(exc).removeprefix(f"{exc.parameter}: ")
            if (key, message) not in seen_errors:
                seen_errors.add((key, message))
                at = f" (at {', '.join(f'{n}={v!r}' for n, v in zip(names, combo))})" if section == "grid" \
                    and len(names) > 1 else ""
                problems.append((key, where(section, exc.parameter) if section else None, message + at))
            continue
        points.append(Point(model=spec.model, params=tuple(params.model_dump().items()),
                            equilibrate=run.equilibrate, decorrelate=run.decorrelate,
                            measurements=run.measurements, blocks=run.blocks, backend=run.backend,
                            quantities=measures, schedule=tuple(schedule),
                            ramp_parameter=ramp.parameter if ramp else None, stages=stages,
                            settle=(run.equilibrate if ramp.settle is None else ramp.settle) if ramp else None))
    if problems:
        raise StudyError(path, problems)
    if not points:
        raise StudyError(path, [("grid", where("grid"), "gives no points")])
    keys = [p.key for p in points]
    if len(set(keys)) != len(keys):
        raise StudyError(path, [("grid", where("grid"), "names the same point twice")])
    return Study(path=path, model=spec.model, points=points, quantities=measures, unavailable=dict(missing),
                 grid_keys=tuple(names), ramp=ramp.parameter if ramp else None)


_PLACEHOLDERS = {"equilibrate": 0, "decorrelate": 1, "measurements": 2, "model": ""}


def _repaired(raw: dict, exc: pydantic.ValidationError):
    """The file with each value pydantic refused replaced by a harmless one (or left out), validated, so the
    checks that follow can report the file's other problems too; None when that fails."""
    import copy
    fixed = copy.deepcopy(raw)
    for error in exc.errors(include_url=False):
        loc = [str(p) for p in error["loc"] if str(p) not in _UNION_TAGS]
        if not loc:
            return None
        parent = fixed
        for part in loc[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else None
            if parent is None:
                break
        if len(loc) >= 2 and loc[0] in ("grid", "parameters", "quick"):
            fixed.get(loc[0], {}).pop(loc[1], None)
        elif isinstance(parent, dict) and loc[-1] in _PLACEHOLDERS:
            parent[loc[-1]] = _PLACEHOLDERS[loc[-1]]
        elif isinstance(parent, dict):
            parent.pop(loc[-1], None)
    try:
        return StudyFile.model_validate(fixed)
    except pydantic.ValidationError:
        return None


class _Located(Exception):
    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key, self.message = key, message


def _nth_table_line(text: str, name: str, index: int) -> int | None:
    """Line of the ``index``-th ``[[name]]`` header."""
    header = re.compile(rf"^\s*\[\[\s*{re.escape(name)}\s*\]\]")
    found = [n for n, line in enumerate(text.splitlines(), 1) if header.match(line)]
    return found[index] if index < len(found) else None
