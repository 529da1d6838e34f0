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
from latticelab.sim.models import get_model
from latticelab.sim.params import ModelParams, ParameterError


class ObservableHistory:
    """The last ``capacity`` samples of each declared observable, plus the standard deviation over a sliding
    window of the most recent ``window`` samples for those declared with ``spread`` (named ``<name>_std``)."""

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
        self.version = 0  # increases with every change, so views redraw only when needed

    def __len__(self) -> int:
        return min(self._count, self.capacity)

    def clear(self) -> None:
        self._count = 0
        for values in self._values.values():
            values.fill(np.nan)
        self.version += 1

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

    def arrays(self) -> tuple[np.ndarray, dict]:
        """(times, {name: values}) in chronological order."""
        n = len(self)
        order = np.arange(self._count - n, self._count) % self.capacity
        return self._time[order], {key: values[order] for key, values in self._values.items()}


class Runner:
    """Owns the model; steps it per frame; remembers which cells to highlight until the next frame."""

    def __init__(self, model_name: str, params: ModelParams | dict | None = None, backend: str = "auto",
                 history_length: int = 1000, spread_window: int = 50):
        self.backend = backend
        self.history_length, self.spread_window = history_length, spread_window
        self.model = self._build(get_model(model_name), params)
        self.pending: dict = {}        # reset parameters waiting for the next reset
        self.highlight = None          # cells changed since the last frame was shown
        self.state_version = 0         # bumps when what the view shows changes
        self._after_new_model()

    # ---- the model ---------------------------------------------------------------------------
    def _build(self, cls, params):
        if params is None or isinstance(params, dict):
            gpu = select_backend(self.backend).is_gpu
            params = cls.Params.create(gpu=gpu, **(params or {}))
        return cls(params, backend=self.backend)

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
        """Adopt a model rebuilt from a saved state (sim/state.py)."""
        self._adopt(model)

    def _adopt(self, model) -> None:
        self.model = model
        self.pending = {}
        self._after_new_model()

    def _after_new_model(self) -> None:
        self.history = ObservableHistory(self.model.declared_observables, self.history_length, self.spread_window)
        self.highlight = self.model.changed()   # a loaded state shows what its last step changed
        self.state_version += 1
        self._record()

    # ---- parameters --------------------------------------------------------------------------
    def set(self, **changes) -> str:
        """Apply parameter changes as the schema says; returns "live", "reset" or "rebuild" (what happened).

        Bad values raise ParameterError and change nothing; a failed rebuild keeps the running model."""
        schema = self.model_class.Params
        current = self.params
        new = current.replace(**changes)          # validates every value, and their combination
        changed = {k: v for k, v in changes.items() if getattr(current, k) != getattr(new, k) or k in self.pending}
        if not changed:
            return "none"
        kinds = {schema.fields()[k]["applies"] for k in changed}
        if "rebuild" in kinds:
            self._adopt(self._build(self.model_class, new))
            return "rebuild"
        live = {k: getattr(new, k) for k in changed if schema.fields()[k]["applies"] == "live"}
        if live:
            self.model.update(**live)
            self.state_version += 1
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
        self.highlight = self.model.changed()
        self.history.clear()
        self.state_version += 1
        self._record()

    # ---- stepping ----------------------------------------------------------------------------
    def advance(self, max_steps: int, budget_s: float | None = None) -> int:
        """Run up to ``max_steps`` steps, stopping early once ``budget_s`` seconds are used (at least one
        step is always taken). Cells changed in any of these steps are highlighted. Returns steps taken."""
        model = self.model
        xp = model.xp
        start = time.perf_counter()
        taken = 0
        highlight = None
        while taken < max_steps:
            model.step(1)
            taken += 1
            changed = model.changed()
            if changed is not None:
                highlight = changed.copy() if highlight is None else xp.logical_or(highlight, changed, out=highlight)
            self._record()
            if budget_s is not None and time.perf_counter() - start > budget_s:
                break
        if taken:
            self.highlight = highlight
            self.state_version += 1
        return taken

    def _record(self) -> None:
        self.history.push(self.model.time, self.model.observables())

    # ---- what the views show -----------------------------------------------------------------
    def picture(self, highlight: bool = True, marks: bool = False):
        return self.model.picture(self.highlight if highlight else None, marks)
