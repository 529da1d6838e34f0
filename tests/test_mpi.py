"""One run split over the processes of an MPI job (issue 40): the same bits as one process, states that move both
ways between them, and one-line refusals.

``mpirun -n 2 latticelab run <model> --distributed`` runs one slab per process. On the CPU each process holds a
NumPy slab whose kernels run under the CUDA emulator, the halos moved by MPI (sim/multidevice/mpi.py); the
reference is the same model in one process on one device: for Cahn-Hilliard the command itself (its NumPy twin
gives the emulated kernel's bits), for Ising the model with its CUDA kernels emulated (its NumPy reference
engine draws other random numbers). On the 2-GPU machine (marked gpu) each process drives one GPU and the
reference is the one-process run on one GPU.

The jobs need mpi4py, an MPI launcher (the ``mpi`` extra brings MPICH's, which .ci installs with the tests) and
a C++ compiler for the emulator; without one they skip and say which.
"""
from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy

from helpers import device_xp


def _launcher() -> str | None:
    """mpirun/mpiexec beside this Python (the mpich wheel's, in the virtual environment) or on PATH."""
    here = Path(sys.executable).parent
    for name in ("mpirun", "mpiexec"):
        if (here / name).exists():
            return str(here / name)
    return shutil.which("mpirun") or shutil.which("mpiexec")


def _needs_mpi() -> str:
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed (pip install 'latticelab[mpi]')")
    launcher = _launcher()
    if launcher is None:
        pytest.skip("no MPI launcher (mpirun or mpiexec); pip install 'latticelab[mpi]' brings MPICH's")
    return launcher


def _mpirun(tmp_path, *arguments, n: int = 2, timeout: float = 180) -> subprocess.CompletedProcess:
    """``mpirun -n n python -m latticelab run ARGS`` in tmp_path; Open MPI allowed to run as root (CI)."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe")
    command = [_needs_mpi(), "-n", str(n), sys.executable, "-m", "latticelab", "run", *arguments]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def _rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def emulated(monkeypatch):
    """Models in this process with their CUDA kernels run by the CPU emulator (the one-device reference)."""
    import latticelab.sim.backend as backend
    xp = device_xp("emulator")
    monkeypatch.setattr(backend, "select_backend", lambda name="auto": backend.Backend(xp, "numpy", "CPU", "test"))
    return xp


def test_a_two_process_ising_run_ends_in_the_one_device_state_and_its_state_continues_in_one_process(
        tmp_path, emulated):
    """Two processes (NumPy slabs, rewired edges across them) against the emulated one-device model: every CSV
    row, and the saved state bit for bit; that state then continues in one process as the one-device run does."""
    from latticelab.sim.models.ising.model import IsingModel
    from latticelab.sim.state import load_state
    values = dict(dim=2, L=64, p=0.05, T=2.3, algorithm="metropolis", seed=5)
    one = IsingModel(**values)            # first: the emulator's kernels are built once, in this process
    expected = []
    for _ in range(4):
        one.step(1)
        expected.append(one.observables())
    result = _mpirun(tmp_path, "ising", "--distributed", "--backend", "numpy", "--steps", "4", "--csv", "two.csv",
                     "--save-state", "two.npz", *[f"--{k.replace('_', '-')}={v}" for k, v in values.items()])
    assert result.returncode == 0, result.stderr
    assert "split over 2 MPI processes" in result.stderr and result.stderr.count("saved the state") == 1
    rows = _rows(tmp_path / "two.csv")
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4]
    for row, observed in zip(rows, expected):
        assert {k: float(row[k]) for k in observed} == observed
    saved = np.load(tmp_path / "two.npz")
    for name, value in one.get_state().items():
        np.testing.assert_array_equal(saved[name], to_numpy(value), err_msg=name)
    resumed = load_state(tmp_path / "two.npz", backend="numpy")     # one process, one device
    for model in (one, resumed):
        model.step(3)
    np.testing.assert_array_equal(to_numpy(resumed.spins), to_numpy(one.spins))
    assert resumed.observables() == one.observables()


def test_a_two_process_cahn_hilliard_run_continues_a_one_process_state_bit_for_bit(tmp_path, emulated):
    """A one-process run saves its state after 3 steps; two processes (mirror walls: each end slab fills its
    own images) load it and take 4 more: their CSV rows and saved state equal the one-process run of 7 steps."""
    from latticelab.app.commands.main import main
    common = ["cahn-hilliard", "--backend", "numpy", "--dim", "2", "--L", "32", "--dt", "0.01", "--seed", "3",
              "--boundary", "mirror"]
    device_xp("emulator")      # skip without a compiler, before anything runs
    assert main(["run", *common, "--steps", "3", "--save-state", str(tmp_path / "three.npz")]) == 0
    assert main(["run", *common, "--steps", "7", "--csv", str(tmp_path / "one.csv"),
                 "--save-state", str(tmp_path / "one.npz")]) == 0
    result = _mpirun(tmp_path, "cahn-hilliard", "--distributed", "--backend", "numpy", "--load-state", "three.npz",
                     "--steps", "4", "--csv", "two.csv", "--save-state", "two.npz")
    assert result.returncode == 0, result.stderr
    assert _rows(tmp_path / "two.csv") == _rows(tmp_path / "one.csv")[3:]
    one, two = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert sorted(one.files) == sorted(two.files)
    for name in one.files:
        np.testing.assert_array_equal(two[name], one[name], err_msg=name)


def test_distributed_runs_refuse_what_they_cannot_do_in_one_line(tmp_path, monkeypatch, capsys):
    from latticelab.app.commands.main import main
    from latticelab.sim.models import get_model
    from latticelab.sim.multidevice.devices import ProcessDevices, resolve_devices
    from latticelab.sim.multidevice.mpi import LAUNCHER_VARIABLES
    from latticelab.sim.params import ParameterError
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def error(*arguments) -> str:
        assert main(["run", *arguments]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        return err[0]

    if importlib.util.find_spec("mpi4py") is not None:
        assert "--distributed: this process was not started by an MPI launcher" in error("ising", "--distributed")
    monkeypatch.setitem(sys.modules, "mpi4py", None)         # as if not installed
    assert "install the extra: pip install 'latticelab[mpi]'" in error("ising", "--distributed")
    assert "--distributed: each process drives one device" in error("ising", "--distributed", "--devices", "0,1")
    assert "--record: not written by a --distributed run" in error("ising", "--distributed", "--record", "x.mp4")
    # a model that does not split over processes is refused by name (the job: two processes, this one rank 0)
    job = type("Job", (), {"rank": 0})()
    cortex = get_model("cortex")
    with pytest.raises(ParameterError, match="distributed: the cortex model .* runs in one process only"):
        resolve_devices(cortex, ProcessDevices((0, 1), job), None)


def test_load_state_refuses_parameters_and_another_models_file(tmp_path, capsys):
    from latticelab.app.commands.main import main
    state = tmp_path / "ising.npz"
    assert main(["run", "ising", "--backend", "numpy", "--L", "16", "--steps", "1", "--save-state", str(state)]) == 0
    capsys.readouterr()
    assert main(["run", "ising", "--load-state", str(state), "--T", "3"]) == 2
    assert "--T: the parameters come from the --load-state file" in capsys.readouterr().err
    assert main(["run", "cahn-hilliard", "--load-state", str(state)]) == 2
    assert f"--load-state: {state} holds a ising model; continue it with latticelab run ising" in \
        capsys.readouterr().err
    assert main(["run", "ising", "--backend", "numpy", "--load-state", str(state), "--steps", "2"]) == 0
    assert "step 3:" in capsys.readouterr().out


# ---- on the 2-GPU machine ----------------------------------------------------------------------------------------
GPU_RUNS = {"ising": ["--dim", "2", "--L", "1024", "--p", "0.01", "--algorithm", "metropolis", "--seed", "3"],
            "cahn-hilliard": ["--dim", "2", "--L", "512", "--seed", "3", "--boundary", "mirror"]}


@pytest.mark.gpu
@pytest.mark.parametrize("model, transport", [("ising", "nccl"), ("cahn-hilliard", "nccl"), ("ising", "host")])
def test_two_processes_on_two_gpus_end_in_the_one_gpu_state(tmp_path, model, transport, monkeypatch):
    """One process per GPU, halos by NCCL bootstrapped over MPI or staged through host memory: the saved state
    equals the one-process run's on one GPU (Ising with rewired edges across the slabs: its CSV rows too, the
    observables being integer sums; Cahn-Hilliard's free energy is summed in another order on one GPU)."""
    from latticelab.app.commands.main import main
    xp = device_xp("cuda")
    if xp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    monkeypatch.setenv("LATTICELAB_MPI_TRANSPORT", transport)
    arguments = [*GPU_RUNS[model], "--steps", "6", "--backend", "cuda"]
    assert main(["run", model, *arguments, "--csv", str(tmp_path / "one.csv"),
                 "--save-state", str(tmp_path / "one.npz")]) == 0
    result = _mpirun(tmp_path, model, "--distributed", *arguments, "--csv", "two.csv", "--save-state", "two.npz")
    assert result.returncode == 0, result.stderr
    assert f"halos by {transport}" in result.stderr
    if model == "ising":
        assert _rows(tmp_path / "two.csv") == _rows(tmp_path / "one.csv")
    one, two = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    for name in one.files:
        np.testing.assert_array_equal(two[name], one[name], err_msg=name)
