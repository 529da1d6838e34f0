"""Controls act on the running model: sliders, rewiring, algorithm, geometry, resets and bad input."""
from __future__ import annotations

import numpy as np
from latticelab.sim.backend import to_numpy  # model arrays may be CuPy (LATTICELAB_GUI_BACKEND=cuda)
from PySide6 import QtCore, QtWidgets

from gui_helpers import choose, type_into

from latticelab.app import scales
from latticelab.app.log_panel import status_text
from latticelab.sim.models.ising.params import T_C


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
    slider = window.controls.field("T").slider
    start = _handle_centre(slider)
    qtbot.mousePress(slider, QtCore.Qt.MouseButton.LeftButton, pos=start)
    end = start
    for dx in range(8, 81, 8):
        end = start + QtCore.QPoint(dx, 0)
        qtbot.mouseMove(slider, end)
    qtbot.mouseRelease(slider, QtCore.Qt.MouseButton.LeftButton, pos=end)
    T = scales.temperature_at(slider.value(), T_C[2])
    assert slider.value() > scales.position_of_temperature(2.2, T_C[2])    # the drag moved the handle right
    assert abs(window.model.T - T) < 1e-5 and window.model.T > 2.2     # read back from the model
    assert window.model is model                                       # same run, not restarted
    steps = model.step_count
    qtbot.waitUntil(lambda: model.step_count > steps, timeout=10000)  # and still running
    assert float(window.controls.field("T").box.text()) == round(window.model.T, 6)


def test_temperature_box_and_tc_button(make_window, qtbot):
    window = make_window(dim=2, L=16)
    field = window.controls.field("T")
    type_into(field.box, "1.5")
    assert window.model.T == 1.5
    qtbot.mouseClick(field.centre_button, QtCore.Qt.MouseButton.LeftButton)
    assert abs(window.model.T - T_C[2]) < 1e-4
    assert abs(scales.temperature_at(field.slider.value(), T_C[2]) - T_C[2]) < 1e-3


def test_changing_p_keeps_the_spins(make_window):
    window = make_window(dim=2, L=32, T=2.2)
    window.step_once()
    model = window.model
    spins = to_numpy(model.spins).copy()
    steps = model.step_count
    assert model.p == 0.0
    p_field = window.controls.field("p")
    p_field.slider.setValue(scales.position_of_p(1e-2))   # a click/keyboard move applies at once
    assert abs(model.p - 1e-2) < 1e-9
    assert len(model.rewired_edges()) > 0
    assert window.model is model and model.step_count == steps
    np.testing.assert_array_equal(to_numpy(model.spins), spins)
    choose(window.controls.field("rewire_dims").combo, "x")
    assert model.rewire_dims == "x"
    np.testing.assert_array_equal(to_numpy(model.spins), spins)
    type_into(p_field.box, "0")
    assert model.p == 0.0 and p_field.slider.value() == 0


def test_bad_values_are_reported_and_the_app_keeps_running(make_window, qtbot):
    window = make_window(dim=2, L=16, running=True)
    model = window.model
    p_box = window.controls.field("p").box
    size = window.controls.field("L").combo
    type_into(p_box, "1.5")
    assert window.last_error.startswith("p:") and "[0, 1]" in window.last_error
    assert model.p == 0.0 and p_box.text() == "1.5"                    # the typed text stays, to be corrected,
    assert window.controls.field("p").error() == window.last_error      # with the message under the box
    choose(size, "7")
    assert window.last_error.startswith("L:")
    assert window.model is model and size.currentText() == "7" and window.controls.field("L").error()
    choose(size, "big")
    assert window.last_error.startswith("L:") and "'big'" in window.last_error
    type_into(p_box, "banana")
    assert window.last_error.startswith("p:")
    # the status bar shows the message as it fits beside its permanent labels (which are wider on a GPU device)
    assert window.statusBar().currentMessage() == status_text(window.statusBar(), window.last_error)
    assert window.statusBar().currentMessage().startswith("p: must")
    steps = model.step_count
    qtbot.waitUntil(lambda: model.step_count > steps, timeout=10000)


def test_algorithm_hybrid_and_seeded_resets(make_window):
    window = make_window(dim=2, L=16, T=2.2)
    c = window.controls
    schedule = c.field("algorithm")
    choose(schedule.combo, "wolff")
    assert window.model.algorithm == "wolff"
    choose(schedule.combo, "hybrid")
    schedule.m.setValue(3)
    schedule.w.setValue(2)
    assert window.model.algorithm == "3:2"
    type_into(c.field("seed").box, "42")
    assert window.model.seed != 42                      # a reset parameter: used by the next reset
    choose(c.field("start").combo, "cold")
    c.reset_button.click()
    assert window.model.step_count == 0 and (to_numpy(window.model.spins) == 1).all() and window.model.seed == 42
    choose(c.field("start").combo, "hot")
    c.reset_button.click()
    first = to_numpy(window.model.spins).copy()
    assert 0 < (first == 1).sum() < first.size
    c.reset_button.click()
    np.testing.assert_array_equal(to_numpy(window.model.spins), first)   # same seed, same hot start


def test_switching_dimension_and_size(make_window):
    window = make_window(dim=2, L=16, T=2.0)
    c = window.controls
    choose(c.field("L").combo, "24")
    assert window.model.L == 24 and window.model.dim == 2
    window.prefs.set("models/ising/dim=3/L", 8)   # the size last used in 3D
    choose(c.field("dim").combo, "3D")
    assert window.model.dim == 3 and window.model.L == 8
    assert window.field_view.active_mode == "cube"
    assert c.peel.maximum() == 7 and c.peel.isEnabled() and c.unfold.isEnabled()
    assert abs(window.model.T - 4.45) < 1e-9          # the 3D default just below T_c
    choose(c.field("dim").combo, "2D")
    assert window.model.dim == 2 and window.model.L == 24 and window.model.T == 2.0
    assert not c.peel.isEnabled()


def test_status_bar_shows_backend_size_and_rates(make_window, qtbot):
    window = make_window(dim=2, L=16, running=True)
    labels = window.status_labels
    qtbot.waitUntil(lambda: "steps/s" in labels["steps_per_s"].text(), timeout=10000)
    assert ("CPU" if window.model.backend_name == "numpy" else window.model.device_name) in labels["backend"].text()
    assert "16x16" in labels["lattice"].text()
    qtbot.waitUntil(lambda: "frames/s" in labels["frames_per_s"].text(), timeout=10000)
    window.run_action.trigger()   # pause
    assert not window.running
