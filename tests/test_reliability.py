"""Issue 13, output side: files the application writes (atomic, umask, one-line errors naming the target),
headless runs interrupted by SIGINT/SIGTERM, the benchmark results writer, and the command line's -v and
parameter types."""
from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from latticelab.app.commands import main as cli
from latticelab.sim import io
from latticelab.sim.models import get_model
from latticelab.sim.params import ParameterError
from latticelab.sim.state import save_state

RUN = ["run", "ising", "--L", "8", "--steps", "2", "--backend", "numpy"]


def run_cli(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *words):
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("latticelab: error:")]
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], lines[0]
    assert ".part" not in lines[0]          # never the internal temporary name
    return lines[0]


# ---- 5: new files follow the umask ------------------------------------------------------------------
@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_written_files_follow_the_umask(tmp_path, mask, capsys):
    old = os.umask(mask)
    try:
        model = get_model("ising").create(backend="numpy", L=8)
        state = save_state(tmp_path / "s.npz", model)
        png = io.write_png(tmp_path / "p.png", np.zeros((4, 4, 3), np.uint8))
        assert cli.main([*RUN, "--csv", str(tmp_path / "r.csv")]) == 0
    finally:
        os.umask(old)
    for path in (state, png, tmp_path / "r.csv"):
        assert path.stat().st_mode & 0o777 == 0o666 & ~mask, path


# ---- 4: atomic outputs, interrupted runs ---------------------------------------------------------
def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")

    def fail(f):
        f.write("half a file")
        raise RuntimeError("stopped while writing")

    with pytest.raises(RuntimeError):
        io.write_atomic(target, fail, overwrite=True, binary=False)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def _start_run(tmp_path, csv: Path, *extra):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    err = open(tmp_path / "stderr.txt", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "latticelab", "run", "ising", "--L", "128", "--backend", "numpy",
                             "--steps", "1000000", "--csv", str(csv), "--overwrite", *extra],
                            stdout=subprocess.DEVNULL, stderr=err, env=env)
    _wait_for(proc, tmp_path, lambda: "Rewired Ising model" in (tmp_path / "stderr.txt").read_text())
    return proc, err


def _wait_for(proc, tmp_path, condition, timeout_s: float = 120):
    """Wait for ``condition`` while the run goes on (a busy machine makes it slow, never wrong)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr.txt").read_text()
        time.sleep(0.05)


def _streamed(tmp_path, csv: Path) -> int:
    """Bytes of the run's temporary CSV beside ``csv`` (0 while there is none)."""
    return sum(p.stat().st_size for p in tmp_path.glob(f".{csv.name}.*.part"))


def test_interrupted_run_keeps_the_old_csv_when_no_step_was_recorded(tmp_path):
    csv = tmp_path / "out.csv"
    csv.write_text("the previous results\n")
    proc, err = _start_run(tmp_path, csv, "--equilibrate", "1000000")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 128 + signal.SIGTERM
    text = (tmp_path / "stderr.txt").read_text()
    err.close()
    assert "Traceback" not in text
    assert "interrupted (SIGTERM) during equilibration after " in text
    assert "of 1000000 steps" in text and "out.csv was left as it was" in text
    assert csv.read_text() == "the previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "stderr.txt"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_run_streams_its_csv_and_an_interrupted_run_keeps_the_finished_rows(tmp_path, sig):
    """Issue 41, item 3: the rows go to the temporary file as they come (it grows while the run goes on: the
    memory does not), and an interrupted run moves the finished ones to --csv, saying how many."""
    csv = tmp_path / "out.csv"
    csv.write_text("the previous results\n")
    proc, err = _start_run(tmp_path, csv)
    _wait_for(proc, tmp_path, lambda: _streamed(tmp_path, csv) > 0)      # on disk before the run ends
    proc.send_signal(sig)
    assert proc.wait(60) == 128 + sig
    text = (tmp_path / "stderr.txt").read_text()
    err.close()
    assert "Traceback" not in text
    line, = [t for t in text.splitlines() if "interrupted" in t]
    assert f"interrupted ({signal.Signals(sig).name}) during recording after " in line
    steps = int(line.split(" during recording after ")[1].split()[0])
    assert f"the {steps} finished rows were written to {csv}" in line
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("step,") and len(rows) == steps + 1
    assert [int(r.split(",")[0]) for r in rows[1:]] == list(range(1, steps + 1))   # whole rows, in order
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "stderr.txt"]


def test_csv_is_complete_after_a_run(tmp_path, capsys):
    csv = tmp_path / "out.csv"
    csv.write_text("old\n")
    assert cli.main([*RUN, "--csv", str(csv), "--overwrite"]) == 0
    rows = csv.read_text().splitlines()
    assert len(rows) == 3 and rows[0].startswith("step,")


def test_benchmark_results_are_written_atomically(tmp_path):
    from latticelab.bench.report import write_results
    path = write_results("cpu", "CPU", [{"case": "a", "value": 1.0}], str(tmp_path), slug="CPU")
    before = Path(path).read_text()
    assert json.loads(before)["cases"][0]["case"] == "a"
    with pytest.raises(TypeError):      # a case that cannot be written: the previous results stay whole
        write_results("cpu", "CPU", [{"case": "b", "value": object()}], str(tmp_path), slug="CPU")
    assert Path(path).read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu-CPU.json"]


def test_benchmark_results_to_an_unusable_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    from latticelab.__main__ import main
    code = main(["bench", "cpu", "--L", "16", "--sweeps", "1", "--out", str(tmp_path / "file" / "sub")])
    one_line_error(code, capsys.readouterr().err, str(tmp_path / "file" / "sub"))


# ---- 8: one line, exit 2, for every output path ----------------------------------------------------
def test_csv_to_a_folder(tmp_path, capsys):
    code, out, err = run_cli([*RUN, "--csv", str(tmp_path)], capsys)
    one_line_error(code, err, str(tmp_path), "folder")
    code, out, err = run_cli([*RUN, "--csv", str(tmp_path), "--overwrite"], capsys)
    one_line_error(code, err, str(tmp_path), "folder")


def test_csv_in_a_missing_folder_is_refused_before_the_run(tmp_path, capsys):
    target = tmp_path / "no" / "such" / "out.csv"
    code, out, err = run_cli([*RUN, "--csv", str(target)], capsys)
    one_line_error(code, err, str(target), "does not exist")
    assert "Rewired Ising model" not in err        # checked before anything ran


def test_csv_to_a_device_or_pipe_is_refused_and_never_replaced(tmp_path, capsys):
    # A regression here would, as root with --overwrite, rename a regular file over the device node; so the
    # replaceable case uses a FIFO of our own and /dev/full is only named without --overwrite.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, out, err = run_cli([*RUN, "--csv", str(fifo), "--overwrite"], capsys)
    one_line_error(code, err, str(fifo), "not a regular file")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    code, out, err = run_cli([*RUN, "--csv", "/dev/full"], capsys)
    one_line_error(code, err, "/dev/full")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_csv_existing_without_overwrite(tmp_path, capsys):
    target = tmp_path / "out.csv"
    target.write_text("keep")
    code, out, err = run_cli([*RUN, "--csv", str(target)], capsys)
    one_line_error(code, err, str(target), "exists")
    assert target.read_text() == "keep"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_csv_in_a_read_only_folder(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        code, out, err = run_cli([*RUN, "--csv", str(folder / "out.csv")], capsys)
    finally:
        folder.chmod(0o700)
    one_line_error(code, err, str(folder / "out.csv"), "permission denied")


@pytest.mark.parametrize("where, code_, words", [
    ("mkstemp", errno.EROFS, "read-only"),
    ("mkstemp", errno.EACCES, "permission denied"),
    ("fsync", errno.ENOSPC, "no space left"),
    ("link", errno.EDQUOT, "quota"),
])
def test_csv_write_errors_are_one_line_naming_the_target(tmp_path, capsys, monkeypatch, where, code_, words):
    def fail(*args, **kwargs):
        raise OSError(code_, os.strerror(code_), "/some/.out.csv.xyz.part")
    target = {"mkstemp": (io.tempfile, "mkstemp"), "fsync": (io.os, "fsync"), "link": (io.os, "link")}[where]
    monkeypatch.setattr(*target, fail)
    csv = tmp_path / "out.csv"
    code, out, err = run_cli([*RUN, "--csv", str(csv)], capsys)
    one_line_error(code, err, str(csv), words)
    assert not csv.exists() and list(tmp_path.iterdir()) == []


def test_full_disk_while_writing_names_the_target(tmp_path, monkeypatch):
    def write(f):
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(io.OutputError) as info:
        io.write_atomic(tmp_path / "a.png", write)
    assert str(info.value) == f"{tmp_path / 'a.png'}: cannot write: no space left on the device"
    assert info.value.strerror == "no space left on the device"      # what the window shows after the path
    assert list(tmp_path.iterdir()) == []


def test_png_to_a_folder_names_it(tmp_path):
    with pytest.raises(io.OutputError, match="is a folder|it is a folder"):
        io.write_png(tmp_path, np.zeros((2, 2, 3), np.uint8), overwrite=True)


def test_existing_target_is_still_a_file_exists_error(tmp_path):
    (tmp_path / "a").write_text("x")
    with pytest.raises(FileExistsError):
        io.write_atomic(tmp_path / "a", lambda f: f.write(b"y"))


# ---- 11: -v anywhere, NumPy integers, bools ---------------------------------------------------------
@pytest.mark.parametrize("argv", [["-v", *RUN], [*RUN[:2], "-v", *RUN[2:]], [*RUN, "--verbose"]])
def test_verbose_anywhere(argv, capsys):
    assert cli.main(argv) == 0, capsys.readouterr().err


def test_numpy_integers_are_accepted_and_bools_refused():
    cls = get_model("ising")
    model = cls.create(backend="numpy", dim=np.int32(2), L=np.int64(8), seed=np.uint64(5), T=np.float32(2.0))
    assert (model.dim, model.L, model.seed) == (2, 8, 5)
    assert type(model.params.L) is int
    for field in ("T", "p"):
        with pytest.raises(ParameterError, match=f"^{field}: .*boolean"):
            cls.create(backend="numpy", L=8, **{field: True})
    with pytest.raises(ParameterError, match="^L: must be an integer"):
        cls.create(backend="numpy", L=16.9)


def test_an_internal_error_is_one_line_and_its_traceback_only_with_verbose(monkeypatch, capsys):
    from latticelab.sim.models.ising.model import IsingModel

    def broken(self, n=1):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(IsingModel, "step", broken)
    assert cli.main(RUN) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("latticelab: internal error: Zero")
    assert cli.main(["-v", *RUN]) == 1
    assert "Traceback" in capsys.readouterr().err


# ---- found by the property tests: tiny positive values ended in a traceback, not a named parameter ------
def test_subnormal_dx_is_named(capsys):
    code = cli.main(["run", "cahn-hilliard", "--backend", "numpy", "--L", "8", "--steps", "1", "--dx", "5e-324"])
    one_line_error(code, capsys.readouterr().err, "dx")


def test_subnormal_time_constant_factor_is_named(capsys):
    code = cli.main(["run", "cortex", "--backend", "numpy", "--L", "8", "--k", "2", "--r", "1", "--steps", "1",
                     "--lambda-tau-e", "5e-324"])
    one_line_error(code, capsys.readouterr().err, "lambda_tau_e")


# ---- 6 (part): the memory check respects ulimit -v ------------------------------------------------------
def test_memory_check_respects_the_address_space_limit(tmp_path):
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.RLIM_INFINITY))\n"
            "from latticelab.sim.memory import host_available_bytes\n"
            "assert host_available_bytes() <= 4 << 30, host_available_bytes()\n"
            "from latticelab.app.commands.main import main\n"
            "sys.exit(main(['run', 'ising', '--backend', 'numpy', '--L', '32768', '--steps', '1']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "L:" in proc.stderr and "GiB" in proc.stderr


def test_the_run_announces_itself_only_once_a_signal_ends_it_cleanly(monkeypatch, capsys):
    """A SIGTERM right after the run's first line (what a script waits for before it signals) killed the process
    without its message when that line came before the signal handlers: it is said inside them now."""
    from latticelab.app.commands import run as run_command
    from latticelab.app.commands.main import main
    handlers = {}

    def spy(text):
        handlers.setdefault(text.split()[0], signal.getsignal(signal.SIGTERM))
        print(f"latticelab: {text}", file=sys.stderr)

    monkeypatch.setattr(run_command, "say", spy)
    assert main(["run", "ising", "--L", "8", "--backend", "numpy", "--steps", "2"]) == 0
    assert handlers["Rewired"] not in (signal.SIG_DFL, signal.SIG_IGN, None)     # the header, under our handler
    assert "Rewired Ising model" in capsys.readouterr().err
