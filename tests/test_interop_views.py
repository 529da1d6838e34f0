"""The field view (render/field_view.py) through render/upload.py: host pictures go through host memory without
asking about CUDA; on a CUDA machine the interop path -- pictures encoded straight into the texture by the
encoder's CUDA twin composed with the surface writer -- draws exactly the pixels of the host path."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from helpers import scene_canvas

from latticelab.render import interop

SIZE = 160



def _scene_canvas():
    return scene_canvas(SIZE)


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
    from latticelab.render.field_view import FieldView

    return FieldView(canvas.central_widget.add_view())


def _show_twice(canvas, view, picture):
    """The first upload of a new texture precedes VisPy's first draw (host); the second can use interop."""
    view.show(picture)
    canvas.render()
    view.show(picture)
    return canvas.render(alpha=False)


def _spins(xp, shape, rng):
    return xp.asarray(np.where(rng.random(shape) < 0.5, 1, -1).astype(np.int8))


def _pictures(xp, L2=48, L3=12):
    """Ising pictures (spins + highlight) of a 2D and a 3D lattice, arrays on ``xp``."""
    from latticelab.sim.models.ising.picture import ising_picture

    rng = np.random.default_rng(7)

    def picture(shape):
        return ising_picture(xp, _spins(xp, shape, rng), xp.asarray(rng.random(shape) < 0.1))

    return picture((L2, L2)), picture((L3, L3, L3))


def test_views_of_host_pictures_upload_through_host_memory_without_probing_cuda(canvases, caplog):
    """NumPy pictures never use interop: they go through host memory without the probe (which imports CuPy and
    makes a CUDA context, 0.8-1.2 s on a GPU machine) and without a word in the log; the probe and its one
    message come with the first device array (tests/test_interop.py)."""
    canvas = canvases()
    caplog.set_level(logging.INFO, logger=interop.__name__)
    picture_2d, picture_3d = _pictures(np)
    view = _view(canvas)
    image = _show_twice(canvas, view, picture_2d)
    view.before_step()  # nothing to map off the interop path
    view.show(picture_3d)
    canvas.render()
    gpu = interop.interop_for(canvas)
    assert not gpu._decided and not [r for r in caplog.records if r.name == interop.__name__]
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

    picture_2d, picture_3d = _pictures(cupy)
    picture = picture_2d if mode == "2d" else picture_3d

    def draw(canvas, view, gpu):
        view.show(picture)
        if mode != "2d":
            view.set_mode_3d(mode)
            view.set_peel(3)
        return _show_twice(canvas, view, picture)

    images = _images_through_interop_and_host(canvases, draw)
    assert len(np.unique(images["host"].reshape(-1, 3), axis=0)) > 2
    assert np.array_equal(images["interop"], images["host"])


def _one_pass_uploads(monkeypatch):
    """Count the pictures written into a texture in one pass (render/interop.py: encode_into_texture)."""
    calls = []
    original = interop.encode_into_texture
    monkeypatch.setattr(interop, "encode_into_texture",
                        lambda resource, picture, stream=None: (calls.append(picture.encoder.name),
                                                                original(resource, picture, stream)))
    return calls


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(48, 48), (30, 30), (12, 12, 12), (10, 10, 10)])  # 4 texels per thread, or 1
def test_ising_pictures_encoded_into_the_texture_draw_the_pixels_of_the_host_path(canvases, monkeypatch, shape):
    import cupy

    from latticelab.sim.models.ising.picture import ising_picture

    rng = np.random.default_rng(11)
    spins = _spins(cupy, shape, rng)
    flipped = cupy.asarray(rng.random(shape) < 0.2)
    rewired = cupy.asarray(rng.random(shape) < 0.1)
    links = rng.integers(0, spins.size, (30, 2))
    one_pass = _one_pass_uploads(monkeypatch)

    def draw(canvas, view, gpu):
        for _ in range(2):  # the first upload of a new texture precedes VisPy's first draw (host)
            view.show(ising_picture(cupy, spins, flipped, rewired, links))
            image = canvas.render(alpha=False)
        return image

    images = _images_through_interop_and_host(canvases, draw)
    assert one_pass == ["ising-state"]  # the interop canvas's second frame; none on the host path
    assert len(np.unique(images["host"].reshape(-1, 3), axis=0)) > 4  # up, down, flipped, rewired cells, links
    assert np.array_equal(images["interop"], images["host"])


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(40, 40), (33, 33), (9, 9, 9), (12, 12, 12)])
def test_scalar_pictures_encoded_into_the_texture_draw_the_pixels_of_the_host_path(canvases, monkeypatch, shape):
    import cupy

    from latticelab.sim.picture import scalar_picture

    rng = np.random.default_rng(12)
    values = rng.normal(0.0, 1.0, shape)
    values.flat[:3] = (np.nan, np.inf, -np.inf)
    values = cupy.asarray(values)                        # float64: the kernel reads float32
    mask = cupy.asarray(rng.random(shape) < 0.05)
    one_pass = _one_pass_uploads(monkeypatch)

    def draw(canvas, view, gpu):
        view.set_mode_3d("unfold")
        for _ in range(2):
            view.show(scalar_picture(cupy, values, -2.0, 2.0, "viridis", highlight=mask))
            image = canvas.render(alpha=False)
        return image

    images = _images_through_interop_and_host(canvases, draw)
    assert one_pass == ["scalar"]
    assert len(np.unique(images["host"].reshape(-1, 3), axis=0)) > 40
    assert np.array_equal(images["interop"], images["host"])


@pytest.mark.gpu
def test_a_texture_mapped_before_the_step_shows_the_stepped_state(canvases):
    import cupy

    from latticelab.sim.models.ising.picture import ising_picture

    rng = np.random.default_rng(5)
    spins = _spins(cupy, (40, 40), rng)
    flipped = cupy.asarray(rng.random((40, 40)) < 0.2)

    def mapped(gpu):
        return any(resource.is_mapped for _, resource in gpu._resources.values())

    def draw(canvas, view, gpu):
        for _ in range(2):
            view.show(ising_picture(cupy, spins, flipped))
            canvas.render()
        view.before_step()
        assert mapped(gpu) == gpu.enabled
        view.show(ising_picture(cupy, -spins, ~flipped))  # the step's CUDA work ran while the texture was mapped
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
def test_picture_codes_on_cupy_equal_the_numpy_codes():
    import cupy

    from latticelab.sim.models.ising.picture import encode_codes
    from latticelab.sim.picture import encode_scalar

    rng = np.random.default_rng(3)
    for shape in ((33, 17), (6, 7, 8)):
        spins = np.where(rng.random(shape) < 0.5, 1, -1).astype(np.int8)
        flipped, rewired = rng.random(shape) < 0.3, rng.random(shape) < 0.1
        for f, r in ((None, None), (flipped, None), (flipped, rewired), (None, rewired)):
            expected = encode_codes(np, spins, f, r)
            got = encode_codes(cupy, cupy.asarray(spins), None if f is None else cupy.asarray(f),
                               None if r is None else cupy.asarray(r))
            assert got.dtype == np.uint8 and got.shape == shape
            assert np.array_equal(cupy.asnumpy(got), expected)
        values = rng.normal(0, 2, shape).astype(np.float32)
        values.flat[:3] = (np.nan, np.inf, -np.inf)
        for low, high in ((-1.0, 1.0), (-3.3, 1700.0), (0.1, 0.7)):
            expected = encode_scalar(np, values, flipped, None, low, high)
            got = encode_scalar(cupy, cupy.asarray(values), cupy.asarray(flipped), None, low, high)
            assert np.array_equal(cupy.asnumpy(got), expected), (shape, low, high)
