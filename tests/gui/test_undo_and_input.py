"""Input boxes take what is typed and say beside the box what is wrong; parameter changes can be undone and
redone (issue 16)."""
from __future__ import annotations

import math

import pytest
from PySide6 import QtCore

from gui_helpers import activate, choose, type_into

from latticelab.app.form import _parse_number
from latticelab.sim.models import get_model


@pytest.mark.parametrize("text, kind, expected", [
    ("1e9", int, 10 ** 9),          # a spin box made this 19
    ("-5", float, -5.0),            # ... and this 5.0
    ("-5", int, -5),
    ("0", float, 0.0),
    ("16.9", int, 16.9),            # not truncated: the schema refuses it as an integer
    ("  2.5 ", float, 2.5),
    ("banana", float, "banana"),    # passed on as text: the schema names it
    ("1,5", float, "1,5"),
])
def test_numbers_are_parsed_as_typed(text, kind, expected):
    value = _parse_number(text, kind)
    assert value == expected and type(value) is type(expected)


def test_an_integer_far_beyond_any_field_is_not_expanded_digit_by_digit():
    assert math.isinf(_parse_number("1e100000000", int))


def test_minus_five_in_the_temperature_box_is_explained_beside_the_box(make_window):
    window = make_window(dim=2, L=16, T=2.2)
    field = window.controls.field("T")
    type_into(field.box, "-5")
    assert window.model.T == 2.2                                      # the model is as it was
    assert field.error_label.isVisible()
    message = field.error_label.text()
    assert message.startswith("T:") and "> 0" in message and "-5" in message
    assert message == window.last_error == window.statusBar().currentMessage()
    assert field.box.text() == "-5"                                  # what was typed stays, to be corrected
    type_into(field.box, "0")                                         # 0 is refused with the same message
    assert window.model.T == 2.2 and field.error_label.isVisible() and "> 0" in field.error_label.text()
    type_into(field.box, "1.75")                                      # valid input clears the message
    assert window.model.T == 1.75 and not field.error_label.isVisible() and field.box.text() == "1.75"


def test_integer_boxes_take_exponents_and_refuse_negatives_with_a_message(make_window):
    window = make_window(dim=2, L=16)
    field = window.controls.field("seed")
    type_into(field.box, "1e9")
    assert window.runner.params.seed == 10 ** 9 and not field.error_label.isVisible()
    type_into(field.box, "-5")
    assert window.runner.params.seed == 10 ** 9
    assert field.error_label.isVisible() and field.error_label.text().startswith("seed:")
    assert "[0, 2**63)" in field.error_label.text() and field.box.text() == "-5"
    type_into(field.box, "16.9")
    assert "integer" in field.error_label.text() and window.runner.params.seed == 10 ** 9
    type_into(field.box, "7")
    assert window.runner.params.seed == 7 and not field.error_label.isVisible()


def test_zero_rewiring_is_taken_and_a_refused_size_is_shown_under_its_box(make_window):
    window = make_window(dim=2, L=16)
    p = window.controls.field("p")
    type_into(p.box, "0.01")
    type_into(p.box, "0")
    assert window.model.p == 0.0 and p.box.text() == "0" and not p.error_label.isVisible()
    size = window.controls.field("L")
    choose(size.combo, "7")
    assert window.model.L == 16 and size.error_label.isVisible() and size.error_label.text().startswith("L:")
    assert size.combo.currentText() == "7"
    type_into(p.box, "0.001")                                         # the next good change clears it
    assert not size.error_label.isVisible() and size.combo.currentText() == "16"


def test_undo_and_redo_of_the_temperature_by_keyboard(make_window, qtbot):
    window = make_window(dim=2, L=16, T=2.2)
    box = window.controls.field("T").box
    type_into(box, "1.5")
    type_into(box, "-1")                                              # refused: not an undo step
    assert window.model.T == 1.5 and window.undo_history.stack.count() == 1
    activate(qtbot, window)
    window.lattice_canvas.native.setFocus()      # in a line edit, Ctrl+Z undoes the typing instead
    qtbot.keyClick(window.lattice_canvas.native, QtCore.Qt.Key.Key_Z, QtCore.Qt.KeyboardModifier.ControlModifier)
    assert window.model.T == 2.2 and box.text() == "2.2"              # in the model and in the form
    assert window.last_message.startswith("undo: T = 2.2")
    qtbot.keyClick(window.lattice_canvas.native, QtCore.Qt.Key.Key_Z,
                   QtCore.Qt.KeyboardModifier.ControlModifier | QtCore.Qt.KeyboardModifier.ShiftModifier)
    assert window.model.T == 1.5 and box.text() == "1.5"


def test_undo_of_a_dimension_switch_restores_size_and_temperature_in_one_step(make_window):
    window = make_window(dim=2, L=16, T=2.0)
    c = window.controls
    choose(c.field("L").combo, "24")
    choose(c.field("dim").combo, "3D")
    assert window.model.dim == 3
    assert window.edit_menu.actions()[0].text().startswith("Undo dim = 3")
    window.undo_action.trigger()
    assert (window.model.dim, window.model.L, window.model.T) == (2, 24, 2.0)
    assert c.field("dim").combo.currentText() == "2D" and c.field("L").combo.currentText() == "24"
    window.undo_action.trigger()                                      # a rebuild, undone through the same path
    assert (window.model.dim, window.model.L) == (2, 16)
    assert not window.undo_action.isEnabled()
    window.redo_action.trigger()
    window.redo_action.trigger()
    assert window.model.dim == 3 and window.model.L != 24


def test_undo_history_starts_again_after_switching_the_model(make_window):
    window = make_window(dim=2, L=16, T=2.2)
    type_into(window.controls.field("T").box, "1.9")
    window.prefs.set_model_values("cahn-hilliard", get_model("cahn-hilliard").Params.create(L=16))  # small
    assert window.switch_model("cahn-hilliard"), window.last_error
    window.edit_menu.aboutToShow.emit()
    assert not window.undo_action.isEnabled()
