"""T_c from a results table: Binder-cumulant crossings of the U(T) curves of consecutive lattice sizes.

Rows are grouped by every parameter except L, T and seed (so one group per p, dimension, ...). Per (L, T)
the seeds are pooled: U = 1 - <m^4> / (3 <m^2>^2) from the mean moments over seeds. For each pair of
consecutive sizes the crossing is where U_larger - U_smaller changes sign from + (below T_c the larger
lattice is more ordered) to -, found by linear interpolation between the measured temperatures; T_c is the
mean of the pair crossings. Its error comes from a bootstrap over the seeds (the seed rows of every (L, T) are
resampled with replacement); with one seed per (L, T), U is resampled from its jackknife error instead.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

GROUP_EXCLUDED = {"L", "T", "seed", "equilibrate", "decorrelate", "measurements", "blocks", "point", "wall_s",
                  "backend", "device", "code_version", "n_sites", "abs_rho_next"}


def load_rows(path) -> list[dict]:
    """The rows of a results table (CSV or Parquet), values typed (int, float, text; empty -> None)."""
    from latticelab.sim.studies.sweep import parse_row, read_csv_rows
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        return pq.read_table(path).to_pylist()
    _, rows = read_csv_rows(path)
    return [parse_row(row) for row in rows]


@dataclass
class Crossing:
    L_small: int
    L_large: int
    T: float | None
    U: float | None
    T_err: float = math.nan


@dataclass
class GroupResult:
    label: dict
    Ls: list
    crossings: list = field(default_factory=list)
    T_c: float | None = None
    T_c_err: float = math.nan
    U_c: float | None = None
    peaks: dict = field(default_factory=dict)      # (quantity, L) -> T of the largest value
    warnings: list = field(default_factory=list)


def group_rows(rows: list[dict]) -> dict[tuple, list[dict]]:
    groups = defaultdict(list)
    for row in rows:
        key = tuple(sorted((k, v) for k, v in row.items() if k not in GROUP_EXCLUDED
                           and not _is_quantity(k) and v is not None))
        groups[key].append(row)
    return dict(groups)


def _is_quantity(name: str) -> bool:
    from latticelab.sim.analysis.critical import QUANTITIES
    return name in QUANTITIES or name.removesuffix("_err") in QUANTITIES


def _curves(rows) -> dict[int, dict[float, list[dict]]]:
    """L -> T -> the seed rows."""
    out: dict = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.get("m2") is not None and row.get("m4") is not None:
            out[int(row["L"])][float(row["T"])].append(row)
    return out


def pooled_binder(rows) -> float:
    m2 = np.mean([r["m2"] for r in rows])
    m4 = np.mean([r["m4"] for r in rows])
    return float(1.0 - m4 / (3.0 * m2 ** 2))


def crossing(Ts_a, U_a, Ts_b, U_b) -> tuple[float | None, float | None, int]:
    """(T, U) where the larger lattice's curve b crosses the smaller one's a from above to below, by linear
    interpolation on the temperatures both cover; the steepest such crossing when there are several, and
    their count. (None, None, 0) when the curves do not cross in that direction."""
    Ts = np.union1d(Ts_a, Ts_b)
    Ts = Ts[(Ts >= max(min(Ts_a), min(Ts_b))) & (Ts <= min(max(Ts_a), max(Ts_b)))]
    if Ts.size < 2:
        return None, None, 0
    ua, ub = np.interp(Ts, Ts_a, U_a), np.interp(Ts, Ts_b, U_b)
    d = ub - ua
    idx = [i for i in range(Ts.size - 1) if d[i] >= 0 > d[i + 1] or (d[i] > 0 >= d[i + 1])]
    if not idx:
        return None, None, 0
    i = max(idx, key=lambda j: d[j] - d[j + 1])
    f = d[i] / (d[i] - d[i + 1])
    T = float(Ts[i] + f * (Ts[i + 1] - Ts[i]))
    return T, float(ua[i] + f * (ua[i + 1] - ua[i])), len(idx)


def _pair_crossings(curves, Ls, pick) -> list[tuple[float | None, float | None, int]]:
    out = []
    for a, b in zip(Ls, Ls[1:]):
        Ta = sorted(curves[a])
        Tb = sorted(curves[b])
        out.append(crossing(np.array(Ta), np.array([pick(a, T) for T in Ta]),
                            np.array(Tb), np.array([pick(b, T) for T in Tb])))
    return out


def analyse_group(rows, n_boot: int = 500, seed: int = 0) -> GroupResult:
    """Crossings, T_c with its bootstrap error, and the peak temperatures of C_v and chi per L."""
    curves = _curves(rows)
    Ls = sorted(curves)
    label = dict(next(iter(group_rows(rows)))) if rows else {}
    result = GroupResult(label=label, Ls=Ls)
    for q in ("heat_capacity", "susceptibility"):
        for L in Ls:
            means = {T: np.mean([r[q] for r in rs if r.get(q) is not None] or [np.nan])
                     for T, rs in curves[L].items()}
            finite = {T: v for T, v in means.items() if np.isfinite(v)}
            if finite:
                result.peaks[(q, L)] = max(finite, key=finite.get)
    if len(Ls) < 2:
        result.warnings.append("needs at least two lattice sizes L for a crossing")
        return result
    central = _pair_crossings(curves, Ls, lambda L, T: pooled_binder(curves[L][T]))
    for (a, b), (T, U, count) in zip(zip(Ls, Ls[1:]), central):
        result.crossings.append(Crossing(a, b, T, U))
        if count > 1:
            result.warnings.append(f"L {a}/{b}: the curves cross {count} times; the steepest crossing is used")
        if T is None:
            result.warnings.append(f"L {a}/{b}: the curves do not cross within the measured temperatures")
    found = [c for c in result.crossings if c.T is not None]
    if not found:
        return result
    result.T_c = float(np.mean([c.T for c in found]))
    result.U_c = float(np.mean([c.U for c in found]))

    rng = np.random.default_rng(seed)
    boot_pairs = []
    for _ in range(n_boot):
        cache = {}

        def pick(L, T):
            if (L, T) not in cache:
                rs = curves[L][T]
                if len(rs) > 1:
                    cache[(L, T)] = pooled_binder([rs[i] for i in rng.integers(0, len(rs), len(rs))])
                else:
                    err = rs[0].get("binder_err") or 0.0
                    cache[(L, T)] = pooled_binder(rs) + rng.normal(0.0, err)
            return cache[(L, T)]
        boot_pairs.append([c[0] for c in _pair_crossings(curves, Ls, pick)])
    boot = np.array([[math.nan if t is None else t for t in pair] for pair in boot_pairs], dtype=float)
    for j, c in enumerate(result.crossings):
        column = boot[:, j][np.isfinite(boot[:, j])]
        c.T_err = float(column.std(ddof=1)) if column.size > 1 else math.nan
    used = [j for j, c in enumerate(result.crossings) if c.T is not None]
    complete = boot[:, used][np.isfinite(boot[:, used]).all(axis=1)] if used else np.empty((0, 0))
    means = complete.mean(axis=1) if complete.size else np.array([])
    result.T_c_err = float(means.std(ddof=1)) if means.size > 1 else math.nan
    return result


def analyse(rows, n_boot: int = 500, seed: int = 0) -> list[GroupResult]:
    results = []
    for key, group in group_rows(rows).items():
        r = analyse_group(group, n_boot, seed)
        r.label = dict(key)
        results.append(r)
    return results


def describe(result: GroupResult, varying: set[str] | None = None) -> str:
    """One paragraph: 'T_c(p=0.001) = 4.52674 +- 0.00004 (U* = 0.61) ...'."""
    shown = {k: v for k, v in result.label.items() if varying is None or k in varying}
    name = ", ".join(f"{k}={v}" for k, v in shown.items() if k != "model") or "all rows"
    lines = []
    if result.T_c is None:
        lines.append(f"T_c({name}): no Binder crossing (sizes L = {', '.join(map(str, result.Ls))})")
    else:
        lines.append(f"T_c({name}) = {result.T_c:.6g} +- {result.T_c_err:.2g}   U* = {result.U_c:.4f}")
    for c in result.crossings:
        if c.T is not None:
            lines.append(f"    L {c.L_small}/{c.L_large}: T = {c.T:.6g} +- {c.T_err:.2g}, U = {c.U:.4f}")
    for (q, L), T in sorted(result.peaks.items()):
        lines.append(f"    peak of {'C_v' if q == 'heat_capacity' else 'chi'} (L {L}) at T = {T:.6g}")
    lines += [f"    warning: {w}" for w in result.warnings]
    return "\n".join(lines)


def varying_keys(results: list[GroupResult]) -> set[str]:
    keys = set().union(*(r.label for r in results)) if results else set()
    return {k for k in keys if len({repr(r.label.get(k)) for r in results}) > 1} or {"p"} & keys


def plot(rows, results: list[GroupResult], folder) -> list[Path]:
    """One PNG per group: U(T), C_v(T) and chi(T) for each L (mean over seeds, error bars: standard error over
    seeds, or the jackknife error with one seed), the crossing marked. Written through sim/io (never over an
    existing file: a free name is taken)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from latticelab.sim.io import free_path, write_atomic

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    varying = varying_keys(results)
    written = []
    groups = group_rows(rows)
    for result in results:
        group = groups[tuple(sorted(result.label.items()))]
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
        for ax, (q, title) in zip(axes, (("binder", "Binder cumulant U"), ("heat_capacity", "C_v per spin"),
                                         ("susceptibility", "chi per spin"))):
            for L, (Ts, mean, err) in curve_points(group, q).items():
                ax.errorbar(Ts, mean, yerr=err, marker="o", ms=3, capsize=2, label=f"L = {L}")
            if result.T_c is not None:
                ax.axvline(result.T_c, color="grey", ls="--", lw=1)
            ax.set_xlabel("T")
            ax.set_title(title)
            ax.legend(fontsize=8)
        label = ", ".join(f"{k}={v}" for k, v in result.label.items() if k in varying) or "all"
        tc = f": T_c = {result.T_c:.5f} +- {result.T_c_err:.1g}" if result.T_c is not None else ""
        fig.suptitle(f"{result.label.get('model', '')} {label}{tc}")
        fig.tight_layout()
        buffer = __import__("io").BytesIO()
        fig.savefig(buffer, format="png", dpi=110)
        plt.close(fig)
        stem = "tc_" + ("_".join(f"{k}{result.label[k]}" for k in sorted(varying) if k in result.label) or "all")
        path = free_path(folder / f"{stem.replace('/', '-')}.png")
        data = buffer.getvalue()
        written.append(write_atomic(path, lambda f: f.write(data)))
    return written


def curve_points(rows, quantity: str) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """L -> (T, mean, error) of ``quantity`` over the seeds at each T, T ascending, L ascending; the error is
    the standard error over the seeds, or the row's own (jackknife) error with one seed. Sizes without a
    value of ``quantity`` are left out."""
    out = {}
    for L, by_T in sorted(_by_L_T(rows).items()):
        Ts = sorted(by_T)
        values = [[r[quantity] for r in by_T[T] if r.get(quantity) is not None] for T in Ts]
        keep = [i for i, v in enumerate(values) if v]
        if not keep:
            continue
        mean = [np.mean(values[i]) for i in keep]
        err = [np.std(values[i], ddof=1) / np.sqrt(len(values[i])) if len(values[i]) > 1
               else (by_T[Ts[i]][0].get(f"{quantity}_err") or 0.0) for i in keep]
        out[L] = (np.array([Ts[i] for i in keep], float), np.array(mean, float), np.array(err, float))
    return out


def _by_L_T(rows) -> dict[int, dict[float, list[dict]]]:
    out: dict = defaultdict(lambda: defaultdict(list))
    for row in rows:
        out[int(row["L"])][float(row["T"])].append(row)
    return out
