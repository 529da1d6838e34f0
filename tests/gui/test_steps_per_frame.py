"""Steps / frame: a number, or auto (as many steps as fit in the frame's time budget); where the user has not
picked one, the backend decides (auto on a CUDA device, 1 on the CPU)."""
from __future__ import annotations

import argparse

import numpy as np
import pytest
from PySide6 import QtCore

from latticelab.app.main_window import PLOT_SAMPLES_PER_FRAME
from latticelab.app.settings import AUTO_STEPS, default_steps_per_frame
from latticelab.sim.params import ParameterError


def _steps_after_each_frame(window, qtbot, until) -> np.ndarray:
    """Run the window until ``until(steps of each frame so far)`` holds; the steps of each frame (the model's step
    count after each frame: the frame loop's slot runs first)."""
    counts = []
    record = lambda: counts.append(window.model.step_count)  # noqa: E731
    window.timer.timeout.connect(record)
    window.set_running(True)
    try:
        qtbot.waitUntil(lambda: len(counts) > 1 and until(np.diff(counts)), timeout=30000)
    finally:
        window.set_running(False)
        window.timer.timeout.disconnect(record)
    return np.diff(counts)


def test_auto_takes_as_many_steps_as_fit_in_a_frame_and_a_number_caps_them(make_window, qtbot):
    window = make_window(dim=2, L=16, T=2.2)         # a step of 16^2 spins takes microseconds: many fit in a frame
    c = window.controls
    c.steps_per_frame.setValue(AUTO_STEPS)
    assert c.steps_per_frame.text() == "auto" and window.steps_per_frame == AUTO_STEPS
    assert not c.adaptive.isEnabled()                # auto always keeps the frame's budget: the box does not apply
    # far more than one step in a frame once their cost is known (on a CUDA device the pacing works up to it over
    # some frames: app/pacing.py)
    per_frame = _steps_after_each_frame(window, qtbot, lambda steps: steps.max() > 20)
    assert per_frame.max() > 20, per_frame
    # the live plots' history keeps a few true steps of each such frame, so that it spans many frames
    window.runner.collect(wait=True)
    times, _values = window.runner.history.arrays()
    kept = np.diff(times[-PLOT_SAMPLES_PER_FRAME:])
    assert kept.min() >= 1 and kept.max() > 1, times[-8:]
    assert times[-1] == window.model.step_count

    c.steps_per_frame.setValue(3)
    assert c.adaptive.isEnabled() and window.steps_per_frame == 3
    per_frame = _steps_after_each_frame(window, qtbot, lambda steps: len(steps) >= 6)
    assert per_frame.max() <= 3 and per_frame.sum() > 0, per_frame


def test_the_default_follows_the_backend_until_the_user_picks_one(make_window, tmp_path):
    assert default_steps_per_frame("cuda") == AUTO_STEPS and default_steps_per_frame("numpy") == 1
    settings = tmp_path / "prefs.ini"
    window = make_window(settings_file=settings, L=16)
    default = default_steps_per_frame(window.model.backend_name)
    assert window.controls.steps_per_frame.value() == default == window.steps_per_frame
    assert window.controls.adaptive.isEnabled() == (default != AUTO_STEPS)
    window.close()
    store = QtCore.QSettings(str(settings), QtCore.QSettings.Format.IniFormat)
    assert not store.contains("run/steps_per_frame")   # not picked: not stored, so another machine gets its own

    again = make_window(settings_file=settings, L=16)
    picked = 25 if default == AUTO_STEPS else AUTO_STEPS
    again.controls.steps_per_frame.setValue(picked)
    again.close()
    store = QtCore.QSettings(str(settings), QtCore.QSettings.Format.IniFormat)
    assert int(store.value("run/steps_per_frame")) == picked
    third = make_window(settings_file=settings, L=16)
    assert third.controls.steps_per_frame.value() == picked == third.steps_per_frame


@pytest.mark.parametrize("value", ["-2", "100001"])
def test_steps_per_frame_on_the_command_line_is_checked(value):
    from latticelab.app.commands.gui import add_arguments
    from latticelab.app.gui import run_gui
    from latticelab.sim.models import all_models
    parser = argparse.ArgumentParser()
    add_arguments(parser, all_models())
    args = parser.parse_args(["--backend", "numpy", "--steps-per-frame", value, "--quit"])
    with pytest.raises(ParameterError) as caught:
        run_gui(args)
    assert "steps-per-frame" in str(caught.value) and "0 (auto" in str(caught.value) and value in str(caught.value)
