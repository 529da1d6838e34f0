"""What the Study dock (app/study_panel.py) shows of a results table, computed off the GUI thread: the table's
rows checked, and, for a table of Binder moments (the columns of sim/studies/tc.py: a size, a temperature and
<m^2>, <m^4>), the curves per size and the T_c of each group of rows with its bootstrap error. Which columns
those are is tc.py's to say; nothing here names a model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from latticelab.render.study_plots import QUANTITIES
from latticelab.sim.params import ParameterError
from latticelab.sim.studies.tc import AXES

BOOTSTRAP = 200                    # samples for the T_c error shown live
SIZE, TEMPERATURE = AXES[:2]       # the Binder analysis's size and temperature columns
MOMENTS = ("m2", "m4")             # the moments of the order parameter it needs


@dataclass
class GroupView:
    """What the plot shows of one group of rows (one value of every parameter but the size, the temperature and
    the seed)."""
    name: str
    curves: dict          # quantity -> size -> (T, mean, err)
    result: object        # tc.GroupResult
    rows: int = 0


@dataclass
class Summary:
    groups: list = field(default_factory=list)
    rows: int = 0


def has_binder_moments(rows: list[dict]) -> bool:
    return bool(rows) and {SIZE, TEMPERATURE, *MOMENTS} <= set(rows[0])


def summarise(rows: list[dict], n_boot: int = BOOTSTRAP) -> Summary:
    """Curves and T_c of every group of rows (runs in a worker thread); none for a table without Binder
    moments (its plots need no analysis)."""
    from latticelab.sim.studies import tc
    if not has_binder_moments(rows):
        return Summary([], len(rows))
    results = []
    for key, group in tc.group_rows(rows).items():
        result = tc.analyse_group(group, n_boot=n_boot)
        result.label = dict(key)
        results.append((result, group))
    varying = tc.varying_keys([r for r, _ in results])
    views = []
    for result, group in results:
        name = ", ".join(f"{k}={v}" for k, v in result.label.items() if k in varying and k != "model") or "all"
        curves = {q: tc.curve_points(group, q) for q in QUANTITIES}
        views.append(GroupView(name, curves, result, len(group)))
    return Summary(views, len(rows))


def check_table_rows(path, rows) -> list[dict]:
    """The rows of a results table fit to show (a Binder table's impossible and repeated rows dropped, tc.py);
    a file that is not a table of 'latticelab sweep' raises ParameterError."""
    from latticelab.sim.studies.curves import measure_columns
    if rows and ("model" not in rows[0] or not measure_columns(rows)):
        raise ParameterError("table", f"{path} is not a results table of 'latticelab sweep' (no model column or "
                                      "no measure with its _err column)")
    if has_binder_moments(rows):
        from latticelab.sim.studies.tc import validate_rows
        rows, _ = validate_rows(rows, path)
    return rows


def describe_result(result) -> str:
    """'T_c = 2.2691 ± 0.0042 (U* = 0.61) from L 8/16' or why there is none yet."""
    if result.T_c is None:
        why = result.warnings[0] if result.warnings else "no Binder crossing"
        return f"T_c: {why}"
    err = f" ± {result.T_c_err:.2g}" if math.isfinite(result.T_c_err) else ""
    pairs = ", ".join(f"{c.L_small}/{c.L_large}" for c in result.crossings if c.T is not None)
    text = f"T_c = {result.T_c:.5g}{err}, U* = {result.U_c:.3f} ({SIZE} {pairs})"
    extra = [w for w in result.warnings if "cross" in w]
    return text + ("\n" + "; ".join(extra) if extra else "")


def is_binder_view(summary: Summary | None, measure: str | None, x: str | None, by: str | None) -> bool:
    """Whether the plot asked for is a Binder analysis's: U, C_v or chi against the temperature by size."""
    return summary is not None and bool(summary.groups) and x == TEMPERATURE and by == SIZE and measure in QUANTITIES


def plot_choices(rows: list[dict], hint: dict, study_measures=(), study_axes=()) -> tuple[list, list, list]:
    """(measures, parameters, 'by' parameters) a plot of ``rows`` offers, each list with the preferred first:
    ``hint`` is the model's (capability.py ``plot_hint``); ``study_measures`` / ``study_axes`` stand in while no
    row has arrived yet."""
    from latticelab.sim.studies.curves import measure_columns, varying_parameters
    measures = measure_columns(rows) or list(study_measures)
    params = [p for p in varying_parameters(rows) if p != "seed"] or [a for a in study_axes if a != "seed"]

    def first(items, preferred):
        return sorted(items, key=lambda k: k != preferred)
    measures = first(measures, hint.get("measure"))
    params = first(params, hint.get("against"))
    x = params[0] if params else None
    sizes = [SIZE] if has_binder_moments(rows) and SIZE not in params else []    # Binder curves by size
    by = first([p for p in params if p != x] + sizes, hint.get("by"))
    return measures, params, by
