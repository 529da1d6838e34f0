"""Issue 13, the window's side: --settings refuses files that are not latticelab settings (never writing
them), and SIGINT/SIGTERM close the window cleanly, saving its settings."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("PySide6")   # the settings check reads files with Qt's own INI reader

from latticelab.app.commands import main as cli  # noqa: E402
from latticelab.app.settings import check_settings_file  # noqa: E402
from latticelab.sim.params import ParameterError  # noqa: E402


def _state_file(path):
    from latticelab.sim.models import get_model
    from latticelab.sim.state import save_state
    return save_state(path, get_model("ising").create(backend="numpy", L=8))


@pytest.mark.parametrize("kind", ["notes", "state", "binary", "other-ini", "folder"])
def test_settings_option_refuses_and_keeps_other_files(kind, tmp_path, capsys, qapp):
    path = tmp_path / "target"
    if kind == "notes":
        path.write_text("Meeting notes\nremember: T_c = 2.269\n")
    elif kind == "state":
        path = _state_file(tmp_path / "target.npz")
    elif kind == "binary":
        path.write_bytes(bytes(range(256)))
    elif kind == "other-ini":
        path.write_text("[editor]\nfont=Mono\n")
    else:
        path.mkdir()
    before = path.read_bytes() if path.is_file() else None
    code = cli.main(["gui", "--settings", str(path), "--quit", "--backend", "numpy", "--L", "16"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    line, = [e for e in err.splitlines() if e.startswith("latticelab: error:")]
    assert str(path) in line and "settings" in line
    if before is not None:
        assert path.read_bytes() == before


def test_settings_files_written_by_latticelab_are_accepted(tmp_path, qapp):
    from PySide6 import QtCore

    from latticelab.app.settings import Preferences
    from latticelab.sim.models import get_model
    path = tmp_path / "s.ini"
    assert check_settings_file(path) == path          # a new name: made on first use
    prefs = Preferences(QtCore.QSettings(str(path), QtCore.QSettings.Format.IniFormat))
    prefs.set("model", "ising")
    prefs.set("view/peel", 3)
    prefs.set_model_values("ising", get_model("ising").Params.create(L=16))
    prefs.set("window/state", QtCore.QByteArray(bytes(range(40))))
    prefs.sync()
    del prefs
    assert check_settings_file(path) == path
    (tmp_path / "empty.ini").write_text("")
    assert check_settings_file(tmp_path / "empty.ini")
    with pytest.raises(ParameterError, match="does not exist"):
        check_settings_file(tmp_path / "missing" / "s.ini")


@pytest.mark.timeout(120)
@pytest.mark.skipif(not (os.environ.get("DISPLAY") or os.environ.get("QT_QPA_PLATFORM")), reason="needs a display")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_close_the_window_and_save_its_settings(sig, tmp_path):
    settings = tmp_path / "s.ini"
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "latticelab", "-v", "gui", "--settings", str(settings),
                                 "--backend", "numpy", "--L", "32", "--T", "2.5"],
                                stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + 90
            while "window open" not in err_path.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()
                time.sleep(0.1)
            time.sleep(0.5)
            proc.send_signal(sig)
            code = proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = err_path.read_text()
    assert code == 128 + sig, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert f"{signal.Signals(sig).name} received" in text
    saved = settings.read_text()
    assert "model=ising" in saved and "T=2.5" in saved
