"""Issue 41, items 18 and 24 (command-line part): what ``latticelab`` says, and when."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from latticelab.app.commands import main as cli
from latticelab.sim import io
from latticelab.sim.params import ParameterError


def run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_value_derived_from_others_is_said_not_taken_silently(capsys):
    """Item 18: `run cahn-hilliard --m 20` took dt = 0.001 (0.8 x the stability limit for m = 20) without a word,
    while the window refuses m = 20 at its dt = 0.02; the run now says which values it derived."""
    code, _, err = run(["run", "cahn-hilliard", "--backend", "numpy", "--L", "8", "--m", "20", "--steps", "1"], capsys)
    assert code == 0, err
    assert "not given, so derived from the other parameters: --dt 0.001 (default 0.02)" in err
    code, _, err = run(["run", "cahn-hilliard", "--backend", "numpy", "--L", "8", "--steps", "1"], capsys)
    assert code == 0 and "derived" not in err


# ---- item 24 ----------------------------------------------------------------------------------------------
def one_line(code, err) -> str:
    assert code == 2, err
    lines = [e for e in err.splitlines() if e.startswith("latticelab: error:")]
    assert len(lines) == 1 and "Traceback" not in err and "Warning" not in err, err
    return lines[0]


def test_the_overwrite_refusal_names_the_option(tmp_path, capsys):
    target = tmp_path / "out.csv"
    target.write_text("mine\n")
    line = one_line(*run(["run", "ising", "--backend", "numpy", "--L", "8", "--steps", "1", "--csv", target],
                         capsys)[::2])
    assert "give --overwrite to replace it" in line and target.read_text() == "mine\n"


@pytest.mark.parametrize("option", ["--csv", "--initial"])
def test_an_empty_path_is_refused_not_ignored(option, capsys):
    line = one_line(*run(["run", "cahn-hilliard", "--backend", "numpy", "--L", "8", "--steps", "1", f"{option}="],
                         capsys)[::2])
    assert f"error: {option}: an empty value" in line


def test_an_error_about_a_default_says_which_given_value_it_clashes_with(capsys):
    """`--dx 1000` said "dt_max: must be >= dt" of two values the user never gave; the suggested dt now stays
    within dt_max, and a default that does not go with the values given says so."""
    code, _, err = run(["run", "cahn-hilliard", "--backend", "numpy", "--L", "8", "--dx", "1000", "--steps", "1"],
                       capsys)
    assert code == 0, err
    line = one_line(*run(["run", "cahn-hilliard", "--backend", "numpy", "--L", "8", "--integrator", "spectral",
                          "--dt", "20", "--steps", "1"], capsys)[::2])
    assert "dt_max: must be >= dt" in line and "(--dt-max was not given: its default does not go with" in line


def test_runtime_warnings_do_not_come_before_the_one_line_error(capsys, monkeypatch):
    from latticelab.sim.models import get_model
    cls = get_model("ising")

    def overflowing_step(self, n=1):
        np.float32(3e38) * np.float32(10)        # a RuntimeWarning on the way to the error
        raise ParameterError("T", "made up for the test")

    monkeypatch.setattr(cls, "step", overflowing_step)
    line = one_line(*run(["run", "ising", "--backend", "numpy", "--L", "8", "--steps", "1"], capsys)[::2])
    assert line == "latticelab: error: T: made up for the test"


def test_time_columns_are_plain_names(tmp_path, capsys):
    target = tmp_path / "c.csv"
    code, _, err = run(["run", "cortex", "--backend", "numpy", "--L", "8", "--k", "4", "--r", "2", "--steps", "2",
                        "--csv", target], capsys)
    assert code == 0, err
    assert target.read_text().splitlines()[0].startswith("time_ms,")


def test_gui_help_groups_the_parameters_per_model(capsys):
    pytest.importorskip("PySide6")
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["gui", "--help"])
    text = capsys.readouterr().out
    assert "Rewired Ising model (--model ising):" in text and "Cahn-Hilliard" in text and "(--model cortex)" in text
    shared = text.split("parameters of several models")[1].split("\n\n")[0]
    assert "--L L" in shared and "default" not in shared.split("):", 1)[1] and "ising, cahn-hilliard, cortex" in shared


def test_a_screenshot_into_a_missing_folder_is_refused_before_the_run(capsys, monkeypatch, tmp_path):
    pytest.importorskip("PySide6")
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    missing = tmp_path / "nowhere" / "x.png"
    line = one_line(*run(["gui", "--backend", "numpy", "--L", "16", "--steps", "5", "--screenshot", missing,
                          "--quit"], capsys)[::2])
    assert str(missing) in line and "does not exist" in line


def test_temporaries_of_a_killed_writer_do_not_accumulate(tmp_path):
    """kill -9 left hidden .NAME.XXXXXXXX.part files: the next write of that name removes those of our pattern
    that no live writer holds; another program's file, and a live writer's temporary, stay."""
    code = ("import os, sys; from latticelab.sim import io; "
            "f = io.AtomicFile(sys.argv[1], overwrite=True, binary=False); f.file.write('half'); f.file.flush(); "
            "print(f._tmp, flush=True); os.kill(os.getpid(), 9)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    target = tmp_path / "out.csv"
    killed = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, env=env,
                            timeout=120)
    left = Path(killed.stdout.strip())
    assert left.exists() and killed.returncode == -9
    others = [tmp_path / ".out.csv.notours.part", tmp_path / ".other.csv.abcdefgh.part", tmp_path / "notes.part"]
    for path in others:
        path.write_text("someone else's")
    old = io._STARTED - 3600        # before this process began writing (it may have run for hours)
    for path in [left, *others]:
        os.utime(path, (old, old))
    live = io.AtomicFile(tmp_path / "out.csv", overwrite=True, binary=False)     # a writer that lives on
    os.utime(live._tmp, (old, old))
    with io.open_atomic(target, overwrite=True, binary=False) as f:
        f.write("new\n")
    assert not left.exists() and target.read_text() == "new\n"
    assert all(path.exists() for path in others) and Path(live._tmp).exists()
    live.discard()
