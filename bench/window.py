"""``latticelab bench window``: the application's own window, scripted, against the headless engine in the same run.

For each lattice (2D L2^2 and 3D L3^3, Metropolis on the device) it measures:
- the headless rates: ``model.step(n)`` (n = 512 sweeps per call, or the ladder's top if larger; the window
  paused and the device drained first) and ``model.advance(n)`` (what a frame calls: the
  same sweeps plus the per-sweep observables and the union of flips);
- the real window (app/main_window.py, a QTimer frame loop drawing through the field view) at a ladder of
  fixed sweeps per frame: frames/s (draws of the lattice canvas) and sweeps/s; the largest number of sweeps
  per frame that keeps ``--fps`` is the case reported, with its ratio to the headless ``step(n)`` rate; then
  the adaptive frame loop (Steps / frame auto) over ``--seconds`` of steady running: its frames, the longest gap
  between frame ticks (with ``--trace``, what each gap over 50 ms was made of, and each such gap between lattice
  draws) and in how many frames the live plots were drawn;
- the slider-to-screen latency: from ``set_parameter("T", ...)`` to the end of the first lattice draw whose
  frame stepped with the new temperature (median over a few changes);
- for each switch of dimension, lattice size and model, the window running at its default Steps / frame (it
  builds the new model on a worker thread, app/preparing.py): the longest gap between frame-loop ticks and between
  lattice draws from the request until the new model has run for a moment, and the seconds until it was swapped in; and
  where the GUI thread's time went: the swap's parts and the longest step of making the new model's form and plots
  ahead (app/staging.py).
Needs a display with OpenGL (on a headless NVIDIA machine: Xvfb + GLX, see docs/window.md) and PySide6.
"""
from __future__ import annotations

import statistics
import time


def add_arguments(parser) -> None:
    parser.add_argument("--L2", type=int, default=4096, help="side of the 2D lattice")
    parser.add_argument("--L3", type=int, default=256, help="side of the 3D lattice")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each timed window run")
    parser.add_argument("--fps", type=float, default=60.0, help="the frame rate to keep")
    parser.add_argument("--ladder", default="1,2,4,8,16,32,64,128,256,512",
                        help="sweeps per frame to try, comma-separated, increasing")
    parser.add_argument("--backend", default="cuda", help="cuda, or numpy for a dry run on a CPU machine")
    parser.add_argument("--size", default="1400x860", help="window size in pixels, WxH")
    parser.add_argument("--out-dir", default=None, help="where window-<gpu>.json is written (default bench/results)")
    parser.add_argument("--no-json", action="store_true", help="print the table only")
    parser.add_argument("--background-builds", action="store_true",
                        help="build every new model on the worker, as on a device (a CPU dry run of the switches)")
    parser.add_argument("--profile", action="store_true",
                        help="print where the window's time goes during the 2D adaptive run (cProfile)")
    parser.add_argument("--trace", action="store_true",
                        help="for each switch, list what ran on the GUI thread in every gap over 50 ms between "
                             "frame-loop ticks or between lattice draws (bench/window_trace.py; slows every "
                             "event a little)")


class WindowProbe:
    """Counts the lattice canvas's draws and the frame loop's ticks of one MainWindow, with their times, and
    the plot canvas's draws."""

    def __init__(self, window):
        self.window = window
        self.draws: list[float] = []
        window.lattice_canvas.events.draw.connect(self._drawn, position="last")
        self.plot_draws: list[float] = []
        window.plot_canvas.events.draw.connect(lambda event=None: self.plot_draws.append(time.perf_counter()),
                                               position="last")
        self.ticks: list[float] = []
        window.timer.timeout.connect(lambda: self.ticks.append(time.perf_counter()))

    def _drawn(self, event=None) -> None:
        self.draws.append(time.perf_counter())

    def run_for(self, seconds: float) -> tuple[int, int, float]:
        """Let the event loop run; returns (draws, steps, seconds) counted over that time."""
        from PySide6 import QtCore
        steps0, draws0 = self.window.model.step_count, len(self.draws)
        start = time.perf_counter()
        loop = QtCore.QEventLoop()
        QtCore.QTimer.singleShot(int(seconds * 1000), loop.quit)
        loop.exec()
        elapsed = time.perf_counter() - start
        return len(self.draws) - draws0, self.window.model.step_count - steps0, elapsed

    def longest_tick_gap(self, since: float, until: float | None = None) -> float:
        return longest_gap(self.ticks, since, until)

    def longest_draw_gap(self, since: float, until: float | None = None) -> float:
        return longest_gap(self.draws, since, until)


def plot_refreshes(probe, since: float, until: float) -> dict:
    """How the live plots were drawn over [since, until]: draws of their canvas, and the frames (ticks)."""
    return {"plot_draws": sum(since <= t <= until for t in probe.plot_draws),
            "ticks": sum(since <= t <= until for t in probe.ticks)}


def longest_gap(times: list[float], since: float, until: float | None = None) -> float:
    """The longest interval between consecutive ``times`` over [since, until], counting the one that spans
    ``since`` (from the last event before it) and the one still open at ``until``."""
    until = time.perf_counter() if until is None else until
    before = [t for t in times if t < since][-1:]
    inside = [t for t in times if since <= t <= until]
    points = before + inside + [until]
    return max((b - a for a, b in zip(points, points[1:])), default=float("nan"))


def settle(window, timeout: float = 300.0) -> float:
    """Let the event loop run until no new model is being prepared and no change waits for one; seconds taken."""
    from PySide6 import QtWidgets
    start = time.perf_counter()
    while (window.preparer.busy or window._deferred) and time.perf_counter() - start < timeout:
        QtWidgets.QApplication.processEvents()
        time.sleep(0.001)
    return time.perf_counter() - start


def timed_switch(window, probe, label: str, change, after: float = 0.5) -> dict:
    """Request a change (``change()``), wait until the new model runs, let it run ``after`` seconds more; the
    longest gaps between frame ticks and lattice draws over all of that, in ms."""
    since = time.perf_counter()
    swap_before = getattr(window, "last_swap", None)
    change()
    ready = time.perf_counter() - since + settle(window)
    wait_events(after)
    until = time.perf_counter()
    result = {"change": label, "ready_s": ready, "longest_tick_gap_ms": 1000 * probe.longest_tick_gap(since, until),
              "longest_draw_gap_ms": 1000 * probe.longest_draw_gap(since, until),
              "model": window.model.name, "shape": list(window.model.shape)}
    result.update(swap_split(window, swap_before))
    tracer = getattr(probe, "tracer", None)
    if tracer is not None:
        # the gaps between frame-loop ticks, then those between lattice draws (a frame that stepped but whose
        # picture came late: the tick gaps can all be short while the view stands still)
        result["trace"] = tracer.report(probe.ticks, since, until) + \
            tracer.report(probe.draws, since, until, name="draw gap")
        print(f"{label}: longest tick gap {result['longest_tick_gap_ms']:.0f} ms, draw gap "
              f"{result['longest_draw_gap_ms']:.0f} ms")
        print("\n".join(result["trace"]), flush=True)
    return result


def swap_split(window, swap_before=None) -> dict:
    """Where the switch's GUI-thread time went: the swap's parts (title, controls, plots, view, plot data,
    status; app/main_window.py: last_swap) and the making ahead of the new model's form and plots, a slice per
    frame (app/staging.py): how many steps and slices, and the longest step with what it made."""
    staging = getattr(window, "staging", None)
    parts = getattr(window, "last_swap", {}) or {}
    new = parts is not swap_before       # ``swap_before``: the window's last_swap before the change
    out = {"swap_ms": {k: 1000 * v for k, v in parts.items()} if new else {},
           "swap_total_ms": 1000 * sum(parts.values()) if new else 0.0}
    if staging is not None and staging.log:
        seconds, key, what = staging.longest
        out.update(staged_steps=len(staging.log), staged_slices=len({n for n, _k, _w in staging.log}),
                   longest_staged_step_ms=1000 * seconds, longest_staged_step=f"{key}: {what}")
        staging.log = []     # the next switch reports its own
    return out


# Sweeps per call of the headless reference, whatever the ladder: shorter calls pay more of the host's launch cost
# per sweep (a reference of step(64) ran slower and more variably than step(512), which made the window's ratio
# look better than it was)
HEADLESS_SWEEPS = 512


def headless_rates(model, n: int, sync) -> dict:
    from latticelab.bench.report import median_rate
    return {"step_n": median_rate(lambda: model.step(n), n, repeats=5, sync=sync),
            "advance_n": median_rate(lambda: model.advance(n), n, repeats=5, sync=sync), "sweeps_per_call": n}


def timed_run(probe, seconds: float, headless_rate: float) -> tuple[dict, list[float]]:
    """Let the window run ``seconds``: its frames/s, sweeps/s, their ratio to ``headless_rate`` and the median
    frame, with the intervals between its lattice draws (s)."""
    since = time.perf_counter()
    draws, steps, elapsed = probe.run_for(seconds)
    gaps = [b - a for a, b in zip(probe.draws, probe.draws[1:]) if a >= since]
    return ({"frames_per_s": draws / elapsed, "sweeps_per_s": steps / elapsed,
             "ratio_to_headless": steps / elapsed / headless_rate,
             "median_frame_ms": 1000 * statistics.median(gaps) if gaps else float("nan")}, gaps)


def backend_is_gpu(window) -> bool:
    return getattr(window.model, "backend_name", "numpy") == "cuda"


def wait_events(seconds: float) -> None:
    from PySide6 import QtCore
    loop = QtCore.QEventLoop()
    QtCore.QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


def latency(window, probe, temperatures, repeats: int = 5) -> float:
    """Median ms from a temperature change to the end of the first draw after a frame that used it."""
    samples = []
    for i in range(repeats):
        wait_events(0.1)
        start = time.perf_counter()
        window.set_parameter("T", temperatures[i % len(temperatures)])
        ticks_before = len(probe.ticks)
        deadline = start + 5
        from PySide6 import QtWidgets
        while time.perf_counter() < deadline:
            QtWidgets.QApplication.processEvents()
            # the frame tick after the change stepped with the new T; the draw after that tick shows it
            if len(probe.ticks) > ticks_before:
                tick = probe.ticks[ticks_before]
                shown = [t for t in probe.draws if t > tick]
                if shown:
                    samples.append((shown[0] - start) * 1000)
                    break
    return statistics.median(samples) if samples else float("nan")


def results_dir(args):
    """Where the results and the window's pictures go: ``--out-dir``, or bench/results unless ``--no-json``."""
    from pathlib import Path
    from latticelab.bench.cli import RESULTS_DIR
    if args.out_dir:
        return Path(args.out_dir)
    return None if args.no_json else Path(RESULTS_DIR)


def view_check(window, args, tag: str) -> dict:
    """That the frames counted really drew the lattice: the share of the view's pixels that are not the
    background, and of those, how many distinct colours (a drawn lattice of random spins has several); the
    window is saved as window-<tag>.png beside the results."""
    import numpy as np
    from latticelab.render import palette
    from latticelab.sim import io
    image = window.capture("view")
    background = np.asarray(palette.rgba_bytes(palette.BACKGROUND)[:3])
    drawn = np.abs(image[..., :3].astype(int) - background).sum(axis=2) > 6
    colours = len(np.unique(image[drawn][:, :3], axis=0)) if drawn.any() else 0
    out_dir = results_dir(args)
    if out_dir is not None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            io.write_png(out_dir / f"window-{tag}.png", window.capture("window"), overwrite=True)
        except Exception as exc:   # the check itself still stands
            print(f"could not save the window image: {exc}")
    return {"drawn_fraction": float(drawn.mean()), "colours": int(colours)}


def measure_lattice(window, probe, dim: int, L: int, args, ladder, sync) -> dict:
    from latticelab.app.settings import AUTO_STEPS
    from latticelab.sim.models import get_model
    T = 2.0 if dim == 2 else 4.0
    model = get_model("ising").create(backend=args.backend, dim=dim, L=L, T=T, p=0.0, algorithm="metropolis")
    # the window's frames still queued on the device would share it with the first calls of the reference
    # (a 3D reference once came out 24,000 sweeps/s against 33,000): paused and drained first
    was_running = window.running
    window.set_running(False)
    wait_events(0.2)
    sync()
    rates = headless_rates(model, max(HEADLESS_SWEEPS, max(ladder)), sync)
    del model
    window.set_running(was_running)
    window.set_parameter("dim", dim)
    window.set_parameter("L", L)
    window.set_parameter("T", T)
    window.set_parameter("algorithm", "metropolis")
    settle(window)     # the new model is built on a worker; the changes after the first wait for it
    window.adaptive = False
    rows = []
    for per_frame in ladder:
        window.steps_per_frame = per_frame
        wait_events(0.3)   # warm-up: kernels compiled, textures registered
        draws, steps, seconds = probe.run_for(args.seconds)
        rows.append({"sweeps_per_frame": per_frame, "frames_per_s": draws / seconds, "sweeps_per_s": steps / seconds})
        if draws / seconds < args.fps and len(rows) > 1:
            break
    kept = [r for r in rows if r["frames_per_s"] >= args.fps] or rows[:1]
    best = max(kept, key=lambda r: r["sweeps_per_s"])
    window.adaptive = True
    # Steps / frame auto, the CUDA window's default: the pacing decides how many sweeps a frame takes (a fixed cap,
    # the ladder's top of 512, had capped the run: at 2D 4096^2 on a fast GPU 512 sweeps take less than a frame of
    # device time, below what the pacing asks for)
    window.steps_per_frame = AUTO_STEPS
    wait_events(0.5)
    profiler = None
    if args.profile and dim == 2:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    from latticelab.bench.frame_phases import FramePhases, describe
    phases = FramePhases(window).install()
    phases.recording = True
    since = time.perf_counter()
    adaptive, gaps = timed_run(probe, args.seconds, rates["step_n"])
    until = time.perf_counter()
    phases.recording = False
    phases.remove()
    if profiler is not None:
        profiler.disable()
        import pstats
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    if backend_is_gpu(window):   # the device pacing at the run's end (app/pacing.py): its budget, the running
        # excess, and the runner's device time per sweep against the headless run's (the estimate the budget uses)
        per_step = window.runner.seconds_per_step
        adaptive["pacing"] = {"budget_ms": 1000 * window.pacer.budget(), "excess_ms": 1000 * window.pacer.excess_s,
                              "estimated_us_per_sweep": None if per_step is None else 1e6 * per_step,
                              "headless_us_per_sweep": 1e6 / rates["step_n"],
                              # the live plots' refresh beside the device (app/pacing.py PlotPacer)
                              "plot_refresh_interval_s": window._plot_interval(),
                              "plot_refresh_cost_ms": None if window.plot_pacer.cost_s is None
                              else 1000 * window.plot_pacer.cost_s}
    adaptive.update(longest_frame_ms=1000 * max(gaps, default=float("nan")),
                    longest_tick_gap_ms=1000 * probe.longest_tick_gap(since, until),
                    plot_refreshes=plot_refreshes(probe, since, until), phases=phases.per_frame_ms())
    print(f"{dim}D L={L} adaptive: where a frame's time went\n{describe(adaptive['phases'])}", flush=True)
    tracer = getattr(probe, "tracer", None)
    if tracer is not None:     # what the steady running's long gaps were made of
        print(f"{dim}D L={L} adaptive, steady: longest tick gap {adaptive['longest_tick_gap_ms']:.0f} ms")
        print("\n".join(tracer.report(probe.ticks, since, until)), flush=True)
    adaptive["view"] = view_check(window, args, f"{dim}d")
    if backend_is_gpu(window):
        # the other frame order, for comparison (app/main_window.py paint_before_steps): a repaint asked for before
        # the sweeps are queued (which Qt makes at once only when its last composition is a display frame old)
        window.paint_before_steps = True
        wait_events(0.5)
        adaptive["paint_asked_before_the_steps"] = timed_run(probe, args.seconds, rates["step_n"])[0]
        window.paint_before_steps = False
    window.steps_per_frame = best["sweeps_per_frame"]
    window.adaptive = False
    ms = latency(window, probe, (T * 1.2, T * 0.8))
    return {"name": f"window {dim}D L={L} Metropolis", "lattice": f"{dim}D L={L}",
            "headless_step_n_sweeps_per_s": rates["step_n"], "headless_advance_n_sweeps_per_s": rates["advance_n"],
            "headless_sweeps_per_call": rates["sweeps_per_call"],
            "ladder": rows, "kept": best, "adaptive": adaptive,
            "ratio_to_headless": best["sweeps_per_s"] / rates["step_n"],
            "slider_to_screen_ms": ms}


def main(args) -> int:
    import vispy
    from PySide6 import QtWidgets
    vispy.use(app="pyside6")
    from latticelab.app.main_window import MainWindow
    from latticelab.app.settings import Preferences, default_steps_per_frame
    from latticelab.sim.backend import select_backend
    from latticelab.sim.params import ParameterError

    backend = select_backend(args.backend)
    try:
        ladder = sorted({int(v) for v in args.ladder.split(",")})
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise ParameterError("ladder/size",
                             f"need integers like 1,4,16 and 1400x860; got {args.ladder!r}, {args.size!r}")
    if not ladder or ladder[0] < 1:
        raise ParameterError("ladder", "sweeps per frame must be positive integers")
    sync = backend.synchronize if hasattr(backend, "synchronize") else (lambda: None)
    if backend.is_gpu:
        import cupy
        sync = cupy.cuda.Device().synchronize
    tracer = None
    if args.trace:
        from latticelab.bench.window_trace import Tracer, traced_application
        tracer = Tracer()
        tracer.install_classes()
    from latticelab.app.qt_compat import prepare_gl_before_app
    prepare_gl_before_app(backend.is_gpu)     # as the application does
    app = QtWidgets.QApplication.instance() or (traced_application(tracer) if tracer else QtWidgets.QApplication([]))
    window = MainWindow("ising", {"dim": 2, "L": 64, "algorithm": "metropolis"}, Preferences(None),
                        interactive=False, backend=args.backend)
    window.resize(width, height)
    if args.background_builds:
        window.background_builds = True
    window.stage_ahead = True      # as the application does: the other models' forms and plots made while idle
    window.show()
    from latticelab.app.collector import freeze_after_start
    freeze_after_start(window)     # as the application does after start-up
    probe = WindowProbe(window)
    if tracer is not None:
        tracer.install_window(window)
        probe.tracer = tracer
    wait_events(0.5)
    renderer = window.lattice_canvas.context.shared.parser.capabilities.get("gl_renderer", "?") \
        if hasattr(window.lattice_canvas.context.shared.parser, "capabilities") else "?"
    try:
        from vispy.gloo import gl
        window.lattice_canvas.set_current()
        renderer = gl.glGetParameter(gl.GL_RENDERER)
    except Exception:
        pass
    window.set_running(True)
    # the application makes the other models' forms and plots while idle, from 2 s after start-up: measured
    # after that, as a user who switches some seconds after opening the window
    ahead_start = time.perf_counter()
    while not window.staged_ahead and time.perf_counter() - ahead_start < 60:
        wait_events(0.05)
    staged_ahead_s = time.perf_counter() - ahead_start
    window.staging.log = []        # the switches below report what they stage themselves
    print(f"the other models' forms and plots made ahead {staged_ahead_s:.1f} s after the window started running",
          flush=True)
    cases = [measure_lattice(window, probe, 2, args.L2, args, ladder, sync),
             measure_lattice(window, probe, 3, args.L3, args, ladder, sync)]
    # responsiveness while switching: dimension, size, model and back, the frame loop running at the window's
    # default Steps / frame (auto on a CUDA device, 1 on the CPU)
    window.adaptive = True
    window.steps_per_frame = default_steps_per_frame(window.model.backend_name)
    switches = []
    for name, value in (("dim", 2), ("L", args.L2 // 2), ("L", args.L2), ("dim", 3)):
        switches.append(timed_switch(window, probe, f"{name} = {value}",
                                     lambda: window.set_parameter(name, value)))
    for model_name in ("cahn-hilliard", "cortex", "ising"):
        switches.append(timed_switch(window, probe, f"model {model_name}", lambda: window.switch_model(model_name)))
    cases.append({"name": "longest frame gap while switching", "switches": switches,
                  "longest_gap_ms": max(s["longest_tick_gap_ms"] for s in switches),
                  "made_ahead_after_s": round(staged_ahead_s, 2)})
    window.set_running(False)
    device = window.model.device_name if backend.is_gpu else "CPU"
    window.close()
    app.processEvents()
    print(f"device: {device}; GL renderer: {renderer}")
    for c in cases[:2]:
        k = c["kept"]
        print(f"{c['lattice']:>12}: headless step(n) {c['headless_step_n_sweeps_per_s']:,.0f} sweeps/s, advance(n) "
              f"{c['headless_advance_n_sweeps_per_s']:,.0f}; window {k['sweeps_per_s']:,.0f} sweeps/s at "
              f"{k['frames_per_s']:.1f} frames/s ({k['sweeps_per_frame']} per frame) = {c['ratio_to_headless']:.0%}"
              f" of headless; adaptive {c['adaptive']['sweeps_per_s']:,.0f} sweeps/s "
              f"({c['adaptive']['ratio_to_headless']:.0%}) at {c['adaptive']['frames_per_s']:.1f} frames/s (median "
              f"frame {c['adaptive']['median_frame_ms']:.1f} ms, longest {c['adaptive']['longest_frame_ms']:.1f} ms, "
              f"longest tick gap {c['adaptive']['longest_tick_gap_ms']:.1f} ms; plots drawn in "
              f"{c['adaptive']['plot_refreshes']['plot_draws']} of {c['adaptive']['plot_refreshes']['ticks']} frames);"
              f" slider to screen {c['slider_to_screen_ms']:.1f} ms; view drawn on "
              f"{c['adaptive']['view']['drawn_fraction']:.0%} of its pixels, "
              f"{c['adaptive']['view']['colours']} colours")
        pacing = c["adaptive"].get("pacing")
        if pacing:
            estimate = pacing["estimated_us_per_sweep"]
            estimate = "-" if estimate is None else f"{estimate:.2f}"
            print(f"{'':>14}pacing at the end: budget {pacing['budget_ms']:.2f} ms of steps a frame, running excess "
                  f"{pacing['excess_ms']:.2f} ms; device time a sweep estimated {estimate} us, headless "
                  f"{pacing['headless_us_per_sweep']:.2f} us")
            if pacing.get("plot_refresh_interval_s") is not None:
                cost = pacing["plot_refresh_cost_ms"]
                print(f"{'':>14}live plots refreshed every {pacing['plot_refresh_interval_s']:.2f} s, a refresh "
                      f"drawn in {'-' if cost is None else f'{cost:.1f}'} ms of the GUI thread")
        other = c["adaptive"].get("paint_asked_before_the_steps")
        if other:
            print(f"{'':>14}a repaint asked before the steps instead: {other['sweeps_per_s']:,.0f} sweeps/s "
                  f"({other['ratio_to_headless']:.0%}) at {other['frames_per_s']:.1f} frames/s (median frame "
                  f"{other['median_frame_ms']:.1f} ms)")
        for r in c["ladder"]:
            print(f"{'':>14}{r['sweeps_per_frame']:>5} per frame: {r['frames_per_s']:6.1f} frames/s "
                  f"{r['sweeps_per_s']:>10,.0f} sweeps/s")
    print(f"longest frame gap while switching dimension, size and model: {cases[2]['longest_gap_ms']:.0f} ms")
    for sw in cases[2]["switches"]:
        print(f"{'':>14}{sw['change']:<22} ready after {sw['ready_s']:6.2f} s; longest tick gap "
              f"{sw['longest_tick_gap_ms']:7.1f} ms, draw gap {sw['longest_draw_gap_ms']:7.1f} ms "
              f"({sw['model']} {'x'.join(map(str, sw['shape']))})")
        if sw.get("swap_ms"):
            parts = ", ".join(f"{k} {v:.1f}" for k, v in sw["swap_ms"].items())
            print(f"{'':>16}swap {sw['swap_total_ms']:.1f} ms ({parts})")
        if sw.get("staged_steps"):
            print(f"{'':>16}made ahead in {sw['staged_steps']} steps over {sw['staged_slices']} frames; longest step "
                  f"{sw['longest_staged_step_ms']:.1f} ms ({sw['longest_staged_step']})")
    for c in cases:
        c["gl_renderer"] = str(renderer)
    if not args.no_json:
        from latticelab.bench.report import write_results
        path = write_results("window", device, cases, out_dir=str(results_dir(args)))
        print(f"wrote {path}")
    return 0
