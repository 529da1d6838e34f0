"""``latticelab bench responsiveness``: does the real window keep answering while slow work runs on the CPU?

The slow cases of issue 16, each in the application's own window (app/main_window.py) on the NumPy backend:
- Swendsen-Wang on a 2D L2^2 lattice, running (one step takes seconds at L = 2048: it runs on the window's
  stepping worker, app/stepping.py);
- the Spectrum dock (app/spectral_panel.py) shown on a 3D L3^3 lattice, with the simulation running and then
  paused (one spectrum takes seconds at L = 128: it is computed on the dock's worker thread).
For each case, over ``--seconds`` of the event loop it measures:
- the longest gap between two ticks of the window's frame loop (its QTimer, 15 ms apart when all is well;
  paused, the loop is idle by design and no frame gap is reported);
- the longest gap between two firings of a separate ``--tick-ms`` QTimer: the longest time the event loop was
  not running, whatever held it (a draw, a step, a copy, Python's GIL held by a worker);
- the steps committed to the model in that time, the lattice draws (and the longest), the spectra shown;
- whether a menu (Help) opens when asked halfway through, and how late the request was served;
- what the GUI thread did in the longest gap, and in each gap over LONG_GAP_MS: time on a core, waiting for one,
  neither (its scheduler counters, Linux), and how slow the machine's cores ran meanwhile (bench/reference_loop.py:
  a fixed piece of work timed every 10 ms in a separate process per core); with the most time the GUI thread spent
  on a core between two probe ticks;
- the full collections of Python's cycle collector and the longest (every thread waits while one runs). The
  window's objects alive after start-up are frozen first (app/collector.py ``freeze_after_start``), as the
  application does.
Before the first case the window makes ahead what the application's window makes while idle after start-up
(``MainWindow.stage_ahead``: on in the application, off in scripted windows until set; ``make_ahead``: the live
plots' glyphs, the hidden docks' first shows, the other models' forms and plots; until 7b47cfc the cases ran
without it, the glyphs then rendered inside the first cases' plot paints) and the live plots' first picture.
A last case brings each dock tab never shown so far to the front (the first show of a dock: its canvas's first
paint), paused on the 3D lattice: the longest event-loop gap in ``--tab-seconds`` after each raise.
Timings depend on what else the machine does: a worker thread and the GUI thread share the CPU's cores.
Needs a display with OpenGL (Xvfb with Mesa's software renderer is enough) and PySide6.
"""
from __future__ import annotations

import os
import statistics
import time

from latticelab.bench.reference_loop import ReferenceLoop

LONG_GAP_MS = 40.0    # gaps longer than this are each listed with what the GUI thread and the cores did


def add_arguments(parser) -> None:
    parser.add_argument("--L2", type=int, default=2048, help="side of the 2D Swendsen-Wang lattice")
    parser.add_argument("--L3", type=int, default=128, help="side of the 3D lattice under the Spectrum dock")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each measured run")
    parser.add_argument("--tick-ms", type=int, default=5, help="period of the event-loop probe timer")
    parser.add_argument("--tab-seconds", type=float, default=2.0,
                        help="how long each dock tab's first show is watched")
    parser.add_argument("--size", default="1400x860", help="window size in pixels, WxH")
    parser.add_argument("--out-dir", default=None,
                        help="where responsiveness-CPU.json is written (default bench/results)")
    parser.add_argument("--no-json", action="store_true", help="print the table only")
    parser.add_argument("--slug", default="CPU",
                        help="the results file is responsiveness-SLUG.json (another machine or renderer: another slug)")


class EventLoopProbe:
    """Times of the window's frame-loop ticks, of lattice draws, of a fast probe timer's firings and of the
    cycle collector's full (generation 2) collections, which stop every thread while they run."""

    def __init__(self, window, tick_ms: int, reference: bool = True):
        import gc

        from PySide6 import QtCore
        self.window = window
        self.full_collections: list[tuple[float, float]] = []   # (end, seconds) of each generation-2 collection
        self._collection_start = None
        gc.callbacks.append(self._collection)
        self.frame_ticks: list[float] = []
        self.loop_ticks: list[float] = []
        self.draws: list[float] = []          # ends of lattice draws
        self.draw_times: list[float] = []     # their durations
        self._draw_start = None
        window.timer.timeout.connect(lambda: self.frame_ticks.append(time.perf_counter()))
        window.lattice_canvas.events.draw.connect(self._draw_starts, position="first")
        window.lattice_canvas.events.draw.connect(self._draw_ends, position="last")
        # The GUI thread's scheduler counters at each probe tick (Linux: /proc/thread-self/schedstat, the time
        # the thread has run on a core and waited in a run queue for one, ns), so that a long gap can be split
        # into the window's own work, waiting for a core (other processes had them) and neither (blocked:
        # a lock such as the GIL, or asleep). Opened here, on the GUI thread: thread-self names the opener.
        self.loop_cpu: list[tuple[int, int]] = []
        try:
            self._schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._schedstat = None
        self.reference = ReferenceLoop() if reference else None      # how fast the cores ran meanwhile
        self.timer = QtCore.QTimer(interval=max(1, tick_ms), timerType=QtCore.Qt.TimerType.PreciseTimer)
        self.timer.timeout.connect(self._loop_tick)
        self.timer.start()

    def _loop_tick(self) -> None:
        self.loop_ticks.append(time.perf_counter())
        if self._schedstat is not None:
            run_ns, wait_ns = os.pread(self._schedstat, 128, 0).split()[:2]
            self.loop_cpu.append((int(run_ns), int(wait_ns)))

    def gap_parts(self, start: float, end: float, over_ms: float = LONG_GAP_MS) -> dict | None:
        """The gaps between probe ticks in [start, end], split by what the GUI thread did meanwhile (ms): on a
        core, waiting for one, neither; with, where the reference loop ran, its slowest run then as a multiple
        of its median over [start, end] (``slowdown``: how much slower the machine's cores ran). Returns the
        longest gap, every gap over ``over_ms``, and the most time on a core between any two ticks (the longest
        stretch of the window's own work the event loop waited for). None without the counters."""
        if not self.loop_cpu or len(self.loop_cpu) != len(self.loop_ticks):
            return None
        inside = [i for i, t in enumerate(self.loop_ticks) if start <= t <= end]
        pairs = list(zip(inside, inside[1:]))
        if not pairs:
            return None
        typical = self.reference.typical(start, end) if self.reference else None

        def parts(i, j):
            a, b = self.loop_ticks[i], self.loop_ticks[j]
            on_core = (self.loop_cpu[j][0] - self.loop_cpu[i][0]) / 1e6
            waiting = (self.loop_cpu[j][1] - self.loop_cpu[i][1]) / 1e6
            return {"at_s": a - start, "gap_ms": 1000 * (b - a), "on_core_ms": on_core,
                    "waiting_for_core_ms": waiting, "neither_ms": max(0.0, 1000 * (b - a) - on_core - waiting),
                    "slowdown": self.reference.slowdown(a, b, typical) if self.reference else None}

        def gap(pair):
            return self.loop_ticks[pair[1]] - self.loop_ticks[pair[0]]

        return {"longest_gap": parts(*max(pairs, key=gap)),
                "long_gap_ms": over_ms,
                "long_gaps": [parts(i, j) for i, j in pairs if 1000 * gap((i, j)) > over_ms],
                "most_on_core_between_ticks_ms": max((self.loop_cpu[j][0] - self.loop_cpu[i][0]) / 1e6
                                                     for i, j in pairs)}

    def _collection(self, phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        now = time.perf_counter()
        if phase == "start":
            self._collection_start = now
        elif self._collection_start is not None:
            self.full_collections.append((now, now - self._collection_start))
            self._collection_start = None

    def stop(self) -> None:
        import gc
        self.timer.stop()
        if self._schedstat is not None:
            os.close(self._schedstat)
            self._schedstat = None
        if self.reference is not None:
            self.reference.stop()
        if self._collection in gc.callbacks:
            gc.callbacks.remove(self._collection)

    def _draw_starts(self, event=None) -> None:
        self._draw_start = time.perf_counter()

    def _draw_ends(self, event=None) -> None:
        end = time.perf_counter()
        self.draws.append(end)
        if self._draw_start is not None:
            self.draw_times.append(end - self._draw_start)
            self._draw_start = None

    @staticmethod
    def gaps(times: list[float], start: float, end: float) -> list[float]:
        """Gaps between consecutive events in [start, end], counting the run's start and end as events: a
        loop that never ticks has one gap as long as the run."""
        inside = [start, *(t for t in times if start <= t <= end), end]
        return [b - a for a, b in zip(inside, inside[1:])]


def wait_events(seconds: float) -> None:
    from PySide6 import QtCore
    loop = QtCore.QEventLoop()
    QtCore.QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


def settle(window, timeout: float = 120.0) -> None:
    """Pause and let a batch in flight finish (its steps are committed) and the live plots' picture be complete
    where they are on screen (paused, a refresh is drawn a part per pass of the event loop: at start-up the
    first picture takes many such paints on a software renderer), so the next case starts clean."""
    window.set_running(False)     # the frame loop keeps ticking until it has collected the batch in flight
    deadline = time.perf_counter() + timeout

    def plots_pending() -> bool:
        return window.plot_canvas.stale and window.frames.plots_on_screen()

    while (window.stepper.busy or plots_pending()) and time.perf_counter() < deadline:
        wait_events(0.05)
    wait_events(0.2)


def measure(window, probe: EventLoopProbe, seconds: float, menu, first_step_within: float = 120.0) -> dict:
    """Run the event loop for ``seconds``; halfway through ask ``menu`` to open (a QTimer, as a click would be
    queued), close it 0.3 s later (or at the end of the run). A running window's run goes on past ``seconds``
    until it has committed a step (up to ``first_step_within`` seconds), so that a short run on a busy machine
    still measures frames, not only the start of the first batch."""
    from PySide6 import QtCore
    opened = {"asked": None, "served": None, "shown": False, "about_to_show": False}
    closer = QtCore.QTimer(singleShot=True, interval=300)

    def mark_about_to_show():
        opened["about_to_show"] = True

    def open_menu():
        opened["served"] = time.perf_counter()
        menu.popup(window.mapToGlobal(QtCore.QPoint(60, 30)))
        closer.start()

    def close_menu():
        opened["shown"] = opened["shown"] or menu.isVisible()
        menu.hide()

    closer.timeout.connect(close_menu)
    menu.aboutToShow.connect(mark_about_to_show)
    steps0, draws0 = window.model.step_count, len(probe.draw_times)
    start = time.perf_counter()
    opened["asked"] = start + int(seconds * 500) / 1000
    opener = QtCore.QTimer(singleShot=True, interval=int(seconds * 500),
                           timerType=QtCore.Qt.TimerType.PreciseTimer)
    opener.timeout.connect(open_menu)
    opener.start()
    wait_events(seconds)
    while (window.running and window.model.step_count == steps0
           and time.perf_counter() - start < first_step_within):
        wait_events(0.05)
    end = time.perf_counter()
    opener.stop()            # not served within the run: the menu did not open
    menu.aboutToShow.disconnect(mark_about_to_show)
    if closer.isActive():    # the run ended before the close was due
        closer.stop()
        close_menu()
    frame_gaps = probe.gaps(probe.frame_ticks, start, end)
    loop_gaps = probe.gaps(probe.loop_ticks, start, end)
    served = opened["served"]
    running = window.running      # paused, the frame loop stops ticking by design: no frame gaps to report
    return {"seconds": end - start,
            "longest_frame_gap_ms": 1000 * max(frame_gaps) if running else None,
            "median_frame_gap_ms": 1000 * statistics.median(frame_gaps) if running else None,
            "frame_ticks": sum(start <= t <= end for t in probe.frame_ticks),
            "longest_event_loop_gap_ms": 1000 * max(loop_gaps),
            "event_loop_gap_parts": probe.gap_parts(start, end),
            "event_loop_ticks": sum(start <= t <= end for t in probe.loop_ticks),
            "lattice_draws": sum(start <= t <= end for t in probe.draws),
            "longest_lattice_draw_ms": (1000 * max(probe.draw_times[draws0:])
                                        if len(probe.draw_times) > draws0 else None),
            "full_collections": sum(start <= t <= end for t, _ in probe.full_collections),
            "longest_full_collection_ms": max((1000 * d for t, d in probe.full_collections if start <= t <= end),
                                              default=None),
            "steps_committed": window.model.step_count - steps0,
            "menu_opened": bool(opened["about_to_show"] and opened["shown"]),
            "menu_request_served_after_ms": None if served is None else 1000 * (served - opened["asked"])}


def case_swendsen_wang(window, probe, args) -> dict:
    window.set_parameter("L", args.L2, also={"dim": 2, "algorithm": "swendsen-wang", "T": 2.269, "p": 0.0})
    window.adaptive = True                 # "keep frames under 30 ms" (the default)
    window.set_running(True)
    wait_events(0.5)                       # the first batch starts on the worker
    result = measure(window, probe, args.seconds, window.help_menu)
    result["status"] = window.status_labels["steps_per_s"].text()
    settle(window)
    return {"name": f"Swendsen-Wang 2D L={args.L2}, running", "lattice": f"2D L={args.L2}",
            "algorithm": "swendsen-wang", **result}


def case_spectrum(window, probe, args, running: bool) -> dict:
    panel = window.spectral_panel
    shown: list[float] = []
    draw = panel._show

    def counting_show(job, result, *rest):  # count the spectra drawn and how long each took on the worker
        shown.append(result.seconds)
        return draw(job, result, *rest)

    panel._show = counting_show
    panel.hide()
    window.set_running(running)
    wait_events(0.5 if running else 0.2)
    jobs0 = panel.jobs_started
    panel.show()
    panel.raise_()                         # the Spectrum tab in front (it shares the dock area with the plots)
    result = measure(window, probe, args.seconds, window.help_menu)
    result.update({"spectrum_jobs_started": panel.jobs_started - jobs0, "spectra_shown": len(shown),
                   "spectrum_worker_s": [round(s, 3) for s in shown],
                   "spectrum_in_flight_at_end": panel.computing})
    del panel._show                        # the class's method again
    settle(window)
    panel.refresh()                        # let a job in flight finish before the next case
    window.plot_dock.raise_()              # hidden while in front, it would bring the next tab (a dock not shown
    panel.hide()                           # yet) to the front: that first show belongs to the last case
    state = "running" if running else "paused"
    return {"name": f"Spectrum dock shown, 3D L={args.L3} Metropolis, {state}", "lattice": f"3D L={args.L3}",
            "algorithm": "metropolis", **result}


def make_ahead(window, timeout: float = 180.0) -> bool:
    """Let the window make ahead, while idle, what the application's window makes ahead a few seconds after
    start-up (``MainWindow.stage_ahead``, off in scripted windows until set: the live plots' glyphs, the hidden
    docks' first shows, the other models' forms and plots); True once all is made."""
    window.set_running(False)
    window.stage_ahead = True
    window.timer.start()          # paused, the frame loop had stopped: it runs while something is to be made
    deadline = time.perf_counter() + timeout
    while not window.staged_ahead and time.perf_counter() < deadline:
        wait_events(0.1)
    return window.staged_ahead


def case_first_tabs(window, probe, args) -> dict:
    """Each dock tabified with the live plots and not shown yet, brought to the front in turn (as a click on its
    tab), once the window has made ahead what it makes while idle; the live plots in front again between."""
    from PySide6 import QtWidgets
    staged = make_ahead(window)
    wait_events(0.5)
    plots = window.plot_dock
    tabs = {}
    for dock in window.tabifiedDockWidgets(plots):
        if dock.isHidden() or not isinstance(dock, QtWidgets.QDockWidget):
            continue
        start = time.perf_counter()
        dock.raise_()
        wait_events(args.tab_seconds)
        end = time.perf_counter()
        tabs[dock.windowTitle()] = round(1000 * max(probe.gaps(probe.loop_ticks, start, end)), 1)
        plots.raise_()
        wait_events(0.5)
    longest = max(tabs.values(), default=None)
    return {"name": "first show of each dock tab, 3D lattice paused", "lattice": f"3D L={args.L3}",
            "algorithm": "metropolis", "made_ahead_first": staged, "longest_gap_after_raise_ms": tabs,
            "longest_event_loop_gap_ms": longest}


def describe_gap_parts(case: dict) -> str:
    """What the GUI thread and the machine's cores did in the longest gap between probe ticks; how many gaps were
    long (over ``long_gap_ms``) and in how many of those the reference loop ran at least twice as slow as usual."""
    parts = case.get("event_loop_gap_parts")
    if not parts:
        return ""
    g = parts["longest_gap"]
    slow = "" if g["slowdown"] is None else f", the reference loop's slowest run {g['slowdown']:.1f}x its median"
    long_gaps = parts["long_gaps"]
    slowed = sum((x["slowdown"] or 0) >= 2 for x in long_gaps)
    return (f" (the GUI thread on a core {g['on_core_ms']:.0f} ms of it, waiting for a core "
            f"{g['waiting_for_core_ms']:.0f} ms, neither {g['neither_ms']:.0f} ms{slow}; on a core at most "
            f"{parts['most_on_core_between_ticks_ms']:.0f} ms between two probe ticks; gaps over "
            f"{parts['long_gap_ms']:g} ms: {len(long_gaps)}, {slowed} of them with the reference loop 2x slow or more)")


def collections(case: dict) -> str:
    longest = case["longest_full_collection_ms"]
    if not case["full_collections"]:
        return "no full garbage collection"
    return f"{case['full_collections']} full garbage collection(s), longest {longest:.0f} ms"


def main(args) -> int:
    import vispy
    from PySide6 import QtWidgets
    vispy.use(app="pyside6")
    from latticelab.app.main_window import MainWindow
    from latticelab.app.settings import Preferences
    from latticelab.sim.params import ParameterError

    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise ParameterError("size", f"need a size like 1400x860; got {args.size!r}") from None
    if args.seconds <= 0 or args.L2 < 4 or args.L3 < 4:
        raise ParameterError("seconds/L2/L3", "need seconds > 0 and lattice sides >= 4")
    from latticelab.app.qt_compat import prepare_gl_before_app
    prepare_gl_before_app(gpu=False)     # as the application does for models on the CPU
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    window = MainWindow("ising", {"dim": 2, "L": 64, "algorithm": "metropolis"}, Preferences(None),
                        interactive=False, backend="numpy")
    window.resize(width, height)
    window.show()
    window.set_running(False)
    from latticelab.app.collector import freeze_after_start
    freeze_after_start(window)             # as the application does after start-up
    probe = EventLoopProbe(window, args.tick_ms)
    try:
        wait_events(0.5)
        staged = make_ahead(window)        # what the application makes while idle after start-up, as it does
        settle(window)                     # the start-up's own paints (the plots' first picture) are not a case
        from latticelab.app.help_menu import opengl_info
        renderer = opengl_info(window.lattice_canvas).get("OpenGL renderer", "an unknown OpenGL renderer")
        from latticelab.app.raster_canvas import presents_in_raster
        canvases = "shown as images" if presents_in_raster(window.lattice_canvas) else "OpenGL widgets"
        cases = [case_swendsen_wang(window, probe, args)]
        window.set_parameter("dim", 3, also={"L": args.L3, "algorithm": "metropolis", "T": 4.0, "p": 0.0})
        cases.append(case_spectrum(window, probe, args, running=True))
        cases.append(case_spectrum(window, probe, args, running=False))
        cases.append(case_first_tabs(window, probe, args))
    finally:                               # main may run inside a longer process (a test): leave it as it was
        import gc
        probe.stop()
        window.close()
        app.processEvents()
        gc.unfreeze()
    # the cores this process may run on (a `taskset` run counts what it was given, not the machine's)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    device = f"CPU, {cores} cores, NumPy; window drawn by {renderer}, canvases {canvases}"
    print(f"device: {device}; event-loop probe every {args.tick_ms} ms; {args.seconds:g} s per case; "
          f"made ahead after start-up: {'yes' if staged else 'NO'}")
    for c in cases:
        if "longest_gap_after_raise_ms" in c:
            tabs = ", ".join(f"{name} {gap:.0f} ms" for name, gap in c["longest_gap_after_raise_ms"].items())
            print(f"{c['name']} (made ahead first: {'yes' if c['made_ahead_first'] else 'NO'}): longest "
                  f"event-loop gap after the raise: {tabs or 'no tab to show'}")
            continue
        served = c["menu_request_served_after_ms"]
        extra = ""
        if "spectra_shown" in c:
            worker = ", ".join(f"{s:.2f}" for s in c["spectrum_worker_s"]) or "-"
            extra = (f"; spectra shown {c['spectra_shown']} (worker s: {worker}), "
                     f"{'one still computing' if c['spectrum_in_flight_at_end'] else 'none in flight'}")
        draw_ms = c["longest_lattice_draw_ms"]
        longest_draw = "" if draw_ms is None else f" (longest {draw_ms:.0f} ms)"
        frames = ("frame loop idle (paused)" if c["longest_frame_gap_ms"] is None else
                  f"longest gap between frame-loop ticks {c['longest_frame_gap_ms']:.0f} ms (median "
                  f"{c['median_frame_gap_ms']:.0f} ms, {c['frame_ticks']} ticks)")
        print(f"{c['name']}: {frames}; longest event-loop gap {c['longest_event_loop_gap_ms']:.0f} ms"
              f"{describe_gap_parts(c)}; {c['steps_committed']} steps committed, "
              f"{c['lattice_draws']} lattice draws{longest_draw}; menu "
              f"{'opened' if c['menu_opened'] else 'did NOT open'}"
              f"{'' if served is None else f' ({served:.0f} ms late)'}{extra}; "
              f"{collections(c)}")
    if not args.no_json:
        from latticelab.bench.cli import RESULTS_DIR
        from latticelab.bench.report import write_results
        path = write_results("responsiveness", device, cases, out_dir=args.out_dir or str(RESULTS_DIR),
                             slug=args.slug)
        print(f"wrote {path}")
    return 0
