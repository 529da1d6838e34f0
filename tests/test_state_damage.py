"""Issue 41, items 8 and 12: damaged but well-typed state values are refused with one line naming the file and
the field (finite numbers in physical ranges, counters that a run can reach); declared sizes are checked against
the file's own parameters before anything is decompressed; devices and pipes are refused, not read."""
from __future__ import annotations

import math
import os
import struct
import threading
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latticelab.sim.models import get_model, model_names
from latticelab.sim.params import ParameterError
from latticelab.sim.state import StateError, load_state, state_of


def small(name, **changes):
    cls = get_model(name)
    return cls.create(backend="numpy", **{**cls.small_example, **changes})


def saved_with(tmp_path, name, **fields):
    """A saved state of ``name``'s small example with ``fields`` replaced (same dtype unless given an array)."""
    model = small(name)
    model.step(2)
    state = state_of(model)
    for key, value in fields.items():
        state[key] = value if isinstance(value, np.ndarray) and value.dtype != np.asarray(state[key]).dtype \
            else np.asarray(value, dtype=np.asarray(state[key]).dtype)
    path = tmp_path / f"{name}.npz"
    np.savez_compressed(path, **state)
    return path


def refused(path, field: str) -> str:
    with pytest.raises(StateError) as info:
        load_state(path, "numpy")
    message = str(info.value)
    assert str(path) in message and field in message and "\n" not in message, message
    return message


def cortex_array(tmp_path, key, index, value):
    model = small("cortex")
    a = np.array(state_of(model)[key], copy=True)
    a.reshape(-1)[index] = value
    return saved_with(tmp_path, "cortex", **{key: a})


@pytest.mark.parametrize("key, value", [("u", 1e30), ("v", -1e30), ("ev", np.inf), ("v", np.nan)])
def test_damaged_cortex_arrays_are_refused(tmp_path, key, value):
    refused(cortex_array(tmp_path, key, 3, value), repr(key))


@pytest.mark.parametrize("index, value", [(0, np.nan), (0, -1e30), (1, 7.0), (2, -0.5)])
def test_a_damaged_cortex_last_step_is_refused(tmp_path, index, value):
    refused(cortex_array(tmp_path, "last", index, value), "'last'")


@pytest.mark.parametrize("key, value", [("phase", 2 ** 62), ("phase", 3), ("streams_used", 2 ** 64 - 1),
                                        ("step_count", 2 ** 63 - 1)])
def test_damaged_ising_counters_are_refused(tmp_path, key, value):
    dtype = np.uint64 if value >= 2 ** 63 else np.int64
    refused(saved_with(tmp_path, "ising", **{key: np.array(value, dtype=dtype)}), key)


@pytest.mark.parametrize("key, value", [("time", 1e308), ("dt_current", 1e300), ("streams_used", 2 ** 63 - 1)])
def test_damaged_cahn_hilliard_clock_is_refused(tmp_path, key, value):
    refused(saved_with(tmp_path, "cahn-hilliard", **{key: value}), key)


def test_a_diverged_cahn_hilliard_field_is_refused(tmp_path):
    model = small("cahn-hilliard")
    phi = np.array(state_of(model)["phi"], copy=True)
    phi[1, 1] = 1e30
    refused(saved_with(tmp_path, "cahn-hilliard", phi=phi), "phi")


def _declare_uncompressed_size(path, member: str, size: int) -> None:
    """Rewrite the archive's record of ``member``'s uncompressed size (local header and central directory):
    what a small file made by compressing a huge array of zeros declares, without making one."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    struct.pack_into("<I", data, info.header_offset + 22, size)           # local file header
    name = member.encode()
    central = data.find(b"PK\x01\x02")
    while data[central + 46:central + 46 + len(name)] != name:
        central = data.find(b"PK\x01\x02", central + 1)
        assert central >= 0
    struct.pack_into("<I", data, central + 24, size)                       # central directory
    path.write_bytes(bytes(data))


def test_a_state_declaring_a_huge_lattice_is_refused_before_decompressing(tmp_path, monkeypatch):
    """Issue 41, item 12: a 3.5 MB file declaring (60000, 60000) spins for an L = 8 model was decompressed
    (3.5 GB, 28 s) before its shape was checked: the declared size is now checked against what a model of the
    file's own parameters can hold, before any array is read."""
    import io
    path = saved_with(tmp_path, "ising")
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist() if n != "spins.npy"}
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|i1", "fortran_order": False, "shape": (60000, 60000)})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, content in members.items():
            z.writestr(name, content)
        z.writestr("spins.npy", header.getvalue() + bytes(4096))
    _declare_uncompressed_size(path, "spins.npy", len(header.getvalue()) + 60000 * 60000)
    decompressed = []
    real = np.lib.format.read_array
    monkeypatch.setattr(np.lib.format, "read_array",
                        lambda f, *a, **k: decompressed.append(f.name) or real(f, *a, **k))
    message = refused(path, "'spins'")
    assert "(60000, 60000)" in message and "of the file's parameters" in message
    assert "spins.npy" not in decompressed


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_devices_and_pipes_are_refused_not_read(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "state.npz"
        os.mkfifo(path)
    else:
        path = "/dev/zero"
        if not os.path.exists(path):
            pytest.skip("no /dev/zero")
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(_load_error(path)), daemon=True)
    worker.start()
    worker.join(60)         # the reader returns at once; before, it waited for a writer (FIFO) or read forever
    if kind == "fifo" and worker.is_alive():
        with open(path, "wb"):      # release the waiting open, so that the thread ends
            pass
    assert outcome and "is not a regular file" in outcome[0] and str(path) in outcome[0]


def _load_error(path) -> str:
    try:
        load_state(path, "numpy")
    except StateError as exc:
        return str(exc)
    return "loaded"


# ---- random damage (hypothesis): refused with one line, or a model that steps and reports finite numbers ----
EXTREME = st.one_of(st.sampled_from([np.nan, np.inf, -np.inf, 1e308, -1e308, 1e30, -1e30, 2.0 ** 62, -1.0]),
                    st.floats(allow_nan=False, allow_infinity=False, width=64))
HUGE_INT = st.sampled_from([2 ** 62 + 1, 2 ** 63 - 1, -1, -2 ** 62])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=bool(os.environ.get("CI")))
@given(name=st.sampled_from(model_names()), data=st.data())
def test_random_damage_is_refused_or_harmless(tmp_path_factory, name, data):
    model = small(name)
    model.step(2)
    state = state_of(model)
    keys = [k for k in state if not k.startswith("param.") and k not in ("latticelab_state", "model", "model_format")
            and np.asarray(state[k]).size and np.asarray(state[k]).dtype.kind in "iuf"]
    key = data.draw(st.sampled_from(sorted(keys)), label="field")
    value = np.array(state[key], copy=True)
    flat = value.reshape(-1)
    index = data.draw(st.integers(0, flat.size - 1), label="index")
    if value.dtype.kind == "f":
        with np.errstate(over="ignore"):
            flat[index] = data.draw(EXTREME, label="value")
    else:
        big = data.draw(HUGE_INT, label="value")
        if not np.can_cast(np.min_scalar_type(big), value.dtype) and value.dtype.kind == "i":
            value = value.astype(np.int64)
            flat = value.reshape(-1)
        if value.dtype.kind == "u" and big < 0:
            big = 2 ** 62 + 1
        try:
            flat[index] = big
        except OverflowError:
            return
    path = tmp_path_factory.mktemp("damage") / "state.npz"
    np.savez_compressed(path, **{**state, key: value})
    try:
        loaded = load_state(path, "numpy")
    except StateError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    try:
        loaded.step(1)
    except ParameterError:      # a step may still refuse (a field grown past its bounds), in one line
        return
    assert all(math.isfinite(v) for v in loaded.observables().values()), (key, index, flat[index])
