"""A measure against a parameter from a results table, for plots: the rows' mean over seeds at each value of the
parameter, with its error, one curve per value of a second parameter and per branch of a ramp (up, down: a
hysteresis loop is two curves). Which columns are measures and which parameters vary is read from the table.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from latticelab.sim.studies.tc import parameter_names


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def measure_columns(rows: list[dict]) -> list[str]:
    """Columns with an ``_err`` partner and a number in some row, in table order."""
    if not rows:
        return []
    names = [k for k in rows[0] if f"{k}_err" in rows[0]]
    return [k for k in names if any(_number(r.get(k)) for r in rows)]


def varying_parameters(rows: list[dict]) -> list[str]:
    """The model's parameters that take more than one value among the rows (seed last)."""
    if not rows:
        return []
    names = [k for k in parameter_names(rows[0]) if k != "model"]
    varying = [k for k in names if len({repr(r.get(k)) for r in rows}) > 1]
    return sorted(varying, key=lambda k: k == "seed")


def curves(rows: list[dict], measure: str, x: str, by: str | None = None, also: tuple = ()) -> dict:
    """Series label -> (x values, mean, error), x ascending: rows grouped by ``by`` (when given), the parameters
    ``also`` and the ramp's branch (when the table has one), averaged over the other rows (seeds) at each x. The
    error is the standard error over those rows, or a single row's own ``<measure>_err``."""
    grouped: dict = defaultdict(lambda: defaultdict(list))
    also = tuple(a for a in also if a not in (x, by))
    for row in rows:
        value, at = row.get(measure), row.get(x)
        if not (_number(value) and _number(at)) or not np.isfinite(value):
            continue
        parts = []
        if by:
            parts.append(row.get(by))
        parts += [f"{a} = {row.get(a)}" for a in also]
        if row.get("branch"):
            parts.append(row["branch"])
        grouped[tuple(parts)][float(at)].append(row)
    out = {}
    for key in sorted(grouped, key=lambda k: [(str(type(p)), p) for p in k]):
        by_x = grouped[key]
        xs = sorted(by_x)
        mean, err = [], []
        for v in xs:
            values = [float(r[measure]) for r in by_x[v]]
            mean.append(float(np.mean(values)))
            if len(values) > 1:
                err.append(float(np.std(values, ddof=1) / np.sqrt(len(values))))
            else:
                own = by_x[v][0].get(f"{measure}_err")
                err.append(float(own) if _number(own) and np.isfinite(own) else 0.0)
        label = _label(key, by)
        out[label] = (np.array(xs), np.array(mean), np.array(err))
    return out


def _label(key: tuple, by: str | None) -> str | int:
    if by == "L" and len(key) == 1 and isinstance(key[0], int):
        return key[0]                       # the Binder plots' legend ("L = 8")
    parts = []
    if by:
        parts.append(f"{by} = {key[0]}")
        key = key[1:]
    parts += [str(k) for k in key]
    return ", ".join(parts) or "all"
