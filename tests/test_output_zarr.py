"""Fields and observables to Zarr (sim/output/zarr_store.py): what xarray reads back, bit for bit, with
dimensions, units and provenance; refused suffixes and existing stores; appending; interrupted writers."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from latticelab.app.commands.main import main
from latticelab.sim.backend import to_numpy
from latticelab.sim.models import get_model

xr = pytest.importorskip("xarray")
pytest.importorskip("zarr")


def run_model(name, steps, **values):
    model = get_model(name).create(backend="numpy", **values)
    observed = []
    for _ in range(steps):
        model.step(1)
        observed.append(model.observables())
    return model, observed


def test_a_run_writes_fields_and_observables_that_xarray_opens(tmp_path):
    path = tmp_path / "run.zarr"
    assert main(["run", "ising", "--L", "16", "--T", "2.0", "--seed", "3", "--steps", "12", "--every", "4",
                 "--output", str(path), "--backend", "numpy"]) == 0
    ds = xr.open_zarr(path)
    assert ds.spins.dims == ("time", "x", "y") and ds.spins.dtype == np.int8
    assert ds.step.values.tolist() == [0, 4, 8, 12] and ds.time.values.tolist() == [0, 4, 8, 12]
    assert ds.x.attrs["units"] == "1" and ds.time.attrs["units"] == "1"
    assert ds.attrs["model"] == "ising" and ds.attrs["parameter_L"] == 16 and ds.attrs["parameter_T"] == 2.0
    assert ds.attrs["latticelab_version"] and ds.attrs["latticelab_commit"] and ds.attrs["Conventions"].startswith("CF")
    assert ds.energy.attrs["units"] == "J" and ds.series_step.values.tolist() == list(range(1, 13))
    # the same run in this process: the last snapshot bit for bit, every step's observables exactly
    model, observed = run_model("ising", 12, L=16, T=2.0, seed=3)
    assert np.array_equal(ds.spins.isel(time=-1).values, to_numpy(model.fields()["spins"]))
    for name in ("energy", "abs_magnetisation", "flipped_fraction"):
        assert ds[name].values.tolist() == [row[name] for row in observed]


def test_a_3d_field_has_dims_x_y_z_and_the_grid_spacing(tmp_path):
    path = tmp_path / "ch.zarr"
    assert main(["run", "cahn-hilliard", "--dim", "3", "--L", "8", "--dx", "0.5", "--steps", "2", "--every", "2",
                 "--output", str(path), "--backend", "numpy"]) == 0
    ds = xr.open_zarr(path)
    assert ds.phi.dims == ("time", "x", "y", "z") and ds.phi.shape == (2, 8, 8, 8)
    assert ds.x.values.tolist() == [0.5 * i for i in range(8)]
    assert ds.time.attrs["long_name"].startswith("simulated time") and np.isfinite(ds.free_energy.values).all()


@pytest.mark.parametrize("name", ["run.txt", "run"])
def test_an_unknown_suffix_is_refused_naming_the_known_ones(tmp_path, capsys, name):
    assert main(["run", "ising", "--L", "8", "--steps", "1", "--output", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(s in err for s in (".zarr", ".nwb", ".pvd", ".vtk"))
    assert not os.listdir(tmp_path)


def test_an_existing_store_is_kept_unless_overwrite(tmp_path, capsys):
    path = tmp_path / "run.zarr"
    args = ["run", "ising", "--L", "8", "--steps", "2", "--output", str(path), "--backend", "numpy"]
    assert main(args) == 0
    before = sorted(p.name for p in path.iterdir())
    assert main([*args, "--seed", "9"]) == 2 and "exists" in capsys.readouterr().err
    assert sorted(p.name for p in path.iterdir()) == before and xr.open_zarr(path).attrs["parameter_seed"] == 1
    assert main([*args, "--seed", "9", "--overwrite"]) == 0
    assert xr.open_zarr(path).attrs["parameter_seed"] == 9
    assert [p for p in os.listdir(tmp_path) if p != "run.zarr"] == []        # no temporary store left


def write_steps(writer, model, steps):
    for _ in range(steps):
        model.step(1)
        writer.series([model.time], [model.step_count], model.observables())
        if writer.due(model.step_count):
            writer.snapshot(model)


def test_a_resumed_run_appends_to_the_same_store(tmp_path):
    from latticelab.sim.output import open_output
    from latticelab.sim.io import OutputError
    path = tmp_path / "run.zarr"
    model = get_model("cortex").create(backend="numpy", **get_model("cortex").small_example)
    writer = open_output(path, model, every=3)
    write_steps(writer, model, 7)
    writer.close()
    writer = open_output(path, model, every=3, append=True)
    write_steps(writer, model, 5)
    writer.close()
    ds = xr.open_zarr(path)
    assert ds.step.values.tolist() == [3, 6, 9, 12] and ds.series_step.values.tolist() == list(range(1, 13))
    assert ds.v.attrs["units"] == "mV" and ds.time.attrs["units"] == "ms"
    assert np.array_equal(ds.v.isel(time=-1).values, to_numpy(model.fields()["v"]))
    with pytest.raises(OutputError, match="ends at step 12"):           # the store is ahead of this new model
        open_output(path, get_model("cortex").create(backend="numpy", **get_model("cortex").small_example),
                    append=True)
    with pytest.raises(OutputError, match="holds model 'cortex'"):
        open_output(path, get_model("ising").create(backend="numpy", L=8), append=True)


def test_a_writer_cut_off_mid_write_leaves_the_last_complete_write(tmp_path):
    """Data written after the last consolidation (a writer killed between the two) is invisible to readers and
    trimmed by the next append."""
    import zarr
    from latticelab.sim.output import open_output
    path = tmp_path / "run.zarr"
    model = get_model("ising").create(backend="numpy", L=8)
    writer = open_output(path, model, every=1)
    write_steps(writer, model, 3)
    writer.close()
    group = zarr.open_group(str(path), mode="r+", zarr_format=2, use_consolidated=False)
    group["spins"].resize((6, 8, 8))                  # a half-done append: the array grown, nothing committed
    assert xr.open_zarr(path).spins.shape == (3, 8, 8)
    writer = open_output(path, model, every=1, append=True)
    write_steps(writer, model, 1)
    writer.close()
    ds = xr.open_zarr(path)
    assert ds.spins.shape == (4, 8, 8) and ds.step.values.tolist() == [1, 2, 3, 4]
    assert np.array_equal(ds.spins.isel(time=-1).values, model.fields()["spins"])


def test_a_killed_run_leaves_a_readable_store(tmp_path):
    path = tmp_path / "run.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "latticelab", "run", "ising", "--L", "32", "--steps", "1000000",
                             "--every", "1", "--output", str(path), "--backend", "numpy"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (path / "step").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    ds = xr.open_zarr(path)
    assert ds.step.size >= 1 and ds.spins.shape[0] == ds.step.size and ds.time.size == ds.step.size
    assert ds.series_step.size == ds.energy.size
    assert set(np.unique(ds.spins.isel(time=-1).values)) <= {-1, 1}


def test_a_missing_library_is_named_with_its_extra(tmp_path, monkeypatch):
    import importlib.util
    from latticelab.sim.output import MissingExtra, open_output
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "zarr" else real(name, *a))
    with pytest.raises(MissingExtra, match=r"pip install 'latticelab\[io\]'") as caught:
        open_output(tmp_path / "x.zarr", get_model("ising").create(backend="numpy", L=8))
    assert "zarr" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.gpu
def test_snapshots_taken_on_the_gpu_while_it_steps_on_read_back_bit_for_bit(tmp_path):
    """Each snapshot is copied on the device and then to the host asynchronously while the next steps change
    the spins: what the store holds must be the spins at the snapshot's step."""
    from latticelab.sim.output import open_output
    model = get_model("ising").create(backend="cuda", L=512)
    writer = open_output(tmp_path / "gpu.zarr", model, every=3)
    kept = []
    for _ in range(30):
        model.step(1)
        writer.series([model.time], [model.step_count], model.observables())
        if writer.due(model.step_count):
            writer.snapshot(model)
            kept.append(to_numpy(model.fields()["spins"]).copy())
    writer.close()
    ds = xr.open_zarr(tmp_path / "gpu.zarr")
    assert ds.step.values.tolist() == list(range(3, 31, 3))
    for i, spins in enumerate(kept):
        assert np.array_equal(ds.spins.isel(time=i).values, spins)
