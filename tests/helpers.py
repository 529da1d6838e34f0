"""Helpers shared by several test modules (imported as ``from helpers import ...``: pytest puts tests/ on
sys.path, there being no tests/__init__.py). Test modules import shared helpers from here, never from each
other; hooks and fixtures live in conftest.py.

- ``BACKENDS``: the array backends a model test runs on (cuda marked gpu).
- ``DEVICES`` and ``device_xp``: where the CUDA kernels run -- the CPU emulator of the kernels
  (sim/gpu/emulate.py, needs g++) or a real CUDA device (marked gpu).
- ``random_spins``: a reproducible +-1 int8 configuration.
- ``sample`` and ``block_mean_and_error``: time series of a running model's observables and their mean
  with a standard error that accounts for autocorrelation.
"""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy

BACKENDS = ["numpy", pytest.param("cuda", marks=pytest.mark.gpu)]
DEVICES = ["emulator", pytest.param("cuda", marks=pytest.mark.gpu)]


def device_xp(device: str):
    """The array module the kernels run on: the CPU emulator's stand-in for CuPy, or CuPy itself."""
    if device == "emulator":
        from latticelab.sim.gpu.emulate import compiler, emulated_xp
        if compiler() is None:
            pytest.skip("no C++ compiler (g++) for the CUDA emulator")
        return emulated_xp()
    from latticelab.sim.backend import select_backend
    return select_backend("cuda").xp


def emulate_devices(monkeypatch, *modules):
    """The CPU emulator's stand-in for CuPy as the backend (also where ``modules`` imported select_backend by
    name), and several 'devices' allowed: a model split over them runs on NumPy slabs in this process."""
    import latticelab.sim.backend as backend
    import latticelab.sim.multidevice.devices as devices
    xp = device_xp("emulator")

    def select(name="auto"):
        return backend.Backend(xp, "numpy", "CPU", "test")

    for module in (backend, *modules):
        monkeypatch.setattr(module, "select_backend", select)
    monkeypatch.setattr(devices, "resolve_devices",
                        lambda cls, value, b: devices.parse_devices(value) if value is not None else (0,))
    return xp


def random_spins(shape, seed: int, up: float = 0.5) -> np.ndarray:
    return np.where(np.random.default_rng(seed).random(shape) < up, 1, -1).astype(np.int8)


def block_mean_and_error(series: np.ndarray, blocks: int = 20) -> tuple[float, float]:
    """Mean and its standard error from block means (accounts for autocorrelation)."""
    n = series.size // blocks * blocks
    means = series[:n].reshape(blocks, -1).mean(axis=1)
    return float(means.mean()), float(means.std(ddof=1) / np.sqrt(blocks))


def sample(model, steps: int, burn_in: int = 500) -> dict[str, np.ndarray]:
    """Energy per site and |magnetisation| per site after each of ``steps`` single steps, after ``burn_in``
    steps (the model's edges are read once, so the graph must not change meanwhile)."""
    model.step(burn_in)
    edges = model.edges()
    a, b = edges[:, 0], edges[:, 1]
    n = model.n_sites
    energy, magnet = np.empty(steps), np.empty(steps)
    for i in range(steps):
        model.step(1)
        s = to_numpy(model.spins).reshape(-1).astype(np.int64)
        energy[i] = -(s[a] * s[b]).sum() / n
        magnet[i] = abs(s.sum()) / n
    return {"energy": energy, "magnetisation": magnet}


def scene_canvas(size: int):
    """A shown VisPy SceneCanvas of ``size`` x ``size`` with the views' background, current; on Qt under a
    display, else headless EGL; the test is skipped where no OpenGL canvas can be made."""
    import os

    import pytest
    import vispy.app
    from vispy import scene

    name = "pyside6" if os.environ.get("DISPLAY") else "egl"
    try:
        application = vispy.app.use_app(name)
    except Exception:
        try:
            application = vispy.app.use_app()
        except Exception as exc:
            pytest.skip(f"no OpenGL canvas here: {exc}")
    try:
        from latticelab.render.palette import BACKGROUND

        canvas = scene.SceneCanvas(size=(size, size), show=True, app=application, keys=None, bgcolor=BACKGROUND)
    except Exception as exc:
        pytest.skip(f"no OpenGL canvas here: {exc}")
    application.process_events()
    canvas.set_current()
    return canvas
