"""Study defects of issue 41: two sweeps of one table keep each other's rows (2), a changed study is refused
(4), blocks > measurements is refused (6), ``tc`` checks its table (9), a huge grid is refused before it is
built (14), one-line exit-2 messages instead of internal errors (15), and a local Dask cluster listens on this
machine only (1)."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from latticelab.sim.io import OutputError
from latticelab.sim.studies import StudyError, parse_study
from latticelab.sim.studies.sweep import run_sweep

TINY = """\
model = "ising"

[parameters]
dim = 2
algorithm = "metropolis"

[grid]
L = [4]
T = [2.2]
seed = SEEDS

[run]
equilibrate = EQUILIBRATE
decorrelate = 1
measurements = 8
blocks = 2
backend = "numpy"
"""


def tiny(seeds=(1, 2), equilibrate=5) -> str:
    return TINY.replace("SEEDS", str(list(seeds))).replace("EQUILIBRATE", str(equilibrate))


def table_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main(*args):
    from latticelab.__main__ import main as run
    return run(list(args))


# ---- 2: two sweeps of one table ------------------------------------------------------------------------------
def test_two_sweeps_of_one_table_keep_each_others_rows(tmp_path):
    out = tmp_path / "t.csv"
    first, second = parse_study(tiny((1, 2))), parse_study(tiny((3, 4)))
    others = []

    def meanwhile(row):          # the second sweep runs start to end while the first is between its points
        if not others:
            others.append(run_sweep(second, out, progress=False))
    run_sweep(first, out, progress=False, on_row=meanwhile)
    assert others[0].done == 2
    assert sorted(int(r["seed"]) for r in table_rows(out)) == [1, 2, 3, 4]


# ---- 4: a changed study ----------------------------------------------------------------------------------------
def test_a_changed_study_is_refused_naming_the_difference(tmp_path, capsys):
    out = tmp_path / "t.csv"
    run_sweep(parse_study(tiny(equilibrate=5)), out, progress=False)
    before = out.read_text()
    with pytest.raises(OutputError, match=r"equilibrate = 5 in the table, 30 in this study"):
        run_sweep(parse_study(tiny(equilibrate=30)), out, progress=False)
    assert out.read_text() == before
    study = tmp_path / "s.toml"
    study.write_text(tiny(equilibrate=30))
    assert main("sweep", str(study), "--out", str(out)) == 2
    assert "equilibrate = 5 in the table" in capsys.readouterr().err
    assert main("sweep", str(study), "--out", str(out), "--overwrite") == 0
    assert {r["equilibrate"] for r in table_rows(out)} == {"30"}


# ---- 6: blocks > measurements -----------------------------------------------------------------------------------
def test_more_blocks_than_measurements_is_refused():
    with pytest.raises(StudyError, match=r"run.blocks \(line 16\): must be <= run.measurements \(8\)"):
        parse_study(tiny().replace("blocks = 2", "blocks = 9"))


# ---- 14: a huge grid ----------------------------------------------------------------------------------------------
@pytest.mark.timeout(30)
def test_a_huge_grid_is_refused_before_it_is_built():
    text = tiny().replace("T = [2.2]", "T = {start = 1.0, stop = 3.0, num = 100000}").replace(
        "L = [4]", "p = {start = 0.0, stop = 0.5, num = 100000}\nL = [4]")
    with pytest.raises(StudyError, match=r"grid \(line 7\): gives 20,000,000,000 points"):
        parse_study(text)


# ---- 9: tc checks its table ----------------------------------------------------------------------------------------
T_C = 2.27


def binder_table(seeds: int = 3) -> list[dict]:
    """Rows of a synthetic Binder study: U(L, T) curves that cross at T_C, moments consistent with U."""
    rng = np.random.default_rng(5)
    rows = []
    for L in (8, 16, 32):
        for T in np.linspace(2.2, 2.34, 8):
            for seed in range(1, seeds + 1):
                U = 0.33 + 0.3 * math.tanh(-(T - T_C) * L / 4) + rng.normal(0, 0.004)
                m2 = 0.3
                m4 = 3 * m2 * m2 * (1 - U)
                rows.append({"model": "ising", "dim": 2, "p": 0.0, "L": L, "T": float(T), "seed": seed, "m2": m2,
                             "m4": m4, "binder": 1 - m4 / (3 * m2 * m2), "binder_err": 0.004,
                             "point": f"{L}-{T:.4f}-{seed}"})
    return rows


def tc_of(rows):
    from latticelab.sim.studies.tc import analyse, validate_rows
    kept, notes = validate_rows(rows)
    (result,) = analyse(kept, n_boot=50)
    return result, notes


CLEAN, _ = None, None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 71), st.sampled_from(["m4", "m2", "binder", "copy"]),
                          st.sampled_from([1e308, -1.0, math.inf, math.nan, 0.0, 5.0])), min_size=1, max_size=6))
def test_tc_drops_impossible_and_repeated_rows(damage):
    global CLEAN
    if CLEAN is None:
        CLEAN = tc_of(binder_table())[0]
    rows = binder_table()
    for index, column, value in damage:
        if column == "copy":
            rows.append(dict(rows[index]))
        else:
            rows[index] = {**rows[index], column: value}
    result, notes = tc_of(rows)
    damaged = {i for i, c, _ in damage if c != "copy"}
    assert len(notes) >= len(damaged)                  # every damaged row is named (a damaged copy twice)
    # the rows left are a subset of the clean ones: T_c moves by no more than the clean error bar allows
    assert result.T_c is not None and abs(result.T_c - CLEAN.T_c) < 0.02


def test_a_row_with_m4_1e308_does_not_move_t_c():
    rows = binder_table()
    clean, _ = tc_of(rows)
    rows[40] = {**rows[40], "m4": 1e308}
    result, notes = tc_of(rows)
    assert any("line 42 dropped: m4 = 1e+308" in n for n in notes)
    assert result.T_c == pytest.approx(clean.T_c, abs=1e-3)


def test_repeated_rows_do_not_shrink_the_error_bar():
    rows = binder_table()
    clean, _ = tc_of(rows)
    result, notes = tc_of(rows + [dict(r) for r in rows])
    assert len(notes) == len(rows) and "repeats line 2" in notes[0]
    assert result.T_c_err == pytest.approx(clean.T_c_err)


# ---- 15: one-line exit-2 messages ---------------------------------------------------------------------------------
def write_table(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


@pytest.mark.parametrize(("change", "words"), [
    (lambda rows: rows[3].update(L="eight"), "line 5: L must be a positive whole number; got 'eight'"),
    (lambda rows: rows[0].update(T=""), "line 2: T must be a finite number; got None"),
])
def test_tc_refuses_a_table_with_bad_l_or_t(tmp_path, capsys, change, words):
    rows = binder_table(seeds=1)
    change(rows)
    assert main("tc", write_table(tmp_path / "t.csv", rows)) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_tc_refuses_binary_content_and_zero_bootstrap(tmp_path, capsys):
    good = write_table(tmp_path / "t.csv", binder_table(seeds=1))
    assert main("tc", good, "--bootstrap", "0") == 2
    assert "bootstrap: must be a whole number >= 2" in capsys.readouterr().err
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"L,T,m2,m4\n\xff\xfe\x00\x01\n")
    assert main("tc", str(binary)) == 2
    err = capsys.readouterr().err
    assert "b.csv is not a CSV text table" in err and len(err.strip().splitlines()) == 1


def test_tc_plot_without_matplotlib_names_the_extra(tmp_path, capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # as if it were not installed
    good = write_table(tmp_path / "t.csv", binder_table(seeds=1))
    assert main("tc", good, "--plot", str(tmp_path / "figs")) == 2
    err = capsys.readouterr().err
    assert "plot: the figures need matplotlib: pip install 'latticelab[study]'" in err
    assert len(err.strip().splitlines()) == 1


def test_sweep_refuses_a_study_file_that_is_not_utf8(tmp_path, capsys):
    study = tmp_path / "s.toml"
    study.write_bytes(tiny().encode().replace(b"metropolis", b"m\xe9tropolis"))
    assert main("sweep", str(study)) == 2
    err = capsys.readouterr().err
    assert "s.toml: study (line 5): is not UTF-8 text" in err and len(err.strip().splitlines()) == 1


def test_sweep_names_an_unreachable_scheduler(tmp_path, capsys, monkeypatch):
    import socket

    from latticelab.sim.studies import sweep
    monkeypatch.setattr(sweep, "SCHEDULER_TIMEOUT", "2s")
    with socket.socket() as s:                 # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    study = tmp_path / "s.toml"
    study.write_text(tiny())
    assert main("sweep", str(study), "--scheduler", f"tcp://127.0.0.1:{port}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"latticelab: error: scheduler: cannot reach a Dask scheduler at 'tcp://127.0.0.1:{port}'")


# ---- 1: the dashboard of a local cluster -----------------------------------------------------------------------------
def test_a_local_clusters_dashboard_listens_on_localhost_only():
    pytest.importorskip("distributed")
    from latticelab.sim.studies.sweep import local_cluster
    cluster = local_cluster(1, processes=False)
    try:
        bound = [s.getsockname()[0] for s in cluster.scheduler.http_server._sockets.values()]
    finally:
        cluster.close()
    assert bound and set(bound) == {"127.0.0.1"}
