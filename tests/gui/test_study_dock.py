"""The Study dock for every model with the study capability (issue 42), in the real window under Xvfb: a tiny
cortex study ramping a drug factor (lambda_tau_e) up and back down, and a tiny Cahn-Hilliard study, each written
in the dock's form for the model the window runs and run while the window simulates, their rows in the table and
their points in the plot's pixels (a ramp's branches in two colours); and the dock hidden for a model without the
capability (one window, to keep it short)."""
from __future__ import annotations

import csv

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from gui_helpers import choose, type_into  # noqa: E402

from latticelab.sim.studies.capability import all_measures  # noqa: E402


def table(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def colour_pixels(image, colour, tolerance=30) -> int:
    target = np.round(np.asarray(colour[:3]) * 255)
    return int((np.abs(image[..., :3].astype(int) - target).max(axis=-1) <= tolerance).sum())


def remember(window, name, **values) -> None:
    """The parameters a switch to ``name`` starts from (small: the defaults are large)."""
    from latticelab.sim import models
    window.prefs.set_model_values(name, models.get_model(name).Params.create(gpu=False, **values))


def shown_dock(window, qtbot):
    panel = window.study_panel
    qtbot.waitUntil(lambda: panel.available and not panel.isHidden(), timeout=10000)
    panel.raise_()
    qtbot.waitUntil(lambda: panel.plot is not None and panel.canvas.native.isVisible(), timeout=20000)
    return panel


def run_from_the_dock(window, panel, qtbot, out) -> list:
    """Click Start with the window simulating; the window's own frames while the rows came in."""
    ticks = []
    window.timer.timeout.connect(lambda: ticks.append(1))
    window.set_running(True)
    arrivals = []
    panel.row_arrived.connect(lambda row: arrivals.append(len(ticks)))
    panel.output_edit.setText(str(out))
    panel.start_button.click()
    assert panel.running and panel.rows == []          # the click returned at once: the sweep is not on this thread
    qtbot.waitUntil(lambda: panel.state == "finished" and not panel.running, timeout=60000)
    qtbot.waitUntil(lambda: panel.summary is not None and panel.summary.rows == len(arrivals), timeout=20000)
    window.set_running(False)
    assert window.last_error == "" and arrivals and len(ticks) > arrivals[0]
    return arrivals


def assert_plotted(panel, qtbot, measure, x, xs: dict):
    """``measure`` chosen in the dock is plotted against ``x``: series -> x values, each series's colour in the
    rendered picture (its markers and legend entry). Returns the plotted means."""
    choose(panel.quantity, panel.quantity.itemText(panel.quantity.findData(measure)))
    assert panel.x_param.currentData() == x
    plot = panel.plot
    # the curves are made on the dock's analysis worker: they arrive when it is done, however busy the machine
    qtbot.waitUntil(lambda: plot.quantity == measure and sorted(plot.curves) == sorted(xs), timeout=30000)
    assert plot.x_axis.axis.axis_label == x
    assert sorted(plot.curves) == sorted(xs) and len(set(plot.colours.values())) == len(xs)
    qtbot.wait(100)
    image = panel.canvas.render(alpha=False)
    for series, (at, mean, err) in plot.curves.items():
        np.testing.assert_allclose(at, xs[series])
        assert np.all(np.isfinite(mean))
        assert colour_pixels(image, plot.colours[series]) > 20 * len(at), series
    return {series: curve[1] for series, curve in plot.curves.items()}


def test_cortex_and_cahn_hilliard_studies_run_from_the_dock_and_it_hides_for_a_model_without_studies(
        make_window, qtbot, tmp_path, monkeypatch):
    window = make_window(model="cortex", L=16, k=10, r=3)
    panel = shown_dock(window, qtbot)
    form = panel.form
    # the form offers what the cortex's capability declares, starting from the study it suggests
    assert form.model_name() == "cortex" and [r.name for r in form.sweep_rows] == ["lambda_tau_e"]
    assert form.steps_label.text() == "time (ms)" and set(form.measures.actions_by_name) == set(
        all_measures(type(window.model)))
    assert form.others.text() == "L = 16, k = 10, r = 3"           # the running network's size
    drug = form.sweep_row("lambda_tau_e")
    choose(drug.kind, "list")
    type_into(drug.values, "1, 3")
    form.ramp.setChecked(True)                # up to 3 and back to 1 in one run: two branches
    form.run["equilibrate"].setValue(20)
    form.run["decorrelate"].setValue(10)
    form.run["measurements"].setValue(3)
    form.measures.set_chosen(["rate_e", "mean_eeg"])
    form.backend.setCurrentText("numpy")
    out = tmp_path / "cortex.csv"
    run_from_the_dock(window, panel, qtbot, out)
    rows = table(out)
    assert [(float(r["lambda_tau_e"]), r["branch"]) for r in rows] == [(1.0, "up"), (3.0, "up"), (1.0, "down")]
    assert all(float(r["rate_e"]) >= 0 and r["mean_eeg"] for r in rows) and {r["k"] for r in rows} == {"10"}
    assert_plotted(panel, qtbot, "rate_e", "lambda_tau_e", {"up": [1.0, 3.0], "down": [1.0]})

    # the window switches to (a small) Cahn-Hilliard: the form follows, and its study runs the same way. Behind
    # another tab the dock rebuilds its form only when shown, not inside the switch (a frame's worth of work)
    remember(window, "cahn-hilliard", dim=2, L=32, integrator="spectral", dt=1.0)
    window.plot_dock.raise_()
    qtbot.waitUntil(lambda: not panel.on_screen(), timeout=10000)
    assert window.switch_model("cahn-hilliard")
    qtbot.waitUntil(lambda: window.model.name == "cahn-hilliard", timeout=60000)
    assert panel.available and form.model_name() == "cortex"
    panel.raise_()
    qtbot.waitUntil(lambda: form.model_name() == "cahn-hilliard", timeout=10000)
    assert [r.name for r in form.sweep_rows] == ["phi0"] and form.steps_label.text() == "simulated time"
    type_into(form.others, 'dim = 2, L = 32, integrator = "spectral", dt = 1.0')
    type_into(form.sweep_row("phi0").values, "0.0, 0.2")
    form.run["equilibrate"].setValue(10)
    form.run["decorrelate"].setValue(10)
    form.run["measurements"].setValue(4)
    form.backend.setCurrentText("numpy")
    out = tmp_path / "ch.csv"
    run_from_the_dock(window, panel, qtbot, out)
    rows = table(out)
    assert [float(r["phi0"]) for r in rows] == [0.0, 0.2] and {r["L"] for r in rows} == {"32"}
    assert panel.quantity.currentData() == "coarsening_exponent"      # what the model's plot shows first
    lengths = assert_plotted(panel, qtbot, "final_length", "phi0", {"all": [0.0, 0.2]})
    np.testing.assert_allclose(lengths["all"], [float(r["final_length"]) for r in rows])

    # a model registered without the study capability: the dock goes, its tab with it, and the form never offers it
    from PySide6 import QtWidgets

    from latticelab.sim import models
    plain = type("PlainModel", (models.get_model("ising"),), {"name": "plain", "title": "Plain", "study": None})
    monkeypatch.setitem(models.REGISTRY, "plain", f"{__name__}:PlainModel")
    monkeypatch.setitem(models._loaded, "plain", plain)
    remember(window, "plain", dim=2, L=8)
    assert window.switch_model("plain")
    qtbot.waitUntil(lambda: window.model.name == "plain" and not panel.available and panel.isHidden(),
                    timeout=30000)
    tabs = [bar.tabText(i) for bar in window.findChildren(QtWidgets.QTabBar) if bar.isVisible()
            for i in range(bar.count())]
    assert tabs and "Study" not in tabs, tabs
    assert "plain" not in [panel.form.model.itemData(i) for i in range(panel.form.model.count())]
