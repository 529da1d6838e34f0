"""The window drawing one lattice split over several devices (issue 40): the same pixels and readout as one.

On the CPU the split runs in one process, as tests/test_multidevice_ising.py runs it: NumPy slabs, the CUDA
kernels under the emulator, the halos copied between the arrays. The picture is then made the way the GPUs make
it -- each slab encoded on its own, the slabs' codes gathered into one array (sim/multidevice/picture.py) -- and
uploaded from the host. Two real windows, one on one device and one on two slabs, must show the same pixels
after the same steps (a single step, whose highlight is a host mask, and a frame of several steps, whose
highlight stays in the slabs' flip words), with rewired sites on both sides of the border shown; the hover
readout of the cells just across the border must give their spins.
"""
from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import cell_centres_2d, pixels_at
from PySide6 import QtCore

from latticelab.sim.backend import to_numpy

L = 64


@pytest.fixture
def emulated_devices(monkeypatch):
    """select_backend gives the CPU emulator's stand-in for CuPy; several 'devices' are NumPy slabs."""
    import latticelab.app.main_window as main_window
    import latticelab.sim.runner as runner
    from helpers import emulate_devices
    emulate_devices(monkeypatch, runner, main_window)


def _window(qtbot, tmp_path, devices):
    from latticelab.app.main_window import MainWindow
    from latticelab.app.settings import Preferences
    prefs = Preferences(QtCore.QSettings(str(tmp_path / f"settings-{devices}.ini"), QtCore.QSettings.Format.IniFormat))
    params = dict(dim=2, L=L, T=2.3, p=0.02, algorithm="metropolis", seed=9)
    window = MainWindow("ising", params, prefs, interactive=True, backend="numpy", devices=devices)
    window.stage_ahead = False
    qtbot.addWidget(window)
    window.resize(1100, 760)
    window.show()
    qtbot.waitExposed(window)
    window.set_running(False)
    window.controls.show_links.setChecked(True)
    return window


def _settle(qtbot, window) -> None:
    """Wait for a step that the window ran on its worker thread (the emulated kernels are slow) to be shown."""
    qtbot.waitUntil(lambda: not window.stepper.busy, timeout=20000)
    window.frames.refresh_view(force=True)


def _cells(window) -> np.ndarray:
    image = window.capture("view")
    return pixels_at(image, window.field_view.world_to_canvas(cell_centres_2d(L)))


def test_a_two_slab_window_draws_the_one_device_picture_and_reads_cells_across_the_border(
        emulated_devices, qtbot, tmp_path):
    one, two = _window(qtbot, tmp_path, None), _window(qtbot, tmp_path, "0,1")
    assert two.model.devices == (0, 1) and one.model.devices == (0,)
    assert two.picture().slabs is not None and one.picture().slabs is None
    border = L // 2                   # the first row of the second slab
    rewired = np.argwhere(to_numpy(one.model.rewired_site_mask()))
    assert (rewired[:, 0] < border).any() and (rewired[:, 0] >= border).any()
    for window in (one, two):        # a single step: the highlight is the step's flips, a host mask
        window.step_once()
        _settle(qtbot, window)
    np.testing.assert_array_equal(two.model.spins, to_numpy(one.model.spins))
    np.testing.assert_array_equal(_cells(two), _cells(one))
    # a frame of several steps: the split run's highlight is the union of flips left in the slabs' flip words
    for window in (one, two):
        window.field_view.before_step()
        window.runner.advance(3)
        window.frames.refresh_view(force=True)
    assert type(two.runner.highlight).__name__ == "DeviceFlips"
    shown = _cells(one)
    np.testing.assert_array_equal(_cells(two), shown)
    assert len(np.unique(shown, axis=0)) >= 4        # up, down, flipped and rewired cells
    # flipped cells highlighted on both sides of the border
    flipped = to_numpy(one.runner.highlight)
    assert flipped[border - 1].any() and flipped[border].any()

    spins = to_numpy(one.model.spins)
    for row, column in ((border - 1, 3), (border, 3), (border, 40), (0, 0), (L - 1, L - 1)):
        xy = two.field_view.world_to_canvas([[column + 0.5, row + 0.5]])[0]
        expected = f"x={column}  y={row}   spins={int(spins[row, column]):+d}"
        assert two.hover_readout.show_cell_at(xy) == expected
        assert one.hover_readout.show_cell_at(one.field_view.world_to_canvas([[column + 0.5, row + 0.5]])[0]) \
            == expected
