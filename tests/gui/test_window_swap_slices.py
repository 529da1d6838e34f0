"""A model switch does its GUI-thread work in many short event-loop iterations (app/staging.py): the next model's
parameter form and live plots are made ahead, a piece per frame-loop tick, while the model is built on the
worker; the swap then only shows them, in a tick of its own; switching back shows the kept ones again. Nothing
here is timed: the checks count ticks and steps, so a slow machine passes as a fast one does.
"""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtCore  # noqa: E402

from latticelab.app.staging import SLICE_AFTER_BUILD_S, SLICE_S  # noqa: E402
from latticelab.sim.models import get_model  # noqa: E402


@pytest.fixture
def window(make_window):
    w = make_window(running=True)
    w.background_builds = True
    return w


class Recorder:
    """Counts the event loop's iterations with a timer of its own, and notes, for each staging slice and for the
    swap, how many iterations had passed."""

    def __init__(self, window, monkeypatch):
        self.ticks = 0
        self.timer = QtCore.QTimer(interval=0)
        self.timer.timeout.connect(self._tick)
        self.timer.start()
        self.slices: list[int] = []          # the tick count at each staging slice
        self.swaps: list[dict] = []          # what was made already when a swap began
        staging = window.staging
        run_slice, after = staging.run_slice, window.lifecycle.after_model_change

        def recorded_slice(*args, **kwargs):
            self.slices.append(self.ticks)
            return run_slice(*args, **kwargs)

        def recorded_swap():
            cls = type(window.model)
            plots = window.lifecycle.plot_sets.get(cls)
            form = window.controls._forms.get(cls.Params)
            self.swaps.append({"model": cls.name, "tick": self.ticks, "staging_busy": staging.busy,
                               "plots": plots, "plots_built": plots is not None and plots.built,
                               "form": form, "form_built": form is not None and form.built})
            return after()

        monkeypatch.setattr(staging, "run_slice", recorded_slice)
        monkeypatch.setattr(window.lifecycle, "after_model_change", recorded_swap)

    def _tick(self) -> None:
        self.ticks += 1


def test_a_model_switch_makes_its_form_and_plots_over_many_ticks_then_swaps_in_one(window, qtbot, monkeypatch):
    ising_plots, ising_form = window.plots, window.controls.form
    rec = Recorder(window, monkeypatch)
    assert window.switch_model("cahn-hilliard")
    assert window.staging.busy            # the form and plots are being made ahead
    qtbot.waitUntil(lambda: window.model.name == "cahn-hilliard", timeout=60000)
    rec.timer.stop()
    log = window.staging.log
    made = {key for _slice, key, _what in log}
    assert ("plots", "cahn-hilliard") in made and ("form", "cahn-hilliard") in made
    # the making was spread: many slices, each in an event-loop iteration of its own (the loop ran in between)
    slices = sorted({number for number, _key, _what in log})
    assert len(slices) >= 5
    assert len(set(rec.slices)) >= 5 and rec.slices == sorted(rec.slices)
    # the swap came after the last slice, in a later iteration, and found everything made
    [swap] = rec.swaps
    assert not swap["staging_busy"] and swap["plots_built"] and swap["form_built"]
    assert swap["tick"] > rec.slices[-1]
    cls = get_model("cahn-hilliard")
    assert window.plots is swap["plots"] and window.plots.visible and not ising_plots.visible
    assert window.controls.form is swap["form"] and window.controls.form.isVisible() and ising_form.isHidden()
    assert set(window.controls.form.fields) == set(cls.Params.model_fields)
    assert window.plots.x_axis.axis.axis_label == cls.time_label
    assert window.model_box.currentData() == "cahn-hilliard"

    # back to the Ising model: its form and plots were kept, nothing is made again
    rec2 = Recorder(window, monkeypatch)
    assert window.switch_model("ising")
    qtbot.waitUntil(lambda: window.model.name == "ising", timeout=60000)
    rec2.timer.stop()
    assert not any(key == ("plots", "ising") for _slice, key, _what in window.staging.log if _slice in rec2.slices)
    assert window.plots is ising_plots and ising_plots.visible and not swap["plots"].visible
    assert window.controls.form is ising_form and ising_form.isVisible()
    assert set(window.controls.form.fields) == set(get_model("ising").Params.model_fields)
    qtbot.waitUntil(lambda: window.model.step_count > 2, timeout=30000)   # and it runs


def test_staging_beside_a_build_lets_a_frame_that_paints_the_live_plots_pass_but_never_two(window, qtbot, monkeypatch):
    """While the model is built, a frame that will ask for a paint of the live plots runs no staging slice (the
    two made the longest gaps of a switch together), unless the frame before it ran none either: the making
    ahead never stops; once the model is built, every frame runs one, of a frame's worth of steps."""
    frames = []          # per frame while staging: (plots paint in this frame, slice run)
    frame, plots_due = window.frames.frame, window.frames.plots_paint_in_this_frame
    staging = window.staging
    run_slice = staging.run_slice

    def recorded_frame():
        entry = {"slice": False, "due": None, "building": window.preparer.building()}
        frames.append(entry)
        busy = staging.busy

        def due():
            entry["due"] = plots_due()
            return entry["due"]

        def sliced(budget):
            entry["slice"], entry["budget"] = True, budget
            return run_slice(budget)

        monkeypatch.setattr(window.frames, "plots_paint_in_this_frame", due)
        monkeypatch.setattr(staging, "run_slice", sliced)
        try:
            frame()
        finally:
            monkeypatch.setattr(window.frames, "plots_paint_in_this_frame", plots_due)
            monkeypatch.setattr(staging, "run_slice", run_slice)
        if not busy:
            frames.pop()
        if any(f["due"] and f["building"] for f in frames) and any(f["slice"] and f["building"] for f in frames):
            seen_beside_the_build.set()

    from latticelab.app import preparing
    build = preparing.Job.run
    seen_beside_the_build = threading.Event()

    def slow_build(job):          # a build as long as a large model's, so that the staging runs beside it: it
        seen_beside_the_build.wait(60)   # waits for the frames to be seen, however slow the machine is
        build(job)

    monkeypatch.setattr(preparing.Job, "run", slow_build)
    monkeypatch.setattr(window.frames, "frame", recorded_frame)
    window.timer.timeout.disconnect()
    window.timer.timeout.connect(window.frames.frame)
    assert window.switch_model("cahn-hilliard")
    qtbot.waitUntil(lambda: window.model.name == "cahn-hilliard", timeout=60000)
    assert any(f["due"] and f["building"] for f in frames) and any(f["slice"] for f in frames)
    for before, now in zip(frames, frames[1:]):
        if now["due"] and before["slice"] and now["building"]:
            assert not now["slice"]          # the plots' frame is let pass while the model is built...
        assert before["slice"] or now["slice"]   # ...but never two frames in a row
        if not now["building"]:
            assert now["slice"]              # once it is built, the swap waits for the staging: every frame,
    # a frame's worth of steps (the 8 ms slices beside the build)
    assert {f["budget"] for f in frames if f["slice"] and f["building"]} == {SLICE_S}
    assert {f["budget"] for f in frames if f["slice"] and not f["building"]} <= {SLICE_AFTER_BUILD_S}
