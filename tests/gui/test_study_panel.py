"""The Study dock (issue 11) in the real main window under Xvfb: a tiny critical-temperature study written in
the form and run in the background while the window keeps simulating, its table, its plot (one colour per L,
found in the rendered pixels), pause / cancel / resume, the form's messages, and reopening tables; plus the
pieces under it (sweep control, time left, the study writer)."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from gui_helpers import choose, type_into  # noqa: E402

from latticelab.app.study_form import ERROR_STYLE  # noqa: E402
from latticelab.app.study_panel import StudyPanel  # noqa: E402
from latticelab.render.study_plots import MARK_COLOUR, MARKER_SIZE  # noqa: E402
from latticelab.sim.studies import parse_study  # noqa: E402
from latticelab.sim.studies.point import TIMING_COLUMNS, run_point  # noqa: E402
from latticelab.sim.studies.progress import SweepProgress, format_duration  # noqa: E402
from latticelab.sim.studies.spec import study_text  # noqa: E402
from latticelab.sim.studies.sweep import SweepControl, run_sweep  # noqa: E402

TINY = study_text("ising", {"dim": 2, "algorithm": "metropolis"},
                  {"L": [4, 6], "T": {"start": 2.0, "stop": 2.6, "num": 3}, "seed": [1, 2]},
                  {"equilibrate": 20, "decorrelate": 1, "measurements": 40, "backend": "numpy"})


def show_panel(window, qtbot) -> StudyPanel:
    panel = window.findChild(StudyPanel)
    assert panel is not None and window.study_panel is panel
    assert panel.plot is None            # made when the dock is first shown
    panel.show()
    panel.raise_()
    qtbot.waitUntil(lambda: panel.plot is not None and panel.canvas.native.isVisible(), timeout=15000)
    return panel


def fill_tiny_form(panel, out) -> None:
    """What a user types for the tiny study: 2D Ising, L 4 and 6, 3 temperatures, 2 seeds, few steps."""
    form = panel.form
    assert form.model_name() == "ising"          # taken from the running model
    assert form.others.text() == "dim = 2"       # its variant field
    assert [r.name for r in form.sweep_rows] == ["L", "T"]       # the study the model suggests
    type_into(form.others, 'dim = 2, algorithm = "metropolis"')
    type_into(form.sweep_row("L").values, "4, 6")
    temperatures = form.sweep_row("T")
    assert temperatures.kind.currentText() == "linear"
    type_into(temperatures.start, "2.0")
    type_into(temperatures.stop, "2.6")
    temperatures.num.setValue(3)
    type_into(form.seeds, "1, 2")
    form.run["equilibrate"].setValue(20)
    form.run["decorrelate"].setValue(1)
    form.run["measurements"].setValue(40)
    form.backend.setCurrentText("numpy")
    panel.output_edit.setText(str(out))


def table_rows(path):
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in csv.DictReader(f)]


def colour_pixels(image, colour, tolerance=4) -> int:
    target = np.round(np.asarray(colour[:3]) * 255)
    return int((np.abs(image[..., :3].astype(int) - target).max(axis=-1) <= tolerance).sum())


def pixel(image, xy) -> np.ndarray:
    return image[int(xy[1]), int(xy[0]), :3].astype(int)


def wait_shown(panel, qtbot, action):
    """Run ``action`` and wait until the plot shows every row the panel has."""
    with qtbot.waitSignal(panel.shown, timeout=20000):
        action()
    qtbot.waitUntil(lambda: panel.summary is not None and panel.summary.rows == len(panel.rows), timeout=20000)
    qtbot.wait(20)


# ---- the acceptance test ----------------------------------------------------------------------------------------
def test_a_tiny_study_runs_from_the_panel_while_the_window_simulates_pauses_and_resumes(make_window, qtbot,
                                                                                       tmp_path):
    window = make_window(L=16)
    panel = show_panel(window, qtbot)
    out = tmp_path / "tiny.csv"
    fill_tiny_form(panel, out)

    ticks = []
    window.timer.timeout.connect(lambda: ticks.append(window.model.step_count))
    window.set_running(True)
    qtbot.waitUntil(lambda: len(ticks) > 2)
    arrivals = []
    panel.row_arrived.connect(lambda row: arrivals.append(len(ticks)))
    steps_before = window.model.step_count
    panel.start_button.click()
    # the click returned before any point was measured: the sweep is not on the GUI thread
    assert panel.running and panel.state == "running" and panel.rows == []
    assert not panel.start_button.isEnabled() and panel.pause_button.isEnabled()
    qtbot.waitUntil(lambda: panel.state == "finished", timeout=30000)
    qtbot.waitUntil(lambda: not panel.running, timeout=10000)
    qtbot.waitUntil(lambda: panel.summary is not None and panel.summary.rows == 12, timeout=20000)
    qtbot.wait(20)

    # the window's own simulation went on meanwhile: its timer fired and the model stepped while rows came in
    assert len(arrivals) == 12
    assert arrivals[-1] > arrivals[0], arrivals
    assert window.model.step_count > steps_before and window.last_error == ""

    # the table: every point once, the same rows as the batch command writes
    rows = table_rows(out)
    assert len(rows) == 12 and {r["L"] for r in rows} == {"4", "6"} and {r["seed"] for r in rows} == {"1", "2"}
    batch = run_sweep(parse_study(TINY, "tiny.toml"), tmp_path / "batch.csv", progress=False)
    assert batch.done == 12 and table_rows(tmp_path / "batch.csv") == rows
    assert "finished: 12 points run, 0 already in the table" in panel.status.text()
    assert panel.progress_bar.value() == 12 and panel.progress_bar.format().startswith("12 / 12 points")

    # the plot: U(T) with one series per L, each point drawn in its L's colour, a legend entry each
    plot = panel.plot
    qtbot.waitUntil(lambda: plot.quantity == "binder" and sorted(plot.curves) == [4, 6], timeout=30000)
    assert set(plot.colours) == {4, 6} and plot.colours[4] != plot.colours[6]
    image = panel.canvas.render(alpha=False)
    where = {L: plot.data_to_canvas(np.column_stack([c[0], c[1]])) for L, c in plot.curves.items()}
    for L, (T, mean, err) in plot.curves.items():
        assert len(T) == 3 and np.all(err > 0)
        assert colour_pixels(image, plot.colours[L]) > 3 * 20, L      # 3 markers of 9 px and the legend
        others = np.concatenate([xy for other, xy in where.items() if other != L])
        for xy in where[L]:
            if np.hypot(*(others - xy).T).min() > MARKER_SIZE:         # not hidden under another size's marker
                assert np.abs(pixel(image, xy) - np.round(np.asarray(plot.colours[L][:3]) * 255)).max() <= 4, \
                    (L, xy)
    assert [t.text for t in plot.legend] == ["L = 4", "L = 6"]

    # reopening the table shows the same points
    shown = {q: {L: tuple(a.copy() for a in c) for L, c in curves.items()}
             for q, curves in panel.current_group().curves.items()}
    wait_shown(panel, qtbot, lambda: panel.open_results(out))
    again = panel.current_group().curves
    for q, curves in shown.items():
        assert sorted(again[q]) == sorted(curves)
        for L, arrays in curves.items():
            for a, b in zip(arrays, again[q][L]):
                np.testing.assert_array_equal(a, b)
    assert "tiny.csv: 12 rows" in panel.status.text()

    # pause, cancel and resume (the same window: a study of 4 longer points into another table)
    out = tmp_path / "paused.csv"
    panel.output_edit.setText(str(out))
    panel.form.run["measurements"].setValue(100)
    panel.form.sweep_row("T").num.setValue(2)
    type_into(panel.form.seeds, "1")
    first = []
    panel.row_arrived.connect(lambda row: first or (first.append(row), panel.toggle_pause()))
    panel.start_button.click()
    qtbot.waitUntil(lambda: panel.state == "paused", timeout=20000)
    assert panel.pause_button.text() == "Resume" and "paused" in panel.progress_bar.format()
    qtbot.wait(300)                           # a point past its last checkpoint may still come in
    held = len(panel.rows)
    qtbot.wait(300)
    assert len(panel.rows) == held < 4        # paused: nothing more is measured
    panel.cancel_button.click()
    qtbot.waitUntil(lambda: panel.state == "cancelled" and not panel.running, timeout=20000)
    assert f"cancelled: {held} of 4 points" in panel.status.text() and "Start resumes" in panel.status.text()
    assert len(table_rows(out)) == held       # the finished points are in the table

    panel.start_button.click()                # the same study and table: resumed
    qtbot.waitUntil(lambda: panel.state == "finished" and not panel.running, timeout=30000)
    assert f"{4 - held} points run, {held} already in the table" in panel.status.text()
    assert len(table_rows(out)) == 4 and len(panel.rows) == 4


def test_the_form_names_the_field_of_a_bad_value_and_study_files_run(make_window, qtbot, tmp_path, monkeypatch):
    window = make_window(L=8)
    panel = show_panel(window, qtbot)
    out = tmp_path / "bad.csv"
    fill_tiny_form(panel, out)
    sizes = panel.form.sweep_row("L").values
    type_into(sizes, "4, 5")
    assert not panel.start_from_form()
    text = panel.status.text()
    assert "sweep L (grid.L)" in text and "even" in text, text
    assert sizes.styleSheet() == ERROR_STYLE and panel.state == "idle" and not out.exists()
    assert "study:" in window.last_error

    type_into(panel.form.seeds, "1, x")
    type_into(panel.form.others, 'algorithm = "fast"')
    assert not panel.start_from_form()
    text = panel.status.text()
    assert "seeds (grid.seed): must be whole numbers" in text and "'1, x'" in text, text
    type_into(panel.form.seeds, "1, 2")
    type_into(sizes, "4, 6")
    assert not panel.start_from_form()
    text = panel.status.text()
    assert "fixed parameters (parameters.algorithm)" in text and "metropolis" in text, text
    assert panel.form.others.styleSheet() and not sizes.styleSheet() and not panel.form.seeds.styleSheet()

    type_into(panel.form.others, 'dim = 2, algorithm = "metropolis"')
    saved = panel.save_study(tmp_path / "form.toml", overwrite=False)     # the form as a study file
    assert saved == tmp_path / "form.toml" and not panel.form.others.styleSheet()
    assert [p.values for p in parse_study(saved.read_text()).points] == \
        [p.values for p in parse_study(TINY).points]
    first = saved.read_text()
    type_into(sizes, "4")
    again = panel.save_study(tmp_path / "form.toml", overwrite=False)     # never over the user's file
    assert again != saved and saved.read_text() == first and "L = [4]" in again.read_text()

    type_into(panel.form.others, "dim = ")
    assert not panel.start_from_form()
    assert "fixed parameters (parameters): must be key = value pairs" in panel.status.text()
    assert not out.exists() and not panel.running

    # issue 42: the measures are the capability's, ticked in a menu (none ticked: all)
    type_into(panel.form.others, "dim = 2")
    form = panel.form
    assert "binder" in form.measures.actions_by_name and form.measures.text().startswith("all")
    assert set(form.study().measures) >= {"binder", "heat_capacity", "flipped_fraction"}
    form.measures.set_chosen(["binder", "m2"])
    assert form.study().measures == ("m2", "binder") and form.measures.text() == "m2, binder"   # in the model's order

    # any parameter of the model can be swept, over a log range too; the grid is every combination
    before = len(form.study().points)
    form.add_button.click()
    rewiring = form.sweep_rows[-1]
    qtbot.waitUntil(rewiring.isVisible, timeout=5000)
    choose(rewiring.parameter, "p")
    choose(rewiring.kind, "log")
    assert not rewiring.values.isVisible() and rewiring.start.isVisible()
    type_into(rewiring.start, "0.01")
    type_into(rewiring.stop, "1")
    rewiring.num.setValue(3)
    points = form.study().points
    assert sorted({p.values["p"] for p in points}) == pytest.approx([0.01, 0.1, 1.0]) and len(points) == 3 * before
    rewiring.remove.click()
    assert form.sweep_row("p") is None and len(form.study().points) == before

    # issue 41 item 24: Start with an empty table field wrote study-ising.csv into the current folder; now it
    # asks (interactive) or says to choose one, and writes nothing
    from PySide6 import QtWidgets
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    asked = []
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        lambda *args, **kwargs: asked.append(args) or ("", ""))       # the user cancels
    panel.output_edit.setText("")
    assert not panel.start_from_form()
    assert asked and "choose the results table" in panel.status.text()
    assert list(empty.iterdir()) == [] and not panel.running

    # a study file runs (its table beside it), a bad one is refused
    study = tmp_path / "tiny.toml"
    study.write_text(TINY.replace("seed = [1, 2]", "seed = [1]").replace("L = [4, 6]", "L = [4]"))
    assert panel.start_study(study)
    qtbot.waitUntil(lambda: panel.state == "finished" and not panel.running, timeout=30000)
    assert len(table_rows(tmp_path / "tiny.csv")) == 3      # beside the file, as 'latticelab sweep' does
    qtbot.waitUntil(lambda: panel.summary is not None and panel.summary.rows == 3, timeout=20000)
    assert "needs at least two lattice sizes" in panel.result_label.text()

    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.replace("measurements = 40", "measurements = 1"))
    assert not panel.start_study(bad)
    assert "bad.toml: run.measurements" in panel.status.text() and ">= 2" in panel.status.text()
    assert not (tmp_path / "bad.csv").exists()

    foreign = tmp_path / "foreign.csv"
    foreign.write_text("a,b\n1,2\n")
    assert panel.start_study(study, foreign)
    qtbot.waitUntil(lambda: panel.state == "failed" and not panel.running, timeout=20000)
    assert "not a results table" in panel.status.text() and foreign.read_text() == "a,b\n1,2\n"


def crossing_table(path, T_cross=2.3):
    """A results table of two sizes whose Binder curves are straight lines crossing at ``T_cross``."""
    from latticelab.sim.studies.sweep import Table
    from latticelab.sim.models import get_model
    from latticelab.sim.studies.point import columns
    header = columns(get_model("ising"))
    table = Table(path, None, header, {})
    Ts = [2.1, 2.2, 2.4, 2.5]
    for L, slope in ((8, -0.2), (16, -0.3)):
        for T in Ts:
            U = 0.6 + slope * (T - T_cross)          # U = 1 - m4 / (3 m2^2), moments a spin system can have
            m2 = 0.3
            row = {"model": "ising", "dim": 2, "L": L, "T": T, "p": 0.0, "seed": 1, "m2": m2,
                   "m4": 3.0 * m2 * m2 * (1.0 - U), "binder": U, "binder_err": 0.0002, "heat_capacity": 1.0 + T,
                   "heat_capacity_err": 0.1, "susceptibility": 2.0 * L, "susceptibility_err": 0.5,
                   "point": f"{L}-{T}"}
            table.rows[row["point"]] = {c: "" if row.get(c) is None else repr(row[c]) if isinstance(row[c], float)
                                        else str(row[c]) for c in header}
    table.write()
    return path


def test_reopened_tables_mark_the_crossing_switch_quantity_and_draw_a_ramps_branches(make_window, qtbot, tmp_path):
    window = make_window(L=8)
    panel = show_panel(window, qtbot)
    path = crossing_table(tmp_path / "cross.csv")
    wait_shown(panel, qtbot, lambda: panel.open_results(path))
    result = panel.current_group().result
    assert result.T_c == pytest.approx(2.3) and result.U_c == pytest.approx(0.6)
    assert result.T_c_err < 0.01
    assert panel.result_label.text().startswith("T_c = 2.3 ± ")
    assert panel.plot.caption.text.startswith("T_c = 2.3 ± ")
    image = panel.canvas.render(alpha=False)
    top = panel.plot.data_to_canvas([[2.3, 0.685]])[0]     # above both curves: only the marker is there
    x0, y0 = int(top[0]), int(top[1])
    near = image[y0 - 2:y0 + 3, x0 - 2:x0 + 3, :3].astype(int).reshape(-1, 3)      # the line, antialiased
    closest = near[np.abs(near - np.round(np.asarray(MARK_COLOUR[:3]) * 255)).max(axis=1).argmin()]
    assert np.abs(closest - np.round(np.asarray(MARK_COLOUR[:3]) * 255)).max() <= 30, closest
    left = panel.plot.data_to_canvas([[2.15, 0.56]])[0]      # below both curves, away from the caption
    assert np.abs(pixel(image, left) - np.round(np.asarray(MARK_COLOUR[:3]) * 255)).max() > 100

    panel.quantity.setCurrentIndex(panel.quantity.findData("susceptibility"))
    assert panel.plot.quantity == "susceptibility" and "chi" in panel.plot.title.text
    T, chi, err = panel.plot.curves[16]
    assert chi.tolist() == [32.0] * 4 and err.tolist() == [0.5] * 4
    panel.quantity.setCurrentIndex(panel.quantity.findData("heat_capacity"))
    np.testing.assert_allclose(panel.plot.curves[8][1], [3.1, 3.2, 3.4, 3.5])

    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    panel.open_results(other)
    qtbot.waitUntil(lambda: "not opened" in panel.status.text(), timeout=10000)
    assert "not a results table" in panel.status.text() and "no model column" in panel.status.text()
    assert not panel.open_results(tmp_path / "missing.csv") and "is not a file" in panel.status.text()

    # issue 42: any measure against any parameter; a ramp's up and down branches are two curves of two colours
    from latticelab.render.study_plots import series_colour
    path = tmp_path / "ramp.csv"
    lambdas = [1.0, 2.0, 3.0, 2.0, 1.0]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "L", "lambda_tau_e", "seed", "branch", "stage", "spectral_entropy",
                         "spectral_entropy_err", "point"])
        for i, lam in enumerate(lambdas):
            branch = "up" if i < 3 else "down"
            entropy = 0.9 - 0.1 * lam + (0.05 if branch == "down" else 0.0)
            writer.writerow(["cortex", 16, lam, 1, branch, i, entropy, 0.01, f"k-{i}"])
    wait_shown(panel, qtbot, lambda: panel.open_results(path))
    assert panel.quantity.currentData() == "spectral_entropy" and panel.x_param.currentData() == "lambda_tau_e"
    plot = panel.plot
    assert list(plot.curves) == ["down", "up"] and "lambda_tau_e" in plot.title.text
    x, mean, err = plot.curves["up"]
    np.testing.assert_allclose(x, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(mean, [0.8, 0.7, 0.6])
    np.testing.assert_allclose(plot.curves["down"][1], [0.85, 0.75])
    qtbot.wait(100)
    image = panel.canvas.render(alpha=False)
    for i, branch in enumerate(plot.curves):
        assert plot.colours[branch] == series_colour(i)
        assert colour_pixels(image, series_colour(i), tolerance=30) > 20, branch


@pytest.mark.slow
def test_a_study_on_a_local_dask_cluster_from_the_panel(make_window, qtbot, tmp_path):
    window = make_window(L=8)
    panel = show_panel(window, qtbot)
    out = tmp_path / "dask.csv"
    fill_tiny_form(panel, out)
    panel.workers.setValue(2)
    panel.start_button.click()
    qtbot.waitUntil(lambda: panel.state == "finished" and not panel.running, timeout=120000)
    rows = table_rows(out)
    run_sweep(parse_study(TINY, "tiny.toml"), tmp_path / "batch.csv", progress=False)
    assert rows == table_rows(tmp_path / "batch.csv")


# ---- the pieces under the panel -----------------------------------------------------------------------------
def test_a_checkpointed_point_gives_the_same_row():
    point = parse_study(TINY).points[3]
    calls = []
    row = run_point(point, checkpoint=lambda: calls.append(1))
    plain = run_point(point)
    assert len(calls) >= 40 + 20 and \
        {k: v for k, v in row.items() if k not in TIMING_COLUMNS} == \
        {k: v for k, v in plain.items() if k not in TIMING_COLUMNS}


def test_a_cancelled_sweep_keeps_its_finished_rows(tmp_path):
    study = parse_study(TINY)
    control = SweepControl()
    seen = []

    def after(row):
        seen.append(row)
        if len(seen) == 3:
            control.cancel()
    result = run_sweep(study, tmp_path / "c.csv", progress=False, on_row=after, control=control)
    assert result.cancelled and result.done == 3 and len(table_rows(tmp_path / "c.csv")) == 3
    started = []
    again = run_sweep(study, tmp_path / "c.csv", progress=False, on_start=lambda rows, todo: started.append(
        (len(rows), len(todo))))
    assert started == [(3, 9)] and again.done == 9 and not again.cancelled


def test_time_left_weighs_points_by_their_size():
    study = parse_study(TINY)                    # L 4 then L 6, 6 points each
    progress = SweepProgress()
    progress.start(study.points, 0, now=0.0)
    assert progress.time_left(now=1.0) is None and progress.done == 0
    for point in study.points[:6]:               # the L = 4 points took 1 s each
        progress.finished({"point": point.key, "L": 4, "n_sites": 16})
    assert progress.done == 6 and progress.dimension == 2
    # the six L = 6 points have 36 / 16 times the sites: 6 * 2.25 s
    assert progress.time_left(now=6.0) == pytest.approx(6 * 36 / 16)
    assert format_duration(None) == "estimating…" and format_duration(75) == "1 min 15 s"
    assert format_duration(7300) == "2 h 01 min" and math.isclose(progress.work_done, 6 * 16 * 59)
