"""Issue 41, item 14: a run or a window that would never end or never fit is refused with one line: a time step
too small to reach --until, and a window larger than any screen."""
from __future__ import annotations

import pytest

from latticelab.app.commands import main as cli


def _error(capsys, argv) -> str:
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    line, = [e for e in err.splitlines() if e.startswith("latticelab: error:")]
    assert "Traceback" not in err
    return line


def test_a_subnormal_time_step_is_refused(capsys):
    line = _error(capsys, ["run", "cahn-hilliard", "--backend", "numpy", "--L", "16", "--dt", "1e-320",
                           "--until", "1"])
    assert "error: dt: must be a number in [1e-12" in line


@pytest.mark.timeout(120)
def test_an_until_run_that_would_take_forever_is_stopped_with_a_message(capsys):
    """dt = 1e-12 is allowed, but reaching t = 100 with it takes 1e14 steps: after the first check the run
    stops and says why (before the fix it ran on for ever)."""
    line = _error(capsys, ["run", "cahn-hilliard", "--backend", "numpy", "--L", "8", "--dt", "1e-12",
                           "--until", "100"])
    assert "error: --until: reaching simulated time 100 at 1e-12 a step would take" in line
    assert "choose a larger time step or a smaller --until" in line


def test_a_growing_adaptive_step_is_not_mistaken_for_a_run_without_end(capsys):
    code = cli.main(["run", "cahn-hilliard", "--backend", "numpy", "--L", "8", "--integrator", "spectral",
                     "--time-step", "adaptive", "--dt", "1e-6", "--until", "200"])
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("size", ["100000x100000", "300x9000", "0x0", "800"])
def test_an_impossible_window_size_is_one_line(capsys, monkeypatch, size):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    pytest.importorskip("PySide6")
    line = _error(capsys, ["gui", "--window-size", size, "--quit", "--backend", "numpy"])
    assert "window-size: must be WIDTHxHEIGHT with both in 200 .. 8192" in line
