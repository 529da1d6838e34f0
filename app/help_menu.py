"""The Help menu: "Usage" (F1), "Keyboard shortcuts", "About the model..." (the window's own) and
"About latticelab".

- Usage opens the window's manual, the documentation page docs/window.md, with the desktop's handler for the
  file (QDesktopServices); where no handler takes it, the page is shown in a window of our own instead, or a
  line says where to read it when the page is not installed beside the package.
- Keyboard shortcuts lists every QAction of the window that has a shortcut, read from the actions when the
  dialog opens (with the menu each sits in), so the list cannot drift from what the keys do.
- About latticelab gives what a bug report needs: the version (package metadata), the array backend and
  device, the CUDA driver and runtime versions on CuPy, the OpenGL vendor, renderer and version of the lattice
  canvas's context, and the Python, Qt, PySide6, VisPy and NumPy versions.

The dialogs are not modal (the simulation keeps running behind them) and one of each is kept and raised again.
Scripted windows (``window.interactive`` False) open none.
"""
from __future__ import annotations

import html
import importlib.metadata
import platform
from pathlib import Path

import PySide6
from PySide6 import QtCore, QtGui, QtWidgets

import latticelab

MANUAL = Path(latticelab.__file__).resolve().parent / "docs" / "window.md"   # the site's page "The window"
USAGE_HEADING = "The window"


# ---- what the dialogs say -------------------------------------------------------------------------------
def _version(distribution: str) -> str:
    """The installed version of ``distribution``; for this package run from a source tree that was never
    installed (PYTHONPATH, as on the GPU machine), the version its pyproject.toml declares."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        pass
    if distribution == "latticelab":
        declared = source_version()
        if declared:
            return f"{declared} (source tree, not installed)"
    return "not installed"


def source_version() -> str | None:
    """``project.version`` of the pyproject.toml beside this package, or None when there is none to read."""
    import tomllib
    try:
        with open(Path(latticelab.__file__).resolve().parent / "pyproject.toml", "rb") as file:
            return str(tomllib.load(file)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


def opengl_info(canvas) -> dict[str, str]:
    """GL_VENDOR, GL_RENDERER and GL_VERSION of ``canvas``'s context (a VisPy SceneCanvas)."""
    from vispy.gloo import gl
    from vispy.gloo.context import get_current_canvas
    try:
        if get_current_canvas() is not canvas:
            canvas.set_current()
        return {"OpenGL vendor": str(gl.glGetParameter(gl.GL_VENDOR)),
                "OpenGL renderer": str(gl.glGetParameter(gl.GL_RENDERER)),
                "OpenGL version": str(gl.glGetParameter(gl.GL_VERSION))}
    except Exception as exc:      # no context yet, or a driver that cannot answer: say so, do not fail
        return {"OpenGL": f"unknown ({type(exc).__name__}: {exc})"}


def cuda_info() -> dict[str, str]:
    """CUDA driver and runtime versions and the CuPy version (only called when the model runs on CuPy)."""
    try:
        import cupy
        def dotted(v: int) -> str:
            return f"{v // 1000}.{v % 1000 // 10}"
        return {"CUDA driver": dotted(cupy.cuda.runtime.driverGetVersion()),
                "CUDA runtime": dotted(cupy.cuda.runtime.runtimeGetVersion()),
                "CuPy": cupy.__version__}
    except Exception as exc:
        return {"CUDA": f"unknown ({type(exc).__name__}: {exc})"}


def about_rows(window) -> dict[str, str]:
    """What "About latticelab" lists, as label -> text."""
    import numpy
    import vispy
    model = window.model
    rows = {"latticelab": _version("latticelab"),
            "Array backend": "CuPy (CUDA)" if model.backend_name == "cuda" else "NumPy (CPU)",
            "Device": model.device_name}
    if model.backend_name == "cuda":
        rows.update(cuda_info())
    rows.update(opengl_info(window.lattice_canvas))
    from latticelab.app.raster_canvas import presents_in_raster
    rows["Canvases"] = ("drawn offscreen, shown as images (software OpenGL)" if presents_in_raster(window.lattice_canvas)
                        else "OpenGL widgets")
    rows.update({"Python": f"{platform.python_version()} ({platform.python_implementation()})",
                 "Qt": QtCore.qVersion(), "PySide6": PySide6.__version__, "VisPy": vispy.__version__,
                 "NumPy": numpy.__version__, "Platform": f"{platform.system()} {platform.release()} "
                                                          f"({QtGui.QGuiApplication.platformName()})"})
    return rows


def shortcut_rows(window) -> list[tuple[str, str, str, str]]:
    """(action, keys, menu, what it does) for every action of the window that has a shortcut, by menu then
    name."""
    menu_of = {}
    for top in window.menuBar().actions():
        if top.menu() is not None:
            for action in top.menu().actions():
                menu_of.setdefault(id(action), top.text().replace("&", ""))
    rows, seen = [], set()
    for action in window.findChildren(QtGui.QAction):
        keys = [k.toString(QtGui.QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts()]
        keys = [k for k in keys if k]
        if not keys or id(action) in seen:
            continue
        seen.add(id(action))
        name = action.text().replace("&", "").rstrip(".").strip() or action.objectName()
        tip = action.statusTip() or action.toolTip()
        rows.append((name, ", ".join(keys), menu_of.get(id(action), ""), "" if tip == action.text() else tip))
    return sorted(rows, key=lambda r: (r[2] == "", r[2], r[0].lower()))


def usage_url() -> QtCore.QUrl:
    return QtCore.QUrl.fromLocalFile(str(MANUAL))


# ---- the dialogs --------------------------------------------------------------------------------------------
class TextDialog(QtWidgets.QDialog):
    """A non-modal window with rich text or Markdown, a Copy button (the plain text) and Close."""

    def __init__(self, parent, title: str, name: str):
        super().__init__(parent, objectName=name)
        self.setWindowTitle(title)
        self.setModal(False)
        layout = QtWidgets.QVBoxLayout(self)
        self.browser = QtWidgets.QTextBrowser(objectName=f"{name}_text")
        self.browser.setOpenExternalLinks(True)
        layout.addWidget(self.browser)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        copy = buttons.addButton("Copy", QtWidgets.QDialogButtonBox.ButtonRole.ActionRole)
        copy.clicked.connect(lambda: QtWidgets.QApplication.clipboard().setText(self.browser.toPlainText()))
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)

    def text(self) -> str:
        return self.browser.toPlainText()


def _table(header: tuple[str, ...], rows) -> str:
    head = "".join(f"<th align='left'>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table cellpadding='4'><tr>{head}</tr>{body}</table>"


class HelpMenu(QtCore.QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.dialogs: dict[str, TextDialog] = {}
        self.usage_action = window._action("Usage", self.show_usage, ["F1"],
                                           "How to use the window: its manual page (F1)",
                                           name="usage_action")
        self.shortcuts_action = window._action("Keyboard shortcuts", self.show_shortcuts, [],
                                               "Every keyboard shortcut of the window", name="shortcuts_action")
        self.about_action = window._action("About latticelab", self.show_about, [],
                                           "Version, backend, device, OpenGL and library versions",
                                           name="about_action")
        menu = window.help_menu
        first = menu.actions()[0] if menu.actions() else None
        menu.insertAction(first, self.usage_action)
        menu.insertAction(first, self.shortcuts_action)
        menu.addSeparator()
        menu.addAction(self.about_action)

    def _dialog(self, key: str, title: str, size: tuple[int, int]) -> TextDialog:
        dialog = self.dialogs.get(key)
        if dialog is None:
            dialog = self.dialogs[key] = TextDialog(self.window, title, f"{key}_dialog")
            dialog.resize(*size)
        return dialog

    def _present(self, dialog: TextDialog) -> TextDialog | None:
        if not self.window.interactive:
            return None
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def show_about(self) -> TextDialog | None:
        dialog = self._dialog("about", "About latticelab", (560, 480))
        rows = about_rows(self.window)
        dialog.browser.setHtml("<h3>latticelab</h3><p>Lattice and network models, watched and steered live.</p>"
                               + _table(("", ""), rows.items()))
        return self._present(dialog)

    def show_shortcuts(self) -> TextDialog | None:
        dialog = self._dialog("shortcuts", "Keyboard shortcuts", (640, 460))
        dialog.browser.setHtml("<h3>Keyboard shortcuts</h3>"
                               + _table(("action", "keys", "menu", "what it does"), shortcut_rows(self.window)))
        return self._present(dialog)

    def show_usage(self) -> bool:
        """Open the usage section with the desktop's handler; else show it here. Returns whether the desktop
        took it."""
        if not self.window.interactive:
            return False
        if MANUAL.is_file() and QtGui.QDesktopServices.openUrl(usage_url()):
            self.window.show_message(f"opened {MANUAL} ({USAGE_HEADING})")
            return True
        self.show_usage_here()
        return False

    def show_usage_here(self) -> TextDialog | None:
        dialog = self._dialog("usage", f"latticelab: {USAGE_HEADING}", (820, 640))
        dialog.browser.setSearchPaths([str(MANUAL.parent)])     # the page's pictures (images/...)
        try:
            page = MANUAL.read_text(encoding="utf-8")
        except OSError as exc:
            page = ""
            self.window.show_message(f"cannot read the manual ({MANUAL}): {exc.strerror or exc}", error=True)
        dialog.browser.setMarkdown(page or f"The manual ({MANUAL}) is not installed with this copy of "
                                           "latticelab; it is docs/window.md in the project's repository.")
        return self._present(dialog)


def install(window) -> HelpMenu:
    """Add Usage (F1), Keyboard shortcuts and About latticelab to ``window.help_menu``."""
    help_menu = HelpMenu(window)
    window.help_menu_actions = help_menu
    return help_menu
