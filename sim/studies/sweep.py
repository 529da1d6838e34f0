"""Running a study: every point once, in this process or on a Dask cluster, into one tidy table.

The table (one row per point: parameters, run settings, quantities, code version, backend) is CSV always and
also Parquet when pyarrow is installed. After each finished point the whole table is rewritten and renamed
into place (sim/io.py), so an interruption at any moment leaves the complete table of the points finished so
far; running the same study again with the same output skips them (resume). Rows are kept in the study's
grid order, so a resumed sweep and one run straight through give the same table.

Where the points run (``executor``):
    in this process (default)                 one after the other
    workers=N / "auto"                        a Dask LocalCluster on this machine: with CUDA GPUs one worker
                                              per GPU, each pinned to its GPU (dask-cuda's LocalCUDACluster
                                              when installed, else the same by CUDA_VISIBLE_DEVICES); without,
                                              N single-threaded CPU workers ("auto": one per core)
    scheduler="tcp://host:port"               an existing Dask cluster
A worker that dies loses only the point it was running: the scheduler gives it to another worker (and a
point whose code raises is retried twice). Results are written as each point finishes.

Another thread (the application's Study panel) steers a running sweep through a ``SweepControl``: pause
(in this process: inside the running point; on Dask: no new point starts, the running ones finish) and
cancel (the finished points stay in the table, so running the study again resumes it).
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from latticelab.sim.io import OutputError, check_output, write_atomic
from latticelab.sim.studies.point import run_task, study_columns
from latticelab.sim.studies.spec import Study

log = logging.getLogger(__name__)
RETRIES = 2
# a local cluster's scheduler and its dashboard (a web page with the tasks, and a way to inspect them) listen on
# this machine only, never on every interface
LOCALHOST = "127.0.0.1"
DASHBOARD = f"{LOCALHOST}:0"
SCHEDULER_TIMEOUT = "20s"        # how long to try to reach a --scheduler


def has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def table_paths(out) -> tuple[Path, Path | None]:
    """(CSV path, Parquet path or None) for an output name ending in .csv or .parquet."""
    out = Path(out)
    if out.suffix not in (".csv", ".parquet"):
        raise OutputError(out, "the results table must end in .csv or .parquet")
    csv_path = out.with_suffix(".csv")
    parquet = out.with_suffix(".parquet")
    if out.suffix == ".parquet" and not has_pyarrow():
        raise OutputError(out, "writing Parquet needs pyarrow (pip install 'latticelab[study]'); "
                               "or give a .csv name")
    return csv_path, (parquet if has_pyarrow() else None)


# ---- the table ------------------------------------------------------------------------------------------
def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def read_csv_rows(path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _parse(text: str):
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_row(row: dict) -> dict:
    """A row as read back from the CSV table, typed (int, float, text; empty -> None); a row of typed
    values (``run_point``'s) goes through its text form, so both come out the same."""
    return {k: _parse(v if isinstance(v, str) else _text(v)) for k, v in row.items()}


def _typed_columns(header, rows):
    """Column name -> list of values typed per column (int, float or text; '' -> None)."""
    out = {}
    for name in header:
        values = [_parse(r.get(name, "")) for r in rows]
        present = [v for v in values if v is not None]
        if present and all(isinstance(v, int) for v in present):
            out[name] = values
        elif present and all(isinstance(v, (int, float)) for v in present):
            out[name] = [None if v is None else float(v) for v in values]
        else:
            out[name] = [None if v is None else str(v) for v in values]
    return out


@contextlib.contextmanager
def table_lock(csv_path: Path):
    """Hold an exclusive lock on the table's folder (``flock`` on the directory, so no lock file is left
    behind): two sweeps writing one table take turns, each reading the other's rows before writing."""
    try:
        import fcntl
    except ImportError:                  # no flock on this platform: writes are still atomic
        yield
        return
    fd = os.open(csv_path.parent if str(csv_path.parent) else ".", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)                     # closing releases the lock


class Table:
    """The results table: header + text rows, ours in grid order, then any others another sweep wrote. Every
    write happens under ``table_lock`` and merges the rows on disk first, so two sweeps of one table (other
    seeds, say) keep each other's rows."""

    def __init__(self, csv_path: Path, parquet_path: Path | None, header: list[str], order: dict[str, int]):
        self.csv_path, self.parquet_path, self.header, self.order = csv_path, parquet_path, header, order
        self.rows: dict[str, dict[str, str]] = {}

    def read_disk(self) -> dict[str, dict[str, str]]:
        """The rows in the file now (none when there is no file); a file that is not such a table is refused."""
        if not os.path.exists(self.csv_path):
            return {}
        try:
            header, rows = read_csv_rows(self.csv_path)
        except (UnicodeDecodeError, csv.Error) as exc:
            raise OutputError(self.csv_path, f"it exists and is not a results table ({exc}); use --overwrite to "
                                             "replace it, or another --out") from None
        if header != self.header:
            raise OutputError(self.csv_path, "it exists and is not a results table of this study "
                              + describe_header_change(header, self.header)
                              + "; use --overwrite to replace it, or another --out")
        return {row["point"]: row for row in rows}

    def load(self) -> None:
        """Take the rows of an existing table (resume)."""
        self.rows.update(self.read_disk())

    def add(self, row: dict) -> None:
        self.add_rows([row])

    def add_rows(self, rows: list[dict]) -> None:
        with table_lock(self.csv_path):
            on_disk = self.read_disk()
            for key, row in on_disk.items():
                self.rows.setdefault(key, row)
            for row in rows:
                self.rows[row["point"]] = {c: _text(row.get(c)) for c in self.header}
            self.write()

    def sorted_rows(self) -> list[dict[str, str]]:
        later = len(self.order)
        keyed = list(self.rows.values())
        return sorted(keyed, key=lambda r: self.order.get(r["point"], later))

    def csv_text(self) -> str:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=self.header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.sorted_rows())
        return buffer.getvalue()

    def write(self) -> None:
        text = self.csv_text()
        write_atomic(self.csv_path, lambda f: f.write(text), overwrite=True, binary=False)
        if self.parquet_path is not None:
            data = parquet_bytes(self.header, self.sorted_rows())
            write_atomic(self.parquet_path, lambda f: f.write(data), overwrite=True)


def describe_header_change(found: list[str], wanted: list[str]) -> str:
    only_there = [c for c in found if c not in wanted]
    only_here = [c for c in wanted if c not in found]
    parts = []
    if only_there:
        more = " ..." if len(only_there) > 6 else ""
        parts.append(f"columns only in the table: {', '.join(only_there[:6])}{more}")
    if only_here:
        parts.append(f"columns this study writes: {', '.join(only_here[:6])}" + (" ..." if len(only_here) > 6 else ""))
    if not parts:
        parts.append("(its columns are in another order)")
    return "(" + "; ".join(parts) + ")" if parts[0][0] != "(" else parts[0]


def protocol_conflict(rows, study) -> str | None:
    """How the rows already in a table were measured differently from ``study`` (run settings, schedule, ramp),
    in words; None when they agree. Rows of one table must share their protocol: ``tc`` and the plots pool rows
    across seeds and would mix two protocols."""
    if not rows or not study.points:
        return None
    wanted = study.points[0].protocol
    for row in rows:
        text = row.get("protocol") or ""
        try:
            found = json.loads(text) if text else None
        except ValueError:
            found = None
        if not isinstance(found, dict):
            return f"the row {row.get('point')} has no readable protocol"
        if found != json.loads(json.dumps(wanted)):
            diffs = []
            for k in sorted(set(found) | set(wanted)):
                a, b = found.get(k), json.loads(json.dumps(wanted.get(k)))
                if a != b:
                    diffs.append(f"{k} = {_short(a)} in the table, {_short(b)} in this study")
            return "; ".join(diffs)
    return None


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, (int, float)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parquet_bytes(header, rows) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.table(_typed_columns(header, rows))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


# ---- where points run -----------------------------------------------------------------------------------
def gpu_ids() -> list[str]:
    """The CUDA devices of this machine (CUDA_VISIBLE_DEVICES if set, else nvidia-smi), without CuPy."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return [str(i) for i, line in enumerate(l for l in done.stdout.splitlines() if l.startswith("GPU "))]


def gpu_cpu_affinity(topology: str | None = None) -> dict[str, str]:
    """GPU index -> the CPU list nearest it ('0-15,32-47'), from ``nvidia-smi topo -m`` (or the given text of
    it); empty when unknown."""
    if topology is None:
        try:
            done = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return {}
        if done.returncode != 0:
            return {}
        topology = done.stdout
    # cells are tab-separated; the header row's first cell (over the row labels) is empty, so a header cell's
    # index is its column in the data rows. Terminal underline codes around the header are dropped.
    rows = [re.sub(r"\x1b\[[0-9;]*m", "", line).split("\t") for line in topology.splitlines()]
    header = next((r for r in rows if any(c.strip() == "CPU Affinity" for c in r)), None)
    if header is None:
        return {}
    column = [c.strip() for c in header].index("CPU Affinity")
    found = {}
    for r in rows:
        name = r[0].strip()
        if name.startswith("GPU") and name[3:].isdigit() and len(r) > column and r[column].strip() not in ("", "N/A"):
            found[name[3:]] = r[column].strip()
    return found


def local_cluster(workers: int | str = "auto", processes: bool = True):
    """A Dask cluster on this machine: one worker per GPU (pinned) when there are GPUs, else CPU workers."""
    gpus = gpu_ids()
    if gpus:
        n = len(gpus) if workers in (None, "auto") else min(int(workers), len(gpus))
        try:
            from dask_cuda import LocalCUDACluster          # imported only when GPUs are present
        except ImportError:
            pass
        else:
            return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(gpus[:n]), threads_per_worker=1,
                                    host=LOCALHOST, dashboard_address=DASHBOARD)
        from distributed import Nanny, Scheduler, SpecCluster
        from latticelab.sim.studies.worker_setup import AFFINITY_VARIABLE
        affinity = gpu_cpu_affinity()
        # as LocalCUDACluster does: worker i sees its GPU first (device 0), the others after it, and runs on the
        # CPU cores nearest that GPU (worker_setup.py)
        specs = {}
        for i in range(n):
            env = {"CUDA_VISIBLE_DEVICES": ",".join(gpus[i:] + gpus[:i])}
            if gpus[i] in affinity:
                env[AFFINITY_VARIABLE] = affinity[gpus[i]]
            specs[f"gpu-{gpus[i]}"] = {"cls": Nanny, "options": {
                "nthreads": 1, "host": LOCALHOST, "env": env, "preload": ["latticelab.sim.studies.worker_setup"]}}
        return SpecCluster(workers=specs, scheduler={"cls": Scheduler, "options": {
            "host": LOCALHOST, "dashboard_address": DASHBOARD}})
    from distributed import LocalCluster
    n = (os.cpu_count() or 1) if workers in (None, "auto") else int(workers)
    where = {"host": LOCALHOST} if processes else {}       # in-process workers talk without sockets
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=processes, dashboard_address=DASHBOARD,
                        **where)


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | str | None = None, processes: bool = True):
    """A distributed Client on ``scheduler`` or on a new local cluster (closed afterwards)."""
    from distributed import Client
    if not logging.getLogger().isEnabledFor(logging.INFO):      # Dask logs each start at INFO; -v shows it
        logging.getLogger("distributed").setLevel(logging.WARNING)
    if scheduler:
        try:
            client = Client(scheduler, timeout=SCHEDULER_TIMEOUT)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            from latticelab.sim.params import ParameterError
            raise ParameterError("scheduler", f"cannot reach a Dask scheduler at {scheduler!r} within "
                                              f"{SCHEDULER_TIMEOUT} ({type(exc).__name__}); give the address "
                                              "'tcp://HOST:PORT' of a running scheduler") from None
        try:
            yield client
        finally:
            client.close()
        return
    cluster = local_cluster(workers, processes)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


# ---- steering from another thread -----------------------------------------------------------------------
class SweepCancelled(Exception):
    """Raised inside a sweep by ``SweepControl.checkpoint`` once the sweep was cancelled."""


class SweepControl:
    """Pause, resume and cancel a sweep running in another thread. The sweep calls ``checkpoint()`` between
    pieces of work (in this process: inside each point, between measurements); it blocks while paused and
    raises SweepCancelled once cancelled."""

    def __init__(self):
        self._running = threading.Event()
        self._running.set()
        self._cancelled = threading.Event()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def cancel(self) -> None:
        self._cancelled.set()
        self._running.set()          # a paused sweep wakes up to see it

    def checkpoint(self) -> None:
        while not self._running.wait(0.1):
            pass
        if self._cancelled.is_set():
            raise SweepCancelled()

    def raise_if_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise SweepCancelled()


# ---- the sweep --------------------------------------------------------------------------------------------
@dataclass
class SweepResult:
    csv_path: Path
    parquet_path: Path | None
    done: int = 0            # points run now
    skipped: int = 0         # points found finished in the table
    failed: list = field(default_factory=list)   # (point, error text)
    cancelled: bool = False  # stopped by SweepControl.cancel; the finished points are in the table


def run_sweep(study: Study, out, *, scheduler: str | None = None, workers: int | str | None = None,
              overwrite: bool = False, processes: bool = True, progress: bool | None = None,
              on_row=None, on_start=None, control: SweepControl | None = None) -> SweepResult:
    """Run every point of ``study`` not yet in the table ``out`` and write each row as it finishes.

    ``workers`` None and no ``scheduler``: in this process. ``progress``: a tqdm bar with the time left
    (None: only on a terminal). ``on_row(row)`` is called after each row is written (a hook for callers;
    an exception there stops the sweep, leaving the table of the finished points). ``on_start(rows, todo)``
    is called once the table is claimed, with the rows already in it (text values, as in the CSV) and the
    points still to run. ``control``: pause / cancel from another thread (a cancelled sweep returns with
    ``cancelled`` set).
    """
    csv_path, parquet_path = table_paths(out)
    header = study_columns(study)
    order = {key: i for i, key in enumerate(k for p in study.points for k in p.row_keys)}
    table = Table(csv_path, parquet_path, header, order)
    with table_lock(csv_path):
        if os.path.exists(csv_path) and not overwrite:
            check_output(csv_path, overwrite=True)
            table.load()
            conflict = protocol_conflict(list(table.rows.values()), study)
            if conflict:
                raise OutputError(csv_path, f"it holds rows of another study definition ({conflict}); give another "
                                            "--out, or --overwrite to replace it")
        else:
            check_output(csv_path, overwrite=overwrite)
            if parquet_path is not None:
                check_output(parquet_path, overwrite=overwrite or not os.path.exists(parquet_path))
            table.write()                       # the header at once: the output is claimed and checked
    todo = [p for p in study.points if not all(k in table.rows for k in p.row_keys)]
    result = SweepResult(csv_path, parquet_path, skipped=len(study.points) - len(todo))

    if on_start is not None:
        on_start(table.sorted_rows(), todo)

    from tqdm.auto import tqdm
    bar = tqdm(total=len(study.points), initial=result.skipped, unit="point", dynamic_ncols=True,
               disable=(None if progress is None else not progress), file=sys.stderr, desc=Path(study.path).name)

    def finished(rows):
        table.add_rows(rows)
        result.done += 1
        bar.update(1)
        if on_row is not None:
            for row in rows:
                on_row(row)

    checkpoint = control.checkpoint if control is not None else None
    try:
        if scheduler is None and workers is None:
            for point in todo:
                finished(run_task(point, checkpoint=checkpoint))
        elif todo:
            if control is not None:
                control.raise_if_cancelled()
            with dask_client(scheduler, workers, processes) as client:
                _run_on_dask(client, todo, finished, result, control)
    except SweepCancelled:
        result.cancelled = True
    finally:
        bar.close()
    return result


def point_cost(point) -> float | None:
    """A relative cost of ``point``: the model's memory estimate for its parameters (which grows with the
    number of cells, as the work of a step does) times the steps it runs; None when the model gives no estimate."""
    from latticelab.sim.models import get_model
    cls = get_model(point.model)
    try:
        size = cls.estimate_bytes(cls.Params(**point.values), "cuda" if point.backend == "cuda" else "numpy")
    except Exception:            # an estimate is only a hint for the order: the point itself will report
        return None
    if size is None:
        return None
    steps = point.equilibrate + point.measurements * (1 + point.decorrelate)
    return float(size) * steps


def submission_order(points) -> list:
    """``points`` longest first (stable among equals): with several workers the last tasks to start are then the
    shortest, so no worker idles long at the end while another finishes a big point (the longest-processing-time
    rule of list scheduling). The grid order is kept when a cost is unknown. The table stays in grid order."""
    costs = [point_cost(p) for p in points]
    if any(c is None for c in costs):
        return list(points)
    return [p for _, _, p in sorted(zip((-c for c in costs), range(len(points)), points))]


def _run_on_dask(client, todo, finished, result, control: SweepControl | None = None) -> None:
    """Every point as a task, the longest first (``submission_order``). Without ``control`` all are submitted
    at once; with it only about two per worker thread are queued, so a pause starts no new point (the running
    ones finish and are written)."""
    from distributed import wait
    pending = submission_order(todo)
    in_flight: dict = {}
    limit = len(todo) if control is None else max(1, 2 * sum(client.nthreads().values()))
    try:
        while pending or in_flight:
            if control is not None:
                control.raise_if_cancelled()
            while pending and len(in_flight) < limit and not (control is not None and control.paused):
                point = pending.pop(0)
                # Dask starts queued tasks by priority (higher first): the remaining count keeps the order above
                future = client.submit(run_task, point, key=f"latticelab-point-{point.key}", pure=False,
                                       retries=RETRIES, priority=len(pending))
                in_flight[future] = point
            if not in_flight:              # paused with nothing running: wait for resume or cancel
                control.checkpoint()
                continue
            try:
                done = wait(list(in_flight), timeout=None if control is None else 0.2,
                            return_when="FIRST_COMPLETED").done
            except TimeoutError:           # look at the control again
                continue
            for future in [f for f in in_flight if f in done]:     # in submission order
                point = in_flight.pop(future)
                try:
                    rows = future.result()
                except Exception as exc:        # a point that failed on every try (KilledWorker included)
                    result.failed.append((point, f"{type(exc).__name__}: {exc}"))
                    log.warning("point %s failed: %s", point.values, exc)
                    continue
                finished(rows)
    except BaseException:
        client.cancel(list(in_flight))
        raise
