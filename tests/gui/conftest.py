"""Fixtures for the desktop-application tests: a real MainWindow under Xvfb (pytest-qt), small lattices.

Pixels are read back with ``canvas.render()`` (the scene drawn into an offscreen buffer of the canvas's
size) and located through the view's own transforms, so the checks do not depend on the window size.
"""
from __future__ import annotations

import os

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("vispy")


@pytest.fixture(scope="session", autouse=True)
def _vispy_qt():
    import vispy
    vispy.use(app="pyside6")


@pytest.fixture
def make_window(qtbot, tmp_path):
    """make_window(dim=2, L=32, ..., model="ising", settings=None) -> a shown, paused MainWindow with its own
    settings file; keyword parameters go to the model's schema."""
    from PySide6 import QtCore

    from latticelab.app.main_window import MainWindow
    from latticelab.app.settings import Preferences

    windows = []

    def make(settings_file=None, running=False, size=(1100, 760), model="ising", backend=None, **params):
        # LATTICELAB_GUI_BACKEND=cuda runs the window tests on the GPU (the GPU machine's window recipe)
        backend = backend or os.environ.get("LATTICELAB_GUI_BACKEND", "numpy")
        if model == "ising":
            params.setdefault("dim", 2)
            params.setdefault("L", 32)
            params.setdefault("T", 2.2 if params["dim"] == 2 else 4.2)
        path = settings_file or tmp_path / f"settings-{len(windows)}.ini"
        prefs = Preferences(QtCore.QSettings(str(path), QtCore.QSettings.Format.IniFormat))
        window = MainWindow(model, params, prefs, interactive=True, backend=backend)
        if backend == "cuda":
            # on a CUDA device even small models are built on the worker thread (their kernels may need compiling);
            # the tests that check what a change did right after it want the build done at once, as on the CPU
            # (test_window_preparing.py and test_window_swap_slices.py turn background builds on themselves)
            window.background_builds = False
        # the other models' forms and plots are not made ahead while idle: tests count what a switch stages
        # (test_stage_ahead.py turns it on)
        window.stage_ahead = False
        if backend == "cuda" and settings_file is None:
            # the window tests were written for one step a frame (a frame highlights one step's flips); a CUDA
            # window starts at auto, which tests/gui/test_steps_per_frame.py checks with a settings file of its own
            window.controls.steps_per_frame.setValue(1)
        qtbot.addWidget(window)
        window.resize(*size)
        window.show()
        qtbot.waitExposed(window)
        window.set_running(running)
        qtbot.wait(50)
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.timer.stop()
