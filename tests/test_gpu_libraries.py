"""sim/backend.py initialise_gpu_libraries: the CUDA libraries the application loads before its window shows,
so that a model built on a worker thread does not load them while the GUI thread writes textures."""
import threading

import numpy as np
import pytest

from latticelab.sim.backend import initialise_gpu_libraries, select_backend


def test_nothing_to_initialise_on_numpy():
    assert initialise_gpu_libraries(np) == []


@pytest.mark.gpu
def test_libraries_loaded_on_one_thread_serve_a_worker_thread():
    xp = select_backend("cuda").xp
    names = initialise_gpu_libraries(xp)
    assert [name.split()[0] for name in names] == ["cuFFT", "cuRAND"]
    field = np.random.default_rng(3).random((64, 48))
    results = {}

    def worker():       # as a model's build does: a transform and a random stream on another thread
        results["fft"] = xp.fft.fftn(xp.asarray(field)).get()
        results["random"] = xp.random.RandomState(7).random_sample(4).get()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    np.testing.assert_allclose(results["fft"], np.fft.fftn(field), rtol=1e-12, atol=1e-9)
    assert results["random"].shape == (4,) and np.all((results["random"] >= 0) & (results["random"] < 1))
