"""The headless command line: CSV of observables per step, one-line errors with exit status 2."""
import csv
import subprocess
import sys

import pytest

from latticelab.app.commands.main import main


def test_run_ising_writes_one_row_per_step(tmp_path, capsys):
    out = tmp_path / "out.csv"
    assert main(["run", "ising", "--dim", "2", "--L", "16", "--T", "2.0", "--p", "0.1", "--algorithm", "wolff",
                 "--steps", "25", "--seed", "1", "--csv", str(out), "--backend", "numpy"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [int(r["step"]) for r in rows] == list(range(1, 26))
    assert all(-2 <= float(r["energy"]) <= 2 and 0 <= float(r["abs_magnetisation"]) <= 1 for r in rows)
    assert "energy" in capsys.readouterr().out


def test_existing_csv_is_not_overwritten(tmp_path, capsys):
    out = tmp_path / "keep.csv"
    out.write_text("precious")
    assert main(["run", "ising", "--L", "8", "--steps", "2", "--csv", str(out), "--backend", "numpy"]) == 2
    assert out.read_text() == "precious"
    assert "exists" in capsys.readouterr().err


@pytest.mark.parametrize("args,word", [(["--L", "7"], "L"), (["--dim", "4"], "dim"), (["--T", "0"], "T"),
                                        (["--p", "2"], "p"), (["--algorithm", "x"], "algorithm"),
                                        (["--backend", "tpu"], "backend"), (["--dim", "two"], "--dim")])
def test_bad_input_exits_2_with_one_line(args, word):
    proc = subprocess.run([sys.executable, "-m", "latticelab", "run", "ising", "--steps", "1", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and word in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_without_a_display_the_default_command_runs_headless_and_gui_says_why(monkeypatch):
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    default = subprocess.run([sys.executable, "-m", "latticelab"], capture_output=True, text=True, timeout=300, env=env)
    assert default.returncode == 0 and "headless" in default.stderr and "energy" in default.stdout
    gui = subprocess.run([sys.executable, "-m", "latticelab", "gui"], capture_output=True, text=True, timeout=120,
                         env=env)
    assert gui.returncode == 2 and "no display" in gui.stderr and "Traceback" not in gui.stderr
