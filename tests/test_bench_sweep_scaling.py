"""bench sweep-scaling: runs one study on 1 and 2 local Dask workers and reports points per hour."""
import argparse
import json

import pytest

pytest.importorskip("distributed")

from latticelab.bench import sweep_scaling as S
from latticelab.sim.params import ParameterError

STUDY = """model = "ising"
[parameters]
dim = 2
algorithm = "metropolis"
[grid]
L = [4]
T = {start = 2.0, stop = 2.5, num = 3}
seed = [1, 2]
[run]
equilibrate = 10
decorrelate = 1
measurements = 64
blocks = 8
backend = "numpy"
"""


def _args(*argv):
    parser = argparse.ArgumentParser()
    S.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_two_worker_counts_give_one_case_with_their_ratio(tmp_path, capsys):
    study = tmp_path / "tiny.toml"
    study.write_text(STUDY)
    assert S.main(_args(str(study), "--workers", "1,2", "--out-dir", str(tmp_path))) == 0
    doc = json.loads(next(tmp_path.glob("sweep-scaling-*.json")).read_text())
    (case,) = doc["cases"]
    runs = case["details"]["runs"]
    assert [r["workers"] for r in runs] == [1, 2]
    assert all(r["points"] == 6 for r in runs)          # every point of the study, in each run
    assert case["ratio"] == pytest.approx(runs[1]["points_per_hour"] / runs[0]["points_per_hour"], rel=1e-2)
    assert not list(tmp_path.glob("*.csv"))               # the tables went to a scratch folder


def test_worker_counts_are_checked():
    with pytest.raises(ParameterError, match="--workers"):
        S._counts("2")
    with pytest.raises(ParameterError, match="--workers"):
        S._counts("0,2")
