"""Study files: a grid of model parameters and how to measure at each point, read from TOML and validated
against the model's own schema before anything runs.

```toml
model = "ising"                 # any registered model

[parameters]                    # fixed parameters (fields of the model's schema)
dim = 2
algorithm = "swendsen-wang"

[grid]                          # every combination is one point; a list, or {start, stop, num} (linspace)
L = [8, 16, 32]
p = [0.0]
T = {start = 2.20, stop = 2.34, num = 8}
seed = [1, 2, 3, 4]

[run]
equilibrate = 500               # steps before the first measurement
decorrelate = 1                 # steps between measurements
measurements = 2000             # configurations measured per point
backend = "auto"                # auto, cuda or numpy
blocks = 32                     # blocks for the blocking / jackknife errors
# quantities = ["energy", "binder"]   # default: every quantity the model can give
```

Every bad value is reported with its key and the line it is on (``StudyError``, all problems at once).
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
    """{start, stop, num}: ``num`` evenly spaced values from start to stop (both included)."""
    model_config = ConfigDict(extra="forbid", strict=True)
    start: float
    stop: float
    num: int = Field(ge=1, le=100_000)

    def values(self) -> list[float]:
        return [float(round(v, 12)) for v in np.linspace(self.start, self.stop, self.num)]


class RunSettings(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    equilibrate: int = Field(ge=0, description="steps before the first measurement")
    decorrelate: int = Field(ge=1, description="steps between two measurements")
    measurements: int = Field(ge=2, description="configurations measured per point")
    backend: Literal["auto", "cuda", "numpy"] = "auto"
    blocks: int = Field(32, ge=2, description="blocks for the errors")
    quantities: list[str] | None = None


class StudyFile(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    model: str
    parameters: dict[str, Any] = {}
    grid: dict[str, list[Any] | Range]
    run: RunSettings


@dataclass(frozen=True)
class Point:
    """One task of a sweep: a model, all its parameters (validated), and how to measure. Picklable, so it
    can travel to a Dask worker; ``key`` identifies it in the results table (resume)."""
    model: str
    params: tuple[tuple[str, Any], ...]
    equilibrate: int
    decorrelate: int
    measurements: int
    blocks: int = 32
    backend: str = "auto"
    quantities: tuple[str, ...] = ()

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def key(self) -> str:
        """Stable id of what is measured (not of where: the backend is left out)."""
        text = json.dumps([self.model, sorted(self.params), self.equilibrate, self.decorrelate,
                           self.measurements, self.blocks], sort_keys=True, default=str)
        return hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclass
class Study:
    path: str
    model: str
    points: list[Point]
    quantities: tuple[str, ...]
    unavailable: dict[str, str] = field(default_factory=dict)
    grid_keys: tuple[str, ...] = ()


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


def _pydantic_problems(exc: pydantic.ValidationError, text: str) -> list[tuple[str, int | None, str]]:
    problems, grid_done = [], set()
    errors = exc.errors(include_url=False)
    for error in errors:
        raw_loc = tuple(str(p) for p in error["loc"])
        union = next((p for p in raw_loc if p in ("list[any]", "Range")), None)
        loc = tuple(p for p in raw_loc if p not in ("list[any]", "Range"))
        kind = error["type"]
        if union and loc[0] == "grid" and len(loc) >= 2:
            name = loc[1]
            inside_range = union == "Range" and len(loc) > 2 and kind != "model_type"
            if not inside_range:
                # a grid value that fits neither form: one message, unless its range part is what is wrong
                if any(e["loc"][:3] == ("grid", name, "Range") and len(e["loc"]) > 3 and e["type"] != "model_type"
                       for e in errors) or name in grid_done:
                    continue
                grid_done.add(name)
                problems.append((f"grid.{name}", key_line(text, loc[:2]),
                                 f"must be a list of values or {{start, stop, num}}; got {error.get('input')!r}"))
                continue
        if kind == "extra_forbidden":
            allowed = {(): "model, parameters, grid, run", ("run",): ", ".join(RunSettings.model_fields)}
            message = f"unknown key; allowed: {allowed.get(loc[:-1], 'start, stop, num')}"
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
        problems.append((".".join(loc) or "study", key_line(text, loc), message))
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


def study_text(model: str, parameters: dict, grid: dict, run: dict) -> str:
    """The study file (TOML) for these sections; ``parse_study`` reads it back (the Study panel's form)."""
    lines = [f"model = {toml_value(model)}", "", "[parameters]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in parameters.items()]
    lines += ["", "[grid]"] + [f"{k} = {toml_value(v)}" for k, v in grid.items()]
    lines += ["", "[run]"] + [f"{k} = {toml_value(v)}" for k, v in run.items() if v is not None]
    return "\n".join(lines) + "\n"


# ---- loading ---------------------------------------------------------------------------------------------
def load_study(path) -> Study:
    """Read and validate a study file; raise StudyError listing every problem (nothing runs on a bad file)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StudyError(path, [("study", None, f"cannot be read: {exc.strerror or exc}")]) from None
    return parse_study(text, str(path))


def parse_study(text: str, path: str = "<study>") -> Study:
    from latticelab.sim.analysis.critical import QUANTITIES, measurer
    from latticelab.sim.models import get_model, model_names

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+)", str(exc))
        line = getattr(exc, "lineno", None) or (int(found.group(1)) if found else None)
        raise StudyError(path, [("study", line, f"not valid TOML: {exc}")]) from None
    try:
        spec = StudyFile.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise StudyError(path, _pydantic_problems(exc, text)) from None

    problems: list[tuple[str, int | None, str]] = []
    if spec.model not in model_names():
        raise StudyError(path, [("model", key_line(text, ("model",)),
                                 f"must be one of {', '.join(model_names())}; got {spec.model!r}")])
    cls = get_model(spec.model)
    schema = cls.Params
    fields = tuple(schema.model_fields)
    for section, names in (("parameters", spec.parameters), ("grid", spec.grid)):
        for name in names:
            if name not in schema.model_fields:
                problems.append((f"{section}.{name}", key_line(text, (section, name)),
                                 f"is not a parameter of {spec.model}; allowed: {', '.join(fields)}"))
    for name in set(spec.parameters) & set(spec.grid):
        problems.append((f"grid.{name}", key_line(text, ("grid", name)), "is also given in [parameters]"))
    grid = {k: (v.values() if isinstance(v, Range) else list(v)) for k, v in spec.grid.items()}
    for name, values in grid.items():
        if not values:
            problems.append((f"grid.{name}", key_line(text, ("grid", name)), "is an empty list"))

    # quantities: what the study asks for against what the model can give
    meas = measurer(cls)
    missing = dict(meas.missing)
    if "T" not in schema.model_fields:
        for q in ("heat_capacity", "susceptibility"):
            missing.setdefault(q, f"model {spec.model!r} has no temperature parameter T, so {q} is undefined")
    available = tuple(q for q in QUANTITIES if q not in missing)
    if spec.run.quantities is None:
        quantities = available
    else:
        quantities = tuple(spec.run.quantities)
        for q in quantities:
            if q not in QUANTITIES:
                problems.append(("run.quantities", key_line(text, ("run", "quantities")),
                                 f"{q!r} is not a quantity; allowed: {', '.join(QUANTITIES)}"))
            elif q in missing:
                problems.append(("run.quantities", key_line(text, ("run", "quantities")), missing[q]))
    if not available:
        problems.append(("model", key_line(text, ("model",)),
                         f"model {spec.model!r} gives none of the measured quantities: "
                         + "; ".join(sorted(set(missing.values())))))
    if problems:
        raise StudyError(path, problems)

    # every point through the model's schema: a bad value names the key it came from
    points, seen_errors = [], set()
    names = list(grid)
    for combo in itertools.product(*(grid[n] for n in names)):
        values = {**spec.parameters, **dict(zip(names, combo))}
        try:
            params = schema.create(gpu=False, **values)
        except ParameterError as exc:
            section = "grid" if exc.parameter in grid else "parameters" if exc.parameter in spec.parameters else None
            key = f"{section}.{exc.parameter}" if section else exc.parameter
            message = str(exc).removeprefix(f"{exc.parameter}: ")
            if (key, message) not in seen_errors:
                seen_errors.add((key, message))
                where = f" (at {', '.join(f'{n}={v!r}' for n, v in zip(names, combo))})" if section == "grid" \
                    and len(names) > 1 else ""
                problems.append((key, key_line(text, (section, exc.parameter)) if section else None,
                                 message + where))
            continue
        points.append(Point(model=spec.model, params=tuple(params.model_dump().items()),
                            equilibrate=spec.run.equilibrate, decorrelate=spec.run.decorrelate,
                            measurements=spec.run.measurements, blocks=spec.run.blocks,
                            backend=spec.run.backend, quantities=quantities))
    if problems:
        raise StudyError(path, problems)
    if not points:
        raise StudyError(path, [("grid", key_line(text, ("grid",)), "gives no points")])
    keys = [p.key for p in points]
    if len(set(keys)) != len(keys):
        raise StudyError(path, [("grid", key_line(text, ("grid",)), "names the same point twice")])
    return Study(path=path, model=spec.model, points=points, quantities=quantities,
                 unavailable={q: m for q, m in missing.items()}, grid_keys=tuple(names))
