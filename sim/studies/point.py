"""One point of a study: a pure function from the parameters to one row of the results table.

``run_point(point)`` builds the model, equilibrates it, measures ``measurements`` configurations
``decorrelate`` steps apart and returns the row: the model's parameters, the run settings, the measured
quantities with their errors (sim/analysis/critical.py), the mean |rho| between consecutive measured
configurations (a check that they were decorrelated), the code version, backend and device. The same point
gives the same row (timings and the machine aside) wherever it runs: in this process, on a Dask worker, now or
after a resume.
"""
from __future__ import annotations

import functools
import math
import subprocess
import time
from pathlib import Path

import numpy as np

from latticelab.sim.studies.spec import Point

RUN_COLUMNS = ("equilibrate", "decorrelate", "measurements", "blocks")
INFO_COLUMNS = ("n_sites", "abs_rho_next", "wall_s", "backend", "device", "code_version", "point")
TIMING_COLUMNS = ("wall_s",)          # differ between two runs of the same point


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``git describe --tags --always --dirty`` of the source tree when it is a git checkout, else the
    installed package version."""
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(["git", "-C", str(root), "describe", "--tags", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=10)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        from importlib.metadata import version
        return version("latticelab")
    except Exception:
        return "unknown"


def columns(model_class) -> list[str]:
    """The table's columns for a model: model, its parameters, the run settings, the quantities and errors,
    then the information columns."""
    from latticelab.sim.analysis.critical import QUANTITIES
    quantity_columns = [c for q in QUANTITIES for c in (q, f"{q}_err")]
    return ["model", *model_class.Params.model_fields, *RUN_COLUMNS, *quantity_columns, *INFO_COLUMNS]


def run_point(point: Point, checkpoint=None) -> dict:
    """Measure one point; returns the row (a dict over ``columns``; unavailable quantities are None).

    ``checkpoint()``, when given, is called between pieces of the run (a few dozen during equilibration, and
    before each measurement): a sweep steered from another thread pauses or stops there (sweep.py
    SweepControl). Stepping in pieces gives the same configurations as stepping at once."""
    from latticelab.sim.analysis.critical import (QUANTITIES, main_field_array, measurer, pearson,
                                                  thermodynamics)
    from latticelab.sim.models import get_model

    start = time.perf_counter()
    cls = get_model(point.model)
    params = cls.Params(**point.values)
    model = cls(params, backend=point.backend)
    measure = measurer(cls)
    n_sites = int(np.prod(model.shape))
    _step(model, point.equilibrate, checkpoint)
    series = {name: np.empty(point.measurements) for name in measure.series}
    rho = np.empty(point.measurements - 1)
    previous = None
    for i in range(point.measurements):
        if checkpoint is not None:
            checkpoint()
        if i:
            model.step(point.decorrelate)
        for name, value in measure(model).items():
            series[name][i] = value
        field = main_field_array(model)
        if previous is not None:
            rho[i - 1] = abs(pearson(previous, field))
        previous = field.copy()
    T = point.values.get("T", math.nan)
    stats = thermodynamics(T, n_sites, series.get("energy"), series.get("magnetisation"), n_blocks=point.blocks)
    row = {"model": point.model, **point.values,
           **{c: getattr(point, c) for c in RUN_COLUMNS}}
    for q in QUANTITIES:
        wanted = q in point.quantities
        row[q] = _clean(stats.get(q)) if wanted else None
        row[f"{q}_err"] = _clean(stats.get(f"{q}_err")) if wanted else None
    row.update(n_sites=n_sites, abs_rho_next=_clean(float(np.nanmean(rho))) if rho.size else None,
               wall_s=round(time.perf_counter() - start, 3), backend=model.backend_name,
               device=model.device_name, code_version=code_version(), point=point.key)
    return row


EQUILIBRATION_PIECES = 50


def _step(model, steps: int, checkpoint) -> None:
    """``model.step(steps)``, in up to EQUILIBRATION_PIECES pieces with ``checkpoint()`` before each."""
    if checkpoint is None:
        model.step(steps)
        return
    piece = max(1, -(-steps // EQUILIBRATION_PIECES))
    done = 0
    while done < steps:
        checkpoint()
        n = min(piece, steps - done)
        model.step(n)
        done += n


def _clean(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def measure_point(model: str, L: int, p: float, T: float, seed: int, equilibrate: int, decorrelate: int,
                  measurements: int, backend: str = "auto", blocks: int = 32, **params) -> dict:
    """``run_point`` from plain values (model, L, p, T, seed, steps, measurements; other schema fields as
    keywords): the parameters are validated by the model's schema first."""
    from latticelab.sim.analysis.critical import QUANTITIES, measurer
    from latticelab.sim.models import get_model
    cls = get_model(model)
    values = {"L": L, "p": p, "T": T, "seed": seed, **params}
    values = {k: v for k, v in values.items() if k in cls.Params.model_fields or k in params}
    validated = cls.Params.create(gpu=False, **values)
    missing = measurer(cls).missing
    point = Point(model=model, params=tuple(validated.model_dump().items()), equilibrate=equilibrate,
                  decorrelate=decorrelate, measurements=measurements, blocks=blocks, backend=backend,
                  quantities=tuple(q for q in QUANTITIES if q not in missing))
    return run_point(point)
