"""What every output file says about the run that made it: the model, its parameters with their units,
latticelab's version and git commit, the backend, and the units of the time axis, cells and observables.

Attribute names follow the CF conventions where they fit (``Conventions``, ``title``, ``institution``-free
``source`` and ``history``; ``units`` and ``long_name`` on every variable); parameters are flat attributes
``parameter_<name>`` (and ``parameter_<name>_units``) so that NetCDF tools, which allow no nested
attributes, keep them.
"""
from __future__ import annotations

import datetime
import re

import numpy as np

CONVENTIONS = "CF-1.10"


def time_units(model_class) -> str:
    """The unit of a model's time axis from its ``time_label``: "time (ms)" -> "ms"; steps and dimensionless
    simulated time -> "1"."""
    match = re.search(r"\(([^)]+)\)\s*$", model_class.time_label)
    return match.group(1) if match else "1"


def field_units(model, name: str) -> str:
    return type(model).field_units.get(name, "1")


def grid_spacing(model) -> float:
    """Distance between cell centres in the model's length unit (1: lattice units)."""
    return float(model.grid_spacing)


def _plain(value):
    """A parameter value as a JSON/NetCDF attribute (numbers, text; anything else as its text)."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, float, str, np.integer, np.floating)):
        return value.item() if isinstance(value, np.generic) else value
    return str(value)


def run_attributes(model) -> dict:
    """The global attributes of a file written for ``model``."""
    from latticelab.version import __version__
    from latticelab.sim.studies.point import code_version
    attrs = {
        "Conventions": CONVENTIONS,
        "title": f"latticelab {model.title}",
        "source": f"latticelab {__version__}",
        "history": f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')} written by "
                   f"latticelab {__version__}",
        "model": model.name,
        "model_title": model.title,
        "latticelab_version": __version__,
        "latticelab_commit": code_version(),
        "backend": model.backend_name,
        "device": model.device_name,
        "time_label": type(model).time_label,
    }
    schema = type(model.params).fields()
    for name, value in model.params.model_dump().items():
        attrs[f"parameter_{name}"] = _plain(value)
        unit = schema.get(name, {}).get("unit")
        if unit:
            attrs[f"parameter_{name}_units"] = unit
    return attrs


def parameters_of(attrs: dict) -> dict:
    """The parameters stored by ``run_attributes`` (for checking that a store continues the same run)."""
    return {k[len("parameter_"):]: v for k, v in attrs.items()
            if k.startswith("parameter_") and not k.endswith("_units")}
