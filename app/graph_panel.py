"""The Graph dock (issue 12): network measures of the running model's interaction graph -- Newman's C, the mean
local and square clustering, the mean path length, components, the degree distribution -- and the small-world
curve (clustering and path length relative to p = 0 against p) for the current geometry.

Any model with the ``HasGraph`` capability (sim/model.py) is measured; for others the dock says so and its
controls are disabled. The curve needs the model's schema to name its rewiring parameter
(``Params.rewiring_field``); the models at other p are built through the registry-generic
``type(model).create`` (sim/analysis/graph.py ``curve_for``).

All graph work runs off the GUI thread: the window only takes a copy of what the graph is made from, and draws
what comes back, point by point. Even reading the edges is not done on the GUI thread: at 3D L = 128 ``edges()``
alone takes about half a second. For a NumPy model the GUI thread takes the model's state (sim/state.py
``state_of``: a copy of its arrays, a few ms) and a worker QThread hands it to the dock's worker process
(app/stepping.py ``ModelProcess``), whose copy of the model reads its edges and measures them there: the
measures are long C calls that hold Python's GIL (seconds for two million vertices), which from a thread would
stall the window. Otherwise (a CUDA model, or no process to be had) the worker thread reads the edges of a
shallow copy of the model (``copy.copy``: a model that rewires replaces its graph object rather than changing it,
so the copy keeps the graph of the moment it was taken) and measures them itself. Meanwhile the dock says
"computing…". The small-world curve gets the model's class and parameters and builds its own models, one point
at a time in the same worker process for a NumPy model (``measure_curve_point``).
Installed with one line: ``graph_panel.install(window)``.
"""
from __future__ import annotations

import copy
import logging
import math
import weakref
from typing import Callable

import numpy as np
from PySide6 import QtCore, QtWidgets

from latticelab.app.analysis_dock import RIGHT, AnalysisDock, info_label, install_dock, make_canvas, redraw
from latticelab.app.stepping import ModelAccess, ProcessGone, SharedProcess
from latticelab.render.graph_plots import DegreePlot, SmallWorldPlot
from latticelab.sim.analysis import graph as G
from latticelab.sim.model import HasGraph
from latticelab.sim.state import state_of

log = logging.getLogger(__name__)

EXACT_PATH_LIMIT = 2000   # vertices: exact mean path length up to this size, else sampled sources
PATH_SAMPLES = 32
USE_PROCESS = True         # NumPy models measured in the worker process (False: on the worker thread)
COMPUTING_TEXT = "computing graph measures…"


_worker = SharedProcess("latticelab-graph")   # the dock's worker process, started by its first measurement


def measure_in_process(model, samples: int | None) -> dict:
    """The worker process's part: its copy of the model, brought to the window's state, measured there."""
    return measure_edges(int(math.prod(model.shape)), model.edges(), np, samples)


def measure_point_in_process(_model, *args) -> G.SmallWorldPoint:
    """The worker process's part of the small-world curve: one point, its model built there (``_model``, the
    process's copy of the window's model, is not used)."""
    return G.measure_point(*args)


def measure_curve_point(model_class, params: dict, field_name: str, p: float, backend: str = "numpy",
                        samples: int | None = 64, seed: int = 0,
                        cancelled: Callable[[], bool] | None = None) -> G.SmallWorldPoint | None:
    """One point of the small-world curve (``G.measure_point``), for a NumPy model in the worker
    process: building a model and measuring its graph are long C calls that hold the GIL, which from the curve's
    worker thread would stall the window (on two busy cores, a second at a time). A CUDA model, or no process to
    be had: measured here on the calling thread. None when ``cancelled()`` (the window closing killed the process
    during the call: the point is not measured again here)."""
    args = (model_class, params, field_name, p, backend, samples, seed)
    if USE_PROCESS and backend == "numpy":
        try:
            return _worker.get().call(measure_point_in_process, None, *args)
        except ProcessGone as exc:
            if cancelled is not None and cancelled():
                return None
            log.warning("small-world point measured on a worker thread: %s", exc)
    return G.measure_point(*args)


def measure_model(snapshot, state, samples: int | None, cancelled: Callable[[], bool]) -> dict | None:
    """The worker thread's part: in the worker process when there is a ``state`` to send, else here on the
    shallow copy ``snapshot``. None when cancelled meanwhile."""
    if cancelled():
        return None
    if state is not None:
        try:
            return _worker.get().call(measure_in_process, state, samples)
        except ProcessGone as exc:
            if cancelled():
                return None
            log.warning("graph measured on a worker thread: %s", exc)
    n = int(math.prod(snapshot.shape))
    return measure_edges(n, snapshot.edges(), getattr(snapshot, "xp", np), samples)


class Worker(QtCore.QThread):
    """Runs ``job(emit, cancelled)`` off the GUI thread; ``emit(obj)`` sends ``progress``, the return value
    ``done``, an exception ``failed`` (as text)."""
    progress = QtCore.Signal(object)
    done = QtCore.Signal(object)
    failed = QtCore.Signal(str)

    def __init__(self, job: Callable, parent=None):
        super().__init__(parent)
        self.job = job
        self._cancel = False

    def cancel(self) -> None:
        self._cancel = True

    def run(self) -> None:
        try:
            result = self.job(self.progress.emit, lambda: self._cancel)
        except Exception as exc:  # reported in the dock; the window goes on
            log.exception("graph worker")
            self.failed.emit(f"{type(exc).__name__}: {exc}")
            return
        self.done.emit(result)


def measure_edges(n: int, edges, xp=np, samples: int | None = None) -> dict:
    """Everything the dock shows about one graph (runs in the worker)."""
    g = G.from_edges(n, edges, xp=xp)
    comps = G.components(g)
    result = {"n": g.n, "edges": g.n_edges, "clustering": G.clustering(g), "histogram": G.degree_histogram(g),
              "components": comps, "path": None}
    if comps.sizes[0] >= 2:
        result["path"] = G.mean_path_length(g, samples=samples)
    return result


def describe(result: dict) -> str:
    c: G.Clustering = result["clustering"]
    comps: G.Components = result["components"]
    path: G.PathLength | None = result["path"]
    lines = [f"{result['n']:,} vertices, {result['edges']:,} edges; {comps.count:,} component"
             f"{'s' if comps.count != 1 else ''} (largest {int(comps.sizes[0]):,})",
             f"C (Newman) = {c.newman:.4f}   mean local C = {c.mean_local:.4f}   square C4 = {c.mean_square:.4f}"
             + ("   [bipartite: no triangles, C4 measures clustering]" if c.bipartite else "")]
    if path is not None:
        err = "exact" if path.exact else f"± {path.error:.3f} from {path.sources} sources"
        lines.append(f"mean path length l = {path.mean:.3f} ({err})")
    return "\n".join(lines)


class GraphPanel(AnalysisDock):
    def __init__(self, model_source: Callable[[], object], parent=None, probabilities=None,
                 curve_samples: int | None = PATH_SAMPLES, access: ModelAccess | None = None):
        """``access``: whether the window's stepping worker writes the model's arrays (no copy of its state is
        taken then, and the measurement is asked for again right after its batch)."""
        super().__init__("Graph", "graph_dock", parent, model_source)
        self.access = access or ModelAccess()
        self.busy = self.access.busy
        self.measures_started = 0
        self.probabilities = G.default_probabilities(9) if probabilities is None else probabilities
        self.curve_samples = curve_samples
        self.result = None
        self.curve: G.SmallWorldCurve | None = None
        self._identity = None
        self._shown_model = None       # weak reference to the model the dock's content is for
        self._measure_worker: Worker | None = None
        self._curve_worker: Worker | None = None
        self._start(refresh_ms=500, when_shown=self.refresh)

    def _build(self) -> None:
        layout = self._body()
        self.info = info_label("graph_info", selectable=True)
        layout.addWidget(self.info)
        # cached: a new result redraws its plot only, and the first picture is drawn a plot's part per paint
        self.canvas = make_canvas("graph_canvas", (700, 320), (320, 200), cached=True)
        grid = self.canvas.central_widget.add_grid(spacing=4, margin=4)
        self.degree_plot = DegreePlot(grid.add_grid(row=0, col=0))
        self.curve_plot = SmallWorldPlot(grid.add_grid(row=0, col=1))
        layout.addWidget(self.canvas.native, 1)
        row = QtWidgets.QHBoxLayout()
        self.measure_button = QtWidgets.QPushButton("Measure now", objectName="graph_measure")
        self.measure_button.clicked.connect(lambda: self.refresh(force=True))
        self.curve_button = QtWidgets.QPushButton("Small-world curve", objectName="graph_curve")
        self.curve_button.setToolTip("Clustering and path length relative to p = 0, for this geometry at other "
                                     "rewiring probabilities (computed in the background)")
        self.curve_button.clicked.connect(self.start_curve)
        self.stop_button = QtWidgets.QPushButton("Stop", objectName="graph_stop", enabled=False)
        self.stop_button.clicked.connect(self.stop_curve)
        for w in (self.measure_button, self.curve_button, self.stop_button):
            row.addWidget(w)
        row.addStretch(1)
        layout.addLayout(row)
        self.curve_info = QtWidgets.QLabel("", objectName="graph_curve_info", wordWrap=True)
        layout.addWidget(self.curve_info)

    # ---- the current graph -------------------------------------------------------------------------------
    def refresh(self, force: bool = False) -> bool:
        """Start measuring the model's graph in the worker when it changed (or when forced) and the dock is
        shown; returns whether a measurement started."""
        model = self._model()
        if model is None:
            return False
        self._forget_other_models(model)
        if not (force or self.on_screen()):
            return False
        has_graph = isinstance(model, HasGraph)
        self.measure_button.setEnabled(has_graph)
        self.curve_button.setEnabled(has_graph and G.rewiring_field(model) is not None
                                     and self._curve_worker is None)
        if not has_graph:
            self.info.setText(f"{model.title}: no interaction graph to analyse")
            self._identity = None
            return False
        identity = (id(model), model.params)
        if (identity == self._identity and not force) or self._measure_worker is not None:
            return False
        snapshot, state = self._copy(model)
        if snapshot is None:                       # the stepping worker writes the model: once it is done
            self.access.retry(lambda: self.refresh(force))
            return False
        self._identity = identity
        n = int(math.prod(model.shape))
        samples = None if n <= EXACT_PATH_LIMIT else PATH_SAMPLES
        self.info.setText(COMPUTING_TEXT)
        self.measures_started += 1
        worker = Worker(lambda emit, cancelled: measure_model(snapshot, state, samples, cancelled), self)
        worker.done.connect(lambda result, of=weakref.ref(model): self._measured(result, of))
        worker.failed.connect(self._failed)
        worker.finished.connect(lambda: setattr(self, "_measure_worker", None))
        self._measure_worker = worker
        worker.start()
        return True

    def _copy(self, model):
        """On the GUI thread: (shallow copy, state for the worker process or None), or (None, None) while the
        model's arrays are being written."""
        if self.busy():
            return None, None
        state = None
        if USE_PROCESS and getattr(model, "backend_name", "numpy") == "numpy":
            try:
                state = state_of(model)
            except Exception as exc:     # a model without a complete state: measured on the worker thread
                log.debug("no state for the graph process: %s", exc)
        return copy.copy(model), state

    def _forget_other_models(self, model) -> None:
        """The model was replaced (a switch, a rebuild, a loaded state): what the dock shows of the one before goes
        at once, and "computing" stands until the new one's measures come; a measurement of the old one still
        running is stopped (its result would be dropped anyway). The Graph tab showed the Ising model's degree
        histogram for 15-40 s after a switch to the cortex (issue 41)."""
        if self._shown_model is not None and self._shown_model() is model:
            return
        self._shown_model = weakref.ref(model)
        self.result = None
        self._identity = None
        self.info.setText(COMPUTING_TEXT if isinstance(model, HasGraph) else "")
        self.degree_plot.set_data([])
        if self._curve_worker is None:
            self.curve = None
            self.curve_plot.set_data([], [], [], None)
            self.curve_info.setText("")
        redraw(self.canvas, self.degree_plot, self.curve_plot)
        worker = self._measure_worker
        if worker is not None:
            worker.cancel()
            if self._curve_worker is None and _worker.started is not None:
                _worker.started.kill()     # the old model's measurement in the process ends now

    def _measured(self, result: dict | None, of=None) -> None:
        if result is None:            # cancelled
            return
        if of is not None and (self._shown_model is None or of() is not self._shown_model()):
            return                    # measured for a model the window no longer runs
        self.result = result
        self.info.setText(describe(result))
        self.degree_plot.set_data(result["histogram"])
        redraw(self.canvas, self.degree_plot)

    def _failed(self, text: str) -> None:
        self.last_error = text
        self.info.setText(f"graph analysis failed: {text}")

    # ---- the small-world curve ---------------------------------------------------------------------------
    def start_curve(self) -> bool:
        model = self._model()
        if model is None or self._curve_worker is not None or G.rewiring_field(model) is None:
            return False
        cls, params = type(model), dict(model.params.model_dump())
        backend = getattr(model, "backend_name", "numpy")
        self._current_p = float(params[G.rewiring_field(model)])
        probabilities, samples = list(self.probabilities), self.curve_samples
        self.curve = None
        self.curve_plot.set_data([], [], [], self._current_p)
        redraw(self.canvas, self.curve_plot)
        self.curve_info.setText("small-world curve: building p = 0 …")

        def job(emit, cancelled):
            return G.curve_for(cls, params, backend, probabilities, samples,
                               on_point=lambda c: emit(G.SmallWorldCurve(c.field, c.measure, c.reference,
                                                                         list(c.points))),
                               cancelled=cancelled,
                               measure=lambda *a: measure_curve_point(*a, cancelled=cancelled))

        worker = Worker(job, self)
        worker.progress.connect(self._curve_point)
        worker.failed.connect(self._failed)
        worker.finished.connect(self._curve_finished)
        self._curve_worker = worker
        self.curve_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        worker.start()
        return True

    def _curve_point(self, curve: G.SmallWorldCurve) -> None:
        self.curve = curve
        p, c, l_ = curve.ratios()
        self.curve_plot.set_data(p, c, l_, self._current_p)
        redraw(self.canvas, self.curve_plot)
        name = "square clustering C4" if curve.measure == "square" else "Newman's C"
        self.curve_info.setText(f"small-world curve ({name}, {curve.field}): {len(curve.points)} of "
                                f"{len(self.probabilities)} points")

    def stop_curve(self) -> None:
        if self._curve_worker is not None:
            self._curve_worker.cancel()

    def _curve_finished(self) -> None:
        self._curve_worker = None
        self.stop_button.setEnabled(False)
        self.curve_button.setEnabled(True)

    def shutdown(self) -> None:
        """Cancel and wait for the workers (the window is closing)."""
        super().shutdown()
        for worker in (self._curve_worker, self._measure_worker):
            if worker is not None:
                worker.cancel()
        busy = self._measure_worker is not None or self._curve_worker is not None
        if busy and _worker.started is not None:
            _worker.started.kill()    # a long measurement in the process ends now; the thread then returns
        for worker in (self._curve_worker, self._measure_worker):
            if worker is not None:
                worker.wait()

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)


def install(window, area=RIGHT) -> GraphPanel:
    """Add the dock to a main window with a ``model`` attribute; a tab beside the live plots when present."""
    # the window closing stops the workers first
    panel = GraphPanel(lambda: window.model, parent=window, access=ModelAccess(window))
    changed = getattr(window, "modelChanged", None)
    if changed is not None:     # what the dock shows of a replaced model goes at once, not at its next refresh
        changed.connect(lambda: panel._forget_other_models(window.model))
    return install_dock(window, panel, "graph_panel", area, stop_with_window=True)
