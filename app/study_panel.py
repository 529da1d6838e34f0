"""The Study dock (issues 11 and 42): studies of any model that declares the study capability
(sim/studies/capability.py), run from the window while it keeps simulating. Hidden for a model without one.

A study is a study file (TOML, sim/studies/spec.py) opened from disk, or one written with the dock's form
(app/study_form.py: the swept parameters, seeds, run lengths in the model's time units, measures). It runs
through the batch machinery (sim/studies/sweep.py ``run_sweep``) on the dock's worker thread (app/background.py):
one point at a time there (the default: a small machine is not swamped), or on a local Dask cluster of that many
processes. It writes the same resumable, locked and merged table as ``latticelab sweep``. Pause holds it (inside
the running point, or on Dask before the next point), Cancel stops it with the finished points kept (Start
resumes). As rows arrive the plot shows a chosen measure against a swept parameter with error bars, one curve per
value of a second parameter (a ramp's branches two curves); for a table of Binder moments the dock also finds
T_c from the crossings with its bootstrap error (app/study_results.py), on a second worker thread. "Open
results" shows an existing table the same way.

Installed with one line: ``study_panel.install(window)``.
"""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from PySide6 import QtCore, QtWidgets

from latticelab.app.analysis_dock import (RIGHT, CapabilityDock, install_dock, labelled_steps, make_canvas,
                                          redraw)
from latticelab.app.background import Background, Task
from latticelab.app.dialogs import ask_save_path, choose_output
from latticelab.app.study_form import FORM_NAME, StudyForm
from latticelab.app.study_results import (Summary, check_table_rows, describe_result, is_binder_view,
                                          plot_choices, summarise)
from latticelab.render.study_plots import QUANTITIES, StudyPlot
from latticelab.sim.io import OutputError, write_atomic
from latticelab.sim.models import get_model, model_names
from latticelab.sim.params import ParameterError
from latticelab.sim.studies import Study, StudyError, load_study, parse_study
from latticelab.sim.studies.capability import all_measures, capability, plot_hint
from latticelab.sim.studies.progress import SweepProgress, format_duration
from latticelab.sim.studies.sweep import SweepControl, parse_row, run_sweep

REFRESH_MS = 500                   # how often the dock looks at the window's model (shown for it or not)
FOLDER_KEY = "folders/study"       # the folder of the last study file or table (app/settings.py)
TABLES = "Results tables (*.csv *.parquet)"


def _model_class(name):
    return get_model(name) if name in model_names() else None


class StudyPanel(CapabilityDock):
    WHAT = "study"
    state_changed = QtCore.Signal(str)     # "running", "paused", "finished", "cancelled", "failed", "idle"
    row_arrived = QtCore.Signal(object)
    shown = QtCore.Signal()                # the plot shows the latest analysis

    def __init__(self, window):
        super().__init__("Study", "study_dock", window)
        self.interactive = bool(window.interactive)
        self.study: Study | None = None
        self.output: Path | None = None
        self.rows: list[dict] = []
        self.summary: Summary | None = None
        self.state = "idle"
        self.progress = SweepProgress()
        self.plot = None
        self._sweep: Task | None = None          # the running sweep
        self._control: SweepControl | None = None
        self._analysis: Task | None = None       # the live analysis running now
        self._analysis_wanted = False             # rows came in meanwhile: analyse again when it is done
        self.sweeper = Background(self, "latticelab-study-sweep")
        self.background = Background(self, "latticelab-study-analysis")
        self._generation = 0                      # bumped by each new study or table: older results are dropped
        self._version = 0                         # bumped by each change of what the plot shows
        self._followed = None                     # the model class the form was last filled from
        self._fill_source = None                  # (name, params) the form is to be filled from when shown
        self._start(REFRESH_MS, when_shown=self._when_shown)
        self.tick = QtCore.QTimer(self, interval=500)
        self.tick.timeout.connect(self._show_progress)
        self._set_state("idle")

    # ---- construction -------------------------------------------------------------------------------------------
    def _button(self, text: str, name: str, slot, tip: str = "") -> QtWidgets.QPushButton:
        button = QtWidgets.QPushButton(text, objectName=name)
        button.clicked.connect(lambda _=False: slot())
        button.setToolTip(tip)
        return button

    def _row(self, *widgets) -> QtWidgets.QHBoxLayout:
        row = QtWidgets.QHBoxLayout()
        for widget in widgets:
            if isinstance(widget, str):
                row.addWidget(QtWidgets.QLabel(widget))
            elif isinstance(widget, tuple):
                row.addWidget(*widget)
            else:
                row.addWidget(widget)
        return row

    def _build(self) -> None:
        outer = self._layout = self._body()
        self.open_study_button = self._button("Open study…", "study_open", self.open_study_dialog,
                                              "Run a study file (TOML): model, [parameters], [grid], [run]")
        self.save_study_button = self._button("Save study…", "study_save", self.save_study_dialog,
                                              "Write the form below as a study file for 'latticelab sweep'")
        self.open_results_button = self._button("Open results…", "study_results", self.open_results_dialog,
                                                "Show the plots of an existing results table (.csv/.parquet)")
        files = self._row(self.open_study_button, self.save_study_button, self.open_results_button)
        files.addStretch(1)
        outer.addLayout(files)

        self.form = StudyForm()
        box = QtWidgets.QGroupBox("New study")
        QtWidgets.QVBoxLayout(box).addWidget(self.form)
        scroll = QtWidgets.QScrollArea(widgetResizable=True)
        scroll.setWidget(box)
        scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMaximumHeight(box.sizeHint().height() + 40)
        outer.addWidget(scroll)

        self.output_edit = QtWidgets.QLineEdit(objectName="study_output")
        self.output_edit.setPlaceholderText("results table (.csv or .parquet); Start asks")
        self.output_edit.setToolTip("An existing table of the same study is resumed, never overwritten")
        self.workers = QtWidgets.QSpinBox(objectName="study_workers", minimum=1, maximum=max(os.cpu_count() or 1, 1),
                                          value=1)
        self.workers.setToolTip("1: one point at a time in a background thread; more: a Dask cluster of that "
                                "many worker processes on this machine")
        outer.addLayout(self._row("table", (self.output_edit, 1), "workers", self.workers))

        self.start_button = self._button("Start", "study_start", self.start_from_form,
                                         "Run the form's study (an existing table of it is resumed)")
        self.pause_button = self._button("Pause", "study_pause", self.toggle_pause, "Hold the sweep")
        self.cancel_button = self._button("Cancel", "study_cancel", self.cancel,
                                          "Stop; the finished points stay in the table (Start resumes)")
        buttons = self._row(self.start_button, self.pause_button, self.cancel_button)
        buttons.addStretch(1)
        outer.addLayout(buttons)
        self.progress_bar = QtWidgets.QProgressBar(objectName="study_progress", minimum=0, maximum=1, value=0)
        outer.addWidget(self.progress_bar)
        self.status = QtWidgets.QLabel("", objectName="study_status", wordWrap=True)
        self.status.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.status)
        self.info = self.status                  # where CapabilityDock says a failed update

        self.quantity = QtWidgets.QComboBox(objectName="study_quantity")
        self.quantity.setToolTip("The measure plotted (a column of the table), with its error bars")
        self.group = QtWidgets.QComboBox(objectName="study_group")
        self.group.setToolTip("Which group of points (one value of each parameter but the size, the "
                              "temperature and the seed)")
        self.x_param = QtWidgets.QComboBox(objectName="study_x")
        self.x_param.setToolTip("The parameter along the plot's x axis (any parameter the table varies)")
        self.by_param = QtWidgets.QComboBox(objectName="study_by")
        self.by_param.setToolTip("One curve per value of this parameter (a ramp's up and down branches are "
                                 "always two curves)")
        for box in (self.quantity, self.group, self.x_param, self.by_param):
            box.currentIndexChanged.connect(lambda _: self._changed())
        outer.addLayout(self._row("show", (self.quantity, 1), (self.group, 1)))
        outer.addLayout(self._row("against", (self.x_param, 1), "by", (self.by_param, 1)))
        self.result_label = QtWidgets.QLabel("", objectName="study_result", wordWrap=True)
        self.result_label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.result_label)
        # the plot is made later (its axes and fonts cost a noticeable part of a second): ahead, a piece per step,
        # while the window is idle (``ahead_steps``, or ``stage_for`` a coming model), or at the dock's first show

    # ---- the capability: shown for models that declare it ---------------------------------------------------------
    def applies_to(self, model_class) -> bool:
        return capability(model_class) is not None

    def _set_available(self, model) -> None:
        self._show_for(self.applies_to(type(model)) or self.running)     # a running study stays in sight
        if type(model) is not self._followed and self.available and not self.running:
            # the form starts from the running model's study; rebuilding it takes a good part of a frame, so a
            # dock behind another tab does it when it is shown, not inside the model switch
            self._followed = type(model)
            self._fill_source = SimpleNamespace(name=model.name, params=model.params)
            if self.on_screen():
                self._fill_form()

    def _fill_form(self) -> None:
        source, self._fill_source = self._fill_source, None
        if source is not None and not self.running:
            self.form.fill_from(source)

    def _when_shown(self) -> None:
        self._fill_form()
        self._draw_now()

    def _plot_steps(self):
        canvas = make_canvas("study_canvas", (520, 340), (320, 220), cached=True)
        yield "canvas"
        grid = canvas.central_widget.add_grid(spacing=4, margin=4)
        plot = yield from labelled_steps(StudyPlot.in_steps(grid), "plot")
        self._layout.addWidget(canvas.native, 1)
        self.canvas, self.plot = canvas, plot
        yield "placed"

    def _plots(self) -> None:
        """Not at the dock's appearance (a tab behind others, seen perhaps never): ahead while the window is idle
        (``ahead_steps``), or at its first show (``_draw_plot``)."""

    def ahead_steps(self):
        """The glyphs of its text, then its plot made, drawn once offscreen and sized, a piece per step, while the
        window is idle (app/main_window.py ``_stage_ahead``); stops when the dock is shown meanwhile."""
        if (yield from self._glyph_steps()):
            return
        for what in self._plot_pieces():
            yield what
            if self.on_screen():
                return
        self.prepared_ahead = True

    def _take(self, model):
        return self._version

    def _draw(self, model) -> None:
        self._draw_plot()

    def _changed(self) -> None:
        """What the plot shows changed: drawn now when the dock is seen, else at its show."""
        self._version += 1
        if self.on_screen():
            self._draw_plot()

    # ---- messages ------------------------------------------------------------------------------------------------
    def _message(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet("color: #e07070;" if error else "")
        if error:
            self.last_error = text
        self.window.show_message(f"study: {text.splitlines()[0] if text else ''}", error=error)

    def _set_state(self, state: str) -> None:
        self.state = state
        busy = state in ("running", "paused")
        for w in (self.start_button, self.open_study_button, self.open_results_button, self.form, self.workers,
                  self.output_edit):
            w.setEnabled(not busy)
        self.pause_button.setEnabled(busy)
        self.cancel_button.setEnabled(busy)
        self.pause_button.setText("Resume" if state == "paused" else "Pause")
        self.state_changed.emit(state)

    @property
    def running(self) -> bool:
        return self._sweep is not None

    # ---- starting ------------------------------------------------------------------------------------------------
    def start_from_form(self, output=None) -> bool:
        """Validate the form's study and run it; a problem is shown against its widget and nothing runs."""
        self._fill_form()
        try:
            study = self.form.study()
        except StudyError as exc:
            self._message("the study is not valid:\n" + self.form.describe(exc.problems), error=True)
            return False
        return self.start_study(study, output)

    def start_study(self, path_or_spec, output=None) -> bool:
        """Run a study (a file path, its TOML text or a parsed Study) into ``output`` (default: the table field;
        beside a study file, with its name and .csv, as ``latticelab sweep``; else the user is asked)."""
        if self.running:
            self._message("a study is running; cancel it first", error=True)
            return False
        try:
            if isinstance(path_or_spec, Study):
                study = path_or_spec
            elif isinstance(path_or_spec, str) and "\n" in path_or_spec:
                study = parse_study(path_or_spec, FORM_NAME)
            else:
                study = load_study(path_or_spec)
        except StudyError as exc:
            self._message(str(exc), error=True)
            return False
        output = output or self.output_edit.text().strip() or None
        if output is None and study.path not in (FORM_NAME, "<study>") and Path(study.path).suffix == ".toml":
            output = Path(study.path).with_suffix(".csv")
        if output is None:
            # never a file the user did not choose: ask where (scripted: say so, nothing runs)
            output = self._ask_table(f"study-{study.model}.csv")
            if output is None:
                self._message("table: choose the results table first (the field 'table', or Start asks "
                              "where)", error=True)
                return False
            self.output_edit.setText(str(output))      # so Start after a Cancel resumes this table
        self._run(study, Path(output))
        return True

    def _run(self, study: Study, output: Path) -> None:
        self.study, self.output = study, output
        self._new_rows([])
        self.progress_bar.setRange(0, len(study.points))
        self.progress_bar.setValue(0)
        unavailable = "; ".join(f"{q} unavailable: {why}" for q, why in study.unavailable.items())
        self._message(f"{len(study.points)} points of {study.model} -> {output}"
                      + (f"\n{unavailable}" if unavailable else ""))
        self._fill_choices()
        control = self._control = SweepControl()
        workers = self.workers.value()

        def sweep(task):
            try:
                return run_sweep(study, output, workers=None if workers <= 1 else workers, progress=False,
                                 control=control, on_row=lambda row: task.emit(("row", row)),
                                 on_start=lambda rows, todo: task.emit(("claimed", rows, todo)))
            except (OutputError, ParameterError) as exc:      # said in the dock, no traceback needed
                return str(exc)

        self._sweep = self.sweeper.run(sweep, self._done, self._failed, self._progress, self._sweep_finished,
                                       what="study sweep")
        self._set_state("running")
        self.tick.start()

    def _new_rows(self, rows: list[dict]) -> None:
        self._generation += 1
        self._analysis_wanted = False
        self.rows = rows
        self.summary = None
        self.progress = SweepProgress()

    def _progress(self, event) -> None:
        if event[0] == "claimed":
            _, rows, todo = event
            self.progress.start(todo, len(self.study.points) - len(todo))
            self.rows = [parse_row(r) for r in rows]
            self._show_progress()
            if rows:
                self._analyse()
            return
        row = parse_row(event[1])       # as it reads back from the table, so a reopened table plots the same
        self.rows.append(row)
        self.progress.finished(row)
        self._show_progress()
        self._analyse()
        self.row_arrived.emit(row)

    def _done(self, result) -> None:
        if isinstance(result, str):
            self._failed(result)
            return
        where = f"{result.csv_path}" + (f" and {result.parquet_path.name}" if result.parquet_path else "")
        if result.cancelled:
            text = f"cancelled: {self.progress.done} of {self.progress.total} points in {where}; Start resumes"
            state = "cancelled"
        else:
            text = f"finished: {result.done} points run, {result.skipped} already in the table -> {where}"
            state = "finished"
        if result.failed:
            text += f"\n{len(result.failed)} points failed (Start retries them): " + \
                    "; ".join(f"{p.values}: {e}" for p, e in result.failed[:3])
        self._message(text, error=bool(result.failed))
        self._set_state(state)

    def _failed(self, text: str) -> None:
        self._message(f"the study stopped: {text}", error=True)
        self._set_state("failed")

    def _sweep_finished(self, task) -> None:
        self._sweep = self._control = None
        self.tick.stop()
        if self.state in ("running", "paused"):
            self._set_state("idle")
        self._show_progress()

    def _show_progress(self) -> None:
        p = self.progress
        if not p.total:
            return
        self.progress_bar.setRange(0, p.total)
        self.progress_bar.setValue(p.done)
        left = {"paused": "paused", "running": f"{format_duration(p.time_left())} left"}.get(self.state, "")
        self.progress_bar.setFormat(f"{p.done} / {p.total} points" + (f" · {left}" if left else ""))

    # ---- pause / cancel ------------------------------------------------------------------------------------------
    def toggle_pause(self) -> None:
        control = self._control
        if control is None:
            return
        if control.paused:
            control.resume()
            self._set_state("running")
        else:
            control.pause()
            self._set_state("paused")
        self._show_progress()

    def cancel(self) -> None:
        if self._control is not None:
            self._control.cancel()
            self.cancel_button.setEnabled(False)

    def shutdown(self) -> None:
        """Cancel and wait for the workers (the window is closing)."""
        super().shutdown()
        self.tick.stop()
        if self._control is not None:
            self._control.cancel()
        self.sweeper.shutdown(wait=True)
        self.background.shutdown(wait=True)

    # ---- results ---------------------------------------------------------------------------------------------------
    def open_results(self, path) -> bool:
        """Show the plots of an existing results table (read and analysed in a worker thread)."""
        if self.running:
            self._message("a study is running; cancel it first", error=True)
            return False
        path = Path(path)
        if not path.is_file():
            self._message(f"table: {path} is not a file", error=True)
            return False
        if path.suffix not in (".csv", ".parquet"):
            self._message(f"table: {path.name} must end in .csv or .parquet", error=True)
            return False
        self.study, self.output = None, path
        self._new_rows([])
        self._message(f"reading {path} …")

        def job(task):
            from latticelab.sim.studies.tc import load_rows
            rows = check_table_rows(path, load_rows(path))
            return rows, summarise(rows)

        self._start_worker(job, lambda result: self._opened(path, *result), "not opened")
        return True

    def _opened(self, path, rows, summary) -> None:
        self.rows = rows
        self._message(f"{path}: {len(rows)} rows")
        self._show_summary(summary)

    def _analyse(self) -> None:
        """Curves and T_c of the rows so far, in a worker; again when rows came in meanwhile."""
        if self._analysis is not None:
            self._analysis_wanted = True
            return
        self._analysis_wanted = False
        rows = list(self.rows)
        self._analysis = self._start_worker(lambda task: summarise(rows), self._show_summary, "analysis failed")

    def _start_worker(self, job, on_done, failure: str) -> Task:
        """Run ``job`` in a worker thread (app/background.py); its result goes to ``on_done`` unless a newer
        study or table was started meanwhile."""
        generation = self._generation
        return self.background.run(job, lambda result: generation == self._generation and on_done(result),
                                   lambda text: generation == self._generation
                                   and self._message(f"{failure}: {text}", error=True),
                                   on_finished=self._worker_finished, what="study analysis")

    def _worker_finished(self, worker) -> None:
        if self._analysis is worker:
            self._analysis = None
            if self._analysis_wanted:
                self._analyse()

    def _table_model(self):
        """The model class of the rows shown (or of the study running), None when unknown."""
        name = self.rows[0].get("model") if self.rows else self.study.model if self.study else None
        return _model_class(name)

    def _fill_choices(self) -> None:
        """The measures and parameters of the rows shown, in the show / against / by boxes (choices kept)."""
        cls = self._table_model()
        hint = plot_hint(cls) if cls is not None else {}
        labels = {k: m.label for k, m in all_measures(cls).items()} if cls is not None else {}
        study = self.study
        measures, params, by = plot_choices(self.rows, hint, study.measures if study else (),
                                            (*study.grid_keys, *([study.ramp] if study.ramp else []))
                                            if study else ())

        def refill(box, items, preferred, blank=False):
            current = box.currentData()
            with QtCore.QSignalBlocker(box):
                box.clear()
                if blank:
                    box.addItem("—", None)
                for key in items:
                    box.addItem(QUANTITIES[key][0] if box is self.quantity and key in QUANTITIES
                                else labels.get(key, key) if box is self.quantity else key, key)
                keep = box.findData(current) if current is not None else -1
                choice = keep if keep >= 0 else box.findData(preferred) if preferred is not None else -1
                box.setCurrentIndex(choice if choice >= 0 else 0)
        refill(self.quantity, measures, measures[0] if measures else None)
        refill(self.x_param, params, params[0] if params else None)
        x = self.x_param.currentData()
        refill(self.by_param, [p for p in by if p != x], hint.get("by"), blank=True)

    def _show_summary(self, summary: Summary) -> None:
        self._fill_choices()
        self.summary = summary
        current = self.group.currentText()
        with QtCore.QSignalBlocker(self.group):
            self.group.clear()
            for view in summary.groups:
                self.group.addItem(view.name)
            self.group.setCurrentIndex(max(self.group.findText(current), 0))
        self._changed()
        if summary.rows == len(self.rows) and not self._analysis_wanted:
            self.shown.emit()

    def current_group(self):
        if self.summary is None or not self.summary.groups:
            return None
        return self.summary.groups[max(self.group.currentIndex(), 0)]

    def _draw_plot(self) -> None:
        if self.plot is None:
            if not self.on_screen():
                return            # drawn when the dock is shown
            CapabilityDock._plots(self)          # its first show: what was not made ahead, now
        self._drawn = self._version
        quantity, x, by = self.quantity.currentData(), self.x_param.currentData(), self.by_param.currentData()
        binder = is_binder_view(self.summary, quantity, x, by)
        self.group.setVisible(binder and len(self.summary.groups) > 1)
        self.result_label.setText("")
        if quantity is None or x is None:
            self.plot.set_data({}, quantity or "", None, x_label=x or "")
            self.plot.title.text = "no rows yet"
        elif not binder:                          # any measure against any parameter, every row
            from latticelab.sim.studies.curves import curves, varying_parameters
            others = tuple(p for p in varying_parameters(self.rows) if p not in ("seed", x, by))
            self.plot.set_data(curves(self.rows, quantity, x, by, others), quantity, None, x_label=x,
                               label=self.quantity.currentText())
        else:
            r = self.current_group().result
            t_c = (r.T_c, r.T_c_err) if r.T_c is not None else None
            self.plot.set_data(self.current_group().curves[quantity], quantity, t_c, x_label=x)
            self.result_label.setText(describe_result(r))
        redraw(self.canvas)    # its title and labels follow the quantity: every part

    # ---- files -----------------------------------------------------------------------------------------------------
    def _folder(self) -> str | None:
        return self.window.prefs.get(FOLDER_KEY) or None

    def _remember(self, path: Path) -> None:
        self.window.prefs.set(FOLDER_KEY, str(Path(path).parent.resolve()))

    def _ask_table(self, name: str) -> Path | None:
        """The results table the user chooses (None when not interactive or cancelled); an existing one is
        resumed, so the dialog asks nothing about replacing it."""
        if not self.interactive:
            return None
        path, _ = ask_save_path(self, "Results table", self._folder(), name, TABLES)
        if not path:
            return None
        self._remember(Path(path))
        return Path(path)

    def _ask_open(self, title: str, filters: str) -> Path | None:
        if not self.interactive:
            return None
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, title, self._folder() or str(Path.cwd()), filters)
        if not path:
            return None
        self._remember(Path(path))
        return Path(path)

    def open_study_dialog(self) -> None:
        path = self._ask_open("Open study", "Study files (*.toml);;All files (*)")
        if path is not None:
            self.start_study(path)

    def open_results_dialog(self) -> None:
        path = self._ask_open("Open results", f"{TABLES};;All files (*)")
        if path is not None:
            self.open_results(path)

    def save_study_dialog(self) -> None:
        if not self.interactive:
            return
        self._fill_form()
        path, _ = ask_save_path(self, "Save study", self._folder(), f"study-{self.form.model_name()}.toml",
                                "Study files (*.toml)")
        if path:
            self.save_study(path)

    def save_study(self, path, overwrite: bool | None = None) -> Path | None:
        """Write the form as a study file (app/dialogs.py ``choose_output``): an existing file is replaced only
        if the user agrees; scripted, or with ``overwrite=False``, a free name beside it is taken."""
        self._fill_form()
        try:
            text = self.form.text()
            parse_study(text, FORM_NAME)
        except StudyError as exc:
            self.form.mark_problems(exc.problems)
            self._message("not saved; the study is not valid:\n" + self.form.describe(exc.problems), error=True)
            return None
        self.form.mark_problems([])
        written = choose_output(self, path, ".toml",
                                lambda to, replace: write_atomic(to, lambda f: f.write(text), overwrite=replace,
                                                                 binary=False),
                                confirm=self.interactive and overwrite is not False, say=self._message,
                                prefs=self.window.prefs, folder_key=FOLDER_KEY, what="saved")
        if written is not None:
            self._message(f"saved {written}")
        return written


def install(window, area=RIGHT) -> StudyPanel:
    """Add the dock to a main window (a tab beside the live plots, shown for models with the study
    capability); the window closing stops the sweep first."""
    return install_dock(window, StudyPanel(window), "study_panel", area, stop_with_window=True)
