"""The running simulation behind the window: one IsingModel, its plot history and the per-frame stepping.

No Qt here: the window calls ``advance`` from its frame timer and shows the model's spins with ``highlight``.
Parameter changes go straight to the running model (no restart) unless they need a new lattice (dim, L,
backend); invalid values raise the model's ParameterError and leave everything as it was.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

from latticelab.app.history import ObservableHistory
from latticelab.render.upload import encode_state
from latticelab.sim.models.ising.model import IsingModel

DEFAULT_T = {2: 2.25, 3: 4.45}   # just below T_c (2.2692 in 2D, 4.5115 in 3D)


def default_L(dim: int, gpu: bool) -> int:
    if dim == 2:
        return 2048 if gpu else 512
    return 256 if gpu else 64


@dataclass(frozen=True)
class SimulationParameters:
    dim: int = 2
    L: int = 512
    T: float = DEFAULT_T[2]
    p: float = 0.0
    rewire_dims: str = "all"
    algorithm: str = "metropolis"
    seed: int = 1
    backend: str = "auto"
    start: str = "hot"

    def model_kwargs(self) -> dict:
        return asdict(self)


class Session:
    """Owns the model; counts steps; remembers which cells to highlight until the next step."""

    def __init__(self, parameters: SimulationParameters, history_length: int = 1000, std_window: int = 50):
        self.history = ObservableHistory(history_length, std_window)
        self.model = IsingModel(**parameters.model_kwargs())
        self.parameters = parameters
        self.highlight = None          # cells flipped since the last frame was shown
        self.state_version = 0         # bumps when the spins, highlight or graph change
        self._rewired_mask = None
        self._rewired_graph = None
        self._record()

    # ---- parameters --------------------------------------------------------------------------
    def current_parameters(self) -> SimulationParameters:
        m = self.model
        return replace(self.parameters, dim=m.dim, L=m.L, T=m.T, p=m.p, rewire_dims=m.rewire_dims,
                       algorithm=m.algorithm, seed=m.seed)

    def set_temperature(self, T: float) -> None:
        self.model.T = T

    def set_algorithm(self, algorithm: str) -> None:
        self.model.algorithm = algorithm

    def set_rewiring(self, p=None, rewire_dims=None) -> None:
        """New graph, same spins."""
        self.model.set_rewiring(p=p, rewire_dims=rewire_dims)
        self.state_version += 1

    def rebuild(self, parameters: SimulationParameters) -> None:
        """A new model (dimension, size or backend changed); the old one stays if this fails."""
        model = IsingModel(**parameters.model_kwargs())
        self._adopt(model, parameters)

    def reset(self, start: str, seed: int | None = None) -> None:
        self.model.reset(start=start, seed=seed)
        self.parameters = replace(self.parameters, start=start)
        self._after_new_spins()

    def load_state(self, state: dict) -> None:
        model = IsingModel.from_state(state, backend=self.parameters.backend)
        self._adopt(model, self.parameters)

    def _adopt(self, model: IsingModel, parameters: SimulationParameters) -> None:
        self.model = model
        self.parameters = replace(parameters, dim=model.dim, L=model.L)
        self.parameters = self.current_parameters()
        self._after_new_spins()

    def _after_new_spins(self) -> None:
        self.highlight = self.model.flipped   # a loaded state shows what its last step flipped
        self.history.clear()
        self.state_version += 1
        self._record()

    # ---- stepping ----------------------------------------------------------------------------
    def advance(self, max_steps: int, budget_s: float | None) -> int:
        """Run up to ``max_steps`` steps, stopping early once ``budget_s`` seconds are used (at least one
        step is always taken). Cells flipped in any of these steps are highlighted. Returns steps taken."""
        model = self.model
        xp = model.xp
        start = time.perf_counter()
        taken = 0
        highlight = None
        while taken < max_steps:
            model.step(1)
            taken += 1
            highlight = model.flipped.copy() if highlight is None else xp.logical_or(highlight, model.flipped,
                                                                                       out=highlight)
            self._record()
            if budget_s is not None and time.perf_counter() - start > budget_s:
                break
        if taken:
            self.highlight = highlight
            self.state_version += 1
        return taken

    def _record(self) -> None:
        self.history.push(self.model.step_count, self.model.observables())

    # ---- what the views show -----------------------------------------------------------------
    def rewired_mask(self):
        """Backend bool mask of sites touched by rewiring, cached per graph."""
        if self._rewired_graph is not self.model.graph:
            self._rewired_mask = self.model.rewired_site_mask()
            self._rewired_graph = self.model.graph
        return self._rewired_mask

    def state_codes(self, with_rewired: bool = False):
        """uint8 state codes (render/upload.py encoding), computed on the model's device."""
        m = self.model
        return encode_state(m.xp, m.spins, self.highlight, self.rewired_mask() if with_rewired else None)
