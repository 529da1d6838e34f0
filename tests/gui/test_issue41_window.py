"""What a new user tripped on in the window (issue 41, the window items), each driven through the real window
under Xvfb."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtCore, QtGui, QtWidgets  # noqa: E402

from latticelab.app.settings import AUTO_STEPS  # noqa: E402


def _rgb(image: QtGui.QImage) -> np.ndarray:
    image = image.convertToFormat(QtGui.QImage.Format.Format_RGBA8888)
    width, height = image.width(), image.height()
    raw = np.frombuffer(image.constBits(), np.uint8).reshape(height, image.bytesPerLine())
    return raw[:, :width * 4].reshape(height, width, 4)[..., :3].astype(int).copy()


# ---- 11: a scripted screenshot shows the window as it is once the requested steps are done ---------------------
def test_a_whole_window_screenshot_after_many_steps_a_frame_shows_the_final_step_count(make_window, qtbot):
    """With Steps / frame auto (a CUDA window's default) the step count jumps from 0 to 300 in one frame; the status
    bar's label had not been laid out for its longer text when the picture was taken, and showed "step 3"."""
    window = make_window(model="cahn-hilliard", L=32)
    window.controls.steps_per_frame.setValue(AUTO_STEPS)
    shots = []
    window.run_steps(300, then=lambda: shots.append(window.capture("window")))
    qtbot.waitUntil(lambda: bool(shots), timeout=60000)
    assert window.model.step_count == 300
    label = window.status_labels["step"]
    assert label.text() == "step 300"
    qtbot.wait(100)    # whatever layout was pending is done now: the label as it is drawn
    shown = _rgb(label.grab().toImage())
    corner = label.mapTo(window, QtCore.QPoint(0, 0))
    ratio = label.devicePixelRatioF()
    x, y = round(corner.x() * ratio), round(corner.y() * ratio)
    height, width = shown.shape[:2]
    in_screenshot = shots[0][y:y + height, x:x + width, :3].astype(int)
    assert np.abs(in_screenshot - shown).max() <= 8, "the screenshot's status bar is not the label's final text"


# ---- 19: a peel restored from the settings is drawn from the first frame --------------------------------------
def test_a_restored_peel_is_drawn_from_the_start(make_window, tmp_path):
    from gui_helpers import cell_centres_2d, expected_rgb, pixels_at

    settings = tmp_path / "peeled.ini"
    settings.write_text("[view]\npeel=3\n")
    L = 8
    window = make_window(settings_file=settings, dim=3, L=L, T=4.0)
    assert window.controls.peel.value() == 3
    z, y, x = np.indices((L, L, L))      # layer z is up in column x == z only: the top layer names itself
    window.runner.model.spins = window.runner.model.xp.asarray(np.where(x == z, 1, -1).astype(np.int8))
    window.runner.highlight = None
    window.runner.state_version += 1
    window._refresh_view()
    camera = window.field_view.camera_3d
    camera.fov, camera.elevation, camera.azimuth = 0.0, 90.0, 0.0     # orthographic, looking down z
    window.field_view.reset_camera()
    top = L - 3
    image = window.capture("view")
    colours = pixels_at(image, window.field_view.world_to_canvas(cell_centres_2d(L, z=top)))
    expected = np.where(np.indices((L, L))[1] == top - 1, 1, 0)
    np.testing.assert_array_equal(colours, expected_rgb(expected))


# ---- 21: the step shortcut leaves keys to the focused input widget ----------------------------------------------
def test_right_and_space_go_to_the_focused_slider_or_button_not_to_the_step_shortcut(make_window, qtbot):
    from gui_helpers import activate
    from PySide6.QtTest import QTest

    window = make_window(dim=3, L=8, T=4.0)
    activate(qtbot, window)
    slider = window.controls.peel
    slider.setFocus()
    qtbot.waitUntil(slider.hasFocus, timeout=5000)
    before = window.model.step_count
    QTest.keyClick(slider, QtCore.Qt.Key.Key_Right)
    qtbot.wait(100)
    assert slider.value() == 1, "the slider did not get the Right key"
    assert window.model.step_count == before, "the Right key stepped the model while the slider had focus"

    box = window.controls.unfold
    box.setFocus()
    qtbot.waitUntil(box.hasFocus, timeout=5000)
    QTest.keyClick(box, QtCore.Qt.Key.Key_Space)
    qtbot.wait(100)
    assert box.isChecked(), "the check box did not get the Space key"
    assert window.model.step_count == before, "the Space key stepped the model while a check box had focus"

    window.lattice_canvas.native.setFocus()           # over the lattice the keys step, as before
    qtbot.waitUntil(window.lattice_canvas.native.hasFocus, timeout=5000)
    QTest.keyClick(window.lattice_canvas.native, QtCore.Qt.Key.Key_Right)
    qtbot.waitUntil(lambda: window.model.step_count == before + 1, timeout=10000)


# ---- 16: the wheel over the Controls form scrolls it --------------------------------------------------------
def _wheel(widget, down: bool = True) -> None:
    centre = QtCore.QPointF(widget.width() / 2, widget.height() / 2)
    angle = QtCore.QPoint(0, -120 if down else 120)
    event = QtGui.QWheelEvent(centre, widget.mapToGlobal(centre), QtCore.QPoint(0, 0), angle,
                              QtCore.Qt.MouseButton.NoButton, QtCore.Qt.KeyboardModifier.NoModifier,
                              QtCore.Qt.ScrollPhase.NoScrollPhase, False)
    QtWidgets.QApplication.sendEvent(widget, event)


def test_the_wheel_over_the_form_scrolls_it_and_changes_a_box_only_once_it_has_focus(make_window, qtbot):
    from gui_helpers import activate

    window = make_window(model="cahn-hilliard", L=32, size=(1100, 480))   # short: the form scrolls
    activate(qtbot, window)
    combo = window.controls.field("time_step").combo
    scroll = window.control_dock.widget().verticalScrollBar()
    assert scroll.maximum() > 0, "the form fits: nothing to scroll"
    before, position = combo.currentText(), scroll.value()
    _wheel(combo)
    qtbot.wait(50)
    assert combo.currentText() == before, "a wheel turn over an unfocused box changed it"
    assert window.runner.params.time_step == before
    assert scroll.value() > position, "the wheel turn did not scroll the form"

    steps = window.controls.steps_per_frame        # the Running box's spin box too
    value = steps.value()
    _wheel(steps, down=False)
    assert steps.value() == value

    combo.setFocus()                               # clicked or tabbed to: the wheel changes it
    qtbot.waitUntil(combo.hasFocus, timeout=5000)
    _wheel(combo)
    qtbot.waitUntil(lambda: combo.currentText() != before, timeout=5000)


# ---- 17: the status bar after steps computed in the background -------------------------------------------------
def test_the_status_says_paused_once_a_background_step_is_in_and_steps_per_s_while_running(
        make_window, qtbot, monkeypatch):
    from latticelab.app import main_window as main_window_module
    monkeypatch.setattr(main_window_module, "wants_background", lambda *args: True)   # every batch on the worker
    window = make_window(L=16, T=2.0)
    label = window.status_labels["steps_per_s"]
    window.step_once()
    assert window.stepper.busy and "computing 1 step" in label.text()
    qtbot.waitUntil(lambda: not window.stepper.busy and window.model.step_count == 1, timeout=30000)
    qtbot.wait(100)
    assert label.text() == "paused", "the status still names the step computed in the background"

    # running, each batch short: the status shows steps/s, not the batch in flight (however slow the machine,
    # no batch counts as long here)
    monkeypatch.setattr(main_window_module, "LONG_BATCH_S", 1e9)
    shown = []
    record = lambda: shown.append(label.text())   # noqa: E731
    window.timer.timeout.connect(record)
    window.set_running(True)
    try:
        qtbot.waitUntil(lambda: window.model.step_count >= 6 and any("steps/s" in t for t in shown),
                        timeout=60000)
    finally:
        window.set_running(False)
        window.timer.timeout.disconnect(record)
    assert not [t for t in shown if "computing" in t], sorted(set(shown))
    qtbot.waitUntil(lambda: not window.stepper.busy, timeout=30000)
    qtbot.wait(100)
    assert label.text() == "paused"


# ---- 20: the Graph tab forgets the previous model at a switch --------------------------------------------------
def test_the_graph_tab_shows_computing_not_the_previous_models_graph_after_a_switch(make_window, qtbot):
    from latticelab.app.graph_panel import COMPUTING_TEXT, GraphPanel

    window = make_window(L=16, p=0.0, seed=2)
    panel = window.findChild(GraphPanel)
    panel.show()
    panel.raise_()
    panel.refresh(force=True)
    # the dock's worker process starts with the first measurement: generous on a loaded machine
    qtbot.waitUntil(lambda: panel.result is not None, timeout=120000)
    assert "256 vertices" in panel.info.text() and panel.degree_plot.data is not None
    panel.refresh(force=True)          # a measurement of the Ising graph in flight when the model goes
    assert window.switch_model("cortex")
    assert window.model.name == "cortex"
    assert panel.info.text() == COMPUTING_TEXT
    assert panel.degree_plot.data is None, "the previous model's degree histogram is still drawn"
    shown = []
    record = lambda: shown.append(panel.info.text())   # noqa: E731
    timer = QtCore.QTimer(interval=20)
    timer.timeout.connect(record)
    timer.start()
    try:
        qtbot.wait(3000)                # the Ising measurement in flight has ended meanwhile; its result is not shown
    finally:
        timer.stop()
    assert not [t for t in shown if "256 vertices" in t]
    assert panel.result is None or panel.result["n"] == 128 * 128


# ---- 22: a model declares its own pace on the CPU ------------------------------------------------------------
def test_steps_per_frame_starts_at_the_models_declared_pace_and_follows_it_until_picked(make_window, tmp_path):
    from latticelab.app.settings import default_steps_per_frame
    from latticelab.sim.models import get_model

    if default_steps_per_frame("numpy", get_model("ising")) != 1:
        pytest.skip("the Ising model no longer steps one sweep a frame on the CPU")
    assert default_steps_per_frame("numpy", get_model("cahn-hilliard")) == AUTO_STEPS
    assert default_steps_per_frame("numpy", get_model("cortex")) == AUTO_STEPS
    settings = tmp_path / "pace.ini"
    window = make_window(settings_file=settings, model="cahn-hilliard", L=32)
    if window.model.backend_name == "cuda":
        pytest.skip("on a GPU every model starts at auto")
    steps = window.controls.steps_per_frame
    assert steps.text() == "auto" and window.steps_per_frame == AUTO_STEPS
    window.set_parameter("L", 24)                  # a rebuild keeps it
    assert window.steps_per_frame == AUTO_STEPS
    assert window.switch_model("ising")             # not picked: the next model's own pace
    assert steps.value() == 1 and window.steps_per_frame == 1
    assert window.switch_model("cortex")
    assert steps.text() == "auto" and window.steps_per_frame == AUTO_STEPS
    steps.setValue(3)                               # picked: kept across switches and stored
    assert window.switch_model("cahn-hilliard")
    assert steps.value() == 3 and window.steps_per_frame == 3
    window.close()
    store = QtCore.QSettings(str(settings), QtCore.QSettings.Format.IniFormat)
    assert int(store.value("run/steps_per_frame")) == 3


# ---- 18: the time step suggested for a new dimension follows the integrator ----------------------------------
def test_switching_a_spectral_cahn_hilliard_to_3d_keeps_a_spectral_time_step(make_window):
    from latticelab.sim.models.cahn_hilliard.params import fd_stable_dt

    window = make_window(model="cahn-hilliard", L=32, integrator="spectral", m=20.0, dt=0.02)
    assert window.set_parameter("dim", 3)
    p = window.model.params
    assert (p.dim, p.integrator, p.m) == (3, "spectral", 20.0)
    limit = fd_stable_dt(3, p.dx, p.m, p.b, p.u, p.K)
    assert p.dt > 10 * limit, f"dt = {p.dt}: the finite-difference limit ({limit:.2g}) was applied to a spectral step"
    # with the finite-difference integrator the suggestion still keeps below its stability limit
    fd = make_window(model="cahn-hilliard", L=32, m=20.0, dt=0.001)
    assert fd.set_parameter("dim", 3)
    q = fd.model.params
    assert q.integrator == "finite-difference" and q.dt <= fd_stable_dt(3, q.dx, q.m, q.b, q.u, q.K)


# ---- 23: the highlight of changed cells at many steps a frame -------------------------------------------------
def _spin_and_flip_pixels(window):
    from gui_helpers import cell_centres_2d, expected_rgb, pixels_at
    L = window.model.L
    image = window.capture("view")
    colours = pixels_at(image, window.field_view.world_to_canvas(cell_centres_2d(L)))
    spin = expected_rgb([0, 1])
    flipped = [c for c in expected_rgb([2, 3])]
    is_spin = (np.abs(colours[:, None, :] - spin[None]).max(axis=2) <= 3).any(axis=1)
    is_flip = (np.abs(colours[:, None, :] - np.asarray(flipped)[None]).max(axis=2) <= 3).any(axis=1)
    return is_spin.sum(), is_flip.sum()


def test_many_steps_a_frame_draw_the_spins_and_the_key_says_the_highlight_is_left_out(make_window, qtbot):
    window = make_window(L=16, T=3.0, seed=4)      # hot: a step flips many spins
    window.controls.steps_per_frame.setValue(200)  # as a GPU frame at auto: many sweeps in one frame
    done = []
    window.run_steps(200, then=lambda: done.append(True))
    qtbot.waitUntil(lambda: bool(done), timeout=60000)
    assert window.model.step_count == 200
    spins, flipped = _spin_and_flip_pixels(window)
    assert flipped == 0 and spins == 16 * 16, (spins, flipped)
    assert any("changed cells" in label for label in window.legend_overlay.labels), window.legend_overlay.labels
    assert not any(label.startswith("flipped") for label in window.legend_overlay.labels)

    window.step_once()                             # one step a frame: its flips are highlighted again
    qtbot.waitUntil(lambda: window.model.step_count == 201, timeout=30000)
    spins, flipped = _spin_and_flip_pixels(window)
    assert flipped > 0 and spins + flipped == 16 * 16
    assert not any("changed cells" in label for label in window.legend_overlay.labels)


# ---- 24: a typed value is logged once ---------------------------------------------------------------------------
def test_a_value_typed_and_entered_is_logged_once(make_window, qtbot):
    from gui_helpers import activate
    from PySide6.QtTest import QTest

    window = make_window(L=16, T=2.0)
    activate(qtbot, window)
    panel = window.log_panel
    for name, text, said in (("T", "2.5", "T = 2.5"), ("seed", "7", "seed = 7")):
        before = len(panel.messages())
        box = window.controls.field(name).text_box()
        box.setFocus()
        qtbot.waitUntil(box.hasFocus, timeout=5000)
        box.selectAll()
        QTest.keyClicks(box, text)
        QTest.keyClick(box, QtCore.Qt.Key.Key_Return)
        window.lattice_canvas.native.setFocus()        # the box loses the focus: Qt says editing finished again
        qtbot.waitUntil(lambda: not box.hasFocus(), timeout=5000)
        qtbot.wait(50)
        logged = [m[2] for m in panel.messages()[before:]]
        assert len([m for m in logged if m.startswith(said)]) == 1, logged
    assert window.runner.params.T == 2.5 and window.runner.params.seed == 7


# ---- 24: the Spectrum dock offers only what applies -----------------------------------------------------------
def test_the_spectrum_dock_offers_cluster_sizes_and_the_iso_slider_only_where_they_apply(make_window, qtbot):
    from latticelab.app.spectral_panel import SpectralPanel

    window = make_window(model="cahn-hilliard", L=32)
    panel = window.findChild(SpectralPanel)
    panel.show()
    panel.raise_()
    qtbot.wait(50)
    offered = lambda: (panel.iso_slider.isVisible(), panel.clusters_box.isVisible())   # noqa: E731
    assert panel.refresh(force=True), panel.last_error
    assert offered() == (False, False)                  # 2D Cahn-Hilliard: no iso value, no clusters
    assert window.switch_model("ising") and window.set_parameter("L", 16)
    assert panel.refresh(force=True), panel.last_error
    assert offered() == (False, True)                   # 2D Ising: clusters, no iso value
    assert window.set_parameter("dim", 3) and window.set_parameter("L", 8)
    assert panel.refresh(force=True), panel.last_error
    assert offered() == (True, True)


# ---- 24: About the model shows its text rendered, not its reST ------------------------------------------------
def test_about_the_model_renders_the_docstrings_markup(make_window, qtbot):
    from gui_helpers import answer_next_dialog
    from latticelab.sim.models import model_names

    window = make_window(L=16)
    for name in model_names():
        assert window.switch_model(name), window.last_error
        found = []
        answer_next_dialog(qtbot, "OK", found)
        window.model_help_action.trigger()             # the dialog a user opens (Help > About the ...)
        assert found, "no dialog"
        document = QtGui.QTextDocument()
        document.setHtml(found[0])
        shown = document.toPlainText()
        assert "``" not in shown, shown
        assert type(window.model).title in shown
        assert "<code>" in found[0]                    # the docstring's literals, set as code


# ---- 10: running statistics and exported plot data do not pool different parameters ---------------------------
def test_a_parameter_change_restarts_the_running_mean_marks_the_plots_and_splits_the_export(
        make_window, qtbot, tmp_path):
    from latticelab.render.plots import PLOT_BACKGROUND, SEGMENT_MARK, mean_text
    from latticelab.sim import export

    from gui_helpers import on_screen

    window = make_window(L=16, T=2.25, seed=5)
    qtbot.waitUntil(lambda: window.plots is not None and window.plots.built, timeout=30000)

    def run(steps):
        done = []
        window.run_steps(steps, then=lambda: done.append(True))
        qtbot.waitUntil(lambda: bool(done), timeout=60000)

    run(40)
    assert window.set_parameter("T", 1.5)
    run(40)
    assert window.set_parameter("algorithm", "wolff")
    run(30)
    times, values = window.runner.history.arrays()
    assert len(times) == 111                        # one record at the start and one a step: nothing thinned
    # the title's mean is that of the last 30 steps (Wolff at T = 1.5) only
    plots = window.plots
    energy = next(s for s in plots.series if s.key == "energy")
    assert energy.average
    title = plots.titles["energy"].text
    assert title == f"{energy.title} {mean_text(values['energy'][-30:])}", title
    assert title != f"{energy.title} {mean_text(values['energy'])}"
    # a line marks where the parameters last changed, in every plot
    window.plot_dock.raise_()
    window.plot_canvas.update()
    qtbot.waitUntil(lambda: not getattr(window.plot_canvas, "stale", False), timeout=10000)
    image = on_screen(window.plot_canvas)
    alpha = SEGMENT_MARK[3]
    mark = np.round((alpha * np.asarray(SEGMENT_MARK[:3]) + (1 - alpha) * np.asarray(PLOT_BACKGROUND[:3])) * 255)
    assert (np.abs(image - mark).max(axis=2) <= 24).sum() > 20, "no segment mark drawn"

    # the export numbers the segments and names each one's parameters
    path = window.recording.export_data(tmp_path / "plots.csv", confirm=False)
    comment, columns = export.read_series_csv(path)
    assert columns["segment"].tolist() == [1] * 41 + [2] * 40 + [3] * 30
    assert "segment 1 from step 0: T=2.25" in comment and "algorithm=metropolis" in comment
    assert "segment 2 from step 41: T=1.5" in comment and "segment 3 from step 81: T=1.5" in comment
    assert comment.endswith("algorithm=wolff"), comment


# ---- 24: dock tabs show their whole names -----------------------------------------------------------------------
def test_dock_tabs_show_their_whole_names(make_window, qtbot):
    window = make_window(model="cahn-hilliard", L=32, size=(1400, 860))   # five tabs: more than fit

    def bars():
        return [bar for bar in window.findChildren(QtWidgets.QTabBar) if bar.isVisible() and bar.count() > 1]

    qtbot.waitUntil(lambda: any("Coarsening" in [b.tabText(i) for i in range(b.count())] for b in bars()),
                    timeout=20000)
    qtbot.wait(200)
    names = []
    for bar in bars():
        for i in range(bar.count()):
            names.append(bar.tabText(i))
            # a tab narrower than it asks for has its name cut ("Gra...")
            assert bar.tabRect(i).width() >= bar.tabSizeHint(i).width(), \
                f"tab {bar.tabText(i)!r} is {bar.tabRect(i).width()} px wide, asks for {bar.tabSizeHint(i).width()}"
    assert "Graph" in names and "Study" in names and "Coarsening" in names, names
