"""``latticelab bench render``: frames/s of the full frame through CUDA-OpenGL interop and through host uploads.

A full frame is what the GUI does per frame on a CUDA machine: ``FieldView.before_step()``, one simulation
step (``IsingModel.step(1)`` on CuPy), the model's picture (``model.picture(highlight=model.changed())``: byte
codes + palette, sim/picture.py) shown by the field view -- through interop the codes are computed and stored
into the texture by one kernel (the Ising encoder's ``cell_code4`` composed with the surface writer); the
palette is applied in the fragment shader --, the draw of the whole VisPy scene, and ``glFinish``. The same run
measures both upload paths on the same views: interop (render/interop.py, zero-copy) and host
(``cupy.asnumpy`` + ``set_data``), and also "render-only" frames (no simulation step) so that the render
path's own speed stays visible while the simulation step dominates.

Headless through VisPy's EGL backend (no Qt): on the GPU machine the EGL context is on the CUDA device.
Writes bench/results/render-<gpu>.json (format: docs/benchmarks.md) and prints a table.
"""
from __future__ import annotations

import logging
import statistics
import time

log = logging.getLogger(__name__)

CASES = (  # (dim, L, T near the transition)
    (2, 4096, 2.27),
    (3, 256, 4.51),
)


def add_arguments(parser) -> None:
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per case; the median is reported")
    parser.add_argument("--seconds", type=float, default=0.6, help="length of one timed repetition (seconds)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed frames before timing each case")
    parser.add_argument("--canvas", type=int, default=1024, help="side of the square canvas in pixels")
    parser.add_argument("--L2", type=int, default=4096, help="side of the 2D lattice")
    parser.add_argument("--L3", type=int, default=256, help="side of the 3D lattice")
    parser.add_argument("--app", default="egl", help="VisPy application backend (egl: headless, no Qt)")
    parser.add_argument("--out-dir", default="bench/results", help="where render-<gpu>.json is written")
    parser.add_argument("--no-json", action="store_true", help="print the table only")
    parser.add_argument("--profile", action="store_true",
                        help="also print where the time of 100 render-only interop frames goes (cProfile)")


class FrameBench:
    """One field view on its own headless canvas, fed by one model's pictures, through one upload path."""

    def __init__(self, model, canvas_size: int, host: bool):
        from vispy import scene

        from latticelab.render import interop, palette
        from latticelab.render.field_view import FieldView

        self.model = model
        self.canvas = scene.SceneCanvas(size=(canvas_size, canvas_size), show=False, keys=None,
                                        bgcolor=palette.BACKGROUND)
        self.canvas.set_current()
        self.view = FieldView(self.canvas.central_widget.add_view())
        self.interop = interop.interop_for(self.canvas)
        if host:
            self.interop.force_host("benchmark: the host-upload path was requested")
        self.show()
        self.draw()  # VisPy creates the GL objects at the first draw; the next upload can register them
        self.interop.decide()

    def show(self) -> None:
        m = self.model
        self.view.show(m.picture(highlight=m.changed()))

    def draw(self) -> None:
        from vispy.gloo import gl

        self.canvas.events.draw(region=None)
        gl.glFinish()

    def frame(self) -> None:
        self.view.before_step()
        self.model.step(1)
        self.show()
        self.draw()

    def render_only(self) -> None:
        self.show()
        self.draw()

    def pixels(self):
        return self.canvas.render(alpha=False)

    def close(self) -> None:
        self.interop.release()
        self.canvas.close()


def frames_per_second(work, repeats: int, seconds: float, warmup: int) -> tuple[float, list[float]]:
    """Median frames/s over ``repeats`` timed stretches of at least ``seconds`` each (and 2 frames)."""
    for _ in range(warmup):
        work()
    rates = []
    for _ in range(repeats):
        frames, start = 0, time.perf_counter()
        while True:
            work()
            frames += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds and frames >= 2:
                break
        rates.append(frames / elapsed)
    return statistics.median(rates), rates


def _profile(work, title: str, frames: int = 100) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(frames):
        work()
    profiler.disable()
    print(f"--- profile: {frames} {title} (glFinish = waiting for the GPU)")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


def _model(dim: int, L: int, T: float):
    from latticelab.sim.models.ising.model import IsingModel

    return IsingModel(dim=dim, L=L, T=T, p=0.0, algorithm="metropolis", seed=1, backend="cuda", start="hot")


def run(args) -> tuple[list[dict], list[tuple], str]:
    """Measure every case; returns (JSON cases, table rows, device name)."""
    import vispy

    vispy.use(app=args.app)
    cases, rows, device = [], [], "unknown"
    for dim, L, T in CASES:
        L = args.L2 if dim == 2 else args.L3
        model = _model(dim, L, T)
        device = model.device_name
        measured = {}
        for path in ("interop", "host"):
            bench = FrameBench(model, args.canvas, host=(path == "host"))
            try:
                if path == "interop" and not bench.interop.enabled:
                    raise SystemExit(f"latticelab bench render: CUDA-OpenGL interop is off: {bench.interop.reason}")
                full, full_all = frames_per_second(bench.frame, args.repeats, args.seconds, args.warmup)
                if args.profile and path == "interop":
                    _profile(bench.render_only, f"{dim}D L={L} render-only frames through interop")
                only, only_all = frames_per_second(bench.render_only, args.repeats, args.seconds, args.warmup)
                used = dict(bench.interop.uploads)
            finally:
                bench.close()
            if used[path] == 0 or used["interop" if path == "host" else "host"] != 0:
                raise SystemExit(f"latticelab bench render: the {path} case took the wrong path: uploads {used}")
            measured[path] = (full, only)
            log.info("%dD L=%d %s: full %s, render-only %s", dim, L, path,
                     [round(r, 1) for r in full_all], [round(r, 1) for r in only_all])
        base = f"frame-{dim}d-L{L}"
        (full_i, only_i), (full_h, only_h) = measured["interop"], measured["host"]
        cases.append({"case": f"{base}-interop", "metric": "frames_per_s", "value": round(full_i, 2),
                      "baseline": f"{base}-host", "baseline_value": round(full_h, 2),
                      "ratio": round(full_i / full_h, 2),
                      "render_only": {"interop": round(only_i, 2), "host": round(only_h, 2),
                                      "ratio": round(only_i / only_h, 2)}})
        rows.append((f"{base}", "full frame", full_i, full_h))
        rows.append((f"{base}", "render only", only_i, only_h))
        del model
    return cases, rows, device


def print_rows(rows, device: str, canvas: int) -> None:
    print(f"latticelab bench render on {device}, canvas {canvas}x{canvas}, frames/s (median)")
    print(f"{'case':18} {'frame':12} {'interop':>10} {'host':>10} {'ratio':>8}")
    for case, kind, interop_fps, host_fps in rows:
        print(f"{case:18} {kind:12} {interop_fps:10.1f} {host_fps:10.1f} {interop_fps / host_fps:8.1f}")


def main(args) -> int:
    from latticelab.sim.backend import select_backend

    select_backend("cuda")  # a clear BackendError (exit 2) without CUDA
    from latticelab.sim.params import ParameterError

    for name in ("repeats", "warmup", "canvas", "L2", "L3", "seconds"):
        if getattr(args, name) < (0 if name == "warmup" else 1e-3):
            raise ParameterError(name, f"must be positive; got {getattr(args, name)}")
    cases, rows, device = run(args)
    print_rows(rows, device, args.canvas)
    if not args.no_json:
        from latticelab.bench.report import write_results

        path = write_results("render", device, cases, out_dir=args.out_dir)
        print(f"wrote {path}")
    return 0
