"""Dock tabs show their whole names: where the tabs of a dock group do not fit side by side, the tab bar scrolls
(arrows at its end) instead of cutting each name to a few letters ("Gra...", "Stu...", issue 41).

QMainWindow makes a tab bar for each group of tabbed docks when it needs one (at start-up, as docks are
tabified, floated or moved); ``install(window)`` sets each one up when it is first polished, and those already
there.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets


def whole_names(bar: QtWidgets.QTabBar) -> None:
    bar.setElideMode(QtCore.Qt.TextElideMode.ElideNone)
    bar.setUsesScrollButtons(True)


class _TabBarsWholeNames(QtCore.QObject):
    def eventFilter(self, watched, event) -> bool:
        if event.type() == QtCore.QEvent.Type.ChildPolished and isinstance(event.child(), QtWidgets.QTabBar):
            whole_names(event.child())
        return False


def install(window: QtWidgets.QMainWindow) -> None:
    for bar in window.findChildren(QtWidgets.QTabBar):
        whole_names(bar)
    keeper = _TabBarsWholeNames(window)
    window.installEventFilter(keeper)
    window.tab_labels = keeper
