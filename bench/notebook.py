"""``latticelab bench notebook``: frames/s of the notebook's live view (render/notebook.py; issue 43's target:
>= 20 frames/s for a 1024^2 Ising lattice on the GPU server, counted by jupyter_rfb's own frame accounting,
the simulation stepping between frames).

What runs: ``latticelab.open("ising", L=...)`` and ``sim.show()``, i.e. the FieldView on VisPy's jupyter_rfb
canvas, its off-screen OpenGL context (EGL on a server without a display), the view's timer stepping the
model for its budget and asking for a frame, and jupyter_rfb rendering, reading back and JPEG-encoding each
frame and handing it to the widget's ``send``. No browser: a stand-in client takes each frame at ``send``
and confirms it on the next event-loop iteration, as the browser's frame feedback would with no network
delay, so jupyter_rfb's throttle (at most ``max_buffered_frames`` unconfirmed) is exercised but never waits
on a network. ``fps`` is jupyter_rfb's ``get_stats()['fps']`` (confirmed frames over the time from the first
frame sent to the last confirmed) after a warm-up; the sweeps/s with the view running are compared with the
same sweeps stepped headless (``runner.advance`` for the same budget, no drawing) in the same run.
"""
from __future__ import annotations

import asyncio
import time

TARGET_FPS = 20.0


def add_arguments(parser) -> None:
    from latticelab.bench.common import add_output_arguments, add_smoke_arguments
    add_smoke_arguments(parser, "a 128^2 lattice for 2 s (CPU smoke run, needs a display or EGL)")
    parser.add_argument("--L", type=int, default=None, help="lattice side (default 1024; --small 128)")
    parser.add_argument("--size", type=int, default=600, help="the view's size in pixels (square; default 600)")
    parser.add_argument("--seconds", type=float, default=None, help="measured seconds (default 8; --small 2)")
    add_output_arguments(parser, "notebook-<gpu>.json")


class StandInClient:
    """What the browser does for jupyter_rfb: take each frame sent, confirm it (frame feedback) on the next
    iteration of the event loop. Counts the frames and their bytes."""

    def __init__(self, widget):
        self.widget, self.frames, self.bytes = widget, 0, 0
        widget._has_visible_views = True             # a view is open: jupyter_rfb draws only then
        widget.send = self.receive

    def receive(self, msg, buffers=None) -> None:
        if msg.get("type") != "framebufferdata":
            return
        self.frames += 1
        self.bytes += sum(len(b) for b in buffers or ())
        feedback = {"index": msg["index"], "timestamp": msg["timestamp"], "localtime": time.time()}
        asyncio.get_running_loop().call_soon(lambda: setattr(self.widget, "_frame_feedback", feedback))


def gl_renderer(canvas) -> str:
    """The OpenGL renderer string of the canvas's context (read in its next draw)."""
    seen = {}

    def read(_event):
        from vispy.gloo import gl
        seen.setdefault("renderer", gl.glGetParameter(gl.GL_RENDERER))
    canvas.events.draw.connect(read)
    return seen


async def measure(backend: str, L: int, size: int, seconds: float) -> dict:
    import latticelab as ll
    sim = ll.open("ising", backend=backend, L=L, T=2.269, seed=1)
    sim.show(size=(size, size))
    view = sim.live_view
    widget = view.canvas.native
    client = StandInClient(widget)
    seen = gl_renderer(view.canvas)
    widget._rfb_handle_msg(widget, {"type": "resize", "width": size, "height": size, "ratio": 1.0}, [])
    view.run_button.value = True
    await asyncio.sleep(min(2.0, seconds / 2))      # warm-up: kernels compiled, the step cost measured
    widget.reset_stats()
    frames0, sent0, step0 = view.frames, client.frames, sim.step
    start = time.perf_counter()
    await asyncio.sleep(seconds)
    elapsed = time.perf_counter() - start
    stats = widget.get_stats()
    frames, sent, steps = view.frames - frames0, client.frames - sent0, sim.step - step0
    view.run_button.value = False
    # the same budget of steps, headless: what the view leaves of the simulation's speed
    runner, budget = sim.runner, view.budget_s
    headless_steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min(seconds, 3.0):
        headless_steps += runner.advance(10 ** 6, budget)
    runner.collect(wait=True)
    headless = headless_steps / (time.perf_counter() - t0)
    return {"fps": stats["fps"], "stats": stats, "view_frames_per_s": frames / elapsed, "sent_per_s": sent / elapsed,
            "sweeps_per_s": steps / elapsed, "headless_sweeps_per_s": headless,
            "bytes_per_frame": client.bytes / max(client.frames, 1), "renderer": seen.get("renderer", "unknown"),
            "seconds": elapsed}


def main(args) -> int:
    from latticelab.bench.common import finish, open_backend
    from latticelab.sim.backend import BackendError
    small = args.small
    L = args.L or (128 if small else 1024)
    seconds = args.seconds or (2.0 if small else 8.0)
    try:
        backend, device = open_backend(args.backend, "notebook")
    except BackendError as exc:
        print(f"latticelab bench notebook needs a CUDA GPU (or --backend numpy --small): {exc}")
        return 1
    got = asyncio.run(measure(backend.name, L, args.size, seconds))
    stats = got["stats"]
    print(f"OpenGL renderer: {got['renderer']}")
    print(f"{got['fps']:.1f} frames/s confirmed (jupyter_rfb), {got['view_frames_per_s']:.1f} frames/s stepped by "
          f"the view, {got['sweeps_per_s']:.0f} sweeps/s with the view against {got['headless_sweeps_per_s']:.0f} "
          f"headless, JPEG {stats['img_encoding'] * 1e3:.1f} ms and {got['bytes_per_frame'] / 1024:.0f} KiB a frame",
          flush=True)
    ratio = got["sweeps_per_s"] / got["headless_sweeps_per_s"] if got["headless_sweeps_per_s"] else None
    case = {"case": f"notebook-2d-L{L}", "metric": "frames_per_s", "value": round(got["fps"], 2),
            "baseline": "headless-steps-same-budget", "baseline_value": round(got["headless_sweeps_per_s"], 1),
            "ratio": round(ratio, 4) if ratio is not None else None,
            "target": TARGET_FPS, "lower_is_better": False, "target_met": got["fps"] >= TARGET_FPS,
            "details": {"view_pixels": f"{args.size}x{args.size}", "seconds": round(got["seconds"], 2),
                        "sent_frames": stats["sent_frames"], "confirmed_frames": stats["confirmed_frames"],
                        "view_frames_per_s": round(got["view_frames_per_s"], 2),
                        "sweeps_per_s_with_view": round(got["sweeps_per_s"], 1),
                        "jpeg_encoding_ms": round(stats["img_encoding"] * 1e3, 2),
                        "kib_per_frame": round(got["bytes_per_frame"] / 1024, 1),
                        "client": "stand-in confirming each frame on the next event-loop iteration (no browser)",
                        "gl_renderer": got["renderer"]}}
    return finish("notebook", device, [case], args, small)
