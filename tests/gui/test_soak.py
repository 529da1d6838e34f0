"""Soak test: two minutes of random use of every control while the simulation runs, switching 2D/3D and
algorithms. Passes when nothing raises (pytest-qt fails the test on exceptions inside Qt callbacks), the
window still shows the model's spins exactly, and the resident memory stays bounded."""
from __future__ import annotations

import random
import time

import numpy as np
from latticelab.sim.backend import to_numpy  # model arrays may be CuPy (LATTICELAB_GUI_BACKEND=cuda)
import pytest
from gui_helpers import cell_centres_2d, choose, expected_rgb, pixels_at, type_into

from latticelab.app import scales
from latticelab.sim.models.ising.picture import encode_codes as encode_state

SOAK_SECONDS = 120
WARM_UP_SECONDS = 20
RSS_GROWTH_LIMIT_MB = 120


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _actions(window, rng: random.Random, tmp_path):
    c = window.controls

    def temperature():
        c.field("T").slider.setValue(rng.randint(0, scales.TEMPERATURE_STEPS))

    def temperature_box():
        type_into(c.field("T").box, f"{rng.uniform(0.5, 6.0):.4f}")

    def p_slider():
        c.field("p").slider.setValue(rng.choice([0, rng.randint(1, scales.P_MAX_POSITION - 20)]))

    def p_text():
        type_into(c.field("p").box, rng.choice(["0", "1e-4", "0.003", "2", "-1", "x", ""]))

    def rewire_dims():
        combo = c.field("rewire_dims").combo
        choose(combo, combo.itemText(rng.randrange(combo.count())))

    def algorithm():
        schedule = c.field("algorithm")
        choose(schedule.combo, schedule.combo.itemText(rng.randrange(schedule.combo.count())))
        schedule.m.setValue(rng.randint(0, 4))
        schedule.w.setValue(rng.randint(0, 2))

    def dimension():
        choose(c.field("dim").combo, rng.choice(["2D", "3D"]))

    def size():
        choose(c.field("L").combo, str(rng.choice([8, 12, 16, 24] if window.model.dim == 2 else [6, 8, 10, 12])))

    def steps_per_frame():
        c.steps_per_frame.setValue(rng.randint(1, 20))
        c.adaptive.setChecked(rng.random() < 0.7)

    def reset():
        type_into(c.field("seed").box, str(rng.randint(0, 1000)))
        choose(c.field("start").combo, rng.choice(["hot", "cold"]))
        c.reset_button.click()

    def run_pause():
        window.run_action.trigger()

    def step():
        window.step_action.trigger()

    def view_options():
        rng.choice([c.highlight, c.show_links, c.unfold]).toggle()
        c.peel.setValue(rng.randint(0, c.peel.maximum()))
        if rng.random() < 0.2:
            window.camera_action.trigger()

    def export():
        window.export_screenshot(tmp_path / "soak.png", rng.choice(["view", "cells", "window"]), confirm=False)

    def save_load():
        path = window.save_state(tmp_path / "soak.npz", confirm=False)
        assert path is not None and window.load_state(path), window.last_error

    return [temperature, temperature_box, p_slider, p_text, rewire_dims, algorithm, dimension, size,
            steps_per_frame, reset, run_pause, step, view_options, export, save_load]


@pytest.mark.slow
def test_random_use_of_every_control_for_two_minutes(make_window, qtbot, tmp_path):
    window = make_window(dim=2, L=16, T=2.2, running=True)
    window.prefs.set("models/ising/dim=2/L", 16)
    window.prefs.set("models/ising/dim=3/L", 8)
    window.interactive = False   # a failure must fail the test, not wait in a modal dialog
    rng = random.Random(2024)
    actions = _actions(window, rng, tmp_path)
    done = []
    start = time.monotonic()
    baseline = None
    while time.monotonic() - start < SOAK_SECONDS:
        action = rng.choice(actions)
        done.append(action.__name__)
        action()
        if rng.random() < 0.3 and not window.running:
            window.set_running(True)
        qtbot.wait(rng.randint(5, 120))
        if baseline is None and time.monotonic() - start > WARM_UP_SECONDS:
            baseline = rss_mb()
    final = rss_mb()
    print(f"soak: {len(done)} actions, final step {window.model.step_count}, RSS {baseline:.0f} -> {final:.0f} MB")
    assert len(set(done)) == len(actions), f"not every control was used: {sorted(set(done))}"
    assert final - baseline < RSS_GROWTH_LIMIT_MB, f"RSS grew {final - baseline:.0f} MB ({baseline:.0f} -> {final:.0f})"

    # afterwards the window still works and shows exactly the model's spins
    window.set_running(False)
    choose(window.controls.field("dim").combo, "2D")
    window.controls.highlight.setChecked(True)
    window.controls.show_links.setChecked(False)
    window.step_once()
    L = window.model.L
    colours = pixels_at(window.capture("view"), window.field_view.world_to_canvas(cell_centres_2d(L)))
    highlight = None if window.runner.highlight is None else to_numpy(window.runner.highlight)
    codes = encode_state(np, to_numpy(window.model.spins), highlight)
    np.testing.assert_array_equal(colours, expected_rgb(codes))
