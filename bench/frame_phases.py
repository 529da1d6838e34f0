"""Where a window frame's time goes: the frame loop's parts timed on the GUI thread, for `bench window`.

How close the window comes to the headless sweep rate depends on whether the host waits for the device (the
runner's collect), draws slowly, or spends the time between ticks in Qt (docs/design/window-gpu.md); that decides
what to change, so the adaptive run records, per tick: the whole
``_frame`` call, its view refresh (the texture written through the interop), the runner's wait for the last
batch, the launch of the next one, the plots and status at the frame's end, and the lattice and plot canvases'
paints (which run after ``_frame``, in Qt's paint events). Wrapping is by instance attributes, so only the
measured window is affected, and ``remove`` puts everything back.
"""
from __future__ import annotations

import time
from collections import defaultdict


class FramePhases:
    def __init__(self, window):
        self.window = window
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self.ticks: list[float] = []
        self._wrapped: list[tuple[object, str]] = []
        self._draw_hooks: list[tuple[object, object, object]] = []
        self._events: EventClock | None = None
        self.recording = False

    def install(self) -> "FramePhases":
        w = self.window
        self._wrap(w, "_frame", "frame (whole tick)")
        self._wrap(w, "_refresh_view", "view refresh")
        self._wrap(w, "_frame_end", "plots and status")
        self._wrap(w.runner, "collect", "wait for the last batch")
        self._wrap(w.runner, "advance", "advance (wait + launch)")
        self._time_draws(w.lattice_canvas, "lattice paint")
        self._time_draws(w.plot_canvas, "plot paint")
        self._events = EventClock().install()
        return self

    def _wrap(self, owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            if not self.recording:
                return original(*args, **kwargs)
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.totals[label] += time.perf_counter() - start
                self.counts[label] += 1
                if label == "frame (whole tick)":
                    self.ticks.append(start)

        setattr(owner, name, timed)
        self._wrapped.append((owner, name))

    def _time_draws(self, canvas, label: str) -> None:
        started = {}

        def first(event=None):
            started["t"] = time.perf_counter()

        def last(event=None):
            if self.recording and "t" in started:
                self.totals[label] += time.perf_counter() - started.pop("t")
                self.counts[label] += 1

        canvas.events.draw.connect(first, position="first")
        canvas.events.draw.connect(last, position="last")
        self._draw_hooks.append((canvas, first, last))

    def remove(self) -> None:
        for owner, name in self._wrapped:
            try:
                delattr(owner, name)      # the class's method shows through again
            except AttributeError:
                pass
        if self._events is not None:
            self._events.remove()     # its totals stay, for per_frame_ms
        for canvas, first, last in self._draw_hooks:
            canvas.events.draw.disconnect(first)
            canvas.events.draw.disconnect(last)
        self._wrapped, self._draw_hooks = [], []

    def per_frame_ms(self) -> dict:
        """Mean ms per tick of each part, with how many times it ran; 'between ticks' is the period not spent
        in ``_frame`` (Qt's events and the paints)."""
        ticks = max(1, self.counts["frame (whole tick)"])
        out = {label: {"ms_per_tick": 1000 * total / ticks, "calls": self.counts[label]}
               for label, total in self.totals.items()}
        if len(self.ticks) > 1:
            period = (self.ticks[-1] - self.ticks[0]) / (len(self.ticks) - 1)
            inside = self.totals["frame (whole tick)"] / ticks
            out["tick period"] = {"ms_per_tick": 1000 * period, "calls": len(self.ticks)}
            out["between ticks"] = {"ms_per_tick": 1000 * (period - inside), "calls": len(self.ticks) - 1}
        if self._events is not None:
            for kind, (seconds, calls) in self._events.largest(6):
                out[f"Qt event {kind}"] = {"ms_per_tick": 1000 * seconds / ticks, "calls": calls}
        return out


class EventClock:
    """The GUI thread's time by Qt event type: an application-wide event filter notes when each event arrives,
    and the time until the next one arrives is charged to it (its handling, and any wait after it). With the
    frame timer at interval 0 the loop never idles, so this splits 'between ticks' into the events that fill it
    (the top-level window's UpdateRequest is where Qt paints and composes the window)."""

    def __init__(self):
        from PySide6 import QtCore

        clock = self

        class Filter(QtCore.QObject):
            def eventFilter(self, receiver, event):
                clock.arrived(event.type())
                return False

        self._filter = Filter()
        self.totals: dict[str, list] = {}
        self._last = None

    def install(self) -> "EventClock":
        from PySide6 import QtWidgets
        QtWidgets.QApplication.instance().installEventFilter(self._filter)
        return self

    def remove(self) -> None:
        from PySide6 import QtWidgets
        QtWidgets.QApplication.instance().removeEventFilter(self._filter)

    def arrived(self, kind) -> None:
        now = time.perf_counter()
        if self._last is not None:
            name, since = self._last
            entry = self.totals.setdefault(name, [0.0, 0])
            entry[0] += now - since
            entry[1] += 1
        self._last = (getattr(kind, "name", str(kind)), now)

    def largest(self, k: int) -> list:
        return sorted(((n, tuple(v)) for n, v in self.totals.items()), key=lambda item: -item[1][0])[:k]


def describe(phases: dict) -> str:
    return "\n".join(f"{'':>16}{label:<28}{v['ms_per_tick']:7.2f} ms/tick ({v['calls']} calls)"
                     for label, v in phases.items())
