"""The docks and menus plugged into the main window use only what app/dock_host.py declares (and the QMainWindow the
window is): read from the sources, every attribute they take of the window is a member of the protocol or of
QMainWindow, none is private, and none is reached through getattr/hasattr/setattr. The window itself
(app/main_window.py) implements every member of the protocol."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6 import QtWidgets  # noqa: E402

from latticelab.app.dock_host import DockHost  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "app"
# the window and its own collaborators, which make it (they set its members), and the command that runs it
WINDOW_MODULES = {"main_window.py", "frame_loop.py", "model_lifecycle.py", "file_actions.py", "window_actions.py",
                  "status_bar.py", "dock_host.py", "gui.py"}
DYNAMIC = {"getattr", "hasattr", "setattr", "delattr"}


def protocol_members() -> set[str]:
    names = set(DockHost.__annotations__)
    names |= {n for n in vars(DockHost) if not n.startswith("_")}
    return names


def _is_window(node: ast.AST, aliases: set[str]) -> bool:
    """``window``, ``self.window`` or a local alias of them."""
    if isinstance(node, ast.Name):
        return node.id in aliases
    return isinstance(node, ast.Attribute) and node.attr == "window" and isinstance(node.value, ast.Name) \
        and node.value.id == "self"


def _aliases(tree: ast.AST) -> set[str]:
    """The names that hold the window in a module: ``window`` and those assigned from it (``w = self.window``)."""
    names = {"window"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_window(node.value, names):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def uses_of_the_window(path: Path):
    """(line, what) for each use of the window in ``path`` that is not a member of the protocol or QMainWindow."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = _aliases(tree)
    allowed = protocol_members() | set(dir(QtWidgets.QMainWindow))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DYNAMIC \
                and node.args and _is_window(node.args[0], aliases):
            yield node.lineno, f"{node.func.id}(window, ...)"
        elif isinstance(node, ast.Attribute) and _is_window(node.value, aliases) and node.attr not in allowed:
            yield node.lineno, f"window.{node.attr}"


def test_the_docks_use_only_what_the_window_declares():
    modules = sorted(p for p in APP.glob("*.py") if p.name not in WINDOW_MODULES)
    assert len(modules) > 10
    found = [f"{p.name}:{line}: {what}" for p in modules for line, what in uses_of_the_window(p)]
    assert not found, "\n".join(found)


def test_no_module_of_the_app_reaches_the_window_through_getattr():
    found = [f"{p.name}:{line}: {what}" for p in sorted(APP.glob("*.py"))
             for line, what in uses_of_the_window(p) if what.endswith("(window, ...)")]
    assert not found, "\n".join(found)


def test_the_check_sees_a_private_member_and_getattr(tmp_path):
    source = tmp_path / "dock.py"
    source.write_text("def install(window):\n    window._warn('a', 'b')\n    getattr(window, 'plot_dock', None)\n"
                      "class D:\n    def f(self):\n        w = self.window\n        return w.stepper.busy\n")
    assert [what for _, what in sorted(uses_of_the_window(source))] == ["window._warn", "getattr(window, ...)",
                                                                        "window.stepper"]


def test_the_main_window_has_every_member_of_the_protocol():
    from latticelab.app.main_window import MainWindow
    source = (APP / "main_window.py").read_text(encoding="utf-8") + (APP / "window_actions.py").read_text("utf-8")
    for name in protocol_members():
        assert hasattr(MainWindow, name) or f"self.{name} =" in source or f"w.{name} =" in source \
            or f"self.{name}, " in source, name
