"""T_c from a results table: Binder-cumulant crossings of the U(T) curves of consecutive lattice sizes.

The rows are checked first (``validate_rows``): a table whose L or T is not a number is refused; rows whose
moments cannot be (not finite, <m^4> outside [<m^2>^2, <m^2>], a Binder cumulant that disagrees with them) and
repeated rows are dropped, each with a note.

Rows are grouped by the model's parameters except L, T and seed (so one group per p, dimension, ...). Per
(L, T) the seeds are pooled: U = 1 - <m^4> / (3 <m^2>^2) from the mean moments over seeds. For each pair of
consecutive sizes the crossing is where U_larger - U_smaller changes sign from + (below T_c the larger
lattice is more ordered) to -, found by linear interpolation between the measured temperatures.

The crossing of sizes L and bL is shifted from T_c by a finite-size correction ~ L^-x, x = 1/nu + omega. With
two or more crossings the shift of the largest pair is estimated from the data: with the two largest pairs'
crossings T1 (sizes L1, b L1) and T2 (L2 = c L1), T_c = T2 + (T2 - T1) / (c^x - 1), taken over x in
[SHIFT_EXPONENTS] (bracketing 2D Ising, x = 1 + 2, and 3D Ising, x ~ 2.4, down to 1): T_c is the middle of
that range and half its width is the systematic error. The statistical error is a bootstrap over seeds and
blocks: the seed rows of every (L, T) are resampled with replacement, and each drawn row's U moved by a
normal deviate of its own blocking (jackknife) error; with one seed per (L, T) only the latter. The reported
interval is T_c +- (2 sigma + systematic). With one pair, its crossing is reported with no shift estimated.
"""
from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

AXES = ("L", "T", "seed")
SHIFT_EXPONENTS = (1.0, 3.0)      # range of x = 1/nu + omega taken for the finite-size shift of the crossings


def load_rows(path) -> list[dict]:
    """The rows of a results table (CSV or Parquet), values typed (int, float, text; empty -> None). A file that
    is not such a table raises ParameterError('table', ...)."""
    from latticelab.sim.params import ParameterError
    from latticelab.sim.studies.sweep import parse_row, read_csv_rows
    path = Path(path)
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ParameterError("table", f"{path}: reading Parquet needs pyarrow: pip install "
                                          "'latticelab[study]' (or give the .csv table)") from None
        try:
            return pq.read_table(path).to_pylist()
        except Exception as exc:       # pyarrow's errors for a damaged file vary
            raise ParameterError("table", f"{path} is not a readable Parquet table ({type(exc).__name__})") from None
    try:
        _, rows = read_csv_rows(path)
    except UnicodeDecodeError as exc:
        raise ParameterError("table", f"{path} is not a CSV text table (byte {exc.start} is not UTF-8)") from None
    except csv.Error as exc:
        raise ParameterError("table", f"{path} is not a CSV text table ({exc})") from None
    except OSError as exc:
        raise ParameterError("table", f"{path} cannot be read: {exc.strerror or exc}") from None
    return [parse_row(row) for row in rows]


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate_rows(rows: list[dict], path="table") -> tuple[list[dict], list[str]]:
    """(rows fit for the analysis, notes on those dropped). L and T must be numbers in every row (else
    ParameterError naming the line); rows with impossible moments and repeated rows are dropped with a note.
    Line numbers count the CSV header as line 1."""
    from latticelab.sim.params import ParameterError
    missing = {"L", "T", "m2", "m4"} - set(rows[0]) if rows else set()
    if missing:
        raise ParameterError("table", f"{path} is not the table of a Binder study (no column "
                                      f"{', '.join(sorted(missing))}): tc finds T_c from the Binder cumulants of "
                                      "sizes L at temperatures T")
    kept, notes, seen = [], [], {}
    for line, row in enumerate(rows, 2):
        L, T = row.get("L"), row.get("T")
        if not (isinstance(L, int) and not isinstance(L, bool) and L > 0):
            raise ParameterError("table", f"{path}: line {line}: L must be a positive whole number; got {L!r}")
        if not (_number(T) and math.isfinite(T)):
            raise ParameterError("table", f"{path}: line {line}: T must be a finite number; got {T!r}")
        why = _impossible(row)
        if why:
            notes.append(f"line {line} dropped: {why}")
            continue
        key = row.get("point") or tuple(sorted((k, repr(v)) for k, v in row.items() if k not in ("wall_s",)))
        if key in seen:
            notes.append(f"line {line} dropped: it repeats line {seen[key]}")
            continue
        seen[key] = line
        kept.append(row)
    return kept, notes


def _impossible(row) -> str | None:
    """Why a row's moments cannot be those of a magnetisation per spin in [-1, 1] (None when they can)."""
    m2, m4, U = row.get("m2"), row.get("m4"), row.get("binder")
    if m2 is None and m4 is None:
        return None                          # not measured: the row has no Binder cumulant
    for name, value in (("m2", m2), ("m4", m4)):
        if not (_number(value) and math.isfinite(value)):
            return f"{name} = {value!r} is not a finite number"
    tolerance = 1e-9
    if not 0 < m2 <= 1 + tolerance:
        return f"m2 = {m2!r} is not in (0, 1]"
    if not m2 * m2 * (1 - tolerance) <= m4 <= m2 * (1 + tolerance):
        return f"m4 = {m4!r} is not in [m2^2, m2] = [{m2 * m2:.6g}, {m2:.6g}]"
    if U is not None:
        if not (_number(U) and math.isfinite(U)):
            return f"binder = {U!r} is not a finite number"
        expected = 1.0 - m4 / (3.0 * m2 * m2)
        if abs(U - expected) > 1e-6 * max(1.0, abs(expected)):
            return f"binder = {U!r} disagrees with 1 - m4 / (3 m2^2) = {expected:.6g}"
    for name in ("binder_err", "m2_err", "m4_err"):
        err = row.get(name)
        if err is not None and not (_number(err) and math.isfinite(err) and err >= 0):
            return f"{name} = {err!r} is not a finite number >= 0"
    return None


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
    T_c_err: float = math.nan          # statistical (bootstrap over seeds and blocks), one sigma
    T_c_sys: float = math.nan          # systematic: half the range of the finite-size extrapolation
    U_c: float | None = None
    shift: float | None = None         # T_c minus the largest pair's crossing

    @property
    def interval(self) -> tuple[float, float] | None:
        """T_c +- (2 sigma + systematic): None without T_c or an error."""
        if self.T_c is None or not math.isfinite(self.T_c_err):
            return None
        half = 2.0 * self.T_c_err + (self.T_c_sys if math.isfinite(self.T_c_sys) else 0.0)
        return self.T_c - half, self.T_c + half
    peaks: dict = field(default_factory=dict)      # (quantity, L) -> T of the largest value
    warnings: list = field(default_factory=list)


def parameter_names(row: dict) -> tuple[str, ...]:
    """The model's parameters among a row's columns (the schema of its ``model``), model first."""
    from latticelab.sim.models import get_model, model_names
    name = row.get("model")
    if name in model_names():
        fields = get_model(name).Params.model_fields
        return ("model", *(k for k in row if k in fields))
    return ("model",) if "model" in row else ()


def group_rows(rows: list[dict], axes=AXES) -> dict[tuple, list[dict]]:
    """Rows by the values of every model parameter except ``axes`` (and the ramp's branch, when there is one)."""
    groups = defaultdict(list)
    for row in rows:
        names = [k for k in parameter_names(row) if k not in axes]
        if "branch" in row and "branch" not in axes:
            names.append("branch")
        key = tuple(sorted((k, row[k]) for k in names if row.get(k) is not None))
        groups[key].append(row)
    return dict(groups)


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


def extrapolate(pairs: list[tuple[int, float]]) -> tuple[float, float, float]:
    """(T_c, systematic, shift) from the crossings ``pairs`` [(smaller size L, crossing T), ...] sorted by L:
    the largest pair's crossing moved by the shift the two largest pairs give for x in SHIFT_EXPONENTS (see the
    module docstring); with one pair its crossing, no systematic estimated (NaN)."""
    if len(pairs) < 2:
        return pairs[-1][1], math.nan, 0.0
    (L1, T1), (L2, T2) = pairs[-2], pairs[-1]
    c = L2 / L1
    ends = [T2 + (T2 - T1) / (c ** x - 1.0) for x in SHIFT_EXPONENTS]
    centre = 0.5 * (ends[0] + ends[1])
    return centre, 0.5 * abs(ends[0] - ends[1]), centre - T2


def analyse_group(rows, n_boot: int = 500, seed: int = 0) -> GroupResult:
    """Crossings, T_c with its bootstrap error and finite-size systematic, and the peak temperatures of C_v and
    chi per L."""
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
    pairs = [(c.L_small, c.T) for c in found]
    result.T_c, result.T_c_sys, result.shift = extrapolate(pairs)
    result.U_c = found[-1].U
    if len(found) < 2:
        result.warnings.append("one pair of sizes: its crossing is reported without a finite-size shift "
                               "(three or more sizes estimate it)")
    if n_boot < 2:
        return result

    rng = np.random.default_rng(seed)
    boot_pairs = []
    for _ in range(n_boot):
        cache = {}

        def pick(L, T):
            if (L, T) not in cache:
                rs = curves[L][T]
                drawn = [rs[i] for i in rng.integers(0, len(rs), len(rs))] if len(rs) > 1 else rs
                noise = np.sqrt(sum((r.get("binder_err") or 0.0) ** 2 for r in drawn)) / len(drawn)
                cache[(L, T)] = pooled_binder(drawn) + rng.normal(0.0, noise)
            return cache[(L, T)]
        boot_pairs.append([c[0] for c in _pair_crossings(curves, Ls, pick)])
    boot = np.array([[math.nan if t is None else t for t in pair] for pair in boot_pairs], dtype=float)
    for j, c in enumerate(result.crossings):
        column = boot[:, j][np.isfinite(boot[:, j])]
        c.T_err = float(column.std(ddof=1)) if column.size > 1 else math.nan
    used = [j for j, c in enumerate(result.crossings) if c.T is not None]
    complete = boot[:, used][np.isfinite(boot[:, used]).all(axis=1)] if used else np.empty((0, 0))
    estimates = [extrapolate(list(zip([result.crossings[j].L_small for j in used], replicate)))[0]
                 for replicate in complete]
    result.T_c_err = float(np.std(estimates, ddof=1)) if len(estimates) > 1 else math.nan
    if len(estimates) < 0.9 * n_boot:
        result.warnings.append(f"{n_boot - len(estimates)} of {n_boot} bootstrap samples lost a crossing: the "
                               "error may be too small; measure more temperatures around T_c")
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
        sys = (f" +- {result.T_c_sys:.2g} (finite-size shift {result.shift:+.2g})"
               if math.isfinite(result.T_c_sys) else "")
        lines.append(f"T_c({name}) = {result.T_c:.6g} +- {result.T_c_err:.2g} (stat){sys}   U* = {result.U_c:.4f}")
        if result.interval is not None:
            lo, hi = result.interval
            lines.append(f"    interval (2 sigma + systematic): [{lo:.6g}, {hi:.6g}]")
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
