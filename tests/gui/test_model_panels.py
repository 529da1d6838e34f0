"""The model analysis docks in the real main window (under Xvfb): the Signal dock of the cortex (EEG trace drawn,
qEEG numbers equal to sim/analysis/qeeg.py on the same trace, a click on the lattice picks a neuron, Boost
changes the effective parameters and ends by itself), the Coarsening dock of Cahn-Hilliard (the fitted exponent,
the 3D interface from a worker thread), and both hidden for the Ising model."""
from __future__ import annotations

import numpy as np
from latticelab.sim.backend import to_numpy  # model arrays may be CuPy (LATTICELAB_GUI_BACKEND=cuda)
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from latticelab.app.coarsening_panel import coarsening_exponent, interface_mesh  # noqa: E402
from latticelab.render.signal_plots import EEG_COLOUR  # noqa: E402
from latticelab.sim.analysis import qeeg  # noqa: E402
from latticelab.sim.models import get_model  # noqa: E402

SMALL_CORTEX = {"L": 16, "k": 10, "r": 4}


def colour_pixels(image: np.ndarray, rgba, tolerance: int = 12) -> int:
    target = np.round(np.asarray(rgba[:3]) * 255).astype(int)
    return int((np.abs(image[..., :3].astype(int) - target).max(axis=-1) <= tolerance).sum())


def cortex_window(make_window, qtbot):
    """An Ising window (no signal, no coarsening: both docks hidden) switched to a small cortex (as a user does,
    through switch_model)."""
    window = make_window()
    qtbot.wait(20)
    assert not window.signal_panel.isVisible() and not window.coarsening_panel.isVisible()
    cortex = get_model("cortex")
    window.prefs.set_model_values("cortex", cortex.Params.create(**SMALL_CORTEX))
    assert window.switch_model("cortex")
    assert window.model.shape == (16, 16)
    # the dock's canvas comes a paint of the window after the dock (app/analysis_dock.py CANVAS_AFTER_DOCK_MS)
    qtbot.waitUntil(lambda: window.signal_panel.on_screen() and window.signal_panel.canvas.native.isVisible(),
                    timeout=15000)
    return window


def test_signal_dock_redraws_a_budget_at_a_time_and_ends_with_the_whole_picture(make_window, qtbot):
    """The Signal dock's canvas keeps its picture (render/cached_canvas.py): a refresh redraws its plots' parts a
    budget's worth per paint, each paint asking for the next, and what is finally on screen is what a whole draw
    of the scene gives."""
    from gui_helpers import on_screen
    window = cortex_window(make_window, qtbot)
    panel = window.signal_panel
    window.runner.advance(1100)
    assert panel.refresh(force=True)
    canvas = panel.canvas
    assert canvas.caching is not False and canvas.stale
    canvas.budget_s = 0.0                       # one region per paint
    paints = 0
    while canvas.stale and paints < 200:
        shown = on_screen(canvas)
        assert canvas.last_draw["regions"] <= 1 and not canvas.last_draw.get("full")
        paints += 1
    assert paints > 4 and not canvas.stale
    whole = canvas.render(alpha=False)[..., :3].astype(int)
    assert colour_pixels(shown, EEG_COLOUR) > 100
    assert float((np.abs(shown - whole).max(axis=2) > 8).mean()) < 0.001


def test_signal_dock_first_shown_lays_its_grids_out_over_paints_then_draws_the_whole_picture(make_window, qtbot,
                                                                                            monkeypatch):
    """The dock's first paint at its size on screen lays its plots' grids out (about 30 ms for five on llvmpipe):
    with a budget that is spread over paints too, a grid or more per paint, before the picture is drawn a region
    or more per paint; what ends on screen is what a whole draw gives."""
    from gui_helpers import on_screen
    from latticelab.app import dock_canvas
    monkeypatch.setattr(dock_canvas, "DOCK_DRAW_BUDGET_S", 0.0)    # one grid, then one region, per paint
    window = cortex_window(make_window, qtbot)
    canvas = window.signal_panel.canvas
    kinds = []
    canvas.events.draw.connect(lambda event: kinds.append(
        "layout" if canvas.last_draw.get("laying out") else "regions"), position="last")
    qtbot.waitUntil(lambda: not canvas.stale and window.signal_panel._drawn is not None, timeout=20000)
    assert kinds.count("layout") >= 2 and "regions" in kinds   # (paints before this hook may have laid out too)
    shown = on_screen(canvas)
    whole = canvas.render(alpha=False)[..., :3].astype(int)
    assert float((np.abs(shown - whole).max(axis=2) > 8).mean()) < 0.001


def test_signal_dock_draws_the_eeg_and_its_qeeg(make_window, qtbot):
    window = cortex_window(make_window, qtbot)
    panel = window.signal_panel
    assert not window.coarsening_panel.isVisible()
    panel.refresh(force=True)
    before = colour_pixels(panel.canvas.render(alpha=False), EEG_COLOUR)
    window.runner.advance(1100)          # > 1024 samples: the first periodogram
    assert panel.refresh(force=True)
    image = panel.canvas.render(alpha=False)
    assert before == 0 and colour_pixels(image, EEG_COLOUR) > 100
    trace = window.model.trace(since=0)
    freqs, psd = qeeg.periodogram(trace[:, 1])
    expected = qeeg.metrics(freqs, psd)
    assert panel.record.metrics == pytest.approx(expected, rel=1e-9)
    np.testing.assert_allclose(panel.spectrum_plot.data[1], np.log10(psd[(freqs <= 100) & (psd > 0)]))
    table = {panel.metrics_table.item(r, 0).text(): panel.metrics_table.item(r, 1).text()
             for r in range(panel.metrics_table.rowCount())}
    assert table["peak frequency"] == f"{expected['ppf']:.2f} Hz"
    assert table["spectral entropy"] == f"{expected['sen']:.3f}"
    assert table["alpha 7-13 Hz"] == f"{expected['alpha']:.1%}"
    # firing rates in Hz per neuron: the fraction firing per 1 ms step times 1000
    t, series = panel.rate_plot.data
    np.testing.assert_allclose(series[0], trace[-len(t):, 2] * 1000.0)
    assert panel.last_error == ""
    # back to the Ising model: no signal, no dock
    assert window.switch_model("ising")
    qtbot.waitUntil(lambda: not panel.isVisible(), timeout=15000)
    assert not window.coarsening_panel.isVisible()


def test_click_picks_a_neuron_and_boost_changes_the_effective_parameters(make_window, qtbot):
    from PySide6 import QtCore

    window = cortex_window(make_window, qtbot)
    panel = window.signal_panel
    # a click on the lattice picks the neuron under it
    row, column = 5, 3
    x, y = window.field_view.world_to_canvas(np.array([[column + 0.5, row + 0.5]]))[0]
    qtbot.mouseClick(window.lattice_canvas.native, QtCore.Qt.MouseButton.LeftButton,
                     pos=QtCore.QPoint(int(x), int(y)))
    index = row * 16 + column
    qtbot.waitUntil(lambda: window.model.probe == index, timeout=15000)
    window.runner.advance(20)
    panel.refresh(force=True)
    info = window.model.probe_info(index)
    text = panel.probe_info.text()
    assert f"index = {index}" in text and f"type = {info['type']}" in text and f"delay = {info['delay']}" in text
    assert panel.tabs.tabText(1) == "Neuron"
    t, series = panel.probe_plot.data
    assert len(t) == 20                               # only the samples since the pick
    assert series["probe"][-1] == pytest.approx(info["v"])
    # Boost: applied through the window's parameter path, shown as the effective boost input, ended after 50 steps
    assert panel.effective_text()["boost (mean input)"] == ("10", "0")
    assert panel.impulse_button.isVisible() and panel.impulse_button.text() == "Boost"
    qtbot.mouseClick(panel.impulse_button, QtCore.Qt.MouseButton.LeftButton)
    assert window.model.params.boost_fraction == 0.1 and panel.impulse_active
    assert panel.effective_text()["boost (mean input)"] == ("10", "1")
    window.runner.advance(49)
    qtbot.wait(30)
    assert window.model.params.boost_fraction == 0.1           # still on: 50 steps
    window.runner.advance(1)
    qtbot.waitUntil(lambda: not panel.impulse_active, timeout=15000)
    assert window.model.params.boost_fraction == 0.0
    assert panel.effective_text()["boost (mean input)"] == ("10", "0")
    # a drug factor through the window's parameter path: the table shows the base and the effective value
    assert window.set_parameter("lambda_tau_e", 3.0)
    panel.refresh(force=True)
    assert panel.effective_text()["tau_e"] == ("10", "3.333")


def test_coarsening_exponent_of_a_power_law():
    t = np.logspace(0, 3, 300)
    fit = coarsening_exponent(t, 2.5 * t ** (1 / 3))
    assert fit.exponent == pytest.approx(1 / 3, abs=1e-9)
    assert fit.t1 == pytest.approx(1e3) and fit.t0 >= 1e2 * 0.999 and fit.decades == pytest.approx(1.0, abs=0.01)
    # only the most recent decade counts: an early transient with another slope is left out
    length = np.where(t < 100, 0.5 * t ** 0.9, 0.5 * 100 ** 0.9 * (t / 100) ** (1 / 3))
    assert coarsening_exponent(t, length).exponent == pytest.approx(1 / 3, abs=1e-6)
    assert coarsening_exponent([1.0, 2.0], [1.0, 2.0]) is None


def test_coarsening_dock_fits_and_draws(make_window, qtbot):
    window = make_window(model="cahn-hilliard", dim=2, L=16)
    panel = window.coarsening_panel
    qtbot.waitUntil(lambda: panel.isVisible(), timeout=15000)
    assert not window.signal_panel.isVisible()
    assert not panel.interface_box.isEnabled()          # 2D: no interface surface
    panel.show()
    panel.raise_()
    window.runner.advance(20)
    qtbot.waitUntil(lambda: len(panel.record.t) >= 3, timeout=15000)
    times, values = window.runner.history.arrays()
    assert panel.record.t[-1] == pytest.approx(times[-1]) and panel.record.value[-1] == values["length"][-1]
    # a synthetic Lifshitz-Slyozov series from a later time on
    t = np.logspace(1, 4, 200)
    panel.add_samples(t, 3.0 * t ** (1 / 3))
    assert panel.refresh(force=True)
    assert panel.fit.exponent == pytest.approx(1 / 3, abs=1e-6)
    assert "fitted exponent 0.333 over the last decade" in panel.info.text()
    x, y = panel.plot.data
    assert x[-1] == pytest.approx(4.0) and panel.plot.guide.visible


def test_interface_surface_lies_on_phi_zero(make_window, qtbot):
    from scipy.ndimage import map_coordinates

    window = make_window(model="cahn-hilliard", dim=3, L=16)
    panel = window.coarsening_panel
    qtbot.waitUntil(lambda: panel.isVisible(), timeout=15000)
    panel.show()
    panel.raise_()
    window.runner.advance(5)
    assert panel.interface_box.isEnabled()
    panel.interface_box.setChecked(True)
    qtbot.waitUntil(lambda: panel.job_field is not None, timeout=10000)
    mesh = panel.interface_view.mesh
    assert mesh.n_faces > 100 and panel.last_error == ""
    field = panel.job_field
    np.testing.assert_array_equal(field, to_numpy(window.model.fields()["phi"]).astype(np.float32))
    values = map_coordinates(field.astype(np.float64), mesh.vertices.T.astype(np.float64), order=1)
    assert np.abs(values).max() < 1e-5 * np.abs(field).max()
    assert "phi = 0" in panel.interface_info.text()
    # the same job function on its own: a sphere's surface at radius 5
    z, y, x = np.mgrid[0:16, 0:16, 0:16] - 7.5
    sphere = interface_mesh(np.sqrt(x * x + y * y + z * z) - 5.0, 0.0)
    radii = np.linalg.norm(sphere.vertices - 7.5, axis=1)
    assert np.abs(radii - 5.0).max() < 0.1


def test_a_long_title_changed_through_the_cache_leaves_nothing_of_the_old_one(make_window, qtbot):
    """A title wider than its cell (the firing-rate plot's, with its means) is redrawn as a region of the cached
    canvas: what is on screen afterwards is what a whole draw gives, with no piece of the old title beside it."""
    from gui_helpers import on_screen
    window = cortex_window(make_window, qtbot)
    panel = window.signal_panel
    canvas = panel.canvas
    window.runner.advance(200)
    assert panel.refresh(force=True)
    while canvas.stale:
        on_screen(canvas)
    for text in ("firing rate (Hz per cell; mean excitatory 60.1, inhibitory 66.8) and a few more words",
                 "f (Hz per cell; mean excitatory 1.0, inhibitory 2.0) and even more words to overflow its cell"):
        panel.rate_plot.title.text = text
        canvas.invalidate(panel.rate_plot.title)
        canvas.update()
        shown = on_screen(canvas)
        assert not canvas.stale and canvas.last_draw["regions"] >= 1 and not canvas.last_draw.get("full")
    whole = canvas.render(alpha=False)[..., :3].astype(int)
    assert float((np.abs(shown[..., :3].astype(int) - whole).max(axis=2) > 8).mean()) < 0.0005
