"""Two things that made the window relayout or repaint for nothing (issue 16, found with bench responsiveness):
a dock's message changing its number of lines, and a hidden dock's warm-up draws asking for full paints."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtWidgets  # noqa: E402

from latticelab.app.analysis_dock import info_label, make_canvas  # noqa: E402

LONG = " ".join(["a long message that wraps"] * 12)


def test_a_dock_message_keeps_its_height_while_its_width_stays(qtbot):
    holder = QtWidgets.QWidget()
    layout = QtWidgets.QVBoxLayout(holder)
    label = info_label("probe_info", lines=1)
    layout.addWidget(label)
    layout.addStretch(1)
    qtbot.addWidget(holder)
    holder.resize(240, 400)
    holder.show()
    qtbot.waitExposed(holder)
    one_line = label.height()
    label.setText(LONG)
    qtbot.waitUntil(lambda: label.height() > 2 * one_line, timeout=5000)
    tall = label.height()
    label.setText("computing…")             # one line again: the space stays, nothing below it moves
    qtbot.wait(50)
    assert label.height() == tall
    holder.resize(1200, 400)                # a new width: the height follows the text again
    qtbot.waitUntil(lambda: label.height() < tall, timeout=5000)
    assert label.height() <= 2 * one_line


def test_reserved_lines_hold_from_the_start(qtbot):
    label = info_label("probe_info", lines=3)
    qtbot.addWidget(label)
    assert label.minimumHeight() == 3 * label.fontMetrics().lineSpacing()


def test_warm_up_draws_do_not_schedule_a_paint(qtbot):
    from vispy import scene

    from latticelab.render.plots import warm_up_steps
    canvas = make_canvas("probe_canvas", (300, 200), (100, 100))
    qtbot.addWidget(canvas.native)
    view = canvas.central_widget.add_view()
    view.camera = "panzoom"
    scene.visuals.Line(pos=[[0, 0], [1, 1]], parent=view.scene)
    scene.visuals.Text("x", parent=view.scene, pos=(0.5, 0.5))
    canvas.native.show()
    qtbot.waitExposed(canvas.native)
    draws = []
    canvas.events.draw.connect(lambda event: draws.append(1))
    qtbot.waitUntil(lambda: len(draws) >= 1, timeout=5000)    # the first, real paint
    qtbot.wait(100)
    draws.clear()
    names = list(warm_up_steps(canvas, canvas.scene))
    # a compound visual is drawn a part at a time (a Line: its GL line), named after both
    assert "Line _GLLineVisual" in names and "Text" in names
    assert not canvas._update_pending           # nothing asked VisPy for a paint
    qtbot.wait(200)
    assert draws == []


def test_a_dock_behind_another_tab_is_not_painted_until_brought_to_the_front(qtbot):
    from PySide6 import QtCore
    from vispy import scene

    from latticelab.app.analysis_dock import make_canvas
    window = QtWidgets.QMainWindow()
    window.setCentralWidget(QtWidgets.QLabel("centre"))
    qtbot.addWidget(window)
    docks, canvases, draws = [], [], []
    for name in ("front", "behind"):
        canvas = make_canvas(f"{name}_canvas", (300, 200), (100, 100))
        dock = QtWidgets.QDockWidget(name, window, objectName=f"{name}_dock")
        dock.setWidget(canvas.native)
        window.addDockWidget(QtCore.Qt.DockWidgetArea.RightDockWidgetArea, dock)
        counted = []
        canvas.events.draw.connect(lambda event, counted=counted: counted.append(1))
        docks.append(dock), canvases.append(canvas), draws.append(counted)
    window.tabifyDockWidget(docks[0], docks[1])
    docks[0].raise_()
    window.resize(900, 600)
    window.show()
    qtbot.waitExposed(window)
    qtbot.wait(300)
    behind = canvases[1]
    assert docks[1].visibleRegion().isEmpty()
    draws[1].clear()
    view = behind.central_widget.add_view()                 # a change of the hidden scene asks for a paint
    scene.visuals.Line(pos=[[0, 0], [1, 1]], parent=view.scene)
    behind.update()
    qtbot.wait(300)
    assert draws[1] == []                                   # held while behind the other tab
    docks[1].raise_()
    qtbot.waitUntil(lambda: len(draws[1]) >= 1, timeout=5000)   # painted once it is in front


def test_warm_up_draws_an_axis_a_part_at_a_time_and_keeps_the_canvas_mapping_through_a_resize(qtbot):
    """A staged step compiles at most one program: a compound visual (an axis: lines, tick labels, its label)
    is drawn a part at a time. Its offscreen buffer has the canvas's size, also after the canvas was resized
    between two steps, so that pushing and popping it changes no transform (each change goes through every
    visual of the canvas)."""
    from vispy import scene

    from latticelab.render.plots import warm_up_steps
    canvas = make_canvas("probe_canvas", (300, 200), (100, 100))
    qtbot.addWidget(canvas.native)
    grid = canvas.central_widget.add_grid()
    grid.add_widget(scene.AxisWidget(orientation="left", axis_label="energy"), row=0, col=0)
    canvas.native.show()
    qtbot.waitExposed(canvas.native)
    steps = warm_up_steps(canvas, canvas.scene)
    names = [next(steps)]
    canvas.native.resize(420, 260)
    qtbot.waitUntil(lambda: tuple(canvas.size) == (420, 260), timeout=5000)
    changes = []
    for transform in (canvas.transforms.canvas_transform, canvas.transforms.framebuffer_transform):
        transform.changed.connect(lambda event: changes.append(event))
    canvas.transforms.configure()           # the mapping of the new size, as the next paint would make it
    changes.clear()
    names += list(steps)
    axis_parts = [n for n in names if n.startswith("AxisWidget")]
    assert len(axis_parts) >= 3, names      # its line, its tick labels and its label, each a step
    assert changes == []
