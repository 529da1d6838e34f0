"""Issues 14, 15, 16 (command-line part): what ``latticelab run <model>`` writes besides the observables --
--until, the models' own inputs and outputs (--initial and --pfhub-out for Cahn-Hilliard, --schedule and
--qeeg-out for the cortex, declared through Model.run_options), --record movies, the progress bar -- and
where ``bench cpu`` puts its results. Commands run in-process (cli.main) on tiny models."""
from __future__ import annotations

import csv
import io as text_io
import time
from pathlib import Path

import numpy as np
import pytest

from latticelab.app.commands import main as cli
from latticelab.sim.models import get_model

CH = ["run", "cahn-hilliard", "--backend", "numpy"]
PFHUB = [*CH, "--preset", "pfhub-1a", "--L", "20"]          # the benchmark's 200 x 200 domain on 20 x 20 cells
CORTEX = ["run", "cortex", "--backend", "numpy", "--L", "8", "--k", "4", "--r", "2"]


def run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *words):
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("latticelab: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def read_csv(path) -> dict[str, np.ndarray]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    data = np.array(rows[1:], dtype=np.float64)
    return {name: data[:, i] for i, name in enumerate(rows[0])}


# ---- Cahn-Hilliard: --until, --pfhub-out, --initial -------------------------------------------------------
def test_until_lands_on_the_time_and_pfhub_series_conserves_mass(tmp_path, capsys):
    out = tmp_path / "pfhub.csv"
    code, stdout, err = run([*PFHUB, "--until", 20, "--pfhub-out", out, "--csv", tmp_path / "obs.csv"], capsys)
    assert code == 0, err
    series = read_csv(out)
    assert list(series) == ["time", "free_energy", "mass"]
    assert series["time"][0] == 0 and series["time"][-1] == 20.0          # the last step shortened onto T
    assert np.all(np.diff(series["time"]) > 0)
    # c = 0.5 + 0.2 phi is conserved; the free energy never increases (no noise), PFHub's F = ours + 320
    np.testing.assert_allclose(series["mass"], series["mass"][0], rtol=1e-12)
    assert np.all(np.diff(series["free_energy"]) <= 1e-9 * abs(series["free_energy"][0]))
    from latticelab.sim.models.cahn_hilliard.pfhub import pfhub_free_energy
    fresh = get_model("cahn-hilliard").create(backend="numpy", preset="pfhub-1a", L=20)
    assert series["free_energy"][0] == pytest.approx(pfhub_free_energy(fresh), rel=1e-12)
    assert series["free_energy"][-1] < series["free_energy"][0] - 1
    observables = read_csv(tmp_path / "obs.csv")              # one row per step, the same steps
    np.testing.assert_array_equal(observables["simulated_time"], series["time"][1:])
    np.testing.assert_allclose(observables["free_energy"] + 320, series["free_energy"][1:], rtol=1e-12)
    assert "simulated time 20" in stdout


def test_pfhub_series_needs_the_preset(tmp_path, capsys):
    code, _, err = run([*CH, "--L", "8", "--steps", "2", "--pfhub-out", tmp_path / "p.csv"], capsys)
    one_line_error(code, err, "--pfhub-out", "--preset pfhub-1a")
    assert list(tmp_path.iterdir()) == []


def test_initial_field_is_used(tmp_path, capsys):
    field = np.random.default_rng(4).uniform(-0.2, 0.3, (16, 16))
    np.save(tmp_path / "phi.npy", field)
    code, _, err = run([*CH, "--L", "16", "--dx", "0.5", "--steps", "3", "--initial", tmp_path / "phi.npy",
                        "--csv", tmp_path / "obs.csv"], capsys)
    assert code == 0, err
    mass = read_csv(tmp_path / "obs.csv")["mass"]
    np.testing.assert_allclose(mass, field.sum() * 0.5 ** 2, rtol=1e-12)   # the file's mass, kept by every step


def _damaged(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.npy"
    if kind == "shape":
        np.save(path, np.zeros((8, 8)))
    elif kind == "nan":
        field = np.zeros((16, 16))
        field[3, 5] = np.inf
        np.save(path, field)
    elif kind == "text":
        np.save(path, np.full((16, 16), "a"))
    elif kind == "junk":
        path.write_bytes(b"not an array")
    elif kind == "truncated":
        np.save(path, np.zeros((16, 16)))
        path.write_bytes(path.read_bytes()[:300])
    elif kind == "npz":
        path = tmp_path / "field.npz"
        np.savez(path, phi=np.zeros((16, 16)))
    return path


@pytest.mark.parametrize("kind, words", [("shape", ["(8, 8)", "(16, 16)"]), ("nan", ["non-finite"]),
                                         ("text", ["real numbers"]), ("junk", [".npy header"]),
                                         ("truncated", ["not a readable .npy"]), ("npz", [".npz archive"]),
                                         ("missing", ["cannot read"])])
def test_a_damaged_initial_file_is_refused_naming_the_option(tmp_path, capsys, kind, words):
    path = _damaged(tmp_path, kind) if kind != "missing" else tmp_path / "missing.npy"
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run([*CH, "--L", "16", "--steps", "2", "--initial", path, "--csv", tmp_path / "o.csv"], capsys)
    one_line_error(code, err, "--initial", path.name, *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == before          # nothing written


@pytest.mark.parametrize("argv, words", [(["--steps", "3", "--until", "1"], ["--steps or --until"]),
                                         (["--until", "-1"], ["--until", "> 0"]),
                                         (["--until", "nan"], ["--until"]),
                                         (["--steps", "-2"], ["--steps"]),
                                         (["--record", "m.mp4", "--fps", "0"], ["--fps"]),
                                         (["--record", "m.mp4", "--record-every", "0"], ["--record-every"])])
def test_bad_run_lengths_and_movie_options_are_named(tmp_path, capsys, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    code, _, err = run([*CH, "--L", "8", *argv], capsys)
    one_line_error(code, err, *words)
    assert list(tmp_path.iterdir()) == []


# ---- cortex: --schedule and --qeeg-out -----------------------------------------------------------------------
SCHEDULE = """
[[change]]
step = 0
I_e = 4.0
n_e = 5.0

[[change]]
step = 300
lambda_tau_e = 3.0
"""


def test_schedule_and_qeeg_output_equal_the_library_run(tmp_path, capsys):
    (tmp_path / "s.toml").write_text(SCHEDULE)
    steps = 1100                                     # one periodogram (1024 samples), updated at 1024
    code, _, err = run([*CORTEX, "--steps", steps, "--schedule", tmp_path / "s.toml", "--qeeg-out",
                        tmp_path / "q.csv", "--csv", tmp_path / "eeg.csv"], capsys)
    assert code == 0, err
    eeg = read_csv(tmp_path / "eeg.csv")["eeg"]
    # the same run through the library's batch runner (sim/models/cortex/batch.py: chunks between the
    # schedule's steps, the EEG copied from the device trace, its own periodogram)
    from latticelab.sim.models.cortex.batch import run_batch
    from latticelab.sim.models.cortex.schedule import parse_schedule
    model = get_model("cortex").create(backend="numpy", L=8, k=4, r=2)
    rows, updates = [], []
    run_batch(model, parse_schedule(SCHEDULE, type(model.params)), steps, on_rows=rows.append,
              on_qeeg=lambda t, m: updates.append((t, m)))
    assert model.params.lambda_tau_e == 3.0
    np.testing.assert_array_equal(eeg, np.concatenate(rows)[:, 1])
    qeeg = read_csv(tmp_path / "q.csv")
    assert qeeg["time_ms"].tolist() == [t for t, _ in updates] == [1024.0]
    for name, value in updates[0][1].items():
        assert qeeg[name][0] == pytest.approx(value, rel=1e-12, abs=1e-15), name


def test_a_bad_schedule_names_the_option_and_the_line_and_runs_nothing(tmp_path, capsys):
    (tmp_path / "bad.toml").write_text("[[change]]\nstep = 3\nL = 5\n")
    code, _, err = run([*CORTEX, "--steps", "5", "--schedule", tmp_path / "bad.toml", "--csv",
                        tmp_path / "o.csv"], capsys)
    one_line_error(code, err, "--schedule", "bad.toml", "line 3", "L")
    assert not (tmp_path / "o.csv").exists()


def test_too_short_a_run_for_qeeg_says_so(tmp_path, capsys):
    code, _, err = run([*CORTEX, "--steps", "10", "--qeeg-out", tmp_path / "q.csv"], capsys)
    assert code == 0, err
    assert (tmp_path / "q.csv").read_text().startswith("time_ms,sen,ppf,mpf,")
    assert "10 EEG samples" in err and "1024" in err


def test_the_cli_never_names_a_model():
    from latticelab.sim import headless
    commands = Path(cli.__file__).parent    # the commands that run any model, and the headless loop
    sources = [*(commands / name for name in ("main.py", "options.py", "run.py", "gui.py")), Path(headless.__file__)]
    for path in sources:
        source = path.read_text()
        for name in ("cahn", "cortex", '"ising"', "pfhub", "qeeg", "schedule"):
            assert name not in source.lower(), (path.name, name)


# ---- --record: movies of headless runs -------------------------------------------------------------------
def test_recorded_movie_has_one_frame_every_n_steps(tmp_path, capsys):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    movie = tmp_path / "ising.mp4"
    code, _, err = run(["run", "ising", "--backend", "numpy", "--L", "16", "--steps", "10", "--record", movie,
                        "--record-every", "3", "--fps", "12"], capsys)
    assert code == 0, err
    frames, _seconds = imageio_ffmpeg.count_frames_and_secs(str(movie))
    assert frames == 4                                   # steps 0, 3, 6, 9
    reader = imageio_ffmpeg.read_frames(str(movie))
    meta = next(reader)
    assert meta["size"] == (16, 16) and meta["fps"] == pytest.approx(12)
    assert "recorded 4 frames at 12 fps" in err
    assert [p.name for p in tmp_path.iterdir()] == ["ising.mp4"]


def test_png_frames_are_the_model_picture_at_cell_resolution(tmp_path, capsys):
    import imageio.v3 as iio
    code, _, err = run(["run", "ising", "--backend", "numpy", "--L", "12", "--seed", "7", "--steps", "4",
                        "--record", tmp_path / "frames", "--record-every", "2"], capsys)
    assert code == 0, err
    files = sorted((tmp_path / "frames").iterdir())
    assert [p.name for p in files] == ["frame-000000.png", "frame-000001.png", "frame-000002.png"]
    model = get_model("ising").create(backend="numpy", L=12, seed=7)
    for path in files:
        np.testing.assert_array_equal(iio.imread(path), model.picture().colours()[..., :3])
        model.step(2)


def test_an_existing_movie_is_kept_without_overwrite(tmp_path, capsys):
    movie = tmp_path / "keep.mp4"
    movie.write_bytes(b"precious")
    code, _, err = run(["run", "ising", "--backend", "numpy", "--L", "8", "--steps", "2", "--record", movie], capsys)
    one_line_error(code, err, "keep.mp4", "exists")
    assert movie.read_bytes() == b"precious" and [p.name for p in tmp_path.iterdir()] == ["keep.mp4"]


# ---- progress bar -------------------------------------------------------------------------------------------
class Terminal(text_io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_with_time_left_only_on_a_terminal(monkeypatch, capsys):
    argv = [*CH, "--L", "8", "--until", "0.5"]
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert cli.main(argv) == 0
    shown = terminal.getvalue()
    assert "recording:" in shown and "100%" in shown and "simulated time" in shown and "<" in shown
    monkeypatch.undo()
    assert cli.main([*argv, "--equilibrate", "3"]) == 0
    err = capsys.readouterr().err
    assert "%|" not in err and "recording:" not in err        # not a terminal: no bar


# ---- bench cpu writes where the other benchmarks do ----------------------------------------------------------
def test_bench_cpu_results_go_to_bench_results_from_any_folder(tmp_path, monkeypatch):
    from latticelab.bench.cli import RESULTS_DIR, add_bench_command
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser((add_bench_command,)).parse_args(["bench", "cpu"])
    assert Path(args.out) == RESULTS_DIR and RESULTS_DIR.is_absolute()
    assert RESULTS_DIR == Path(cli.__file__).resolve().parents[2] / "bench" / "results"
    assert (RESULTS_DIR / "cpu-CPU.json").exists()


def test_a_run_writes_every_frame_even_when_the_encoder_is_behind(tmp_path, capsys, monkeypatch):
    """Issue 41, item 5: the headless run dropped frames when its writer fell behind (175 of 301 at L = 256)
    and exited 0. An encoder far slower than the steps (here each frame takes 20 ms to write) must still get
    every frame asked for: the initial one and one a step."""
    from latticelab.sim import recording
    real_fit = recording.fit

    def slow_fit(frame, height, width):
        time.sleep(0.02)
        return real_fit(frame, height, width)

    monkeypatch.setattr(recording, "fit", slow_fit)
    frames = tmp_path / "frames"
    code, _, err = run(["run", "ising", "--backend", "numpy", "--L", "8", "--steps", "40", "--record", frames],
                       capsys)
    assert code == 0, err
    assert len(list(frames.glob("frame-*.png"))) == 41
    assert "recorded 41 frames" in err and "dropped" not in err


def test_an_interrupted_run_leaves_no_movie_and_keeps_the_finished_rows(tmp_path, capsys, monkeypatch):
    import signal

    from latticelab.sim.headless import Interrupted
    from latticelab.sim.models.ising.model import IsingModel
    real_step, calls = IsingModel.step, []

    def step_then_interrupt(self, n=1):
        calls.append(n)
        if len(calls) == 6:                      # as SIGINT does, between two steps of the recording
            raise Interrupted(signal.SIGINT)
        return real_step(self, n)

    monkeypatch.setattr(IsingModel, "step", step_then_interrupt)
    code, _, err = run(["run", "ising", "--backend", "numpy", "--L", "8", "--steps", "50", "--record",
                        tmp_path / "m.mp4", "--csv", tmp_path / "o.csv"], capsys)
    assert code == 128 + signal.SIGINT
    assert "interrupted (SIGINT) during recording after 5 of 50 steps" in err
    assert "the 5 finished rows were written to" in err and "the recording" in err and "was not kept" in err
    assert [p.name for p in tmp_path.iterdir()] == ["o.csv"]        # no movie, no temporary file
    assert len((tmp_path / "o.csv").read_text().splitlines()) == 1 + 5
