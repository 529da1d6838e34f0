"""app/kernel_cache.py: the models' GPU kernels compiled once per installation and GPU by a process of its own
(``latticelab prepare-gpu``), started by the window unless done or running."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from latticelab.app import kernel_cache
from latticelab.sim.backend import BackendError, select_backend
from latticelab.sim.models import all_models
from latticelab.sim.params import field_info


def _cuda_usable() -> bool:
    try:
        select_backend("cuda")
        return True
    except BackendError:
        return False


def test_the_window_starts_one_preparation_until_it_is_done(tmp_path):
    started = []
    start = lambda: kernel_cache.start_in_background("sm90-test", tmp_path, spawn=started.append)  # noqa: E731
    assert start()
    command = started[0]
    assert command[:3] == [sys.executable, "-m", "latticelab"] and command[3] == "prepare-gpu"
    marker = Path(command[command.index("--marker") + 1])
    assert marker.parent == tmp_path and "sm90-test" in marker.name
    running = marker.with_name(marker.name + ".running")
    assert running.exists()
    assert not start() and len(started) == 1          # one is running: a second window starts none
    old = time.time() - kernel_cache.RUNNING_FOR_AT_MOST_S - 60
    os.utime(running, (old, old))                     # left by a preparation that died
    assert start() and len(started) == 2
    running.unlink()
    marker.write_text("done\n")
    assert not start() and len(started) == 2          # done for this GPU and these kernels


def test_a_preparation_that_cannot_start_leaves_nothing_behind(tmp_path):
    def fail(command):
        raise OSError("no such interpreter")
    assert not kernel_cache.start_in_background("sm90-test", tmp_path, spawn=fail)
    assert list(tmp_path.iterdir()) == []             # no "running" file keeps the next window from trying


def test_every_variant_of_every_model_is_prepared():
    for name, cls in all_models().items():
        combos = kernel_cache.variants(cls)
        expected = 1
        for field in cls.Params.variant_fields:
            expected *= len(field_info(cls.Params, field)["choices"])
            assert {combo[field] for combo in combos} == set(field_info(cls.Params, field)["choices"])
        assert len(combos) == expected, name


@pytest.mark.skipif(_cuda_usable(), reason="checks the message given without a usable CUDA device")
def test_prepare_gpu_without_a_gpu_says_why(capsys):
    from latticelab.app.commands.main import main
    assert main(["prepare-gpu"]) == 2
    assert "backend 'cuda' is not usable" in capsys.readouterr().err


@pytest.mark.gpu
def test_prepare_gpu_compiles_every_model_into_the_cache_and_marks_it(tmp_path):
    marker = tmp_path / "marker"
    env = {**os.environ, "CUPY_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-m", "latticelab", "prepare-gpu", "--marker", str(marker)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    prepared = [line for line in run.stdout.splitlines() if ": prepared in " in line]
    assert len(prepared) == sum(len(kernel_cache.variants(cls)) for cls in all_models().values())
    assert marker.exists() and not marker.with_name("marker.running").exists()
    assert any((tmp_path / "cache").rglob("*.cubin"))      # what NVRTC compiled, for the window to load
