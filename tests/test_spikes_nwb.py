"""Spike trains of the cortex (sim/models/cortex/spikes.py, kernels/spikes.cu) and the NWB file they go to
(sim/output/nwb.py), read back by pynwb."""
import numpy as np
import pytest

from helpers import DEVICES, device_xp
from latticelab.sim.backend import to_numpy
from latticelab.sim.models.cortex.engines import CudaPhases
from latticelab.sim.models.cortex.model import CortexModel
from latticelab.sim.models.cortex.spikes import CudaSpikes, NumpySpikes
from latticelab.sim.params import ParameterError


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("band, capacity", [(None, 1 << 12), (range(37, 290), 600), ((0, 1), 1)])
def test_the_compaction_kernel_records_what_its_numpy_twin_records(device, band, capacity):
    """Random fired flags (bit 0; bit 1 the type, to be ignored) over steps that span several batches."""
    xp = device_xp(device)
    n, rng = 300, np.random.default_rng(7)
    kernel, twin = CudaSpikes(xp, n, band, capacity=capacity), NumpySpikes(n, band)
    for step in range(5, 17):
        data = (rng.random(n) < 0.4).astype(np.uint8) | (rng.integers(0, 2, n).astype(np.uint8) << 1)
        kernel.record(xp.asarray(data), step)
        twin.record(data, step)
    got, want = kernel.spikes(), twin.spikes()
    assert want[0].size > 0
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_the_twin_keeps_the_band_s_fired_neurons_in_order():
    data = np.array([1, 0, 3, 2, 1, 1], np.uint8)       # bit 0: fired (3 = fired inhibitory, 2 = silent inhibitory)
    twin = NumpySpikes(6, range(1, 5))
    twin.record(data, 9)
    steps, indices = twin.spikes()
    assert steps.tolist() == [9, 9] and indices.tolist() == [2, 4]


@pytest.mark.parametrize("band", [range(0, 0), range(0, 10, 2), (5, 300), "all"])
def test_a_bad_band_is_refused_naming_neurons(band):
    with pytest.raises(ParameterError, match="neurons"):
        NumpySpikes(256, band)


@pytest.mark.parametrize("device", ["numpy", *DEVICES])
def test_the_model_records_every_spike_of_each_step(device):
    """The spikes of each step are the neurons the model reports as fired, and their counts per type give the
    firing fractions the model's own reduction computes (phase 1's sums)."""
    params = dict(L=16, k=10, r=4, seed=2, I_e=4.0)
    model = CortexModel(backend="numpy", **params) if device == "numpy" else \
        CortexModel(backend="numpy", phases=CudaPhases(device_xp(device)), **params) if device == "emulator" else \
        CortexModel(backend="cuda", **params)
    inhibitory = (to_numpy(model.state.data) >> 1).astype(bool)
    model.step(3)                                   # before the recording: not recorded
    model.record_spikes()
    fired, fractions = {}, {}
    for _ in range(40):
        model.step(1)
        fired[model.step_count] = np.flatnonzero(to_numpy(model.fired).reshape(-1))
        fractions[model.step_count] = model.observables()
    recording = model.stop_recording_spikes()
    steps, indices = recording.spikes()
    assert steps.min() == 4 and steps.max() <= 43 and sum(len(v) for v in fired.values()) == steps.size > 0
    for step, want in fired.items():
        got = indices[steps == step]
        assert got.tolist() == want.tolist()
        assert np.count_nonzero(~inhibitory[got]) / np.count_nonzero(~inhibitory) == pytest.approx(
            fractions[step]["firing_e"], abs=1e-12)
        assert np.count_nonzero(inhibitory[got]) / np.count_nonzero(inhibitory) == pytest.approx(
            fractions[step]["firing_i"], abs=1e-12)
    model.step(2)
    assert recording.spikes()[0].size == steps.size                # stopped: nothing more


def test_kernel_and_numpy_models_record_the_same_spike_trains():
    xp = device_xp("emulator")
    params = dict(L=16, k=10, r=4, seed=4, I_e=4.0)
    models = [CortexModel(backend="numpy", **params), CortexModel(backend="numpy", phases=CudaPhases(xp), **params)]
    trains = []
    for model in models:
        model.record_spikes(range(40, 200))
        model.advance(25)
        trains.append(model.stop_recording_spikes().spikes())
    assert trains[0][0].size > 0
    assert np.array_equal(trains[0][0], trains[1][0]) and np.array_equal(trains[0][1], trains[1][1])


def test_a_cortex_run_writes_an_nwb_file_that_pynwb_reads(tmp_path):
    pynwb = pytest.importorskip("pynwb")
    from latticelab.app.cli import main
    schedule = tmp_path / "drug.toml"
    schedule.write_text("[[change]]\nstep = 20\nlambda_A_e = 1.5\n")
    path = tmp_path / "run.nwb"
    params = dict(L=16, k=10, r=4, seed=2, I_e=4.0)
    assert main(["run", "cortex", *[f"--{k.replace('_', '-')}={v}" for k, v in params.items()], "--steps", "60",
                 "--schedule", str(schedule), "--output", str(path), "--backend", "numpy"]) == 0
    # the same run in this process, recording the spikes directly
    from latticelab.sim.models.cortex.schedule import read_schedule
    model = CortexModel(backend="numpy", **params)
    plan = read_schedule(schedule, type(model.params), base=model.params)
    model.record_spikes()
    eeg = []
    for _ in range(60):
        plan.apply(model)
        model.step(1)
        eeg.append(model.observables()["eeg"])
    steps, indices = model.stop_recording_spikes().spikes()
    with pynwb.NWBHDF5IO(str(path), "r") as io:
        nwb = io.read()
        units = nwb.units
        assert len(units) == 256 and units.id[:].tolist() == list(range(256))
        for neuron in (0, 17, 255):
            want = np.sort(steps[indices == neuron]) / 1000.0
            assert np.array_equal(np.asarray(units["spike_times"][neuron]), want)
        assert units["x"][17] == 1 and units["y"][17] == 1
        series = nwb.acquisition["eeg"]
        assert series.unit == "volts" and series.conversion == 1e-3
        assert np.array_equal(series.data[:], eeg) and np.allclose(series.timestamps[:], np.arange(1, 61) / 1000.0)
        assert nwb.acquisition["firing_e_rate"].unit == "Hz"
        assert "lambda_A_e = 1.5" in nwb.protocol and '"parameter_L": 16' in nwb.notes


def test_nwb_output_of_a_model_without_spikes_is_refused(tmp_path, capsys):
    pytest.importorskip("pynwb")
    from latticelab.app.cli import main
    assert main(["run", "ising", "--L", "8", "--steps", "2", "--output", str(tmp_path / "x.nwb")]) == 2
    assert "records none" in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_the_window_s_export_writes_the_recorded_band_and_refuses_without_a_recording(tmp_path):
    """sim/output export_now (File > Export data... with .nwb): the spikes recorded so far for the raster's band,
    with the plotted history; without a recording it says how to get one."""
    pynwb = pytest.importorskip("pynwb")
    from latticelab.sim.io import OutputError
    from latticelab.sim.output import export_now
    model = CortexModel(backend="numpy", L=16, k=10, r=4, seed=2, I_e=4.0)
    with pytest.raises(OutputError, match="spike raster"):
        export_now(tmp_path / "none.nwb", model)
    model.record_spikes(range(10, 60))
    times, eeg = [], []
    for _ in range(30):
        model.step(1)
        times.append(model.time)
        eeg.append(model.observables()["eeg"])
    steps, indices = model.spike_recording.spikes()
    values = {"eeg": np.array(eeg), "firing_e": np.zeros(30), "firing_i": np.zeros(30)}
    path = export_now(tmp_path / "band.nwb", model, (np.array(times), values)).result(timeout=120)
    with pynwb.NWBHDF5IO(str(path), "r") as io:
        nwb = io.read()
        assert nwb.units.id[:].tolist() == list(range(10, 60))
        total = sum(len(nwb.units["spike_times"][i]) for i in range(50))
        assert total == steps.size > 0 and np.array_equal(nwb.acquisition["eeg"].data[:], eeg)


@pytest.mark.gpu
def test_a_cuda_run_of_2_20_neurons_writes_every_spike_to_the_nwb_file(tmp_path):
    """The CuPy path at full size: 2^20 neurons recorded, so the device buffer (sized for every neuron firing
    in every step of a batch) holds 4 steps and is drained many times; the file's spike trains are exactly the
    neurons the model reports as fired, step by step, and its EEG the observables given."""
    pynwb = pytest.importorskip("pynwb")
    from latticelab.sim.output import open_output, record_step
    from latticelab.sim.models.cortex.spikes import DEVICE_BUFFER
    model = CortexModel(backend="cuda", L=1024, k=50, r=8, seed=3, I_e=4.0)
    writer = open_output(tmp_path / "big.nwb", model)
    assert model.spike_recording.batch_steps == DEVICE_BUFFER // (1 << 20) < 10
    fired, eeg = [], []
    for _ in range(30):
        model.step(1)
        record_step(writer, model)
        fired.append((model.step_count, np.flatnonzero(to_numpy(model.fired).reshape(-1))))
        eeg.append(model.observables()["eeg"])
    writer.close()
    steps = np.concatenate([np.full(idx.size, step) for step, idx in fired])
    indices = np.concatenate([idx for _, idx in fired])
    assert steps.size > 1000
    order = np.lexsort((steps, indices))
    with pynwb.NWBHDF5IO(str(tmp_path / "big.nwb"), "r") as io:
        nwb = io.read()
        units = nwb.units
        assert len(units) == 1 << 20
        times = np.asarray(units["spike_times"].target.data[:])
        assert np.array_equal(np.round(times * 1000.0).astype(np.int64), steps[order])
        assert np.array_equal(units["spike_times_index"].data[:], np.cumsum(np.bincount(indices, minlength=1 << 20)))
        assert np.array_equal(nwb.acquisition["eeg"].data[:], eeg)
