"""The running simulation behind any view: one model, its plot history, and the stepping of each frame.

No Qt here: the window calls ``advance`` from its frame timer and draws ``picture()``; the command line and
the tests drive it the same way. The runner knows models only through the protocol (sim/model.py):

- ``advance(max_steps, budget_s)`` steps within a time budget, records the declared observables after each
  step and keeps the union of the cells changed since the last frame (the highlight);
- ``set(**changes)`` routes each parameter by its schema: ``live`` ones go to the running model, ``reset``
  ones wait for the next ``reset``, ``rebuild`` ones make a new model -- and when that fails (a bad value,
  not enough memory) the old model keeps running and the error is raised;
- ``switch(model_name)`` and ``load(state)`` replace the model, possibly by one of another kind.
"""
from __future__ import annotations

import time

import numpy as np

from latticelab.sim.backend import select_backend
from latticelab.sim.memory import check_change_fits
from latticelab.sim.models import get_model
from latticelab.sim.params import ModelParams, ParameterError


def thin(times, observables: dict, keep: int | None) -> tuple:
    """A batch's samples (``times`` (n,), ``observables[name]`` (n,)) cut to at most ``keep``, evenly spaced and
    ending with the batch's last step; all of them when ``keep`` is None or the batch has no more. (A window
    taking hundreds of steps a frame keeps a few samples of each: its plots then span seconds, not the last
    frame or two, and each sample is still one step's value.)"""
    n = len(times)
    if keep is None or n <= keep:
        return times, observables
    stride = -(-n // keep)                                  # ceil(n / keep): at most ``keep`` samples
    picked = np.arange(n - 1, -1, -stride)[::-1]
    return (np.asarray(times)[picked],
            {name: np.asarray(values)[picked] for name, values in observables.items()})


class ObservableHistory:
    """The last ``capacity`` samples of each declared observable, plus the standard deviation over a sliding
    window of the most recent ``window`` samples for those declared with ``spread`` (named ``<name>_std``).

    Samples come in *segments*, each taken under one set of the parameters that change the physics
    (``new_segment``): running statistics and exports must not pool samples of different segments (a mean over
    T = 2.25 and T = 1.5 measures neither).
    """

    def __init__(self, observables, capacity: int = 1000, window: int = 50):
        if capacity < 2 or window < 2:
            raise ValueError("capacity and window must be at least 2")
        self.observables = tuple(observables)
        self.capacity, self.window = capacity, window
        self.recorded = tuple(o.name for o in self.observables)
        self.spreads = {f"{o.name}_std": o.name for o in self.observables if o.spread}
        self._time = np.zeros(capacity, np.float64)
        self._values = {key: np.full(capacity, np.nan) for key in (*self.recorded, *self.spreads)}
        self._count = 0
        self._segments = [(0, "")]   # (global index of its first sample, the parameters it was taken under)
        self.version = 0  # increases with every change, so views redraw only when needed

    def __len__(self) -> int:
        return min(self._count, self.capacity)

    def clear(self) -> None:
        self._count = 0
        self._segments = [(0, self._segments[-1][1])]
        for values in self._values.values():
            values.fill(np.nan)
        self.version += 1

    def new_segment(self, parameters: str) -> None:
        """The samples from now on are taken under ``parameters`` (a description, e.g. "T=1.5 algorithm=wolff")."""
        if self._segments[-1][0] == self._count:      # nothing was taken under the last ones: they are replaced
            self._segments[-1] = (self._count, parameters)
        else:
            self._segments.append((self._count, parameters))
        first = self._count - len(self)                # segments whose samples all left the history go
        while len(self._segments) > 1 and self._segments[1][0] <= first:
            self._segments.pop(0)
        self.version += 1

    def segments(self) -> list[tuple[int, str]]:
        """(index in ``arrays()`` of its first sample, its parameters) of each segment that has samples in the
        history, or is the current one, oldest first; the current segment's index is ``len(self)`` while it
        has no sample yet."""
        first = self._count - len(self)
        out = []
        for i, (start, parameters) in enumerate(self._segments):
            end = self._segments[i + 1][0] if i + 1 < len(self._segments) else None
            if end is not None and end <= first:
                continue                               # all its samples have left the history
            out.append((max(start, first) - first, parameters))
        return out

    def push(self, time_value: float, observables: dict) -> None:
        i = self._count % self.capacity
        self._time[i] = time_value
        for key in self.recorded:
            self._values[key][i] = observables[key]
        self._count += 1
        n = min(self._count, self.window)
        recent = np.arange(self._count - n, self._count) % self.capacity
        for key, source in self.spreads.items():
            self._values[key][i] = self._values[source][recent].std() if n >= 2 else np.nan
        self.version += 1

    def push_many(self, times, observables: dict) -> None:
        """Samples of several steps at once: ``times`` (n,), ``observables[name]`` (n,) each; the same result as
        n calls of ``push``, with the sliding-window spreads computed from running sums."""
        times = np.asarray(times, np.float64)
        n = len(times)
        if n == 0:
            return
        first = self._count
        before = min(first, self.window - 1, self.capacity)   # stored values the first windows reach back to
        stored = np.arange(first - before, first) % self.capacity
        keep = min(n, self.capacity)                           # only the last ``capacity`` samples are stored
        at = (first + n - keep + np.arange(keep)) % self.capacity
        spreads = {}
        for key, source in self.spreads.items():
            values = np.concatenate([self._values[source][stored], np.asarray(observables[source], np.float64)])
            spreads[key] = sliding_std(values, self.window, first - before)[before:][n - keep:]
        self._time[at] = times[n - keep:]
        for key in self.recorded:
            self._values[key][at] = np.asarray(observables[key], np.float64)[n - keep:]
        for key, spread in spreads.items():
            self._values[key][at] = spread
        self._count += n
        self.version += 1

    def arrays(self) -> tuple[np.ndarray, dict]:
        """(times, {name: values}) in chronological order."""
        n = len(self)
        order = np.arange(self._count - n, self._count) % self.capacity
        return self._time[order], {key: values[order] for key, values in self._values.items()}


def sliding_std(values: np.ndarray, window: int, first_index: int = 0) -> np.ndarray:
    """Standard deviation (population, as numpy's std) of each value with the ones before it, over the last
    ``window`` values, NaN where fewer than 2; ``first_index`` is the global index of ``values[0]`` (the window
    of sample j starts at max(0, j + 1 - window)), as ``ObservableHistory.push`` computes one at a time."""
    n = len(values)
    j = np.arange(n)
    lower = np.maximum(j + 1 - window, -first_index)    # no samples before global index 0
    lower = np.maximum(lower, 0)
    counts = j + 1 - lower
    if np.all(np.isfinite(values)):
        sums = np.concatenate([[0.0], np.cumsum(values)])
        squares = np.concatenate([[0.0], np.cumsum(values * values)])
        mean = (sums[j + 1] - sums[lower]) / counts
        spread = np.sqrt(np.maximum((squares[j + 1] - squares[lower]) / counts - mean * mean, 0.0))
    else:   # rare: a NaN would spread through the running sums
        spread = np.array([values[lo:k + 1].std() for lo, k in zip(lower, j)])
    return np.where(counts >= 2, spread, np.nan)


class FirstLook:
    """``model`` with what a runner records of it when it adopts it -- its observables and the cells its last step
    changed -- taken where it is made (a worker thread builds a model, then makes its FirstLook), so that the
    thread that adopts it does not compute them: on a large lattice on the CPU they would be most of the window's
    swap of a new model."""

    def __init__(self, model):
        self.model = model
        self.observables = model.observables()
        self.changed = model.changed()


class Runner:
    """Owns the model; steps it per frame; remembers which cells to highlight until the next frame."""

    def __init__(self, model_name: str, params: ModelParams | dict | None = None, backend: str = "auto",
                 history_length: int = 1000, spread_window: int = 50, samples_per_batch: int | None = None,
                 devices=None):
        self.backend = backend
        self.devices = devices         # the devices option: applies to the models that split (sim/multidevice)
        self.history_length, self.spread_window = history_length, spread_window
        # the history keeps at most this many samples of a batch of steps (``thin``); None: every step
        self.samples_per_batch = samples_per_batch
        self.model = self._build(get_model(model_name), params)
        self.pending: dict = {}        # reset parameters waiting for the next reset
        self.highlight = None          # cells changed since the last frame was shown
        self.state_version = 0         # bumps when what the view shows changes
        self.seconds_per_step = None   # running estimate of one step's cost (None: not measured yet)
        self._last_batch = 1
        self._waiting = []             # batches whose observables the device is still copying
        self._after_new_model()

    # ---- the model ---------------------------------------------------------------------------
    def _build(self, cls, params):
        if params is None or isinstance(params, dict):
            gpu = select_backend(self.backend).is_gpu
            params = cls.Params.create(gpu=gpu, **(params or {}))
        from latticelab.sim.multidevice.devices import device_option
        return cls(params, backend=self.backend, **device_option(cls, self.devices))

    @property
    def model_class(self):
        return type(self.model)

    @property
    def params(self) -> ModelParams:
        """The parameters as the user set them: the model's, with pending reset values applied."""
        return self.model.params.replace(**self.pending) if self.pending else self.model.params

    def switch(self, model_name: str, params: ModelParams | dict | None = None) -> None:
        """Replace the model by a new one of ``model_name``; the old one stays if that fails."""
        self._adopt(self._build(get_model(model_name), params))

    def load(self, model) -> None:
        """Adopt a model built elsewhere (rebuilt from a saved state, sim/state.py, or on a worker thread), or a
        ``FirstLook`` of one: then its first record is the one taken where it was built."""
        self._adopt(model)

    def _adopt(self, model) -> None:
        look = model if isinstance(model, FirstLook) else None
        self.model = look.model if look is not None else model
        self.pending = {}
        self._after_new_model(look)

    def _after_new_model(self, look: FirstLook | None = None) -> None:
        self.history = ObservableHistory(self.model.declared_observables, self.history_length, self.spread_window)
        self.history.new_segment(self.physics())
        # a loaded state shows what its last step changed
        self.highlight = look.changed if look is not None else self.model.changed()
        self.seconds_per_step, self._last_batch = None, 1
        self._waiting = []
        self.state_version += 1
        self._record(None if look is None else look.observables)

    # ---- parameters --------------------------------------------------------------------------
    def rebuilt_params(self, **changes) -> ModelParams | None:
        """The parameters of the new model that ``changes`` need (a field that ``applies`` on "rebuild" changed),
        or None when they apply to the running one; bad values raise ParameterError. ``set`` decides by the
        same rule; the window asks first, to build a large new model on a worker (app/model_lifecycle.py)."""
        current = self.params
        new = current.replace(**changes)
        fields = type(current).fields()
        return new if any(self._rebuilds(fields, k, current, new) for k in changes) else None

    @staticmethod
    def _rebuilds(fields: dict, name: str, current, new) -> bool:
        return fields[name]["applies"] == "rebuild" and getattr(current, name) != getattr(new, name)

    def physics(self) -> str:
        """The running model's parameters that can change while it runs (its ``live`` ones), as "name=value"
        words: what a segment of the plot history was taken under."""
        values = self.model.params.model_dump()
        return " ".join(f"{k}={values[k]}" for k in type(self.model.params).names("live"))

    def set(self, **changes) -> str:
        """Apply parameter changes as the schema says; returns "live", "reset" or "rebuild" (what happened).

        Bad values raise ParameterError and change nothing; a failed rebuild keeps the running model."""
        schema = self.model_class.Params
        current = self.params
        new = current.replace(**changes)          # validates every value, and their combination
        changed = {k: v for k, v in changes.items() if getattr(current, k) != getattr(new, k) or k in self.pending}
        if not changed:
            return "none"
        if any(self._rebuilds(schema.fields(), k, current, new) for k in changed):
            self._adopt(self._build(self.model_class, new))
            return "rebuild"
        live = {k: getattr(new, k) for k in changed if schema.fields()[k]["applies"] == "live"}
        if live:
            # a live change can need more memory (a larger p rewires more links): refuse it before allocating
            check_change_fits(self.model_class, current, new, self.model.backend_name, next(iter(live)))
            self.model.update(**live)
            self.state_version += 1
            self.history.new_segment(self.physics())   # statistics start again under the new physics
        for k in changed:
            if schema.fields()[k]["applies"] == "reset":
                self.pending[k] = getattr(new, k)
        return "live" if live else "reset"

    def reset(self, **values) -> None:
        """New initial state with the pending reset parameters and ``values`` (reset parameters only)."""
        schema = self.model_class.Params
        wrong = [k for k in values if k not in schema.names("reset")]
        if wrong:
            raise ParameterError(wrong[0], f"is not applied at a reset; reset takes {', '.join(schema.names('reset'))}")
        self.model.reset(**{**self.pending, **values})
        self.pending = {}
        self._waiting = []     # observables of the run before the reset
        self.highlight = self.model.changed()
        self.history.clear()
        self.state_version += 1
        self._record()

    # ---- stepping ----------------------------------------------------------------------------
    def advance(self, max_steps: int, budget_s: float | None = None) -> int:
        """Run up to ``max_steps`` steps, or (with ``budget_s``) as many as the measured cost of a step says fit
        in that many seconds -- at least one. The steps go to the model in one ``advance`` call (several per
        kernel launch sequence, observables copied once), their observables into the history, and the cells
        changed in any of them become the highlight. Returns the steps taken."""
        n = self.steps_for(max_steps, budget_s)
        if n < 1:
            return 0
        if budget_s is None:
            self.collect(wait=True)
            start = time.perf_counter()
            batch = self.model.advance(n)
        else:
            # A timed frame need not wait for the device: its observables arrive while the window draws. Its
            # steps are queued behind the last frame's before the host waits for those, so that a device goes
            # from one frame's steps to the next without waiting for the host to wake and launch (0.5-1 ms a
            # frame); at most two batches are in flight, the queue cannot grow behind a host that launches faster.
            start = time.perf_counter()
            batch = self.model.advance(n, wait=False)
            self.collect(wait=True)
        self.commit(batch, time.perf_counter() - start)
        return batch.steps

    @property
    def steps_in_last_frame(self) -> int:
        """How many steps the last batch took (1 after a new model): the steps whose changed cells ``highlight``
        joins."""
        return self._last_batch

    def collect(self, wait: bool = False) -> None:
        """Put the observables of finished batches (those the device was still copying) into the history, in
        order; with ``wait``, all of them."""
        while self._waiting and (wait or self._waiting[0].observables.ready()):
            batch = self._waiting.pop(0)
            pending = batch.observables
            self._push(batch.times, pending.result())
            seconds = pending.device_seconds()
            if seconds:
                self._measured(seconds, batch.steps)

    def steps_for(self, max_steps: int, budget_s: float | None) -> int:
        """How many steps the next ``advance`` takes: all ``max_steps`` without a budget; with one, what the
        recent cost per step predicts fits (doubling at most per frame, so a cheap start cannot overshoot)."""
        max_steps = int(max_steps)
        if budget_s is None or max_steps <= 1:
            return max(0, max_steps)
        if self.seconds_per_step is None:
            return 1
        fit = int(budget_s / max(self.seconds_per_step, 1e-9))
        return max(1, min(max_steps, fit, 2 * self._last_batch))

    def commit(self, batch, seconds: float | None = None) -> None:
        """Take a finished batch of steps (from ``advance`` here or from a worker thread that ran
        ``model.advance``): history, highlight, cost per step."""
        self._last_batch = max(1, batch.steps)
        if isinstance(batch.observables, dict):
            if seconds is not None and batch.steps:
                self._measured(seconds, batch.steps)
            self._push(batch.times, batch.observables)
        else:   # still on its way from the device: the cost per step comes with it (device time)
            self._waiting.append(batch)
        self.highlight = batch.changed
        self.state_version += 1

    def _measured(self, seconds: float, steps: int) -> None:
        per_step = seconds / steps
        old = self.seconds_per_step
        self.seconds_per_step = per_step if old is None else 0.5 * old + 0.5 * per_step

    def _push(self, times, observables) -> None:
        self.history.push_many(*thin(times, observables, self.samples_per_batch))

    def _record(self, observables: dict | None = None) -> None:
        self.history.push(self.model.time, self.model.observables() if observables is None else observables)

    # ---- what the views show -----------------------------------------------------------------
    def picture(self, highlight: bool = True, marks: bool = False):
        return self.model.picture(self.highlight if highlight else None, marks)
