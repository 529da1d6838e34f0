"""Batch schedules of the cortical model (sim/models/cortex/schedule.py, batch.py; thesis 003 section 8.3):
the thesis's test schedule read from TOML, a write/read round trip, every kind of bad schedule refused with the
line and key at fault before anything runs, and a scheduled batch run that equals stepping by hand."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.models.cortex.batch import run_batch
from latticelab.sim.models.cortex.model import CortexModel
from latticelab.sim.models.cortex.params import CortexParams
from latticelab.sim.models.cortex.schedule import (THESIS_TEST, Change, Schedule, ScheduleError, parse_schedule,
                                                   read_schedule)

THESIS_TOML = """\
# thesis 003, section 8.5: I_e = 3.0, n_e = 4.5, I_i = 2.0, n_i = 3.0, lambda_tau_e = 3 from step 4000 to 5000
[[change]]
step = 0
I_e = 3.0
n_e = 4.5
I_i = 2.0
n_i = 3.0

[[change]]
step = 4000
lambda_tau_e = 3.0

[[change]]
step = 5000
lambda_tau_e = 1      # an integer is taken as 1.0
"""


def test_the_thesis_schedule_reads_and_round_trips(tmp_path):
    path = tmp_path / "schedule.toml"
    path.write_text(THESIS_TOML)
    schedule = read_schedule(path, CortexParams)
    assert schedule == THESIS_TEST
    assert schedule.steps == (0, 4000, 5000)
    assert schedule.at(4000) == {"lambda_tau_e": 3.0} and schedule.at(4001) == {}
    assert parse_schedule(schedule.to_toml(), CortexParams) == schedule
    merged = parse_schedule("[[change]]\nstep = 7\nI_e = 1.5\n[[change]]\nstep = 2\nboost_fraction = 0.1\n"
                            "[[change]]\nstep = 7\nn_e = 0\n", CortexParams)
    assert merged == Schedule((Change(2, {"boost_fraction": 0.1}), Change(7, {"I_e": 1.5, "n_e": 0.0})))
    assert parse_schedule(merged.to_toml(), CortexParams) == merged
    assert parse_schedule("", CortexParams) == Schedule()


BAD = [
    ("[[change]]\nstep = 0\nI_e = \n", r"not valid TOML: .*line 3"),
    ("[[change]]\nstep = 0\nI_e = 3.0\n\n[[change]]\nstep = 10\nI_x = 2.0\n",
     r"line 7 change #2: I_x: is not a parameter of cortex; live parameters: A_e, A_i, I_e"),
    ("[[change]]\nstep = 0\nL = 64\n", r"line 3 change #1: L: cannot change during a run"),
    ("[[change]]\nstep = 0\nseed = 3\n", r"line 3 change #1: seed: cannot change during a run"),
    ("[[change]]\nstep = 0\n\nn_i = -1.0\n", r"line 4 change #1: n_i: must be a number in \[0, 100\]; got -1.0"),
    ("[[change]]\nstep = 3\nlambda_tau_e = 0\n", r"line 3 change #1: lambda_tau_e: must be a number in \[0.01, 100\]"),
    ("[[change]]\nstep = 3\nI_e = \"high\"\n", r"line 3 change #1: I_e: must be a finite number"),
    ("[[change]]\nstep = 3\nI_e = nan\n", r"line 3 change #1: I_e: must be a finite number"),
    ("[[change]]\nstep = -5\nI_e = 1.0\n", r"line 2 change #1: step: must be an integer >= 0; got -5"),
    ("[[change]]\nstep = 2.5\nI_e = 1.0\n", r"line 2 change #1: step: must be an integer >= 0; got 2.5"),
    ("[[change]]\nI_e = 1.0\n", r"line 1 change #1: has no step"),
    ("[[change]]\nstep = 4\n", r"line 2 change #1: step: this change sets no parameter"),
    ("[[change]]\nstep = 4\nI_e = 1.0\n[[change]]\nstep = 4\nI_e = 2.0\n",
     r"line 6 change #2: I_e: is already set for step 4 by change #1"),
    ("I_e = 3.0\n", r"line 1: I_e: a schedule holds only \[\[change\]\] tables"),
    ("change = 5\n", r"line 1: change: must be an array of tables"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_bad_schedules_are_refused_naming_the_line_and_key(text, message, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScheduleError, match=message) as info:
        read_schedule(path, CortexParams)
    assert str(info.value).startswith(f"{path}:")


def test_unreadable_schedules_are_refused(tmp_path):
    with pytest.raises(ScheduleError, match="cannot read"):
        read_schedule(tmp_path / "missing.toml", CortexParams)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00step")
    with pytest.raises(ScheduleError, match="not UTF-8"):
        read_schedule(binary, CortexParams)


def test_values_are_checked_against_the_run_s_parameters():
    base = CortexParams.create(lambda_tau_e=2.0)
    schedule = parse_schedule("[[change]]\nstep = 5\nI_e = 1.0\n", CortexParams, base=base)
    assert schedule.at(5) == {"I_e": 1.0}


def test_a_scheduled_batch_run_equals_stepping_by_hand():
    schedule = parse_schedule("[[change]]\nstep = 0\nI_e = 3.5\n[[change]]\nstep = 100\nlambda_tau_e = 3.0\n"
                              "boost_fraction = 0.1\n[[change]]\nstep = 130\nlambda_tau_e = 1.0\nboost_fraction = 0\n",
                              CortexParams)
    values = {"L": 16, "k": 10, "r": 4, "seed": 5}
    batch = CortexModel(backend="numpy", **values)
    rows, updates, done = [], [], []
    run_batch(batch, schedule, 300, segment=128, on_rows=rows.append,
              on_qeeg=lambda t, m: updates.append((t, m)), progress=done.append)
    rows = np.concatenate(rows)
    assert sum(done) == 300 and rows.shape == (300, 5) and np.array_equal(rows[:, 0], np.arange(1, 301))
    assert [t for t, _ in updates] == [128, 192, 256]          # every 64 steps once 128 are done
    assert set(updates[-1][1]) >= {"sen", "ppf", "mpf", "sef95", "alpha"}
    by_hand = CortexModel(backend="numpy", **values)
    expected = []
    for step in range(300):
        changes = {0: {"I_e": 3.5}, 100: {"lambda_tau_e": 3.0, "boost_fraction": 0.1},
                   130: {"lambda_tau_e": 1.0, "boost_fraction": 0.0}}.get(step)
        if changes:
            by_hand.update(**changes)
        by_hand.step(1)
        obs = by_hand.observables()
        expected.append([by_hand.time, obs["eeg"], obs["firing_e"], obs["firing_i"], by_hand.state.v[0]])
    np.testing.assert_array_equal(rows, np.array(expected))
    assert batch.params == by_hand.params and batch.params.lambda_tau_e == 1.0


@pytest.mark.slow
def test_the_thesis_schedule_dampens_the_network_while_the_drug_acts():
    """Section 8.5's run on a small grid: lambda_tau_e = 3 from step 4000 to 5000 lowers the excitatory firing
    and the mean potential (the EEG); both come back after step 5000."""
    model = CortexModel(L=64, k=100, r=8, seed=3, backend="numpy")
    rows = []
    run_batch(model, THESIS_TEST, 6000, on_rows=rows.append)
    rows = np.concatenate(rows)
    before, during, after = rows[3000:4000], rows[4100:5000], rows[5100:6000]
    assert during[:, 2].mean() < 0.9 * before[:, 2].mean()
    assert during[:, 1].mean() < before[:, 1].mean() - 0.3
    assert after[:, 2].mean() > 0.95 * before[:, 2].mean()
    assert abs(after[:, 1].mean() - before[:, 1].mean()) < 0.2
