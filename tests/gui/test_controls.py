"""Controls act on the running model: sliders, rewiring, algorithm, geometry, resets and bad input."""
from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from latticelab.app import scales


def _handle_centre(slider) -> QtCore.QPoint:
    option = QtWidgets.QStyleOptionSlider()
    slider.initStyleOption(option)
    rect = slider.style().subControlRect(QtWidgets.QStyle.ComplexControl.CC_Slider, option,
                                         QtWidgets.QStyle.SubControl.SC_SliderHandle, slider)
    return rect.center()


def test_dragging_the_temperature_slider_changes_the_running_model(make_window, qtbot):
    window = make_window(dim=2, L=32, T=2.2, running=True)
    model = window.model
    qtbot.waitUntil(lambda: model.step_count >= 3, timeout=10000)
    slider = window.controls.temperature
    start = _handle_centre(slider)
    qtbot.mousePress(slider, QtCore.Qt.MouseButton.LeftButton, pos=start)
    end = start
    for dx in range(8, 81, 8):
        end = start + QtCore.QPoint(dx, 0)
        qtbot.mouseMove(slider, end)
    qtbot.mouseRelease(slider, QtCore.Qt.MouseButton.LeftButton, pos=end)
    T = scales.temperature_at(slider.value(), 2)
    assert slider.value() > scales.position_of_temperature(2.2, 2)    # the drag moved the handle right
    assert abs(window.model.T - T) < 1e-5 and window.model.T > 2.2     # read back from the model
    assert window.model is model                                       # same run, not restarted
    steps = model.step_count
    qtbot.waitUntil(lambda: model.step_count > steps, timeout=10000)  # and still running
    assert window.controls.temperature_box.value() == round(window.model.T, 4)


def test_temperature_box_and_tc_button(make_window, qtbot):
    window = make_window(dim=2, L=16)
    window.controls.temperature_box.setValue(1.5)
    assert window.model.T == 1.5
    qtbot.mouseClick(window.controls.tc_button, QtCore.Qt.MouseButton.LeftButton)
    assert abs(window.model.T - scales.T_C[2]) < 1e-4
    assert abs(scales.temperature_at(window.controls.temperature.value(), 2) - scales.T_C[2]) < 1e-3


def test_changing_p_keeps_the_spins(make_window):
    window = make_window(dim=2, L=32, T=2.2)
    window.step_once()
    model = window.model
    spins = model.spins.copy()
    steps = model.step_count
    assert model.p == 0.0
    window.controls.p_slider.setValue(scales.position_of_p(1e-2))   # a click/keyboard move applies at once
    assert abs(model.p - 1e-2) < 1e-9
    assert len(model.rewired_edges()) > 0
    assert window.model is model and model.step_count == steps
    np.testing.assert_array_equal(model.spins, spins)
    window.controls.rewire_dims.setCurrentText("x")
    assert model.rewire_dims == "x"
    np.testing.assert_array_equal(model.spins, spins)
    window.controls.p_box.setText("0")
    window.controls.p_box.editingFinished.emit()
    assert model.p == 0.0 and window.controls.p_slider.value() == 0


def test_bad_values_are_reported_and_the_app_keeps_running(make_window, qtbot):
    window = make_window(dim=2, L=16, running=True)
    model = window.model
    window.controls.p_box.setText("1.5")
    window.controls.p_box.editingFinished.emit()
    assert window.last_error.startswith("p:") and "[0, 1]" in window.last_error
    assert model.p == 0.0 and window.controls.p_box.text() == "0"       # controls show the model again
    window.controls.size.setCurrentText("7")
    window.controls.size.lineEdit().editingFinished.emit()
    assert window.last_error.startswith("L:")
    assert window.model is model and window.controls.size.currentText() == "16"
    window.controls.size.setCurrentText("big")
    window.controls.size.lineEdit().editingFinished.emit()
    assert window.last_error.startswith("L:") and "'big'" in window.last_error
    window.controls.p_box.setText("banana")
    window.controls.p_box.editingFinished.emit()
    assert window.last_error.startswith("p:")
    assert window.statusBar().currentMessage() == window.last_error
    steps = model.step_count
    qtbot.waitUntil(lambda: model.step_count > steps, timeout=10000)


def test_algorithm_hybrid_and_seeded_resets(make_window):
    window = make_window(dim=2, L=16, T=2.2)
    c = window.controls
    c.algorithm.setCurrentText("wolff")
    assert window.model.algorithm == "wolff"
    c.algorithm.setCurrentText("hybrid")
    c.hybrid_m.setValue(3)
    c.hybrid_w.setValue(2)
    assert window.model.algorithm == "3:2"
    c.seed.setValue(42)
    c.reset_cold.click()
    assert window.model.step_count == 0 and (window.model.spins == 1).all() and window.model.seed == 42
    c.reset_hot.click()
    first = window.model.spins.copy()
    assert 0 < (first == 1).sum() < first.size
    c.reset_hot.click()
    np.testing.assert_array_equal(window.model.spins, first)   # same seed, same hot start


def test_switching_dimension_and_size(make_window):
    window = make_window(dim=2, L=16, T=2.0)
    c = window.controls
    c.size.setCurrentText("24")
    c.size.lineEdit().editingFinished.emit()
    assert window.model.L == 24 and window.model.dim == 2
    window.prefs.set("params/L3", 8)   # the size last used in 3D
    c.dimension.setCurrentIndex(1)
    assert window.model.dim == 3 and window.model.L == 8
    assert window.lattice_view.active_mode == "cube"
    assert c.peel.maximum() == 7 and c.peel.isEnabled() and c.unfold.isEnabled()
    assert abs(window.model.T - 4.45) < 1e-9          # the 3D default just below T_c
    c.dimension.setCurrentIndex(0)
    assert window.model.dim == 2 and window.model.L == 24 and window.model.T == 2.0
    assert not c.peel.isEnabled()


def test_status_bar_shows_backend_size_and_rates(make_window, qtbot):
    window = make_window(dim=2, L=16, running=True)
    labels = window.status_labels
    qtbot.waitUntil(lambda: "steps/s" in labels["steps_per_s"].text(), timeout=10000)
    assert "CPU" in labels["backend"].text()
    assert "L=16" in labels["lattice"].text()
    qtbot.waitUntil(lambda: "frames/s" in labels["frames_per_s"].text(), timeout=10000)
    window.run_action.trigger()   # pause
    assert not window.running
