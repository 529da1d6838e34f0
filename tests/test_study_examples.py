"""Studies of every model (issue 42): the examples in examples/studies parse in their full and quick forms and
their quick forms run (what CI runs); the 2D Binder example's T_c interval holds Onsager's exact value; the
timeline applies a schedule when its time comes; every model that declares the study capability can be
studied through the same generic code."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from latticelab.sim.studies import load_study, parse_study
from latticelab.sim.studies.sweep import run_sweep

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "studies"
ONSAGER = 2.0 / math.log(1.0 + math.sqrt(2.0))          # 2.269185...


def table(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("name", ["ising-binder-2d", "cortex-anaesthesia", "cahn-hilliard-coarsening",
                                  "cortex-lambda-scan-gpu"])
def test_the_examples_parse_in_both_forms(name):
    full, quick = load_study(EXAMPLES / f"{name}.toml"), load_study(EXAMPLES / f"{name}.toml", quick=True)
    assert 0 < len(quick.points) < len(full.points) or quick.points[0].measurements < full.points[0].measurements
    assert quick.measures == full.measures


@pytest.mark.timeout(900)
def test_the_2d_binder_quick_example_brackets_onsagers_t_c(tmp_path):
    pytest.importorskip("distributed")
    from latticelab.sim.studies.tc import analyse, load_rows, validate_rows
    study = load_study(EXAMPLES / "ising-binder-2d.toml", quick=True)
    assert sorted({p.values["L"] for p in study.points}) == [8, 16, 32]
    result = run_sweep(study, tmp_path / "binder.csv", progress=False, workers=2)     # both of CI's cores
    assert result.done == len(study.points) and not result.failed
    rows, notes = validate_rows(load_rows(tmp_path / "binder.csv"))
    assert not notes
    (found,) = analyse(rows, n_boot=300)
    lo, hi = found.interval                         # 2 sigma, the finite-size systematic included
    assert lo <= ONSAGER <= hi, (found.T_c, found.T_c_err, found.T_c_sys)
    assert hi - lo < 0.16                           # and it says something: narrower than +-0.08


@pytest.mark.timeout(600)
def test_the_cortex_quick_example_gives_qeeg_on_both_branches(tmp_path):
    study = load_study(EXAMPLES / "cortex-anaesthesia.toml", quick=True)
    run_sweep(study, tmp_path / "cortex.csv", progress=False)
    rows = table(tmp_path / "cortex.csv")
    stages = [(r["branch"], float(r["lambda_tau_e"])) for r in rows]
    assert stages == [("up", 1.0), ("up", 2.0), ("up", 3.0), ("down", 2.0), ("down", 1.0)]
    for r in rows:
        assert 0 < float(r["spectral_entropy"]) <= 1 and float(r["spectral_entropy_err"]) > 0
        assert 0 < float(r["sef95"]) <= 65 and float(r["rate_e"]) > 0


def test_the_cahn_hilliard_quick_example_fits_a_coarsening_exponent(tmp_path):
    study = load_study(EXAMPLES / "cahn-hilliard-coarsening.toml", quick=True)
    run_sweep(study, tmp_path / "ch.csv", progress=False)
    rows = table(tmp_path / "ch.csv")
    assert [float(r["phi0"]) for r in rows] == [0.0, 0.2]
    for r in rows:
        # early coarsening on a small grid: a power law, of the order of Lifshitz-Slyozov's 1/3
        assert 0.1 < float(r["coarsening_exponent"]) < 0.6 and 0 < float(r["coarsening_exponent_err"]) < 0.1
        assert float(r["final_length"]) > 0


# ---- the generic machinery ------------------------------------------------------------------------------------
class Clock:
    """A stand-in model: time grows by ``dt`` a step; ``update`` records when it was called."""

    def __init__(self, dt):
        self.dt, self.time, self.calls = dt, 0.0, []

    def step(self, n=1):
        self.time += n * self.dt

    def update(self, **changes):
        self.calls.append((round(self.time, 9), changes))


@pytest.mark.parametrize("dt", [1.0, 0.25, 0.1])
def test_the_timeline_applies_each_change_when_its_time_comes(dt):
    from latticelab.sim.studies.timeline import Timeline
    clock = Clock(dt)
    line = Timeline(clock, [(0.0, (("a", 1),)), (4.0, (("a", 3),)), (5.0, (("a", 1),))])
    assert clock.calls == [(0.0, {"a": 1})]
    line.advance(3.0)
    assert clock.time == pytest.approx(3.0) and len(clock.calls) == 1
    line.advance(10.0)
    assert clock.time == pytest.approx(13.0)
    assert clock.calls[1:] == [(4.0, {"a": 3}), (5.0, {"a": 1})]


def test_every_model_with_the_capability_is_studied_by_the_same_code():
    from latticelab.sim.models import all_models
    from latticelab.sim.studies.capability import all_measures, capability
    for name, cls in all_models().items():
        if capability(cls) is None:
            continue
        measures = all_measures(cls)
        text = (f'model = "{name}"\n[parameters]\n' + "".join(f"{k} = {v!r}\n".replace("'", '"')
                                                                 for k, v in cls.small_example.items())
                + "[run]\nequilibrate = 1\ndecorrelate = 1\nmeasurements = 4\nrepeats = 2\n")
        study = parse_study(text, f"{name}.toml")
        assert len(study.points) == 2 and set(study.measures) <= set(measures)


def test_a_schedule_and_a_ramp_name_a_parameter_that_is_not_live():
    text = ('model = "cahn-hilliard"\n[grid]\nL = [8]\n[run]\nequilibrate = 1\ndecorrelate = 1\nmeasurements = 4\n'
            '[[schedule]]\nat = 2\nL = 16\n[ramp]\nparameter = "dim"\nvalues = [2, 3]\n')
    with pytest.raises(Exception) as info:
        parse_study(text, "s.toml")
    message = str(info.value)
    assert "2 problems" in message
    assert "schedule[1].L (line 8): is not a live parameter of cahn-hilliard" in message
    assert "ramp.parameter (line 12): must be a live parameter of cahn-hilliard" in message


def test_every_problem_of_every_section_is_reported_at_once():
    text = ('model = "cortex"\n[grid]\nL = [4]\nlambda_tau_e = [1.0]\n[ramp]\nparameter = "lambda_tau_e"\n'
            'values = [1]\n[run]\nequilibrate = -1\ndecorrelate = 1\nmeasurements = 4\nblocks = 9\n'
            '[[schedule]]\nat = -3\nk = 4\n')
    with pytest.raises(Exception) as info:
        parse_study(text, "bad.toml")
    assert [(key, line) for key, line, _ in info.value.problems] == [
        ("run.equilibrate", 9), ("run.blocks", 12), ("schedule[1].at", 13), ("schedule[1].k", 13),
        ("ramp.parameter", 6), ("ramp.values", 7)]
