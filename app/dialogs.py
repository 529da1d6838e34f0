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


def choose_output(parent: QtWidgets.QWidget, path, suffix: str, write, *, confirm: bool, say,
                  prefs=None, folder_key: str | None = None, what: str = "written",
                  errors: tuple = (OSError,), replace_folders: bool = False) -> Path | None:
    """The save-a-file sequence of the window and its docks: ``suffix`` added when missing; an existing file
    replaced only if the user agrees (``confirm``: asked once, No keeps it), else (scripts, or a folder in the
    way unless ``replace_folders``: a store that is a folder) a free name beside it (sim/io.py ``free_path``);
    ``write(path, overwrite)`` writes it (returning the path written, or None for ``path``); a failure to write
    (``errors``) is said (``say(text, error=True)``); the folder is remembered (``prefs`` under ``folder_key``)
    for the next dialog. Returns the path written, or None; the caller says what it wrote."""
    from latticelab.sim.io import free_path

    path = Path(path)
    if suffix and path.suffix.lower() != suffix:
        path = path.with_name(path.name + suffix)
    overwrite = False
    if path.exists():
        if confirm and (path.is_file() or replace_folders):
            if not confirm_replace(parent, path):
                say(f"not {what}: {path.name} exists and was kept", error=False)
                return None
            overwrite = True
        else:
            path = free_path(path)
    try:
        written = write(path, overwrite) or path
    except errors as exc:       # OSError, and what else ``write`` raises for what it cannot write
        say(f"could not write {path}: {getattr(exc, 'strerror', None) or exc}", error=True)
        return None
    if prefs is not None and folder_key:
        prefs.set(folder_key, str(Path(written).parent.resolve()))
    return Path(written)


def ask_save_path(parent: QtWidgets.QWidget, title: str, folder: str | None, name: str, filters: str):
    """The file dialog for a new file, starting at ``name`` in ``folder`` (else the working folder); no question
    of its own about an existing file (``choose_output`` asks, once). Returns (path or "", chosen filter)."""
    start = str(Path(folder or Path.cwd()) / name)
    return QtWidgets.QFileDialog.getSaveFileName(parent, title, start, filters,
                                                 options=QtWidgets.QFileDialog.Option.DontConfirmOverwrite)
