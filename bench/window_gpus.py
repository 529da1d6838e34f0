"""``latticelab bench window-gpus``: the lattice view on a machine with two GPUs, headless (EGL), in one run.

A frame here is the window's frame on a CUDA device (app/frame_loop.py): ``FieldView.before_step()``, the
picture of the last frame's state shown (written into the texture through CUDA-OpenGL interop), the frame's
sweeps queued (``model.advance(n, wait=False)``), the whole scene drawn and ``glFinish``; the observables of a
frame are taken at the next one, so at most two frames are in flight, as in the window's runner. Cases:

- ``dual``: a 2D L^2 Ising lattice (default 4096^2) simulated on the GPU the GL context is on ("one-gpu") and
  on the other GPU ("dual": the thesis's dual-GPU mode, table 7.3: each frame's spins and flips handed over
  to the GL's GPU by peer copy and drawn there), each against the headless rate of the same ``advance(n)``
  calls without drawing on that GPU; at the sweeps per frame that make a 60 frames/s frame of headless work,
  and at one sweep per frame (how fast the view alone can go).
- ``split``: a square L^2 lattice split over both GPUs (default 16384^2: L/2 x L on each; ``--L-split``
  takes several sides; 46336^2, the largest a model allows, puts about 32768^2 sites on each GPU), each GPU
  encoding its slab reduced to the view's size and the GL's GPU gathering the slabs, against the slab engine's
  headless sweeps at their best (plain sweeps replayed from multi-GPU graphs, nothing measured: what
  ``bench multigpu`` times) and, in the details, against the headless ``advance(n)`` of the split run (the
  same frames without drawing). The sweeps per frame make a frame of headless work take SPLIT_WORK_SHARE of a
  1 / SPLIT_FRAME_RATE s frame, the rest left to the picture and the drawing.

Writes bench/results/window-gpus-<gpu>.json (format: docs/benchmarks.md) and prints a table.
"""
from __future__ import annotations

import statistics
import time

from latticelab.bench.common import add_output_arguments, select_cases

CASES = {"dual": {"alias": "d"}, "split": {"alias": "s"}}
FRAME_RATE = 60            # the frames/s the sweeps per frame aim at (dual); split: SPLIT_FRAME_RATE
SPLIT_FRAME_RATE = 30      # issue 40's target for the split view: >= 30 frames/s at >= SPLIT_TARGET of the best
SPLIT_TARGET = 0.7
SPLIT_WORK_SHARE = 0.8     # of a split frame, the headless sweeps' share


def add_arguments(parser) -> None:
    parser.add_argument("--cases", default="all", help="dual, split or all (default)")
    parser.add_argument("--L", type=int, default=4096, help="side of the dual case's 2D lattice")
    parser.add_argument("--L-split", default="16384",
                        help="side(s) of the split case's square 2D lattice, comma-separated (each GPU holds half)")
    parser.add_argument("--canvas", type=int, default=1024, help="side of the square canvas in pixels")
    parser.add_argument("--seconds", type=float, default=1.5, help="length of one timed repetition")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions per mode (median reported)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed frames before each timed repetition")
    add_output_arguments(parser, "window-gpus-<gpu>.json")


class Frames:
    """One model drawn frame by frame into a field view (see the module docstring); ``device``: where the
    model's work is queued (its own GPU; for a split model any). ``changed``: the first frame's highlight
    (default ``model.changed()``; a split model's is better its flip words, not gathered to the host)."""

    def __init__(self, view, model, device: int, sweeps: int, draw: bool = True, changed=None):
        self.view, self.model, self.device, self.sweeps, self.draw = view, model, device, sweeps, draw
        self.pending = None
        self.changed = model.changed() if changed is None else changed

    def frame(self) -> None:
        from vispy.gloo import gl
        cupy = _cupy()
        if self.draw:
            self.view.before_step()
            with cupy.cuda.Device(self.device):
                picture = self.model.picture(self.changed)
            self.view.show(picture)
        with cupy.cuda.Device(self.device):
            batch = self.model.advance(self.sweeps, wait=False)
        if self.draw:
            self.view.viewbox.canvas.events.draw(region=None)
            gl.glFinish()
        if self.pending is not None and not isinstance(self.pending.observables, dict):
            with cupy.cuda.Device(self.device):
                self.pending.observables.result()
        self.pending, self.changed = batch, batch.changed

    def finish(self) -> None:
        cupy = _cupy()
        for device in range(cupy.cuda.runtime.getDeviceCount()):
            cupy.cuda.Device(device).synchronize()


class HeadlessSweeps:
    """The split run's slab engine sweeping at its best, a frame's worth at a time: plain sweeps (no totals, no
    flips) replayed from its multi-GPU graphs, as ``bench multigpu`` times them. The same interface as Frames."""

    def __init__(self, model, sweeps: int):
        self.engine, self.T, self.sweeps = model._split.engine, model.T, sweeps
        self.stream = 1 << 40            # numbers of their own: the model's trajectory is not the point here

    def frame(self) -> None:
        self.engine.sweeps(self.T, 7, self.stream, self.sweeps)
        self.stream += self.sweeps

    def finish(self) -> None:
        self.engine.synchronize()


def _cupy():
    from latticelab.sim.backend import select_backend
    return select_backend("cuda").xp      # made once per process (sim/backend.py)


def frames_per_second(frames: Frames, repeats: int, seconds: float, warmup: int) -> list[float]:
    """frames/s of each of ``repeats`` timed stretches of at least ``seconds`` (and 3 frames), the device
    drained at both ends."""
    rates = []
    for _ in range(repeats):
        for _ in range(warmup):
            frames.frame()
        frames.finish()
        count, start = 0, time.perf_counter()
        while True:
            frames.frame()
            count += 1
            if count >= 3 and time.perf_counter() - start >= seconds:
                break
        frames.finish()
        rates.append(count / (time.perf_counter() - start))
    return rates


def _model(device: int | None, L: int, devices=None):
    """An L^2 Ising model at T_c, p = 0, hot: on one device, or split over ``devices`` (its hot start then drawn
    on the devices: a 65536^2 lattice takes long to draw on the host)."""
    from latticelab.sim.models.ising.model import IsingModel
    cupy = _cupy()
    with cupy.cuda.Device(device or 0):
        model = IsingModel(dim=2, L=L, T=2.269, p=0.0, algorithm="metropolis", seed=1, backend="cuda",
                           start="cold" if devices else "hot", devices=devices)
    if devices:
        model._split.load_random(seed=1)
    return model


def _view(size: int):
    from vispy import scene

    from latticelab.render import palette
    from latticelab.render.field_view import FieldView
    canvas = scene.SceneCanvas(size=(size, size), show=False, keys=None, bgcolor=palette.BACKGROUND)
    canvas.set_current()
    return FieldView(canvas.central_widget.add_view())


def _gl_device(view) -> int:
    """The CUDA device of the view's GL context (a first small picture decides the interop)."""
    from latticelab.render import interop
    model = _model(0, 64)
    frames = Frames(view, model, 0, 1)
    for _ in range(3):
        frames.frame()
    gpu = interop.interop_for(view.viewbox.canvas)
    if not gpu.enabled:
        raise SystemExit(f"latticelab bench window-gpus: CUDA-OpenGL interop is off: {gpu.reason}")
    print(f"interop: {gpu.reason}", flush=True)
    return gpu.device


def _median(rates) -> float:
    return statistics.median(rates)


def dual_cases(args, view) -> list[dict]:
    from latticelab.render import interop
    gl = _gl_device(view)
    other = 1 - gl
    models = {gl: _model(gl, args.L), other: _model(other, args.L)}
    # the sweeps per frame that make a 60 frames/s frame of headless work on the GL's GPU
    probe = _median(frames_per_second(Frames(view, models[gl], gl, 64, draw=False), 1, args.seconds, 2)) * 64
    sweeps = max(1, round(probe / FRAME_RATE))
    print(f"dual: {args.L}^2, headless about {probe:,.0f} sweeps/s: {sweeps} sweeps per frame", flush=True)
    rates = {key: [] for key in ("headless", "one-gpu", "dual", "headless-other", "one-gpu-1", "dual-1")}
    modes = (("headless", gl, sweeps, False), ("one-gpu", gl, sweeps, True), ("dual", other, sweeps, True),
             ("headless-other", other, sweeps, False), ("one-gpu-1", gl, 1, True), ("dual-1", other, 1, True))
    uploads = interop.interop_for(view.viewbox.canvas).uploads
    for _ in range(args.repeats):       # the modes alternate, so that drift in the machine touches them alike
        for key, device, n, draw in modes:
            host = uploads["host"]
            rates[key] += frames_per_second(Frames(view, models[device], device, n, draw), 1, args.seconds,
                                            args.warmup)
            if uploads["host"] != host:
                raise SystemExit(f"latticelab bench window-gpus: the {key} frames went through the host")
    fps = {key: _median(values) for key, values in rates.items()}
    base = f"2d-L{args.L}"
    out = []
    for key, headless, device in (("one-gpu", "headless", gl), ("dual", "headless-other", other)):
        sweeps_per_s, reference = fps[key] * sweeps, fps[headless] * sweeps
        case = {"case": f"window-{key}-{base}", "metric": "sweeps_per_s", "value": round(sweeps_per_s),
                "baseline": f"headless-{base}", "baseline_value": round(reference),
                "ratio": round(sweeps_per_s / reference, 3), "frames_per_s": round(fps[key], 1),
                "sweeps_per_frame": sweeps, "frames_per_s_at_one_sweep_per_frame": round(fps[f"{key}-1"], 1),
                "simulating_device": device, "drawing_device": gl,
                "repeats": {name: [round(r, 2) for r in rates[name]] for name in (key, headless, f"{key}-1")}}
        if key == "dual":       # issue 40's target: >= 60 frames/s at >= 95% of the headless sweep rate
            case["target"] = round(0.95 * reference)
            case["target_met"] = bool(sweeps_per_s >= 0.95 * reference and fps[key] >= 60)
        out.append(case)
    return out


def split_case(args, view, L: int) -> dict:
    from latticelab.render import interop
    from latticelab.sim.multidevice.picture import reduction_step
    model = _model(None, L, devices="0,1")
    probe = _median(frames_per_second(HeadlessSweeps(model, 64), 1, args.seconds, 2)) * 64
    sweeps = max(1, round(probe * SPLIT_WORK_SHARE / SPLIT_FRAME_RATE))
    print(f"split: {model.L}^2 on 2 GPUs, headless sweeps at best about {probe:,.0f} sweeps/s: {sweeps} sweeps "
          f"per frame", flush=True)
    flips = model._split.device_flips
    modes = {"best": lambda: HeadlessSweeps(model, sweeps),
             "headless": lambda: Frames(view, model, 0, sweeps, False, flips()),
             "window": lambda: Frames(view, model, 0, sweeps, True, flips())}
    rates = {key: [] for key in modes}
    uploads = interop.interop_for(view.viewbox.canvas).uploads
    for _ in range(args.repeats):       # the modes alternate, so that drift in the machine touches them alike
        for key, make in modes.items():
            host = uploads["host"]
            rates[key] += frames_per_second(make(), 1, args.seconds, args.warmup)
            if uploads["host"] != host:
                raise SystemExit("latticelab bench window-gpus: the split frames went through the host")
    fps = {key: _median(values) for key, values in rates.items()}
    step = reduction_step(model.shape, view.view_pixels())
    base = f"2d-L{model.L}"
    window, headless, best = (fps[key] * sweeps for key in ("window", "headless", "best"))
    return {"case": f"window-split-{base}", "metric": "sweeps_per_s", "value": round(window),
            "baseline": f"headless-split-sweeps-{base}", "baseline_value": round(best),
            "ratio": round(window / best, 3), "frames_per_s": round(fps["window"], 1),
            "sweeps_per_frame": sweeps, "devices": [0, 1], "reduction_step": step,
            "texture": list(view.image.texture.shape[:2]),
            "headless_advance_sweeps_per_s": round(headless), "ratio_to_headless_advance": round(window / headless, 3),
            "headless_advance_ratio_to_best": round(headless / best, 3),
            "flips_per_ns_best": round(best * model.n_sites / 1e9, 1),
            "target": round(SPLIT_TARGET * best),
            "target_met": bool(window >= SPLIT_TARGET * best and fps["window"] >= SPLIT_FRAME_RATE),
            "repeats": {key: [round(r, 2) for r in values] for key, values in rates.items()}}


def _free_devices(cupy) -> None:
    """Give a finished case's device memory back (a split run's parts hold cycles: collect them first)."""
    import gc
    gc.collect()
    for device in range(cupy.cuda.runtime.getDeviceCount()):
        with cupy.cuda.Device(device):
            cupy.cuda.Device(device).synchronize()
            cupy.get_default_memory_pool().free_all_blocks()


def main(args) -> int:
    import vispy

    from latticelab.sim.params import ParameterError
    for name in ("L", "canvas", "seconds", "repeats"):
        if getattr(args, name) <= 0:
            raise ParameterError(name, f"must be positive; got {getattr(args, name)}")
    try:
        split_sides = [int(side) for side in str(args.L_split).split(",")]
    except ValueError:
        split_sides = []
    if not split_sides or any(side <= 0 or side % 64 for side in split_sides):
        raise ParameterError("L-split", f"must be positive multiples of 64, comma-separated; got {args.L_split!r}")
    from latticelab.sim.models.ising.model import IsingModel
    for side in split_sides:          # refused before anything runs, not after the first cases
        try:
            IsingModel.Params.create(gpu=True, dim=2, L=side, T=2.269, p=0.0, algorithm="metropolis")
        except ParameterError as exc:
            raise ParameterError("L-split", str(exc)) from None
    try:
        names = select_cases(args.cases, CASES)
    except ValueError as exc:
        print(f"latticelab bench window-gpus: {exc}")
        return 2
    cupy = _cupy()
    if cupy.cuda.runtime.getDeviceCount() < 2:
        print("latticelab bench window-gpus: needs two CUDA devices")
        return 1
    vispy.use(app="egl")
    view = _view(args.canvas)
    device = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    device = device.decode() if isinstance(device, bytes) else device
    cases = []
    if "dual" in names:
        cases += dual_cases(args, view)
    if "split" in names:
        for side in split_sides:
            cases.append(split_case(args, view, side))
            _free_devices(cupy)
    print(f"latticelab bench window-gpus on 2x {device}, canvas {args.canvas}^2")
    for case in cases:
        print(f"{case['case']:28} {case['frames_per_s']:8.1f} frames/s {case['value']:>10,} sweeps/s "
              f"({case['ratio']:.1%} of {case['baseline']}, {case['sweeps_per_frame']} a frame)")
    if not args.no_write:
        from latticelab.bench.report import write_results
        path = write_results("window-gpus", f"2x {device}", cases, out_dir=args.out_dir, commit=args.commit)
        print(f"wrote {path}")
    return 0
