"""What the GUI thread did in the long gaps between frame ticks (``latticelab bench window --trace``).

The application object's ``notify`` is wrapped so that every event the event loop delivers at the top level
(timers, paints, posted calls) is timed with its receiver; a few inner parts are timed as well (each VisPy
canvas's scene draw, the window's frame tick and swap, the docks' refreshes, the staging slices) and so are the
garbage collector's runs. For a gap the report lists what ran inside it, longest first. A diagnostic: it costs
a little on every event, so the figures of a traced run are not the ones to publish.
"""
from __future__ import annotations

import gc
import os
import time
from contextlib import contextmanager


class Tracer:
    def __init__(self):
        self.spans: list[tuple[float, float, int, str]] = []   # (start, end, depth, label)
        self._depth = 0
        self._gc_start = None

    # ---- recording -----------------------------------------------------------------------------
    @contextmanager
    def span(self, label: str):
        start = time.perf_counter()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self.spans.append((start, time.perf_counter(), self._depth, label))

    def wrap(self, owner, name: str, label=None) -> None:
        """Time ``owner.name`` (a class or an instance attribute) under ``label`` (a string or a function of
        the call's first argument)."""
        original = getattr(owner, name)
        tracer = self

        def timed(*args, **kwargs):
            text = label(args[0]) if callable(label) else (label or name)
            with tracer.span(text):
                return original(*args, **kwargs)
        setattr(owner, name, timed)

    def wrap_steps(self, owner, name: str, prefix: str) -> None:
        """Time each step of the generator ``owner.name`` returns, labelled ``prefix: <what it yielded>`` (a
        step's name is known only once it has run)."""
        original = getattr(owner, name)
        tracer = self

        def stepped(*args, **kwargs):
            steps = original(*args, **kwargs)
            while True:
                start = time.perf_counter()
                try:
                    what = next(steps)
                except StopIteration:
                    return
                tracer.spans.append((start, time.perf_counter(), tracer._depth, f"{prefix}: {what}"))
                yield what
        setattr(owner, name, stepped)

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start is not None:
            self.spans.append((self._gc_start, time.perf_counter(), self._depth,
                               f"gc gen{info.get('generation')} ({info.get('collected', 0)} freed)"))
            self._gc_start = None

    def install_classes(self) -> None:
        """Patch classes before the window is made (bound methods connected at construction see these)."""
        from vispy import scene

        from latticelab.app.analysis_dock import CapabilityDock
        self.wrap(scene.SceneCanvas, "_draw_scene", lambda c: f"draw {c.native.objectName() or 'canvas'}")
        from latticelab.render.cached_canvas import RegionCachedCanvas
        self.wrap(RegionCachedCanvas, "_draw_all", "whole scene into the cache")
        self.wrap(RegionCachedCanvas, "_draw_region", lambda c: "a region into the cache")
        self.wrap(RegionCachedCanvas, "_lay_out", lambda c, *a: "lay the grids out")
        self.wrap(RegionCachedCanvas, "_spread_rebuild", lambda c, *a: "a share of a spread redraw")
        from latticelab.app.spectral_panel import SpectralPanel
        self.wrap(SpectralPanel, "_prepare_tick", "spectrum dock: preparing while hidden")
        self.wrap_steps(SpectralPanel, "_prepare_steps", "step")
        self.wrap(SpectralPanel, "request", "spectrum dock: request")
        self.wrap(CapabilityDock, "refresh", lambda d: f"refresh {d.objectName()}")
        # the frame tick's parts, on the classes: the timer is connected to the bound method when the window
        # is made, so an instance attribute set afterwards would never be called
        from latticelab.app.frame_loop import FrameLoop
        from latticelab.app.status_bar import StatusBar
        from latticelab.sim.runner import Runner
        self.wrap(FrameLoop, "frame", "frame tick")
        self.wrap(FrameLoop, "refresh_view", "view refresh")
        self.wrap(StatusBar, "update", "status bar")
        self.wrap(Runner, "advance", lambda r: f"advance ({type(r.model).__name__})")
        self.wrap(Runner, "collect", "collect observables")
        # what a dock's refresh does (each subclass's own methods, named after the dock)
        from latticelab.app import main_window  # noqa: F401  (imports the docks)
        for dock_class in _subclasses(CapabilityDock):
            for name in ("_set_available", "_restart", "_take", "_draw"):
                if name in vars(dock_class):
                    self.wrap(dock_class, name, lambda d, name=name: f"{d.objectName()} {name}")
        gc.callbacks.append(self._gc)

    def install_window(self, window) -> None:
        self.wrap(window.lifecycle, "poll_preparation", "poll/swap")
        self.wrap(window.frames, "update_plots", "live plots update")
        staging = window.staging
        original = staging.run_slice
        tracer = self

        def traced_slice(*args, **kwargs):
            n = len(staging.log)
            with tracer.span("staging slice") :
                result = original(*args, **kwargs)
            steps = staging.log[n:]
            if steps:
                tracer.spans[-1] = tracer.spans[-1][:3] + (
                    f"staging slice: {len(steps)} steps, last {steps[-1][1]} {steps[-1][2]}",)
            return result
        staging.run_slice = traced_slice

    # ---- reporting -----------------------------------------------------------------------------
    def report(self, ticks: list[float], since: float, until: float, threshold_s: float = 0.05,
               top: int = int(os.environ.get("LATTICELAB_TRACE_TOP", "8")), name: str = "gap") -> list[str]:
        """Lines describing each gap between ``ticks`` over [since, until] longer than ``threshold_s`` (each
        headed "<name> <ms> ms:")."""
        points = [t for t in ticks if t < since][-1:] + [t for t in ticks if since <= t <= until] + [until]
        lines = []
        for a, b in zip(points, points[1:]):
            if b - a <= threshold_s:
                continue
            inside = [s for s in self.spans if s[1] > a and s[0] < b]
            inside.sort(key=lambda s: s[0] - s[1])
            if os.environ.get("LATTICELAB_TRACE_ORDER") == "time":
                inside = sorted(inside[:top], key=lambda s: (s[0], s[2]))
            lines.append(f"{name} {1000 * (b - a):.0f} ms:")
            for start, end, depth, label in inside[:top]:
                lines.append(f"    {1000 * (end - start):7.1f} ms  {'  ' * depth}{label}")
        return lines


def _subclasses(cls) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub] + _subclasses(sub)
    return found


def traced_application(tracer: Tracer):
    """A QApplication whose ``notify`` times each top-level event (receiver and event type)."""
    from PySide6 import QtCore, QtWidgets

    _NESTED = (QtCore.QEvent.Type.Paint, QtCore.QEvent.Type.Resize, QtCore.QEvent.Type.Show)
    # LATTICELAB_TRACE_PAINTS=all: every widget's paint, resize and show inside an event (Qt's own widgets too)
    every_paint = os.environ.get("LATTICELAB_TRACE_PAINTS") == "all"

    class TracedApplication(QtWidgets.QApplication):
        def notify(self, receiver, event):
            kind = event.type()
            if tracer._depth:
                # inside an event: only what Qt does to the GL canvases (their paints within the window's paint,
                # their resizes), to tell their share of an UpdateRequest from Qt's composition of the window
                if kind in _NESTED and isinstance(receiver, QtWidgets.QWidget) \
                        and (receiver.objectName().endswith("canvas") or every_paint):
                    with tracer.span(f"{kind.name} -> {receiver.objectName() or type(receiver).__name__}"):
                        return super().notify(receiver, event)
                return super().notify(receiver, event)
            name = type(receiver).__name__
            if isinstance(receiver, QtCore.QObject):
                name += f" {receiver.objectName()}" if receiver.objectName() else ""
                parent = receiver.parent()
                if parent is not None and not receiver.objectName():
                    name += f" (in {type(parent).__name__} {parent.objectName()})"
            with tracer.span(f"{getattr(kind, 'name', kind)} -> {name}"):
                return super().notify(receiver, event)
    return TracedApplication([])
