"""The View menu: every dock and toolbar of the window (so a closed one can always be opened again), "Reset
layout" and "Restore defaults".

The dock list is not written down anywhere: it is read from the window's QDockWidget children each time the
menu is about to show, so docks that other modules add (Spectrum, Graph, Messages, ...) appear without this
module knowing them.

"Reset layout" puts the docks back where they were when the window was built (the layout saved at
``install``), every dock and toolbar visible and docked, at the default widths; docks that have nothing to
show for the running model (``available`` False) stay hidden, and their menu entries are disabled. "Restore defaults" sets the
model's parameters to its schema's defaults (one undoable change through ``MainWindow.set_parameter``) and the
run and view options to theirs (app/settings.py), after asking when the window is interactive.
"""
from __future__ import annotations

import shiboken6
from PySide6 import QtCore, QtGui, QtWidgets

DEFAULT_CONTROLS_WIDTH = 300      # the widths MainWindow.showEvent gives a first-time layout
MIN_PLOTS_WIDTH = 320


def docks(window) -> list[QtWidgets.QDockWidget]:
    """The window's docks, by title."""
    found = [d for d in window.findChildren(QtWidgets.QDockWidget) if d.parent() is window]
    return sorted(found, key=lambda d: d.windowTitle().lower())


def _address(qobject) -> int:
    """The C++ object's address: Python wrappers of one Qt object need not be the same Python object."""
    return shiboken6.getCppPointer(qobject)[0]


def applies(dock: QtWidgets.QDockWidget) -> bool:
    """Whether a dock has something to show for the running model: docks made for some models only (a signal,
    a coarsening length) say so with an ``available`` attribute and hide themselves otherwise."""
    return bool(getattr(dock, "available", True))


def toolbars(window) -> list[QtWidgets.QToolBar]:
    return [t for t in window.findChildren(QtWidgets.QToolBar) if t.parent() is window]


class ViewMenu(QtCore.QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.default_state = window.saveState()     # before the user's layout is restored
        self.reset_layout_action = QtGui.QAction("Reset layout", window, objectName="reset_layout_action")
        self.reset_layout_action.setStatusTip("Every dock back at its default place and size, all visible")
        self.reset_layout_action.triggered.connect(self.reset_layout)
        self.restore_defaults_action = QtGui.QAction("Restore defaults...", window,
                                                     objectName="restore_defaults_action")
        self.restore_defaults_action.setStatusTip("The model's parameters and the view options back to their "
                                                  "defaults (the parameters can be undone with Ctrl+Z)")
        self.restore_defaults_action.triggered.connect(lambda: self.restore_defaults())
        self._separators = []           # made once and reused, so that opening the menu creates nothing
        for _ in range(3):
            separator = QtGui.QAction(self)
            separator.setSeparator(True)
            self._separators.append(separator)
        window.view_menu.aboutToShow.connect(self.rebuild)
        self.rebuild()

    def rebuild(self) -> None:
        """Fill the menu from what the window holds now. Only the dock and toolbar entries, the separators put
        here and this module's own actions are replaced; what other modules added (the camera, a colour key)
        stays where it is."""
        menu, window = self.window.view_menu, self.window
        dock_list, bars = docks(window), toolbars(window)
        ours = [*self._separators, self.reset_layout_action, self.restore_defaults_action,
                *(w.toggleViewAction() for w in [*dock_list, *bars])]
        managed = {_address(a) for a in ours}
        for action in menu.actions():
            if _address(action) in managed:
                menu.removeAction(action)
        docks_start, bars_start, own_start = self._separators
        menu.addAction(docks_start)
        for dock in dock_list:
            action = dock.toggleViewAction()
            action.setEnabled(applies(dock))
            action.setToolTip(dock.windowTitle() if applies(dock) else
                              f"{dock.windowTitle()}: nothing to show for the {window.model.title}")
            menu.addAction(action)
        if bars:
            menu.addAction(bars_start)
            for bar in bars:
                menu.addAction(bar.toggleViewAction())
        menu.addAction(own_start)
        menu.addAction(self.reset_layout_action)
        menu.addAction(self.restore_defaults_action)

    def reset_layout(self) -> None:
        window = self.window
        window.restoreState(self.default_state)
        for dock in docks(window):
            if dock.isFloating():
                dock.setFloating(False)
            dock.setVisible(applies(dock))
        for bar in toolbars(window):
            bar.show()
        controls, plots = getattr(window, "control_dock", None), getattr(window, "plot_dock", None)
        if controls is not None and plots is not None:
            window.resizeDocks([controls, plots], [DEFAULT_CONTROLS_WIDTH, max(MIN_PLOTS_WIDTH, window.width() // 4)],
                               QtCore.Qt.Orientation.Horizontal)
        if plots is not None:
            plots.raise_()        # the live plots are the visible tab of their group
        window.show_message("layout reset: every dock at its default place")

    def restore_defaults(self) -> bool:
        """Parameters and view options back to their defaults; returns whether anything was done."""
        window = self.window
        title = window.model.title
        if window.interactive:
            buttons = QtWidgets.QMessageBox.StandardButton
            answer = QtWidgets.QMessageBox.question(
                window, "Restore defaults?",
                f"Set every parameter of the {title} and the view options back to their defaults?\n"
                "The parameter change can be undone (Edit > Undo).", buttons.Yes | buttons.No, buttons.No)
            if answer != buttons.Yes:
                return False
        schema = window.runner.model_class.Params
        try:
            defaults = schema.create(gpu=window.model.backend_name == "cuda").model_dump()
        except ValueError as exc:        # a schema whose defaults do not validate: a bug, said rather than raised
            window.show_message(f"cannot restore defaults: {exc}", error=True)
            return False
        current = window.runner.params.model_dump()
        changed = [k for k in defaults if defaults[k] != current.get(k)]
        if changed:
            # every default travels in one change: one rebuild at most, one undo step, and no value taken from
            # elsewhere (such as the values a variant of the model last had)
            name = changed[0]
            if not window.set_parameter(name, defaults[name], also={k: v for k, v in defaults.items() if k != name}):
                return False
        window.controls.restore_view_defaults(window.model.backend_name, type(window.model))
        from latticelab.app import colour_key
        colour_key.restore(window, True)        # the colour key is a view option too (on by default)
        window.show_message(f"defaults restored: {len(changed)} parameter(s) of the {title} and the view options")
        return True


def install(window) -> ViewMenu:
    """The View menu (``window.view_menu``) filled from the window's docks and toolbars whenever it opens."""
    view = ViewMenu(window)
    window.view_menu_builder = view
    window.reset_layout_action = view.reset_layout_action
    window.restore_defaults_action = view.restore_defaults_action
    return view
