"""The model protocol: what every simulation in latticelab provides, and the optional capabilities.

A model is a class with four declarations and a handful of methods (``Model`` below). Generic code (the
runner, the window, the command line, the state files, the tests parametrised over the registry) talks to
models only through this protocol and never names one. The registry (sim/models/__init__.py) maps names to
model classes.

How a frame flows (sim/runner.py drives it)::

    runner.advance()  ->  model.advance(n) -> StepBatch    n steps, on NumPy or CuPy, with each step's
                                                           observables (scalars for the live plots) and the
                                                           union of the cells they changed (highlight);
                                                           by default step(1) + observables() + changed()
    runner.picture()  ->  model.picture(highlight, marks)  what to draw: byte codes + palette (sim/picture.py)
    FieldView.show(picture)                                render/: 2D image, 3D cube (peeling), unfolded grid
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from latticelab.sim.params import ModelParams, ParameterError


@dataclass(frozen=True)
class Observable:
    """A scalar the model reports every step. ``spread``: the live plots also show its standard deviation over
    a sliding window (a sign of equilibration); ``log``: plotted on a log scale."""
    name: str
    label: str
    unit: str = ""
    spread: bool = False
    log: bool = False


@dataclass
class StepBatch:
    """What ``Model.advance(n)`` returns: the time and declared observables after each of the ``steps`` steps
    (host arrays of length ``steps``), and the union of the cells changed by them (a bool array on the model's
    device) or None for a model without ``changed()``."""
    steps: int
    times: np.ndarray
    observables: dict[str, np.ndarray] | "PendingObservables"
    changed: Any = None


class PendingObservables(Protocol):
    """Observables of a batch still being copied from the device (``advance(n, wait=False)``): the window
    draws the frame while the copy runs and takes them at its next frame."""

    def ready(self) -> bool:
        """True once ``result()`` will not wait."""

    def result(self) -> dict[str, np.ndarray]:
        """The observables (waiting for the copy if needed)."""

    def device_seconds(self) -> float | None:
        """How long the device took for the batch's steps, once ready (None if unknown)."""


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
        cpu_pace      Steps / frame a window on the CPU starts with where the user picked none: 1 (each frame shows
                      one step and the cells it changed) or 0 (auto: as many as fit in the frame's time), for a
                      model whose single step shows too little; on a GPU a window starts at auto
        small_example parameters of a small instance that steps in milliseconds on the CPU (tests, demos)
        format_1_layout  for the one model latticelab 0.1 saved (format 1, before the model name was stored):
                      where its parameters and arrays stood; sim/state.py upgrades such files (None for others)
        diverges_with the parameters to name when a run's observables stop being finite numbers (a diverged
                      run, ``check_finite``), the likeliest first; empty: the message names none
        run_options   extra options of ``latticelab run <model>`` (``RunOption``s: input files, outputs); the
                      classmethod ``run_hooks(values)`` turns their values into the run's ``RunHooks``
        splits_across_devices  the capability of running one simulation split over several devices (the
                      ``devices`` run option, sim/multidevice/): such a model's ``__init__`` takes ``devices=``
                      and its ``estimate_bytes_per_device`` gives each device's share; other models refuse
                      several devices with one line naming the model and the option; ``devices_note`` says
                      for --help what is split and what stays on one device; ``splits_across_processes``
                      (default: as ``splits_across_devices``) whether its split also runs over the processes of
                      an MPI job (``--distributed``)
    """

    name: ClassVar[str]
    title: ClassVar[str]
    Params: ClassVar[type[ModelParams]]
    declared_observables: ClassVar[tuple[Observable, ...]]
    time_label: ClassVar[str] = "step"
    state_format: ClassVar[int] = 1
    marks_label: ClassVar[str | None] = None
    cpu_pace: ClassVar[int] = 1
    small_example: ClassVar[dict] = {}
    format_1_layout: ClassVar[dict | None] = None
    run_options: ClassVar[tuple[RunOption, ...]] = ()
    field_units: ClassVar[dict[str, str]] = {}     # units of ``fields()`` for data files (absent: "1")
    diverges_with: ClassVar[tuple[str, ...]] = ()
    splits_across_devices: ClassVar[bool] = False
    splits_across_processes: ClassVar[bool | None] = None      # None: as splits_across_devices
    devices_note: ClassVar[str] = ""      # what a split run does and does not split, for --help

    @classmethod
    def run_hooks(cls, values: dict) -> RunHooks:
        """What this model adds to a headless run, from the values of its ``run_options`` (option name -> the
        text given, or None). The default adds nothing."""
        return RunHooks()

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
    def create(cls, backend: str = "auto", devices=None, **values) -> "Model":
        """Build from plain values (defaults from the schema); bad values raise ParameterError. ``devices``: the
        devices one run is split over ("0,1", "all", a sequence of ids; default one device), for a model that
        ``splits_across_devices``; others accept one device only (ParameterError('devices', ...))."""
        from latticelab.sim.backend import select_backend
        from latticelab.sim.multidevice.devices import resolve_devices
        gpu = select_backend(backend).is_gpu if backend != "numpy" else False
        params = cls.Params.create(gpu=gpu, **values)
        if devices is None:
            return cls(params, backend=backend)
        if not cls.splits_across_devices:
            resolve_devices(cls, devices, select_backend(backend))     # refuses several devices
            return cls(params, backend=backend)
        return cls(params, backend=backend, devices=devices)

    @classmethod
    def estimate_bytes(cls, params: ModelParams, backend_name: str) -> int | None:
        """Peak memory (bytes) that building and stepping a model with ``params`` takes where the backend
        ("numpy": host, "cuda": the GPU) keeps its arrays, from the parameters alone (nothing is allocated), or
        None when the model gives no estimate (then nothing is checked). sim/memory.py ``check_fits`` compares it
        with the free memory before a model is built; it must grow with the size parameter (L)."""
        return None

    @classmethod
    def estimate_bytes_per_device(cls, params: ModelParams, backend_name: str, devices: int) -> int | None:
        """Peak bytes on each of ``devices`` devices of a run split over them (a model that
        ``splits_across_devices`` overrides it); for one device the ordinary estimate."""
        return cls.estimate_bytes(params, backend_name) if devices == 1 else None

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
    def grid_spacing(self) -> float:
        """Distance between cell centres, in the model's unit of length (1: lattice units), for data files."""
        return 1.0

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

    def advance(self, n: int, wait: bool = True) -> StepBatch:
        """``n`` steps with the observables after each and the union of the cells they changed: what one frame of
        the window needs. This default steps one at a time (one host synchronisation per step for the
        observables); a model with a faster way (several steps per kernel call, observables reduced on the device
        and copied once) overrides it and must give the same trajectory and the same numbers. With
        ``wait=False`` such a model may return before the device is done, with ``PendingObservables``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n: must be a positive integer number of steps; got {n!r}")
        names = [o.name for o in self.declared_observables]
        times = np.empty(int(n))
        values = {name: np.empty(int(n)) for name in names}
        union = None
        for i in range(int(n)):
            self.step(1)
            changed = self.changed()
            if changed is not None:
                xp = self.xp
                union = changed.copy() if union is None else xp.logical_or(union, changed, out=union)
            times[i] = self.time
            observed = self.observables()
            for name in names:
                values[name][i] = observed[name]
        return StepBatch(int(n), times, values, union)

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
        ParameterError('state', ...). A model that ``splits_across_devices`` also takes ``devices=`` (its
        constructor's option): a state saved by a split run loads into a one-device run and the reverse."""


# ---- optional capabilities (small protocols; generic code tests for them with isinstance) ----------------
@runtime_checkable
class ResumesInPlace(Protocol):
    def set_state(self, arrays: dict) -> None:
        """Put the ``get_state()`` arrays of a model of this class and these parameters into this model, in
        place: afterwards it steps and measures exactly as the model they came from (the window steps a copy of
        a slow CPU model in a worker process and hands each result back this way, app/stepping.py). The model
        may keep the arrays given. Damaged arrays raise ParameterError('state', ...) and change nothing."""


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
    """A model with an interaction graph. A model that stores its graph's adjacency may also define
    ``adjacency_csr() -> (offsets, neighbours)``: the undirected simple graph over the flat cell indices in CSR
    form (host int64 offsets of length N + 1; each row's neighbours sorted, every edge in both rows, no
    self-loops); sim/analysis/graph.py then measures those arrays instead of rebuilding them from ``edges()``.
    It is optional, so it is not a member of this protocol (``isinstance`` checks ``edges`` only)."""

    def edges(self) -> np.ndarray:
        """(E, 2) flat cell indices of the model's current interaction graph (host)."""


@dataclass(frozen=True)
class SignalColumn:
    """One column of a ``HasSignal`` trace (after the step column). ``role`` says how a view uses it:
    "signal" -- the recorded signal itself, plotted and analysed (periodogram, qEEG); "fraction" -- the fraction
    of some cells active in the sample, shown as a rate per cell (fraction x ``signal_rate``, Hz); "probe" --
    the value of the cell picked by ``HasProbe.probe``."""
    name: str
    label: str
    unit: str = ""
    role: str = "signal"


@runtime_checkable
class HasSignal(Protocol):
    """A model that records continuous signals, one sample per step (the cortex's pseudo-EEG at 1 kHz)."""

    signal_rate: float                          # samples per second of simulated time
    signal_columns: tuple[SignalColumn, ...]    # the trace's columns after the first, in order

    def trace(self, since: int | None = None) -> np.ndarray:
        """Host (m, 1 + len(signal_columns)) array of the samples of the steps after step ``since``: column 0 is
        the number of steps taken when the sample was recorded (1, 2, ...; its time is that / ``signal_rate``
        seconds), then one column per ``signal_columns``. Only a bounded number of recent steps is kept."""


@runtime_checkable
class RecordsSpikes(Protocol):
    """A network model that can record spike trains: which cells fired in which step (sim/output/nwb.py writes
    them as an NWB Units table; the Signal dock draws a raster)."""

    def record_spikes(self, neurons=None):
        """Start recording the cells of ``neurons`` (None: all; a range of flat indices); returns the recording,
        whose ``spikes()`` gives (steps int64, flat indices int32) ordered by step, then index, and whose
        ``first`` and ``count`` are the band."""

    def stop_recording_spikes(self):
        """End the recording and return it (None when none was on)."""

    spike_recording: object     # the recording on now, or None


@runtime_checkable
class HasProbe(Protocol):
    """A model in which one cell can be picked (clicked in the view) to be watched."""

    probe_label: str        # what a cell is, for people ("neuron")
    probe: int              # flat index of the picked cell (settable; a bad index raises ParameterError)

    def probe_info(self, index: int) -> dict:
        """Name -> value of what there is to know about cell ``index`` now (kind, constants, state)."""


@dataclass(frozen=True)
class EffectiveValue:
    """A parameter as set (``base``) and as it acts now (``effective``), e.g. after a drug factor."""
    name: str
    unit: str
    base: float
    effective: float


@runtime_checkable
class HasEffectiveParameters(Protocol):
    def effective_parameters(self) -> tuple[EffectiveValue, ...]:
        """The parameters whose acting value differs from the set one by a rule of the model, base and
        effective side by side, for a table."""


@dataclass(frozen=True)
class Impulse:
    """A brief change of live parameters that a button applies now (``changes``, through the window's parameter
    path, so validation applies) and undoes after ``steps`` steps (each parameter back to its value before)."""
    label: str
    changes: tuple[tuple[str, Any], ...]
    steps: int
    help: str = ""


@runtime_checkable
class HasImpulse(Protocol):
    impulse: Impulse        # declared on the model class


@dataclass(frozen=True)
class Coarsening:
    """A length that grows as a power of time while the model coarsens: the declared observable ``observable``
    ~ t^``exponent`` (``law`` names the theory, for the plot's guide line)."""
    observable: str
    exponent: float
    law: str = ""


@runtime_checkable
class HasCoarsening(Protocol):
    coarsening: Coarsening  # declared on the model class


@runtime_checkable
class HasInterface(Protocol):
    """A scalar-field model whose main field (``fields()``'s first) has an interface at a level (phi = 0
    between the phases), drawn in 3D as that iso-surface."""

    interface_level: float



def main_field(model) -> tuple[str, object]:
    """(name, array) of the model's main field: the first of ``fields()``."""
    name, array = next(iter(model.fields().items()))
    return name, array


def main_field_at(model, index) -> tuple[str, object, np.dtype]:
    """(name, value, dtype) of the model's main field at one cell ``index`` (array order): one element read where
    it lives. A model may define ``main_field_at(index) -> (name, value)`` to read it without making the whole
    field (a run split over devices, whose ``fields()`` gather every slab to the host)."""
    own = getattr(model, "main_field_at", None)
    if own is not None:
        name, value = own(index)
        return name, value, np.asarray(value).dtype
    name, array = main_field(model)
    element = array[tuple(int(i) for i in index)]
    return name, (element.item() if hasattr(element, "item") else element), np.dtype(array.dtype)


# ---- what a model adds to a headless run (``latticelab run <model>``, sim/headless.py) ---------------------
@dataclass(frozen=True)
class RunOption:
    """An extra option of ``latticelab run <model>``: ``name`` "pfhub_out" is the option --pfhub-out. ``output``:
    a file the run writes (checked before the run starts; an existing one is kept unless --overwrite)."""
    name: str
    help: str
    metavar: str = "FILE"
    output: bool = False


class RunHooks:
    """Called by a headless run around the generic stepping; every method does nothing by default. Errors in
    the user's input raise ParameterError naming the option ("initial", "schedule"), before anything runs."""

    def start(self, model) -> None:
        """Once, after the model is built and before the first step (read and apply input files)."""

    def before_step(self, model) -> None:
        """Before every step, equilibration included (a schedule's changes)."""

    def step(self, model, until: float | None = None) -> None:
        """Take one step; ``until``: the simulated time the run ends at, which a model with a clock may land on
        exactly by shortening its last step."""
        model.step(1)

    def after_step(self, model) -> None:
        """After every recorded step, not after equilibration steps (collect a time series)."""

    def outputs(self, model) -> dict:
        """{option name: write(text_file)} of the output files to write (atomically) when the run is done."""
        return {}

    def notes(self) -> list[str]:
        """Lines to tell the user when the run is done (an output that came out empty, and why)."""
        return []


def check_finite(model: Model, values: dict[str, float]) -> None:
    """ParameterError when an observable of ``model`` is not a finite number: the run has diverged. It names the
    model's ``diverges_with`` parameter (else "parameters"), so that a headless run ends with one line that says
    what to change instead of writing NaN or 1e308 and exiting 0."""
    bad = [name for name, value in values.items() if not math.isfinite(float(value))]
    if not bad:
        return
    suspects = type(model).diverges_with
    change = f"try a smaller {' or '.join(suspects)}" if suspects else "change the parameters"
    raise ParameterError(suspects[0] if suspects else "parameters",
                         f"the run diverged by step {model.step_count} ({type(model).time_label} {model.time:g}): "
                         f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a finite number; {change}")
