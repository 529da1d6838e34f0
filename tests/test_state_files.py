"""Issue 13, state files: layouts and byte orders, the graph's rules, bounded reading (only the expected
members, sizes checked before decompressing), errors that name the file, truncation at every offset and
mutated bytes ("a clear error or the exact state, never wrong physics"), and checked-in files of every
format that later versions must still load or explain."""
from __future__ import annotations

import io as bytes_io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models import get_model, model_names
from latticelab.sim.params import ParameterError
from latticelab.sim.state import StateError, load_state, read_state, restore, save_state, state_of

DATA = Path(__file__).parent / "data"
LOAD_ERRORS = (StateError,)


def small(name, **changes):
    cls = get_model(name)
    return cls.create(backend="numpy", **{**cls.small_example, **changes})


def rewired(**changes):
    return small("ising", **{"p": 0.2, "algorithm": "metropolis", **changes})


def fields(model) -> dict:
    return {k: to_numpy(v).copy() for k, v in model.fields().items()}


def assert_same(a, b):
    sa, sb = state_of(a), state_of(b)
    assert sa.keys() == sb.keys()
    for key in sa:
        assert np.array_equal(np.asarray(sa[key]), np.asarray(sb[key])), key


def write_npz(path, state, compressed=True):
    (np.savez_compressed if compressed else np.savez)(path, **state)
    return path


# ---- 2: layouts and byte orders; the Metropolis field does not depend on the layout --------------------
def test_metropolis_gives_the_same_sweep_for_fortran_ordered_spins():
    a, b = rewired(seed=3), rewired(seed=3)
    assert a.graph.new_edges.size
    b.spins = np.asfortranarray(b.spins)
    for _ in range(3):
        a.step(1)
        b.step(1)
        assert np.array_equal(to_numpy(a.spins), to_numpy(b.spins))


def _layouts(array):
    yield "C", np.ascontiguousarray(array)
    if array.ndim >= 2:
        yield "Fortran", np.asfortranarray(array)
    if array.ndim >= 1:
        padded = np.repeat(array, 2, axis=-1)
        yield "non-contiguous", padded[..., ::2]
    if array.dtype.itemsize > 1:
        yield "big-endian", array.astype(array.dtype.newbyteorder(">"))


@pytest.mark.parametrize("name", model_names())
def test_every_layout_and_byte_order_loads_to_the_same_continuation(name, tmp_path):
    model = small(name, **({"p": 0.2} if name == "ising" else {}))
    model.step(2)
    state = state_of(model)
    expected = small(name, **({"p": 0.2} if name == "ising" else {}))
    expected.step(5)
    for key, value in state.items():
        value = np.asarray(value)
        if key.startswith("param.") or value.ndim == 0:
            continue
        for layout, changed in _layouts(value):
            variant = {**state, key: changed}
            for how, model2 in (("dict", lambda: restore(variant, "numpy")),
                                ("file", lambda: load_state(write_npz(tmp_path / f"{key}-{layout}.npz", variant),
                                                            "numpy"))):
                resumed = model2()
                resumed.step(3)
                assert_same(resumed, expected), (key, layout, how)


def test_loaded_arrays_are_native_and_c_ordered(tmp_path):
    state = state_of(rewired())
    state["spins"] = np.asfortranarray(state["spins"])
    state["new_edges"] = state["new_edges"].astype(">i8")
    read = read_state(write_npz(tmp_path / "s.npz", state))
    assert read["spins"].flags.c_contiguous and read["new_edges"].dtype.isnative


# ---- 3: the graph's rules and exact integers ----------------------------------------------------------
def _graph_state(model, new_edges):
    state = state_of(model)
    state["new_edges"] = np.asarray(new_edges)
    return state


def _site(L, *coords):
    return int(np.ravel_multi_index(coords, (L, L)))


@pytest.mark.parametrize("rule", ["self-loop", "same checkerboard colour", "appears twice", "twice-lattice",
                                  "float", "ends"])
def test_states_breaking_the_graph_rules_are_refused(rule, tmp_path):
    model = rewired(seed=4)
    L = model.L
    state = state_of(model)
    new = state["new_edges"].copy()
    assert new.shape[0] >= 2
    if rule == "self-loop":
        new[0, 1] = new[0, 0]
    elif rule == "same checkerboard colour":
        a = new[0, 0]
        y, x = np.unravel_index(a, (L, L))
        new[0, 1] = _site(L, (y + 2) % L, x)          # two rows away: the same colour
    elif rule == "appears twice":
        new[1] = new[0][::-1]
    elif rule == "twice-lattice":
        ids = state["rewired_edge_ids"]
        kept = np.setdiff1d(np.arange(2 * L * L), ids)[0]     # a lattice edge still in place
        site, axis = divmod(int(kept), 2)
        y, x = np.unravel_index(site, (L, L))
        nb = _site(L, (y + 1) % L, x) if axis == 0 else _site(L, y, (x + 1) % L)
        new[0] = (site, nb)
        rule = "appears twice"
    elif rule == "float":
        new = new.astype(np.float64)
        new[0, 0] += 0.7
        rule = "must hold integers"
    if rule == "ends":
        state["rewired_ends"] = np.int64(3 * state["rewired_edge_ids"].size)
        rule = "rewired_ends"
    else:
        state["new_edges"] = new
    path = write_npz(tmp_path / "graph.npz", state)
    with pytest.raises(StateError, match=rule) as info:
        load_state(path, "numpy")
    assert str(path) in str(info.value)


def test_float_valued_integer_parameters_are_refused(tmp_path):
    state = state_of(small("ising"))
    for key, value in (("param.L", np.float64(16.9)), ("param.L", np.float64(16.0)), ("param.dim", np.bool_(True)),
                       ("param.T", np.bool_(True)), ("param.seed", np.float64(1.7))):
        path = write_npz(tmp_path / "p.npz", {**state, key: value})
        with pytest.raises(StateError, match=key.removeprefix("param.")) as info:
            load_state(path, "numpy")
        assert str(path) in str(info.value)


# ---- 7: bounded reading ---------------------------------------------------------------------------------
def test_only_expected_members_are_read(tmp_path, monkeypatch):
    model = small("ising")
    path = write_npz(tmp_path / "s.npz", {**state_of(model), "junk": np.zeros(20_000_000, np.uint8)})
    opened = []
    real_open = zipfile.ZipFile.open

    def spy(self, name, *args, **kwargs):
        opened.append(getattr(name, "filename", name))
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    assert_same(load_state(path, "numpy"), model)
    assert "junk.npy" not in opened


def test_declared_sizes_are_checked_before_decompressing(tmp_path, monkeypatch):
    from latticelab.sim import state as state_module
    model = small("ising", L=256)
    path = save_state(tmp_path / "s.npz", model)
    monkeypatch.setattr(state_module, "host_available_bytes", lambda: 100_000)
    decompressed = []
    real = np.lib.format.read_array
    monkeypatch.setattr(np.lib.format, "read_array",
                        lambda f, *a, **k: decompressed.append(f.name) or real(f, *a, **k))
    with pytest.raises(StateError, match="MiB") as info:
        load_state(path, "numpy")
    assert str(path) in str(info.value)
    assert decompressed and all(n.startswith(("param.", "model", "latticelab_state")) for n in decompressed)


def _forge_member(path, name, header_shape, data: bytes):
    """Append a member whose .npy header declares ``header_shape`` int8 but holds ``data``."""
    buf = bytes_io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "|i1", "fortran_order": False, "shape": header_shape})
    with zipfile.ZipFile(path, "a") as z:
        z.writestr(name + ".npy", buf.getvalue() + data)


def test_a_member_declaring_more_than_it_holds_is_refused(tmp_path):
    model = small("ising")
    state = {k: v for k, v in state_of(model).items() if k != "spins"}
    path = write_npz(tmp_path / "s.npz", state)
    _forge_member(path, "spins", (1 << 20, 1 << 20), b"\1" * 256)
    with pytest.raises(StateError, match="spins.*declares") as info:
        load_state(path, "numpy")
    assert str(path) in str(info.value)


def test_oversized_header_fields_are_refused(tmp_path):
    state = state_of(small("ising"))
    path = write_npz(tmp_path / "s.npz", {**state, "param.rewire_dims": np.str_("x" * 100_000)})
    with pytest.raises(StateError, match="param.rewire_dims"):
        load_state(path, "numpy")


# ---- 10: errors name the file; pickles and text files; future formats ---------------------------------
def test_foreign_files_are_named_and_explained(tmp_path):
    import pickle
    cases = {
        "notes.npz": (b"my notes, not a state\n", "text file"),
        "pickled.npz": (pickle.dumps({"spins": [1, -1]}), "pickle"),
        "empty.npz": (b"", "empty"),
        "array.npz": (None, "single NumPy array"),
    }
    for name, (content, words) in cases.items():
        path = tmp_path / name
        if content is None:
            with open(path, "wb") as f:
                np.save(f, np.arange(3))
        else:
            path.write_bytes(content)
        with pytest.raises(StateError, match=words) as info:
            load_state(path, "numpy")
        message = str(info.value)
        assert str(path) in message and "allow_pickle" not in message
    objects = tmp_path / "objects.npz"
    np.savez(objects, **{**state_of(small("ising")), "spins": np.array([object()], dtype=object)})
    with pytest.raises(StateError, match="Python objects") as info:
        load_state(objects, "numpy")
    assert str(objects) in str(info.value)
    for path, words in ((tmp_path, "folder"), (tmp_path / "missing.npz", "no such file")):
        with pytest.raises(StateError, match=words) as info:
            load_state(path)
        assert str(path) in str(info.value)


def test_newer_formats_are_called_newer_not_damaged(tmp_path):
    state = state_of(small("ising"))
    for key, value, words in (("latticelab_state", 3, "newer latticelab .*layout 3"),
                              ("model_format", 99, "newer latticelab .*format 99")):
        path = write_npz(tmp_path / f"{key}.npz", {**state, key: np.int64(value)})
        with pytest.raises(StateError, match=words) as info:
            load_state(path, "numpy")
        assert str(path) in str(info.value) and "damaged" not in str(info.value)


# ---- truncation and mutated bytes: a clear error or the exact state ---------------------------------
def _exact_or_error(path, original, errors):
    try:
        loaded = load_state(path, "numpy")
    except LOAD_ERRORS as exc:
        assert str(path) in str(exc)
        errors.append(type(exc))
        return
    assert_same(loaded, original)


@pytest.mark.parametrize("name", model_names())
def test_truncation_at_every_offset(name, tmp_path):
    model = small(name)
    model.step(1)
    data = save_state(tmp_path / "full.npz", model).read_bytes()
    path = tmp_path / "cut.npz"
    errors = []
    step = max(1, len(data) // 1500)          # every offset for small files, ~1500 cuts otherwise
    for cut in range(0, len(data), step):
        path.write_bytes(data[:cut])
        _exact_or_error(path, model, errors)
    assert len(errors) == len(range(0, len(data), step))


@pytest.mark.parametrize("name", model_names())
def test_mutated_bytes_give_an_error_or_the_exact_state(name, tmp_path):
    model = small(name, **({"p": 0.1} if name == "ising" else {}))
    model.step(1)
    data = bytearray(save_state(tmp_path / "full.npz", model).read_bytes())
    rng = np.random.default_rng(13)
    path = tmp_path / "mutated.npz"
    errors = []
    for _ in range(250):
        mutated = bytearray(data)
        for pos in rng.integers(0, len(data), size=rng.integers(1, 4)):
            mutated[pos] = (mutated[pos] + int(rng.integers(1, 256))) % 256
        path.write_bytes(bytes(mutated))
        _exact_or_error(path, model, errors)
    assert errors     # most mutations are caught (zip CRCs, headers, checks)


def test_mutated_fields_give_an_error_or_a_consistent_model():
    model = rewired(seed=8)
    model.step(1)
    base = state_of(model)
    rng = np.random.default_rng(5)
    for key in [k for k in base if not k.startswith("param.") and k not in ("latticelab_state", "model")]:
        for _ in range(20):
            value = np.array(base[key], copy=True)
            if value.size == 0:
                continue
            flat = value.reshape(-1)
            i = int(rng.integers(flat.size))
            if value.dtype == bool:
                flat[i] = ~flat[i]
            else:
                flat[i] = flat[i] + np.asarray(rng.integers(-3, 4)).astype(value.dtype)
            try:
                loaded = restore({**base, key: value}, "numpy")
            except (StateError, ParameterError):
                continue
            # accepted: it must be exactly the model those arrays describe, and it must run
            again = restore(state_of(loaded), "numpy")
            loaded.step(1)
            again.step(1)
            assert_same(loaded, again)


# ---- checked-in files of every format --------------------------------------------------------------------
CHECKED_IN = sorted(DATA.glob("state-format*.npz"))


def test_there_is_a_checked_in_state_of_every_model():
    assert {p.stem.removeprefix("state-format2-") for p in DATA.glob("state-format2-*.npz")} == set(model_names())
    assert (DATA / "state-format1-ising.npz").exists()      # written by latticelab 0.1 (commit de7e940)


@pytest.mark.parametrize("path", CHECKED_IN, ids=lambda p: p.stem)
def test_checked_in_states_load_and_continue_as_recorded(path):
    """Each file holds a state after 3 steps; beside it, the fields after 2 more steps (as recorded when the
    file was made). A later version must reproduce them exactly, or explain why it cannot load the file."""
    model = load_state(path, "numpy")
    model.step(2)
    expected = np.load(path.parent / f"next-{path.name}")
    got = fields(model)
    if "format1" in path.name:        # 0.1 recorded the spins only
        got = {"spins": to_numpy(model.spins)}
    assert set(expected.files) == set(got)
    for key in expected.files:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def test_a_format_1_state_resumes_with_its_parameters():
    model = load_state(DATA / "state-format1-ising.npz", "numpy")
    p = model.params
    assert (p.dim, p.L, p.T, p.p, p.algorithm, p.seed, model.step_count) == (2, 16, 2.3, 0.1, "2:1", 7, 3)


def test_an_unknown_old_format_is_explained(tmp_path):
    path = write_npz(tmp_path / "old.npz", {"format": np.int64(0), "spins": np.ones((4, 4), np.int8)})
    with pytest.raises(StateError, match="format 0, which this version does not read") as info:
        load_state(path)
    assert str(path) in str(info.value)
