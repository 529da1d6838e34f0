"""The study capability a model declares: what a point of a study may measure on it.

A model class that can be studied sets ``study = StudyMeasures(...)`` (in its own package; generic code never
names a model). A point of a study (point.py) then measures, over its measurement window:

* each declared observable listed in ``observables`` (default: all of them), as its mean over the window with a
  blocking error; and
* the model's derived measures (``derived``), from a ``Recorder`` that the model's ``recorder`` factory makes
  for each window: it sees the model at the window's start, at each of the ``measurements`` samples, and gives
  a value and an error per measure at the end (the Binder cumulant of the Ising model, qEEG metrics of the
  cortex's pseudo-EEG, the coarsening exponent of Cahn-Hilliard).

Every measure is a column of the results table, and its error the column ``<name>_err``.

For the window's Study dock a model may also suggest a first study (``suggest``: the grid and run settings its
form starts from, given the running model's parameters) and what its plot shows first (``plot``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np


@dataclass(frozen=True)
class Measure:
    """A number a point records: ``name`` is the table column, ``label`` and ``unit`` are for people."""
    name: str
    label: str
    unit: str = ""


class Recorder(Protocol):
    """Collects what one measurement window of one model gives (made fresh for each window)."""

    def start(self, model) -> None:
        """The window begins (the model has just been equilibrated or settled)."""

    def sample(self, model) -> None:
        """One of the window's ``measurements`` samples (the first at the window's start)."""

    def result(self, model, n_blocks: int) -> dict[str, tuple[float | None, float | None]]:
        """Measure name -> (value, error) over the window; None where a value is undefined."""


@dataclass(frozen=True)
class StudyMeasures:
    """The capability: ``derived`` measures made by ``recorder(model_class, wanted)`` (``wanted``: the names asked
    for), the declared ``observables`` recorded as window means (None: every declared observable), and
    ``unavailable(params_class) -> {measure: why}`` for measures a schema cannot give. ``suggest(params) ->
    {"grid": {...}, "run": {...}}``: a small first study in study-file values (``params``: the running model's, or
    None); ``plot``: what a plot of its table shows first ({"measure", "against", "by"}, each optional)."""
    derived: tuple[Measure, ...] = ()
    recorder: Callable | None = None
    observables: tuple[str, ...] | None = None
    unavailable: Callable | None = None
    notes: dict = field(default_factory=dict)
    suggest: Callable | None = None
    plot: dict = field(default_factory=dict)


def capability(model_class) -> StudyMeasures | None:
    """The model class's study capability, or None when it declares none."""
    found = getattr(model_class, "study", None)
    return found if isinstance(found, StudyMeasures) else None


def observable_measures(model_class) -> tuple[Measure, ...]:
    """The declared observables a study records as window means."""
    cap = capability(model_class)
    wanted = None if cap is None else cap.observables
    return tuple(Measure(o.name, f"mean {o.label}", o.unit) for o in model_class.declared_observables
                 if wanted is None or o.name in wanted)


def all_measures(model_class) -> dict[str, Measure]:
    """Name -> Measure of everything a study of this model can record (observables first, then derived)."""
    cap = capability(model_class)
    if cap is None:
        return {}
    out = {m.name: m for m in observable_measures(model_class)}
    out.update({m.name: m for m in cap.derived})
    return out


def suggested_study(model_class, params=None) -> dict:
    """{"grid": ..., "run": ...} of the model's suggested first study (empty sections when it suggests none)."""
    cap = capability(model_class)
    found = cap.suggest(params) if cap is not None and cap.suggest is not None else {}
    return {"grid": dict(found.get("grid", {})), "run": dict(found.get("run", {}))}


def plot_hint(model_class) -> dict:
    """What a plot of the model's study table shows first: {"measure", "against", "by"} (any may be missing)."""
    cap = capability(model_class)
    return dict(cap.plot) if cap is not None else {}


def unavailable_measures(model_class) -> dict[str, str]:
    cap = capability(model_class)
    if cap is None or cap.unavailable is None:
        return {}
    return dict(cap.unavailable(model_class.Params))


class ObservableRecorder:
    """The means of the declared observables over a window, with blocking errors."""

    def __init__(self, names):
        self.names = tuple(names)
        self.series: dict[str, list] = {n: [] for n in self.names}

    def start(self, model) -> None:
        pass

    def sample(self, model) -> None:
        if not self.names:
            return
        values = model.observables()
        for n in self.names:
            self.series[n].append(float(values[n]))

    def result(self, model, n_blocks: int) -> dict:
        from latticelab.sim.analysis.critical import blocking
        out = {}
        for n, values in self.series.items():
            x = np.asarray(values, dtype=np.float64)
            out[n] = blocking(x, min(n_blocks, max(x.size, 1))) if x.size else (None, None)
        return out


def split_errors(values_of_parts: list[dict]) -> dict[str, float]:
    """Error of each measure from its values over equal parts of a window: standard error of the part values."""
    out = {}
    if len(values_of_parts) < 2:
        return out
    for name in values_of_parts[0]:
        x = np.asarray([p[name] for p in values_of_parts], dtype=np.float64)
        out[name] = float(x.std(ddof=1) / np.sqrt(x.size))
    return out
