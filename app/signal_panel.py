"""The Signal dock (issue 15, thesis 003 figure 8.11): for models that record a continuous signal
(sim/model.py ``HasSignal``; the cortex's pseudo-EEG), the signal over the last seconds, its periodogram with
the qEEG numbers (sim/analysis/qeeg.py), the firing rates, the cell picked by a click on the lattice view
(``HasProbe``: its properties and its trace), the base and effective parameters (``HasEffectiveParameters``)
and the model's impulse button (``HasImpulse``: the cortex's Boost).

Installed with one line, ``signal_panel.install(window)``. The dock pulls the model's trace on its own timer,
also while it is hidden (so the periodogram sees an unbroken signal), and draws only while it is shown; for a
model without a signal it is hidden. It reads the trace with an explicit ``since`` (the last step it has), so
other readers of the trace are not disturbed; a gap (the model ran further than its trace keeps) or a new
model restarts the record.
"""
from __future__ import annotations

import logging

import numpy as np
from PySide6 import QtCore, QtWidgets

from latticelab.app.analysis_dock import (RIGHT, CapabilityDock, class_has, info_label, install_dock,
                                          labelled_steps, make_canvas, redraw)
from latticelab.render.signal_plots import (EEG_COLOUR, PROBE_COLOUR, RATE_COLOURS, PeriodogramPlot,
                                            RasterPlot, TimePlot)
from latticelab.sim.analysis import qeeg
from latticelab.sim.model import HasEffectiveParameters, HasImpulse, HasProbe, HasSignal, RecordsSpikes
from latticelab.sim.params import ParameterError

log = logging.getLogger(__name__)

REFRESH_MS = 200
MAX_SECONDS = 10                 # the longest signal shown (the thesis's tool: 1 to 10 s)
DEFAULT_SECONDS = 2
RASTER_NEURONS = 200             # the band of the spike raster at first: neurons 0 .. 199
SPECTRUM_MAX_HZ = 100.0          # the periodogram is drawn up to here (the qEEG range ends at 65 Hz)
CLICK_SLOP = 3.0                 # pixels a click may move and still pick a cell (more is a drag: panning)
METRIC_ROWS = (("sen", "spectral entropy", "{:.3f}"), ("ppf", "peak frequency", "{:.2f} Hz"),
               ("mpf", "median frequency", "{:.2f} Hz"), ("sef75", "spectral edge 75%", "{:.2f} Hz"),
               ("sef90", "spectral edge 90%", "{:.2f} Hz"), ("sef95", "spectral edge 95%", "{:.2f} Hz"),
               *((band, f"{band} {lo:g}-{hi:g} Hz", "{:.1%}") for band, (lo, hi) in qeeg.BANDS.items()))


def column_index(model, role: str) -> list[int]:
    """Trace columns (after the step column, so from 1) of the model's signal columns with ``role``."""
    return [1 + i for i, c in enumerate(model.signal_columns) if c.role == role]


class SignalRecord:
    """The most recent ``capacity`` rows of a trace (host), and the running periodogram of its signal column.

    The periodogram is fed every sample as it arrives, on the GUI thread: that is cheap and bounded -- a
    1024-sample PSD costs about 0.5 ms, a refresh brings a few hundred samples (at most one or two PSDs), and
    even the largest chunk a trace can hand over (its kept steps, 16384 for the cortex) is about 30 PSDs,
    under 20 ms once. So no worker thread is needed."""

    def __init__(self, capacity: int, columns: int, signal_column: int, rate: float, window_name: str = "blackman"):
        self.capacity, self.columns, self.signal_column = int(capacity), int(columns), signal_column
        self.rate, self.window_name = float(rate), window_name
        self.rows = np.zeros((0, self.columns))
        self.read_to = 0           # the step of the last sample taken
        self.restart()

    def restart(self, read_to: int = 0) -> None:
        self.rows = np.zeros((0, self.columns))
        self.read_to = int(read_to)
        self.periodogram = qeeg.Periodogram(window_name=self.window_name, fs=self.rate)
        self.metrics: dict | None = None

    def push(self, rows: np.ndarray) -> None:
        """Rows of ``trace`` (column 0 the step); a gap before them restarts the record first."""
        if not len(rows):
            return
        if int(rows[0, 0]) != self.read_to + 1:
            log.info("signal: gap from step %d to %d; the record restarts", self.read_to, int(rows[0, 0]) - 1)
            self.restart(int(rows[0, 0]) - 1)
        self.rows = np.concatenate([self.rows, rows])[-self.capacity:]
        self.read_to = int(rows[-1, 0])
        if self.periodogram.push(rows[:, self.signal_column]):
            self.metrics = self.periodogram.metrics()

    def set_window(self, window_name: str) -> None:
        """Another data window: the periodogram is made again from the samples kept."""
        self.window_name = window_name
        rows, read_to = self.rows, self.read_to
        self.restart(read_to - len(rows))
        self.push(rows)

    def last(self, seconds: float) -> np.ndarray:
        n = int(round(seconds * self.rate))
        return self.rows[-n:] if n else self.rows[:0]


class SignalPanel(CapabilityDock):
    """Signal, periodogram, qEEG, firing rates, picked cell, effective parameters and impulse of the window's
    model (when it has ``HasSignal``)."""
    RAISE_WHEN_AVAILABLE = True
    READ_WHILE_STEPPING = False     # the trace is read after the worker's batch
    WHAT = "signal"

    def __init__(self, window, refresh_ms: int = REFRESH_MS):
        super().__init__("Signal", "signal_dock", window)
        self.record: SignalRecord | None = None
        self._probe_since = 0          # the probe column is shown from this step on (the pick)
        self._impulse = None           # (start, end step, {name: value before}, id(model)) while one is on
        self._start(refresh_ms, when_shown=self._draw_now)
        # the impulse ends at the first moment its steps are done: checked between frames while it is on
        self.impulse_timer = QtCore.QTimer(self, interval=5)
        self.impulse_timer.timeout.connect(self._check_impulse)

    # ==== construction ==========================================================================
    def _build(self) -> None:
        layout = self._layout = self._body()
        self.canvas = None             # the plots are made when a model with a signal first arrives (_plots)

        row = QtWidgets.QHBoxLayout()
        self.seconds = QtWidgets.QSpinBox(objectName="signal_seconds", minimum=1, maximum=MAX_SECONDS,
                                          value=DEFAULT_SECONDS, suffix=" s")
        self.seconds.setToolTip("How much of the signal to show (simulated time)")
        self.seconds.valueChanged.connect(lambda _: self._draw_now())
        self.window_box = QtWidgets.QComboBox(objectName="signal_window")
        self.window_box.addItems(qeeg.WINDOWS)
        self.window_box.setToolTip("Data window of the periodogram's segments (thesis 003, figure 8.10)")
        self.window_box.currentTextChanged.connect(self._window_changed)
        self.impulse_button = QtWidgets.QPushButton("Boost", objectName="impulse_button")
        self.impulse_button.clicked.connect(self.apply_impulse)
        row.addWidget(QtWidgets.QLabel("show"))
        row.addWidget(self.seconds)
        row.addWidget(QtWidgets.QLabel("window"))
        row.addWidget(self.window_box)
        row.addStretch(1)
        row.addWidget(self.impulse_button)
        layout.addLayout(row)

        band = QtWidgets.QHBoxLayout()       # the spike raster's band of neurons (RecordsSpikes)
        self.raster_first = QtWidgets.QSpinBox(objectName="raster_first", minimum=0, maximum=2 ** 31 - 1)
        self.raster_count = QtWidgets.QSpinBox(objectName="raster_count", minimum=1, maximum=2 ** 31 - 1,
                                               value=RASTER_NEURONS)      # limited to the model's at its start
        self.raster_first.setToolTip("First neuron (flat index y L + x) of the spike raster")
        self.raster_count.setToolTip("Number of neurons in the spike raster")
        for box in (self.raster_first, self.raster_count):
            box.valueChanged.connect(lambda _: self._band_changed())
        self.raster_row = QtWidgets.QWidget(objectName="raster_row")
        band.setContentsMargins(0, 0, 0, 0)
        band.addWidget(QtWidgets.QLabel("raster: neurons from"))
        band.addWidget(self.raster_first)
        band.addWidget(QtWidgets.QLabel("count"))
        band.addWidget(self.raster_count)
        band.addStretch(1)
        self.raster_row.setLayout(band)

        self.tabs = QtWidgets.QTabWidget(objectName="signal_tabs")
        self.metrics_table = self._table("metrics_table", ["qEEG", "value"], len(METRIC_ROWS))
        for r, (_, label, _) in enumerate(METRIC_ROWS):
            self.metrics_table.setItem(r, 0, QtWidgets.QTableWidgetItem(label))
        self.tabs.addTab(self.metrics_table, "qEEG")
        self.probe_info = QtWidgets.QLabel("click a cell of the lattice to pick it", objectName="probe_info",
                                           wordWrap=True)
        self.probe_info.setAlignment(QtCore.Qt.AlignmentFlag.AlignTop | QtCore.Qt.AlignmentFlag.AlignLeft)
        self.probe_info.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tabs.addTab(self.probe_info, "Cell")
        self.effective_table = self._table("effective_table", ["parameter", "base", "effective", "unit"], 0)
        self.tabs.addTab(self.effective_table, "Parameters")
        self.raster_tab = QtWidgets.QWidget(objectName="raster_tab")   # its canvas comes with a spiking model
        raster_layout = QtWidgets.QVBoxLayout(self.raster_tab)
        raster_layout.setContentsMargins(0, 0, 0, 0)
        raster_layout.addWidget(self.raster_row)
        self.raster_canvas = None
        self.tabs.addTab(self.raster_tab, "Spikes")
        self.tabs.setMaximumHeight(230)
        layout.addWidget(self.tabs)
        self.info = info_label("signal_info")
        layout.addWidget(self.info)

    @staticmethod
    def _table(name: str, headers: list[str], rows: int) -> QtWidgets.QTableWidget:
        table = QtWidgets.QTableWidget(rows, len(headers), objectName=name)
        table.setHorizontalHeaderLabels(headers)
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        table.horizontalHeader().setStretchLastSection(True)
        table.horizontalHeader().setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        return table

    # ==== the model ============================================================================
    def applies_to(self, model_class) -> bool:
        return class_has(model_class, HasSignal)

    def _plot_steps(self):
        """Make the canvas and its plots, a piece of a plot per step (its title, each axis, its view, its lines:
        render/spectral.py ``_Plot.in_steps``), once (``_plots``, or ahead: ``stage_for``): text and axes cost a
        second or more on software GL, which a window that never runs a model with a signal need not pay."""
        grid = yield from self._canvas_steps_into(self._layout, "signal_canvas", (420, 620), (300, 360))
        plots = (("signal_plot", TimePlot, ("signal", "time (ms)", "mV", {"signal": EEG_COLOUR})),
                 ("spectrum_plot", PeriodogramPlot, (SPECTRUM_MAX_HZ, "mV")),
                 ("probe_plot", TimePlot, ("picked cell", "time (ms)", "mV", {"probe": PROBE_COLOUR})),
                 ("rate_plot", TimePlot, ("firing rate", "time (ms)", "Hz per cell",
                                          {i: c for i, c in enumerate(RATE_COLOURS)})))
        for row, (name, kind, args) in enumerate(plots):
            cell = grid.add_grid(row=row, col=0)
            yield f"{name} cell"
            setattr(self, name, (yield from labelled_steps(kind.in_steps(cell, *args), name)))

    def _set_available(self, model) -> None:
        """Shown (and raised) when a model with a signal arrives; hidden for one without."""
        available = isinstance(model, HasSignal)
        self._show_for(available)
        self.impulse_button.setVisible(available and isinstance(model, HasImpulse))

    def _restart(self, model) -> None:
        self._identity = id(model)
        self._plots()
        signal = column_index(model, "signal")
        if not signal:
            raise ValueError(f"{model.title} declares no signal column (role 'signal')")
        capacity = int(MAX_SECONDS * model.signal_rate)
        self.record = SignalRecord(capacity, 1 + len(model.signal_columns), signal[0], model.signal_rate,
                                   self.window_box.currentText())
        self.record.restart(max(0, model.step_count - capacity))
        self._probe_since = self.record.read_to
        self._drawn = None
        main = model.signal_columns[signal[0] - 1]
        self.signal_plot.title.text = f"{main.label} [{main.unit}]" if main.unit else main.label
        self.spectrum_plot.y_axis.axis.axis_label = f"log10 power ({main.unit}^2)" if main.unit else "log10 power"
        if isinstance(model, HasImpulse):
            self.impulse_button.setText(model.impulse.label)
            self.impulse_button.setToolTip(model.impulse.help or model.impulse.label)
        name = getattr(model, "probe_label", "cell")
        self.tabs.setTabText(1, name.capitalize())
        self.tabs.setTabEnabled(1, isinstance(model, HasProbe))
        self.tabs.setTabEnabled(2, isinstance(model, HasEffectiveParameters))
        self._start_raster(model)

    # ==== the spike raster ======================================================================
    def _start_raster(self, model) -> None:
        """Record the spikes of the chosen band (a model that ``RecordsSpikes``), from now on."""
        spikes = isinstance(model, RecordsSpikes)
        self.tabs.setTabEnabled(self.tabs.indexOf(self.raster_tab), spikes)
        if not spikes:
            return
        if self.raster_canvas is None:      # a canvas of its own: the signal plots' cached canvas stays as it is
            self.raster_canvas = make_canvas("raster_canvas", (420, 200), (200, 120))
            self.raster_plot = RasterPlot(self.raster_canvas.central_widget.add_grid(spacing=2, margin=4),
                                          "spike raster", "time (ms)", "neuron")
            self.raster_tab.layout().addWidget(self.raster_canvas.native, 1)
        n = int(np.prod(model.shape))
        for box, top in ((self.raster_first, n - 1), (self.raster_count, n)):
            box.blockSignals(True)
            box.setMaximum(top)
            box.blockSignals(False)
        first, count = self.raster_first.value(), min(self.raster_count.value(), n - self.raster_first.value())
        model.record_spikes(range(first, first + count))

    def _band_changed(self) -> None:
        model = self._model()
        if isinstance(model, RecordsSpikes) and not self.stepping():
            self._start_raster(model)
            self._draw_now()

    def _draw_raster(self, model, span) -> None:
        recording = model.spike_recording
        if recording is None:
            return
        recording.drain()
        steps, indices = recording.spikes()
        keep_from = model.step_count - int(MAX_SECONDS * model.signal_rate)
        recording.trains.drop_before(keep_from)
        t = steps * (1000.0 / model.signal_rate)
        shown = t >= span[0] if span is not None else np.ones(t.size, bool)
        self.raster_plot.set_data(t[shown], indices[shown], (recording.first, recording.count), span)
        last = recording.first + recording.count - 1
        self.raster_plot.title.text = f"spike raster: neurons {recording.first}-{last} ({int(shown.sum()):,} spikes)"
        redraw(self.raster_canvas)

    def restart(self) -> None:
        """Start the record again from the model's kept trace (after a reset or a load)."""
        model = self._model()
        if isinstance(model, HasSignal):
            self._restart(model)
            self.refresh(force=True)

    def _take(self, model):
        """The model's new samples; the key of what a draw would show: redrawn for new samples, and for a
        parameter change or a pick while paused (the tables)."""
        if id(model) != self._identity or model.step_count < self.record.read_to:
            self._restart(model)
        self.record.push(model.trace(since=self.record.read_to))
        return self.record.read_to, model.params, getattr(model, "probe", None)

    # ==== drawing ===============================================================================
    def _draw(self, model) -> None:
        record = self.record
        rows = record.last(self.seconds.value())
        t = rows[:, 0] * (1000.0 / record.rate)                # ms of simulated time
        span = (float(t[-1]) - 1000.0 * self.seconds.value(), float(t[-1])) if len(t) else None
        self.signal_plot.set_data(t, {"signal": rows[:, record.signal_column]}, span)
        if record.periodogram.ready:
            self.spectrum_plot.set_data(record.periodogram.freqs, record.periodogram.psd)
        self._draw_rates(model, rows, t, span)
        if isinstance(model, RecordsSpikes):
            self._draw_raster(model, span)
        if isinstance(model, HasProbe):
            self._draw_probe(model, rows, t, span)
        if isinstance(model, HasEffectiveParameters):
            self._fill_effective(model)
        self._fill_metrics(record.metrics)
        state = ""
        if self._impulse is not None:
            state = f" | {model.impulse.label} on until step {self._impulse[1]:,}"
        self.info.setText(f"step {model.step_count:,}; {len(record.rows):,} samples kept, "
                          f"{record.periodogram.updates} periodograms ({record.window_name}){state}")
        self.last_error = ""
        self._drawn = (record.read_to, model.params, getattr(model, "probe", None))
        redraw(self.canvas)

    def _draw_rates(self, model, rows, t, span) -> None:
        columns = column_index(model, "fraction")
        series, means = {}, []
        for i, col in enumerate(columns[:len(RATE_COLOURS)]):
            rate = rows[:, col] * self.record.rate               # fraction per sample -> Hz per cell
            series[i] = rate
            means.append(f"{model.signal_columns[col - 1].label} {rate.mean() if rate.size else 0:.1f}")
        self.rate_plot.set_data(t, series, span)
        self.rate_plot.title.text = "firing rate (Hz per cell; mean " + ", ".join(means) + ")"

    def _draw_probe(self, model, rows, t, span) -> None:
        columns = column_index(model, "probe")
        if columns:
            mine = rows[:, 0] > self._probe_since        # samples of the cell picked now
            self.probe_plot.set_data(t[mine], {"probe": rows[mine, columns[0]]}, span)
        info = model.probe_info(model.probe)
        self.probe_plot.title.text = (f"{model.probe_label} {model.probe}"
                                      + (f" ({info['type']})" if "type" in info else "")
                                      + (f" [{model.signal_columns[columns[0] - 1].unit}]" if columns else ""))
        self.probe_info.setText(describe_cell(model.probe_label, info))

    def _fill_metrics(self, metrics: dict | None) -> None:
        for r, (key, _, fmt) in enumerate(METRIC_ROWS):
            text = "–" if metrics is None else fmt.format(metrics[key])
            _set_cell(self.metrics_table, r, 1, text)

    def _fill_effective(self, model) -> None:
        rows = model.effective_parameters()
        table = self.effective_table
        if table.rowCount() != len(rows):
            table.setRowCount(len(rows))
        for r, v in enumerate(rows):
            for c, text in enumerate((v.name, f"{v.base:.4g}", f"{v.effective:.4g}", v.unit)):
                _set_cell(table, r, c, text)

    def effective_text(self) -> dict[str, tuple[str, str]]:
        """name -> (base, effective) as the table shows them."""
        t = self.effective_table
        return {t.item(r, 0).text(): (t.item(r, 1).text(), t.item(r, 2).text()) for r in range(t.rowCount())
                if t.item(r, 0) is not None}

    def _window_changed(self, name: str) -> None:
        if self.record is not None:
            self.record.set_window(name)
            self.refresh(force=True)

    # ==== picking a cell ========================================================================
    def lattice_clicked(self, event) -> None:
        """A mouse release on the lattice canvas: a click (not a drag) on a cell picks it."""
        if getattr(event, "button", 1) != 1:
            return
        press = getattr(event, "press_event", None)
        if press is not None and np.hypot(*(np.asarray(event.pos[:2], float) - press.pos[:2])) > CLICK_SLOP:
            return
        model = self._model()
        if not isinstance(model, HasProbe):
            return
        cell = self.window.field_view.cell_at(event.pos[:2])
        if cell is not None:
            self.pick(cell)

    def pick(self, cell) -> bool:
        """Watch the model's cell at ``cell``, an index in array order ((row, column) in 2D, as FieldView.cell_at
        gives it); a bad cell is reported in the status bar."""
        model = self._model()
        if not isinstance(model, HasProbe):
            return False
        try:
            index = int(np.ravel_multi_index(tuple(int(c) for c in cell), model.shape))
            model.probe = index
        except (ValueError, ParameterError) as exc:
            self.window.show_message(f"cannot pick {tuple(cell)}: {exc}", error=True)
            return False
        self._probe_since = model.step_count
        self.window.show_message(f"picked {model.probe_label} {index} at {tuple(int(c) for c in cell)}")
        self.refresh(force=True)
        return True

    # ==== the impulse (Boost) ===================================================================
    def apply_impulse(self) -> bool:
        """Apply the model's impulse now through the window's parameter path (validated, shown in the form); it
        is undone, each parameter back to its value before, once its steps have run. An impulse leaves the
        parameters as they were, so neither its changes nor their restoring enter the undo history (Edit menu):
        Ctrl+Z after a Boost undoes the user's last own change."""
        model = self._model()
        if not isinstance(model, HasImpulse) or self._impulse is not None:
            return False
        impulse = model.impulse
        before = {name: getattr(self.window.runner.params, name) for name, _ in impulse.changes}
        applied = {}
        for name, value in impulse.changes:
            if not self.window.set_parameter(name, value, record=False):
                for undo, old in applied.items():
                    self.window.set_parameter(undo, old, record=False)
                return False
            applied[name] = before[name]
        self._impulse = (model.step_count, model.step_count + impulse.steps, applied, id(model))
        self.impulse_button.setEnabled(False)
        self.impulse_timer.start()
        self.refresh(force=True)
        return True

    @property
    def impulse_active(self) -> bool:
        return self._impulse is not None

    def _check_impulse(self) -> None:
        if self._impulse is None:
            self.impulse_timer.stop()
            return
        start, end, applied, identity = self._impulse
        model = self._model()
        if model is None or not isinstance(model, HasImpulse):
            self._cancel_impulse()          # another kind of model: the changed parameters were the old one's
        elif id(model) != identity or not start <= model.step_count < end:   # done, reset, or rebuilt
            self._impulse = None
            self.impulse_timer.stop()
            for name, old in applied.items():
                self.window.set_parameter(name, old, record=False)
            self.impulse_button.setEnabled(True)
            self.refresh(force=True)

    def _cancel_impulse(self) -> None:
        """Another kind of model: what the impulse changed belonged to the old one."""
        self._impulse = None
        self.impulse_timer.stop()
        self.impulse_button.setEnabled(True)

    def shutdown(self) -> None:
        super().shutdown()
        self.impulse_timer.stop()


def describe_cell(label: str, info: dict) -> str:
    """The picked cell's properties, one per line ("a = 0.02")."""
    lines = [label.capitalize()]
    for key, value in info.items():
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        lines.append(f"{key} = {text}")
    return "\n".join(lines)


def _set_cell(table: QtWidgets.QTableWidget, row: int, col: int, text: str) -> None:
    item = table.item(row, col)
    if item is None:
        table.setItem(row, col, QtWidgets.QTableWidgetItem(text))
    elif item.text() != text:
        item.setText(text)


def install(window, area=RIGHT) -> SignalPanel:
    """Add the dock to a main window (``model``, ``runner``, ``field_view``, ``lattice_canvas``,
    ``set_parameter``, ``show_message``); a tab beside the live plots, shown only for models with a signal."""
    panel = install_dock(window, SignalPanel(window), "signal_panel", area)
    window.lattice_canvas.events.mouse_release.connect(panel.lattice_clicked)
    # a reset or a loaded state starts the record again (the window's own slots run first)
    window.reset_action.triggered.connect(lambda *_: panel.restart())
    window.controls.resetRequested.connect(lambda *_: panel.restart())
    return panel
