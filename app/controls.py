"""The controls dock: every simulation and view parameter, as widgets with one signal each.

The panel only turns widget changes into typed values; the window decides what they do to the model.
``show_parameters`` sets the widgets from values without emitting anything.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from latticelab.app import scales
from latticelab.sim.params import ALGORITHMS as MODEL_ALGORITHMS

L_PRESETS = {2: (64, 128, 256, 512, 1024, 2048, 4096), 3: (16, 32, 64, 128, 256)}
ALGORITHMS = (*MODEL_ALGORITHMS, "hybrid")   # hybrid: m Metropolis sweeps then w Wolff flips


def _slider(maximum: int, name: str) -> QtWidgets.QSlider:
    slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
    slider.setRange(0, maximum)
    slider.setObjectName(name)
    return slider


class ControlsPanel(QtWidgets.QWidget):
    temperatureChanged = QtCore.Signal(float)
    rewiringChanged = QtCore.Signal()          # read p / rewire dims with rewiring()
    algorithmChanged = QtCore.Signal(str)
    geometryChanged = QtCore.Signal(int, object)  # dim, L (as typed when it is not a number)
    resetRequested = QtCore.Signal(str)        # "hot" or "cold"
    viewChanged = QtCore.Signal()              # highlight, links, peel or unfold
    stepsPerFrameChanged = QtCore.Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.dim = 2
        form = QtWidgets.QFormLayout(self)
        form.setFieldGrowthPolicy(QtWidgets.QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)

        # --- model -------------------------------------------------------------------------------
        self.dimension = QtWidgets.QComboBox(objectName="dimension")
        self.dimension.addItems(["2D", "3D"])
        self.size = QtWidgets.QComboBox(objectName="size", editable=True)
        self.size.setInsertPolicy(QtWidgets.QComboBox.InsertPolicy.NoInsert)
        self.size.setToolTip("Lattice side L (even, >= 4); type a value and press Enter")
        form.addRow("Dimension", self.dimension)
        form.addRow("Size L", self.size)

        self.temperature = _slider(scales.TEMPERATURE_STEPS, "temperature_slider")
        self.temperature.setToolTip("Temperature; finest resolution around T_c")
        self.temperature_box = QtWidgets.QDoubleSpinBox(objectName="temperature_box", decimals=4,
                                                        minimum=0.0001, maximum=100.0, singleStep=0.001)
        self.tc_button = QtWidgets.QPushButton("T_c", objectName="tc_button")
        self.tc_button.setToolTip("Set T to the critical temperature of the regular lattice")
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.temperature_box)
        row.addWidget(self.tc_button)
        form.addRow("Temperature", self.temperature)
        form.addRow("", row)

        self.p_slider = _slider(scales.P_MAX_POSITION, "p_slider")
        self.p_slider.setToolTip("Rewiring probability: 0, then 1e-7 .. 1 logarithmically")
        self.p_box = QtWidgets.QLineEdit(objectName="p_box")
        self.p_box.setToolTip("Rewiring probability p in [0, 1]; press Enter to apply")
        self.rewire_dims = QtWidgets.QComboBox(objectName="rewire_dims")
        form.addRow("Rewiring p", self.p_slider)
        form.addRow("", self.p_box)
        form.addRow("Rewired dims", self.rewire_dims)

        self.algorithm = QtWidgets.QComboBox(objectName="algorithm")
        self.algorithm.addItems(ALGORITHMS)
        self.hybrid_m = QtWidgets.QSpinBox(objectName="hybrid_m", minimum=0, maximum=10000, value=8, prefix="m=")
        self.hybrid_w = QtWidgets.QSpinBox(objectName="hybrid_w", minimum=0, maximum=10000, value=1, prefix="w=")
        self.hybrid_m.setToolTip("Hybrid: m Metropolis sweeps ...")
        self.hybrid_w.setToolTip("... then w Wolff cluster flips, repeated")
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.hybrid_m)
        row.addWidget(self.hybrid_w)
        form.addRow("Algorithm", self.algorithm)
        form.addRow("Hybrid m:w", row)

        self.seed = QtWidgets.QSpinBox(objectName="seed", minimum=0, maximum=2 ** 31 - 1)
        self.seed.setToolTip("Random seed, used by the next reset")
        self.reset_hot = QtWidgets.QPushButton("Reset hot", objectName="reset_hot")
        self.reset_cold = QtWidgets.QPushButton("Reset cold", objectName="reset_cold")
        self.reset_hot.setToolTip("New random spins (infinite temperature start) with this seed")
        self.reset_cold.setToolTip("All spins up (zero temperature start) with this seed")
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.reset_hot)
        row.addWidget(self.reset_cold)
        form.addRow("Seed", self.seed)
        form.addRow("", row)

        # --- running -----------------------------------------------------------------------------
        self.steps_per_frame = QtWidgets.QSpinBox(objectName="steps_per_frame", minimum=1, maximum=100000, value=1)
        self.steps_per_frame.setToolTip("Steps per frame (at most; fewer when a frame would exceed its time budget)")
        self.adaptive = QtWidgets.QCheckBox("keep frames under 30 ms", objectName="adaptive", checked=True)
        form.addRow("Steps / frame", self.steps_per_frame)
        form.addRow("", self.adaptive)

        # --- view --------------------------------------------------------------------------------
        self.highlight = QtWidgets.QCheckBox("Highlight flipped cells", objectName="highlight", checked=True)
        self.show_links = QtWidgets.QCheckBox("Show rewired links", objectName="show_links")
        self.show_links.setToolTip("Mark the sites touched by rewiring and draw the new links")
        self.peel = _slider(1, "peel")
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

        self._connect()
        self._set_dimension_widgets(2, 512)

    # ---- wiring ------------------------------------------------------------------------------
    def _connect(self) -> None:
        self.temperature.valueChanged.connect(self._temperature_slider_moved)
        self.temperature_box.valueChanged.connect(self._temperature_box_changed)
        self.tc_button.clicked.connect(lambda: self.temperature_box.setValue(scales.T_C[self.dim]))
        self.p_slider.valueChanged.connect(self._p_slider_moved)
        self.p_slider.sliderReleased.connect(self.rewiringChanged)
        self.p_box.editingFinished.connect(self._p_box_edited)
        self.rewire_dims.currentTextChanged.connect(lambda _: self.rewiringChanged.emit())
        self.algorithm.currentTextChanged.connect(lambda _: self._algorithm_edited())
        self.hybrid_m.valueChanged.connect(lambda _: self._algorithm_edited())
        self.hybrid_w.valueChanged.connect(lambda _: self._algorithm_edited())
        self.dimension.currentIndexChanged.connect(lambda _: self._geometry_edited())
        self.size.activated.connect(lambda _: self._geometry_edited())
        self.size.lineEdit().editingFinished.connect(self._geometry_edited)
        self.reset_hot.clicked.connect(lambda: self.resetRequested.emit("hot"))
        self.reset_cold.clicked.connect(lambda: self.resetRequested.emit("cold"))
        self.steps_per_frame.valueChanged.connect(self.stepsPerFrameChanged)
        for box in (self.highlight, self.show_links, self.unfold):
            box.toggled.connect(lambda _: self.viewChanged.emit())
        self.peel.valueChanged.connect(self._peel_moved)

    def _temperature_slider_moved(self, position: int) -> None:
        T = scales.temperature_at(position, self.dim)
        with QtCore.QSignalBlocker(self.temperature_box):
            self.temperature_box.setValue(T)
        self.temperatureChanged.emit(round(T, 6))

    def _temperature_box_changed(self, T: float) -> None:
        with QtCore.QSignalBlocker(self.temperature):
            self.temperature.setValue(scales.position_of_temperature(T, self.dim))
        self.temperatureChanged.emit(T)

    def _p_slider_moved(self, position: int) -> None:
        self.p_box.setText(_format_p(scales.p_at(position)))
        if not self.p_slider.isSliderDown():   # keyboard, wheel or click: apply now; drags apply on release
            self.rewiringChanged.emit()

    def _p_box_edited(self) -> None:
        try:
            p = float(self.p_box.text())
        except ValueError:
            p = None
        if p is not None and 0 <= p <= 1:
            with QtCore.QSignalBlocker(self.p_slider):
                self.p_slider.setValue(scales.position_of_p(p))
        self.rewiringChanged.emit()   # an invalid text reaches the model, which names the problem

    def _algorithm_edited(self) -> None:
        hybrid = self.algorithm.currentText() == "hybrid"
        self.hybrid_m.setEnabled(hybrid)
        self.hybrid_w.setEnabled(hybrid)
        self.algorithmChanged.emit(self.algorithm_name())

    def _geometry_edited(self) -> None:
        dim = 2 + self.dimension.currentIndex()
        text = self.size.currentText().strip()
        try:
            L = int(text)
        except ValueError:
            L = text   # the model rejects it with a message naming L and quoting the text
        self.geometryChanged.emit(dim, L)

    def _peel_moved(self, layers: int) -> None:
        self.peel_label.setText(str(layers))
        self.viewChanged.emit()

    # ---- reading -----------------------------------------------------------------------------
    def algorithm_name(self) -> str:
        name = self.algorithm.currentText()
        return f"{self.hybrid_m.value()}:{self.hybrid_w.value()}" if name == "hybrid" else name

    def rewiring(self) -> tuple[object, str]:
        """(p as typed, rewired dims); p stays a string when it does not parse, for the model to reject."""
        text = self.p_box.text().strip()
        try:
            p = float(text)
        except ValueError:
            p = text
        return p, self.rewire_dims.currentText()

    # ---- writing (no signals) ----------------------------------------------------------------
    def show_parameters(self, params) -> None:
        widgets = (self.dimension, self.size, self.temperature, self.temperature_box, self.p_slider, self.p_box,
                   self.rewire_dims, self.algorithm, self.hybrid_m, self.hybrid_w, self.seed, self.peel)
        blockers = [QtCore.QSignalBlocker(w) for w in widgets]
        self._set_dimension_widgets(params.dim, params.L)
        self.temperature_box.setValue(params.T)
        self.temperature.setValue(scales.position_of_temperature(params.T, params.dim))
        self.p_slider.setValue(scales.position_of_p(params.p))
        self.p_box.setText(_format_p(params.p))
        index = self.rewire_dims.findText(params.rewire_dims)
        if index < 0:
            self.rewire_dims.addItem(params.rewire_dims)
            index = self.rewire_dims.count() - 1
        self.rewire_dims.setCurrentIndex(index)
        if ":" in params.algorithm:
            m, w = params.algorithm.split(":")
            self.algorithm.setCurrentText("hybrid")
            self.hybrid_m.setValue(int(m))
            self.hybrid_w.setValue(int(w))
        else:
            self.algorithm.setCurrentText(params.algorithm)
        hybrid = self.algorithm.currentText() == "hybrid"
        self.hybrid_m.setEnabled(hybrid)
        self.hybrid_w.setEnabled(hybrid)
        self.seed.setValue(min(int(params.seed), self.seed.maximum()))
        del blockers

    def _set_dimension_widgets(self, dim: int, L: int) -> None:
        blockers = [QtCore.QSignalBlocker(w) for w in (self.dimension, self.size, self.rewire_dims, self.peel)]
        self.dim = dim
        self.dimension.setCurrentIndex(dim - 2)
        self.size.clear()
        self.size.addItems([str(n) for n in L_PRESETS[dim]])
        self.size.setCurrentText(str(L))
        current = self.rewire_dims.currentText() or "all"
        self.rewire_dims.clear()
        self.rewire_dims.addItems(["all", "x", "xy"] if dim == 2 else ["all", "x", "xy", "z", "xyz"])
        self.rewire_dims.setCurrentText(current if self.rewire_dims.findText(current) >= 0 else "all")
        self.peel.setRange(0, max(L - 1, 0))
        self.peel.setEnabled(dim == 3)
        self.unfold.setEnabled(dim == 3)
        self.peel_label.setText(str(self.peel.value()))
        del blockers

    def view_options(self) -> dict:
        return {"highlight": self.highlight.isChecked(), "show_links": self.show_links.isChecked(),
                "peel": self.peel.value(), "unfold": self.unfold.isChecked()}


def _format_p(p: float) -> str:
    return "0" if p == 0 else f"{p:.3g}"
