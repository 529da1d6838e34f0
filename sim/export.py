"""Exporting what the user sees as data: the live plots' series as CSV (no Qt here; the window's File menu calls
it through app/recording.py).

The file starts with one comment line that says where the numbers come from, then a header row and one row
per sample::

    # latticelab 0.2.0 (git 1a2b3c4); model ising (Rewired Ising model); backend numpy [CPU]; parameters: dim=2 L=32 ...
    step,energy,abs_magnetisation,flipped_fraction,energy_std,flipped_fraction_std
    1,-1.21875,0.4375,0.12,nan,nan
    ...

The time column is named after the model's ``time_label`` (its words joined by underscores: ``time_ms``, as
in the CSV of ``latticelab run``); then every recorded observable, then the sliding-window standard deviations
the plots show (``<name>_std``; NaN until the window has two samples). Samples taken under different values of
the parameters that change while a model runs (T, the algorithm, ...) are never pooled unmarked: when the
history holds more than one such segment, a last column ``segment`` numbers them (1, 2, ...) and the comment
line names each one's parameters ("segment 1 from step 1: T=2.25 ...; segment 2 from step 301: T=1.5 ...").
Values are written with ``repr`` so they read back
exactly. The file is written atomically and never replaces an existing file unless asked (sim/io.py).
"""
from __future__ import annotations

import csv
import io as text_io
import math
import re
from pathlib import Path

import numpy as np

from latticelab.sim.io import write_atomic


def code_version() -> str:
    """The package version, with the git revision of the source tree when there is one."""
    from latticelab.version import __version__
    from latticelab.sim.studies.point import code_version as revision
    described = revision()
    return __version__ if described == __version__ else f"{__version__} (git {described})"


def provenance(model) -> str:
    """One line: code version, model, backend and device, and every parameter."""
    params = " ".join(f"{k}={v}" for k, v in model.params.model_dump().items())
    return (f"latticelab {code_version()}; model {model.name} ({model.title}); backend {model.backend_name} "
            f"[{model.device_name}]; parameters: {params}")


def time_column(model_class) -> str:
    """The CSV name of a model's time axis: its ``time_label`` as a plain identifier, words joined by
    underscores ("simulated_time", "time_ms" for "time (ms)")."""
    return "_".join(re.findall(r"[A-Za-z0-9]+", model_class.time_label)).lower()


def _number(value) -> str:
    value = float(value)
    return repr(value) if math.isfinite(value) else str(value)      # nan, inf, -inf: what csv readers accept


def series_csv(times, series: dict, time_name: str, comment: str = "") -> str:
    """The CSV text of a table of equal-length series (``times`` and each of ``series``, in their order)."""
    times = np.asarray(times, dtype=np.float64).reshape(-1)
    columns = {name: np.asarray(values, dtype=np.float64).reshape(-1) for name, values in series.items()}
    for name, values in columns.items():
        if values.size != times.size:
            raise ValueError(f"series {name!r} has {values.size} values for {times.size} times")
    out = text_io.StringIO()
    if comment:
        out.write("# " + " ".join(comment.splitlines()) + "\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([time_name, *columns])
    for i in range(times.size):
        writer.writerow([_number(times[i]), *(_number(values[i]) for values in columns.values())])
    return out.getvalue()


def write_history_csv(path, model, history, overwrite: bool = False) -> Path:
    """Write the plot history (sim/runner.py ``ObservableHistory``) of ``model`` as CSV at ``path``; returns the
    path. OutputError (OutputExists for an existing file without ``overwrite``) names the path."""
    times, values = history.arrays()
    name, comment = time_column(type(model)), provenance(model)
    segments = [(start, parameters) for start, parameters in history.segments() if start < len(times)]
    if len(segments) > 1:
        numbers = np.zeros(len(times))
        for k, (start, _parameters) in enumerate(segments, 1):
            numbers[start:] = k
        values = {**values, "segment": numbers}
        comment += "; " + "; ".join(f"segment {k} from {name} {times[start]:g}: {parameters}"
                                    for k, (start, parameters) in enumerate(segments, 1))
    text = series_csv(times, values, name, comment)
    return write_atomic(path, lambda f: f.write(text), overwrite=overwrite, binary=False)


def read_series_csv(path) -> tuple[str, dict[str, np.ndarray]]:
    """(comment line without '# ', {column: values}) of a file written by ``series_csv``; for tests and scripts."""
    with open(path, newline="", encoding="utf-8") as f:
        first = f.readline()
        comment = first[2:].rstrip("\n") if first.startswith("# ") else ""
        if not comment:
            f.seek(0)
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    data = np.array(body, dtype=np.float64).reshape(len(body), len(header))
    return comment, {name: data[:, i] for i, name in enumerate(header)}
