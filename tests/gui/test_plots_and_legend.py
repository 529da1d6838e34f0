"""What the window says about what it shows (under Xvfb): the colour key over the lattice (its swatches in the
palette colours, in the rendered pixels; hidden by the View menu), the highlight's contrast on screen, the cell
under the mouse in the status bar, labelled live plots (units, log axes, a hint before data, the running mean
with its error, the sample under the mouse) and the Spectrum dock computing off the GUI thread.

Two windows (Ising 2D and Cahn-Hilliard) are built once for the module: a window takes seconds to build on a
2-core machine; each test puts the window into the state it needs.
"""
from __future__ import annotations

import threading

import numpy as np
from latticelab.sim.backend import to_numpy  # model arrays may be CuPy (LATTICELAB_GUI_BACKEND=cuda)
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtCore, QtGui, QtWidgets  # noqa: E402

from gui_helpers import pixels_at  # noqa: E402
from latticelab.app import spectral_panel  # noqa: E402
from latticelab.render.spectral import HIST_COLOUR, HIST_DOWN_COLOUR  # noqa: E402
from latticelab.sim.models import get_model  # noqa: E402
from latticelab.sim.models.ising import picture as ising  # noqa: E402
from latticelab.sim.picture import palette_bytes  # noqa: E402


def _window(qapp, model, params):
    from latticelab.app.main_window import MainWindow

    window = MainWindow(model, params, interactive=False, backend="numpy")
    window.resize(1100, 760)
    window.show()
    window.set_running(False)
    for _ in range(20):
        qapp.processEvents()
    return window


@pytest.fixture(scope="module")
def ising_window(qapp):
    window = _window(qapp, "ising", {"dim": 2, "L": 32, "T": 2.2, "seed": 5})
    yield window
    window.timer.stop()
    window.close()
    window.deleteLater()
    qapp.processEvents()


@pytest.fixture(scope="module")
def ch_window(qapp):
    window = _window(qapp, "cahn-hilliard", dict(get_model("cahn-hilliard").small_example))
    yield window
    window.timer.stop()
    window.close()
    window.deleteLater()
    qapp.processEvents()


def run(qtbot, window, steps: int) -> None:
    done = []
    window.run_steps(steps, then=lambda: done.append(True))
    qtbot.waitUntil(lambda: bool(done), timeout=30000)


def centre(rect) -> np.ndarray:
    x, y, w, h = rect
    return np.array([[x + w / 2, y + h / 2]])


def cell_pixels(window, cells) -> np.ndarray:
    """Rendered RGB at the centres of cells given as (row, column) pairs."""
    cells = np.asarray(cells)
    world = np.column_stack([cells[:, 1] + 0.5, cells[:, 0] + 0.5])
    return pixels_at(window.capture("view"), window.field_view.world_to_canvas(world))


def outside(rect, canvas_xy) -> np.ndarray:
    x, y, w, h = rect
    return ~((canvas_xy[:, 0] >= x - 1) & (canvas_xy[:, 0] <= x + w + 1) &
             (canvas_xy[:, 1] >= y - 1) & (canvas_xy[:, 1] <= y + h + 1))


# ---- the colour key ------------------------------------------------------------------------------
def test_the_key_shows_each_kind_of_cell_in_its_palette_colour_and_can_be_hidden(ising_window, qtbot):
    window = ising_window
    window.step_once()                                  # flipped cells: the highlight entries appear
    overlay = window.legend_overlay
    assert window.legend_action.isChecked()
    swatches = overlay.swatches
    assert [label for label, _, _ in swatches] == ["spin down", "spin up", "flipped to down", "flipped to up"]
    image = window.capture("view")
    colours = palette_bytes(window.picture().palette)
    for label, code, rect in swatches:
        got = pixels_at(image, centre(rect))[0]
        assert np.abs(got - colours[code][:3].astype(int)).max() <= 2, f"{label}: {got} != {colours[code][:3]}"
    # the key sits beside the lattice when there is room: it covers no cell
    assert overlay.overlap_with_cells() == 0
    window.legend_action.trigger()                       # View > Show colour key, off
    assert not window.legend_action.isChecked()
    hidden = window.capture("view")
    label, code, rect = swatches[2]                      # the blue swatch: nothing blue is left there
    assert np.abs(pixels_at(hidden, centre(rect))[0] - colours[code][:3].astype(int)).max() > 40
    window.legend_action.trigger()
    assert overlay.node.visible


def test_highlighted_cells_stand_out_on_screen_against_both_spin_colours(ising_window, qtbot):
    window = ising_window
    window.step_once()
    codes = window.picture().codes()
    flipped = np.argwhere(codes & ising.FLIPPED)
    plain_up, plain_down = np.argwhere(codes == ising.SPIN_UP), np.argwhere(codes == 0)
    assert len(flipped) and len(plain_up) and len(plain_down)
    image = window.capture("view")
    panel = window.legend_overlay.panel

    def rendered(cells):
        world = np.column_stack([cells[:, 1] + 0.5, cells[:, 0] + 0.5])
        xy = window.field_view.world_to_canvas(world)
        return pixels_at(image, xy[outside(panel, xy)])

    def luminance(rgb):
        c = np.asarray(rgb, float) / 255
        linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return linear @ [0.2126, 0.7152, 0.0722]

    up, down = rendered(plain_up)[0], rendered(plain_down)[0]
    for cell_code in (ising.FLIPPED, ising.FLIPPED | ising.SPIN_UP):
        cells = np.argwhere(codes == cell_code)
        if not len(cells):
            continue
        for pixel in rendered(cells):
            for spin in (up, down):
                hi, lo = sorted((luminance(pixel), luminance(spin)), reverse=True)
                assert (hi + 0.05) / (lo + 0.05) >= 3.0, f"highlight {pixel} on spin {spin}"


# ---- the cell under the mouse ----------------------------------------------------------------------
def test_the_status_bar_names_the_cell_under_the_mouse_and_its_spin(ising_window, qtbot):
    window = ising_window
    label = window.statusBar().findChild(QtWidgets.QLabel, "status_hover")
    spins = to_numpy(window.model.spins)
    for row, column in ((9, 5), (0, 31), (20, 13)):
        xy = window.field_view.world_to_canvas([[column + 0.5, row + 0.5]])[0]
        point = QtCore.QPoint(int(xy[0]), int(xy[1]))
        expected = f"x={column}  y={row}   spins={int(spins[row, column]):+d}"

        def hovered(point=point, expected=expected) -> bool:
            # The move is sent to the canvas itself and the readout read at once, again at each look (waitUntil
            # looks every 10 ms or more: VisPy drops a move within 10 ms of the last one it took). The CI's test
            # processes share one X display, where another process's window appearing under the pointer sends
            # this canvas a leave event that clears the readout; qtbot.mouseMove processes pending events after
            # the move (such a leave among them) and Qt drops a synthetic move to where the pointer already is:
            # with twelve processes on the GPU machine the readout stayed empty for 15 s
            canvas = window.lattice_canvas.native
            move = QtGui.QMouseEvent(QtCore.QEvent.Type.MouseMove, QtCore.QPointF(point),
                                     QtCore.QPointF(canvas.mapToGlobal(point)), QtCore.Qt.MouseButton.NoButton,
                                     QtCore.Qt.MouseButton.NoButton, QtCore.Qt.KeyboardModifier.NoModifier)
            QtWidgets.QApplication.sendEvent(canvas, move)
            return label.text() == expected

        qtbot.waitUntil(hovered, timeout=15000)
    outside_cells = window.field_view.world_to_canvas([[-3.0, 10.0]])[0]
    assert window.hover_readout.show_cell_at(outside_cells) == "" and label.text() == ""


def test_cells_are_found_in_the_unfolded_grid_and_not_in_the_block(qapp):
    from helpers import scene_canvas
    from latticelab.render.field_view import FieldView
    from latticelab.render.unfold import UnfoldLayout

    canvas = scene_canvas(300)
    view = FieldView(canvas.central_widget.add_view())
    L = 8
    spins = np.where(np.random.default_rng(1).random((L, L, L)) < 0.5, 1, -1).astype(np.int8)
    view.show(ising.ising_picture(np, spins))
    view.set_mode_3d("unfold")
    cells = np.array([[0, 0, 0], [3, 2, 7], [7, 7, 7], [5, 1, 4]])
    world = UnfoldLayout(L).unfold_positions(cells) + 0.5
    for cell, xy in zip(cells, view.world_to_canvas(world)):
        assert view.cell_at(xy) == tuple(cell)
    gap = UnfoldLayout(L).tile_origin(1)[0] - 0.5          # between the first two tiles
    assert view.cell_at(view.world_to_canvas([[gap, 3.5]])[0]) is None
    view.set_mode_3d("cube")
    assert view.cell_at(view.world_to_canvas([[4.0, 4.0, 8.0]])[0]) is None
    canvas.close()


# ---- the live plots ---------------------------------------------------------------------------
def test_plots_are_labelled_with_units_wait_for_data_and_average(ising_window, qtbot):
    window = ising_window
    window.reset()
    plots = window.plots
    assert plots.x_axis.axis.axis_label == "step"
    assert plots.y_axes["energy"].axis.axis_label == "energy per spin [J]"
    # after a reset the runner has recorded the initial state only: one energy, no standard deviation yet
    assert len(window.runner.history) == 1
    assert plots.hints["energy_std"].visible and plots.hints["energy_std"].text == "waiting for data"
    assert plots.y_axes["energy_std"].axis.ticker.blank
    assert not plots.hints["energy"].visible and not plots.y_axes["energy"].axis.ticker.blank
    assert plots.readout_at((5.0, 5.0)) is None
    run(qtbot, window, 20)
    assert not plots.hints["energy_std"].visible and not plots.y_axes["energy_std"].axis.ticker.blank
    title = plots.titles["energy"].text
    assert title.startswith("energy per spin [J] = ") and " +/- " in title
    assert "+/-" not in plots.titles["abs_magnetisation"].text          # not an averaged observable
    # the sample under the mouse: put the mouse on the 15th point of the energy line
    times, values = window.runner.history.arrays()
    k = 14
    data_xy = np.array([[times[k] - times[0], values["energy"][k]]])
    mapped = plots.lines["energy"].get_transform("visual", "canvas").map(data_xy)
    xy = mapped[0, :2] / mapped[0, 3]
    text = window.hover_readout.show_plot_at(xy)
    assert text == f"energy per spin [J]: step {times[k]:.6g}, {values['energy'][k]:.6g}"


def test_scalar_fields_get_a_colour_bar_log_axes_and_a_value_readout(ch_window, qtbot):
    window = ch_window
    run(qtbot, window, 3)
    overlay = window.legend_overlay
    assert overlay.colour_bar.label == "concentration phi" and overlay.labels[0] == "concentration phi"
    x, y, w, h = overlay.bar
    image = window.capture("view")
    colours = palette_bytes(window.picture().palette)[:, :3].astype(int)
    # the bar runs through the palette's colormap, its highest value at the top: each pixel row is the colour of
    # the level at its height (within one level: a row spans about two)
    rows = np.linspace(y + 1.5, y + h - 1.5, 9)
    got = pixels_at(image, np.column_stack([np.full(len(rows), x + w / 2), rows]))
    levels = np.clip(((y + h - rows) / h * 254).astype(int), 0, 253)
    for pixel, level in zip(got, levels):
        nearby = colours[max(level - 1, 0):level + 2]
        assert np.abs(nearby - pixel).max(axis=1).min() <= 3, f"bar pixel {pixel} is not colormap level {level}"
    plots = window.plots
    assert plots.x_axis.axis.axis_label == "simulated time"
    assert plots.y_axes["length"].axis.ticker.log and plots.y_axes["length"].axis.axis_label.endswith("(log)")
    assert not plots.y_axes["mass"].axis.ticker.log
    phi = window.model.phi
    xy = window.field_view.world_to_canvas([[3.5, 6.5]])[0]
    assert window.hover_readout.show_cell_at(xy) == f"x=3  y=6   phi={float(phi[6, 3]):.4g}"


# ---- the spectrum dock ------------------------------------------------------------------------
def _spectrum_on_screen(window, qtbot):
    panel = window.spectral_panel
    panel.show()
    panel.raise_()
    qtbot.waitUntil(panel.on_screen, timeout=15000)
    qtbot.waitUntil(lambda: not panel.computing, timeout=30000)
    return panel


def test_the_spectrum_is_computed_off_the_gui_thread_one_job_at_a_time(ising_window, qtbot, monkeypatch):
    window = ising_window
    panel = _spectrum_on_screen(window, qtbot)
    release, entered, workers = threading.Event(), threading.Event(), []
    real = spectral_panel.compute

    def held(job):   # the worker waits until the test lets it go: a computation as slow as we like
        workers.append(threading.current_thread())
        entered.set()
        release.wait(timeout=60)
        return real(job)

    monkeypatch.setattr(spectral_panel, "compute", held)
    release.set()              # until the test's own job: jobs begun by showing the dock pass
    ticks = []
    timer = QtCore.QTimer(interval=5)
    timer.timeout.connect(lambda: ticks.append(1))
    try:
        panel.timer.stop()        # the test starts the job itself, for the step it knows
        run(qtbot, window, 2)
        qtbot.waitUntil(lambda: not panel.computing, timeout=30000)   # a job the dock's showing may have begun
        release.clear()
        entered.clear()
        workers.clear()
        started = panel.jobs_started
        assert panel.request(force=True), (panel.on_screen(), panel.busy(), panel.computing)
        timer.start()
        qtbot.waitUntil(lambda: entered.is_set() and len(ticks) >= 5, timeout=10000)   # the GUI thread runs on
        assert panel.computing
        qtbot.waitUntil(lambda: window.statusBar().currentMessage() == spectral_panel.BUSY_TEXT, timeout=15000)
        assert not panel.request(force=True) and panel.jobs_started == started + 1     # one job in flight
        release.set()
        qtbot.waitUntil(lambda: not panel.computing, timeout=30000)
    finally:
        release.set()
        timer.stop()
        panel.timer.start()
    assert workers[0] is not threading.main_thread()
    assert f"step {window.model.step_count} " in panel.info.text()
    assert window.statusBar().currentMessage() != spectral_panel.BUSY_TEXT


def test_the_spectrum_axes_start_at_zero_the_histogram_has_a_key_and_the_step_is_the_status_bars(
        ising_window, qtbot):
    window = ising_window
    panel = _spectrum_on_screen(window, qtbot)
    run(qtbot, window, 3)
    assert panel.refresh(force=True), panel.last_error
    assert panel.mean_plot.view.camera.rect.bottom == 0.0
    assert panel.hist_plot.view.camera.rect.bottom == 0.0
    assert list(panel.hist_plot.key.text) == ["up", "down"]
    np.testing.assert_allclose(np.asarray(panel.hist_plot.key.color.rgba)[:, :3],
                               [HIST_COLOUR[:3], HIST_DOWN_COLOUR[:3]], atol=1e-6)   # the lines' colours
    status_step = window.status_labels["step"].text()
    assert status_step == f"step {window.model.step_count:,}"
    assert f"step {window.model.step_count} " in panel.info.text()
    window.plot_dock.raise_()
