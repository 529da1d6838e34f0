"""Undo and redo of parameter changes (Edit menu, Ctrl+Z / Ctrl+Shift+Z).

Every change that ``MainWindow.set_parameter`` applies is recorded as the model's parameters before and after
it (a QUndoCommand on a QUndoStack). Undo puts the "before" values back through ``set_parameter`` itself, so
they are validated again and routed as their schema says (live, next reset, new model) and the form shows
them; redo does the same with the "after" values. All fields of the step travel together: undoing a switch of
the Ising dimension restores the old dimension with its own size and temperature in one rebuild.

Undo and redo call ``set_parameter(..., record=False)``, so they are not recorded again. The history belongs
to one kind of model: after a switch to another model, the older entries are dropped.
"""
from __future__ import annotations

from PySide6 import QtGui, QtWidgets

from latticelab.sim.params import ModelParams


class ParameterChange(QtGui.QUndoCommand):
    """One applied parameter change: all values before and after (a dict per side)."""

    def __init__(self, history: "UndoHistory", model_name: str, name: str, before: dict, after: dict):
        super().__init__(_describe(name, before, after))
        self.history, self.model_name, self.name = history, model_name, name
        self.before, self.after = before, after
        self._applied = True        # pushed after the change was made: the first redo() does nothing

    def redo(self) -> None:
        if self._applied:
            self._applied = False
            return
        self.history.apply(self, self.after, "redo")

    def undo(self) -> None:
        self.history.apply(self, self.before, "undo")


def _describe(name: str, before: dict, after: dict) -> str:
    """'T = 1.5', or 'dim = 3, L = 8, T = 4.45' when several fields changed together."""
    changed = [k for k in after if before.get(k) != after[k]]
    if name in changed:       # the edited field first
        changed.remove(name)
        changed.insert(0, name)
    return ", ".join(f"{k} = {after[k]}" for k in changed) or name


class UndoHistory:
    """The window's undo stack of parameter changes."""

    def __init__(self, window):
        self.window = window
        self.stack = QtGui.QUndoStack(window)
        self.menu = self.undo_action = self.redo_action = None    # the Edit menu and its actions (install)

    def record(self, name: str, before: ModelParams, after: ModelParams, model_name: str) -> None:
        """A change of ``name`` was applied (``before`` -> ``after``); nothing is recorded when nothing changed.
        A record of another kind of model than the history's starts a new history."""
        old, new = before.model_dump(), after.model_dump()
        if old == new:
            return
        if self.stack.count() and self._model_of_history() != model_name:
            self.stack.clear()
        self.stack.push(ParameterChange(self, model_name, name, old, new))

    def _model_of_history(self) -> str | None:
        index = self.stack.index() - 1 if self.stack.index() > 0 else 0
        command = self.stack.command(index)
        return command.model_name if command is not None else None

    def apply(self, command: ParameterChange, values: dict, verb: str) -> None:
        """Put ``values`` (one side of ``command``) back through the window's parameter path, unrecorded."""
        window = self.window
        if window.model.name != command.model_name:
            window.show_message(f"cannot {verb} {command.text()}: the {window.model.title} runs now, and that "
                                "change was made to another model", error=True)
            return
        current = window.runner.params.model_dump()
        changed = [k for k in values if current.get(k) != values[k]]
        if not changed:
            return
        # the edited field leads (its message, its routing); every other value of the record travels with it, so
        # nothing is taken from elsewhere (such as the values a variant of the model last had)
        name = command.name if command.name in changed else changed[0]
        others = {k: v for k, v in values.items() if k != name}
        if window.set_parameter(name, values[name], also=others, record=False):
            window.show_message(f"{verb}: {_describe(name, current, values)}")

    def forget_other_models(self) -> None:
        """Drop the history when it belongs to another kind of model than the one running now."""
        if self.stack.count() and self._model_of_history() != self.window.model.name:
            self.stack.clear()

    def undo(self) -> None:
        self.stack.undo()

    def redo(self) -> None:
        self.stack.redo()

    def clear(self) -> None:
        self.stack.clear()


def install(window) -> UndoHistory:
    """The window's undo history and an Edit menu (after File) with Undo (Ctrl+Z) and Redo (Ctrl+Shift+Z,
    Ctrl+Y)."""
    history = UndoHistory(window)
    undo = history.stack.createUndoAction(window, "Undo")
    undo.setObjectName("undo_action")
    undo.setShortcut(QtGui.QKeySequence("Ctrl+Z"))
    redo = history.stack.createRedoAction(window, "Redo")
    redo.setObjectName("redo_action")
    redo.setShortcuts([QtGui.QKeySequence("Ctrl+Shift+Z"), QtGui.QKeySequence("Ctrl+Y")])
    for action, tip in ((undo, "Undo the last parameter change (Ctrl+Z)"),
                        (redo, "Redo the parameter change undone last (Ctrl+Shift+Z)")):
        action.setStatusTip(tip)
        window.addAction(action)     # the shortcut works while the menu bar is hidden too
    menu = QtWidgets.QMenu("&Edit", window, objectName="edit_menu")
    menu.addAction(undo)
    menu.addAction(redo)
    menu.aboutToShow.connect(history.forget_other_models)
    actions = window.menuBar().actions()
    if len(actions) >= 2:         # File, Edit, Simulation, ...: the Edit menu goes right after File
        window.menuBar().insertMenu(actions[1], menu)
    else:
        window.menuBar().addMenu(menu)
    history.menu, history.undo_action, history.redo_action = menu, undo, redo
    return history
