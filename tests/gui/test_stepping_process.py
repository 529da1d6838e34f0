"""Slow CPU steps run in a worker process (app/stepping.py): the same trajectory and observables as stepping in
place, errors come back as themselves, and the Spectrum dock's work in its process gives what it gives here.

No Qt is needed for most of these; they sit with the window tests because the stepper and the dock are the
window's."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.app import stepping
from latticelab.app.spectral_jobs import SpectrumJob, compute_here, compute_in_process, for_process
from latticelab.app.stepping import BackgroundStepper, ModelProcess, steps_elsewhere
from latticelab.render.isosurface import block_max, display_mesh
from latticelab.sim.analysis import spectral
from latticelab.sim.models.ising.model import IsingModel
from latticelab.sim.params import ParameterError
from latticelab.sim.state import state_of


def _same_state(a, b) -> None:
    sa, sb = state_of(a), state_of(b)
    assert sa.keys() == sb.keys()
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)


@pytest.fixture
def stepper():
    s = BackgroundStepper()
    yield s
    s.close()


@pytest.mark.parametrize("params, n, batches", [
    (dict(dim=2, L=32, algorithm="swendsen-wang", T=2.269, p=0.05, seed=5), 3, 3),
    (dict(dim=3, L=12, algorithm="2:1", T=4.3, p=0.1, seed=7), 2, 2),
    (dict(dim=2, L=24, algorithm="metropolis", T=2.0, p=0.0, seed=11), 4, 2),
])
def test_a_batch_in_the_worker_process_equals_stepping_in_place(stepper, params, n, batches):
    here = IsingModel.create(backend="numpy", **params)
    there = IsingModel.create(backend="numpy", **params)
    assert steps_elsewhere(there)
    for _ in range(batches):
        expected = here.advance(n)
        stepper.start(there, n)
        assert stepper.wait(120)
        model, batch, _ = stepper.poll()
        assert model is there and stepper.where == "process"
        np.testing.assert_array_equal(batch.times, expected.times)
        np.testing.assert_array_equal(batch.changed, expected.changed)
        for name, values in expected.observables.items():
            np.testing.assert_array_equal(batch.observables[name], values, err_msg=name)
        _same_state(here, there)


def test_changes_between_batches_reach_the_copy_in_the_process(stepper):
    params = dict(dim=2, L=32, algorithm="swendsen-wang", T=2.269, p=0.0, seed=3)
    here, there = (IsingModel.create(backend="numpy", **params) for _ in range(2))
    for model in (here, there):
        model.advance(2)
    stepper.start(there, 1)
    stepper.wait(120)
    stepper.poll()
    here.advance(1)
    for model in (here, there):           # a live change, a rewiring (new graph), a reset
        model.update(T=1.5, p=0.05, algorithm="metropolis")
    for _ in range(2):
        expected = here.advance(2)
        stepper.start(there, 2)
        stepper.wait(120)
        _, batch, _ = stepper.poll()
        np.testing.assert_array_equal(batch.observables["energy"], expected.observables["energy"])
        _same_state(here, there)
    for model in (here, there):
        model.reset(seed=9)
    expected = here.advance(1)
    stepper.start(there, 1)
    stepper.wait(120)
    _, batch, _ = stepper.poll()
    np.testing.assert_array_equal(batch.observables["abs_magnetisation"], expected.observables["abs_magnetisation"])
    _same_state(here, there)


def _fails_in_child(model, kind):
    if kind == "parameter":
        raise ParameterError("T", "must be positive")
    raise MemoryError("too big")


def test_errors_in_the_process_come_back_as_themselves():
    process = ModelProcess("test")
    try:
        with pytest.raises(ParameterError) as info:
            process.call(_fails_in_child, None, "parameter")
        assert info.value.parameter == "T" and str(info.value) == "T: must be positive"
        with pytest.raises(MemoryError):
            process.call(_fails_in_child, None, "memory")
    finally:
        process.close()


def _large_reply(model, n: int):
    return np.arange(n, dtype=np.float64)


def test_a_large_reply_is_read_in_one_call():
    """A reply of 40 MB (a 3D L = 128 spectrum's is 42 MB) is read by one recv_into that waits for all of it, with
    the GIL released (from a pipe it came 64 KiB at a time, the GIL taken back after each piece), and is whole."""
    process = ModelProcess("test")
    try:
        np.testing.assert_array_equal(process.call(_large_reply, None, 10), np.arange(10.0))
        channel = process._channel
        if not isinstance(channel, stepping.SocketChannel):
            pytest.skip("no Unix socket pair on this platform: the replies come through pipes")
        before = channel.receive_calls
        reply = process.call(_large_reply, None, 5_000_000)
        # one call a part: the header, the buffers' lengths, the pickle, the array's bytes (out of band)
        assert channel.receive_calls - before == 4
        np.testing.assert_array_equal(reply, np.arange(5_000_000.0))
    finally:
        process.close()
    assert not process.alive


def _echo(model, value):
    return value


@pytest.mark.parametrize("transport", ["socket", "pipes"])
def test_arrays_and_other_values_travel_whole_both_ways(transport, monkeypatch):
    """NumPy arrays travel beside the pickle (out of band); what arrives equals what was sent, through the socket
    pair and through pipes, arrays of any layout and dtype included."""
    if transport == "pipes":
        monkeypatch.setattr(stepping, "_socket_pair", lambda: None)
    grid = np.arange(24, dtype=np.int8).reshape(4, 6)
    value = {"spins": grid, "columns": grid[:, ::2], "fortran": np.asfortranarray(grid.astype(np.float32)),
             "scalar": np.float64(2.5), "zero_d": np.array(7), "empty": np.zeros((0, 3)), "text": "T: 2.269",
             "nested": [np.ones(3, bool), (1, None)]}
    process = ModelProcess("test")
    try:
        back = process.call(_echo, None, value)
        assert isinstance(process._channel, stepping.SocketChannel if transport == "socket" else stepping.PipeChannel)
    finally:
        process.close()
    assert back.keys() == value.keys() and back["text"] == value["text"] and back["nested"][1] == (1, None)
    for key in ("spins", "columns", "fortran", "scalar", "zero_d", "empty"):
        np.testing.assert_array_equal(back[key], value[key], err_msg=key)
        assert np.asarray(back[key]).dtype == np.asarray(value[key]).dtype, key
    np.testing.assert_array_equal(back["nested"][0], value["nested"][0])
    back["spins"][0, 0] = 99                               # arrays made on the received buffers can be written


def test_a_model_whose_advance_was_replaced_steps_on_the_thread(stepper, monkeypatch):
    model = IsingModel.create(backend="numpy", dim=2, L=16, T=2.0)
    model.advance = lambda n: IsingModel.advance(model, n)
    assert not steps_elsewhere(model)
    stepper.start(model, 1)
    stepper.wait(60)
    stepper.poll()
    assert stepper.where == "thread" and model.step_count == 1
    monkeypatch.setattr(stepping, "USE_PROCESS", False)
    assert not steps_elsewhere(IsingModel.create(backend="numpy", dim=2, L=16, T=2.0))


def test_a_dead_process_is_replaced_and_one_that_cannot_start_costs_a_thread_step(stepper):
    model = IsingModel.create(backend="numpy", dim=2, L=16, T=2.0, seed=4)
    reference = IsingModel.create(backend="numpy", dim=2, L=16, T=2.0, seed=4)
    stepper.start(model, 1)
    stepper.wait(60)
    stepper.poll()
    reference.advance(1)
    for where in ("process", "thread"):
        stepper.process._process.kill()       # gone between two batches: the next starts a new one
        stepper.process._process.wait(10)
        if where == "thread":                 # and when none can be started, the batch runs on the thread
            stepper.process.failed = "no worker process in this test"
        stepper.start(model, 1)
        stepper.wait(60)
        _, batch, _ = stepper.poll()
        assert stepper.where == where
        expected = reference.advance(1)
        np.testing.assert_array_equal(batch.observables["energy"], expected.observables["energy"])
        _same_state(reference, model)


def test_the_spectrum_job_in_the_process_equals_the_one_here():
    model = IsingModel.create(backend="numpy", dim=3, L=16, T=4.3, seed=2)
    model.advance(3)
    job = SpectrumJob((1,), 3, "spins", model.spins.copy(), spectral.SpectrumAccumulator(), False, 0.4, "auto",
                      clusters_of=model, max_faces=None, state=state_of(model), elsewhere=True)
    here = compute_here(job)
    process = ModelProcess("test-spectrum")
    try:
        there = process.call(compute_in_process, job.state, for_process(job), True)
    finally:
        process.close()
    np.testing.assert_array_equal(there.accumulator.mean, here.accumulator.mean)
    np.testing.assert_array_equal(there.mesh.faces, here.mesh.faces)
    np.testing.assert_array_equal(there.mesh.vertices, here.mesh.vertices)
    for a, b in zip(there.histogram[:3], here.histogram[:3]):
        np.testing.assert_array_equal(a, b)
    assert there.clusters_text == here.clusters_text


def test_a_face_budget_meshes_a_block_maximum_in_full_coordinates():
    rng = np.random.default_rng(0)
    volume = rng.random((64, 64, 64)).astype(np.float32)
    full, factor = display_mesh(volume, 0.5)
    assert factor == 1
    budgeted, factor = display_mesh(volume, 0.5, max_faces=full.n_faces // 4)
    assert factor == 2 and 0 < budgeted.n_faces < full.n_faces
    reduced = block_max(volume, 2)
    assert reduced.shape == (32, 32, 32) and reduced[0, 0, 0] == volume[:2, :2, :2].max()
    assert budgeted.vertices.min() >= 0.5 - 1e-6 and budgeted.vertices.max() <= 63.5
    small = rng.random((32, 32, 32)).astype(np.float32)           # never below 32 a side
    assert display_mesh(small, 0.5, max_faces=10)[1] == 1


def _memory_settings(model):
    import os

    import numpy
    multiarray = getattr(numpy, "_core", None) or numpy.core
    huge_pages = getattr(multiarray.multiarray, "_get_madvise_hugepage", lambda: None)()
    return huge_pages, {key: os.environ.get(key) for key in stepping.WORKER_ENVIRONMENT}


def test_the_worker_process_asks_for_no_huge_pages_unless_told_to(monkeypatch):
    """The worker's NumPy gives no huge-page advice and its glibc keeps freed arrays for reuse (the 2 MB faults of a
    worker stepping a large lattice made both cores of a virtual machine run slow, the window's included); a
    setting in the user's environment is kept."""
    for key in stepping.WORKER_ENVIRONMENT:
        monkeypatch.delenv(key, raising=False)
    process = ModelProcess("test")
    try:
        huge_pages, environment = process.call(_memory_settings, None)
    finally:
        process.close()
    assert environment == stepping.WORKER_ENVIRONMENT
    assert huge_pages in (False, None)                   # None: a NumPy without the switch
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    process = ModelProcess("test")
    try:
        huge_pages, environment = process.call(_memory_settings, None)
    finally:
        process.close()
    assert environment["NUMPY_MADVISE_HUGEPAGE"] == "1"
    assert huge_pages in (True, None)
