"""The window says what the user is looking at (issue 16): Help menu, View menu with every dock, layout and
defaults, the Messages dock, controls that apply only where they mean something, and "paused" at once."""
from __future__ import annotations

import importlib.metadata
import platform

import PySide6
from PySide6 import QtCore, QtGui, QtWidgets

from gui_helpers import activate, answer_next_dialog, choose, type_into

from latticelab.app import help_menu


def _open_menu(qtbot, window, menu: QtWidgets.QMenu) -> dict[str, QtGui.QAction]:
    """Pop ``menu`` up as a click on the menu bar would, and return its actions by text."""
    menu.popup(window.mapToGlobal(QtCore.QPoint(40, 40)))
    qtbot.waitUntil(menu.isVisible, timeout=15000)
    actions = {a.text().replace("&", ""): a for a in menu.actions() if not a.isSeparator()}
    menu.hide()
    return actions


class _UrlCatcher(QtCore.QObject):
    """Stands in for the desktop's handler of file URLs (QDesktopServices.setUrlHandler)."""

    def __init__(self):
        super().__init__()
        self.urls = []

    @QtCore.Slot(QtCore.QUrl)
    def open(self, url):
        self.urls.append(url)


def test_help_menu_about_shortcuts_and_usage(make_window, qtbot):
    window = make_window(dim=2, L=16)
    help_actions = _open_menu(qtbot, window, window.help_menu)
    assert {"Usage", "Keyboard shortcuts", "About latticelab"} <= set(help_actions)
    assert any(text.startswith("About the ") for text in help_actions)          # the model's own, kept

    # About: version, backend, device, the canvas's OpenGL renderer, Python/Qt/VisPy versions
    help_actions["About latticelab"].trigger()
    dialog = window.findChild(QtWidgets.QDialog, "about_dialog")
    assert dialog is not None and dialog.isVisible() and not dialog.isModal()
    text = dialog.text()
    assert help_menu.source_version() in text      # the version pyproject.toml declares, installed or not
    assert ("CuPy (CUDA)" if window.model.backend_name == "cuda" else "NumPy (CPU)") in text and "Device" in text
    renderer = help_menu.opengl_info(window.lattice_canvas)["OpenGL renderer"]
    assert renderer and f"OpenGL renderer\t{renderer}" in text.replace("\n", "\t")
    for version in (platform.python_version(), QtCore.qVersion(), PySide6.__version__,
                    importlib.metadata.version("vispy")):
        assert version in text

    # Keyboard shortcuts: generated from the window's actions, so one added now is listed too
    extra = QtGui.QAction("Brand-new action", window)
    extra.setShortcut(QtGui.QKeySequence("Ctrl+Alt+B"))
    window.addAction(extra)
    help_actions["Keyboard shortcuts"].trigger()
    text = window.findChild(QtWidgets.QDialog, "shortcuts_dialog").text()
    native = QtGui.QKeySequence.SequenceFormat.NativeText
    with_keys = [a for a in window.findChildren(QtGui.QAction) if a.shortcuts()]
    assert len(with_keys) >= 10
    for action in with_keys:
        for key in action.shortcuts():
            assert key.toString(native) in text, action.text()
    assert "Brand-new action" in text
    for key in ("F1", "Ctrl+Z", "Ctrl+Shift+Z", "P", "Space"):
        assert QtGui.QKeySequence(key).toString(native) in text

    for name in ("about_dialog", "shortcuts_dialog"):
        window.findChild(QtWidgets.QDialog, name).close()

    # F1: the window's manual page (docs/window.md), through the desktop's handler of the file
    catcher = _UrlCatcher()
    QtGui.QDesktopServices.setUrlHandler("file", catcher, "open")
    try:
        activate(qtbot, window)
        window.lattice_canvas.native.setFocus()
        qtbot.keyClick(window.lattice_canvas.native, QtCore.Qt.Key.Key_F1)
    finally:
        QtGui.QDesktopServices.unsetUrlHandler("file")
    assert len(catcher.urls) == 1
    url = catcher.urls[0]
    assert url.toLocalFile() == str(help_menu.MANUAL) and help_menu.MANUAL.is_file()

    # without a handler for the file: the same page in a window of our own, its pictures found beside it
    shown = window.help_menu_actions.show_usage_here()
    assert shown is not None and shown.isVisible()
    text = shown.text()
    assert "Mouse and keys" in text and "Colour key" in text and "Benchmarks" not in text
    document = shown.browser.document()
    picture = document.resource(QtGui.QTextDocument.ResourceType.ImageResource.value,
                                QtCore.QUrl("images/screenshot-2d.png"))
    assert isinstance(picture, (QtGui.QImage, QtGui.QPixmap)) and not picture.isNull() and picture.width() > 100
    shown.close()


def test_view_menu_lists_every_dock_and_reopens_a_closed_one(make_window, qtbot):
    window = make_window(dim=2, L=16)
    docks = [d for d in window.findChildren(QtWidgets.QDockWidget) if d.parent() is window]
    titles = {d.windowTitle() for d in docks}
    assert {"Controls", "Live plots", "Messages"} <= titles
    later = QtWidgets.QDockWidget("Added later", window, objectName="later_dock")
    window.addDockWidget(QtCore.Qt.DockWidgetArea.RightDockWidgetArea, later)
    window.control_dock.close()
    assert not window.control_dock.isVisible()
    actions = _open_menu(qtbot, window, window.view_menu)
    assert titles | {"Added later"} <= set(actions)
    assert not actions["Controls"].isChecked()
    actions["Controls"].trigger()
    assert window.control_dock.isVisible()
    assert {"Reset layout", "Restore defaults..."} <= set(actions)


def test_reset_layout_docks_and_shows_every_dock(make_window, qtbot):
    window = make_window(dim=2, L=16)
    Area = QtCore.Qt.DockWidgetArea
    window.addDockWidget(Area.RightDockWidgetArea, window.control_dock)
    window.plot_dock.setFloating(True)
    window.log_panel.hide()
    window.reset_layout_action.trigger()
    qtbot.wait(20)
    docks = [d for d in window.findChildren(QtWidgets.QDockWidget) if d.parent() is window]
    for dock in docks:          # those made for other models (a signal, a coarsening length) stay hidden
        assert dock.isHidden() != getattr(dock, "available", True) and not dock.isFloating(), dock.windowTitle()
    assert window.control_dock.isVisible() and window.plot_dock.isVisible() and window.log_panel.isVisible()
    assert window.dockWidgetArea(window.control_dock) == Area.LeftDockWidgetArea
    assert window.dockWidgetArea(window.log_panel) == Area.BottomDockWidgetArea


def test_restore_defaults_asks_then_resets_parameters_and_view_in_one_undoable_step(make_window, qtbot):
    window = make_window(dim=2, L=16, T=1.5)
    c = window.controls
    c.highlight.setChecked(False)
    c.steps_per_frame.setValue(7)
    window.legend_action.setChecked(False)                                    # the colour key off
    type_into(c.field("seed").box, "9")
    defaults = type(window.model.params).create(gpu=window.model.backend_name == "cuda")   # its defaults there
    found = []
    answer_next_dialog(qtbot, "No", found)
    window.restore_defaults_action.trigger()
    assert found and "defaults" in found[0] and window.model.T == 1.5          # asked; No keeps everything
    answer_next_dialog(qtbot, "Yes")
    window.restore_defaults_action.trigger()
    assert window.runner.params == defaults
    assert (window.model.L, window.model.T) == (defaults.L, defaults.T)
    assert c.field("T").box.text() == f"{defaults.T:g}"
    from latticelab.app.settings import default_steps_per_frame
    steps = default_steps_per_frame(window.model.backend_name)                # 1 on the CPU, auto on CUDA
    assert c.highlight.isChecked() and c.steps_per_frame.value() == steps and window.steps_per_frame == steps
    assert window.legend_action.isChecked() and window.legend_overlay.visible   # a view option like the rest
    window.undo_action.trigger()                                              # one step back to all of it
    assert (window.model.L, window.model.T, window.runner.params.seed) == (16, 1.5, 9)


def test_messages_dock_keeps_a_long_settings_warning_in_full(make_window, tmp_path, qtbot):
    settings = tmp_path / "broken.ini"
    store = QtCore.QSettings(str(settings), QtCore.QSettings.Format.IniFormat)
    for key, value in (("run/steps_per_frame", "many"), ("view/peel", "-4"), ("view/highlight", "perhaps"),
                       ("run/adaptive", "sometimes"), ("window/geometry", "not bytes"),
                       ("window/state", "not bytes either")):
        store.setValue(key, value)
    store.sync()
    window = make_window(settings_file=settings, L=16)
    warning = window.last_error
    assert len(warning) > 300
    for key in ("run/steps_per_frame", "view/peel", "view/highlight", "run/adaptive", "window/geometry"):
        assert key in warning
    messages = window.log_panel.messages()
    assert any(level == "error" and text == warning for _time, level, text in messages)   # the dock has it all
    window.show_message(warning, error=True)
    shown = window.statusBar().currentMessage()
    assert len(shown) < len(warning) and shown.endswith("(in full: View > Messages)")   # the status bar: a part
    actions = _open_menu(qtbot, window, window.view_menu)
    actions["Messages"].trigger()
    assert window.log_panel.isVisible()
    window.show_message("hello")
    assert window.log_panel.messages()[-1][1:] == ("info", "hello")


def test_3d_options_are_hidden_in_2d_and_shown_in_3d(make_window):
    window = make_window(dim=2, L=16)
    c = window.controls
    assert not c.peel.isVisible() and not c.peel.isEnabled() and not c.peel_label.isVisible()
    assert not c.unfold.isVisible()
    assert c.highlight.isVisible() and c.show_links.isVisible()          # the Ising model has both
    choose(c.field("dim").combo, "3D")
    assert c.peel.isVisible() and c.peel.isEnabled() and c.unfold.isVisible() and c.unfold.isEnabled()
    assert c.peel.maximum() == window.model.L - 1 and c.peel_label.text() == str(c.peel.value())


def test_marks_and_highlight_only_for_models_that_have_them(make_window):
    window = make_window(model="cahn-hilliard", L=16, m=2.0)
    c = window.controls
    assert window.model.changed() is None and window.model.marks_label is None
    assert not c.highlight.isVisible() and not c.show_links.isVisible()
    window.interactive = False                   # scripted: Restore defaults asks nothing
    window.restore_defaults_action.trigger()
    assert window.runner.params.m == 1.0
    assert window.model.shape[0] == type(window.model.params).create(gpu=window.model.backend_name == "cuda").L
    assert not c.highlight.isVisible()           # (the Ising model shows both: test_3d_options_...)


def test_status_says_paused_right_after_pausing(make_window, qtbot):
    window = make_window(dim=2, L=16, running=True)
    label = window.status_labels["steps_per_s"]
    qtbot.waitUntil(lambda: "steps/s" in label.text(), timeout=10000)
    activate(qtbot, window)
    window.lattice_canvas.native.setFocus()
    qtbot.keyClick(window.lattice_canvas.native, QtCore.Qt.Key.Key_P)
    assert not window.running
    assert label.text() == "paused"             # at once, with no event processed in between
