"""The colour key over the lattice view (render/legend.py: LegendOverlay) and the View menu's action that shows
or hides it. ``install(window)`` is the one line the main window needs; ``shown`` and ``restore`` let the window
remember the choice between sessions (``shown``, ``restore``) (setting ``view/legend``, app/settings.py)."""
from __future__ import annotations

from PySide6 import QtGui, QtWidgets

from latticelab.render.legend import LegendOverlay


def _add_to(menu: QtWidgets.QMenu, action: QtGui.QAction, after: QtGui.QAction | None) -> None:
    """Put ``action`` in ``menu`` right after ``after`` (the camera's action), or at the end; once."""
    actions = menu.actions()
    if action in actions:
        return
    if after in actions and actions.index(after) + 1 < len(actions):
        menu.insertAction(actions[actions.index(after) + 1], action)
    else:
        menu.addAction(action)


class ColourKey:
    """The key over ``window``'s field view (``overlay``) and the View menu's "Show colour key" (``action``, on)."""

    def __init__(self, window):
        self.window = window
        self.overlay = LegendOverlay(window.field_view)
        self.action = QtGui.QAction("Show colour key", window, checkable=True, objectName="legend_action")
        self.action.setChecked(True)
        self.action.setStatusTip("Show what the colours of the lattice mean, in a corner of the view")
        self.action.toggled.connect(self._toggled)
        window.addAction(self.action)
        menu = window.view_menu
        _add_to(menu, self.action, window.camera_action)
        # a View menu rebuilt each time it opens (app/view_menu.py) drops actions it does not know: add ours back
        # after it (slots run in the order they were connected: install this after the View menu's)
        menu.aboutToShow.connect(lambda: _add_to(menu, self.action, window.camera_action))

    def _toggled(self, on: bool) -> None:
        self.overlay.visible = on
        self.window.lattice_canvas.update()

    def note(self, text: str) -> None:
        """A line under the key saying what the picture leaves out ("" for none)."""
        self.overlay.set_note(text)

    def shown(self) -> bool:
        """Whether the key is switched on (View > Show colour key)."""
        return self.action.isChecked()

    def restore(self, on: bool) -> None:
        """Show or hide the key as a stored setting says (the action and the overlay together)."""
        self.action.setChecked(bool(on))       # toggled -> the overlay follows (no signal when unchanged)
        self.overlay.visible = self.action.isChecked()


def install(window) -> ColourKey:
    """Put the key on the window's field view and a checkable "Show colour key" action (on) in its View menu,
    after Reset camera."""
    return ColourKey(window)
