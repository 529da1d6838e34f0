"""What is under the mouse, in the status bar: the cell of the lattice view ("x=12 y=40  spins=+1") or the
sample of a live plot ("energy per spin [J]: step 420, -1.41").

The cell comes from the field view (render/field_view.py: ``cell_at``; 2D and the unfolded 3D grid -- the 3D
block has no single cell under a point and reports nothing), its value from the model's main field (the first
of ``fields()``), one element copied to the host (never the whole array, which may live on the GPU). While the
mouse rests on the lattice the value is read again a few times a second, so it follows a running simulation.
The plot sample comes from ``LivePlots.readout_at`` (render/plots.py).

``install(window)`` is the one line the main window needs.
"""
from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from latticelab.sim.model import main_field_at

REREAD_MS = 250      # while the mouse rests on a cell


def cell_text(model, index, unit: str = "") -> str:
    """"x=.. y=.. [z=..]  <field>=<value> [unit]" of the model's main field at ``index`` (array order: (y, x)
    or (z, y, x)); reads that one element."""
    name, value, dtype = main_field_at(model, index)       # one element to the host (NumPy/CuPy, split or not)
    coordinates = "  ".join(f"{axis}={i}" for axis, i in zip("xyz", tuple(index)[::-1]))
    if isinstance(value, (bool, np.bool_)):
        shown = "yes" if value else "no"
    elif isinstance(value, (int, np.integer)):
        shown = f"{int(value):+d}" if np.issubdtype(dtype, np.signedinteger) else f"{int(value)}"
    else:
        shown = f"{float(value):.4g}"
    return f"{coordinates}   {name}={shown}{f' {unit}' if unit else ''}"


class HoverReadout(QtCore.QObject):
    """A status-bar label fed by the mouse over the lattice canvas and the plot canvas of ``window``."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.label = QtWidgets.QLabel(objectName="status_hover")
        self.label.setContentsMargins(6, 0, 6, 0)
        # room for "x=999  y=999  z=999   spins=-1" without squeezing the text when it appears
        self.label.setMinimumWidth(self.label.fontMetrics().horizontalAdvance("x=999  y=999  z=999   phi=-0.0000 mV"))
        self.label.setToolTip("What is under the mouse: a cell of the lattice or a point of a live plot")
        window.statusBar().insertPermanentWidget(0, self.label)
        self.cell = None                     # the cell under the mouse, or None
        self._last_pos = None
        self.timer = QtCore.QTimer(self, interval=REREAD_MS)
        self.timer.timeout.connect(self._reread)
        window.lattice_canvas.events.mouse_move.connect(self._lattice_moved)
        window.plot_canvas.events.mouse_move.connect(self._plot_moved)
        for canvas in (window.lattice_canvas, window.plot_canvas):
            canvas.native.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QtCore.QEvent.Type.Leave:
            self.clear()
        return False

    def clear(self) -> None:
        self.cell = None
        self.timer.stop()
        self.label.setText("")

    # ---- the lattice -------------------------------------------------------------------------
    def _lattice_moved(self, event) -> None:
        self.show_cell_at(event.pos)

    def show_cell_at(self, canvas_pos) -> str:
        """Show (and return) the readout of the cell under lattice-canvas pixel ``canvas_pos``."""
        self._last_pos = canvas_pos
        try:
            self.cell = self.window.field_view.cell_at(canvas_pos)
        except Exception:      # no picture shown yet
            self.cell = None
        if self.cell is None:
            self.timer.stop()
            self.label.setText("")
            return ""
        if not self.timer.isActive():
            self.timer.start()
        return self._reread()

    def _reread(self) -> str:
        window = self.window
        if self.cell is None:
            return ""
        if window.model_busy():
            return self.label.text()   # a worker is writing the arrays: keep the last value until it is done
        model = window.model
        if len(self.cell) != len(model.shape) or any(i >= n for i, n in zip(self.cell, model.shape)):
            self.clear()             # another model (or size) since the mouse moved
            return ""
        bar = window.colour_key.overlay.colour_bar
        try:
            text = cell_text(model, self.cell, bar.unit if bar is not None else "")
        except Exception as exc:     # the app keeps running; say why there is no value
            text = f"no value here: {type(exc).__name__}: {exc}"
        self.label.setText(text)
        return text

    # ---- the plots ---------------------------------------------------------------------------
    def _plot_moved(self, event) -> None:
        self.show_plot_at(event.pos)

    def show_plot_at(self, canvas_pos) -> str:
        """Show (and return) the readout of the plot sample nearest to plot-canvas pixel ``canvas_pos``."""
        self.cell = None
        self.timer.stop()
        plots = self.window.plots
        text = (plots.readout_at(canvas_pos) if plots is not None else None) or ""
        self.label.setText(text)
        return text


def install(window) -> HoverReadout:
    """Add the hover readout to a MainWindow (its lattice and plot canvases, status bar, field view, plots)."""
    return HoverReadout(window)
