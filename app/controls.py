"""The controls dock: the running model's parameter form (generated from its schema, app/form.py), a reset
button, and the run and view options that every model shares.

The panel only turns widget changes into signals; the window decides what they do. ``set_schema`` swaps the
parameter form when the model changes kind.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from latticelab.app.form import ParameterForm


class ControlsPanel(QtWidgets.QWidget):
    parameterEdited = QtCore.Signal(str, object)   # field name, value as typed
    resetRequested = QtCore.Signal()
    viewChanged = QtCore.Signal()                  # highlight, marks, peel or unfold
    stepsPerFrameChanged = QtCore.Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.form: ParameterForm | None = None
        layout = QtWidgets.QVBoxLayout(self)
        self.model_box = QtWidgets.QGroupBox("Model", objectName="model_box")
        self.model_layout = QtWidgets.QVBoxLayout(self.model_box)
        layout.addWidget(self.model_box)

        self.reset_button = QtWidgets.QPushButton("Reset", objectName="reset_button")
        self.reset_button.setToolTip("A new initial state from the reset parameters (seed, start)")
        self.reset_button.clicked.connect(self.resetRequested)
        self.model_layout.addWidget(self.reset_button)

        running = QtWidgets.QGroupBox("Running")
        form = QtWidgets.QFormLayout(running)
        self.steps_per_frame = QtWidgets.QSpinBox(objectName="steps_per_frame", minimum=1, maximum=100000, value=1)
        self.steps_per_frame.setToolTip("Steps per frame (at most; fewer when a frame would exceed its time budget)")
        self.adaptive = QtWidgets.QCheckBox("keep frames under 30 ms", objectName="adaptive", checked=True)
        form.addRow("Steps / frame", self.steps_per_frame)
        form.addRow("", self.adaptive)
        layout.addWidget(running)

        view = QtWidgets.QGroupBox("View")
        form = QtWidgets.QFormLayout(view)
        self.highlight = QtWidgets.QCheckBox("Highlight changed cells", objectName="highlight", checked=True)
        self.highlight.setToolTip("Mark the cells changed since the previous frame")
        self.show_links = QtWidgets.QCheckBox("Show marks", objectName="show_links")
        self.peel = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal, objectName="peel")
        self.peel.setRange(0, 1)
        self.peel.setToolTip("3D: remove this many layers from the top of the cube")
        self.peel_label = QtWidgets.QLabel("0")
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.peel)
        row.addWidget(self.peel_label)
        self.unfold = QtWidgets.QCheckBox("Unfold layers (zigzag grid)", objectName="unfold")
        form.addRow(self.highlight)
        form.addRow(self.show_links)
        form.addRow("3D peel", row)
        form.addRow(self.unfold)
        layout.addWidget(view)
        layout.addStretch(1)

        self.steps_per_frame.valueChanged.connect(self.stepsPerFrameChanged)
        for box in (self.highlight, self.show_links, self.unfold):
            box.toggled.connect(lambda _: self.viewChanged.emit())
        self.peel.valueChanged.connect(self._peel_moved)

    # ---- the model's part --------------------------------------------------------------------------
    def set_schema(self, schema, marks_label: str | None) -> None:
        """Show the parameter form of ``schema``; ``marks_label`` names the model's marks (None: it has none)."""
        if self.form is not None and self.form.schema is schema:
            return
        if self.form is not None:
            self.model_layout.removeWidget(self.form)
            self.form.deleteLater()
        self.form = ParameterForm(schema)
        self.form.edited.connect(self.parameterEdited)
        self.model_layout.insertWidget(0, self.form)
        self.show_links.setVisible(marks_label is not None)
        self.show_links.setText(marks_label or "Show marks")

    def field(self, name: str):
        """The widget of parameter ``name`` in the current form."""
        return self.form.field(name)

    def show_parameters(self, values: dict) -> None:
        self.form.show_values(values)

    def set_geometry(self, shape: tuple[int, ...]) -> None:
        """Enable the 3D options for 3D models and bound the peel by the cube's height."""
        with QtCore.QSignalBlocker(self.peel):
            self.peel.setRange(0, max(shape[0] - 1, 0))
        three_d = len(shape) == 3
        self.peel.setEnabled(three_d)
        self.unfold.setEnabled(three_d)
        self.peel_label.setText(str(self.peel.value()))

    def _peel_moved(self, layers: int) -> None:
        self.peel_label.setText(str(layers))
        self.viewChanged.emit()

    def view_options(self) -> dict:
        return {"highlight": self.highlight.isChecked(), "show_links": self.show_links.isChecked(),
                "peel": self.peel.value(), "unfold": self.unfold.isChecked()}
