"""Issue 41, item 1: a settings file never runs code. PySide6's QSettings unpickles a Python object stored in an
INI file (``@Variant(...PySide::PyObjectWrapper...)``) as soon as Qt parses its section; latticelab reads the
file as text first and refuses any serialized object, for ``--settings FILE`` and for the default file."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("PySide6")

from PySide6 import QtCore  # noqa: E402

from latticelab.app.commands import main as cli  # noqa: E402
from latticelab.app.settings import check_settings_file  # noqa: E402
from latticelab.app.settings_text import serialized_object_key  # noqa: E402
from latticelab.sim.params import ParameterError  # noqa: E402

MARKER = Path(tempfile.mkdtemp(prefix="latticelab-settings-marker-")) / "ran"


class Payload:
    """Pickled by QSettings.setValue; unpickling it makes the MARKER folder (what an attacker's command would)."""

    def __reduce__(self):
        return os.mkdir, (str(MARKER),)


def _crafted_value() -> str:
    """The INI text of a pickled Python object exactly as PySide6 writes it."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "made.ini"
        store = QtCore.QSettings(str(path), QtCore.QSettings.Format.IniFormat)
        store.setValue("x", Payload())
        store.sync()
        del store
        line, = [line for line in path.read_text().splitlines() if line.startswith("x=")]
    return line[2:]


CRAFTED = _crafted_value()


def _read_everything(path: Path) -> None:
    """What latticelab's window does with a settings file it accepted: Qt reads every key of it."""
    store = QtCore.QSettings(str(path), QtCore.QSettings.Format.IniFormat)
    for key in store.allKeys():
        store.value(key)


@pytest.fixture(autouse=True)
def no_marker():
    if MARKER.exists():
        MARKER.rmdir()
    yield
    assert not MARKER.exists(), "a settings file ran code"


def test_the_crafted_value_runs_code_when_qt_reads_it(tmp_path):
    """The attack is real (so the tests below mean something): Qt's reading of the crafted file runs it."""
    path = tmp_path / "evil.ini"
    path.write_text(f"[General]\nmodel={CRAFTED}\n")
    _read_everything(path)
    assert MARKER.exists()
    MARKER.rmdir()


def test_gui_refuses_a_settings_file_holding_a_python_object(tmp_path, capsys, qapp):
    path = tmp_path / "evil.ini"
    path.write_text(f"[General]\nmodel=ising\n\n[view]\nlegend={CRAFTED}\n")
    before = path.read_bytes()
    code = cli.main(["gui", "--settings", str(path), "--quit", "--backend", "numpy", "--L", "16"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    line, = [e for e in err.splitlines() if e.startswith("latticelab: error:")]
    assert str(path) in line and "view/legend" in line and "serialized" in line
    assert path.read_bytes() == before


def test_the_default_settings_file_is_checked_too(tmp_path):
    """~/.config/latticelab/latticelab.conf: refused with a line naming the file and the key, never read."""
    folder = tmp_path / "config" / "latticelab"
    folder.mkdir(parents=True)
    (folder / "latticelab.conf").write_text(f"[General]\nmodel={CRAFTED}\n")
    code = ("from PySide6 import QtCore; app = QtCore.QCoreApplication([]); "
            "app.setOrganizationName('latticelab'); app.setApplicationName('latticelab'); "
            "from latticelab.app.settings import open_default_store; store, why = open_default_store(); "
            "print(store is None); print(why)")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONPATH": os.pathsep.join(sys.path),
           "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    refused, why = out.stdout.splitlines()[:2]
    assert refused == "True" and "latticelab.conf" in why and "under model" in why, out.stderr


# Qt's INI decoding: the same value hidden by escapes, quotes and line continuations
DISGUISES = [
    lambda v: v,
    lambda v: '"' + v + '"',
    lambda v: "\\x40" + v[1:],                 # @ as a hex escape
    lambda v: "\\100" + v[1:],                 # @ as an octal escape
    lambda v: v[:4] + "\\\n" + v[4:],          # split over two lines
    lambda v: v[:4] + "\\\n    " + v[4:],      # ... the second indented
    lambda v: "plain, " + v,                   # the second item of a list
]


@pytest.mark.parametrize("disguise", range(len(DISGUISES)))
def test_a_disguised_object_is_found(disguise, tmp_path):
    path = tmp_path / "evil.ini"
    path.write_text(f"[run]\nadaptive=true\n[models]\nising\\dim%3D2\\L={DISGUISES[disguise](CRAFTED)}\n")
    with pytest.raises(ParameterError, match="serialized object .* under models/ising/dim=2/L"):
        check_settings_file(path)


PLAIN = st.one_of(st.integers(-10**6, 10**6).map(str), st.booleans().map(str).map(str.lower),
                  st.floats(allow_nan=False).map(repr),
                  st.text(st.characters(codec="utf-8", exclude_characters="\0\r\n"), max_size=20),
                  st.binary(max_size=24).map(lambda b: "@ByteArray(" + "".join(f"\\x{c:x}" for c in b) + ")"))
NAME = st.text("abcdefghijklmnopqrstuvwxyz_/", min_size=1, max_size=12).filter(lambda s: s.strip("/"))
ENTRY = st.tuples(st.sampled_from(["General", "models", "run", "view", "window", "folders"]), NAME,
                  st.one_of(PLAIN, st.sampled_from(range(len(DISGUISES))).map(lambda i: DISGUISES[i](CRAFTED))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=bool(os.environ.get("CI")))
@given(entries=st.lists(ENTRY, min_size=1, max_size=8), junk=st.text(max_size=40))
def test_random_settings_files_never_run_code(entries, junk):
    """Whatever the file holds: either it is refused, or Qt's reading of every key of it runs nothing; and a
    file with a serialized object in it is always refused."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.ini"
        lines = []
        for section, key, value in entries:
            lines += [f"[{section}]", f"{key.replace('/', chr(92))}={value}"]
        text = "\n".join(lines) + "\n" + junk
        path.write_text(text, errors="surrogatepass")
        has_object = any(CRAFTED[1:20] in value for _s, _k, value in entries)
        try:
            check_settings_file(path)
        except ParameterError:
            return
        assert not has_object
        assert serialized_object_key(text) is None
        _read_everything(path)
        assert not MARKER.exists(), text
