"""Schedules of parameter changes for batch runs (thesis 003, section 8.3: the configuration file), as TOML.

A schedule lists changes of live parameters, each taking effect before the step it names (steps count from 0;
"step = 4000" means before the 4001st step, when ``model.step_count == 4000``)::

    # the thesis's test (section 8.5)
    [[change]]
    step = 0
    I_e = 3.0
    n_e = 4.5
    I_i = 2.0
    n_i = 3.0

    [[change]]
    step = 4000
    lambda_tau_e = 3.0

    [[change]]
    step = 5000
    lambda_tau_e = 1.0

``read_schedule`` (a file) and ``parse_schedule`` (text) check everything before anything runs: the TOML
syntax (tomllib's message has the line and column), that the file holds only ``[[change]]`` tables, that each
has an integer ``step`` >= 0 and only live parameters of the model, each value valid for the schema (its
range, and together with every earlier change); an error names the file, the line and the key. Written for
any model's schema; nothing here is cortex-specific.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from latticelab.sim.params import ModelParams, ParameterError


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message names the file, the line and the key at fault."""


@dataclass(frozen=True)
class Change:
    step: int
    values: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Schedule:
    """Changes sorted by step (one per step: changes at the same step are merged in file order)."""
    changes: tuple[Change, ...] = ()

    def at(self, step: int) -> dict:
        """The parameter changes to apply before step ``step`` (empty when none)."""
        for change in self.changes:
            if change.step == step:
                return dict(change.values)
        return {}

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(c.step for c in self.changes)

    def to_toml(self) -> str:
        """The schedule as TOML that ``read_schedule`` reads back to an equal schedule."""
        lines = []
        for change in self.changes:
            lines += ["[[change]]", f"step = {change.step}"]
            lines += [f"{key} = {_toml_value(value)}" for key, value in change.values.items()]
            lines.append("")
        return "\n".join(lines)

    def apply(self, model) -> dict:
        """Apply the changes due before the model's next step (``model.update``); returns them."""
        changes = self.at(model.step_count)
        if changes:
            model.update(**changes)
        return changes


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"cannot write {value!r} to a schedule")


_HEADER = re.compile(r"^\s*\[\[\s*change\s*\]\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")


def _key_lines(text: str) -> tuple[dict[str, int], list[dict[str, int]]]:
    """Line numbers (1-based) of the keys before the first table, and of each key of each [[change]] table in
    order (its header under the key '')."""
    top: dict[str, int] = {}
    tables: list[dict[str, int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if _HEADER.match(line):
            tables.append({"": number})
            continue
        match = _KEY.match(line)
        if match:
            keys = tables[-1] if tables else top
            keys.setdefault(match.group(1), number)
    return top, tables


def read_schedule(path, schema: type[ModelParams], base: ModelParams | None = None) -> Schedule:
    """Read and validate the schedule in the TOML file ``path`` (see ``parse_schedule``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScheduleError(f"{path}: cannot read the schedule ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ScheduleError(f"{path}: the schedule is not UTF-8 text") from None
    return parse_schedule(text, schema, base, name=str(path))


def parse_schedule(text: str, schema: type[ModelParams], base: ModelParams | None = None,
                   name: str = "schedule") -> Schedule:
    """Parse and validate a schedule from TOML text (``name`` for messages). ``base``: the parameters the run
    starts from (default: the schema's defaults), against which every value is checked."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScheduleError(f"{name}: not valid TOML: {exc}") from None
    top, lines = _key_lines(text)

    def fail(table: int | None, key: str, message: str):
        if table is None:
            where, what = top.get(key), ""
        else:
            where = lines[table].get(key, lines[table].get("")) if table < len(lines) else None
            what = f" change #{table + 1}"
        place = f"{name}:{f' line {where}' if where else ''}{what}"
        raise ScheduleError(f"{place}: {key}: {message}" if key else f"{place}: {message}")

    unknown = sorted(set(document) - {"change"})
    if unknown:
        fail(None, unknown[0], "a schedule holds only [[change]] tables (each with a step and live parameters)")
    tables = document.get("change", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        fail(None, "change", "must be an array of tables: write each change as [[change]]")
    live = set(schema.names("live"))
    merged: dict[int, dict] = {}
    origin: dict[tuple[int, str], int] = {}
    for i, table in enumerate(tables):
        if "step" not in table:
            fail(i, "", "has no step (step = N: the change applies before step N, counting from 0)")
        step = table["step"]
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            fail(i, "step", f"must be an integer >= 0; got {step!r}")
        values = {k: v for k, v in table.items() if k != "step"}
        if not values:
            fail(i, "step", "this change sets no parameter")
        for key, value in values.items():
            if key not in schema.model_fields:
                fail(i, key, f"is not a parameter of {schema.model_name or schema.__name__}; live parameters: "
                             f"{', '.join(sorted(live))}")
            if key not in live:
                fail(i, key, "cannot change during a run (it needs a new model); a schedule changes only live "
                             f"parameters: {', '.join(sorted(live))}")
            if (step, key) in origin:
                fail(i, key, f"is already set for step {step} by change #{origin[(step, key)] + 1}")
            origin[(step, key)] = i
            merged.setdefault(step, {})[key] = value
    params = base if base is not None else schema.create()
    for step in sorted(merged):
        try:
            params = params.replace(**merged[step])
        except ParameterError as exc:
            table = origin.get((step, exc.parameter))
            fail(table, exc.parameter, str(exc).removeprefix(f"{exc.parameter}: "))
        merged[step] = {k: getattr(params, k) for k in merged[step]}    # validated, as the schema stores them
    return Schedule(tuple(Change(step, merged[step]) for step in sorted(merged)))


THESIS_TEST = Schedule((
    Change(0, {"I_e": 3.0, "n_e": 4.5, "I_i": 2.0, "n_i": 3.0}),
    Change(4000, {"lambda_tau_e": 3.0}),
    Change(5000, {"lambda_tau_e": 1.0}),
))
