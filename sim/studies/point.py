"""One point of a study: a pure function from the parameters to the rows of the results table.

``run_task(point)`` builds the model, equilibrates it, measures ``measurements`` samples ``decorrelate`` apart
(times in the model's own units; a ramp measures one window per stage) and returns the rows: the model's
parameters, the run settings, the measures the model declares (sim/studies/capability.py) with their errors,
the mean |rho| between consecutive sampled configurations (a check that they were decorrelated), the latticelab
version, the source's commit, backend and device. The same point
gives the same row (timings and the machine aside) wherever it runs: in this process, on a Dask worker, now or
after a resume.
"""
from __future__ import annotations

import functools
import json
import math
import subprocess
import time
from pathlib import Path

import numpy as np

from latticelab.sim.studies.spec import Point

RUN_COLUMNS = ("equilibrate", "decorrelate", "measurements", "blocks")
RAMP_COLUMNS = ("branch", "stage")
INFO_COLUMNS = ("n_sites", "abs_rho_next", "wall_s", "backend", "device", "latticelab_version", "code_version",
                "protocol", "point")
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


def package_version() -> str:
    try:
        from importlib.metadata import version
        return version("latticelab")
    except Exception:
        return "unknown"


def columns(model_class, measures=None, ramp: bool = False) -> list[str]:
    """The table's columns for a model: model, its parameters, the ramp's branch and stage (with a ramp), the
    run settings, the measures and their errors (default: every measure the model can give), then the
    information columns (the latticelab version, the source's commit, the protocol and the point's key)."""
    from latticelab.sim.studies.capability import all_measures
    if measures is None:
        measures = tuple(all_measures(model_class))
    measure_columns = [c for q in measures for c in (q, f"{q}_err")]
    return ["model", *model_class.Params.model_fields, *(RAMP_COLUMNS if ramp else ()), *RUN_COLUMNS,
            *measure_columns, *INFO_COLUMNS]


def study_columns(study) -> list[str]:
    from latticelab.sim.models import get_model
    return columns(get_model(study.model), study.quantities, ramp=study.ramp is not None)


def run_point(point: Point, checkpoint=None) -> dict:
    """Measure a point without a ramp; returns its one row (see ``run_task``)."""
    rows = run_task(point, checkpoint)
    if len(rows) != 1:
        raise ValueError("run_point: the point has a ramp (several rows); use run_task")
    return rows[0]


def run_task(point: Point, checkpoint=None) -> list[dict]:
    """Run one point: build the model, equilibrate it (the schedule's changes applied when their time comes),
    then measure a window of ``measurements`` samples ``decorrelate`` apart -- or, with a ramp, for each stage
    set the ramped parameter, settle and measure a window. Returns the rows (a dict over ``columns``; measures
    that are undefined are None).

    ``checkpoint()``, when given, is called between pieces of the run: a sweep steered from another thread
    pauses or stops there (sweep.py SweepControl). Stepping in pieces gives the same configurations as
    stepping at once."""
    from latticelab.sim.models import get_model
    from latticelab.sim.studies.timeline import Timeline

    start = time.perf_counter()
    cls = get_model(point.model)
    values = point.values
    if point.stages:                          # the run starts at the ramp's first value
        values[point.ramp_parameter] = point.stages[0][1]
    model = cls(cls.Params(**values), backend=point.backend)
    timeline = Timeline(model, point.schedule, checkpoint)
    timeline.advance(point.equilibrate)
    rows = []
    if not point.stages:
        measured, rho = _window(cls, model, point, timeline)
        rows.append(_row(point, model, measured, rho, point.key, {}))
    for i, (branch, value) in enumerate(point.stages):
        if i:
            model.update(**{point.ramp_parameter: value})
            timeline.advance(point.settle)
        measured, rho = _window(cls, model, point, timeline)
        rows.append(_row(point, model, measured, rho, f"{point.key}-{i}",
                         {point.ramp_parameter: value, "branch": branch, "stage": i}))
    wall = round(time.perf_counter() - start, 3)
    for row in rows:
        row["wall_s"] = round(wall / len(rows), 3)
    return rows


def _window(cls, model, point: Point, timeline) -> tuple[dict, float | None]:
    """The measures over one window: (name -> (value, error), mean |rho| of consecutive main fields)."""
    from latticelab.sim.analysis.critical import main_field_array, pearson
    from latticelab.sim.studies.capability import ObservableRecorder, all_measures, capability, observable_measures
    cap = capability(cls)
    wanted = set(point.quantities)
    observed = ObservableRecorder([m.name for m in observable_measures(cls) if m.name in wanted])
    recorders = [observed]
    if cap.recorder is not None and wanted & {m.name for m in cap.derived}:
        recorders.append(cap.recorder(cls, tuple(wanted)))
    for r in recorders:
        r.start(model)
    rho, previous = [], None
    for i in range(point.measurements):
        if i:
            timeline.advance(point.decorrelate)
        elif timeline.checkpoint is not None:
            timeline.checkpoint()
        for r in recorders:
            r.sample(model)
        field = main_field_array(model)
        if previous is not None:
            rho.append(abs(pearson(previous, field)))
        previous = field.copy()
    measured = {}
    for r in recorders:
        measured.update(r.result(model, point.blocks))
    known = all_measures(cls)
    measured = {k: v for k, v in measured.items() if k in known}
    finite = [x for x in rho if math.isfinite(x)]
    return measured, (float(np.mean(finite)) if finite else None)


def _row(point: Point, model, measured: dict, rho, key: str, stage: dict) -> dict:
    row = {"model": point.model, **point.values, **stage, **{c: getattr(point, c) for c in RUN_COLUMNS}}
    for q in point.quantities:
        value, err = measured.get(q, (None, None))
        row[q] = _clean(value)
        row[f"{q}_err"] = _clean(err)
    row.update(n_sites=int(np.prod(model.shape)), abs_rho_next=_clean(rho), backend=model.backend_name,
               device=model.device_name, latticelab_version=package_version(), code_version=code_version(),
               protocol=json.dumps(point.protocol, sort_keys=True, separators=(",", ":")), point=key)
    return row


def _clean(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def measure_point(model: str, L: int, p: float, T: float, seed: int, equilibrate: int, decorrelate: int,
                  measurements: int, backend: str = "auto", blocks: int = 32, **params) -> dict:
    """``run_point`` from plain values (model, L, p, T, seed, steps, measurements; other schema fields as
    keywords): the parameters are validated by the model's schema first."""
    from latticelab.sim.models import get_model
    from latticelab.sim.studies.capability import all_measures, unavailable_measures
    cls = get_model(model)
    values = {"L": L, "p": p, "T": T, "seed": seed, **params}
    values = {k: v for k, v in values.items() if k in cls.Params.model_fields or k in params}
    validated = cls.Params.create(gpu=False, **values)
    missing = unavailable_measures(cls)
    point = Point(model=model, params=tuple(validated.model_dump().items()), equilibrate=equilibrate,
                  decorrelate=decorrelate, measurements=measurements, blocks=blocks, backend=backend,
                  quantities=tuple(q for q in all_measures(cls) if q not in missing))
    return run_point(point)
