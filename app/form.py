"""A parameter form generated from a model's schema (sim/params.py): one row per field.

The widget of a field follows from its type and choices, or from the schema's ``widget`` hint for the few
custom widgets: a slider that resolves a critical value finely ("critical_temperature"), a slider that is 0 and
then logarithmic ("zero_log"), an update schedule with an m:w hybrid ("schedule"), an editable list of sizes
("lattice_size"), a dimension chooser ("dimension"). Every widget emits ``edited(name, value)`` with the value
as typed (text that does not parse is passed on, so the schema names the problem); the window decides what a
change does. ``show_values(values)`` sets every widget from values without emitting anything.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from latticelab.app import scales
from latticelab.sim.params import ModelParams, allowed_text


def _parse_number(text: str, kind: type):
    text = text.strip()
    try:
        return kind(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return text            # not a number: the schema says what is allowed
        return int(value) if kind is int and value.is_integer() else value


def _format(value) -> str:
    if isinstance(value, float):
        return "0" if value == 0 else f"{value:.10g}"
    return str(value)


class FieldWidget(QtWidgets.QWidget):
    """Base of a field's widget: ``edited(name, value)`` on a user change; ``show_value`` without signals."""

    edited = QtCore.Signal(str, object)

    def __init__(self, name: str, info: dict, schema: type[ModelParams]):
        super().__init__()
        self.name, self.info, self.schema = name, info, schema
        self.setObjectName(f"field_{name}")
        self.setToolTip(self._tooltip())
        self.layout_ = QtWidgets.QHBoxLayout(self)
        self.layout_.setContentsMargins(0, 0, 0, 0)

    def _tooltip(self) -> str:
        unit = f" [{self.info['unit']}]" if self.info.get("unit") else ""
        applies = {"live": "applies at once", "reset": "used by the next reset",
                   "rebuild": "makes a new model"}[self.info["applies"]]
        return f"{self.info['help']}{unit}\nAllowed: {allowed_text(self.schema, self.name)}; {applies}."

    def emit(self, value) -> None:
        self.edited.emit(self.name, value)

    def show_value(self, value, values: dict) -> None:
        raise NotImplementedError

    def blocked(self):
        return [QtCore.QSignalBlocker(w) for w in self.findChildren(QtWidgets.QWidget)]


class ChoiceField(FieldWidget):
    """A combo box of the field's choices (or of the schema's options for the current values)."""

    def __init__(self, name, info, schema, editable: bool = False, suffix: str = ""):
        super().__init__(name, info, schema)
        self.suffix = suffix
        self.combo = QtWidgets.QComboBox(objectName=f"{name}_choice", editable=editable)
        self.layout_.addWidget(self.combo)
        if editable:
            self.combo.setInsertPolicy(QtWidgets.QComboBox.InsertPolicy.NoInsert)
            self.combo.activated.connect(lambda _: self._edited())
            self.combo.lineEdit().editingFinished.connect(self._edited)
        else:
            self.combo.activated.connect(lambda _: self._edited())
        self._items: tuple = ()

    def _text_of(self, value) -> str:
        return f"{value}{self.suffix}"

    def _edited(self) -> None:
        text = self.combo.currentText()
        for item in self._items:
            if self._text_of(item) == text:
                self.emit(item)
                return
        kind = self.info["type"]
        self.emit(_parse_number(text.removesuffix(self.suffix), kind) if kind in (int, float) else text)

    def show_value(self, value, values: dict) -> None:
        items = self.info.get("choices") or self.schema.options(self.name, values) or ()
        blockers = self.blocked()
        if tuple(items) != self._items:
            self._items = tuple(items)
            self.combo.clear()
            self.combo.addItems([self._text_of(i) for i in self._items])
        index = self.combo.findText(self._text_of(value))
        if index < 0 and not self.combo.isEditable():
            self.combo.addItem(self._text_of(value))
            self._items = self._items + (value,)
            index = self.combo.count() - 1
        if index >= 0:
            self.combo.setCurrentIndex(index)
        else:
            self.combo.setCurrentText(self._text_of(value))
        del blockers


class NumberField(FieldWidget):
    """A line edit for a number or a text: applied on Enter or when focus leaves; never rewrites the input."""

    def __init__(self, name, info, schema):
        super().__init__(name, info, schema)
        self.box = QtWidgets.QLineEdit(objectName=f"{name}_box")
        self.layout_.addWidget(self.box)
        if info.get("unit"):
            self.layout_.addWidget(QtWidgets.QLabel(info["unit"]))
        self.box.editingFinished.connect(self._edited)

    def _edited(self) -> None:
        kind = self.info["type"]
        self.emit(_parse_number(self.box.text(), kind) if kind in (int, float) else self.box.text())

    def show_value(self, value, values: dict) -> None:
        blockers = self.blocked()
        self.box.setText(_format(value))
        del blockers


class IntegerField(FieldWidget):
    """A spin box for integers with the schema's bounds (seeds, counts)."""

    def __init__(self, name, info, schema):
        super().__init__(name, info, schema)
        b = info["bounds"]
        low = b.get("ge", b.get("gt", -2 ** 31 + 1) + (1 if "gt" in b else 0))
        high = b.get("le", b.get("lt", 2 ** 31) - (1 if "lt" in b else 0))
        self.spin = QtWidgets.QSpinBox(objectName=f"{name}_spin", minimum=max(int(low), -2 ** 31 + 1),
                                       maximum=min(int(high), 2 ** 31 - 1))
        self.layout_.addWidget(self.spin)
        self.spin.valueChanged.connect(self.emit)

    def show_value(self, value, values: dict) -> None:
        blockers = self.blocked()
        self.spin.setValue(min(int(value), self.spin.maximum()))
        del blockers


class CentredSlider(FieldWidget):
    """A slider finest around the schema's centre value (a critical temperature), a box for exact values and a
    button that sets the centre."""

    def __init__(self, name, info, schema):
        super().__init__(name, info, schema)
        self.centre_value = 1.0
        self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal, objectName=f"{name}_slider")
        self.slider.setRange(0, scales.TEMPERATURE_STEPS)
        self.box = QtWidgets.QLineEdit(objectName=f"{name}_box")
        self.box.setMaximumWidth(90)
        self.centre_button = QtWidgets.QPushButton(f"{name}_c", objectName=f"{name}_centre")
        self.centre_button.setToolTip(f"Set {name} to its critical value")
        column = QtWidgets.QVBoxLayout()
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.box)
        row.addWidget(self.centre_button)
        column.addWidget(self.slider)
        column.addLayout(row)
        self.layout_.addLayout(column)
        self.slider.valueChanged.connect(self._slider_moved)
        self.box.editingFinished.connect(self._box_edited)
        self.centre_button.clicked.connect(self._to_centre)

    def _slider_moved(self, position: int) -> None:
        value = round(scales.temperature_at(position, self.centre_value), 6)
        with QtCore.QSignalBlocker(self.box):
            self.box.setText(_format(value))
        self.emit(value)

    def _box_edited(self) -> None:
        value = _parse_number(self.box.text(), float)
        if isinstance(value, (int, float)) and value > 0:
            with QtCore.QSignalBlocker(self.slider):
                self.slider.setValue(scales.position_of_temperature(value, self.centre_value))
        self.emit(value)

    def _to_centre(self) -> None:
        self.box.setText(_format(self.centre_value))
        self._box_edited()

    def value(self) -> float:
        return _parse_number(self.box.text(), float)

    def show_value(self, value, values: dict) -> None:
        self.centre_value = self.schema.centre(self.name, values) or float(self.info["default"])
        blockers = self.blocked()
        self.box.setText(_format(float(value)))
        self.slider.setValue(scales.position_of_temperature(float(value), self.centre_value))
        del blockers


class ZeroLogSlider(FieldWidget):
    """0, then 1e-7 .. 1 logarithmically; a drag applies when the handle is released, the box takes any value."""

    def __init__(self, name, info, schema):
        super().__init__(name, info, schema)
        self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal, objectName=f"{name}_slider")
        self.slider.setRange(0, scales.P_MAX_POSITION)
        self.box = QtWidgets.QLineEdit(objectName=f"{name}_box")
        self.box.setMaximumWidth(90)
        self.layout_.addWidget(self.slider)
        self.layout_.addWidget(self.box)
        self.slider.valueChanged.connect(self._slider_moved)
        self.slider.sliderReleased.connect(self._apply_box)
        self.box.editingFinished.connect(self._box_edited)

    def _slider_moved(self, position: int) -> None:
        with QtCore.QSignalBlocker(self.box):
            self.box.setText(_format_p(scales.p_at(position)))
        if not self.slider.isSliderDown():    # keyboard, wheel or click: apply now; drags apply on release
            self._apply_box()

    def _apply_box(self) -> None:
        self.emit(_parse_number(self.box.text(), float))

    def _box_edited(self) -> None:
        value = _parse_number(self.box.text(), float)
        if isinstance(value, (int, float)) and 0 <= value <= 1:
            with QtCore.QSignalBlocker(self.slider):
                self.slider.setValue(scales.position_of_p(value))
        self.emit(value)

    def show_value(self, value, values: dict) -> None:
        blockers = self.blocked()
        self.slider.setValue(scales.position_of_p(float(value)))
        self.box.setText(_format_p(float(value)))
        del blockers


class ScheduleField(FieldWidget):
    """An update rule from the schema's options, or a hybrid of m sweeps then w cluster flips ("m:w")."""

    HYBRID = "hybrid"

    def __init__(self, name, info, schema):
        super().__init__(name, info, schema)
        self.combo = QtWidgets.QComboBox(objectName=f"{name}_choice")
        self.m = QtWidgets.QSpinBox(objectName=f"{name}_m", minimum=0, maximum=10000, value=8, prefix="m=")
        self.w = QtWidgets.QSpinBox(objectName=f"{name}_w", minimum=0, maximum=10000, value=1, prefix="w=")
        self.m.setToolTip("Hybrid: m Metropolis sweeps ...")
        self.w.setToolTip("... then w cluster flips, repeated")
        column = QtWidgets.QVBoxLayout()
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.m)
        row.addWidget(self.w)
        column.addWidget(self.combo)
        column.addLayout(row)
        self.layout_.addLayout(column)
        self.combo.activated.connect(lambda _: self._edited())
        self.m.valueChanged.connect(lambda _: self._edited())
        self.w.valueChanged.connect(lambda _: self._edited())

    def text(self) -> str:
        name = self.combo.currentText()
        return f"{self.m.value()}:{self.w.value()}" if name == self.HYBRID else name

    def _edited(self) -> None:
        hybrid = self.combo.currentText() == self.HYBRID
        self.m.setEnabled(hybrid)
        self.w.setEnabled(hybrid)
        self.emit(self.text())

    def show_value(self, value, values: dict) -> None:
        blockers = self.blocked()
        items = (*(self.schema.options(self.name, values) or ()), self.HYBRID)
        if tuple(self.combo.itemText(i) for i in range(self.combo.count())) != items:
            self.combo.clear()
            self.combo.addItems(items)
        if ":" in str(value):
            m, w = str(value).split(":")
            self.combo.setCurrentText(self.HYBRID)
            self.m.setValue(int(m))
            self.w.setValue(int(w))
        else:
            self.combo.setCurrentText(str(value))
        hybrid = self.combo.currentText() == self.HYBRID
        self.m.setEnabled(hybrid)
        self.w.setEnabled(hybrid)
        del blockers


def _format_p(p: float) -> str:
    return "0" if p == 0 else f"{p:.3g}"


def make_field(name: str, info: dict, schema: type[ModelParams]) -> FieldWidget:
    widget = info.get("widget")
    if widget == "critical_temperature":
        return CentredSlider(name, info, schema)
    if widget == "zero_log":
        return ZeroLogSlider(name, info, schema)
    if widget == "schedule":
        return ScheduleField(name, info, schema)
    if widget == "dimension":
        return ChoiceField(name, info, schema, suffix="D")
    if widget == "lattice_size":
        return ChoiceField(name, info, schema, editable=True)
    if info.get("choices") is not None or widget == "options":
        return ChoiceField(name, info, schema)
    if widget == "rewire_dims":
        return ChoiceField(name, info, schema)
    if info["type"] is int:
        return IntegerField(name, info, schema)
    return NumberField(name, info, schema)


class ParameterForm(QtWidgets.QWidget):
    """Rows of labelled field widgets for one schema, grouped by when a change applies."""

    edited = QtCore.Signal(str, object)

    GROUPS = (("rebuild", "Model"), ("live", "Running"), ("reset", "Next reset"))

    def __init__(self, schema: type[ModelParams], parent=None):
        super().__init__(parent)
        self.schema = schema
        self.setObjectName("parameter_form")
        form = QtWidgets.QFormLayout(self)
        form.setFieldGrowthPolicy(QtWidgets.QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setContentsMargins(0, 0, 0, 0)
        self.fields: dict[str, FieldWidget] = {}
        infos = schema.fields()
        for applies, _title in self.GROUPS:
            for name, info in infos.items():
                if info["applies"] != applies:
                    continue
                widget = make_field(name, info, schema)
                widget.edited.connect(self.edited)
                label = QtWidgets.QLabel(info["label"])
                label.setToolTip(widget.toolTip())
                form.addRow(label, widget)
                self.fields[name] = widget

    def field(self, name: str) -> FieldWidget:
        return self.fields[name]

    def show_values(self, values: dict) -> None:
        for name, widget in self.fields.items():
            widget.show_value(values[name], values)
