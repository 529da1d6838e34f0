"""Screenshots, saved states and settings: the files the user makes are valid, never silently replaced,
and damaged input changes nothing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
from latticelab.sim.backend import to_numpy  # model arrays may be CuPy (LATTICELAB_GUI_BACKEND=cuda)
import pytest
from PySide6 import QtCore
from gui_helpers import answer_next_dialog, choose, type_into

REPO = Path(__file__).resolve().parents[2]


def host(array):
    """``array`` on the host (None stays None)."""
    return None if array is None else to_numpy(array)


def _png(path) -> np.ndarray:
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return iio.imread(path)


def test_screenshot_is_a_png_of_the_view_and_is_never_silently_replaced(make_window, qtbot, tmp_path):
    window = make_window(dim=2, L=32, T=2.2)
    window.step_once()
    target = tmp_path / "shot.png"
    assert window.export_screenshot(target, "view") == target
    image = _png(target)
    width, height = window.lattice_canvas.physical_size
    assert image.shape[:2] == (height, width)
    assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) >= 3
    original = target.read_bytes()

    window.step_once()
    asked = []
    answer_next_dialog(qtbot, "No", asked)
    assert window.export_screenshot(target, "view") is None
    assert asked and "shot.png" in asked[0]
    assert target.read_bytes() == original                      # kept
    answer_next_dialog(qtbot, "Yes")
    assert window.export_screenshot(target, "view") == target
    assert target.read_bytes() != original                      # replaced, because the user said so
    # scripted use never asks: it picks a free name
    assert window.export_screenshot(target, "view", confirm=False) == tmp_path / "shot-1.png"
    assert window.prefs.get("folders/export") == str(tmp_path.resolve())
    # Ctrl+S, the File menu and the toolbar all reach the export
    action = window.export_action
    assert "Ctrl+S" in [s.toString() for s in action.shortcuts()]
    assert window.toolbar.widgetForAction(action) is not None
    assert action in window.menuBar().actions()[0].menu().actions()


def test_cells_and_window_screenshots(make_window, tmp_path):
    window = make_window(dim=2, L=32, T=2.2)
    cells = _png(window.export_screenshot(tmp_path / "cells.png", "cells"))
    assert cells.shape[:2] == (32, 32)
    from latticelab.sim.models.ising.picture import encode_codes as encode_state
    from latticelab.sim.models.ising.picture import palette
    from latticelab.sim.picture import palette_bytes
    m = window.model
    expected = palette_bytes(palette())[encode_state(np, to_numpy(m.spins), host(window.runner.highlight))]
    np.testing.assert_array_equal(cells, expected)
    whole = _png(window.export_screenshot(tmp_path / "window.png", "window"))
    assert whole.shape[:2] == (window.height(), window.width())
    assert len(np.unique(whole.reshape(-1, whole.shape[-1]), axis=0)) > 10
    # the lattice is inside the whole-window picture: its most common colours are spin colours
    choose(window.controls.field("dim").combo, "3D")
    cells3 = _png(window.export_screenshot(tmp_path / "cells3.png", "cells"))
    from latticelab.render.unfold import UnfoldLayout
    width, height = UnfoldLayout(window.model.L).extent
    assert cells3.shape[:2] == (height, width)


def test_a_window_screenshot_shows_the_live_plots_complete(make_window, qtbot, tmp_path):
    """The live plots' picture is drawn over several paints after a change; a picture of the window taken
    meanwhile (a scripted run's --screenshot-what window) finishes it first."""
    window = make_window(dim=2, L=32, T=2.2)
    for _ in range(5):
        window.step_once()
    canvas = window.plot_canvas
    canvas.invalidate()                       # a new picture due, not drawn yet
    canvas.update()
    whole = _png(window.export_screenshot(tmp_path / "window.png", "window"))
    assert not canvas.stale and canvas.full_draws >= 1
    top_left = canvas.native.mapTo(window, QtCore.QPoint(0, 0))
    x, y = top_left.x(), top_left.y()
    plots = whole[y:y + canvas.native.height(), x:x + canvas.native.width(), :3].astype(int)
    reference = canvas.render(alpha=False)[..., :3].astype(int)      # the scene drawn directly
    assert plots.shape == reference.shape
    assert np.mean(np.abs(plots - reference).max(axis=2) > 2) < 0.002
    assert len(np.unique(plots.reshape(-1, 3), axis=0)) > 20         # titles, axes, curves: not a blank dock


def step_and_wait(window, qtbot, times: int) -> None:
    """``times`` steps, one at a time: a step the window judges long (its measured time per step is above the
    frame budget, as on a busy machine) runs on the background worker, and a step asked for while one is in
    flight is not queued, so each is waited for."""
    for _ in range(times):
        qtbot.waitUntil(lambda: not window.stepper.busy, timeout=60000)
        window.step_once()
    qtbot.waitUntil(lambda: not window.stepper.busy, timeout=60000)


def test_save_and_load_give_identical_next_steps(make_window, qtbot, tmp_path):
    window = make_window(dim=2, L=24, T=2.3, p=1e-2, algorithm="2:1", seed=9)
    step_and_wait(window, qtbot, 4)
    path = window.save_state(tmp_path / "run.npz")
    assert path == tmp_path / "run.npz" and path.exists()
    step_and_wait(window, qtbot, 5)
    expected_spins = to_numpy(window.model.spins).copy()
    expected_step = window.model.step_count
    expected_obs = window.model.observables()

    type_into(window.controls.field("T").box, "1.0")   # change things, then resume from the file
    window.set_parameter("start", "cold")
    window.reset()
    assert window.load_state(path)
    assert window.model.step_count == 4 and window.model.T == 2.3
    assert float(window.controls.field("T").box.text()) == 2.3
    assert window.controls.field("algorithm").combo.currentText() == "hybrid"
    step_and_wait(window, qtbot, 5)
    assert window.model.step_count == expected_step
    np.testing.assert_array_equal(to_numpy(window.model.spins), expected_spins)
    assert window.model.observables() == expected_obs

    answer_next_dialog(qtbot, "No")
    assert window.save_state(path) is None                       # existing file kept
    assert window.save_state(path, confirm=False) == tmp_path / "run-1.npz"


def test_truncated_or_foreign_state_is_rejected_and_changes_nothing(make_window, qtbot, tmp_path):
    window = make_window(dim=2, L=16, T=2.2)
    window.step_once()
    path = window.save_state(tmp_path / "good.npz")
    data = path.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    model, spins, step = window.model, to_numpy(window.model.spins).copy(), window.model.step_count
    messages = []
    answer_next_dialog(qtbot, "OK", messages)
    assert not window.load_state(truncated)
    assert messages and "truncated.npz" in messages[0] and "damaged" in messages[0]
    assert "truncated.npz" in window.last_error
    assert window.model is model and model.step_count == step
    np.testing.assert_array_equal(to_numpy(model.spins), spins)

    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, spins=np.zeros((3, 3)))
    answer_next_dialog(qtbot, "OK")
    assert not window.load_state(foreign)
    assert "state" in window.last_error and window.model is model


def test_settings_persist_and_broken_values_fall_back(make_window, tmp_path):
    settings = tmp_path / "prefs.ini"
    window = make_window(dim=2, L=24, T=2.1, settings_file=settings)
    window.controls.show_links.setChecked(True)
    window.controls.steps_per_frame.setValue(7)
    type_into(window.controls.field("seed").box, "5")
    window.close()

    from latticelab.app.gui import resolve_parameters
    from latticelab.app.settings import Preferences
    store = QtCore.QSettings(str(settings), QtCore.QSettings.Format.IniFormat)
    args = type("Args", (), dict(model=None, dim=None, L=None, T=None, p=None, rewire_dims=None, algorithm=None,
                                 seed=None, start=None, backend="numpy"))()
    params = resolve_parameters(args, Preferences(store), gpu=False)
    assert (params.dim, params.L, params.T, params.seed) == (2, 24, 2.1, 5)
    args.T = 1.9                                             # the command line wins over the settings
    assert resolve_parameters(args, Preferences(store), gpu=False).T == 1.9
    args.T = None

    store.setValue("models/ising/dim=2/T", "hot")
    store.setValue("models/ising/dim=2/L", "-3")
    store.setValue("run/steps_per_frame", "many")
    store.setValue("window/geometry", "not bytes")
    store.sync()
    prefs = Preferences(QtCore.QSettings(str(settings), QtCore.QSettings.Format.IniFormat))
    params = resolve_parameters(args, prefs, gpu=False)
    assert params.T == 2.25 and params.L == 512 and params.seed == 5   # broken ones: defaults; others kept
    assert len(prefs.problems) == 2 and any("models/ising/dim=2/T" in p for p in prefs.problems)
    again = make_window(settings_file=settings, L=16)
    assert again.controls.show_links.isChecked()                       # kept from the last session
    from latticelab.app.settings import default_steps_per_frame
    default = default_steps_per_frame(again.model.backend_name)       # broken: the backend's default
    assert again.controls.steps_per_frame.value() == default
    assert "run/steps_per_frame" in again.last_error and "window/geometry" in again.last_error


def _run_cli(args, cwd):
    # the package's parent directory first, then what the caller had (on the GPU machine the package is a
    # link named latticelab to the checkout, found only through the caller's PYTHONPATH)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "xcb"))
    return subprocess.run([sys.executable, "-m", "latticelab", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


@pytest.mark.skipif(not os.environ.get("DISPLAY"), reason="the scripted GUI needs a display (Xvfb)")
def test_scripted_screenshot_from_the_command_line(tmp_path):
    args = ["gui", "--dim", "3", "--L", "16", "--T", "4.0", "--backend", "numpy", "--steps", "20",
            "--screenshot", "out.png", "--window-size", "900x700", "--quit"]
    first = _run_cli(args, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    image = _png(tmp_path / "out.png")
    assert image.ndim == 3 and min(image.shape[:2]) > 200
    assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 3
    original = (tmp_path / "out.png").read_bytes()
    second = _run_cli(args, tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    assert (tmp_path / "out.png").read_bytes() == original        # not overwritten
    assert "out-1.png" in second.stdout
    np.testing.assert_array_equal(_png(tmp_path / "out-1.png"), image)   # same command line, same figure
    # the whole window right after one step: the live plots show it (they were still blank at the screenshot)
    whole = _run_cli(["gui", "--L", "8", "--backend", "numpy", "--steps", "1", "--screenshot", "window.png",
                      "--screenshot-what", "window", "--window-size", "1400x860", "--quit"], tmp_path)
    assert whole.returncode == 0, whole.stderr[-2000:]
    window = _png(tmp_path / "window.png")[..., :3]
    height, width = window.shape[:2]
    plots = window[int(0.12 * height):int(0.9 * height), int(0.68 * width):]      # the Live plots dock
    assert len(np.unique(plots.reshape(-1, 3), axis=0)) > 50                     # curves, axes and text
    bad = _run_cli(["gui", "--L", "7", "--quit", "--backend", "numpy"], tmp_path)
    assert bad.returncode == 2 and "L:" in bad.stderr and "Traceback" not in bad.stderr
