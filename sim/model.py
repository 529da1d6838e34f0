"""The model protocol: what every simulation in latticelab provides, and the optional capabilities.

A model is a class with four declarations and a handful of methods (``Model`` below). Generic code (the
runner, the window, the command line, the state files, the tests parametrised over the registry) talks to
models only through this protocol and never names one. The registry (sim/models/__init__.py) maps names to
model classes.

How a frame flows (sim/runner.py drives it)::

    runner.advance()  ->  model.step(n)                    the simulation, on NumPy or CuPy
                          model.observables()              scalars for the live plots
                          model.changed()                  cells changed by those steps (highlight)
    runner.picture()  ->  model.picture(highlight, marks)  what to draw: byte codes + palette (sim/picture.py)
    FieldView.show(picture)                                render/: 2D image, 3D cube (peeling), unfolded grid
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from latticelab.sim.params import ModelParams


@dataclass(frozen=True)
class Observable:
    """A scalar the model reports every step. ``spread``: the live plots also show its standard deviation over
    a sliding window (a sign of equilibration); ``log``: plotted on a log scale."""
    name: str
    label: str
    unit: str = ""
    spread: bool = False
    log: bool = False


class Model(abc.ABC):
    """Base class of every model. Subclasses set the class attributes and implement the abstract methods.

    Class attributes:
        name          registry name, used on the command line and in state files ("ising")
        title         for people ("Rewired Ising model")
        Params        the parameter schema (a ``ModelParams`` subclass)
        declared_observables  the ``Observable``s that ``observables()`` reports, in plotting order
        time_label    what ``time`` counts, for plot axes ("step", or "simulated time")
        state_format  version of the arrays ``get_state`` writes; bump it when they change
        marks_label   what ``picture(marks=True)`` adds, for a check box ("Show rewired links"), or None
        small_example parameters of a small instance that steps in milliseconds on the CPU (tests, demos)
        format_1_layout  for the one model latticelab 0.1 saved (format 1, before the model name was stored):
                      where its parameters and arrays stood; sim/state.py upgrades such files (None for others)
    """

    name: ClassVar[str]
    title: ClassVar[str]
    Params: ClassVar[type[ModelParams]]
    declared_observables: ClassVar[tuple[Observable, ...]]
    time_label: ClassVar[str] = "step"
    state_format: ClassVar[int] = 1
    marks_label: ClassVar[str | None] = None
    small_example: ClassVar[dict] = {}
    format_1_layout: ClassVar[dict | None] = None

    # ---- construction -------------------------------------------------------------------------
    @abc.abstractmethod
    def __init__(self, params: ModelParams, backend: str = "auto"):
        """Build the model from validated parameters on the chosen backend ("auto", "cuda", "numpy")."""

    def _setup(self, params: ModelParams | None, backend: str, values: dict) -> ModelParams:
        """The start of every model's ``__init__``: choose the backend (``xp``), and take ``params`` or build
        them from keyword ``values`` through the schema (defaults suggested for this backend). Returns them."""
        from latticelab.sim.backend import select_backend
        from latticelab.sim.params import ParameterError
        self._backend = select_backend(backend)
        if params is None:
            params = self.Params.create(gpu=self._backend.is_gpu, **values)
        elif values:
            raise TypeError("give either params or keyword values, not both")
        elif not isinstance(params, self.Params):
            raise ParameterError("params", f"must be {self.Params.__name__}; got {type(params).__name__}")
        self.xp = self._backend.xp
        self._params = params
        return params

    def _validated(self, applies: str, changes: dict) -> ModelParams:
        """``changes`` checked against the schema for ``update`` (applies="live") or ``reset`` ("reset"): each
        key a field that applies that way, each value valid with the others. Returns the new parameters; the
        model is not touched."""
        from latticelab.sim.params import ParameterError
        schema = self.Params
        wrong = [k for k in changes if k in schema.model_fields and k not in schema.names(applies)]
        if wrong:
            raise ParameterError(wrong[0], "cannot change on a running model; it needs a new model or a reset"
                                 if applies == "live" else "is not applied at a reset")
        return self._params.replace(**changes) if changes else self._params

    @classmethod
    def create(cls, backend: str = "auto", **values) -> "Model":
        """Build from plain values (defaults from the schema); bad values raise ParameterError."""
        from latticelab.sim.backend import select_backend
        gpu = select_backend(backend).is_gpu if backend != "numpy" else False
        return cls(cls.Params.create(gpu=gpu, **values), backend=backend)

    # ---- parameters ---------------------------------------------------------------------------
    @property
    def params(self) -> ModelParams:
        """The parameters the model runs with now."""
        return self._params

    @abc.abstractmethod
    def update(self, **changes) -> None:
        """Apply changes to ``live`` parameters to the running model. Raises ParameterError (model unchanged)
        for a bad value or for a parameter that is not live."""

    @abc.abstractmethod
    def reset(self, **values) -> None:
        """New initial state from the ``reset`` parameters given (others keep their values); step count 0. The
        random streams restart from the seed, so the same reset parameters give the same run."""

    # ---- dynamics -----------------------------------------------------------------------------
    @abc.abstractmethod
    def step(self, n: int = 1) -> None:
        """Advance ``n`` steps."""

    @property
    @abc.abstractmethod
    def step_count(self) -> int:
        """Steps taken since the last reset."""

    @property
    def time(self) -> float:
        """The x value of the live plots (``time_label``): the step count unless the model has a clock."""
        return self.step_count

    @abc.abstractmethod
    def observables(self) -> dict[str, float]:
        """The declared observables of the current state, as Python floats."""

    def changed(self):
        """Bool array (cell shape, on the model's device) of the cells changed by the last ``step`` call, or
        None when the model has no such notion."""
        return None

    # ---- what there is to see and analyse -----------------------------------------------------------
    @property
    @abc.abstractmethod
    def shape(self) -> tuple[int, ...]:
        """The cell grid: (L, L) or (L, L, L)."""

    @abc.abstractmethod
    def fields(self) -> dict[str, Any]:
        """Named real arrays of the cell shape (on the model's device) for analysis and export; the first is
        the main one (spins, concentration, membrane potential)."""

    @abc.abstractmethod
    def picture(self, highlight=None, marks: bool = False):
        """What the view draws (sim/picture.py ``Picture``): ``highlight`` is a bool mask of cells to
        highlight (or None), ``marks`` asks for the model's extra marks (rewired sites and links)."""

    # ---- the backend (set by ``_setup``) -------------------------------------------------------
    xp: Any                 # the array module (numpy or cupy)

    @property
    def backend_name(self) -> str:
        """"numpy" or "cuda"."""
        return self._backend.name

    @property
    def device_name(self) -> str:
        """"CPU" or the CUDA device's name."""
        return self._backend.device_name

    # ---- save / resume ------------------------------------------------------------------------
    @abc.abstractmethod
    def get_state(self) -> dict[str, np.ndarray]:
        """Everything needed to resume exactly, as NumPy arrays (parameters excepted: sim/state.py adds them)."""

    @classmethod
    @abc.abstractmethod
    def from_state(cls, params: ModelParams, arrays: dict, backend: str = "auto") -> "Model":
        """Rebuild from validated parameters and ``get_state()`` arrays; damaged arrays raise
        ParameterError('state', ...)."""


# ---- optional capabilities (small protocols; generic code tests for them with isinstance) ----------------
@runtime_checkable
class HasClusters(Protocol):
    def cluster_size_groups(self) -> dict[str, np.ndarray]:
        """Sizes of the connected clusters of like cells in the current state, per kind of cell (the Ising
        model: "up" and "down" spins), each largest first (host int64)."""


@runtime_checkable
class HasMagnetisation(Protocol):
    def energy_and_magnetisation(self) -> tuple[float, float]:
        """Energy per cell and signed magnetisation per cell of the current configuration, reduced where the
        state lives (one small copy back): what critical-temperature studies measure (sim/analysis/critical.py)."""


@runtime_checkable
class HasGraph(Protocol):
    def edges(self) -> np.ndarray:
        """(E, 2) flat cell indices of the model's current interaction graph (host)."""



def main_field(model) -> tuple[str, object]:
    """(name, array) of the model's main field: the first of ``fields()``."""
    name, array = next(iter(model.fields().items()))
    return name, array

