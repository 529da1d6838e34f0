"""The main window's actions, menus and toolbar: Run/Pause, Step, Reset, the file actions, Quit, Reset camera, the
Model menu and the toolbar's model box, the View and Help menus (filled further by app/view_menu.py and
app/help_menu.py), and the running model's description (Help > About the model).
"""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from latticelab.app.rest_text import inline_html, rest_to_html
from latticelab.sim.models import get_model, model_names
from latticelab.sim.params import allowed_text

APPLIES = {"live": "at once", "reset": "at the next reset", "rebuild": "new model"}


def make_action(window: QtWidgets.QMainWindow, text: str, slot, shortcuts=(), tip: str = "",
                checkable: bool = False, name: str | None = None) -> QtGui.QAction:
    """An action of ``window`` (its shortcuts work while the menu bar is hidden too), named ``name``."""
    action = QtGui.QAction(text, window, checkable=checkable)
    action.setObjectName(name or text)
    if shortcuts:
        action.setShortcuts([QtGui.QKeySequence(s) for s in shortcuts])
        action.setShortcutContext(QtCore.Qt.ShortcutContext.WindowShortcut)
    action.setToolTip(tip or text)
    action.setStatusTip(tip or text)
    (action.toggled if checkable else action.triggered).connect(slot)
    window.addAction(action)
    return action


def model_help(model) -> str:
    """The model's description and its parameters (label, unit, allowed values, when a change applies), as rich
    text from the model's docstring and schema."""
    cls, schema = type(model), type(model.params)
    doc = rest_to_html(cls.__doc__ or "")     # reST (``code``, *emphasis*) as rich text, not as typed
    rows = []
    for name, info in schema.fields().items():
        unit = f" [{info['unit']}]" if info.get("unit") else ""
        rows.append(f"<tr><td><b>{inline_html(info['label'])}</b> ({name}){inline_html(unit)}</td>"
                    f"<td>{inline_html(info['help'])}</td><td>{inline_html(allowed_text(schema, name))}</td>"
                    f"<td>{APPLIES[info['applies']]}</td></tr>")
    observables = ", ".join(f"{o.label}{f' [{o.unit}]' if o.unit else ''}" for o in cls.declared_observables)
    return (f"<h3>{cls.title}</h3>{doc}<p><b>Plotted:</b> {inline_html(observables)}</p>"
            "<table cellpadding='3'><tr><th>parameter</th><th>meaning</th><th>allowed</th><th>applies</th></tr>"
            + "".join(rows) + "</table>")


def build_actions(window) -> None:
    """Make ``window``'s actions (``run_action``, ``step_action``, ...), menus and toolbar."""
    w = window
    files = w.files
    w.run_action = make_action(w, "Run", w.set_running, ["P"], "Run or pause the simulation (P)",
                               checkable=True, name="run_action")
    w.step_action = make_action(w, "Step", w.step_once, ["Space", "Right"],
                                "Advance exactly one step and highlight what flipped (Space, Right)",
                                name="step_action")
    w.reset_action = make_action(w, "Reset", w.reset, [], "A new initial state from the reset parameters",
                                 name="reset_action")
    w.export_action = make_action(w, "Export screenshot...", files.export_dialog, ["Ctrl+S"],
                                  "Save the lattice view, its cells or the whole window as PNG (Ctrl+S)",
                                  name="export_action")
    w.save_action = make_action(w, "Save state...", files.save_dialog, ["Ctrl+Shift+S"],
                                "Save the simulation so it can be resumed exactly", name="save_action")
    w.load_action = make_action(w, "Load state...", files.load_dialog, ["Ctrl+O"],
                                "Resume a saved simulation", name="load_action")
    w.quit_action = make_action(w, "Quit", w.close, ["Ctrl+Q"], name="quit_action")
    w.camera_action = make_action(w, "Reset camera", w.field_view.reset_camera, ["Home"],
                                  "Fit the lattice into the view (Home)", name="camera_action")
    for action in (w.run_action, w.step_action):
        action.setShortcutContext(QtCore.Qt.ShortcutContext.ApplicationShortcut)
    file_menu = w.menuBar().addMenu("&File")
    for action in (w.export_action, w.save_action, w.load_action):
        file_menu.addAction(action)
    file_menu.addSeparator()
    file_menu.addAction(w.quit_action)
    sim_menu = w.menuBar().addMenu("&Simulation")
    for action in (w.run_action, w.step_action, w.reset_action):
        sim_menu.addAction(action)
    _build_model_menu(w)
    view_menu = w.view_menu = w.menuBar().addMenu("&View")    # filled when shown (app/view_menu.py)
    view_menu.addAction(w.camera_action)
    view_menu.addAction(w.control_dock.toggleViewAction())
    view_menu.addAction(w.plot_dock.toggleViewAction())
    w.model_help_action = make_action(w, "About the model...", w.show_model_help, [],
                                      "What the running model is and what each parameter means",
                                      name="model_help_action")
    w.help_menu = w.menuBar().addMenu("&Help")
    w.help_menu.addAction(w.model_help_action)
    icons = {w.step_action: "SP_MediaSkipForward", w.reset_action: "SP_BrowserReload",
             w.export_action: "SP_DesktopIcon", w.save_action: "SP_DialogSaveButton",
             w.load_action: "SP_DialogOpenButton", w.camera_action: "SP_ArrowUp", w.run_action: "SP_MediaPlay"}
    for action, name in icons.items():
        action.setIcon(w.style().standardIcon(getattr(QtWidgets.QStyle.StandardPixmap, name)))
    _build_toolbar(w)
    view_menu.addAction(w.toolbar.toggleViewAction())


def _build_model_menu(w) -> None:
    w.model_menu = w.menuBar().addMenu("&Model")
    w.model_actions = QtGui.QActionGroup(w)
    w.model_actions.setExclusive(True)
    for name in model_names():
        action = QtGui.QAction(get_model(name).title, w, checkable=True)
        action.setObjectName(f"model_{name}")
        action.setData(name)
        action.triggered.connect(lambda _=False, name=name: w.switch_model(name))
        w.model_actions.addAction(action)
        w.model_menu.addAction(action)


def _build_toolbar(w) -> None:
    toolbar = w.addToolBar("Main")
    toolbar.setObjectName("main_toolbar")
    toolbar.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    w.model_box = QtWidgets.QComboBox(objectName="model_box")
    w.model_box.setToolTip("The model to run (Model menu)")
    for name in model_names():
        w.model_box.addItem(get_model(name).title, name)
    w.model_box.activated.connect(lambda index: w.switch_model(w.model_box.itemData(index)))
    toolbar.addWidget(w.model_box)
    toolbar.addSeparator()
    for action in (w.run_action, w.step_action, w.reset_action):
        toolbar.addAction(action)
    toolbar.addSeparator()
    for action in (w.export_action, w.save_action, w.load_action, w.camera_action):
        toolbar.addAction(action)
    w.toolbar = toolbar
    toolbar.toggleViewAction().setObjectName("toolbar_toggle")


def show_model_choice(w, name: str) -> None:
    """The Model menu and the toolbar's box show model ``name`` (without switching)."""
    for action in w.model_actions.actions():
        with QtCore.QSignalBlocker(action):
            action.setChecked(action.data() == name)
    with QtCore.QSignalBlocker(w.model_box):
        w.model_box.setCurrentIndex(w.model_box.findData(name))


def show_running(w, running: bool) -> None:
    """The Run action shows Pause while the simulation runs."""
    with QtCore.QSignalBlocker(w.run_action):
        w.run_action.setChecked(running)
    w.run_action.setText("Pause" if running else "Run")
    pixmap = QtWidgets.QStyle.StandardPixmap.SP_MediaPause if running else QtWidgets.QStyle.StandardPixmap.SP_MediaPlay
    w.run_action.setIcon(w.style().standardIcon(pixmap))
