"""The GUI's pure parts, without a window: state encoding, colours, unfold layout, slider scales,
plot history and file helpers."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.app import scales
from latticelab.render.unfold import UnfoldLayout
from latticelab.sim.io import free_path, write_atomic
from latticelab.sim.model import Observable
from latticelab.sim.models.ising import picture as palette
from latticelab.sim.models.ising.params import T_C
from latticelab.sim.models.ising.picture import FLIPPED, REWIRED, SPIN_UP
from latticelab.sim.models.ising.picture import encode_codes as encode_state
from latticelab.sim.runner import ObservableHistory
from latticelab.sim.state import StateError, read_state


def test_encode_state_bits():
    spins = np.array([[1, -1], [-1, 1]], np.int8)
    flipped = np.array([[True, True], [False, False]])
    rewired = np.array([[False, True], [False, True]])
    codes = encode_state(np, spins, flipped, rewired)
    assert codes.dtype == np.uint8
    np.testing.assert_array_equal(codes, [[SPIN_UP | FLIPPED, FLIPPED | REWIRED], [0, SPIN_UP | REWIRED]])
    np.testing.assert_array_equal(encode_state(np, spins), [[1, 0], [0, 1]])


def test_colour_table_follows_the_thesis_palette():
    table = palette.palette(show_flipped=True, show_rewired=True)

    def byte(colour):
        return np.asarray(colour, np.float32)
    assert (table[0] == byte(palette.SPIN_DOWN_COLOUR)).all() and (table[SPIN_UP] == byte(palette.SPIN_UP_COLOUR)).all()
    assert (table[FLIPPED] == byte(palette.FLIPPED_TO_DOWN)).all()         # darker green: flipped to down
    assert (table[FLIPPED | SPIN_UP] == byte(palette.FLIPPED_TO_UP)).all()  # grey: flipped to up
    assert (table[REWIRED | FLIPPED] == byte(palette.REWIRED_SITE)).all()
    plain = palette.palette(show_flipped=False, show_rewired=False)
    assert (plain[FLIPPED | REWIRED] == plain[0]).all() and (plain[7] == plain[1]).all()


@pytest.mark.parametrize("L", [4, 8, 10, 16, 30, 64])
def test_unfold_layout_places_every_layer_once_in_zigzag(L):
    layout = UnfoldLayout(L)
    tiles = [tuple(int(v) for v in layout.tile_of_layer(z)) for z in range(L)]
    assert len(set(tiles)) == L
    assert layout.columns * layout.rows >= L > layout.columns * (layout.rows - 1)
    for z in range(L - 1):   # consecutive layers are neighbours: along a row, or straight down at a row end
        (r0, c0), (r1, c1) = tiles[z], tiles[z + 1]
        assert abs(r1 - r0) + abs(c1 - c0) == 1
    width, height = layout.extent
    for z in range(L):
        x0, y0 = layout.tile_origin(z)
        assert 0 <= x0 and x0 + L <= width and 0 <= y0 and y0 + L <= height
    coords = np.array([[3 % L, 1, 2]])
    np.testing.assert_array_equal(layout.unfold_positions(coords)[0],
                                  np.array(layout.tile_origin(3 % L)) + [2, 1])


@pytest.mark.parametrize("dim", [2, 3])
def test_temperature_scale_is_finest_at_tc_and_invertible(dim):
    positions = np.arange(scales.TEMPERATURE_STEPS + 1)
    T = np.array([scales.temperature_at(p, T_C[dim]) for p in positions])
    assert (np.diff(T) > 0).all() and T[0] > 0
    middle = scales.TEMPERATURE_STEPS // 2
    assert abs(T[middle] - T_C[dim]) < 1e-9
    steps = np.diff(T)
    assert steps[middle] < 1.2e-3 and steps[middle] < steps[0] / 10 and steps[middle] < steps[-1] / 10
    assert all(scales.position_of_temperature(t, T_C[dim]) == p for p, t in zip(positions, T))


def test_p_scale_is_zero_then_logarithmic():
    assert scales.p_at(0) == 0.0 and scales.p_at(1) == pytest.approx(1e-7)
    assert scales.p_at(scales.P_MAX_POSITION) == 1.0
    decade = scales.P_STEPS_PER_DECADE
    assert scales.p_at(1 + decade) == pytest.approx(1e-6)
    assert all(scales.position_of_p(scales.p_at(i)) == i for i in range(scales.P_MAX_POSITION + 1))


def test_history_keeps_the_last_n_and_windowed_std():
    declared = (Observable("abs_magnetisation", "|M|"), Observable("energy", "E", spread=True),
                Observable("flipped_fraction", "flipped", spread=True))
    history = ObservableHistory(declared, capacity=5, window=3)
    for step in range(1, 9):
        history.push(step, {"energy": float(step), "abs_magnetisation": 0.5, "flipped_fraction": step % 2})
    steps, values = history.arrays()
    np.testing.assert_array_equal(steps, [4, 5, 6, 7, 8])
    np.testing.assert_allclose(values["energy_std"], np.std([1, 2, 3]))
    np.testing.assert_allclose(values["flipped_fraction_std"], np.std([0, 1, 0]))
    assert "abs_magnetisation_std" not in values          # declared without a spread
    history.clear()
    assert len(history) == 0


def test_unique_path_and_state_files(tmp_path):
    target = tmp_path / "a.png"
    assert free_path(target) == target
    target.write_bytes(b"x")
    (tmp_path / "a-1.png").write_bytes(b"x")
    assert free_path(target) == tmp_path / "a-2.png"
    path = write_atomic(tmp_path / "s.npz", lambda f: np.savez(f, x=np.arange(3)))
    np.testing.assert_array_equal(read_state(path)["x"], np.arange(3))
    assert not list(tmp_path.glob(".*part"))   # no temporary left behind
    with pytest.raises(FileExistsError):
        write_atomic(path, lambda f: f.write(b"new"))
    np.testing.assert_array_equal(read_state(path)["x"], np.arange(3))   # kept
    (tmp_path / "bad.npz").write_bytes(path.read_bytes()[:40])
    with pytest.raises(StateError, match="bad.npz"):
        read_state(tmp_path / "bad.npz")
    with pytest.raises(StateError, match="no such file"):
        read_state(tmp_path / "missing.npz")
