"""A model stepped without a window (the loop behind ``latticelab run <model>``, app/commands/run.py): some steps
of equilibration, then a number of recorded steps or until the model's time reaches a value, its observables
streamed to a CSV table, its fields to an output store (sim/output), its picture to a movie (sim/recording.py).

The CSV rows go to a temporary file beside the table as they come (memory does not grow with the run) and are
moved to its name when the run ends; interrupted (SIGINT, SIGTERM) after some recorded steps, the finished rows
are moved there all the same, and the message says how many. The model's own outputs (``RunHooks.outputs``) are
written atomically when the run is complete, so an interrupted run leaves the old files (or none), and so is
the model's state (``RunPlan.save_state``). On a terminal a progress bar shows the time left.

A run split over the processes of an MPI job runs this loop in every process (the exchanges and sums are
collective); only one of them writes (``RunPlan.writes``), the others compute the same and discard it.
"""
from __future__ import annotations

import contextlib
import csv
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

CHECK_EVERY = 1000      # without a CSV table, a run's observables are checked (finite) every this many steps
MAX_RUN_STEPS = 1e10    # a run to a time whose pace would need more steps than this is stopped with a message


class Interrupted(Exception):
    """SIGINT or SIGTERM during a headless run."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class RunTooLong(Exception):
    """A run to a time that, at its pace, would take more than ``MAX_RUN_STEPS`` steps (a time step too small
    to get anywhere: it would never end). The message says why and ends with the first remedy (the caller adds
    its own: a nearer end)."""


class _Signals:
    """SIGINT and SIGTERM as Interrupted, raised where the run is, except inside ``held()``: a signal that comes
    there is raised at its end (a step's bookkeeping, its count and its CSV row, is done whole or not at all)."""

    def __init__(self):
        self._held = False
        self._pending: int | None = None

    def stop(self, signum, _frame):
        if self._held:
            self._pending = signum
            return
        raise Interrupted(signum)

    @contextlib.contextmanager
    def held(self):
        self._held = True
        try:
            yield
        finally:
            self._held = False
        if self._pending is not None:
            raise Interrupted(self._pending)


@contextlib.contextmanager
def interruptible():
    """SIGINT and SIGTERM raise Interrupted inside the block (in the main thread), so a run stops between
    steps with a message instead of a traceback; the previous handlers come back afterwards. Yields the
    ``_Signals`` whose ``held()`` defers them."""
    import signal
    import threading
    signals = _Signals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return
    previous = {sig: signal.signal(sig, signals.stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield signals
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def progress(total: float, description: str, unit: str, stream, leave: bool = True):
    """A tqdm bar with the time left on a terminal (``leave``: its last state stays on the screen); a bar that
    shows nothing otherwise (pipes, files, CI)."""
    from tqdm import tqdm
    whole = float(total).is_integer()
    counts = "{n_fmt}/{total_fmt}" if whole else "{n:.4g}/{total:.4g}"
    return tqdm(total=int(total) if whole else float(total), desc=description, unit=unit, file=stream,
                disable=not (hasattr(stream, "isatty") and stream.isatty()), leave=leave, dynamic_ncols=True,
                bar_format="{l_bar}{bar}| " + counts + " {unit} [{elapsed}<{remaining}]")


@dataclass
class RunPlan:
    """What a headless run does besides stepping. ``steps`` or ``until`` (the other None); ``csv``: the table of
    observables; ``files``: {run option: path} of the model's own outputs (``RunHooks.outputs``); ``outputs``:
    {what the user named it: path} of every file the run writes, for the message of an interrupted run;
    ``open_output(model)``: the field store's writer (or None), opened once equilibrated; ``recorder``: the
    movie's (sim/recording.py FrameRecorder, or None), its file ``record``; ``save_state``: the file of the model's
    state at the end (.npz, sim/state.py). ``writes`` False: this process computes the table, the model's outputs
    and the state (gathering a split model is collective) but keeps none of them (a process of a distributed run
    other than the one that writes; it has no movie or field store). ``announce``: lines said once the run
    can be interrupted cleanly (what runs: a signal after them ends the run with its message)."""
    equilibrate: int = 0
    steps: int | None = None
    until: float | None = None
    csv: str | None = None
    overwrite: bool = False
    files: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    open_output: Callable[[object], object] = lambda model: None
    recorder: object = None
    record: str | None = None
    save_state: str | None = None
    writes: bool = True
    announce: tuple[str, ...] = ()


@dataclass
class RunResult:
    """What came of a run: the recorded steps ``done`` in ``elapsed`` seconds, or the signal that stopped it."""
    done: int = 0
    elapsed: float = 0.0
    signum: int | None = None


def run_headless(model, hooks, plan: RunPlan, say: Callable[[str], object]) -> RunResult:
    """Step ``model`` as ``plan`` says, its ``hooks`` (sim/model.py RunHooks) around each step; messages (what was
    written, how far an interrupted run got) go to ``say``. A failure removes what the run had begun to write
    and is raised again; SIGINT or SIGTERM ends it with ``RunResult.signum``."""
    import signal

    from latticelab.sim import export
    from latticelab.sim.io import AtomicFile, open_atomic
    from latticelab.sim.model import check_finite
    from latticelab.sim.output import record_step

    cls = type(model)
    steps, until = plan.steps, plan.until
    recorder, output = plan.recorder, None
    names = [o.name for o in cls.declared_observables]
    time_column = export.time_column(cls)
    table = None
    if plan.csv:
        table = AtomicFile(plan.csv, overwrite=plan.overwrite, binary=False) if plan.writes else _Discarded()
    writer, rows = None, 0
    phase, done, bar = "equilibration", 0, None
    elapsed = 0.0
    try:
        if table is not None:
            writer = csv.DictWriter(table.file, fieldnames=[time_column, *names])
            writer.writeheader()
        with interruptible() as signals:
            for line in plan.announce:
                say(line)
            if plan.equilibrate:
                bar = progress(plan.equilibrate, "equilibrating", "steps", sys.stderr, leave=False)
            for done in range(1, plan.equilibrate + 1):
                hooks.before_step(model)
                hooks.step(model)
                bar.update(1)
            if bar is not None:
                bar.close()
            phase, done = "recording", 0
            if until is None:
                bar = progress(steps, "recording", "steps", sys.stderr)
            else:
                bar = progress(max(until - model.time, 0.0), "recording", cls.time_label, sys.stderr)
            record_frame(recorder, model)
            output = plan.open_output(model)
            if output is not None:
                output.snapshot(model)
            start = time.perf_counter()
            clock_start = model.time
            while (done < steps) if until is None else (model.time < until):
                hooks.before_step(model)
                before = model.time
                hooks.step(model, until)
                hooks.after_step(model)
                if until is not None and done and done % CHECK_EVERY == 0:
                    clock_start = check_time_left(model, until, clock_start, cls.time_label)
                values = model.observables() if writer or done % CHECK_EVERY == 0 else None
                if values is not None:
                    check_finite(model, values)     # a diverged run ends with one line, not rows of NaN
                with signals.held():        # the step is counted with its row
                    done += 1
                    if writer:
                        writer.writerow({time_column: model.time, **values})
                        rows += 1
                record_frame(recorder, model)
                if output is not None:
                    record_step(output, model)
                bar.update(1 if until is None else min(model.time, until) - before)
            elapsed = time.perf_counter() - start
            bar.close()
            check_finite(model, model.observables())
            phase = "writing"
            if table is not None:
                table, finished = None, table
                finished.commit()
            for option, write in hooks.outputs(model).items():
                with (open_atomic(plan.files[option], overwrite=plan.overwrite, binary=False) if plan.writes
                      else open(os.devnull, "w")) as f:
                    write(f)
                say(f"wrote {plan.files[option]}")
            if plan.save_state:
                _save_state(plan, model)
                say(f"saved the state in {plan.save_state}")
            if recorder is not None:
                result, recorder = recorder.close(), None
                say(result.describe())
            if output is not None:
                output.close()
                say(output.describe())
                output = None
    except Interrupted as exc:
        if bar is not None:
            bar.close()
        if recorder is not None:
            recorder.abort()
        outputs = dict(plan.outputs)
        kept_rows = rows > 0          # written below, or already in the writing phase
        if table is not None:
            table, unfinished = None, table
            if kept_rows:
                unfinished.commit()     # the rows of the finished steps: what the run got to
            else:
                unfinished.discard()
        if output is not None:             # what it holds up to here stays readable (and appendable)
            output.close()
            outputs.pop("--output", None)
            say(f"{output.describe()} up to step {model.step_count}")
        total = plan.equilibrate if phase == "equilibration" else (steps if until is None else None)
        completed = done - 1 if done and phase == "equilibration" else done    # the loop's step was cut short
        how_far = (f" of {total} steps" if total is not None
                   else f" steps ({cls.time_label} {model.time:g} of {until:g})")
        where = (f"while writing {', '.join(outputs.values())}" if phase == "writing"
                 else f"during {phase} after {completed}{how_far}")
        kept = "".join(f"; the {rows} finished rows were written to {path}" if kept_rows and path == plan.csv
                       else f"; {path} was left as it was" if os.path.exists(path) else f"; {path} was not written"
                       for path in outputs.values())
        if plan.record:
            kept += f"; the recording {plan.record} was not kept"
        say(f"interrupted ({signal.Signals(exc.signum).name}) {where}{kept}")
        return RunResult(done, elapsed, exc.signum)
    except BaseException:
        if recorder is not None:
            recorder.abort()
        if table is not None:
            table.discard()
        if output is not None:
            output.abort()
        raise
    return RunResult(done, elapsed)


class _Discarded:
    """The table of a process that does not write (``RunPlan.writes`` False): rows go nowhere."""

    def __init__(self):
        self.file = open(os.devnull, "w")

    def commit(self) -> None:
        self.file.close()

    discard = commit


def _save_state(plan: RunPlan, model) -> None:
    """The model's state at the end of the run, in ``plan.save_state``: gathered in every process (a split
    model's slabs are gathered collectively), written only by the one that writes."""
    from latticelab.sim.state import save_state, state_of
    if plan.writes:
        save_state(plan.save_state, model, plan.overwrite)
    else:
        state_of(model)


def check_time_left(model, until: float, since: float, time_label: str) -> float:
    """After CHECK_EVERY more steps of a run to ``until``: RunTooLong when, at the pace of those steps, the time
    left would take more than MAX_RUN_STEPS steps. Returns the time to measure the next pace from."""
    pace = (model.time - since) / CHECK_EVERY
    left = until - model.time
    if left > 0 and not (pace > 0 and left / pace <= MAX_RUN_STEPS):
        steps = f"{left / pace:.3g} more steps" if pace > 0 else "steps without end (the time does not advance)"
        raise RunTooLong(f"reaching {time_label} {until:g} at {pace:.3g} a step would take {steps}; at most "
                         f"{MAX_RUN_STEPS:.0e} are run: choose a larger time step")
    return model.time


def record_frame(recorder, model) -> None:
    """Add the model's picture at one pixel per cell when a frame is due (the recorder's thread encodes it)."""
    if recorder is not None and recorder.due(model.step_count):
        from latticelab.sim.recording import cells_image
        recorder.add(cells_image(model.picture().colours()), model.step_count)
