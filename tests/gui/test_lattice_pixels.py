"""What the lattice view shows, checked pixel by pixel against the model: spins, step highlights,
rewired sites, 3D peeling and the unfolded grid."""
from __future__ import annotations

import numpy as np
from latticelab.sim.backend import to_numpy  # model arrays may be CuPy (LATTICELAB_GUI_BACKEND=cuda)
import pytest
from gui_helpers import activate, cell_centres_2d, expected_rgb, pixels_at
from PySide6 import QtCore

from latticelab.render.unfold import UnfoldLayout
from latticelab.sim.models.ising.picture import encode_codes as encode_state


def shown_codes(window):
    m = window.model
    highlight = window.runner.highlight
    return encode_state(np, to_numpy(m.spins), None if highlight is None else to_numpy(highlight), None)


def test_lattice_pixels_match_the_spins(make_window):
    window = make_window(dim=2, L=32, T=2.2)
    window.step_once()
    image = window.capture("view")
    assert image.shape[:2] == tuple(window.lattice_canvas.physical_size[::-1])
    colours = pixels_at(image, window.field_view.world_to_canvas(cell_centres_2d(32)))
    np.testing.assert_array_equal(colours, expected_rgb(shown_codes(window)))
    assert len(np.unique(colours, axis=0)) >= 3   # up, down and highlighted cells


@pytest.mark.parametrize("algorithm", ["metropolis", "wolff"])
def test_step_button_advances_one_step_and_highlights_exactly_the_flipped_cells(make_window, qtbot, algorithm):
    window = make_window(dim=2, L=32, T=2.0 if algorithm == "wolff" else 2.4, algorithm=algorithm, seed=3)
    model = window.model
    button = window.toolbar.widgetForAction(window.step_action)
    for _ in range(3):
        before_spins = to_numpy(model.spins).copy()
        before = model.step_count
        qtbot.mouseClick(button, QtCore.Qt.MouseButton.LeftButton)
        assert model.step_count == before + 1
        changed = to_numpy(model.spins) != before_spins
        np.testing.assert_array_equal(to_numpy(model.flipped), changed)   # the model's mask: what this step flipped
        image = window.capture("view")
        colours = pixels_at(image, window.field_view.world_to_canvas(cell_centres_2d(32)))
        highlight_up = expected_rgb([3])[0]     # flipped, now up: grey
        highlight_down = expected_rgb([2])[0]   # flipped, now down: dark green
        shown_up = (colours == highlight_up).all(axis=1).reshape(32, 32)
        shown_down = (colours == highlight_down).all(axis=1).reshape(32, 32)
        np.testing.assert_array_equal(shown_up | shown_down, changed)
        np.testing.assert_array_equal(shown_up, changed & (to_numpy(model.spins) > 0))
        assert changed.any()
    # the keyboard does the same
    before = model.step_count
    activate(qtbot, window)
    window.lattice_canvas.native.setFocus()
    qtbot.keyClick(window.lattice_canvas.native, QtCore.Qt.Key.Key_Space)
    qtbot.keyClick(window.lattice_canvas.native, QtCore.Qt.Key.Key_Right)
    assert model.step_count == before + 2
    assert not window.running


def test_highlight_off_shows_plain_spins(make_window):
    window = make_window(dim=2, L=16, T=2.5)
    window.step_once()
    window.controls.highlight.setChecked(False)
    colours = pixels_at(window.capture("view"), window.field_view.world_to_canvas(cell_centres_2d(16)))
    np.testing.assert_array_equal(colours, expected_rgb(shown_codes(window), show_flipped=False))


def test_rewired_sites_and_links_are_drawn(make_window):
    window = make_window(dim=2, L=32, T=2.2, p=0.02, seed=5)
    model = window.model
    edges = model.rewired_edges()
    assert len(edges) > 0
    window.controls.show_links.setChecked(True)
    view = window.field_view
    assert view.links_shown == view.links_total == len(edges)
    assert view.links.visible and view.endpoints.visible
    image = window.capture("view")
    # the centre of every rewired site shows the rewired colour (the ring around it leaves the centre open)
    mask = to_numpy(model.rewired_site_mask()).ravel()
    colours = pixels_at(image, view.world_to_canvas(cell_centres_2d(32)))
    from latticelab.render.palette import rgba_bytes
    from latticelab.sim.models.ising.picture import REWIRED_SITE
    np.testing.assert_array_equal(colours[mask], np.tile(rgba_bytes(REWIRED_SITE)[:3], (mask.sum(), 1)))
    # link lines add link-coloured pixels along the segments, beyond the marked cells themselves
    link_pixels = (np.abs(image[..., :3].astype(int) - rgba_bytes(REWIRED_SITE)[:3]).sum(axis=2) < 60).sum()
    cell_area = (window.lattice_canvas.physical_size[0] / 32) ** 2
    assert link_pixels > mask.sum() * cell_area * 0.5
    window.controls.show_links.setChecked(False)
    assert not view.links.visible
    colours = pixels_at(window.capture("view"), view.world_to_canvas(cell_centres_2d(32)))
    np.testing.assert_array_equal(colours, expected_rgb(shown_codes(window)))


def _set_spins(window, spins):
    session = window.runner
    session.model.spins = session.model.xp.asarray(np.asarray(spins, np.int8))
    session.highlight = None
    session.state_version += 1
    window.frames.refresh_view()


def _top_view(window):
    camera = window.field_view.camera_3d
    camera.fov = 0.0          # orthographic
    camera.elevation = 90.0   # looking down the z axis
    camera.azimuth = 0.0
    window.field_view.reset_camera()


def test_peeling_hides_exactly_the_top_layers(make_window):
    L = 8
    window = make_window(dim=3, L=L, T=4.0)
    # layer z is up in column x == z only: the visible top layer identifies itself
    z, y, x = np.indices((L, L, L))
    _set_spins(window, np.where(x == z, 1, -1))
    _top_view(window)
    for peel in (0, 1, 3, 6, 7):
        window.controls.peel.setValue(peel)
        assert window.field_view.peel == peel
        top = L - peel
        image = window.capture("view")
        colours = pixels_at(image, window.field_view.world_to_canvas(cell_centres_2d(L, z=top)))
        visible_layer = top - 1
        expected = np.where(np.indices((L, L))[1] == visible_layer, 1, 0)   # state codes of layer top-1
        np.testing.assert_array_equal(colours, expected_rgb(expected), err_msg=f"peel {peel}")


def test_unfold_shows_L_tiles_in_zigzag_order(make_window):
    from scipy import ndimage

    L = 10   # 4 columns, 3 rows: the last row is incomplete and runs right to left
    window = make_window(dim=3, L=L, T=4.0)
    # layer z has its first z+1 cells (row-major) up: each tile says which layer it shows
    spins = -np.ones((L, L, L), np.int8)
    for z in range(L):
        spins[z].reshape(-1)[: z + 1] = 1
    _set_spins(window, spins)
    window.controls.unfold.setChecked(True)
    view = window.field_view
    assert view.active_mode == "unfold"
    window.legend_action.setChecked(False)     # count the tiles alone: the colour key is one more shape
    image = window.capture("view")
    from latticelab.render.palette import BACKGROUND, rgba_bytes
    foreground = np.abs(image[..., :3].astype(int) - rgba_bytes(BACKGROUND)[:3]).sum(axis=2) > 0
    _, tiles = ndimage.label(foreground)
    assert tiles == L
    layout = UnfoldLayout(L)
    assert (layout.columns, layout.rows) == (4, 3)
    for z in range(L):
        x0, y0 = layout.tile_origin(z)
        centres = cell_centres_2d(L) + [x0, y0]
        colours = pixels_at(image, view.world_to_canvas(centres))
        np.testing.assert_array_equal(colours, expected_rgb(encode_state(np, spins[z])), err_msg=f"layer {z}")
    # zigzag: layer 4 starts row 1 at the right, layer 8 starts row 2 at the left
    assert layout.tile_of_layer(4) == (1, 3) and layout.tile_of_layer(7) == (1, 0)
    assert layout.tile_of_layer(8) == (2, 0)
    window.controls.unfold.setChecked(False)
    assert view.active_mode == "cube"


def test_3d_cube_rotates_and_zooms_with_the_mouse(make_window, qtbot):
    window = make_window(dim=3, L=8, T=4.0)
    camera = window.field_view.camera_3d
    assert window.field_view.viewbox.camera is camera
    canvas = window.lattice_canvas.native
    azimuth, scale = camera.azimuth, camera.scale_factor
    centre = canvas.rect().center()
    qtbot.mousePress(canvas, QtCore.Qt.MouseButton.LeftButton, pos=centre)
    for dx in range(10, 110, 10):
        qtbot.mouseMove(canvas, centre + QtCore.QPoint(dx, 0))
    qtbot.mouseRelease(canvas, QtCore.Qt.MouseButton.LeftButton, pos=centre + QtCore.QPoint(100, 0))
    assert camera.azimuth != azimuth
    from PySide6 import QtGui, QtWidgets
    wheel = QtGui.QWheelEvent(QtCore.QPointF(centre), QtCore.QPointF(canvas.mapToGlobal(centre)),
                              QtCore.QPoint(0, 0), QtCore.QPoint(0, 120), QtCore.Qt.MouseButton.NoButton,
                              QtCore.Qt.KeyboardModifier.NoModifier, QtCore.Qt.ScrollPhase.NoScrollPhase, False)
    QtWidgets.QApplication.sendEvent(canvas, wheel)
    assert camera.scale_factor != scale


def test_qts_own_paints_of_an_unchanged_view_draw_nothing_and_keep_its_picture(make_window, qtbot):
    """Qt paints the lattice view's GL widget whenever its part of the window is repainted (a dock tab raised, a
    menu closed): with nothing changed, no draw is made (app/canvas_paints.py) and the picture on screen stays
    what the last draw made, pixel for pixel; a change is drawn at the next paint."""
    from gui_helpers import on_screen
    window = make_window(dim=2, L=32, T=2.2)
    window.step_once()
    qtbot.wait(200)
    canvas = window.lattice_canvas
    draws = []
    canvas.events.draw.connect(lambda event: draws.append(1), position="last")   # after VisPy's draw
    before = on_screen(canvas)                 # the step's picture (drawn by now)
    assert before.std() > 5                    # a lattice, not a cleared canvas
    drawn = len(draws)
    for _ in range(3):
        canvas.native.repaint()
    window.graph_panel.raise_()
    qtbot.waitUntil(window.graph_panel.on_screen, timeout=10000)
    window.plot_dock.raise_()
    qtbot.wait(200)
    assert len(draws) == drawn                 # Qt's paints drew nothing
    np.testing.assert_array_equal(on_screen(canvas), before)
    window.step_once()
    qtbot.waitUntil(lambda: len(draws) > drawn, timeout=5000)
    assert not np.array_equal(on_screen(canvas), before)
