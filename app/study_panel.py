"""The Study dock (issue 11): critical-temperature studies run from the window while it keeps simulating.

A study is a study file (TOML, sim/studies/spec.py) opened from disk, or one written with the small form here
(the model -- any registered model whose schema has the study's axes L, T and seed and that gives the Binder
cumulant --, the sizes L, the temperature range, the seeds, other parameters, and the run settings). The form
writes the same TOML text a file holds and validates it with ``parse_study``, so its messages are the study
file's, shown against the field they concern.

The sweep runs in a worker thread through the batch machinery (sim/studies/sweep.py ``run_sweep``): with one
worker in that thread (the default: a small machine is not swamped), with more on a local Dask cluster of that
many processes. It writes the same resumable table as ``latticelab sweep``; Pause holds it (inside the running
point, or on Dask before the next point), Cancel stops it with the finished points kept (Start resumes). As
rows arrive the plot shows U(T), C_v(T) or chi(T) per L, and, with two or more sizes, the Binder crossing
T_c with its bootstrap error (sim/studies/tc.py), computed in a second worker thread. "Open results" shows an
existing table the same way.

Installed with one line: ``study_panel.install(window)``.
"""
from __future__ import annotations

import logging
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from latticelab.app.analysis_dock import RIGHT, AnalysisDock, install_dock, labelled_steps, make_canvas, redraw
from latticelab.app.background import Background, Task
from latticelab.render.plots import one_font_manager, with_font_manager
from latticelab.render.study_plots import QUANTITIES, StudyPlot
from latticelab.sim.io import OutputError, free_path, write_atomic
from latticelab.sim.models import get_model, model_names
from latticelab.sim.params import ParameterError
from latticelab.sim.studies import Study, StudyError, load_study, parse_study
from latticelab.sim.studies.progress import SweepProgress, format_duration
from latticelab.sim.studies.spec import RunSettings, study_text
from latticelab.sim.studies.sweep import SweepControl, parse_row, run_sweep

log = logging.getLogger(__name__)

AXES = ("L", "T", "seed")          # what the study's curves are drawn over (tc.py)
BOOTSTRAP = 200                    # samples for the T_c error shown live
FORM_NAME = "study form"           # the "path" of a study written with the form, in messages
ERROR_STYLE = "border: 1px solid #e05050;"


def eligible_models() -> list[str]:
    """Registered models a study of this panel can run: their schema has L, T and seed, and they give the
    Binder cumulant (sim/analysis/critical.py ``measurer``)."""
    from latticelab.sim.analysis.critical import measurer
    names = []
    for name in model_names():
        cls = get_model(name)
        if all(a in cls.Params.model_fields for a in AXES) and "binder" not in measurer(cls).missing:
            names.append(name)
    return names


# ==== the form ===============================================================================================
def _number_list(text: str, kind, key: str, example: str) -> tuple[list, list]:
    """'4, 6 8' -> [4, 6, 8]; problems as (key, None, message)."""
    parts = [p for p in re.split(r"[,\s;]+", text.strip()) if p]
    if not parts:
        return [], [(key, None, f"is empty; give values separated by commas, e.g. {example}")]
    values = []
    for part in parts:
        try:
            values.append(kind(part))
        except ValueError:
            what = "whole numbers" if kind is int else "numbers"
            return [], [(key, None, f"must be {what} separated by commas, e.g. {example}; got {part!r}")]
    return values, []


class StudyForm(QtWidgets.QWidget):
    """A small form that writes a study file: model, L, T range, seeds, other parameters, run settings."""

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QtWidgets.QFormLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.model = QtWidgets.QComboBox(objectName="study_model")
        for name in eligible_models():
            self.model.addItem(get_model(name).title, name)
        self.model.setToolTip("Any registered model with lattice size L, temperature T and seed parameters")
        self.model.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model.setMinimumContentsLength(8)
        self.sizes = QtWidgets.QLineEdit("8, 16", objectName="study_L", minimumWidth=60)
        self.sizes.setToolTip("Lattice sizes L, separated by commas: one curve each; two or more give T_c")
        self.t_from = self._double("study_T_from", 2.0)
        self.t_to = self._double("study_T_to", 2.5)
        self.t_count = QtWidgets.QSpinBox(objectName="study_T_count", minimum=1, maximum=1000, value=6)
        self.t_count.setButtonSymbols(QtWidgets.QAbstractSpinBox.ButtonSymbols.NoButtons)
        temps = QtWidgets.QHBoxLayout()
        for label, w in (("from", self.t_from), ("to", self.t_to), ("n", self.t_count)):
            temps.addWidget(QtWidgets.QLabel(label))
            temps.addWidget(w, 1)
            w.setMinimumWidth(44)        # narrower than the spin box's own hint: the dock is narrow
        self.seeds = QtWidgets.QLineEdit("1, 2", objectName="study_seeds")
        self.seeds.setToolTip("Random seeds; each (L, T) is measured once per seed (errors of T_c from them)")
        self.others = QtWidgets.QLineEdit(objectName="study_parameters", minimumWidth=60)
        self.others.setToolTip("Other parameters of the model as TOML, key = value separated by commas; a "
                               "[list] makes that parameter vary over the grid too")
        run_fields = RunSettings.model_fields
        self.run = {}
        defaults = {"equilibrate": 500, "decorrelate": 1, "measurements": 1000}
        for name, default in defaults.items():
            low = next((m.ge for m in run_fields[name].metadata if hasattr(m, "ge")), 0)
            box = QtWidgets.QSpinBox(objectName=f"study_{name}", minimum=int(low), maximum=10_000_000,
                                     value=default)
            box.setToolTip(run_fields[name].description or name)
            box.setButtonSymbols(QtWidgets.QAbstractSpinBox.ButtonSymbols.NoButtons)
            self.run[name] = box
        self.backend = QtWidgets.QComboBox(objectName="study_backend")
        for choice in run_fields["backend"].annotation.__args__:
            self.backend.addItem(choice)
        self.rows = {"model": ("model", self.model), "grid.L": ("sizes L", self.sizes),
                     "grid.T": ("T range", temps), "grid.seed": ("seeds", self.seeds),
                     "parameters": ("other parameters", self.others)}
        short = {"other parameters": "parameters"}       # the form's labels; messages use the long ones
        for label, widget in self.rows.values():
            layout.addRow(short.get(label, label), widget)
        steps = QtWidgets.QHBoxLayout()
        for name, box in self.run.items():
            steps.addWidget(QtWidgets.QLabel({"equilibrate": "equil.", "decorrelate": "apart",
                                              "measurements": "meas."}[name]))
            steps.addWidget(box, 1)
            box.setMinimumWidth(44)
        layout.addRow("steps", steps)
        layout.addRow("backend", self.backend)
        self.measures = QtWidgets.QLineEdit(objectName="study_measures", minimumWidth=60)
        self.measures.setToolTip("The measures to record, separated by commas; empty: every measure the model has")
        layout.addRow("measures", self.measures)
        self.model.currentIndexChanged.connect(lambda _: self._model_changed())
        self._model_changed()

    @staticmethod
    def _double(name: str, value: float) -> QtWidgets.QDoubleSpinBox:
        box = QtWidgets.QDoubleSpinBox(objectName=name, decimals=4, minimum=-1e4, maximum=1e4, value=value)
        box.setSingleStep(0.01)
        box.setButtonSymbols(QtWidgets.QAbstractSpinBox.ButtonSymbols.NoButtons)
        return box

    def model_name(self) -> str | None:
        return self.model.currentData()

    def _model_changed(self) -> None:
        name = self.model_name()
        if name is None:
            return
        schema = get_model(name).Params
        names = [n for n in schema.model_fields if n not in AXES][:2]
        self.others.setPlaceholderText(", ".join(f"{n} = …" for n in names))
        from latticelab.sim.studies.capability import all_measures
        self.measures.setPlaceholderText("all: " + ", ".join(all_measures(get_model(name))))

    def fill_from(self, model) -> None:
        """Take the running model's kind, its variant fields (e.g. a dimension) and T as starting values."""
        index = self.model.findData(model.name)
        if index < 0:
            return
        self.model.setCurrentIndex(index)
        values = model.params.model_dump()
        variant = {k: values[k] for k in type(model.params).variant_fields if k in values}
        from latticelab.sim.studies.spec import toml_value
        self.others.setText(", ".join(f"{k} = {toml_value(v)}" for k, v in variant.items()))
        T = float(values.get("T", self.t_from.value()))
        self.t_from.setValue(round(0.95 * T, 4))
        self.t_to.setValue(round(1.05 * T, 4))

    # ---- the study file it writes --------------------------------------------------------------------------
    def sections(self) -> tuple[dict, dict, dict, list]:
        """(parameters, grid, run, problems found before the schema looks at them)."""
        problems = []
        sizes, p = _number_list(self.sizes.text(), int, "grid.L", "8, 16, 32")
        problems += p
        seeds, p = _number_list(self.seeds.text(), int, "grid.seed", "1, 2, 3")
        problems += p
        parameters, grid = {}, {}
        text = self.others.text().strip()
        if text:
            try:
                others = tomllib.loads(f"value = {{{text}}}")["value"]
            except tomllib.TOMLDecodeError as exc:
                others = {}
                problems.append(("parameters", None, f"must be key = value pairs separated by commas (TOML); "
                                                     f"{str(exc).split(' (at')[0]}"))
            for key, value in others.items():
                if key in AXES:
                    problems.append((f"parameters.{key}", None, "is set by its own field of the form"))
                elif isinstance(value, list):
                    grid[key] = value
                else:
                    parameters[key] = value
        grid = {"L": sizes, "T": {"start": self.t_from.value(), "stop": self.t_to.value(),
                                  "num": self.t_count.value()}, "seed": seeds, **grid}
        run = {name: box.value() for name, box in self.run.items()}
        run["backend"] = self.backend.currentText()
        measures = [m for m in re.split(r"[,\s;]+", self.measures.text().strip()) if m]
        if measures:
            run["measures"] = measures
        return parameters, grid, run, problems

    def text(self) -> str:
        parameters, grid, run, problems = self.sections()
        if problems:
            raise StudyError(FORM_NAME, problems)
        return study_text(self.model_name() or "", parameters, grid, run)

    def study(self) -> Study:
        """The validated study, or StudyError whose problems the form has marked on its fields."""
        self.mark_problems([])
        try:
            return parse_study(self.text(), FORM_NAME)
        except StudyError as exc:
            self.mark_problems(exc.problems)
            raise

    def widget_for(self, key: str) -> QtWidgets.QWidget | None:
        if key.startswith("run."):
            name = key.split(".")[1]
            return self.run.get(name) or {"backend": self.backend, "measures": self.measures}.get(name)
        if key.startswith("grid.T"):
            return self.t_count if key.endswith(".num") else self.t_from
        if key in ("grid.L", "grid.seed", "model"):
            return self.rows[key][1]
        if key.startswith(("parameters", "grid.")):
            return self.others
        return None

    def label_for(self, key: str) -> str:
        for prefix, (label, _) in self.rows.items():
            if key == prefix or key.startswith(prefix + "."):
                return f"{label} ({key})"
        if key.startswith("grid."):
            return f"other parameters ({key})"
        return key

    def mark_problems(self, problems) -> None:
        marked = {self.widget_for(key) for key, _, _ in problems} - {None}
        for widget in self.findChildren(QtWidgets.QWidget):
            if widget.styleSheet() == ERROR_STYLE and widget not in marked:
                widget.setStyleSheet("")
        for widget in marked:
            widget.setStyleSheet(ERROR_STYLE)

    def describe(self, problems) -> str:
        """One line per problem, named by the form's label and the study key: 'sizes L (grid.L): ...'."""
        lines = []
        for key, _, message in problems:
            lines.append(f"{self.label_for(key)}: {message}")
        return "\n".join(lines)


# ==== the results shown ===========================================================================================
@dataclass
class GroupView:
    """What the plot shows of one group of rows (one value of every parameter but L, T and seed)."""
    name: str
    curves: dict          # quantity -> L -> (T, mean, err)
    result: object        # tc.GroupResult
    rows: int = 0


@dataclass
class Summary:
    groups: list = field(default_factory=list)
    rows: int = 0


def summarise(rows: list[dict], n_boot: int = BOOTSTRAP) -> Summary:
    """Curves and T_c of every group of rows (runs in a worker thread)."""
    from latticelab.sim.studies import tc
    if not rows or not {"L", "T", "m2", "m4"} <= set(rows[0]):
        return Summary([], len(rows))            # no Binder cumulant: the plots need no analysis
    groups = tc.group_rows(rows)
    results = []
    for key, group in groups.items():
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
    if rows and {"L", "T", "m2", "m4"} <= set(rows[0]):
        from latticelab.sim.studies.tc import validate_rows
        rows, _ = validate_rows(rows, path)
    return rows


# ==== the sweep thread =============================================================================================
class SweepThread(QtCore.QThread):
    """``run_sweep`` off the GUI thread; rows arrive as signals (queued to the GUI thread)."""
    claimed = QtCore.Signal(object, object)     # rows already in the table (typed), points still to run
    row = QtCore.Signal(object)
    done = QtCore.Signal(object)                # SweepResult
    failed = QtCore.Signal(str)

    def __init__(self, study: Study, out: Path, workers: int, parent=None):
        super().__init__(parent)
        self.study, self.out, self.workers = study, out, workers
        self.control = SweepControl()

    def run(self) -> None:
        try:
            result = run_sweep(self.study, self.out, workers=None if self.workers <= 1 else self.workers,
                               progress=False, control=self.control, on_row=self.row.emit,
                               on_start=lambda rows, todo: self.claimed.emit([parse_row(r) for r in rows], todo))
        except (OutputError, ParameterError) as exc:
            self.failed.emit(str(exc))
        except Exception as exc:                 # reported in the dock; the window goes on
            log.exception("study sweep")
            self.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            self.done.emit(result)


# ==== the dock =====================================================================================================
class StudyPanel(AnalysisDock):
    state_changed = QtCore.Signal(str)     # "running", "paused", "finished", "cancelled", "failed", "idle"
    row_arrived = QtCore.Signal(object)
    shown = QtCore.Signal()                # the plot shows the latest analysis

    def __init__(self, window=None, parent=None):
        super().__init__("Study", "study_dock", parent)
        self.window = window
        self.interactive = window is not None and bool(window.interactive)
        self.folder = Path.cwd()
        self.study: Study | None = None
        self.output: Path | None = None
        self.rows: list[dict] = []
        self.summary: Summary | None = None
        self.state = "idle"
        self.progress = SweepProgress()
        self._sweep: SweepThread | None = None
        self._analysis: Task | None = None       # the live analysis running now
        self._analysis_wanted = False             # rows came in meanwhile: analyse again when it is done
        self.background = Background(self, "latticelab-study-analysis")
        self._generation = 0                      # bumped by each new study or table: older results are dropped
        self._start()
        self.tick = QtCore.QTimer(self, interval=500)
        self.tick.timeout.connect(self._show_progress)
        self._set_state("idle")

    # ---- construction -------------------------------------------------------------------------------------------
    def _button(self, text: str, name: str, slot, tip: str = "") -> QtWidgets.QPushButton:
        button = QtWidgets.QPushButton(text, objectName=name)
        button.clicked.connect(lambda _=False: slot())
        button.setToolTip(tip)
        return button

    def _build(self) -> None:
        outer = self._body()
        files = QtWidgets.QHBoxLayout()
        self.open_study_button = self._button("Open study…", "study_open", self.open_study_dialog,
                                              "Run a study file (TOML): model, [parameters], [grid], [run]")
        self.save_study_button = self._button("Save study…", "study_save", self.save_study_dialog,
                                              "Write the form below as a study file for 'latticelab sweep'")
        self.open_results_button = self._button("Open results…", "study_results", self.open_results_dialog,
                                                "Show the plots of an existing results table (.csv/.parquet)")
        for b in (self.open_study_button, self.save_study_button, self.open_results_button):
            files.addWidget(b)
        files.addStretch(1)
        outer.addLayout(files)

        self.form = StudyForm()
        box = QtWidgets.QGroupBox("New study")
        QtWidgets.QVBoxLayout(box).addWidget(self.form)
        scroll = QtWidgets.QScrollArea(widgetResizable=True)
        scroll.setWidget(box)
        scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMaximumHeight(box.sizeHint().height() + 8)
        outer.addWidget(scroll)

        where = QtWidgets.QHBoxLayout()
        self.output_edit = QtWidgets.QLineEdit(objectName="study_output")
        self.output_edit.setPlaceholderText("results table (.csv or .parquet); default: a new name")
        self.output_edit.setToolTip("An existing table of the same study is resumed, never overwritten")
        where.addWidget(QtWidgets.QLabel("table"))
        where.addWidget(self.output_edit, 1)
        self.workers = QtWidgets.QSpinBox(objectName="study_workers", minimum=1, maximum=max(os.cpu_count() or 1, 1),
                                          value=1)
        self.workers.setToolTip("1: one point at a time in a background thread; more: a Dask cluster of that "
                                "many worker processes on this machine")
        where.addWidget(QtWidgets.QLabel("workers"))
        where.addWidget(self.workers)
        outer.addLayout(where)

        buttons = QtWidgets.QHBoxLayout()
        self.start_button = self._button("Start", "study_start", self.start_from_form,
                                         "Run the form's study (an existing table of it is resumed)")
        self.pause_button = self._button("Pause", "study_pause", self.toggle_pause, "Hold the sweep")
        self.cancel_button = self._button("Cancel", "study_cancel", self.cancel,
                                          "Stop; the finished points stay in the table (Start resumes)")
        for b in (self.start_button, self.pause_button, self.cancel_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        outer.addLayout(buttons)
        self.progress_bar = QtWidgets.QProgressBar(objectName="study_progress", minimum=0, maximum=1, value=0)
        outer.addWidget(self.progress_bar)
        self.status = QtWidgets.QLabel("", objectName="study_status", wordWrap=True)
        self.status.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.status)

        show = QtWidgets.QHBoxLayout()
        self.quantity = QtWidgets.QComboBox(objectName="study_quantity")
        for key, (title, _) in QUANTITIES.items():
            self.quantity.addItem(title, key)
        self.quantity.currentIndexChanged.connect(lambda _: self._draw())
        self.group = QtWidgets.QComboBox(objectName="study_group")
        self.group.setToolTip("Which group of points (one value of each parameter but L, T and seed)")
        self.group.currentIndexChanged.connect(lambda _: self._draw())
        show.addWidget(QtWidgets.QLabel("show"))
        show.addWidget(self.quantity, 1)
        show.addWidget(self.group, 1)
        outer.addLayout(show)
        axes = QtWidgets.QHBoxLayout()
        self.x_param = QtWidgets.QComboBox(objectName="study_x")
        self.x_param.setToolTip("The parameter along the plot's x axis (any parameter the table varies)")
        self.by_param = QtWidgets.QComboBox(objectName="study_by")
        self.by_param.setToolTip("One curve per value of this parameter (a ramp's up and down branches are "
                                 "always two curves)")
        for box in (self.x_param, self.by_param):
            box.currentIndexChanged.connect(lambda _: self._draw())
        axes.addWidget(QtWidgets.QLabel("against"))
        axes.addWidget(self.x_param, 1)
        axes.addWidget(QtWidgets.QLabel("by"))
        axes.addWidget(self.by_param, 1)
        outer.addLayout(axes)
        self.result_label = QtWidgets.QLabel("", objectName="study_result", wordWrap=True)
        self.result_label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.result_label)

        # the plot is made later (its axes and fonts cost a noticeable part of a second): ahead, a piece per step,
        # while the window is idle (``_canvas_steps``), or at the dock's first show what is left
        self.canvas = self.plot = None
        self._plot_layout = outer
        self._plot_iter = None
        self.visibilityChanged.connect(lambda visible: visible and self._draw())

    def _canvas_steps(self):
        """The steps making the canvas and its plot (shared by the window's preparation and a first show)."""
        if self._plot_iter is None:
            self._plot_iter = self._plot_pieces()
        return self._plot_iter

    def _plot_pieces(self):
        with one_font_manager(self.fonts):
            # cached: its first picture drawn a part per paint, the background shown until then
            canvas = make_canvas("study_canvas", (520, 340), (320, 220), cached=True)
            pieces = StudyPlot.in_steps(canvas.central_widget.add_grid(spacing=4, margin=4))
        yield "canvas"
        plot = yield from labelled_steps(with_font_manager(pieces, self.fonts), "plot")
        self._plot_layout.addWidget(canvas.native, 1)
        self.canvas, self.plot = canvas, plot

    def _make_plot(self) -> None:
        for _ in self._canvas_steps():
            pass

    # ---- messages ------------------------------------------------------------------------------------------------
    def _message(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        if error:
            self.last_error = text
            self.status.setStyleSheet("color: #e07070;")
        else:
            self.status.setStyleSheet("")
        if self.window is not None:
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
        """Validate the form's study and run it; a problem is shown against its field and nothing runs."""
        try:
            study = self.form.study()
        except StudyError as exc:
            self._message("the study is not valid:\n" + self.form.describe(exc.problems), error=True)
            return False
        return self.start_study(study, output)

    def start_study(self, path_or_spec, output=None) -> bool:
        """Run a study (a file path, its TOML text or a parsed Study) into ``output`` (default: beside a study
        file, with its name and .csv, as ``latticelab sweep``; for the form, a new name in the last folder)."""
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
        if output is None:
            if study.path not in (FORM_NAME, "<study>") and Path(study.path).suffix == ".toml":
                output = Path(study.path).with_suffix(".csv")
            else:
                # never a file the user did not choose: ask where (scripted: say so, nothing runs)
                output = self._dialog("Results table", "Results tables (*.csv *.parquet)", save=True,
                                      name=f"study-{study.model}.csv", confirm=True)
                if output is None:
                    self._message("table: choose the results table first (the field 'table', or Start asks "
                                  "where)", error=True)
                    return False
                self.output_edit.setText(str(output))      # so Start after a Cancel resumes this table
        output = Path(output)
        self.study, self.output = study, output
        self._generation += 1
        self._analysis_wanted = False
        self.rows = []
        self.summary = None
        self.progress = SweepProgress()
        self.progress_bar.setRange(0, len(study.points))
        self.progress_bar.setValue(0)
        unavailable = "; ".join(f"{q} unavailable: {why}" for q, why in study.unavailable.items())
        self._message(f"{len(study.points)} points of {study.model} -> {output}" + (f"\n{unavailable}" if unavailable
                                                                                  else ""))
        self._draw()
        sweep = SweepThread(study, output, self.workers.value(), self)
        sweep.claimed.connect(self._claimed)
        sweep.row.connect(self._row)
        sweep.done.connect(self._done)
        sweep.failed.connect(self._failed)
        sweep.finished.connect(self._sweep_finished)
        self._sweep = sweep
        self._set_state("running")
        sweep.start()
        self.tick.start()
        return True

    def _claimed(self, rows: list, todo: list) -> None:
        self.progress.start(todo, len(self.study.points) - len(todo))
        self.rows = list(rows)
        self._show_progress()
        if rows:
            self._analyse()

    def _row(self, row: dict) -> None:
        row = parse_row(row)            # as it reads back from the table, so a reopened table plots the same
        self.rows.append(row)
        self.progress.finished(row)
        self._show_progress()
        self._analyse()
        self.row_arrived.emit(row)

    def _done(self, result) -> None:
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

    def _sweep_finished(self) -> None:
        self._sweep = None
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
        if self.state == "paused":
            left = "paused"
        elif self.state == "running":
            left = f"{format_duration(p.time_left())} left"
        else:
            left = ""
        self.progress_bar.setFormat(f"{p.done} / {p.total} points" + (f" · {left}" if left else ""))

    # ---- pause / cancel ------------------------------------------------------------------------------------------
    def toggle_pause(self) -> None:
        if self._sweep is None:
            return
        control = self._sweep.control
        if control.paused:
            control.resume()
            self._set_state("running")
        else:
            control.pause()
            self._set_state("paused")
        self._show_progress()

    def cancel(self) -> None:
        if self._sweep is not None:
            self._sweep.control.cancel()
            self.cancel_button.setEnabled(False)

    def shutdown(self) -> None:
        """Cancel and wait for the workers (the window is closing)."""
        super().shutdown()
        self.tick.stop()
        if self._sweep is not None:
            self._sweep.control.cancel()
            self._sweep.wait()
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
        self.rows = []
        self.progress = SweepProgress()
        self._message(f"reading {path} …")

        def job(task):
            from latticelab.sim.studies.tc import load_rows
            rows = check_table_rows(path, load_rows(path))
            return rows, summarise(rows)

        self._generation += 1
        self._analysis_wanted = False
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
        self._analysis = self._start_worker(lambda task: summarise(rows), self._show_summary,
                                            "analysis failed")

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

    def _fill_choices(self) -> None:
        """The measures and parameters of the rows shown, in the show / against / by boxes (choices kept)."""
        from latticelab.sim.studies.curves import measure_columns, varying_parameters
        measures = measure_columns(self.rows) or list(QUANTITIES)
        params = [p for p in varying_parameters(self.rows) if p != "seed"] or ["T"]

        def refill(box, items, preferred, blank=False):
            current = box.currentData()
            with QtCore.QSignalBlocker(box):
                box.clear()
                if blank:
                    box.addItem("—", None)
                for key in items:
                    box.addItem(QUANTITIES[key][0] if box is self.quantity and key in QUANTITIES else key, key)
                keep = box.findData(current) if current is not None else -1
                choice = keep if keep >= 0 else next((box.findData(k) for k in preferred if box.findData(k) >= 0), 0)
                box.setCurrentIndex(max(choice, 0))
        refill(self.quantity, measures, ("binder", "spectral_entropy", "coarsening_exponent"))
        refill(self.x_param, params, ("T",))
        x = self.x_param.currentData()
        sizes = ["L"] if self.rows and "L" in self.rows[0] and "L" not in params else []   # Binder curves by L
        refill(self.by_param, [p for p in params if p != x] + sizes, ("L",) if x == "T" else (), blank=True)

    def _show_summary(self, summary: Summary) -> None:
        self._fill_choices()
        self.summary = summary
        current = self.group.currentText()
        with QtCore.QSignalBlocker(self.group):
            self.group.clear()
            for view in summary.groups:
                self.group.addItem(view.name)
            index = self.group.findText(current)
            self.group.setCurrentIndex(max(index, 0))
        self._draw()
        if summary.rows == len(self.rows) and not self._analysis_wanted:
            self.shown.emit()

    def current_group(self) -> GroupView | None:
        if self.summary is None or not self.summary.groups:
            return None
        return self.summary.groups[max(self.group.currentIndex(), 0)]

    def _draw(self) -> None:
        if self.plot is None:
            if not self.isVisible():
                return            # drawn when the dock is shown
            self._make_plot()
        view = self.current_group()
        quantity = self.quantity.currentData() or "binder"
        x, by = self.x_param.currentData() or "T", self.by_param.currentData()
        binder_view = x == "T" and by == "L" and quantity in QUANTITIES
        self.group.setVisible(binder_view and self.summary is not None and len(self.summary.groups) > 1)
        if not binder_view:                     # any measure against any parameter, every row
            from latticelab.sim.studies.curves import curves, varying_parameters
            others = tuple(p for p in varying_parameters(self.rows) if p not in ("seed", x, by))
            self.plot.set_data(curves(self.rows, quantity, x, by, others), quantity, None, x_label=x,
                               label=self.quantity.currentText())
            self.result_label.setText("")
        elif view is None:
            self.plot.set_data({}, quantity, None)
            self.result_label.setText("")
        else:
            r = view.result
            t_c = (r.T_c, r.T_c_err) if r.T_c is not None else None
            self.plot.set_data(view.curves[quantity], quantity, t_c)
            self.result_label.setText(describe_result(r))
        redraw(self.canvas)    # its title and labels follow the quantity: every part

    # ---- files -----------------------------------------------------------------------------------------------------
    def _dialog(self, title: str, filters: str, save: bool = False, name: str = "",
                confirm: bool = False) -> Path | None:
        """A file chosen by the user (None when not interactive or cancelled); ``confirm``: the save dialog asks
        before an existing file is chosen."""
        if not self.interactive:
            return None
        if save:
            options = QtWidgets.QFileDialog.Option(0) if confirm else QtWidgets.QFileDialog.Option.DontConfirmOverwrite
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self, title, str(self.folder / name), filters,
                                                            options=options)
        else:
            path, _ = QtWidgets.QFileDialog.getOpenFileName(self, title, str(self.folder), filters)
        if not path:
            return None
        self.folder = Path(path).parent
        return Path(path)

    def open_study_dialog(self) -> None:
        path = self._dialog("Open study", "Study files (*.toml);;All files (*)")
        if path is not None:
            self.start_study(path)

    def open_results_dialog(self) -> None:
        path = self._dialog("Open results", "Results tables (*.csv *.parquet);;All files (*)")
        if path is not None:
            self.open_results(path)

    def save_study_dialog(self) -> None:
        path = self._dialog("Save study", "Study files (*.toml)", save=True,
                            name=f"study-{self.form.model_name()}.toml")
        if path is not None:
            self.save_study(path)

    def save_study(self, path, overwrite: bool | None = None) -> Path | None:
        """Write the form as a study file. An existing file is replaced only if the user agrees; scripted
        (not interactive), a free name beside it is taken."""
        try:
            text = self.form.text()
            parse_study(text, FORM_NAME)
        except StudyError as exc:
            self.form.mark_problems(exc.problems)
            self._message("not saved; the study is not valid:\n" + self.form.describe(exc.problems), error=True)
            return None
        self.form.mark_problems([])
        path = Path(path)
        if path.suffix != ".toml":
            path = path.with_name(path.name + ".toml")
        if path.exists() and not overwrite:
            from latticelab.app.dialogs import confirm_replace
            if self.interactive and overwrite is None and confirm_replace(self, path):
                overwrite = True
            else:
                path = free_path(path)
        try:
            write_atomic(path, lambda f: f.write(text), overwrite=bool(overwrite), binary=False)
        except OSError as exc:
            self._message(f"could not write {path}: {exc.strerror or exc}", error=True)
            return None
        self._message(f"saved {path}")
        return path


def describe_result(result) -> str:
    """'T_c = 2.2691 ± 0.0042 (U* = 0.61) from L 8/16' or why there is none yet."""
    if result.T_c is None:
        why = result.warnings[0] if result.warnings else "no Binder crossing"
        return f"T_c: {why}"
    err = f" ± {result.T_c_err:.2g}" if math.isfinite(result.T_c_err) else ""
    pairs = ", ".join(f"{c.L_small}/{c.L_large}" for c in result.crossings if c.T is not None)
    text = f"T_c = {result.T_c:.5g}{err}, U* = {result.U_c:.3f} (L {pairs})"
    extra = [w for w in result.warnings if "do not cross" in w or "cross" in w]
    return text + ("\n" + "; ".join(extra) if extra else "")


def install(window, area=RIGHT) -> StudyPanel:
    """Add the dock to a main window; a tab beside the live plots when present."""
    # the window closing stops the sweep first
    panel = install_dock(window, StudyPanel(window, parent=window), "study_panel", area, stop_with_window=True)
    model = window.model
    if model is not None:
        panel.form.fill_from(model)
    return panel
