"""The lattice views (render/lattice_view.py) through render/upload.py: on a machine without CUDA-GL they
fall back and say so once; on a CUDA machine the interop path draws exactly the pixels of the host path."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from latticelab.render import interop

SIZE = 160


def _scene_canvas():
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

        canvas = scene.SceneCanvas(size=(SIZE, SIZE), show=True, app=application, keys=None, bgcolor=BACKGROUND)
    except Exception as exc:
        pytest.skip(f"no OpenGL canvas here: {exc}")
    application.process_events()
    canvas.set_current()
    return canvas


@pytest.fixture
def canvases():
    made = []

    def make():
        canvas = _scene_canvas()
        made.append(canvas)
        return canvas

    yield make
    for canvas in made:
        interop.interop_for(canvas).release()
        canvas.close()


def _view(canvas):
    from latticelab.render.lattice_view import LatticeView

    return LatticeView(canvas.central_widget.add_view())


def _show_twice(canvas, view, state):
    """The first upload of a new texture precedes VisPy's first draw (host); the second can use interop."""
    view.set_state(state)
    canvas.render()
    view.set_state(state)
    return canvas.render(alpha=False)


def _states(xp, L2=48, L3=12):
    rng = np.random.default_rng(7)
    from latticelab.render.upload import encode_state

    def state(shape):
        spins = xp.asarray(np.where(rng.random(shape) < 0.5, 1, -1).astype(np.int8))
        flipped = xp.asarray(rng.random(shape) < 0.1)
        return encode_state(xp, spins, flipped)

    return state((L2, L2)), state((L3, L3, L3))


def test_views_without_cuda_gl_fall_back_and_say_so_once(canvases, caplog):
    canvas = canvases()
    caplog.set_level(logging.INFO, logger=interop.__name__)
    state_2d, state_3d = _states(np)
    view = _view(canvas)
    image = _show_twice(canvas, view, state_2d)
    view.before_step()  # nothing to map off the interop path
    view.set_state(state_3d)
    canvas.render()
    gpu = interop.interop_for(canvas)
    if gpu.enabled:
        pytest.skip(f"this machine has CUDA-GL interop ({gpu.reason}); the GPU test below covers it")
    records = [r for r in caplog.records if r.name == interop.__name__ and "interop off" in r.getMessage()]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert gpu.uploads["interop"] == 0 and gpu.uploads["host"] >= 1
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 2  # the lattice is drawn


def _images_through_interop_and_host(canvases, draw):
    """{"interop": image, "host": image}: ``draw(canvas, view, gpu)`` on a fresh canvas through each path."""
    images = {}
    for path in ("interop", "host"):
        canvas = canvases()
        gpu = interop.interop_for(canvas)
        if path == "host":
            gpu.force_host("test: host path")
        images[path] = draw(canvas, _view(canvas), gpu)
        if path == "interop":
            assert gpu.enabled, gpu.reason
            assert gpu.uploads["interop"] >= 1, gpu.uploads
        else:
            assert gpu.uploads["interop"] == 0
    return images


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["2d", "cube", "unfold"])
def test_views_draw_identical_pixels_through_interop_and_host(canvases, mode):
    import cupy

    state_2d, state_3d = _states(cupy)
    state = state_2d if mode == "2d" else state_3d

    def draw(canvas, view, gpu):
        view.set_state(state)
        if mode != "2d":
            view.set_mode_3d(mode)
            view.set_peel(3)
        return _show_twice(canvas, view, state)

    images = _images_through_interop_and_host(canvases, draw)
    assert len(np.unique(images["host"].reshape(-1, 3), axis=0)) > 2
    assert np.array_equal(images["interop"], images["host"])


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(48, 48), (30, 30), (12, 12, 12), (10, 10, 10)])  # 4 texels per thread, or 1
def test_spins_encoded_into_the_texture_draw_the_pixels_of_the_host_path(canvases, shape):
    import cupy

    rng = np.random.default_rng(11)
    spins = cupy.asarray(np.where(rng.random(shape) < 0.5, 1, -1).astype(np.int8))
    flipped = cupy.asarray(rng.random(shape) < 0.2)
    rewired = cupy.asarray(rng.random(shape) < 0.1)

    def draw(canvas, view, gpu):
        view.set_highlights(True, True)
        for _ in range(2):  # the first upload of a new texture precedes VisPy's first draw (host)
            view.show_spins(cupy, spins, flipped, rewired)
            image = canvas.render(alpha=False)
        return image

    images = _images_through_interop_and_host(canvases, draw)
    assert len(np.unique(images["host"].reshape(-1, 3), axis=0)) > 3  # up, down, flipped and rewired cells
    assert np.array_equal(images["interop"], images["host"])


@pytest.mark.gpu
def test_a_texture_mapped_before_the_step_shows_the_stepped_state(canvases):
    import cupy

    rng = np.random.default_rng(5)
    spins = cupy.asarray(np.where(rng.random((40, 40)) < 0.5, 1, -1).astype(np.int8))
    flipped = cupy.asarray(rng.random((40, 40)) < 0.2)

    def mapped(gpu):
        return any(resource.is_mapped for _, resource in gpu._resources.values())

    def draw(canvas, view, gpu):
        for _ in range(2):
            view.show_spins(cupy, spins, flipped)
            canvas.render()
        view.before_step()
        assert mapped(gpu) == gpu.enabled
        view.show_spins(cupy, -spins, ~flipped)  # the step's CUDA work ran while the texture was mapped
        assert not mapped(gpu)
        image = canvas.render(alpha=False)
        view.before_step()  # a frame without an upload: the draw hook gives the texture back to GL
        canvas.events.draw(region=None)
        assert not mapped(gpu)
        return image

    images = _images_through_interop_and_host(canvases, draw)
    assert len(np.unique(images["host"].reshape(-1, 3), axis=0)) > 2
    assert np.array_equal(images["interop"], images["host"])


@pytest.mark.gpu
def test_encode_state_on_cupy_gives_the_numpy_codes():
    import cupy

    from latticelab.render.upload import encode_state

    rng = np.random.default_rng(3)
    for shape in ((33, 17), (6, 7, 8)):
        spins = np.where(rng.random(shape) < 0.5, 1, -1).astype(np.int8)
        flipped, rewired = rng.random(shape) < 0.3, rng.random(shape) < 0.1
        for f, r in ((None, None), (flipped, None), (flipped, rewired), (None, rewired)):
            expected = encode_state(np, spins, f, r)
            got = encode_state(cupy, cupy.asarray(spins), None if f is None else cupy.asarray(f),
                               None if r is None else cupy.asarray(r))
            assert got.dtype == np.uint8 and got.shape == shape
            assert np.array_equal(cupy.asnumpy(got), expected)
