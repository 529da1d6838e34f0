"""A parameter form generated from a model's schema (sim/params.py): one row per field.

The widget of a field follows from its type and choices, or from the schema's ``widget`` hint, which names a
widget registered here (``register_widget``): a slider finest around a centre value ("centred_slider"), a
slider that is 0 and then logarithmic ("zero_log_slider"), a combo box ("choice"), one whose text can be edited
("editable_choice"), a dimension chooser ("dimension_choice"); a model's own widgets register in
app/model_widgets.py. Every widget emits ``edited(name, value)`` with the value
as typed (text that does not parse is passed on, so the schema names the problem); the window decides what a
change does. ``show_values(values)`` sets every widget from values without emitting anything.

Numbers are typed into plain line edits, never spin boxes: a spin box's validator rewrites what it cannot
take ("-5" became 5, "1e9" became 19, "0" was reverted without a word). Here the text is parsed as typed and
the schema judges it; when the window refuses a value, ``show_error`` puts the refusal (the ParameterError's
text, naming the parameter and what is allowed) in a small red line under the field and leaves the typed text
in the box to be corrected. The next values shown (``show_values``) clear it.
"""
from __future__ import annotations

import decimal
from typing import Callable

from PySide6 import QtCore, QtWidgets

from latticelab.app import scales
from latticelab.sim.params import ModelParams, allowed_text


ERROR_COLOUR = "#d32f2f"
_EXACT_INT_DIGITS = 30     # "1e9" in an integer field is 10**9 exactly; beyond 10**30 no field wants it exact


def _parse_number(text: str, kind: type):
    """The number ``text`` spells, as ``kind`` where it is one exactly ("1e9" in an integer field is the int
    10**9; "16.9" stays the float 16.9, which the schema refuses as an integer). Text that is not a number is
    returned unchanged, so the schema's message names it."""
    text = text.strip()
    try:
        return kind(text)
    except ValueError:
        pass
    try:
        number = decimal.Decimal(text)
    except decimal.InvalidOperation:
        return text
    if kind is int and number.is_finite() and number == number.to_integral_value() \
            and number.adjusted() <= _EXACT_INT_DIGITS:
        return int(number)
    return float(number)


def _format(value) -> str:
    if isinstance(value, float):
        return "0" if value == 0 else f"{value:.10g}"
    return str(value)


class FieldWidget(QtWidgets.QWidget):
    """Base of a field's widget: ``edited(name, value)`` on a user change; ``show_value`` without signals.

    Subclasses put their widgets into ``layout_`` (one row); under it sits ``error_label``, hidden until the
    window refuses a value (``show_error``)."""

    edited = QtCore.Signal(str, object)

    def __init__(self, name: str, info: dict, schema: type[ModelParams]):
        super().__init__()
        self.name, self.info, self.schema = name, info, schema
        self.setObjectName(f"field_{name}")
        self.setToolTip(self._tooltip())
        column = QtWidgets.QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(1)
        self.layout_ = QtWidgets.QHBoxLayout()
        self.layout_.setContentsMargins(0, 0, 0, 0)
        column.addLayout(self.layout_)
        self.error_label = QtWidgets.QLabel(objectName=f"{name}_error", wordWrap=True)
        self.error_label.setStyleSheet(f"color: {ERROR_COLOUR}; font-size: small;")
        self.error_label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()
        column.addWidget(self.error_label)
        self._typed: tuple[str, object] | None = None    # (text, value) of the last edit typed into a box

    def _tooltip(self) -> str:
        unit = f" [{self.info['unit']}]" if self.info.get("unit") else ""
        applies = {"live": "applies at once", "reset": "used by the next reset",
                   "rebuild": "makes a new model"}[self.info["applies"]]
        return f"{self.info['help']}{unit}\nAllowed: {allowed_text(self.schema, self.name)}; {applies}."

    def emit(self, value) -> None:
        self.edited.emit(self.name, value)

    def emit_typed(self, text: str, value) -> None:
        """Emit ``value``, parsed from ``text`` typed into the field's box (kept to show it again if refused)."""
        self._typed = (text, value)
        self.emit(value)

    def text_box(self) -> QtWidgets.QLineEdit | None:
        """The line edit the user types the value into, if the field has one."""
        return getattr(self, "box", None)

    # ---- a refused value ------------------------------------------------------------------------------
    def show_error(self, message: str, value=None) -> None:
        """Show ``message`` under the field; when ``value`` is what was last typed into the box, put that text
        back (the window has just shown the model's value again) so the user can correct it."""
        self.error_label.setText(message)
        self.error_label.show()
        box = self.text_box()
        if box is None:
            return
        box.setStyleSheet(f"QLineEdit {{ border: 1px solid {ERROR_COLOUR}; }}")
        if self._typed is not None and _same(self._typed[1], value):
            with QtCore.QSignalBlocker(box):
                box.setText(self._typed[0])

    def clear_error(self) -> None:
        if self.error_label.isHidden():
            return
        self.error_label.clear()
        self.error_label.hide()
        box = self.text_box()
        if box is not None:
            box.setStyleSheet("")

    def error(self) -> str:
        """The message shown under the field ("" when none)."""
        return "" if self.error_label.isHidden() else self.error_label.text()

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

    def text_box(self) -> QtWidgets.QLineEdit | None:
        return self.combo.lineEdit()

    def _edited(self) -> None:
        text = self.combo.currentText()
        for item in self._items:
            if self._text_of(item) == text:
                self.emit_typed(text, item)
                return
        kind = self.info["type"]
        self.emit_typed(text, _parse_number(text.removesuffix(self.suffix), kind) if kind in (int, float) else text)

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
        kind, text = self.info["type"], self.box.text()
        self.emit_typed(text, _parse_number(text, kind) if kind in (int, float) else text)

    def show_value(self, value, values: dict) -> None:
        blockers = self.blocked()
        self.box.setText(_format(value))
        del blockers


class IntegerField(NumberField):
    """An integer (seeds, counts) typed as text: "1e9" is 10**9, "-5" and "16.9" go to the schema, which says
    what is allowed; nothing is clipped or rewritten, and nothing applies before Enter (a rebuild field in a
    spin box made a new model at every keystroke)."""


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
        text = self.box.text()
        value = _parse_number(text, float)
        if isinstance(value, (int, float)) and value > 0:
            with QtCore.QSignalBlocker(self.slider):
                self.slider.setValue(scales.position_of_temperature(value, self.centre_value))
        self.emit_typed(text, value)

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
        text = self.box.text()
        value = _parse_number(text, float)
        if isinstance(value, (int, float)) and 0 <= value <= 1:
            with QtCore.QSignalBlocker(self.slider):
                self.slider.setValue(scales.position_of_p(value))
        self.emit_typed(text, value)

    def show_value(self, value, values: dict) -> None:
        blockers = self.blocked()
        self.slider.setValue(scales.position_of_p(float(value)))
        self.box.setText(_format_p(float(value)))
        del blockers


def _format_p(p: float) -> str:
    return "0" if p == 0 else f"{p:.3g}"


def _same(a, b) -> bool:
    """Whether two parsed values are the same input (NaN equals NaN here: "nan" typed twice is one input)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and a != a:
        return b != b
    return bool(a == b)


class DimensionChoice(ChoiceField):
    """The dimensions a model offers, shown as "2D", "3D"."""

    def __init__(self, name, info, schema):
        super().__init__(name, info, schema, suffix="D")


class EditableChoice(ChoiceField):
    """Suggested values (the schema's options) in a combo box whose text can be edited to any other value."""

    def __init__(self, name, info, schema):
        super().__init__(name, info, schema, editable=True)


# widget hint (a field's ``widget=``, sim/params.py) -> the widget made for it: (name, info, schema) -> FieldWidget
WIDGETS: dict[str, Callable[[str, dict, type[ModelParams]], FieldWidget]] = {}


def register_widget(hint: str, make: Callable[[str, dict, type[ModelParams]], FieldWidget]) -> None:
    """Make ``make(name, info, schema)`` the widget of the fields whose schema declares ``widget=hint``. A model's
    own widgets register in app/model_widgets.py (sim/ knows no Qt), keyed by the hint its schema declares; the
    controls panel (app/controls.py) imports it."""
    if hint in WIDGETS and WIDGETS[hint] is not make:
        raise ValueError(f"widget hint {hint!r} is registered already ({WIDGETS[hint].__name__})")
    WIDGETS[hint] = make


for _hint, _make in (("choice", ChoiceField), ("dimension_choice", DimensionChoice),
                     ("editable_choice", EditableChoice), ("centred_slider", CentredSlider),
                     ("zero_log_slider", ZeroLogSlider), ("number", NumberField), ("integer", IntegerField)):
    register_widget(_hint, _make)


def make_field(name: str, info: dict, schema: type[ModelParams]) -> FieldWidget:
    """The widget of a field: the one its ``widget`` hint names, else a combo box for choices, else a line edit
    for its type."""
    hint = info.get("widget")
    if hint is not None:
        if hint not in WIDGETS:
            raise ValueError(f"{schema.__name__}.{name}: no widget registered for the hint {hint!r} "
                             f"(known: {', '.join(sorted(WIDGETS))})")
        return WIDGETS[hint](name, info, schema)
    if info.get("choices") is not None:
        return ChoiceField(name, info, schema)
    if info["type"] is int:
        return IntegerField(name, info, schema)
    return NumberField(name, info, schema)


class ParameterForm(QtWidgets.QWidget):
    """Rows of labelled field widgets for one schema, grouped by when a change applies."""

    edited = QtCore.Signal(str, object)

    GROUPS = (("rebuild", "Model"), ("live", "Running"), ("reset", "Next reset"))

    def __init__(self, schema: type[ModelParams], parent=None, build: bool = True):
        """``build=False``: the rows are made later, one per step of ``steps`` (the window builds the next
        model's form over several frames while the model is prepared); ``finish()`` makes the rest at once."""
        super().__init__(parent)
        self.schema = schema
        self.setObjectName("parameter_form")
        self.form_layout = form = QtWidgets.QFormLayout(self)
        form.setFieldGrowthPolicy(QtWidgets.QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setContentsMargins(0, 0, 0, 0)
        self.fields: dict[str, FieldWidget] = {}
        self.built = False
        self.steps = self._build_rows()
        if build:
            self.finish()

    def _build_rows(self):
        infos = self.schema.fields()
        for applies, _title in self.GROUPS:
            for name, info in infos.items():
                if info["applies"] != applies:
                    continue
                widget = make_field(name, info, self.schema)
                widget.edited.connect(self.edited)
                label = QtWidgets.QLabel(info["label"])
                label.setToolTip(widget.toolTip())
                self.form_layout.addRow(label, widget)
                self.fields[name] = widget
                yield name
        self.built = True

    def finish(self) -> None:
        """Make the rows not made yet."""
        for _ in self.steps:
            pass

    def field(self, name: str) -> FieldWidget:
        return self.fields[name]

    def show_values(self, values: dict) -> None:
        """Every field from ``values`` (the model's), without signals; messages under fields are cleared."""
        for name, widget in self.fields.items():
            widget.clear_error()
            widget.show_value(values[name], values)

    def show_error(self, name: str, message: str, value=None) -> None:
        """``message`` under field ``name`` (see FieldWidget.show_error); ignored for a name not in the form."""
        if name in self.fields:
            self.fields[name].show_error(message, value)

    def errors(self) -> dict[str, str]:
        """Field name -> the message shown under it, for the fields that show one."""
        return {name: w.error() for name, w in self.fields.items() if w.error()}
