"""What the main window offers the docks and menus that plug into it (app/analysis_dock.py and the panels,
recording, undo, the View and Help menus, the colour key, the hover readout, the collector schedule): this
protocol and the QMainWindow it is (menus, status bar, dock areas). A dock uses nothing else of the window: no
private member, no ``getattr``/``hasattr``/``setattr`` on it (tests/gui/test_dock_host.py checks the sources).
app/main_window.py implements it.
"""
from __future__ import annotations

from typing import Callable, Protocol

from PySide6 import QtCore, QtGui, QtWidgets

RIGHT = QtCore.Qt.DockWidgetArea.RightDockWidgetArea


class DockHost(Protocol):
    # ---- the model and its parameters --------------------------------------------------------
    prefs: object                  # app/settings.py Preferences: remembered values and folders
    interactive: bool              # False: a scripted window, which never opens a dialog
    runner: object                 # sim/runner.py Runner: its ``params`` and observable ``history`` (read only)
    controls: QtWidgets.QWidget    # app/controls.py ControlsPanel: the parameter form and the view options
    undo_history: object           # app/undo.py UndoHistory
    collector: object              # app/collector.py CollectorSchedule, or None
    staging: object                # app/staging.py Staging: ``followers`` make their plots for a coming model
    dock_placements: object        # app/analysis_dock.py DockPlacements: when a dock last appeared or went

    @property
    def model(self): ...
    def set_parameter(self, name: str, value, also: dict | None = None, record: bool = True) -> bool: ...
    def model_busy(self) -> bool: ...                  # a worker is writing the model's arrays now
    def when_model_free(self, action: Callable[[], object]) -> None: ...
    def model_preparing(self) -> bool: ...             # a new model is being built on a worker
    def settling(self) -> bool: ...                    # a model change under way or just shown
    def run_steps(self, n: int, then: Callable[[], object] | None = None) -> None: ...
    modelChanged: QtCore.SignalInstance   # another model is shown (a switch, a rebuild, a reset, a loaded state)

    # ---- the views ---------------------------------------------------------------------------
    field_view: object             # render/field_view.py FieldView of the lattice
    lattice_canvas: object         # its VisPy canvas
    plot_canvas: object            # the live plots' canvas
    plots: object                  # render/plots.py LivePlots shown in it (None before the first model)
    plot_dock: QtWidgets.QDockWidget
    control_dock: QtWidgets.QDockWidget
    colour_key: object             # app/colour_key.py ColourKey: its ``overlay`` on the view, ``restore(on)``

    def capture(self, what: str = "view"): ...        # an RGBA image of the view, its cells or the window
    def default_export_name(self) -> str: ...

    # ---- messages, actions, menus, docks -----------------------------------------------------
    view_menu: QtWidgets.QMenu
    help_menu: QtWidgets.QMenu
    reset_action: QtGui.QAction
    camera_action: QtGui.QAction
    export_action: QtGui.QAction
    quit_action: QtGui.QAction

    def show_message(self, text: str, error: bool = False) -> None: ...
    def warn(self, title: str, text: str) -> None: ...  # an error the user must see (a dialog when interactive)
    def add_action(self, text: str, slot, shortcuts=(), tip: str = "", checkable: bool = False,
                   name: str | None = None) -> QtGui.QAction: ...
    def add_dock(self, dock: QtWidgets.QDockWidget, area=RIGHT, beside_plots: bool = True) -> None: ...
