"""Small Qt questions shared by the window and its docks."""
from __future__ import annotations

from pathlib import Path

from PySide6 import QtWidgets


def confirm_replace(parent: QtWidgets.QWidget, path: Path) -> bool:
    """Ask once whether an existing file may be replaced; No is the default answer."""
    buttons = QtWidgets.QMessageBox.StandardButton
    answer = QtWidgets.QMessageBox.question(
        parent, "Replace file?", f"{path.name} already exists in {path.parent}.\nReplace it?",
        buttons.Yes | buttons.No, buttons.No)
    return answer == buttons.Yes
