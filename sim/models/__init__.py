"""The model registry: one line per model, name -> "module:Class".

Adding a model is one package under sim/models/ plus one line here (docs/adding-a-model.md). Entries are
imported on first use, so starting the application does not import every model; generic code asks the
registry and never names a model. Models do not import each other (an import-linter contract).
"""
from __future__ import annotations

import importlib

from latticelab.sim.params import ParameterError

REGISTRY: dict[str, str] = {
    "ising": "latticelab.sim.models.ising.model:IsingModel",
    "cahn-hilliard": "latticelab.sim.models.cahn_hilliard.model:CahnHilliardModel",
    "cortex": "latticelab.sim.models.cortex.model:CortexModel",
}

_loaded: dict[str, type] = {}


def model_names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def get_model(name: str) -> type:
    """The model class registered as ``name``; an unknown name raises ParameterError('model', ...)."""
    if name not in REGISTRY:
        raise ParameterError("model", f"must be one of {', '.join(REGISTRY)}; got {name!r}")
    if name not in _loaded:
        module, _, cls = REGISTRY[name].partition(":")
        model_class = getattr(importlib.import_module(module), cls)
        if model_class.name != name:
            raise RuntimeError(f"registry entry {name!r} points to a model named {model_class.name!r}")
        _loaded[name] = model_class
    return _loaded[name]


def all_models() -> dict[str, type]:
    return {name: get_model(name) for name in REGISTRY}
