"""`latticelab bench cahn-hilliard` and `latticelab bench cortex` in their CPU smoke mode (--backend numpy
--small): the whole code path of each benchmark (model timing, the plain baselines on NumPy, bandwidth
estimates, the PFHub run, the JSON through bench/report.py) through the application's command line."""
import json

import pytest

from latticelab.__main__ import main as latticelab_main


def _run(tmp_path, bench, *extra):
    out = tmp_path / "results"
    code = latticelab_main(["bench", bench, "--backend", "numpy", "--small", "--repeats", "1",
                            "--out-dir", str(out), "--commit", "test123", *extra])
    assert code == 0
    doc = json.loads((out / f"{bench}-CPU.json").read_text())
    assert doc["commit"] == "test123" and doc["device"].startswith("CPU")
    assert set(doc) >= {"command", "commit", "date", "device", "cases"}
    return {c["case"]: c for c in doc["cases"]}


def _check_baseline(case):
    assert case["metric"] == "steps_per_s"
    assert case["value"] > 0 and case["baseline_value"] > 0
    assert case["ratio"] == pytest.approx(case["value"] / case["baseline_value"], rel=0.02, abs=0.01)
    assert case["target_met"] is None                       # --small: sizes are not the targets' sizes
    d = case["details"]
    assert d["bytes_per_step"] > 0 and d["copy_bandwidth_TBps"] > 0
    assert d["bandwidth_fraction"] == pytest.approx(
        d["bytes_per_step"] * case["value"] / (d["copy_bandwidth_TBps"] * 1e12), rel=0.05, abs=1e-4)


def test_cahn_hilliard_bench_smoke(tmp_path, capsys):
    cases = _run(tmp_path, "cahn-hilliard")
    expected = ["cahn-hilliard-2d-L32-fd", "cahn-hilliard-3d-L12-fd", "cahn-hilliard-2d-L32-spectral",
                "cahn-hilliard-3d-L12-spectral", "pfhub-1a-L50-t100"]
    assert list(cases) == expected
    for name in expected[:4]:
        case = cases[name]
        _check_baseline(case)
        d = case["details"]
        assert d["finite"] and d["precision"] == "single"
        # the plain baseline computes the same step as the model (float32 round-off)
        assert d["baseline_max_abs_difference_after_one_step"] < 1e-5
        assert case["baseline"] == ("plain-roll-rk2" if name.endswith("-fd") else "plain-unfused-fft")
    assert cases["cahn-hilliard-2d-L32-spectral"]["details"]["simulated_time_ratio_vs_fd"] > 0
    pfhub = cases["pfhub-1a-L50-t100"]
    assert pfhub["metric"] == "seconds" and pfhub["value"] > 0 and "baseline" not in pfhub
    assert pfhub["details"]["final_time"] == pytest.approx(100.0)
    energy = pfhub["details"]["free_energy_pfhub"]
    assert energy["0"] > energy["100"] > 0                  # PFHub F(0) ~ 319 falls as the phases separate
    out = capsys.readouterr().out
    assert "target >= 3000" in out and "target <= 30" in out and "n/a (small)" in out


def test_cahn_hilliard_bench_selects_cases(tmp_path):
    cases = _run(tmp_path, "cahn-hilliard", "--cases", "fd-2d,spectral-3d", "--skip-pfhub")
    assert list(cases) == ["cahn-hilliard-2d-L32-fd", "cahn-hilliard-3d-L12-spectral"]


def test_cortex_bench_smoke(tmp_path, capsys):
    cases = _run(tmp_path, "cortex")
    assert list(cases) == ["cortex-N2^8-k10", "cortex-N2^10-k10"]
    for case in cases.values():
        _check_baseline(case)
        d = case["details"]
        assert case["baseline"] == "plain-unfused-xp" and d["baseline_finite"]
        assert 0 <= d["baseline_firing_e"] <= 1 and 0 <= d["active_receiver_fraction"] <= 1
        moved = d["bytes_per_neuron_per_step"]
        assert moved["phase2_sources"] == 4 * d["k"]
        assert moved["total"] == pytest.approx(moved["phase1"] + moved["phase2_sources"] + moved["phase2_data"]
                                               + moved["phase2_ring"], abs=0.02)
        assert d["bytes_per_step"] == pytest.approx(moved["total"] * d["N"], rel=1e-3, abs=1)
    out = capsys.readouterr().out
    assert "target >= 4000" in out and "target >= 1000" in out


def test_bench_refuses_unknown_case(tmp_path, capsys):
    code = latticelab_main(["bench", "cortex", "--backend", "numpy", "--small", "--cases", "nope",
                            "--out-dir", str(tmp_path)])
    assert code == 2 and "no case starts with 'nope'" in capsys.readouterr().out
