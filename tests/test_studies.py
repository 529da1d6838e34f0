"""Batch studies (sim/studies, issue 11): study files validated with the key and line of every bad value,
the per-point function, sweeps that resume without redoing points, the same table on a Dask cluster as in
this process, and the ``sweep`` / ``tc`` commands."""
from __future__ import annotations

import csv
import textwrap

import pytest

from latticelab.sim.studies import StudyError, parse_study
from latticelab.sim.studies.point import TIMING_COLUMNS, measure_point, run_point
from latticelab.sim.studies.sweep import point_cost, run_sweep, submission_order

SMALL = """\
model = "ising"

[parameters]
dim = 2
algorithm = "metropolis"

[grid]
L = [4, 8]
T = {start = 2.0, stop = 2.5, num = 3}
seed = [1, 2]

[run]
equilibrate = 10
decorrelate = 2
measurements = 40
backend = "numpy"
"""


def write(tmp_path, text, name="study.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def rows_without_timing(path):
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in csv.DictReader(f)]


# ---- study files ------------------------------------------------------------------------------------------
def test_a_study_file_gives_every_grid_point_validated():
    study = parse_study(SMALL)
    assert len(study.points) == 2 * 3 * 2
    assert {p.values["L"] for p in study.points} == {4, 8}
    assert sorted({p.values["T"] for p in study.points}) == [2.0, 2.25, 2.5]
    assert all(p.values["dim"] == 2 and p.values["algorithm"] == "metropolis" for p in study.points)
    assert len({p.key for p in study.points}) == len(study.points)
    assert "binder" in study.quantities and not study.unavailable


@pytest.mark.parametrize(("change", "key", "line", "words"), [
    (("L = [4, 8]", "L = [4, 9]"), "grid.L", 8, "even"),
    (("T = {start = 2.0, stop = 2.5, num = 3}", "T = [2.0, -1.0]"), "grid.T", 9, "> 0"),
    (("T = {start = 2.0, stop = 2.5, num = 3}", "T = {start = 2.0, stop = 2.5, num = 0}"), "grid.T.num", 9, ">= 1"),
    (("T = {start = 2.0, stop = 2.5, num = 3}", 'T = "hot"'), "grid.T", 9, "list of values"),
    (("measurements = 40", "measurements = 1"), "run.measurements", 15, "must be >= 2; got 1"),
    (("decorrelate = 2", "decorrelate = 0"), "run.decorrelate", 14, "must be > 0; got 0"),
    (("measurements = 40", "measurements = 2.5"), "run.measurements", 15, "integer"),
    (('backend = "numpy"', 'backend = "gpu"'), "run.backend", 16, "'auto', 'cuda' or 'numpy'"),
    (("equilibrate = 10", "equilibrate = 10\nsteps = 3"), "run.steps", 14, "unknown key"),
    (('algorithm = "metropolis"', 'algorithm = "fast"'), "parameters.algorithm", 5, "hybrid"),
    (("dim = 2", "dim = 2\nspeed = 3"), "parameters.speed", 5, "not a parameter of ising"),
    (('model = "ising"', 'model = "potts"'), "model", 1, "one of ising"),
    (("seed = [1, 2]", "seed = []"), "grid.seed", 10, "empty"),
    (("[run]", "[run]\nquantities = [\"binder\", \"entropy\"]"), "run.quantities", 13,
     "'entropy' is not a measure of ising; allowed: flipped_fraction, energy"),
    (("L = [4, 8]", "L = [4, 8\n"), "study", 10, "not valid TOML"),
])
def test_a_bad_study_file_names_the_key_and_line(change, key, line, words):
    text = SMALL.replace(*change)
    assert text != SMALL
    with pytest.raises(StudyError) as info:
        parse_study(text, "study.toml")
    message = str(info.value)
    assert message.startswith(f"study.toml: {key} (line {line}): "), message
    assert words in message, message


def test_every_problem_of_a_study_file_is_reported_at_once():
    text = SMALL.replace("measurements = 40", "measurements = 0").replace("equilibrate = 10", "equilibrate = -1")
    with pytest.raises(StudyError) as info:
        parse_study(text, "s.toml")
    assert [p[0] for p in info.value.problems] == ["run.equilibrate", "run.measurements"]
    assert "2 problems" in str(info.value)


def test_a_measure_the_model_does_not_declare_is_refused_with_the_allowed_ones():
    text = ('model = "cahn-hilliard"\n[grid]\nL = [8]\n[run]\nequilibrate = 1\ndecorrelate = 1\nmeasurements = 2\n'
            'measures = ["binder"]\n')
    with pytest.raises(StudyError) as info:
        parse_study(text, "ch.toml")
    message = str(info.value)
    assert message.startswith("ch.toml: run.measures (line 8): 'binder' is not a measure of cahn-hilliard; allowed: ")
    assert "coarsening_exponent" in message and "free_energy" in message


# ---- one point ----------------------------------------------------------------------------------------------
def test_the_point_function_is_pure_and_fills_its_row():
    point = parse_study(SMALL).points[0]
    row = run_point(point)
    again = run_point(point)
    assert {k: v for k, v in row.items() if k not in TIMING_COLUMNS} == \
           {k: v for k, v in again.items() if k not in TIMING_COLUMNS}
    assert row["model"] == "ising" and row["L"] == 4 and row["seed"] == 1 and row["n_sites"] == 16
    assert row["backend"] == "numpy" and row["code_version"] and row["point"] == point.key
    assert -2.0 <= row["energy"] <= 0 and 0 <= row["abs_magnetisation"] <= 1
    assert row["binder_err"] > 0 and row["heat_capacity"] > 0
    plain = measure_point("ising", L=4, p=0.0, T=2.0, seed=1, equilibrate=10, decorrelate=2, measurements=40,
                          backend="numpy", dim=2, algorithm="metropolis")
    assert plain["binder"] == row["binder"]


# ---- sweeps -------------------------------------------------------------------------------------------------
def test_an_interrupted_sweep_resumes_to_the_same_table(tmp_path):
    study = parse_study(SMALL, "study.toml")
    straight = run_sweep(study, tmp_path / "straight.csv", progress=False)
    assert straight.done == len(study.points) and not straight.failed

    class Stop(Exception):
        pass

    seen = []

    def stop_after_five(row):
        seen.append(row)
        if len(seen) == 5:
            raise Stop
    with pytest.raises(Stop):
        run_sweep(study, tmp_path / "resumed.csv", progress=False, on_row=stop_after_five)
    assert len(rows_without_timing(tmp_path / "resumed.csv")) == 5        # the finished points are on disk
    resumed = run_sweep(study, tmp_path / "resumed.csv", progress=False)
    assert (resumed.done, resumed.skipped) == (len(study.points) - 5, 5)
    assert rows_without_timing(tmp_path / "resumed.csv") == rows_without_timing(tmp_path / "straight.csv")
    assert run_sweep(study, tmp_path / "resumed.csv", progress=False).done == 0     # nothing left to do


def test_a_sweep_does_not_take_over_a_foreign_file(tmp_path):
    from latticelab.sim.io import OutputError
    out = tmp_path / "other.csv"
    out.write_text("a,b\n1,2\n")
    with pytest.raises(OutputError, match="not a results table"):
        run_sweep(parse_study(SMALL), out, progress=False)
    assert out.read_text() == "a,b\n1,2\n"


def test_parquet_table_beside_the_csv(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    study = parse_study(SMALL.replace("seed = [1, 2]", "seed = [1]").replace("L = [4, 8]", "L = [4]"))
    result = run_sweep(study, tmp_path / "r.parquet", progress=False)
    table = pq.read_table(result.parquet_path).to_pylist()
    assert result.csv_path.exists() and len(table) == 3
    assert table[0]["L"] == 4 and isinstance(table[0]["binder"], float)


def test_points_are_submitted_longest_first_and_stable_among_equals():
    study = parse_study(SMALL, "study.toml")
    order = submission_order(study.points)
    assert sorted(p.key for p in order) == sorted(p.key for p in study.points)
    sizes = [p.values["L"] for p in order]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] == 8     # all L = 8 points before any L = 4 one
    same_L = [p for p in study.points if p.values["L"] == 8]
    assert [p.key for p in order[:len(same_L)]] == [p.key for p in same_L]   # grid order among equal costs
    more_steps = parse_study(SMALL.replace("measurements = 40", "measurements = 400"), "study.toml").points[0]
    assert point_cost(more_steps) > point_cost(study.points[0])


def test_a_dask_cluster_gives_the_same_table_as_this_process(tmp_path):
    pytest.importorskip("distributed")
    study = parse_study(SMALL, "study.toml")     # two sizes: submitted largest first, written in grid order
    run_sweep(study, tmp_path / "local.csv", progress=False)
    result = run_sweep(study, tmp_path / "dask.csv", workers=2, processes=False, progress=False)
    assert result.done == len(study.points) and not result.failed
    assert rows_without_timing(tmp_path / "dask.csv") == rows_without_timing(tmp_path / "local.csv")


# ---- commands -----------------------------------------------------------------------------------------------
def test_sweep_and_tc_commands(tmp_path, capsys):
    from latticelab.__main__ import main
    study = write(tmp_path, SMALL.replace("L = [4, 8]", "L = [4, 8]").replace("num = 3", "num = 4"))
    assert main(["sweep", str(study)]) == 0
    err = capsys.readouterr().err
    assert "16 points of ising in this process" in err and "16 points run" in err
    assert main(["sweep", str(study)]) == 0
    assert "0 points run, 16 already in the table" in capsys.readouterr().err
    assert main(["tc", str(tmp_path / "study.csv")]) == 0
    out = capsys.readouterr().out
    assert "T_c(" in out and "peak of C_v (L 8)" in out


def test_sweep_command_refuses_a_bad_file_before_running(tmp_path, capsys):
    from latticelab.__main__ import main
    study = write(tmp_path, SMALL.replace("L = [4, 8]", "L = [4, 7]"))
    assert main(["sweep", str(study)]) == 2
    err = capsys.readouterr().err
    assert "grid.L (line 8)" in err and "even" in err
    assert not (tmp_path / "study.csv").exists()
    assert main(["tc", str(tmp_path / "missing.csv")]) == 2


def test_tc_plot_writes_pngs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from latticelab.__main__ import main
    study = write(tmp_path, SMALL.replace("seed = [1, 2]", "seed = [1]"))
    assert main(["sweep", str(study)]) == 0
    assert main(["tc", str(tmp_path / "study.csv"), "--plot", str(tmp_path / "figs")]) == 0
    pngs = list((tmp_path / "figs").glob("*.png"))
    assert len(pngs) == 1 and pngs[0].read_bytes()[:4] == b"\x89PNG"
