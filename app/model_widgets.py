"""The parameter-form widgets that belong to one model, registered with the form (app/form.py
``register_widget``) under the hint the model's schema declares. They live in app/ because sim/, where the
models are, knows no Qt; each reads the model's values through its schema, never repeating its grammar.
Importing this module registers them (app/controls.py, which shows the models' forms, does).
"""
from __future__ import annotations

from PySide6 import QtWidgets

from latticelab.app.form import FieldWidget, register_widget


class HybridScheduleField(FieldWidget):
    """The rewired Ising model's update rule: one of the schema's options, or a hybrid of m Metropolis sweeps then
    w cluster flips ("m:w"), whose m and w the schema parses (``hybrid``) and bounds (``hybrid_max``)."""

    HYBRID = "hybrid"

    def __init__(self, name, info, schema):
        super().__init__(name, info, schema)
        self.combo = QtWidgets.QComboBox(objectName=f"{name}_choice")
        limit = schema.hybrid_max
        self.m = QtWidgets.QSpinBox(objectName=f"{name}_m", minimum=0, maximum=limit, value=8, prefix="m=")
        self.w = QtWidgets.QSpinBox(objectName=f"{name}_w", minimum=0, maximum=limit, value=1, prefix="w=")
        self.m.setToolTip("Hybrid: m Metropolis sweeps ...")
        self.w.setToolTip("... then w cluster flips, repeated")
        row = QtWidgets.QHBoxLayout()
        for box in (self.m, self.w):
            row.addWidget(box)
            box.valueChanged.connect(lambda _: self._edited())
        column = QtWidgets.QVBoxLayout()
        column.addWidget(self.combo)
        column.addLayout(row)
        self.layout_.addLayout(column)
        self.combo.activated.connect(lambda _: self._edited())

    def text(self) -> str:
        name = self.combo.currentText()
        return f"{self.m.value()}:{self.w.value()}" if name == self.HYBRID else name

    def _edited(self) -> None:
        self._enable_hybrid()
        self.emit(self.text())

    def _enable_hybrid(self) -> None:
        hybrid = self.combo.currentText() == self.HYBRID
        self.m.setEnabled(hybrid)
        self.w.setEnabled(hybrid)

    def show_value(self, value, values: dict) -> None:
        blockers = self.blocked()
        items = (*(self.schema.options(self.name, values) or ()), self.HYBRID)
        if tuple(self.combo.itemText(i) for i in range(self.combo.count())) != items:
            self.combo.clear()
            self.combo.addItems(items)
        hybrid = self.schema.hybrid(value)
        if hybrid is not None:
            self.combo.setCurrentText(self.HYBRID)
            self.m.setValue(hybrid[0])
            self.w.setValue(hybrid[1])
        else:
            self.combo.setCurrentText(str(value))
        self._enable_hybrid()
        del blockers


register_widget("hybrid_schedule", HybridScheduleField)
