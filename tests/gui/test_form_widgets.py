"""The parameter form's widget registry (app/form.py): a field's ``widget`` hint names a registered widget; a
model's own widget registers in app/ under the hint its schema declares (the Ising schedule, which reads "m:w"
through the schema's own parser); an unknown hint is refused with a message naming the field and the hints."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from latticelab.app import form  # noqa: E402
from latticelab.app.model_widgets import HybridScheduleField  # noqa: E402
from latticelab.sim.models import all_models  # noqa: E402
from latticelab.sim.models.ising.params import HYBRID_MAX, IsingParams  # noqa: E402
from latticelab.sim.params import ModelParams, param  # noqa: E402


def test_every_hint_a_registered_model_declares_has_a_widget(qtbot):
    for cls in all_models().values():
        made = form.ParameterForm(cls.Params)
        qtbot.addWidget(made)
        for name, info in cls.Params.fields().items():
            if info.get("widget") is not None:
                assert isinstance(made.field(name), form.WIDGETS[info["widget"]]), (cls.name, name)


def test_the_schedule_widget_shows_and_edits_a_hybrid_through_the_schema(qtbot):
    widget = form.make_field("algorithm", IsingParams.fields()["algorithm"], IsingParams)
    qtbot.addWidget(widget)
    assert isinstance(widget, HybridScheduleField)
    assert widget.m.maximum() == widget.w.maximum() == HYBRID_MAX
    values = IsingParams().model_dump()
    widget.show_value(" 12 : 3 ", values)            # the schema's grammar: spaces around the colon allowed
    assert widget.combo.currentText() == "hybrid" and (widget.m.value(), widget.w.value()) == (12, 3)
    assert widget.m.isEnabled()
    widget.show_value("wolff", values)
    assert widget.combo.currentText() == "wolff" and not widget.m.isEnabled()
    edits = []
    widget.edited.connect(lambda name, value: edits.append((name, value)))
    widget.combo.setCurrentText("hybrid")
    widget.w.setValue(5)
    assert edits[-1] == ("algorithm", "12:5")


def test_an_unknown_hint_is_refused_with_the_field_and_the_known_hints():
    class Odd(ModelParams):
        x: float = param(1.0, label="x", help="x", widget="no_such_widget")

    with pytest.raises(ValueError, match=r"Odd\.x: no widget registered for the hint 'no_such_widget'.*choice"):
        form.make_field("x", Odd.fields()["x"], Odd)
