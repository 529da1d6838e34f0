"""The Spectrum dock's 3D view on a software renderer draws a new mesh in slices (render/isosurface.py
StagedPicture): the event loop runs between the slices, and the picture shown at the end is the one a direct draw
gives, pixel for pixel."""
import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtCore  # noqa: E402

from latticelab.render.isosurface import SpectrumIsoView  # noqa: E402
from spectral_helpers import main_cell_pixels, open_window  # noqa: E402

SLICE = 300      # faces a slice: a mesh of a few thousand faces takes many slices


def staged_view(qtbot):
    window, panel = open_window(qtbot, dim=3, L=32, T=4.3)
    view = panel._spectrum_view
    assert isinstance(view, SpectrumIsoView)
    view.set_staging(SLICE)
    qtbot.waitUntil(lambda: not view.staging, timeout=15000)
    return window, panel, view


class SliceLog:
    """Records, for each slice drawn, how often a 1 ms probe timer had fired by then."""

    def __init__(self, staged):
        self.fired = 0
        self.at_slices: list[int] = []
        self.probe = QtCore.QTimer(interval=1, timerType=QtCore.Qt.TimerType.PreciseTimer)
        self.probe.timeout.connect(self._fire)
        self.probe.start()
        step = staged.step

        def logged_step():
            self.at_slices.append(self.fired)
            return step()

        staged.step = logged_step

    def _fire(self):
        self.fired += 1


def test_a_new_mesh_is_drawn_in_slices_with_the_event_loop_running_between(qtbot):
    window, panel, view = staged_view(qtbot)
    log = SliceLog(view.staged)
    panel.iso_slider.setValue(80)                      # a large surface: thousands of faces
    faces = view.mesh.n_faces
    assert faces > 4 * SLICE
    assert view.staging                                # not drawn yet: the slices come on later ticks
    qtbot.waitUntil(lambda: not view.staging, timeout=20000)
    log.probe.stop()
    assert len(log.at_slices) >= faces // SLICE
    # the probe timer fired between the first and the last slice: they did not run in one go
    assert log.at_slices[-1] > log.at_slices[0]
    staged = main_cell_pixels(panel)
    view.set_staging(None)                             # the same mesh drawn directly
    direct = main_cell_pixels(panel)
    assert (direct.std(axis=(0, 1)) > 5).any()         # a real picture, not an empty cell
    np.testing.assert_array_equal(staged, direct)


def test_turning_the_view_draws_the_picture_again_in_slices(qtbot):
    window, panel, view = staged_view(qtbot)
    panel.iso_slider.setValue(80)
    qtbot.waitUntil(lambda: not view.staging, timeout=20000)
    steps, restaged = view.staged.steps, view.staged.restaged
    before = main_cell_pixels(panel)
    view.view.camera.azimuth += 40
    panel.canvas.update()
    qtbot.waitUntil(lambda: view.staged.restaged > restaged and not view.staging, timeout=20000)
    assert view.staged.steps - steps >= view.mesh.n_faces // SLICE
    turned = main_cell_pixels(panel)
    assert np.any(turned != before)
    view.set_staging(None)
    np.testing.assert_array_equal(turned, main_cell_pixels(panel))


def test_slices_follow_the_time_budget_and_give_the_same_picture(qtbot):
    """A slice that took longer than the budget makes the next ones smaller (down to MIN_STAGE_FACES faces), as
    many more slices; the picture is the direct draw's all the same."""
    from latticelab.render.isosurface import MIN_STAGE_FACES
    window, panel, view = staged_view(qtbot)
    view.set_staging(4 * SLICE)
    view.staged.budget_s = 1e-9                        # every slice is over it
    log = SliceLog(view.staged)
    panel.iso_slider.setValue(80)
    faces = view.mesh.n_faces
    assert faces > 4 * SLICE + 4 * MIN_STAGE_FACES
    qtbot.waitUntil(lambda: not view.staging, timeout=20000)
    log.probe.stop()
    # the first slice at the cap, each one after it at the least (more if the camera moved and it began again)
    assert len(log.at_slices) >= 1 + -(-(faces - 4 * SLICE) // MIN_STAGE_FACES)
    assert view.staged._per_slice == MIN_STAGE_FACES
    staged = main_cell_pixels(panel)
    view.set_staging(None)
    np.testing.assert_array_equal(staged, main_cell_pixels(panel))
