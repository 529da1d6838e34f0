"""The Study dock's form (app/study_panel.py): a study file written with widgets, for any model that declares
the study capability (sim/studies/capability.py).

The form offers what the capability and the model's schema allow: the model, the swept parameters (any field of
its schema, each a list of values or a linear or log range), the seeds, fixed parameters (TOML ``key = value``
pairs), the run lengths in the model's own time units, the backend and the measures to record. It starts from
the study the model suggests (``suggested_study``). It writes the same TOML text a study file holds and
validates it with ``parse_study``, so its messages are the study file's, shown against the widget they concern.
"""
from __future__ import annotations

import re
import tomllib

from PySide6 import QtCore, QtWidgets

from latticelab.sim.models import get_model, model_names
from latticelab.sim.studies import Study, StudyError, parse_study
from latticelab.sim.studies.capability import all_measures, capability, suggested_study, unavailable_measures
from latticelab.sim.studies.spec import MAX_POINTS, RunSettings, study_text, toml_value

FORM_NAME = "study form"           # the "path" of a study written with the form, in messages
ERROR_STYLE = "border: 1px solid #e05050;"
KINDS = ("list", "linear", "log")  # how a swept parameter's values are given
SEED = "seed"                      # the schema field the form's seeds go to (every model has one)
RUN_FIELDS = ("equilibrate", "decorrelate", "measurements")
RUN_LABELS = {"equilibrate": "equil.", "decorrelate": "apart", "measurements": "meas."}


def study_models() -> list[str]:
    """Registered models that declare the study capability."""
    return [name for name in model_names() if capability(get_model(name)) is not None]


def parse_values(text: str) -> list:
    """'4, 6 8' -> [4, 6, 8]; 'metropolis, wolff' -> ['metropolis', 'wolff']; numbers stay numbers, true/false
    booleans, anything else text (quotes optional)."""
    values = []
    for part in (p for p in re.split(r"[,\s;]+", text.strip()) if p):
        for kind in (int, float):
            try:
                values.append(kind(part))
                break
            except ValueError:
                pass
        else:
            values.append({"true": True, "false": False}.get(part.lower(), part.strip("\"'")))
    return values


def _whole(value: float):
    """A spin box's value as the study file writes it: 20.0 -> 20 (points keyed alike by the form and a file)."""
    return int(value) if float(value).is_integer() else float(value)


class TimeBox(QtWidgets.QDoubleSpinBox):
    """A model time: shown as 300 or 0.25, not 300.000."""

    def textFromValue(self, value: float) -> str:
        return f"{value:g}"


def _narrow(widget: QtWidgets.QWidget, width: int = 44) -> QtWidgets.QWidget:
    widget.setMinimumWidth(width)      # narrower than the widget's own hint: the dock is narrow
    if isinstance(widget, QtWidgets.QAbstractSpinBox):
        widget.setButtonSymbols(QtWidgets.QAbstractSpinBox.ButtonSymbols.NoButtons)
    return widget


class SweepRow(QtWidgets.QWidget):
    """One swept parameter: its name, how its values are given (a list, a linear or a log range) and the
    values."""
    remove_requested = QtCore.Signal(object)

    def __init__(self, fields: list[str], parent=None):
        super().__init__(parent, objectName="sweep_row")
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.parameter = QtWidgets.QComboBox(objectName="sweep_parameter")
        self.parameter.addItems(fields)
        self.parameter.setToolTip("The parameter swept: any parameter of the model")
        self.kind = QtWidgets.QComboBox(objectName="sweep_kind")
        self.kind.addItems(KINDS)
        self.kind.setToolTip("list: the values given; linear / log: n values from .. to, evenly spaced (in the "
                             "logarithm for log)")
        self.values = _narrow(QtWidgets.QLineEdit(objectName="sweep_values"), 60)
        self.values.setToolTip("Values separated by commas, e.g. 8, 16, 32 (text values as they are: wolff)")
        self.start = _narrow(QtWidgets.QLineEdit("1", objectName="sweep_start"))
        self.stop = _narrow(QtWidgets.QLineEdit("2", objectName="sweep_stop"))
        self.num = _narrow(QtWidgets.QSpinBox(objectName="sweep_num", minimum=1, maximum=MAX_POINTS, value=3), 32)
        self.num.setToolTip("How many values")
        self.remove = QtWidgets.QToolButton(text="−", objectName="sweep_remove")
        self.remove.setToolTip("Sweep this parameter no more")
        self.remove.clicked.connect(lambda: self.remove_requested.emit(self))
        for widget, stretch in ((self.parameter, 2), (self.kind, 0), (self.values, 3), (self.start, 1),
                                (self.stop, 1), (self.num, 0), (self.remove, 0)):
            layout.addWidget(widget, stretch)
        self.kind.currentTextChanged.connect(lambda _: self._show_kind())
        self._show_kind()

    def _show_kind(self) -> None:
        ranged = self.kind.currentText() != "list"
        self.values.setVisible(not ranged)
        for widget in (self.start, self.stop, self.num):
            widget.setVisible(ranged)

    @property
    def name(self) -> str:
        return self.parameter.currentText()

    def set_value(self, name: str, value) -> None:
        """Show a study-file value: a list, or {start, stop, num[, scale]}."""
        self.parameter.setCurrentText(name)
        if isinstance(value, dict):
            self.kind.setCurrentText(value.get("scale", "linear"))
            self.start.setText(toml_value(value["start"]))
            self.stop.setText(toml_value(value["stop"]))
            self.num.setValue(int(value["num"]))
        else:
            self.kind.setCurrentText("list")
            self.values.setText(", ".join(str(v) for v in value))

    def grid_value(self) -> tuple[object, list]:
        """(the study-file value, problems as (key, None, message))."""
        key = f"grid.{self.name}"
        if self.kind.currentText() == "list":
            values = parse_values(self.values.text())
            if not values:
                return None, [(key, None, "is empty; give values separated by commas, e.g. 1, 2, 4")]
            return values, []
        ends = {}
        for end, edit in (("start", self.start), ("stop", self.stop)):
            try:
                ends[end] = float(edit.text())
            except ValueError:
                return None, [(f"{key}.{end}", None, f"must be a number; got {edit.text()!r}")]
        scale = {"scale": "log"} if self.kind.currentText() == "log" else {}
        return {**ends, "num": self.num.value(), **scale}, []

    def widget_for(self, key: str) -> QtWidgets.QWidget:
        if self.kind.currentText() == "list":
            return self.values
        return self.num if key.endswith(".num") else self.stop if key.endswith(".stop") else self.start


class MeasureChooser(QtWidgets.QToolButton):
    """The measures a study records, ticked in a menu; none ticked: every measure the model can give."""

    def __init__(self, parent=None):
        super().__init__(parent, objectName="study_measures")
        self.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Fixed)
        self.setMenu(QtWidgets.QMenu(self))
        self.menu().triggered.connect(lambda _: self._show_chosen())
        self.actions_by_name: dict[str, object] = {}

    def set_measures(self, measures: dict, unavailable: dict) -> None:
        """``measures``: name -> Measure (capability.py ``all_measures``); those ``unavailable`` are disabled."""
        menu = self.menu()
        menu.clear()
        self.actions_by_name = {}
        for name, measure in measures.items():
            action = menu.addAction(f"{name}: {measure.label}" + (f" ({measure.unit})" if measure.unit else ""))
            action.setCheckable(True)
            action.setData(name)
            if name in unavailable:
                action.setEnabled(False)
                action.setToolTip(unavailable[name])
            self.actions_by_name[name] = action
        menu.setToolTipsVisible(True)
        self._show_chosen()

    def chosen(self) -> list[str]:
        return [name for name, action in self.actions_by_name.items() if action.isChecked()]

    def set_chosen(self, names) -> None:
        for name, action in self.actions_by_name.items():
            action.setChecked(name in names)
        self._show_chosen()

    def _show_chosen(self) -> None:
        chosen = self.chosen()
        self.setText(", ".join(chosen) if chosen else f"all ({len(self.actions_by_name)})")
        self.setToolTip("The measures each point records (a column each, with its error); none ticked: all")


class StudyForm(QtWidgets.QWidget):
    """A small form that writes a study file (see the module)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.layout_ = layout = QtWidgets.QFormLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.model = QtWidgets.QComboBox(objectName="study_model")
        for name in study_models():
            self.model.addItem(get_model(name).title, name)
        self.model.setToolTip("Any registered model that declares what a study can measure on it")
        self.model.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model.setMinimumContentsLength(8)
        self.sweep_rows: list[SweepRow] = []
        self.fields: list[str] = []        # the model's parameters a row may sweep
        sweep = QtWidgets.QWidget()
        self.sweep_layout = QtWidgets.QVBoxLayout(sweep)
        self.sweep_layout.setContentsMargins(0, 0, 0, 0)
        self.sweep_layout.setSpacing(2)
        self.add_button = QtWidgets.QPushButton("+ parameter", objectName="sweep_add")
        self.add_button.setToolTip("Sweep one more parameter: every combination of the values is a point")
        self.add_button.clicked.connect(lambda: self.add_sweep())
        self.sweep_layout.addWidget(self.add_button, 0, QtCore.Qt.AlignmentFlag.AlignLeft)
        self.ramp = QtWidgets.QCheckBox("ramp the first up and back down", objectName="study_ramp")
        self.ramp.setToolTip("The first swept parameter (a live one) goes up through its values and back down in "
                             "one continuing run per point of the others: a row per value and branch (hysteresis)")
        self.sweep_layout.addWidget(self.ramp)
        self.seeds = QtWidgets.QLineEdit("1", objectName="study_seeds")
        self.seeds.setToolTip("Random seeds; each point is measured once per seed (the errors between seeds)")
        self.others = _narrow(QtWidgets.QLineEdit(objectName="study_parameters"), 60)
        self.others.setToolTip("Fixed parameters of the model as TOML, key = value separated by commas")
        run_fields = RunSettings.model_fields
        self.run: dict[str, QtWidgets.QAbstractSpinBox] = {}
        steps = QtWidgets.QHBoxLayout()
        for name in RUN_FIELDS:
            if name == "measurements":
                box = QtWidgets.QSpinBox(objectName=f"study_{name}", minimum=2, maximum=10_000_000, value=100)
            else:
                box = TimeBox(objectName=f"study_{name}", decimals=6, minimum=0.0, maximum=1e9, value=1.0)
            box.setToolTip(run_fields[name].description or name)
            self.run[name] = _narrow(box)
            steps.addWidget(QtWidgets.QLabel(RUN_LABELS[name]))
            steps.addWidget(box, 1)
        self.steps_label = QtWidgets.QLabel("time")
        self.backend = QtWidgets.QComboBox(objectName="study_backend")
        for choice in run_fields["backend"].annotation.__args__:
            self.backend.addItem(choice)
        self.measures = MeasureChooser()
        self.rows = {"model": ("model", self.model), "grid": ("sweep", sweep), "grid.seed": ("seeds", self.seeds),
                     "parameters": ("fixed parameters", self.others)}
        for key, (label, widget) in self.rows.items():
            layout.addRow({"fixed parameters": "fixed"}.get(label, label), widget)
        layout.addRow(self.steps_label, steps)
        layout.addRow("backend", self.backend)
        layout.addRow("measures", self.measures)
        self.model.currentIndexChanged.connect(lambda _: self.set_model(self.model_name()))
        self.set_model(self.model_name())

    def model_name(self) -> str | None:
        return self.model.currentData()

    # ---- the model's choices --------------------------------------------------------------------------------
    def set_model(self, name: str | None, params=None) -> None:
        """Offer ``name``'s parameters and measures, starting from the study it suggests (for ``params``, the
        running model's parameters, when given)."""
        if name is None:
            return
        index = self.model.findData(name)
        if index < 0:
            return
        with QtCore.QSignalBlocker(self.model):
            self.model.setCurrentIndex(index)
        cls = get_model(name)
        self.fields = [f for f in cls.Params.model_fields if f != SEED]
        suggested = suggested_study(cls, params)
        for row in list(self.sweep_rows):
            self.remove_sweep(row)
        grid = dict(suggested["grid"])
        seeds = grid.pop(SEED, [1])
        for key, value in grid.items():
            self.add_sweep(key, value)
        self.seeds.setText(", ".join(str(s) for s in seeds))
        for key, box in self.run.items():
            if key in suggested["run"]:
                box.setValue(suggested["run"][key])
        unit = cls.time_label if "time" in cls.time_label else f"time ({cls.time_label}s)"
        self.steps_label.setText(unit)
        self.steps_label.setToolTip(f"Run lengths in the model's {unit}: before the first sample, between samples; "
                                    "and the samples per point")
        self.ramp.setChecked(False)
        self.others.setText("")
        self.others.setPlaceholderText(", ".join(f"{n} = …" for n in self.fields[:2]))
        self.measures.set_measures(all_measures(cls), unavailable_measures(cls))
        self.mark_problems([])

    def fill_from(self, model) -> None:
        """Start from the running model: its kind, the study it suggests for its parameters, and as fixed
        parameters its variant fields (e.g. a dimension) and those it runs with other than their defaults (but
        the swept ones and the seed)."""
        self.set_model(model.name, model.params)
        schema = type(model.params)
        values = model.params.model_dump()
        swept = {r.name for r in self.sweep_rows} | {SEED}
        fixed = []
        for k, v in values.items():
            if k in swept or (k not in schema.variant_fields and v == schema.model_fields[k].default):
                continue
            try:
                fixed.append(f"{k} = {toml_value(v)}")
            except ValueError:          # a value a study file cannot hold (None): the schema's default stands
                continue
        self.others.setText(", ".join(fixed))

    def add_sweep(self, name: str | None = None, value=None) -> SweepRow | None:
        """A new swept parameter (the first one not swept yet, when not named)."""
        if not self.fields:
            return None
        row = SweepRow(self.fields)
        swept = {r.name for r in self.sweep_rows}
        name = name or next((f for f in self.fields if f not in swept), self.fields[0])
        row.set_value(name, value if value is not None else [])
        row.remove_requested.connect(self.remove_sweep)
        self.sweep_rows.append(row)
        self.sweep_layout.insertWidget(len(self.sweep_rows) - 1, row)
        return row

    def remove_sweep(self, row: SweepRow) -> None:
        self.sweep_rows.remove(row)
        row.setParent(None)
        row.deleteLater()

    def sweep_row(self, name: str) -> SweepRow | None:
        return next((r for r in self.sweep_rows if r.name == name), None)

    # ---- the study file it writes ------------------------------------------------------------------------------
    def sections(self) -> tuple[dict, dict, dict, dict | None, list]:
        """(parameters, grid, run, ramp, problems found before the schema looks at them)."""
        problems, grid, parameters, ramp = [], {}, {}, None
        for row in self.sweep_rows:
            value, found = row.grid_value()
            if row.name in grid or (ramp and row.name == ramp["parameter"]):
                found = [(f"grid.{row.name}", None, "is swept twice; remove one of its rows")]
            problems += found
            if found:
                continue
            if self.ramp.isChecked() and row is self.sweep_rows[0]:
                ramp = {"parameter": row.name, "values": value, "down": True}
            else:
                grid[row.name] = value
        if self.ramp.isChecked() and not self.sweep_rows:
            problems.append(("ramp", None, "needs a swept parameter: its first row is ramped"))
        seeds = parse_values(self.seeds.text())
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            problems.append(("grid.seed", None, f"must be whole numbers separated by commas, e.g. 1, 2, 3; got "
                                                f"{self.seeds.text()!r}"))
        else:
            grid[SEED] = seeds
        text = self.others.text().strip()
        if text:
            try:
                parameters = tomllib.loads(f"value = {{{text}}}")["value"]
            except tomllib.TOMLDecodeError as exc:
                problems.append(("parameters", None, f"must be key = value pairs separated by commas (TOML); "
                                                     f"{str(exc).split(' (at')[0]}"))
            for key in parameters:
                if key in grid:
                    problems.append((f"parameters.{key}", None, "is swept: leave it out of the fixed parameters"))
        run = {name: _whole(box.value()) for name, box in self.run.items()}
        run["backend"] = self.backend.currentText()
        if self.measures.chosen():
            run["measures"] = self.measures.chosen()
        return parameters, grid, run, ramp, problems

    def text(self) -> str:
        parameters, grid, run, ramp, problems = self.sections()
        if problems:
            raise StudyError(FORM_NAME, problems)
        return study_text(self.model_name() or "", parameters, grid, run, ramp)

    def study(self) -> Study:
        """The validated study, or StudyError whose problems the form has marked on its widgets."""
        self.mark_problems([])
        try:
            return parse_study(self.text(), FORM_NAME)
        except StudyError as exc:
            self.mark_problems(exc.problems)
            raise

    # ---- problems, against their widgets -------------------------------------------------------------------------
    def widget_for(self, key: str) -> QtWidgets.QWidget | None:
        parts = key.split(".")
        if parts[0] == "run":
            name = parts[1] if len(parts) > 1 else ""
            return self.run.get(name) or {"backend": self.backend, "measures": self.measures}.get(name)
        if key in ("grid.seed", "model"):
            return self.rows[key][1]
        if parts[0] == "ramp":
            first = self.sweep_rows[0] if self.sweep_rows else None
            return self.ramp if first is None or key == "ramp" else \
                first.parameter if key == "ramp.parameter" else first.widget_for(key)
        if parts[0] == "grid" and len(parts) > 1:
            row = self.sweep_row(parts[1])
            return row.widget_for(key) if row is not None else self.others
        if parts[0] == "parameters":
            return self.others
        return None

    def label_for(self, key: str) -> str:
        parts = key.split(".")
        if parts[0] == "grid" and len(parts) > 1 and parts[1] != SEED:
            return f"sweep {parts[1]} ({key})"
        if parts[0] == "ramp":
            return f"ramp ({key})"
        if key in self.rows:
            return f"{self.rows[key][0]} ({key})"
        for prefix, (label, _) in self.rows.items():
            if key.startswith(prefix + "."):
                return f"{label} ({key})"
        return key

    def mark_problems(self, problems) -> None:
        marked = {self.widget_for(key) for key, _, _ in problems} - {None}
        for widget in self.findChildren(QtWidgets.QWidget):
            if widget.styleSheet() == ERROR_STYLE and widget not in marked:
                widget.setStyleSheet("")
        for widget in marked:
            widget.setStyleSheet(ERROR_STYLE)

    def describe(self, problems) -> str:
        """One line per problem, named by the form's label and the study key: 'sweep L (grid.L): ...'."""
        return "\n".join(f"{self.label_for(key)}: {message}" for key, _, message in problems)
