"""The Messages dock: every message the window shows, in full, with its time and level.

The status bar shows one line for a few seconds and cuts what does not fit; a warning about a damaged settings
file with several problems, or a long refusal, would be lost there. ``MainWindow.show_message`` also hands
every message to this panel (``add``), which keeps the last ``MAX_MESSAGES`` in a table the user can read,
select and copy. The dock starts hidden at the bottom; the View menu opens it.
"""
from __future__ import annotations

import time
from collections import deque

from PySide6 import QtCore, QtGui, QtWidgets

MAX_MESSAGES = 1000      # older messages are dropped: a running window must not grow without bound
LEVEL_COLOURS = {"error": QtGui.QColor("#d32f2f"), "info": None}


class MessagesPanel(QtWidgets.QDockWidget):
    """A table of (time, level, message), newest last."""

    COLUMNS = ("time", "level", "message")

    def __init__(self, parent=None, clock=time.localtime):
        super().__init__("Messages", parent, objectName="messages_dock")
        self.clock = clock
        # The messages themselves are kept here; the table shows them only while the dock is open (a hidden
        # dock's table took each row's insertion and layout all the same) and catches up when it is shown.
        self._store: deque = deque(maxlen=MAX_MESSAGES)
        self._behind = False            # the table lacks messages added while the dock was hidden
        self._fit_pending = False
        body = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(body)
        layout.setContentsMargins(2, 2, 2, 2)
        self.table = QtWidgets.QTableWidget(0, len(self.COLUMNS), objectName="messages_table")
        self.table.setHorizontalHeaderLabels(self.COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(True)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QtWidgets.QHeaderView.ResizeMode.Stretch)
        # rows grow to hold their whole (wrapped) message, also when the dock is made narrower: each new row is
        # fitted once, and all rows when the message column's width changes. (ResizeToContents on the vertical
        # header measured every row's wrapped text again after each message: 16 ms on the H100's host with a
        # few dozen messages, in the middle of a model switch.)
        self.table.verticalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Interactive)
        header.sectionResized.connect(self._fit_rows_after_width_change)
        layout.addWidget(self.table)
        buttons = QtWidgets.QHBoxLayout()
        self.copy_button = QtWidgets.QPushButton("Copy", objectName="messages_copy")
        self.copy_button.setToolTip("Copy the selected messages (all when none is selected)")
        self.clear_button = QtWidgets.QPushButton("Clear", objectName="messages_clear")
        buttons.addStretch(1)
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.clear_button)
        layout.addLayout(buttons)
        self.setWidget(body)
        self.copy_button.clicked.connect(self.copy)
        self.clear_button.clicked.connect(self.clear)

    def add(self, text: str, level: str = "info") -> None:
        """Keep a message (the oldest goes when there are more than MAX_MESSAGES); shown at once when the dock
        is open."""
        message = (time.strftime("%H:%M:%S", self.clock()), level, text)
        self._store.append(message)
        if self.isVisible() and not self._behind:
            self._append_row(message)
            self.table.scrollToBottom()
        else:
            self._behind = True

    def _append_row(self, message) -> None:
        if self.table.rowCount() >= MAX_MESSAGES:
            self.table.removeRow(0)
        row = self.table.rowCount()
        self.table.insertRow(row)
        _stamp, level, text = message
        for column, value in enumerate(message):
            item = QtWidgets.QTableWidgetItem(value)
            colour = LEVEL_COLOURS.get(level)
            if colour is not None:
                item.setForeground(colour)
            if column == 2:
                item.setToolTip(text)
            self.table.setItem(row, column, item)
        self.table.resizeRowToContents(row)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._behind:
            self._behind = False
            self.table.setRowCount(0)
            for message in self._store:
                self._append_row(message)
            self.table.scrollToBottom()

    def _fit_rows_after_width_change(self, column: int, _old: int, _new: int) -> None:
        # after the event that resized the column (inside it, the rows were measured at the old width); one fit
        # for the several resizes of one layout
        if column == 2 and self.isVisible() and not self._fit_pending:
            self._fit_pending = True
            QtCore.QTimer.singleShot(0, self, self._fit_rows)

    def _fit_rows(self) -> None:
        self._fit_pending = False
        self.table.resizeRowsToContents()

    def messages(self) -> list[tuple[str, str, str]]:
        """(time, level, text) of every message kept, oldest first."""
        return list(self._store)

    def text(self, rows=None) -> str:
        """The messages of the table's ``rows`` (all messages when None) as tab-separated lines."""
        if rows is None:
            lines = self.messages()
        else:
            lines = [[self.table.item(r, c).text() for c in range(len(self.COLUMNS))] for r in rows]
        return "\n".join("\t".join(line) for line in lines)

    def copy(self) -> None:
        rows = sorted({index.row() for index in self.table.selectionModel().selectedRows()})
        QtWidgets.QApplication.clipboard().setText(self.text(rows or None))

    def clear(self) -> None:
        self._store.clear()
        self.table.setRowCount(0)


STATUS_HINT = " ... (in full: View > Messages)"


def status_text(bar: QtWidgets.QStatusBar, text: str) -> str:
    """``text`` as it fits the status bar's free space (beside its permanent labels); a text cut to fit ends
    with a pointer to the Messages dock, so a long warning is never silently cut."""
    metrics = bar.fontMetrics()
    direct = QtCore.Qt.FindChildOption.FindDirectChildrenOnly
    taken = sum(w.width() for w in bar.findChildren(QtWidgets.QWidget, options=direct) if w.isVisible())
    free = max(bar.width() - taken - 24, 240)     # 24: margins; never less than a useful stub
    if "\n" not in text and metrics.horizontalAdvance(text) <= free:
        return text
    room = free - metrics.horizontalAdvance(STATUS_HINT)
    cut = metrics.elidedText(" ".join(text.split()), QtCore.Qt.TextElideMode.ElideRight, room)
    return cut.rstrip("\u2026").rstrip() + STATUS_HINT


def install(window, area=QtCore.Qt.DockWidgetArea.BottomDockWidgetArea) -> MessagesPanel:
    """Add the (hidden) Messages dock to ``window``; the window's ``show_message`` feeds it."""
    panel = MessagesPanel(window)
    window.addDockWidget(area, panel)
    panel.hide()
    return panel
