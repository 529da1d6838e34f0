"""The notebook's live view (render/notebook.py): the FieldView on VisPy's jupyter_rfb canvas draws the model's
picture (pixels checked), the timer steps the simulation between frames, and the controls made from the schema
apply a change as the window's form does and show a refused value."""
import asyncio
import os

import numpy as np
import pytest

pytest.importorskip("jupyter_rfb")
pytest.importorskip("ipywidgets")
if not os.environ.get("DISPLAY"):
    pytest.skip("the offscreen OpenGL context of jupyter_rfb needs a display (Xvfb) here", allow_module_level=True)

import latticelab as ll   # noqa: E402


def frame(view, size=200):
    async def draw():
        view.canvas.native.handle_event({"type": "resize", "width": size, "height": size, "ratio": 1})
        await asyncio.sleep(0.05)
        view.redraw()
        return view.canvas.native.get_frame()
    return asyncio.run(draw())


def colour_share(image, rgb) -> float:
    return float(np.mean(np.all(np.abs(image[..., :3].astype(int) - rgb) < 12, axis=-1)))


def test_the_view_draws_the_field_and_the_controls_apply_changes():
    sim = ll.open("ising", L=32, T=1.0, start="cold", backend="numpy")
    sim.show(size=(200, 200))
    view = sim.live_view
    picture = sim.runner.picture(highlight=False)
    up = np.round(np.asarray(picture.palette)[1][:3] * 255).astype(int)       # code 1: spin up
    image = frame(view)
    assert image.shape == (200, 200, 4) and colour_share(image, up) > 0.5       # a cold start: all spins up
    steps = view.step_frame()
    assert steps >= 1 and sim.step == steps and f"step {steps}" in view.status.value
    view.controls.fields["T"].value = 3.0
    assert sim.params.T == 3.0 and sim.model.params.T == 3.0                   # live: the running model has it
    view.controls.fields["L"].value = 7
    assert "L: must be" in view.controls.message.value and sim.model.shape == (32, 32)
    assert view.controls.fields["L"].value == 32                                # back to the value in force
    view.controls.fields["L"].value = 16
    assert sim.model.shape == (16, 16) and view.controls.message.value == ""


def test_run_steps_the_simulation_between_frames_on_the_event_loop():
    sim = ll.open("cortex", L=16, k=10, r=4, backend="numpy")

    async def run_for(seconds):           # as in a kernel: the view made and run on the running event loop
        sim.show(size=(160, 160))
        sim.live_view.run_button.value = True
        await asyncio.sleep(seconds)
        sim.live_view.run_button.value = False
        return sim.live_view
    view = asyncio.run(run_for(0.8))
    assert view.frames >= 2 and sim.step >= view.frames and view.run_button.description == "Run"
    plots = sim.plots()
    times, values = sim.history()
    assert plots is sim.live_plots.canvas.native and times.size == sim.step + 1 and np.isfinite(values["eeg"]).all()


def test_the_bench_s_stand_in_client_confirms_frames_so_jupyter_rfb_keeps_sending():
    """bench notebook counts frames with jupyter_rfb's own accounting: without a client's frame feedback it
    stops after max_buffered_frames; with the stand-in, every frame sent is confirmed and more follow."""
    from latticelab.bench.notebook import measure
    got = asyncio.run(measure("numpy", 32, 100, 1.0))
    stats = got["stats"]
    assert stats["confirmed_frames"] >= 5 and stats["sent_frames"] - stats["confirmed_frames"] <= 2
    assert got["fps"] > 0 and got["sweeps_per_s"] > 0 and got["bytes_per_frame"] > 0
