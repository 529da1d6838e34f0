"""The spectral dock in the real main window (under Xvfb): iso slider, 2D image, rewired dims, export."""
import numpy as np
from latticelab.sim.backend import to_numpy  # model arrays may be CuPy (LATTICELAB_GUI_BACKEND=cuda)
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from latticelab.render.isosurface import SpectrumIsoView  # noqa: E402
from latticelab.render.spectral import display_image  # noqa: E402
from latticelab.sim.analysis import spectral  # noqa: E402
from latticelab.sim.analysis.marching_cubes import marching_cubes  # noqa: E402
from spectral_helpers import main_cell_pixels, open_window, settled  # noqa: E402


def test_iso_slider_in_the_window_changes_the_mesh(qtbot):
    window, panel = open_window(qtbot, dim=3, L=32, T=4.3)
    view = panel._spectrum_view
    assert isinstance(view, SpectrumIsoView)
    panel.iso_slider.setValue(80)                          # 0.08 of the maximum: a large surface
    # on a software renderer the new mesh reaches the screen in slices, a few ticks later (render/isosurface.py)
    qtbot.waitUntil(lambda: settled(panel), timeout=20000)
    low_faces = view.mesh.n_faces
    low = main_cell_pixels(panel)
    reference = marching_cubes(view.volume, 0.08, method="skimage")
    assert low_faces == reference.n_faces > 0              # the mesh shown is the one of this iso value
    panel.iso_slider.setValue(700)                         # 0.7: only the strongest modes remain
    qtbot.waitUntil(lambda: settled(panel), timeout=20000)
    high_faces = view.mesh.n_faces
    high = main_cell_pixels(panel)
    assert 0 < high_faces < low_faces
    changed = np.any(np.abs(low - high) > 30, axis=-1).mean()
    assert changed > 0.01, f"only {changed:.4f} of the view's pixels changed"
    # the surface colour covers fewer pixels once the weaker layers are peeled away
    warm = lambda im: ((im[..., 0] > 60) & (im[..., 0] > im[..., 2] + 20)).mean()  # noqa: E731
    assert warm(high) < warm(low)
    assert panel.iso_label.text() == "iso 0.700"
    assert view.label.text.startswith("edge ")


def test_2d_spectrum_image_matches_the_model_spins(qtbot):
    window, panel = open_window(qtbot, dim=2, L=64, T=2.2)
    expected = display_image(spectral.fft_magnitude(to_numpy(window.model.spins)))
    np.testing.assert_allclose(panel._spectrum_view.displayed, expected, atol=1e-6)
    assert not panel.iso_slider.isEnabled()
    pixels = main_cell_pixels(panel)
    assert pixels.std() > 5                                # a real greyscale picture, not a blank cell
    h, w = pixels.shape[:2]
    centre = pixels[h // 4:3 * h // 4, w // 2 - h // 4:w // 2 + h // 4]   # inside the square image
    assert np.abs(centre[..., 0] - centre[..., 2]).max() <= 2              # greyscale
    assert centre.std() > 5
    sm = spectral.spherical_mean(spectral.fft_magnitude(to_numpy(window.model.spins)))
    np.testing.assert_allclose(panel.mean_plot.data[1], sm.mean, rtol=1e-6)


def test_views_follow_the_rewired_dimensions_and_the_average(qtbot):
    window, panel = open_window(qtbot, dim=3, L=16, T=4.5)
    assert window.set_parameter("p", 0.05) and window.set_parameter("rewire_dims", "x")
    assert window.model.rewire_dims == "x"
    assert panel.refresh()
    assert "rewire_dims=x" in panel.info.text()
    panel.average_box.setChecked(True)
    for _ in range(3):
        window.model.step(1)
        panel.refresh()
    assert panel.accumulator.count == 4
    window.set_parameter("rewire_dims", "xy")
    panel.refresh()
    assert panel.accumulator.count == 1 and "rewire_dims=xy" in panel.info.text()
    hist = panel.hist_plot.data
    assert hist[1].sum() + hist[2].sum() > 0


def test_exports_reload_equal_and_never_overwrite(qtbot, tmp_path):
    window, panel = open_window(qtbot, dim=2, L=32, T=2.2)
    record = panel.record()
    npz = panel.export("npz", tmp_path / "spec.npz")
    back = spectral.load_npz(npz)
    np.testing.assert_array_equal(back.mean, record.mean)
    np.testing.assert_array_equal(back.spherical.mean, record.spherical.mean)
    assert back.metadata["L"] == 32 and back.metadata["rewire_dims"] == window.model.rewire_dims
    csv = panel.export("spherical-csv", tmp_path / "radial")   # the suffix is added
    assert csv.name == "radial.csv"
    np.testing.assert_array_equal(spectral.load_spherical_csv(csv).mean, record.spherical.mean)
    before = npz.read_bytes()
    window.model.step(1)
    panel.refresh()
    second = panel.export("npz", npz)                           # not interactive: a free name, no question
    assert second != npz and second.name == "spec-1.npz"
    assert npz.read_bytes() == before


def test_panel_is_idle_behind_the_plots_tab_and_catches_up_when_shown(qtbot):
    window, panel = open_window(qtbot, dim=2, L=32)
    window.plot_dock.raise_()
    qtbot.waitUntil(lambda: not panel.on_screen(), timeout=15000)
    window.model.step(3)
    assert not panel.refresh(force=True), "computed while hidden behind the plots tab"
    panel.raise_()
    qtbot.waitUntil(lambda: panel._shown_step == window.model.step_count, timeout=15000)


def test_panel_leaves_the_lattice_most_of_the_window(qtbot):
    window, panel = open_window(qtbot, dim=3, L=16)
    window.resize(1400, 860)
    qtbot.wait(50)
    assert panel.minimumSizeHint().width() < 700


def test_a_new_spectrum_redraws_its_plots_and_view_and_shows_what_a_full_draw_shows(qtbot):
    """The dock's canvas keeps its picture (render/cached_canvas.py): a new result marks the plots' data parts
    stale (not their titles), the spectrum view is redrawn at every draw without being marked, and what the
    widget paints equals a full draw of the scene."""
    from gui_helpers import on_screen
    window, panel = open_window(qtbot, dim=2, L=64, T=2.2)
    canvas = panel.canvas
    canvas.budget_s = None                    # every stale region in one draw
    first = on_screen(canvas)

    def differing(a, b):
        return float((np.abs(a - b).max(axis=2) > 8).mean())

    assert differing(first, canvas.render(alpha=False).astype(int)) < 0.0005
    assert not canvas.stale
    on_screen(canvas)
    assert canvas.last_draw == {"full": False, "regions": 1}          # the spectrum view only
    canvas.native.setUpdatesEnabled(False)    # no paint until the stale parts are looked at
    try:
        window.model.step(200)
        assert panel.refresh(force=True), panel.last_error
        stale = set(canvas._stale)
    finally:
        canvas.native.setUpdatesEnabled(True)
    assert set(panel.mean_plot.data_parts) <= stale
    assert panel.mean_plot.title not in stale and panel.main_cell not in stale
    picture = on_screen(canvas)
    assert not canvas.last_draw["full"] and canvas.last_draw["regions"] >= len(stale)
    assert differing(picture, first) > 0.001                        # the new spectrum is on screen
    assert differing(picture, canvas.render(alpha=False).astype(int)) < 0.0005
