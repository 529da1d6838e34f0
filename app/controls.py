"""The controls dock: the running model's parameter form (generated from its schema, app/form.py), a reset
button, and the run and view options that every model shares.

The panel only turns widget changes into signals; the window decides what they do. ``set_model`` swaps the
parameter form when the model changes kind and shows only the view options that apply to it (marks for a model
that has marks, the highlight for one that reports changed cells); ``set_geometry`` shows the 3D options
(peel, unfold) only for a 3D cell grid.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from latticelab.app.form import ParameterForm
from latticelab.app.wheel_guard import scroll_unless_focused
from latticelab.app.settings import SCHEMA as SETTINGS_SCHEMA
from latticelab.app.settings import AUTO_STEPS, MAX_STEPS_PER_FRAME, default_steps_per_frame
from latticelab.sim.model import Model


class ControlsPanel(QtWidgets.QWidget):
    parameterEdited = QtCore.Signal(str, object)   # field name, value as typed
    resetRequested = QtCore.Signal()
    viewChanged = QtCore.Signal()                  # highlight, marks, peel or unfold
    stepsPerFrameChanged = QtCore.Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.form: ParameterForm | None = None
        self._forms: dict = {}      # schema -> its form; the forms of models not running are kept, hidden
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
        self.steps_per_frame = QtWidgets.QSpinBox(objectName="steps_per_frame", minimum=AUTO_STEPS,
                                                  maximum=MAX_STEPS_PER_FRAME, value=1)
        self.steps_per_frame.setSpecialValueText("auto")      # shown for AUTO_STEPS, the box's minimum
        self.steps_per_frame.setToolTip("Steps per frame (at most; fewer when a frame would exceed its time "
                                        "budget). auto (below 1): as many as fit in the frame's time")
        self.adaptive = QtWidgets.QCheckBox("keep frames under 30 ms", objectName="adaptive", checked=True)
        self.adaptive.setToolTip("Take fewer steps in a frame than asked when they would make it slower "
                                 "(always so with auto)")
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
        self.view_form, self.peel_row = form, row
        layout.addWidget(view)
        layout.addStretch(1)

        self.steps_per_frame.valueChanged.connect(self.stepsPerFrameChanged)
        self.steps_per_frame.valueChanged.connect(self._steps_per_frame_set)
        for box in (self.highlight, self.show_links, self.unfold):
            box.toggled.connect(lambda _: self.viewChanged.emit())
        self.peel.valueChanged.connect(self._peel_moved)
        scroll_unless_focused(self)     # the wheel scrolls the panel unless a box has the focus

    # ---- the model's part --------------------------------------------------------------------------
    def set_model(self, model_class: type[Model]) -> None:
        """The form of ``model_class``'s schema, and only the view options that apply to it."""
        self.set_schema(model_class.Params, model_class.marks_label)
        # a model that keeps the base class's changed() (which is always None) has nothing to highlight
        self.highlight.setVisible(model_class.changed is not Model.changed)

    def set_schema(self, schema, marks_label: str | None) -> None:
        """Show the parameter form of ``schema``; ``marks_label`` names the model's marks (None: it has none).
        Each schema's form is made once (or ahead, ``stage_form``) and kept: switching back only shows it."""
        if self.form is not None and self.form.schema is schema:
            return
        form = self._forms.get(schema) or self._new_form(schema)
        form.finish()
        scroll_unless_focused(form)
        if self.form is not None:
            self.form.hide()
        self.form = form
        form.show()
        self.show_links.setVisible(marks_label is not None)
        self.show_links.setText(marks_label or "Show marks")

    def stage_form(self, schema):
        """The form of ``schema`` made ahead, hidden: an iterator making one row per step (None when it is made
        already)."""
        if schema in self._forms and self._forms[schema].built:
            return None
        return (self._forms.get(schema) or self._new_form(schema)).steps

    def _new_form(self, schema) -> ParameterForm:
        form = ParameterForm(schema, build=False)
        form.hide()
        form.edited.connect(self.parameterEdited)
        self.model_layout.insertWidget(0, form)
        self._forms[schema] = form
        return form

    def field(self, name: str):
        """The widget of parameter ``name`` in the current form."""
        return self.form.field(name)

    def show_parameters(self, values: dict) -> None:
        self.form.show_values(values)

    def set_geometry(self, shape: tuple[int, ...]) -> None:
        """Show the 3D options (peel, unfold) for a 3D cell grid only, the peel bounded by the cube's height.
        In 2D they are hidden and disabled; the peel keeps its value for the next 3D model."""
        three_d = len(shape) == 3
        if three_d:
            with QtCore.QSignalBlocker(self.peel):
                self.peel.setRange(0, max(shape[0] - 1, 0))
        self.peel.setEnabled(three_d)
        self.unfold.setEnabled(three_d)
        self.view_form.setRowVisible(self.peel_row, three_d)
        self.view_form.setRowVisible(self.unfold, three_d)
        self.peel_label.setText(str(self.peel.value()))

    def show_field_error(self, name: str, message: str, value=None) -> None:
        """A refused value of parameter ``name``: the message under its field (app/form.py)."""
        if self.form is not None:
            self.form.show_error(name, message, value)

    def restore_view_defaults(self, backend_name: str, model_class=None) -> None:
        """The run and view options back to their defaults (app/settings.py; Steps / frame that of the backend);
        the signals tell the window."""
        defaults = {key.split("/", 1)[1]: default for key, (_check, default) in SETTINGS_SCHEMA.items()
                    if key.startswith(("view/", "run/"))}
        self.steps_per_frame.setValue(default_steps_per_frame(backend_name, model_class))
        self.adaptive.setChecked(defaults["adaptive"])
        self.highlight.setChecked(defaults["highlight"])
        self.show_links.setChecked(defaults["show_links"])
        self.unfold.setChecked(defaults["unfold"])
        self.peel.setValue(defaults["peel"])

    def set_steps_per_frame(self, value: int) -> None:
        """Show ``value`` (AUTO_STEPS: auto) without telling the window (it is given the value itself)."""
        with QtCore.QSignalBlocker(self.steps_per_frame):
            self.steps_per_frame.setValue(value)
        self._steps_per_frame_set(self.steps_per_frame.value())

    def _steps_per_frame_set(self, value: int) -> None:
        # with auto the frame's time budget always applies: the box beside it does not
        self.adaptive.setEnabled(value != AUTO_STEPS)

    def _peel_moved(self, layers: int) -> None:
        self.peel_label.setText(str(layers))
        self.viewChanged.emit()

    def view_options(self) -> dict:
        return {"highlight": self.highlight.isChecked(), "show_links": self.show_links.isChecked(),
                "peel": self.peel.value(), "unfold": self.unfold.isChecked()}
