"""The mouse wheel over a form scrolls the form: a combo box, spin box or slider takes a wheel turn only once it
has the keyboard focus (a click or Tab gives it).

Qt's boxes and sliders change their value under a passing wheel, and a form in a scroll area is scrolled with the
pointer over them: scrolling down the Cahn-Hilliard form switched *Time steps* to adaptive and picked the PFHub
preset seven times (issue 41). ``scroll_unless_focused(root)`` makes those widgets under ``root`` hand an
unfocused wheel turn to the scroll area around them, and no longer take the focus from the wheel.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

WHEEL_WIDGETS = (QtWidgets.QComboBox, QtWidgets.QAbstractSpinBox, QtWidgets.QAbstractSlider)


class _WheelToParent(QtCore.QObject):
    def eventFilter(self, watched, event) -> bool:
        if event.type() != QtCore.QEvent.Type.Wheel or watched.hasFocus():
            return False
        area = watched.parentWidget()
        while area is not None and not isinstance(area, QtWidgets.QAbstractScrollArea):
            area = area.parentWidget()
        if area is None:
            event.ignore()      # no scroll area: the parents may take it
            return True
        # handed to the scroll area directly (Qt passes an ignored wheel event on to the parents only when it came
        # from the window system, not one sent by the application)
        QtWidgets.QApplication.sendEvent(area.viewport(), event.clone())
        return True


_FILTER: _WheelToParent | None = None


def scroll_unless_focused(root: QtWidgets.QWidget) -> None:
    """Guard the combo boxes, spin boxes and sliders under ``root`` (again after new ones were added: a widget
    guarded before is guarded once)."""
    global _FILTER
    if _FILTER is None:
        _FILTER = _WheelToParent(QtWidgets.QApplication.instance())
    for widget in root.findChildren(QtWidgets.QWidget):
        if isinstance(widget, WHEEL_WIDGETS) and not widget.property("wheel_guarded"):
            widget.setProperty("wheel_guarded", True)
            if widget.focusPolicy() == QtCore.Qt.FocusPolicy.WheelFocus:
                widget.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)
            widget.installEventFilter(_FILTER)
