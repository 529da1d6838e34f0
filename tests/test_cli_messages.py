"""Issue 41, items 18 and 24 (command-line part): what ``latticelab`` says, and when."""
from __future__ import annotations

from latticelab.app import cli


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
