"""The main window's frame loop: a QTimer on the GUI thread (the thread that owns the GL contexts) that takes the
steps fitting a frame's time budget (sim/runner.py), hands steps longer than a frame to a worker
(app/stepping.py) and collects its batch, paces frames on a CUDA device (app/pacing.py), shows the model's
picture in the field view and refreshes the live plots and the status a few times per second. Changes that
arrive while a worker owns the model wait for it (``when_idle``, ``when_model_free``).

Each frame also gives the model lifecycle (app/model_lifecycle.py) its turn: a slice of what is made ahead, or
the swap of a model built on the worker.
"""
from __future__ import annotations

import logging
import math
import time

from PySide6 import QtCore

from latticelab.app.dock_canvas import continue_while_stale, on_screen
from latticelab.app.pacing import DevicePacer, PlotPacer
from latticelab.app.settings import AUTO_STEPS, MAX_STEPS_PER_FRAME
from latticelab.app.staging import SLICE_AFTER_BUILD_S, SLICE_S
from latticelab.app.stepping import BackgroundStepper, wants_background
from latticelab.sim.model import Model
from latticelab.sim.params import ParameterError

log = logging.getLogger(__name__)

FRAME_BUDGET_S = 0.030       # simulation time per frame when "keep frames under 30 ms" is on (CPU)
FRAME_INTERVAL_MS = 15
STAGING_EVERY_TICKS = 2      # a staging slice runs at least every this many frames
STATUS_INTERVAL_S = 0.5
# a frame of more steps is drawn without the highlight of changed cells: the union of a GPU frame's ~500 sweeps
# covered nearly every cell, and the view showed only the two "flipped" colours (issue 41); the key says so
HIGHLIGHT_MAX_STEPS = 4


def segment_start(times, history) -> float | None:
    """The time from which the live plots' running means are taken: the first sample under the current
    parameters (sim/runner.py ObservableHistory segments); None when every sample in the history is."""
    start = history.segments()[-1][0]
    if start == 0:
        return None
    return float(times[start]) if start < len(times) else math.inf


class FrameLoop:
    """The frame loop of ``window`` (app/main_window.py): its timer, the stepping worker, the pacing, the step
    target of scripted runs and the actions waiting for a worker."""

    def __init__(self, window):
        self.window = window
        self.timer = QtCore.QTimer(window, interval=FRAME_INTERVAL_MS, timerType=QtCore.Qt.TimerType.PreciseTimer)
        # looked up at each tick, so that a wrapper set on the instance (bench/frame_phases.py) is what runs
        self.timer.timeout.connect(lambda: self.frame())
        self.stepper = BackgroundStepper()   # steps longer than a frame (CPU) run on a worker thread
        self.pacer = DevicePacer()           # device frames: seconds of steps per frame (app/pacing.py)
        self.plot_pacer = PlotPacer()        # how often the live plots refresh (app/pacing.py)
        self.counters = {"steps": 0, "frames": 0, "t": time.perf_counter()}
        self.step_target = None              # scripted runs: stop after this many steps
        self._target_reached = []            # callbacks for the step target
        self.deferred = []                   # changes waiting for the worker's batch or the model being prepared
        self._on_model_free = []             # readers waiting for the worker's batch (when_model_free)
        self._shown = None                   # (state_version, model, view options) last shown
        self._last_plot = 0.0
        self._plot_version = -1
        self._plot_paint_start = None
        self._staging_waited = 0             # frames the staging let pass in a row (``frame``)

    @property
    def model(self):
        return self.window.runner.model

    def start(self) -> None:
        """Make sure frames come (a change that needs the loop: a worker to poll, slices to run)."""
        if not self.timer.isActive():
            self.timer.start()

    def restart_counters(self) -> None:
        self.counters.update(steps=0, frames=0, t=time.perf_counter())

    # ==== one frame ===========================================================================
    def frame(self) -> None:
        window, life = self.window, self.window.lifecycle
        if life.staging.busy:
            # the next model's form and plots, a piece per frame. While the model is still being built (the
            # swap waits for the build anyway) not in a frame that paints the live plots too (the two made the
            # longest gaps of a switch together), but at least every STAGING_EVERY_TICKS frames; once it is
            # built, in every frame (the swap waits for the staging). Staging with no build at all is made
            # ahead, while idle: as gently as beside a build.
            gentle = life.preparer.building() or not life.preparer.busy
            if self._staging_waited + 1 < STAGING_EVERY_TICKS and gentle and self.plots_paint_in_this_frame():
                self._staging_waited += 1
            else:
                self._staging_waited = 0
                life.staging.run_slice(SLICE_S if gentle else SLICE_AFTER_BUILD_S)
                if not life.staging.busy:
                    life.release_full_collections()   # made ahead (no build waits for it): frozen now
        elif life.poll_preparation():
            self.frame_end()              # a swap takes its own frame: the new model steps from the next one
            return
        elif not life.preparer.busy:
            life.stage_ahead()
        if self.stepper.busy:
            self.collect_background_steps()
        elif window.running:
            self._run_steps_of_frame()
        elif not self.stepper.busy:
            window.runner.collect(wait=True)   # paused: the last frame's observables,
            self.refresh_view()                # and its state (a no-op when it is already shown)
        self.frame_end()

    def _run_steps_of_frame(self) -> None:
        window = self.window
        limit = window.steps_per_frame or MAX_STEPS_PER_FRAME     # auto: the frame's time budget decides
        if self.step_target is not None:
            limit = min(limit, self.step_target - self.model.step_count)
        shown_first = False
        if limit > 0:
            # scripted runs take whole frames of steps, so what a frame highlights does not depend on timing
            budget = self.step_budget() if self.budgeted() and self.step_target is None else None
            if budget is not None and self.device_paced():
                # Show what the last frame computed, then launch this frame's steps: the texture is written
                # behind the last frame's steps in the stream, and Qt paints the window in the event loop while
                # the new steps run (OpenGL and CUDA share the GPU by time slices); the picture is one frame
                # behind the simulation. Painting first (``paint_before_steps``, a repaint) gains nothing: Qt
                # postpones a repaint that comes within a display frame of its last composition to the event
                # loop anyway (QWidgetRepaintManager), and where it does paint at once the device waits for it.
                self.refresh_view()
                if window.paint_before_steps:
                    window.lattice_canvas.native.repaint()
                shown_first = True
            else:
                window.field_view.before_step()
            if wants_background(self.model, window.runner.seconds_per_step, FRAME_BUDGET_S):
                self.stepper.start(self.model, window.runner.steps_for(limit, budget))
            else:
                stepping = time.perf_counter()
                steps = 0
                try:
                    steps = window.runner.advance(limit, budget)
                except ParameterError as exc:    # a model that can no longer step (a diverged field)
                    self.stop_on_error(exc)
                self.counters["steps"] += steps
                self.pace(stepping, steps)
        if not self.stepper.busy:
            self.after_steps(refresh=not shown_first)

    def frame_end(self) -> None:
        now = time.perf_counter()
        canvas = self.window.plot_canvas
        if now - self._last_plot >= self.plot_interval():
            self.update_plots()
        elif canvas.stale and self.plots_on_screen():
            canvas.update()      # the next plots of the last refresh, drawn with this frame's picture
        if now - self.counters["t"] >= STATUS_INTERVAL_S:
            self.window.status.update()
        if not self.window.running and self.step_target is None and not self.busy() \
                and not self.window.lifecycle.working():
            self.timer.stop()   # nothing to do until the next change; changes refresh directly

    def after_steps(self, refresh: bool = True) -> None:
        if refresh:
            self.refresh_view()
        if self.step_target is not None and self.model.step_count >= self.step_target:
            self.finish_target()

    def stop_on_error(self, exc) -> None:
        """A model that can no longer step (a diverged field): say so and pause."""
        self.window.set_running(False)
        self.step_target = None
        self._target_reached.clear()
        self.window.show_message(str(exc), error=True)

    # ==== single steps and scripted runs ======================================================
    def step_once(self) -> None:
        """Pause and advance exactly one step; what changed is highlighted until the next step."""
        window = self.window
        if window.running:
            window.set_running(False)
        if self.stepper.busy:
            return      # the step in flight is the one the user sees next
        window.field_view.before_step()
        if wants_background(self.model, window.runner.seconds_per_step, FRAME_BUDGET_S):
            self.stepper.start(self.model, 1)
            window.status.show_background_work()
            self.timer.start()
            return
        try:
            window.runner.advance(1, None)
        except ParameterError as exc:
            self.stop_on_error(exc)
        self.refresh_view()
        self.update_plots(force=True)
        window.status.update()

    def run_steps(self, n: int, then=None) -> None:
        """Scripted: run exactly n more steps through the frame loop, then pause and call ``then``."""
        self.step_target = self.model.step_count + n
        if then is not None:
            self._target_reached.append(then)
        if n <= 0:
            self.finish_target()
        else:
            self.window.set_running(True)

    def finish_target(self) -> None:
        self.step_target = None
        self.window.set_running(False)
        self.refresh_view()
        self.update_plots(force=True)
        self.window.status.update()
        callbacks, self._target_reached = self._target_reached, []
        for callback in callbacks:
            callback()

    # ==== the stepping worker =================================================================
    def collect_background_steps(self) -> None:
        """The frame loop while a worker steps the model (app/stepping.py): take its batch once it is in, then
        run what waited for it."""
        try:
            done = self.stepper.poll()
        except ParameterError as exc:
            self.stop_on_error(exc)
            done = None
        except MemoryError:
            self.stop_on_error(ParameterError("steps", "not enough memory to step this model"))
            done = None
        except Exception as exc:    # any other failure of the batch (from the worker process: a RuntimeError)
            log.exception("background steps")
            self.stop_on_error(f"the steps failed: {type(exc).__name__}: {exc}")
            done = None
        if done is None and self.stepper.busy:
            self.window.status.show_background_work_if_due()
            return
        if done is not None:
            model, batch, seconds = done
            if model is self.model:
                self.window.runner.commit(batch, seconds)
                self.counters["steps"] += batch.steps
        self.after_steps()
        if not self.window.running:
            self.window.status.update()     # "paused" again, and the new step count, once the step is in
        self.run_deferred()
        self._run_model_free()

    def when_model_free(self, action) -> None:
        """Run ``action`` as soon as no worker writes the model's arrays: now, or right after the stepping
        worker's batch is committed, before the next one starts (for the docks that copy the model's state;
        unlike ``when_idle`` nothing is said in the status bar)."""
        if not self.stepper.busy:
            action()
            return
        self._on_model_free.append(action)

    def _run_model_free(self) -> None:
        waiting, self._on_model_free = self._on_model_free, []
        for action in waiting:
            try:
                action()
            except Exception:     # a reader's failure is its own; the frame loop goes on
                log.exception("a reader of the model failed")

    def run_deferred(self) -> None:
        """Run what waited for a worker (each action checks again and waits again if one is still busy)."""
        waiting, self.deferred = self.deferred, []
        for action in waiting:
            action()

    def busy(self) -> bool:
        """A worker steps the model, or builds the next one."""
        return self.stepper.busy or self.window.lifecycle.preparer.busy

    def when_idle(self, action, what: str) -> bool:
        """Run ``action`` now, or (a worker is stepping the model, or building the next one) as soon as it is
        done; True when it ran now."""
        if not self.busy():
            action()
            return True
        self.deferred.append(action)
        waiting_for = "the step being computed" if self.stepper.busy else "the model being prepared"
        self.window.show_message(f"{what}: after {waiting_for}")
        self.start()
        return False

    # ==== the picture and the live plots ======================================================
    def count_frame(self, event=None) -> None:
        self.counters["frames"] += 1

    def refresh_view(self, force: bool = False) -> None:
        if self.stepper.busy:
            return      # the worker is changing the arrays: the view keeps the last picture until its batch is in
        window = self.window
        o = window.controls.view_options()
        key = (window.runner.state_version, id(self.model), o["highlight"], o["show_links"])
        if not force and key == self._shown:
            return
        self._shown = key
        window.colour_key.note(self.highlight_note())
        window.field_view.show(window.picture())
        window.lattice_canvas.update()

    def update_plots(self, force: bool = False) -> None:
        """Redraw the live plots with the history recorded since the last redraw; the frame loop's calls do
        nothing while the plot dock is hidden or behind another tab (it catches up when shown)."""
        self._last_plot = time.perf_counter()
        history = self.window.runner.history
        if not force and (history.version == self._plot_version or not self.plots_on_screen()):
            return
        self._plot_version = history.version
        start = time.perf_counter()
        self.plot_pacer.refreshed()
        times, values = history.arrays()
        self.window.plots.update(times, values, since=segment_start(times, history))
        self.window.plot_canvas.update()
        self.plot_pacer.spent(time.perf_counter() - start)

    def highlight_readable(self) -> bool:
        """Whether the cells changed since the last frame are few enough steps' worth to be worth highlighting."""
        return self.window.runner.steps_in_last_frame <= HIGHLIGHT_MAX_STEPS

    def highlight_note(self) -> str:
        """The colour key's note when the highlight asked for is left out of the picture."""
        o = self.window.controls.view_options()
        if not o["highlight"] or type(self.model).changed is Model.changed or self.highlight_readable():
            return ""
        return f"changed cells: shown up to {HIGHLIGHT_MAX_STEPS} steps a frame"

    def plots_replaced(self) -> None:
        """Other live plots are shown: the next refresh draws the whole history."""
        self._plot_version = -1

    def plots_on_screen(self) -> bool:
        return on_screen(self.window.plot_dock)

    def plots_paint_starts(self, event=None) -> None:
        self._plot_paint_start = time.perf_counter()

    def plots_drawn(self, event=None) -> None:
        """After a paint of the live plots (its time counted for the plot pacing); one that left parts to draw:
        while the frame loop runs, the next frame asks for them with its own picture (``frame_end``: one
        composition of the window for both); paused, the next pass of the event loop does."""
        if self._plot_paint_start is not None:
            self.plot_pacer.spent(time.perf_counter() - self._plot_paint_start)
            self._plot_paint_start = None
        if not self.window.running:
            continue_while_stale(self.window.plot_canvas)

    def plot_interval(self) -> float:
        """Seconds between refreshes of the live plots: longer while a device runs flat out and the plots would
        take more than their share of the GUI thread (app/pacing.py PlotPacer)."""
        return self.plot_pacer.interval(self.window.running and self.device_paced())

    def plots_paint_in_this_frame(self) -> bool:
        """Whether this frame's end will ask for a paint of the live plots (``frame_end``)."""
        if not self.plots_on_screen():
            return False
        return time.perf_counter() - self._last_plot >= self.plot_interval() or self.window.plot_canvas.stale

    # ==== pacing ==============================================================================
    def device_paced(self) -> bool:
        """Whether running frames are paced on a CUDA device (app/pacing.py): frames kept short, not a scripted
        run of a number of steps."""
        return self.budgeted() and self.step_target is None and self.model.backend_name == "cuda"

    def budgeted(self) -> bool:
        """Whether frames take fewer steps than Steps / frame when those would make them slow: "keep frames under
        30 ms" checked, or Steps / frame auto (as many as fit)."""
        return self.window.adaptive or self.window.steps_per_frame == AUTO_STEPS

    def step_budget(self) -> float:
        """Seconds of stepping in the next frame. On the CPU a fixed budget (drawing with a software renderer is
        slow and would otherwise take all the time). On a CUDA device the frame is paced (app/pacing.py)."""
        if self.model.backend_name != "cuda":
            return FRAME_BUDGET_S
        return self.pacer.budget()

    def pace(self, stepping_start: float, steps: int) -> None:
        self.pacer.stepped(stepping_start, steps, self.window.runner.seconds_per_step)
        # on a device the timer runs back to back: the stepping budget, not the timer, sets the frame rate
        interval = 0 if self.model.backend_name == "cuda" and self.budgeted() else FRAME_INTERVAL_MS
        if self.timer.interval() != interval:
            self.timer.setInterval(interval)
