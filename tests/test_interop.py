"""CUDA-OpenGL interop (render/interop.py): the fallback on machines without CUDA or with a GL that is not
on the CUDA device, and (marked gpu, on a CUDA machine with EGL) the interop path itself.

Every test draws into a small real canvas (Qt under Xvfb here, EGL on the GPU machine) and reads the
pixels back: what the texture or buffer holds is what the screen shows.
"""
from __future__ import annotations

import logging
import os
import types

import numpy as np
import pytest

from latticelab.render import interop

W, H = 32, 24  # canvas = texture size, so one texel is one pixel

QUAD_VERT = """
attribute vec2 a_position;
varying vec2 v_uv;
void main() { v_uv = (a_position + 1.0) / 2.0; gl_Position = vec4(a_position, 0.0, 1.0); }
"""
RGBA_FRAG = """
uniform sampler2D u_tex;
varying vec2 v_uv;
void main() { gl_FragColor = texture2D(u_tex, v_uv); }
"""
RED_FRAG = """
uniform sampler2D u_tex;
varying vec2 v_uv;
void main() { float r = texture2D(u_tex, v_uv).r; gl_FragColor = vec4(r, r, r, 1.0); }
"""
SLICE_FRAG = """
uniform sampler3D u_tex;
uniform float u_z;
varying vec2 v_uv;
void main() { float r = texture3D(u_tex, vec3(v_uv, u_z)).r; gl_FragColor = vec4(r, r, r, 1.0); }
"""
POINTS_VERT = """
attribute vec2 a_position;
attribute vec4 a_colour;
varying vec4 v_colour;
void main() { gl_Position = vec4(a_position, 0.0, 1.0); gl_PointSize = 1.0; v_colour = a_colour; }
"""
POINTS_FRAG = """
varying vec4 v_colour;
void main() { gl_FragColor = v_colour; }
"""


# ------------------------------------------------------------------------------------ helpers ---

def _gl_app():
    """VisPy's application: EGL where there is no display (the GPU machine), else Qt (Xvfb)."""
    import vispy.app

    name = "pyside6" if os.environ.get("DISPLAY") else "egl"
    try:
        return vispy.app.use_app(name)
    except Exception as exc:  # another backend already chosen in this process, or none usable
        try:
            return vispy.app.use_app()
        except Exception:
            pytest.skip(f"no OpenGL canvas here ({name}: {exc})")


@pytest.fixture
def canvas():
    from vispy import app as vispy_app

    application = _gl_app()
    try:
        c = vispy_app.Canvas(size=(W, H), show=True, app=application, keys=None)
    except Exception as exc:
        pytest.skip(f"no OpenGL canvas here: {exc}")
    application.process_events()
    c.set_current()
    yield c
    interop.interop_for(c).release()
    c.close()
    application.process_events()


def _gl_strings(canvas) -> str:
    from vispy.gloo import gl

    canvas.set_current()
    return f"{gl.glGetParameter(gl.GL_VENDOR)} {gl.glGetParameter(gl.GL_RENDERER)}"


def _quad_program(frag, texture):
    from vispy import gloo

    program = gloo.Program(QUAD_VERT, frag)
    program["a_position"] = gloo.VertexBuffer(np.array([[-1, -1], [1, -1], [-1, 1], [1, 1]], np.float32))
    program["u_tex"] = texture
    return program


def _render(canvas, program, mode="triangle_strip"):
    """Draw ``program`` alone and return the canvas pixels as a texture-ordered (row 0 = bottom) RGBA array."""
    from vispy import gloo

    def on_draw(event):
        gloo.set_viewport(0, 0, W, H)
        gloo.set_state(blend=False, depth_test=False)
        gloo.clear((0, 0, 0, 1))
        program.draw(mode)

    canvas.events.draw.connect(on_draw)
    try:
        image = canvas.render(alpha=True)
    finally:
        canvas.events.draw.disconnect(on_draw)
    assert image.shape[:2] == (H, W)
    return image[::-1]


def _pattern_rgba(xp):
    y, x = xp.mgrid[0:H, 0:W]
    return xp.stack([x * 7 % 256, y * 11 % 256, (x * y) % 256, xp.full_like(x, 255)], axis=-1).astype(xp.uint8)


def _points_program(vbo):
    from vispy import gloo

    y, x = np.mgrid[0:H, 0:W]
    positions = np.stack([(x.ravel() + 0.5) / W * 2 - 1, (y.ravel() + 0.5) / H * 2 - 1], 1).astype(np.float32)
    program = gloo.Program(POINTS_VERT, POINTS_FRAG)
    program["a_position"] = gloo.VertexBuffer(positions)
    program["a_colour"] = vbo
    return program


def _records(caplog):
    return [r for r in caplog.records if r.name == interop.__name__ and "interop off" in r.getMessage()]


def _on_nvidia(canvas) -> bool:
    return "nvidia" in _gl_strings(canvas).lower()


class FakeDeviceArray:
    """Stands in for a CuPy array where there is none: it has the CUDA array interface and ``get``."""

    def __init__(self, host):
        self.host = host
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str, "version": 3,
                                         "data": (0, False)}
        self.shape, self.dtype, self.ndim, self.nbytes = host.shape, host.dtype, host.ndim, host.nbytes

    def get(self):
        return self.host


# ------------------------------------------------------------- VisPy private API, in one place ---

def test_gl_object_name_returns_the_live_gl_texture_and_buffer(canvas):
    from vispy import gloo
    from vispy.gloo import gl

    texture = gloo.Texture2D(np.zeros((H, W, 4), np.uint8))
    vbo = gloo.VertexBuffer(np.zeros((10, 4), np.float32))
    tex_name = interop.gl_object_name(canvas, texture)
    buf_name = interop.gl_object_name(canvas, vbo)
    assert gl.glIsTexture(tex_name)
    assert gl.glIsBuffer(buf_name)
    assert interop.owning_canvas(texture) is canvas

    # A resize keeps the GL name but re-creates the storage: the signature must change.
    before = interop._signature(texture)
    texture.resize((H * 2, W, 4))
    assert interop.gl_object_name(canvas, texture) == tex_name
    assert interop._signature(texture) != before

    texture.delete()
    with pytest.raises(interop.InteropError, match="deleted"):
        interop.gl_object_name(canvas, texture)


def test_owning_canvas_is_none_for_an_object_no_canvas_has_seen(canvas):
    from vispy import gloo

    assert interop.owning_canvas(gloo.Texture2D(np.zeros((4, 4, 1), np.uint8))) is None
    texture = gloo.Texture2D(np.zeros((4, 4, 1), np.uint8))
    assert interop.try_upload_texture(texture, np.zeros((4, 4), np.uint8)) is False


def test_importing_interop_does_not_import_cuda():
    import subprocess
    import sys

    code = "import sys, render.interop; print('cupy' in sys.modules, 'cuda.bindings' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


# ------------------------------------------------------------------------------- the fallback ---

def test_without_cuda_it_falls_back_says_why_once_and_the_pixels_arrive(canvas, caplog, monkeypatch):
    from vispy import gloo

    def no_cuda():
        raise ImportError("No module named 'cupy'")

    monkeypatch.setattr(interop, "_cuda_modules", no_cuda)
    caplog.set_level(logging.INFO, logger=interop.__name__)
    gpu = interop.interop_for(canvas)
    texture = gloo.Texture2D(np.zeros((H, W, 4), np.uint8), interpolation="nearest")
    program = _quad_program(RGBA_FRAG, texture)
    pattern = _pattern_rgba(np)

    assert gpu.upload_texture(texture, pattern) == "host"
    assert gpu.upload_texture(texture, FakeDeviceArray(pattern)) == "host"  # a device array too
    assert np.array_equal(_render(canvas, program), pattern)
    records = _records(caplog)
    assert len(records) == 1, [r.getMessage() for r in records]
    assert "no CUDA" in records[0].getMessage() and "cupy" in records[0].getMessage()
    assert not gpu.enabled and gpu.uploads == {"interop": 0, "host": 2}
    assert interop.registered_count() == 0


def test_this_machines_gl_falls_back_with_its_reason(canvas, caplog):
    """No monkeypatching: on a machine without CUDA or with a non-NVIDIA GL, the real probe says why."""
    if _on_nvidia(canvas):
        pytest.skip("this GL context is on an NVIDIA GPU: the interop tests below cover it")
    caplog.set_level(logging.INFO, logger=interop.__name__)
    gpu = interop.interop_for(canvas)
    assert gpu.decide() is False
    message = _records(caplog)[0].getMessage()
    assert "no CUDA" in message or "not on a CUDA device" in message, message


def _fake_cuda(device_count=1):
    cupy = types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: device_count),
                                   Device=lambda: types.SimpleNamespace(id=0)),
        ascontiguousarray=lambda a: a)
    flags = types.SimpleNamespace(cudaGraphicsRegisterFlagsNone=0, cudaGraphicsRegisterFlagsWriteDiscard=1,
                                  cudaGraphicsRegisterFlagsSurfaceLoadStore=2)
    runtime = types.SimpleNamespace(cudaGraphicsRegisterFlags=flags)
    return cupy, runtime


def test_cuda_usable_but_gl_on_mesa_falls_back_naming_the_renderer(canvas, caplog, monkeypatch):
    if _on_nvidia(canvas):
        pytest.skip("needs a GL context that is not on an NVIDIA GPU (Mesa under Xvfb)")
    monkeypatch.setattr(interop, "_cuda_modules", _fake_cuda)
    caplog.set_level(logging.INFO, logger=interop.__name__)
    gpu = interop.interop_for(canvas)
    assert gpu.decide() is False
    records = _records(caplog)
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    message = records[0].getMessage()
    assert "not on a CUDA device" in message and "GL_RENDERER" in message
    renderer = _gl_strings(canvas).split()[-1]
    assert renderer.split()[0] in message or "llvmpipe" in message


def test_gl_on_another_cuda_device_draws_there_with_frames_handed_over(canvas, caplog, monkeypatch):
    """The dual-GPU mode: the simulation on device 0, the GL context on device 1 -- interop stays on and
    writes on device 1 (arrays of device 0 handed over by peer copy: tests/test_window_gpus.py on two GPUs)."""
    monkeypatch.setattr(interop, "_cuda_modules", lambda: _fake_cuda(2))
    monkeypatch.setattr(interop, "_gl_identity", lambda c: ("NVIDIA Corporation", "NVIDIA H100/PCIe/SSE2"))
    monkeypatch.setattr(interop, "_gl_cuda_devices", lambda runtime, count: [1])
    caplog.set_level(logging.INFO, logger=interop.__name__)
    gpu = interop.interop_for(canvas)
    assert gpu.decide() is True and gpu.device == 1
    assert not _records(caplog)
    (record,) = [r for r in caplog.records if "interop on" in r.getMessage()]
    assert "on CUDA device 1, the simulation on device 0" in record.getMessage()


def test_failed_registration_falls_back_once_and_the_pixels_still_arrive(canvas, caplog, monkeypatch):
    from vispy import gloo

    monkeypatch.setattr(interop, "_cuda_modules", _fake_cuda)
    monkeypatch.setattr(interop.CanvasInterop, "_probe", lambda self: (True, "forced on for the test"))

    def refuse(self, gloo_object, target, flags):
        raise interop.InteropError("cudaGraphicsGLRegisterImage(GL texture 3, target 0xde1) failed: "
                                   "cudaErrorUnknown (unknown error)")

    monkeypatch.setattr(interop.CanvasInterop, "_resource", refuse)
    caplog.set_level(logging.INFO, logger=interop.__name__)
    gpu = interop.interop_for(canvas)
    texture = gloo.Texture2D(np.zeros((H, W, 1), np.uint8), format="red", internalformat="r8",
                             interpolation="nearest")
    program = _quad_program(RED_FRAG, texture)
    state = (np.arange(H * W).reshape(H, W) % 251).astype(np.uint8)
    for _ in range(3):
        assert gpu.upload_texture(texture, FakeDeviceArray(state)) == "host"
    pixels = _render(canvas, program)
    assert np.array_equal(pixels[..., 0], state)
    records = _records(caplog)
    assert len(records) == 1 and "registration or mapping failed" in records[0].getMessage()
    assert "cudaErrorUnknown" in records[0].getMessage()
    assert not gpu.enabled and gpu.uploads["host"] == 3


def test_switch_off_by_environment(canvas, caplog, monkeypatch):
    monkeypatch.setenv(interop.ENV_SWITCH, "off")
    caplog.set_level(logging.INFO, logger=interop.__name__)
    assert interop.interop_for(canvas).decide() is False
    (record,) = _records(caplog)
    assert "switched off" in record.getMessage()


def test_mapped_buffer_on_the_host_path_draws_what_was_written(canvas, monkeypatch):
    from vispy import gloo

    monkeypatch.setenv(interop.ENV_SWITCH, "off")
    gpu = interop.interop_for(canvas)
    vbo = gloo.VertexBuffer(np.zeros((H * W, 4), np.float32))
    program = _points_program(vbo)
    expected = _pattern_rgba(np)
    with gpu.mapped_buffer(vbo, np.float32, (H * W, 4)) as colours:
        # The stand-in lives where the arrays live: CuPy on a CUDA machine, NumPy elsewhere.
        xp = np if isinstance(colours, np.ndarray) else pytest.importorskip("cupy")
        colours[...] = xp.asarray(expected.reshape(-1, 4) / 255.0)
    assert np.array_equal(_render(canvas, program, "points"), expected)
    assert gpu.uploads["host"] == 1


def test_upload_buffer_on_the_host_path(canvas, monkeypatch):
    from vispy import gloo

    monkeypatch.setenv(interop.ENV_SWITCH, "off")
    gpu = interop.interop_for(canvas)
    vbo = gloo.VertexBuffer(np.zeros((H * W, 4), np.float32))
    program = _points_program(vbo)
    expected = _pattern_rgba(np)
    assert gpu.upload_buffer(vbo, (expected.reshape(-1, 4) / 255.0).astype(np.float32)) == "host"
    assert np.array_equal(_render(canvas, program, "points"), expected)


# ------------------------------------------------------------------ the interop path (GPU) ---

def _interop_canvas(canvas):
    gpu = interop.interop_for(canvas)
    if not gpu.decide():
        pytest.fail(f"CUDA is usable but interop is off on this canvas: {gpu.reason}")
    return gpu


@pytest.mark.gpu
def test_kernel_pattern_through_texture_interop_is_what_read_pixels_returns(canvas):
    import cupy
    from vispy import gloo

    gpu = _interop_canvas(canvas)
    pattern_kernel = cupy.ElementwiseKernel(
        "int32 width", "raw uint8 rgba",
        "int x = i % width, y = i / width;"
        "rgba[4*i] = (x * 7) & 255; rgba[4*i+1] = (y * 11) & 255; rgba[4*i+2] = (x * y) & 255; rgba[4*i+3] = 255;",
        "test_pattern")
    rgba = cupy.empty((H, W, 4), cupy.uint8)
    pattern_kernel(np.int32(W), rgba, size=H * W)
    texture = gloo.Texture2D(np.zeros((H, W, 4), np.uint8), interpolation="nearest")
    program = _quad_program(RGBA_FRAG, texture)
    assert gpu.upload_texture(texture, rgba) == "interop"
    assert np.array_equal(_render(canvas, program), _pattern_rgba(np))

    # Single-channel r8 (the lattice views' format), and a resize that needs a new registration.
    red = gloo.Texture2D(np.zeros((4, 4, 1), np.uint8), format="red", internalformat="r8", interpolation="nearest")
    program = _quad_program(RED_FRAG, red)
    state = (cupy.arange(H * W, dtype=cupy.int32).reshape(H, W) * 37 % 256).astype(cupy.uint8)
    assert gpu.upload_texture(red, state) == "interop"
    assert red.shape == (H, W, 1)
    pixels = _render(canvas, program)
    assert np.array_equal(pixels[..., 0], cupy.asnumpy(state))
    assert gpu.uploads == {"interop": 2, "host": 0}


@pytest.mark.gpu
def test_kernel_pattern_through_3d_texture_interop(canvas):
    pytest.importorskip("OpenGL", reason="VisPy's Texture3D needs PyOpenGL")
    import cupy
    from vispy import gloo

    gpu = _interop_canvas(canvas)
    D = 5
    volume = ((cupy.arange(D * H * W, dtype=cupy.int32) * 13 + 5) % 256).astype(cupy.uint8).reshape(D, H, W)
    texture = gloo.Texture3D(np.zeros((D, H, W, 1), np.uint8), format="red", internalformat="r8",
                             interpolation="nearest")
    program = _quad_program(SLICE_FRAG, texture)
    assert gpu.upload_texture(texture, volume) == "interop"
    host = cupy.asnumpy(volume)
    for z in range(D):
        program["u_z"] = (z + 0.5) / D
        assert np.array_equal(_render(canvas, program)[..., 0], host[z]), f"slice {z}"


@pytest.mark.gpu
def test_kernel_writes_the_gl_buffer_in_place(canvas):
    import cupy
    from vispy import gloo

    gpu = _interop_canvas(canvas)
    vbo = gloo.VertexBuffer(np.zeros((H * W, 4), np.float32))
    program = _points_program(vbo)
    _render(canvas, program, "points")  # VisPy creates the GL buffer at the first draw
    colour_kernel = cupy.ElementwiseKernel(
        "int32 width", "raw float32 c",
        "int x = i % width, y = i / width;"
        "c[4*i] = ((x * 7) & 255) / 255.0f; c[4*i+1] = ((y * 11) & 255) / 255.0f;"
        "c[4*i+2] = ((x * y) & 255) / 255.0f; c[4*i+3] = 1.0f;",
        "test_colours")
    with gpu.mapped_buffer(vbo, np.float32, (H * W, 4)) as colours:
        assert isinstance(colours, cupy.ndarray)
        colour_kernel(np.int32(W), colours, size=H * W)
    assert np.array_equal(_render(canvas, program, "points"), _pattern_rgba(np))
    assert gpu.uploads["interop"] == 1 and gpu.uploads["host"] == 0

    # upload_buffer through interop: the same colours from a CuPy array.
    vbo2 = gloo.VertexBuffer(np.zeros((H * W, 4), np.float32))
    program2 = _points_program(vbo2)
    _render(canvas, program2, "points")
    colours = cupy.asarray(_pattern_rgba(np).reshape(-1, 4) / 255.0, dtype=cupy.float32)
    assert gpu.upload_buffer(vbo2, colours) == "interop"
    assert np.array_equal(_render(canvas, program2, "points"), _pattern_rgba(np))


def _device_pictures(cupy, shape):
    """(name, picture) of every encoder with a CUDA twin, arrays on the GPU: Ising with and without masks, a
    real field (float64, NaN and infinities included) with a highlight, and Ising spins that start one byte
    past a 4-byte boundary (one cell a thread)."""
    from latticelab.sim.models.ising.picture import ising_picture
    from latticelab.sim.picture import scalar_picture

    rng = np.random.default_rng(21)
    spins = cupy.asarray(np.where(rng.random(shape) < 0.5, 1, -1).astype(np.int8))
    flipped, rewired = (cupy.asarray(rng.random(shape) < q) for q in (0.2, 0.1))
    values = rng.normal(0.0, 1.0, shape)
    values.flat[:4] = (np.nan, np.inf, -np.inf, 1.5)
    misaligned = cupy.empty(spins.size + 1, cupy.int8)[1:].reshape(shape)
    misaligned[...] = spins
    return [("ising", ising_picture(cupy, spins, flipped, rewired)),
            ("ising without masks", ising_picture(cupy, spins)),
            ("scalar", scalar_picture(cupy, cupy.asarray(values), -1.5, 1.5, highlight=flipped)),
            ("ising, misaligned spins", ising_picture(cupy, misaligned, None, rewired))]


@pytest.mark.gpu
@pytest.mark.parametrize("wide", [4, 1])
def test_the_one_pass_kernel_writes_the_codes_of_the_picture_into_the_texture(canvas, monkeypatch, wide):
    """render/interop.py: encode_into_texture -- the encoder's cell_code (or cell_code4) composed with the
    surface writer -- stores exactly ``picture.codes()``, in 2D and 3D, four cells a thread or one."""
    pytest.importorskip("OpenGL", reason="VisPy's Texture3D needs PyOpenGL")
    import cupy
    from vispy import gloo

    gpu = _interop_canvas(canvas)
    if wide == 1:  # as for arrays that do not start 4-byte aligned
        kernel_arrays = interop.kernel_arrays
        monkeypatch.setattr(interop, "kernel_arrays", lambda xp, arrays: (kernel_arrays(xp, arrays)[0], False))
    widths = []
    launch_encode = interop.launch_encode
    monkeypatch.setattr(interop, "launch_encode", lambda *args: (widths.append(args[-1]), launch_encode(*args)))

    for name, picture in _device_pictures(cupy, (H, W)):
        texture = gloo.Texture2D(np.zeros((H, W, 1), np.uint8), format="red", internalformat="r8",
                                 interpolation="nearest")
        program = _quad_program(RED_FRAG, texture)
        assert gpu.try_picture(texture, picture), name
        expected = cupy.asnumpy(picture.codes())
        assert len(np.unique(expected)) >= (2 if "without" in name else 4), name
        np.testing.assert_array_equal(_render(canvas, program)[..., 0], expected, err_msg=name)
        assert widths[-1] == (1 if "misaligned" in name else wide), name

    D = 5
    for name, picture in _device_pictures(cupy, (D, H, W)):
        texture = gloo.Texture3D(np.zeros((D, H, W, 1), np.uint8), format="red", internalformat="r8",
                                 interpolation="nearest")
        program = _quad_program(SLICE_FRAG, texture)
        assert gpu.try_picture(texture, picture), name
        expected = cupy.asnumpy(picture.codes())
        for z in range(D):
            program["u_z"] = (z + 0.5) / D
            np.testing.assert_array_equal(_render(canvas, program)[..., 0], expected[z], err_msg=f"{name}, z={z}")
    assert gpu.uploads == {"interop": 8, "host": 0}


@pytest.mark.gpu
def test_a_picture_without_a_cuda_twin_is_encoded_first_then_copied(canvas):
    import cupy
    from vispy import gloo

    from latticelab.render.upload import upload_codes
    from latticelab.sim.picture import CellEncoder, Picture

    gpu = _interop_canvas(canvas)
    texture = gloo.Texture2D(np.zeros((H, W, 1), np.uint8), format="red", internalformat="r8",
                             interpolation="nearest")
    program = _quad_program(RED_FRAG, texture)
    _render(canvas, program)  # VisPy creates the GL texture at the first draw: now the canvas owns it
    codes = (cupy.arange(H * W, dtype=cupy.int32).reshape(H, W) * 29 % 256).astype(cupy.uint8)
    raw = CellEncoder("raw", lambda xp, a0, a1, a2, f0, f1: a0)  # no cuda_source
    picture = Picture(cupy, (H, W), raw, (codes,), np.zeros((256, 4), np.float32))
    assert gpu.try_picture(texture, picture) is False
    upload_codes(texture, picture)
    np.testing.assert_array_equal(_render(canvas, program)[..., 0], cupy.asnumpy(codes))
    assert gpu.uploads == {"interop": 1, "host": 0}


LEAK_ROUNDS = 8      # rounds of work at most: a leak loses memory in every one


def _least_memory_lost(work, limit: int) -> int:
    """The least device memory lost over rounds of ``work``, stopping at the first round that lost at most
    ``limit`` bytes. The device's free memory is the whole GPU's: under `pytest -n 8` the other workers allocate
    and free beside this one. A leak of ours loses memory in every round; another process's allocations have to
    fall into every one of the rounds to look like one."""
    losses = []
    for _ in range(LEAK_ROUNDS):
        free_before = _free_device_memory()
        work()
        losses.append(free_before - _free_device_memory())
        if losses[-1] <= limit:
            break
    return min(losses)


def _free_device_memory() -> int:
    import cupy
    from cuda.bindings import runtime

    cupy.cuda.Device().synchronize()
    err, free, _total = runtime.cudaMemGetInfo()
    assert err == runtime.cudaError_t.cudaSuccess
    return int(free)


@pytest.mark.gpu
def test_register_map_unregister_1000_times_leaks_nothing(canvas):
    import cupy
    from cuda.bindings import runtime
    from vispy import gloo

    _interop_canvas(canvas)
    texture = gloo.Texture2D(np.zeros((256, 256, 4), np.uint8))
    vbo = gloo.VertexBuffer(np.zeros((4096, 4), np.float32))
    tex_name = interop.gl_object_name(canvas, texture)
    buf_name = interop.gl_object_name(canvas, vbo)
    discard = runtime.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsWriteDiscard
    source = cupy.zeros((256, 256, 4), cupy.uint8)
    baseline_count = interop.registered_count()

    def cycle():
        image = interop.GraphicsResource(tex_name, interop.GL_TEXTURE_2D, discard)
        interop.copy_into_texture(image, source)
        image.unregister()
        buffer = interop.GraphicsResource(buf_name, None, 0)
        with buffer.mapped():
            ptr, size = buffer.mapped_pointer()
            assert ptr and size == vbo.nbytes
        buffer.unregister()

    for _ in range(20):  # the driver's lazy first-use allocations happen here
        cycle()

    def thousand_cycles():
        for _ in range(1000):
            cycle()
        assert interop.registered_count() == baseline_count

    lost = _least_memory_lost(thousand_cycles, limit=2 * 2**20)
    assert lost <= 2 * 2**20, f"every round lost memory, at least {lost / 2**20:.1f} MiB"


@pytest.mark.gpu
def test_registration_cache_follows_resizes_and_deletes_without_leaking(canvas):
    import cupy
    from vispy import gloo

    gpu = _interop_canvas(canvas)
    texture = gloo.Texture2D(np.zeros((8, 8, 1), np.uint8), format="red", internalformat="r8")
    program = _quad_program(RED_FRAG, texture)
    baseline = interop.registered_count()
    sizes = [(64, 64), (96, 32)]
    for i in range(1000):
        state = cupy.full(sizes[i % 2], i % 256, cupy.uint8)
        assert gpu.upload_texture(texture, state) == "interop"
        assert gpu.resources() == 1 and interop.registered_count() == baseline + 1
    assert _render(canvas, program)[0, 0, 0] == 999 % 256

    def textures_that_die():
        for i in range(200):  # new texture objects that die: their registrations must go with them
            temporary = gloo.Texture2D(np.zeros((64, 64, 1), np.uint8), format="red", internalformat="r8")
            gpu.upload_texture(temporary, cupy.zeros((64, 64), cupy.uint8))
            del temporary
        gpu.upload_texture(texture, cupy.zeros((64, 64), cupy.uint8))  # drops the dead ones still cached
        canvas.context.flush_commands()
        assert gpu.resources() == 1 and interop.registered_count() == baseline + 1

    lost = _least_memory_lost(textures_that_die, limit=4 * 2**20)
    assert lost <= 4 * 2**20, f"every round lost memory, at least {lost / 2**20:.1f} MiB"
    gpu.release()
    assert interop.registered_count() == baseline


@pytest.mark.gpu
def test_a_model_built_ahead_has_its_texture_writers_compiled():
    """app/preparing.py builds a new model on a worker thread and compiles there what its first frame needs,
    the view's texture writers included: the swap on the GUI thread then finds the encoder's module compiled."""
    from latticelab.app import preparing
    from latticelab.sim.models import get_model

    cls = get_model("cahn-hilliard")
    model = preparing.build_model(cls, cls.Params.create(gpu=True, dim=2, L=64), "cuda")
    encoder = model.picture(None, False).encoder
    assert encoder.cuda_source is not None
    cupy = interop._cuda_modules()[0]
    compiled = [key for key in interop._surface_modules if key[0] == id(cupy.RawModule) and key[1] == encoder.name]
    assert compiled, sorted(map(str, interop._surface_modules))


def test_host_data_never_probes_cuda(canvas, monkeypatch):
    """Host arrays go through host memory without asking whether interop works: the probe imports CuPy and makes
    a CUDA context (0.8-1.2 s on the GUI thread at the first picture of a NumPy model on a GPU machine)."""
    from vispy import gloo

    def no_probe(self):
        raise AssertionError("CUDA probed for a host upload")

    monkeypatch.setattr(interop.CanvasInterop, "_probe", no_probe)
    gpu = interop.interop_for(canvas)
    texture = gloo.Texture2D(np.zeros((H, W, 1), np.uint8), format="red", internalformat="r8",
                             interpolation="nearest")
    program = _quad_program(RED_FRAG, texture)
    _render(canvas, program)                       # the texture now belongs to the canvas
    state = (np.arange(H * W).reshape(H, W) % 251).astype(np.uint8)
    assert gpu.upload_texture(texture, state) == "host"
    assert not gpu._decided
    assert np.array_equal(_render(canvas, program)[..., 0], state)
