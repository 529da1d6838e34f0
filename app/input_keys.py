"""The window's one-key shortcuts (Space and Right step the model, Home resets the camera) leave their keys to a
focused input widget that uses them: Right moves a slider or a text cursor, Space ticks a check box or presses a
button, Up and Down step a spin box.

Qt offers a key to the shortcuts unless the focused widget claims it first (a ShortcutOverride event, sent to
the focused widget and then to its parents up to its window); a slider or a check box does not claim its keys,
so the Right key stepped the model while the 3D peel slider had focus (issue 41). ``InputKeysFirst`` claims them
for such widgets; it watches the main window and each dock (a floated dock is a window of its own, where the
event stops).
"""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

# keys an input widget uses without modifiers
NAVIGATION_KEYS = {QtCore.Qt.Key.Key_Left, QtCore.Qt.Key.Key_Right, QtCore.Qt.Key.Key_Up, QtCore.Qt.Key.Key_Down,
                   QtCore.Qt.Key.Key_Space, QtCore.Qt.Key.Key_PageUp, QtCore.Qt.Key.Key_PageDown,
                   QtCore.Qt.Key.Key_Home, QtCore.Qt.Key.Key_End}
INPUT_WIDGETS = (QtWidgets.QAbstractSlider, QtWidgets.QAbstractSpinBox, QtWidgets.QComboBox, QtWidgets.QLineEdit,
                 QtWidgets.QTextEdit, QtWidgets.QPlainTextEdit, QtWidgets.QAbstractItemView,
                 QtWidgets.QAbstractButton, QtWidgets.QTabBar)
MODIFIERS = (QtCore.Qt.KeyboardModifier.ControlModifier | QtCore.Qt.KeyboardModifier.AltModifier
             | QtCore.Qt.KeyboardModifier.MetaModifier)


class InputKeysFirst(QtCore.QObject):
    def eventFilter(self, watched, event) -> bool:
        if event.type() == QtCore.QEvent.Type.ShortcutOverride and wanted_by_focus(event):
            event.accept()      # the key goes to the focused widget as a key press, not to a shortcut
            return True
        return False


def wanted_by_focus(event: QtGui.QKeyEvent) -> bool:
    """Whether the focused widget is an input widget and ``event``'s key is one such widgets use."""
    if event.key() not in NAVIGATION_KEYS or event.modifiers() & MODIFIERS:
        return False
    return isinstance(QtWidgets.QApplication.focusWidget(), INPUT_WIDGETS)


def install(window) -> InputKeysFirst:
    """Watch ``window`` and its docks (call after the docks are made)."""
    keys = InputKeysFirst(window)
    window.installEventFilter(keys)
    for dock in window.findChildren(QtWidgets.QDockWidget):
        dock.installEventFilter(keys)
    window.input_keys = keys
    return keys
