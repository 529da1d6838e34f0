"""The Messages dock (app/log_panel.py): it keeps every message while hidden without touching its table, shows
them all when opened, and fits each row to its wrapped message."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtWidgets  # noqa: E402

from latticelab.app.log_panel import MAX_MESSAGES, install  # noqa: E402

LONG = " ".join(["a message long enough to wrap over several lines of the dock"] * 6)


def make_window(qtbot):
    window = QtWidgets.QMainWindow()
    window.setCentralWidget(QtWidgets.QLabel("centre"))
    qtbot.addWidget(window)
    panel = install(window)
    window.resize(700, 500)
    window.show()
    qtbot.waitExposed(window)
    return window, panel


def test_messages_added_while_hidden_are_kept_and_shown_when_the_dock_opens(qtbot):
    window, panel = make_window(qtbot)
    assert not panel.isVisible()
    for n in range(5):
        panel.add(f"message {n}")
    panel.add(LONG, "error")
    assert panel.table.rowCount() == 0                 # a hidden dock's table is not touched
    assert [m[1:] for m in panel.messages()][-2:] == [("info", "message 4"), ("error", LONG)]
    assert panel.text().splitlines()[-1].endswith("\terror\t" + LONG)
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.waitUntil(lambda: panel.table.rowCount() == 6, timeout=5000)
    assert [panel.table.item(r, 2).text() for r in range(6)] == [f"message {n}" for n in range(5)] + [LONG]
    # the long message's row holds its wrapped text; a short one is one line
    qtbot.waitUntil(lambda: panel.table.rowHeight(5) > 2 * panel.table.rowHeight(0), timeout=5000)
    panel.add("shown at once")                         # the open dock takes new messages directly
    assert panel.table.rowCount() == 7 and panel.table.item(6, 2).text() == "shown at once"


def test_rows_are_fitted_again_when_the_dock_changes_width_and_old_messages_go(qtbot):
    window, panel = make_window(qtbot)
    panel.show()
    qtbot.waitExposed(panel)
    panel.add(LONG)
    panel.add("short")
    qtbot.wait(50)
    middle = panel.table.rowHeight(0)
    window.resize(1000, 500)                            # wider: the long message takes fewer lines
    qtbot.waitUntil(lambda: panel.table.rowHeight(0) < middle, timeout=5000)
    window.resize(400, 500)                             # narrower: more lines than at first
    qtbot.waitUntil(lambda: panel.table.rowHeight(0) > middle, timeout=5000)
    assert panel.table.rowHeight(1) < middle
    for n in range(MAX_MESSAGES + 3):
        panel.add(f"m{n}")
    assert len(panel.messages()) == MAX_MESSAGES and panel.table.rowCount() == MAX_MESSAGES
    assert panel.messages()[0][2] == "m3" and panel.table.item(0, 2).text() == "m3"   # 1,005 in all
