"""ipywidgets controls for a model's parameters, made from the same schema as the window's form (app/form.py):
one widget per field, grouped by when a change applies, with its label, unit, limits and help text. No Qt.

The widget of a field follows from its type, choices and bounds: choices (or the schema's options for the
current values) give a dropdown, an integer an integer box, a number a float box (a slider where both bounds
are given), text a text box. A change goes through ``apply(name, value)`` (the simulation's ``set``, which
validates and routes it); a refused value is shown under the controls and the widget goes back to the value in
force.
"""
from __future__ import annotations

GROUPS = (("rebuild", "Model (a change makes a new model)"), ("live", "Running"), ("reset", "Next reset"))


def field_widget(widgets, name: str, info: dict, schema, values: dict):
    """The ipywidget of one schema field, showing ``values[name]``."""
    label = f"{info['label']}" + (f" [{info['unit']}]" if info.get("unit") else "")
    common = {"description": label, "value": values[name], "tooltip": info.get("help", ""),
              "style": {"description_width": "initial"}, "continuous_update": False}
    choices = info.get("choices") or schema.options(name, values)
    if choices and info.get("widget") != "editable_choice":   # sizes: any allowed value, typed
        options = list(choices) if values[name] in choices else [values[name], *choices]
        common.pop("continuous_update")
        return widgets.Dropdown(options=options, **common)
    bounds = info.get("bounds", {})
    low, high = bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))
    if info["type"] is int:
        return widgets.BoundedIntText(min=int(low) if low is not None else -2 ** 31,
                                      max=int(high) if high is not None else 2 ** 31 - 1, **common)
    if info["type"] is float:
        if low is not None and high is not None:
            return widgets.FloatSlider(min=float(low), max=float(high), step=(float(high) - float(low)) / 1000,
                                       readout_format=".4g", **common)
        return widgets.FloatText(**common)
    common.pop("continuous_update")
    return widgets.Text(**{**common, "value": str(values[name])})


class ParameterControls:
    """Every field of ``schema`` as an ipywidget in a VBox (``.box``); edits call ``apply(name, value)``, whose
    ParameterError is shown in ``.message``."""

    def __init__(self, widgets, schema, values: dict, apply):
        self.widgets, self.schema, self._apply = widgets, schema, apply
        self.fields = {}
        self.message = widgets.HTML("")
        rows = []
        infos = schema.fields()
        for applies, title in GROUPS:
            names = [n for n, info in infos.items() if info["applies"] == applies]
            if not names:
                continue
            rows.append(widgets.HTML(f"<b>{title}</b>"))
            for name in names:
                widget = field_widget(widgets, name, infos[name], schema, values)
                widget.observe(self._edited(name), names="value")
                self.fields[name] = widget
                rows.append(widget)
        self.box = widgets.VBox([*rows, self.message])
        self._quiet = False

    def _edited(self, name: str):
        def changed(change) -> None:
            if self._quiet:
                return
            from latticelab.sim.params import ParameterError
            try:
                self._apply(name, change["new"])
                self.message.value = ""
            except ParameterError as exc:
                self.message.value = f"<span style='color:#c00'>{exc}</span>"
                self.show_values({name: change["old"]})
        return changed

    def show_values(self, values: dict) -> None:
        """Put ``values`` into the widgets without applying them."""
        self._quiet = True
        try:
            for name, value in values.items():
                widget = self.fields.get(name)
                if widget is None:
                    continue
                if hasattr(widget, "options") and value not in widget.options:
                    widget.options = [value, *widget.options]
                widget.value = value
        finally:
            self._quiet = False
