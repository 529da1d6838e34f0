"""The main window's model lifecycle: a parameter applied as its schema says (the runner, sim/runner.py, decides
whether it makes a new model), a reset, a switch to another model, and the window following the new model
(form, live plots, title, view). A new model large enough (or any on a CUDA device) is built on a worker
(app/preparing.py) while the running one keeps going; its form and plots, and the analysis docks' plots, are
made meanwhile a slice per frame (app/staging.py), and the frame loop (app/frame_loop.py) swaps it in. While
idle, the other registered models' forms and plots are made ahead the same way, so that a first switch to one
only shows them. Nothing blocks the event loop for longer than one frame.
"""
from __future__ import annotations

import time

from PySide6 import QtCore, QtWidgets

from latticelab.app import preparing
from latticelab.app.preparing import Job, ModelPreparer, current_device
from latticelab.app.settings import variant_key
from latticelab.app.staging import Staging
from latticelab.app.status_bar import describe_lattice
from latticelab.render.plots import LivePlots, glyph_steps, series_for
from latticelab.sim.backend import BackendError
from latticelab.sim.models import all_models, get_model
from latticelab.sim.params import ParameterError
from latticelab.sim.runner import FirstLook

STAGE_AHEAD_AFTER_S = 2.0    # the other models' forms and plots are made ahead from this long after start-up
SETTLE_AFTER_SWAP_S = {"cuda": 1.0}  # by backend: the hidden docks' preparation waits this long after a swap
# a new model this large (its estimated bytes) is built on a worker thread (app/preparing.py); on a CUDA device a
# smaller one too, since its kernels may have to be compiled
BACKGROUND_BUILD_BYTES = {"numpy": 512 << 20, "cuda": 1 << 20}


def failure_text(exc: BaseException) -> str:
    """What the user is told when a model change failed."""
    if isinstance(exc, MemoryError):
        return "not enough memory for this model"
    if isinstance(exc, (ParameterError, BackendError, ValueError)):
        return str(exc)
    return f"could not build the model: {type(exc).__name__}: {exc}"


class ModelLifecycle:
    """Parameter changes, resets and switches of ``window``'s model, built here or on the worker, and what is made
    ahead for them. The window's settings ``background_builds`` (None: by size; True/False: always/never),
    ``stage_ahead`` and ``settle_after_swap_s`` (None: by backend) steer it."""

    def __init__(self, window):
        self.window = window
        self.preparer = ModelPreparer()      # new models (switch, size, dimension) are built on a worker thread
        self.staging = Staging()             # the next model's form and plots, made ahead a slice per frame
        self.plots = None                    # the live plots shown (of the running model's class)
        self.plot_sets = {}                  # model class -> its LivePlots; those of other models kept, hidden
        self.plot_fonts = None               # one VisPy font manager (glyph atlas) for all of them
        self.ahead = list(all_models().values())
        self.glyphs_ahead = True             # the live plots' glyphs rendered ahead too (before the models)
        self.ahead_from = time.perf_counter() + STAGE_AHEAD_AFTER_S
        self.docks_ahead = []                # the analysis docks whose first show is prepared ahead
        self.last_swap: dict = {}            # the last model change's GUI-thread parts, in seconds (bench/window.py)
        self._swapped_at = -float("inf")     # perf_counter() of the last model change shown (``settling``)

    @property
    def runner(self):
        return self.window.runner

    @property
    def model(self):
        return self.window.runner.model

    # ==== parameters ==========================================================================
    def set_parameter(self, name: str, value, also: dict | None = None, record: bool = True) -> bool:
        """A parameter edited in the form (or by a script): applied as its schema says (sim/runner.py).
        ``also``: other fields changed in the same step (undo, restore defaults). A refused value is also shown
        under its field; an applied change can be undone (Edit menu, app/undo.py) unless ``record`` is False."""
        window = self.window
        if window.frames.busy():   # a worker owns the model, or builds the next one: check now, apply after
            try:
                self.runner.params.replace(**{**(also or {}), name: value})
            except ParameterError as exc:
                self.refused(name, value, str(exc))
                return False
            window.frames.when_idle(lambda: self.set_parameter(name, value, also, record), f"{name} = {value}")
            return True
        schema = self.runner.model_class.Params
        changes = self._variant_changes(name, value) if name in schema.variant_fields else {name: value}
        changes.update(also or {})
        before = self.runner.params
        try:
            new = self.runner.rebuilt_params(**changes)
        except (ParameterError, ValueError) as exc:
            self.refused(name, value, failure_text(exc))
            return False
        cls = self.runner.model_class
        if new is not None and self.builds_in_background(cls, new):
            self._rebuild_in_background(name, value, changes, before, record, new)
            return True
        # a wait cursor while a change that can take long is applied: a new model, or a field declared slow=True
        slow = any(schema.is_slow(k) for k, v in changes.items() if getattr(before, k, None) != v)
        if slow:
            QtWidgets.QApplication.setOverrideCursor(QtCore.Qt.CursorShape.WaitCursor)
        try:
            what = self.runner.set(**changes)
        except (ParameterError, BackendError, ValueError, MemoryError) as exc:
            self.refused(name, value, failure_text(exc))
            return False
        finally:
            if slow:
                QtWidgets.QApplication.restoreOverrideCursor()
        if what == "none" or self.runner.params == before:
            # the value it has already: nothing to say or undo (a typed value came twice, from Enter and again
            # as the box lost the focus, and the Messages dock logged it twice)
            self.show_parameters()
            return True
        if record:
            window.undo_history.record(name, before, self.runner.params, self.model.name)
        if what == "rebuild":
            self.after_model_change()
            window.show_message(f"new {self.model.title.lower()}: {describe_lattice(self.model)}")
        else:
            info = schema.fields().get(name, {})
            unit = f" {info['unit']}" if info.get("unit") else ""
            later = " (used by the next reset)" if what == "reset" else ""
            window.show_message(f"{name} = {getattr(self.runner.params, name)}{unit}{later}")
            self.show_parameters()
            window.frames.refresh_view()
        return True

    def refused(self, name: str | None, value, text: str) -> None:
        """A change could not be made: say why; the form shows the running model's values again (and the
        message beside the field ``name``)."""
        self.window.show_message(text, error=True)
        self.show_parameters()
        if name is not None:
            self.window.controls.show_field_error(name, text, value)

    def _rebuild_in_background(self, name: str, value, changes: dict, before, record: bool, new) -> None:
        """Build the new model that ``changes`` need on the worker; it replaces the running one when done."""
        window, cls = self.window, self.runner.model_class

        def ready(look) -> None:
            self.runner.load(look)
            if record:
                window.undo_history.record(name, before, self.runner.params, self.model.name)
            self.after_model_change()
            window.show_message(f"new {self.model.title.lower()}: {describe_lattice(self.model)}")

        shown = ", ".join(f"{k} = {v}" for k, v in changes.items())
        self.prepare(cls, new, f"{cls.title.lower()} with {shown}", ready,
                     lambda exc: self.refused(name, value, failure_text(exc)))

    def _variant_changes(self, name: str, value) -> dict:
        """A variant field changes (the Ising dimension): the fields whose defaults depend on it take the
        values last used in that variant, or its suggested ones; the current variant's values are kept."""
        prefs = self.window.prefs
        schema = self.runner.model_class.Params
        current = self.runner.params
        prefs.set_model_values(self.model.name, current)
        values = {**current.model_dump(), name: value}
        try:
            depends = schema.suggested(gpu=self.model.backend_name == "cuda", **values)
        except Exception:
            depends = {}
        stored = prefs.model_values(self.model.name, schema, variant_key(schema, values))
        return {name: value, **depends, **{k: v for k, v in stored.items() if k in depends}}

    def show_parameters(self) -> None:
        self.window.controls.show_parameters(self.runner.params.model_dump())

    def reset(self, *_unused) -> None:
        window = self.window
        if window.frames.busy():
            window.frames.when_idle(self.reset, "reset")
            return
        try:
            self.runner.reset()
        except (ParameterError, BackendError, ValueError, MemoryError) as exc:
            self.refused(None, None, failure_text(exc))
            return
        self.after_model_change()
        p = self.runner.params
        window.show_message(f"reset ({', '.join(f'{k}={getattr(p, k)}' for k in type(p).names('reset'))})")

    # ==== switching model =====================================================================
    def switch_model(self, name: str) -> bool:
        """Run a new model of kind ``name`` with its remembered (or default) parameters; the running model
        stays if that fails."""
        window = self.window
        if name == self.model.name:
            if self.preparer.busy:      # back to the running model: the one being prepared is not wanted
                self.preparer.cancel()
                window.show_message(f"kept the {self.model.title.lower()}")
            window.show_model_choice()
            return True
        if window.interactive:
            window.save_preferences()
        else:
            window.prefs.set_model_values(self.model.name, self.runner.params)
        try:       # an unknown name or a bad stored value raises ParameterError
            cls = get_model(name)
            params = cls.Params.create(gpu=self.model.backend_name == "cuda",
                                       **window.prefs.model_values(name, cls.Params))
        except (ParameterError, BackendError, ValueError, MemoryError) as exc:
            self._switch_failed(exc)
            return False
        if self.builds_in_background(cls, params):   # a request made while another model is prepared wins
            self.prepare(cls, params, cls.title, self._adopt_switched, self._switch_failed)
            self.stage(cls)
            return True
        self.preparer.cancel()
        if window.frames.stepper.busy:
            window.frames.when_idle(lambda: self.switch_model(name), f"switch to {name}")
            return True
        try:
            self.runner.switch(name, params)
        except (ParameterError, BackendError, ValueError, MemoryError) as exc:
            self._switch_failed(exc)
            return False
        self._adopt_switched(None)
        return True

    def _adopt_switched(self, look) -> None:
        """The switch's new model is running (``look``: built on the worker, taken here; None: already)."""
        if look is not None:
            self.runner.load(look)
        self.after_model_change()
        self.window.show_message(f"{self.model.title}: {describe_lattice(self.model)}")

    def _switch_failed(self, exc: BaseException) -> None:
        self.refused(None, None, failure_text(exc))
        self.window.show_model_choice()

    # ==== building on the worker ==============================================================
    def builds_in_background(self, cls, params) -> bool:
        """Whether a new ``cls`` model is built on the worker: when the window's ``background_builds`` says so,
        else when its estimated size reaches BACKGROUND_BUILD_BYTES (models without an estimate are built here)."""
        if self.window.background_builds is not None:
            return bool(self.window.background_builds)
        backend = self.model.backend_name
        estimate = cls.estimate_bytes(params, backend)
        return estimate is not None and estimate >= BACKGROUND_BUILD_BYTES.get(backend, 0)

    def prepare(self, cls, params, what: str, ready, failed) -> None:
        """Build a ``cls`` model from ``params`` on the worker (app/preparing.py) while this one keeps running; the
        frame loop calls ``ready(look)`` (a sim.runner.FirstLook of the model) or ``failed(exception)`` when it is
        done (``poll_preparation``)."""
        backend, devices = self.runner.backend, self.runner.devices
        # the model's first observables are taken on the worker too (sim/runner.py FirstLook): ``ready`` gets them
        job = Job(lambda: FirstLook(preparing.build_model(cls, params, backend, devices)), what, ready, failed,
                  device=current_device(self.model))
        self.hold_full_collections()        # before the worker starts allocating
        self.preparer.start(job)
        self.window.show_message(f"preparing {what}...")
        self.window.status.update()
        self.window.frames.start()

    def poll_preparation(self) -> bool:
        """Swap in a model the worker has built, in one step on this thread; after the batch of steps in flight,
        if any (the old model's), and once its form and plots are made (``staging``). True when a build was
        taken (swapped in, or reported as failed)."""
        if not self.preparer.busy or self.window.frames.stepper.busy or self.staging.busy:
            return False
        job = self.preparer.poll()
        if job is None:
            self.release_full_collections()     # the build was superseded or cancelled: no swap to wait for
            return False
        if job.error is not None:
            job.on_error(job.error)
        else:
            job.on_ready(job.result)
        self.release_full_collections()         # what the switch made is frozen
        self.window.frames.run_deferred()
        return True

    def hold_full_collections(self) -> None:
        """No automatic full collection of Python's cycle collector while a switch is prepared: one pauses every
        thread for as long as it walks the objects made since start-up (app/collector.py)."""
        if self.window.collector is not None:
            self.window.collector.hold()

    def release_full_collections(self) -> None:
        """Once no build is left, full collections may run again (what the switch made frozen first)."""
        collector = self.window.collector
        if collector is not None and collector.held and not self.preparer.busy:
            collector.settle()

    # ==== made ahead ==========================================================================
    def stage(self, cls) -> None:
        """Make ``cls``'s parameter form and live plots ahead, hidden, a slice per frame (app/staging.py), while
        its model is built on the worker: the swap then only shows them."""
        window = self.window
        self.hold_full_collections()
        self.staging.add(("form", cls.name), window.controls.stage_form(cls.Params))
        if cls not in self.plot_sets:
            plots = LivePlots(window.plot_canvas.central_widget, series_for(cls.declared_observables),
                              x_label=cls.time_label, fonts=self.plot_fonts, build=False)
            self.plot_sets[cls] = plots
            self.staging.add(("plots", cls.name), self._plot_signals_blocked(plots.stage(window.plot_canvas, True)))
        self.staging.add_followers(cls)      # the analysis docks' plots for it (app/analysis_dock.py)
        window.frames.start()

    def settling(self) -> bool:
        """Whether a model change is under way or was just shown: a new model being built, forms and plots being
        made (for a switch, or ahead), or a swap less than ``settle_after_swap_s`` ago (its first frames draw the
        new plots and view). The hidden docks' own preparation waits meanwhile, so that it does not fall into a
        switch's first frames beside a plot redraw. Not after a swap on the CPU by default: frames take long on
        a software renderer anyway, and a dock opened right after a switch would make what was held in one
        frame tick."""
        if self.preparer.busy or self.staging.busy:
            return True
        settle = self.window.settle_after_swap_s
        if settle is None:
            settle = SETTLE_AFTER_SWAP_S.get(self.model.backend_name, 0.0)
        return time.perf_counter() - self._swapped_at < settle

    def ahead_left(self) -> bool:
        return self.window.stage_ahead and bool(self.ahead or self.glyphs_ahead or self.docks_ahead)

    def working(self) -> bool:
        """Whether the frame loop has slices to run for it (what is staged, or left to make ahead)."""
        return self.staging.busy or self.ahead_left()

    def stage_ahead(self) -> None:
        """While idle (no switch prepared, nothing staged), queue what is made ahead, from STAGE_AHEAD_AFTER_S after
        start-up: first the glyphs the live plots' texts may show (render/plots.py glyph_steps: a glyph's first
        use otherwise renders it inside a paint), then each hidden analysis dock's first show
        (app/analysis_dock.py ``ahead_steps``), then the next registered model's form and plots (``stage``).
        The frame loop lets full collections run again once each is made, what it made frozen first
        (app/collector.py)."""
        if not self.ahead_left() or time.perf_counter() < self.ahead_from:
            return
        if self.glyphs_ahead:
            self.glyphs_ahead = False
            if self.plot_fonts is not None:
                self.staging.add(("glyphs", "live plots"), glyph_steps(self.plot_fonts))
                return
        while self.docks_ahead:
            dock = self.docks_ahead.pop(0)
            if not dock.on_screen():
                self.staging.add(("dock", dock.objectName()), dock.ahead_steps())
                return
        if not self.ahead:
            return
        cls = self.ahead.pop(0)
        if cls is not type(self.model):
            self.stage(cls)

    def _plot_signals_blocked(self, steps):
        """``steps`` with the plot canvas's Qt signals blocked while each runs (as ``make_plots`` does)."""
        native = self.window.plot_canvas.native
        while True:
            with QtCore.QSignalBlocker(native):
                try:
                    what = next(steps)
                except StopIteration:
                    return
            yield what

    # ==== the window follows the model ========================================================
    def after_model_change(self) -> None:
        """The model was replaced or reset: controls, plots, title and view follow it. Each part's time is kept
        in ``last_swap`` (a form and plots made ahead, ``stage``, are only shown here)."""
        window, model = self.window, self.model
        parts, clock = {}, time.perf_counter()

        def done(part: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            parts[part] = now - clock
            clock = now

        window.setWindowTitle(f"latticelab: {model.title}")
        window.model_help_action.setText(f"About the {model.title}...")
        done("title")
        window.controls.set_model(type(model))     # its form, and only the view options that apply to it
        window.controls.set_geometry(model.shape)
        self.show_parameters()
        window.show_model_choice()
        window.follow_pace()
        done("controls")
        if self.plots is None or self.plots is not self.plot_sets.get(type(model)):
            self.make_plots(type(model))
            done("plots")
        window.apply_view_options()
        window.frames.refresh_view(force=True)
        done("view")
        window.frames.update_plots(force=True)
        done("plot data")
        window.status.update()
        done("status")
        self.last_swap = parts
        self._swapped_at = time.perf_counter()
        window.modelChanged.emit()

    def make_plots(self, model_class) -> None:
        """Show ``model_class``'s plots: those made before (or ahead, ``stage``), else new ones."""
        canvas = self.window.plot_canvas
        plots = self.plot_sets.get(model_class)
        if plots is not None and not plots.built:
            with QtCore.QSignalBlocker(canvas.native):
                plots.finish()          # the steps not made ahead yet
            if not plots.built:         # making them ahead failed: make them anew
                plots.remove()
                plots = None
        if plots is None:
            with QtCore.QSignalBlocker(canvas.native):
                plots = LivePlots(canvas.central_widget, series_for(model_class.declared_observables),
                                  x_label=model_class.time_label, fonts=self.plot_fonts)
            self.plot_sets[model_class] = plots
            self.plot_fonts = plots.fonts
        if self.plots is not None and self.plots is not plots:
            self.plots.show(False)
        plots.show(True)
        self.plots = plots
        self.window.frames.plots_replaced()
