"""The view on a machine with two GPUs (issue 40), headless (EGL), marked gpu: the picture drawn through
CUDA-OpenGL interop must be, pixel for pixel, the one-device picture

- in the dual-GPU mode: the model simulates on the GPU that the GL context is not on, and each frame's arrays
  are handed over to the GL's device by peer copy and encoded there (render/interop.py: ``_hand_over``);
- for a model split over both GPUs: each slab encoded on its own GPU and gathered on the GL's device
  (sim/multidevice/picture.py), also reduced when the view is smaller than the lattice.

The CPU's counterparts: tests/test_multidevice_picture.py and tests/gui/test_split_window.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from helpers import device_xp, scene_canvas

pytestmark = pytest.mark.gpu

VALUES = dict(dim=2, L=256, T=2.3, p=0.01, algorithm="metropolis", seed=4)


def _two_gpus():
    xp = device_xp("cuda")
    if xp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    return xp


@pytest.fixture
def view():
    from latticelab.render import interop
    from latticelab.render.field_view import FieldView
    canvas = scene_canvas(300)
    field_view = FieldView(canvas.central_widget.add_view())
    yield field_view
    interop.interop_for(canvas).release()
    canvas.close()


def _model(xp, device, **changes):
    from latticelab.sim.models.ising.model import IsingModel
    with xp.cuda.Device(device):
        return IsingModel(backend="cuda", **{**VALUES, **changes})


def _drawn(view, xp, device, make_picture) -> np.ndarray:
    """The canvas's pixels after showing the picture ``make_picture()`` makes with ``device`` current (twice:
    the first upload into a texture no canvas has drawn yet goes through the host)."""
    for _ in range(2):
        with xp.cuda.Device(device):
            picture = make_picture()
        view.before_step()
        view.show(picture)
        view.before_render()
        image = view.viewbox.canvas.render(alpha=False)
    return image


def _gl_device(view, xp) -> int:
    from latticelab.render import interop
    first = _model(xp, 0, L=64)
    _drawn(view, xp, 0, lambda: first.picture())
    gpu = interop.interop_for(view.viewbox.canvas)
    assert gpu.enabled, gpu.reason
    return gpu.device


def test_a_model_on_the_other_gpu_is_drawn_as_on_the_gl_gpu(view):
    from latticelab.render import interop
    xp = _two_gpus()
    gl = _gl_device(view, xp)
    other = 1 - gl
    near, far = _model(xp, gl), _model(xp, other)
    batches = {}
    for device, model in ((gl, near), (other, far)):
        with xp.cuda.Device(device):
            batches[device] = model.advance(5)
    gpu = interop.interop_for(view.viewbox.canvas)
    expected = _drawn(view, xp, gl, lambda: near.picture(batches[gl].changed, True))
    host_uploads = gpu.uploads["host"]
    shown = _drawn(view, xp, other, lambda: far.picture(batches[other].changed, True))
    assert far.spins.device.id == other and gpu.device == gl
    assert gpu.uploads["host"] == host_uploads and gpu._handed, "the far model's arrays were not handed over"
    assert len(np.unique(expected.reshape(-1, expected.shape[-1]), axis=0)) >= 4
    np.testing.assert_array_equal(shown, expected)


def test_a_model_split_over_both_gpus_is_drawn_as_on_one(view):
    from latticelab.render import interop
    xp = _two_gpus()
    gl = _gl_device(view, xp)
    one, split = _model(xp, gl), _model(xp, 0, devices="0,1")
    with xp.cuda.Device(gl):
        a = one.advance(5)
    b = split.advance(5)
    gpu = interop.interop_for(view.viewbox.canvas)
    expected = _drawn(view, xp, gl, lambda: one.picture(a.changed, True))
    host_uploads = gpu.uploads["host"]
    shown = _drawn(view, xp, gl, lambda: split.picture(b.changed, True))
    assert gpu.uploads["host"] == host_uploads, "the split picture went through the host"
    np.testing.assert_array_equal(shown, expected)
    spins = one.spins.get()
    for index in ((127, 3), (128, 3), (255, 200)):
        assert split.main_field_at(index) == ("spins", int(spins[index]))
    # a view smaller than the lattice: the slabs come reduced (every 2nd cell) into a smaller texture
    from latticelab.render.field_view import FieldView
    canvas = scene_canvas(100)
    try:
        small = FieldView(canvas.central_widget.add_view())
        _drawn(small, xp, gl, lambda: split.picture(b.changed, True))
        assert tuple(small.image.texture.shape[:2]) == (128, 128)
        assert interop.interop_for(canvas).uploads["interop"] >= 1
    finally:
        interop.interop_for(canvas).release()
        canvas.close()
