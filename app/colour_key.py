"""The colour key over the lattice view (render/legend.py: LegendOverlay) and the View menu's action that shows
or hides it. ``install(window)`` is the one line the main window needs; ``shown`` and ``restore`` let the window
remember the choice between sessions (setting ``view/legend``, app/settings.py)."""
from __future__ import annotations

from PySide6 import QtGui, QtWidgets

from latticelab.render.legend import LegendOverlay


def _view_menu(window) -> QtWidgets.QMenu | None:
    for action in window.menuBar().actions():
        if action.menu() is not None and action.text().replace("&", "") == "View":
            return action.menu()
    return None


def _add_to(menu: QtWidgets.QMenu, action: QtGui.QAction, after: QtGui.QAction | None) -> None:
    """Put ``action`` in ``menu`` right after ``after`` (the camera's action), or at the end; once."""
    actions = menu.actions()
    if action in actions:
        return
    if after in actions and actions.index(after) + 1 < len(actions):
        menu.insertAction(actions[actions.index(after) + 1], action)
    else:
        menu.addAction(action)


def install(window) -> LegendOverlay:
    """Put the key on ``window.field_view`` and a checkable "Show colour key" action (on) in the View menu."""
    overlay = LegendOverlay(window.field_view)
    action = QtGui.QAction("Show colour key", window, checkable=True, objectName="legend_action")
    action.setChecked(True)
    action.setStatusTip("Show what the colours of the lattice mean, in a corner of the view")

    def toggle(on: bool) -> None:
        overlay.visible = on
        window.lattice_canvas.update()

    action.toggled.connect(toggle)
    window.addAction(action)
    menu = getattr(window, "view_menu", None) or _view_menu(window)
    if menu is not None:
        _add_to(menu, action, getattr(window, "camera_action", None))
        # a View menu rebuilt each time it opens (app/view_menu.py) drops actions it does not know: add ours
        # back after it (slots run in the order they were connected: install this after the View menu's)
        menu.aboutToShow.connect(lambda: _add_to(menu, action, getattr(window, "camera_action", None)))
    window.legend_overlay, window.legend_action = overlay, action
    return overlay


def note(window, text: str) -> None:
    """A line under the key saying what the picture leaves out ("" for none)."""
    overlay = getattr(window, "legend_overlay", None)
    if overlay is not None:
        overlay.set_note(text)


def shown(window) -> bool:
    """Whether the key is switched on (View > Show colour key); True for a window without one."""
    action = getattr(window, "legend_action", None)
    return True if action is None else action.isChecked()


def restore(window, on: bool) -> None:
    """Show or hide the key as a stored setting says (the action and the overlay together)."""
    action = getattr(window, "legend_action", None)
    if action is not None:
        action.setChecked(bool(on))       # toggled -> the overlay follows (no signal when unchanged)
        window.legend_overlay.visible = action.isChecked()
