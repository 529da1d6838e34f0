"""CUDA-OpenGL interop: CuPy arrays go straight into VisPy's OpenGL textures and buffers.

The thesis tool (003, section 7.3.1) mapped its colour buffer into CUDA every frame; this module
does the same for VisPy gloo objects. CuPy has no OpenGL interop calls, so the CUDA side goes
through cuda-python's runtime bindings (``cuda.bindings.runtime``): a gloo ``Texture2D`` /
``Texture3D`` is registered with ``cudaGraphicsGLRegisterImage`` and filled through its mapped CUDA
array -- one-byte texels by a kernel storing through a surface object (render/kernels/texture_surface.cu,
which can also compute a picture's byte codes on the way, with the model's own CUDA ``cell_code``: see
``encode_into_texture``), wider ones by a device-to-device copy; a gloo
buffer is registered with ``cudaGraphicsGLRegisterBuffer`` and its mapped memory is handed out as a
CuPy array. Everything runs on CuPy's current stream, so
it is ordered after the simulation kernels; unmapping orders it before the next GL draw.

Per canvas (one GL context) the first upload decides once whether interop can be used, and when
it cannot, logs ONE line saying why and uploads through host memory instead (``cupy.asnumpy`` +
``set_data``): no CUDA; CUDA usable but the GL context is not on the CUDA device (Mesa/llvmpipe,
another GPU); or a registration failed.

All calls belong in the GL thread, outside a draw (they make the canvas's context current)::

    gpu = interop_for(canvas)
    gpu.acquire()                                             # optional: map before the simulation step
    gpu.upload_texture(texture, codes)                        # CuPy or NumPy array
    gpu.try_picture(texture, picture)                         # a Picture's codes, encoded into the texture
    with gpu.mapped_buffer(vbo, numpy.float32, (n, 4)) as colours:
        colour_kernel(spins, colours)                         # writes the GL buffer in place

cupy and cuda.bindings are imported lazily: importing this module needs neither.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import weakref
from pathlib import Path

import numpy as np

from latticelab.sim.backend import to_numpy

log = logging.getLogger(__name__)

MEMCPY_DEFAULT = 4                 # cudaMemcpyDefault: the direction from the pointers (unified addressing)
GL_TEXTURE_2D = 0x0DE1
GL_TEXTURE_3D = 0x806F
ENV_SWITCH = "LATTICELAB_INTEROP"  # "off" (or 0/no/false) forces host uploads


class InteropError(RuntimeError):
    """A CUDA-OpenGL interop step failed; the message names the call and CUDA's error."""


# ----------------------------------------------------------------------------- CUDA access ---

_modules: tuple = ()


def _cuda_modules():
    """(cupy, cuda.bindings.runtime), imported on first use. Raises ImportError without CUDA.

    Kept after the first call: a frame asks for them about 17 times, and each ``import`` statement costs a
    few microseconds of import machinery even when the module is loaded, a noticeable share of a frame of well
    under a millisecond."""
    global _modules
    if not _modules:
        import cupy
        from cuda.bindings import runtime
        _modules = (cupy, runtime)
    return _modules


def _check(result, what: str):
    """Unpack a cuda.bindings result ``(err, *values)``; raise InteropError unless it succeeded."""
    _, rt = _cuda_modules()
    err, *values = result
    if err != rt.cudaError_t.cudaSuccess:
        name = rt.cudaGetErrorName(err)[1]
        text = rt.cudaGetErrorString(err)[1]
        name = name.decode() if isinstance(name, bytes) else name
        text = text.decode() if isinstance(text, bytes) else text
        raise InteropError(f"{what} failed: {name} ({text})")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _stream_handle():
    cupy, _ = _cuda_modules()
    return cupy.cuda.get_current_stream().ptr


def _is_device_array(data) -> bool:
    return hasattr(data, "__cuda_array_interface__") and not isinstance(data, np.ndarray)


_live_resources = 0  # registered and not yet unregistered, process-wide (for leak checks)


def registered_count() -> int:
    """How many CUDA graphics resources this module holds registered right now."""
    return _live_resources


class GraphicsResource:
    """One GL object registered with CUDA: map / unmap / unregister, with every error checked."""

    def __init__(self, gl_name: int, target: int | None, flags: int, signature=None):
        global _live_resources
        _, rt = _cuda_modules()
        self.gl_name = int(gl_name)
        self.target = target              # GL_TEXTURE_2D / GL_TEXTURE_3D, or None for a buffer
        self.signature = signature        # what the GL storage looked like when registered
        self.bytes_per_texel = None       # filled at the first map of an image
        # registered for surface stores: one-byte texels are then written by a kernel, not the copy engine
        surface_flag = rt.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsSurfaceLoadStore
        self.flags_surface = target is not None and flags == surface_flag
        if target is None:
            self._handle = _check(rt.cudaGraphicsGLRegisterBuffer(self.gl_name, flags),
                                  f"cudaGraphicsGLRegisterBuffer(GL buffer {self.gl_name})")
        else:
            self._handle = _check(rt.cudaGraphicsGLRegisterImage(self.gl_name, target, flags),
                                  f"cudaGraphicsGLRegisterImage(GL texture {self.gl_name}, target {target:#x})")
        self._mapped = False
        _live_resources += 1

    @property
    def registered(self) -> bool:
        return self._handle is not None

    @property
    def is_mapped(self) -> bool:
        return self._mapped

    def map(self, stream=None):
        """Map for CUDA on ``stream`` (CuPy's current stream by default), unless it is mapped already."""
        _, rt = _cuda_modules()
        if self._handle is None:
            raise InteropError(f"GL object {self.gl_name} is no longer registered")
        if self._mapped:
            return
        stream = _stream_handle() if stream is None else stream
        _check(rt.cudaGraphicsMapResources(1, self._handle, stream), "cudaGraphicsMapResources")
        self._mapped = True

    def unmap(self, stream=None):
        """Give the object back to OpenGL (no-op when it is not mapped)."""
        _, rt = _cuda_modules()
        if not self._mapped or self._handle is None:
            return
        self._mapped = False
        stream = _stream_handle() if stream is None else stream
        _check(rt.cudaGraphicsUnmapResources(1, self._handle, stream), "cudaGraphicsUnmapResources")

    @contextlib.contextmanager
    def mapped(self, stream=None):
        """Mapped for CUDA inside the block (on entry, unless ``map`` did it earlier); unmapped on exit."""
        self.map(stream)
        try:
            yield self
        finally:
            self.unmap(stream)

    def mapped_array(self):
        """The cudaArray_t of a mapped texture (level 0), with its texel size checked once."""
        _, rt = _cuda_modules()
        array = _check(rt.cudaGraphicsSubResourceGetMappedArray(self._handle, 0, 0),
                       "cudaGraphicsSubResourceGetMappedArray")
        if self.bytes_per_texel is None:
            self.bytes_per_texel, self.extent = 0, None  # 0: unknown, not checked
            try:
                desc, extent, _flags = _check(rt.cudaArrayGetInfo(array), "cudaArrayGetInfo")
                self.bytes_per_texel = (int(desc.x) + int(desc.y) + int(desc.z) + int(desc.w)) // 8
                self.extent = (int(extent.width), int(extent.height), int(extent.depth))
            except InteropError as exc:
                log.debug("no layout check for GL texture %s: %s", self.gl_name, exc)
        return array

    @contextlib.contextmanager
    def surface(self):
        """A CUDA surface object (int handle) over the mapped texture's array, destroyed on exit."""
        _, rt = _cuda_modules()
        description = rt.cudaResourceDesc()
        description.resType = rt.cudaResourceType.cudaResourceTypeArray
        description.res.array.array = self.mapped_array()
        handle = _check(rt.cudaCreateSurfaceObject(description), f"cudaCreateSurfaceObject(GL texture {self.gl_name})")
        try:
            yield int(handle)
        finally:
            _check(rt.cudaDestroySurfaceObject(handle), "cudaDestroySurfaceObject")

    def mapped_pointer(self) -> tuple[int, int]:
        """(device pointer, size in bytes) of a mapped buffer."""
        _, rt = _cuda_modules()
        ptr, size = _check(rt.cudaGraphicsResourceGetMappedPointer(self._handle),
                           "cudaGraphicsResourceGetMappedPointer")
        return int(ptr), int(size)

    def unregister(self):
        global _live_resources
        if self._handle is None:
            return
        _, rt = _cuda_modules()
        try:
            self.unmap()
        finally:
            handle, self._handle = self._handle, None
            _live_resources -= 1
            _check(rt.cudaGraphicsUnregisterResource(handle), f"cudaGraphicsUnregisterResource(GL {self.gl_name})")


def copy_into_texture(resource: GraphicsResource, array, stream=None):
    """Copy a C-contiguous CuPy array (H, W[, C]) or (D, H, W[, C]) into a registered texture."""
    cupy, rt = _cuda_modules()
    stream = _stream_handle() if stream is None else stream
    dims = 3 if resource.target == GL_TEXTURE_3D else 2
    if array.ndim not in (dims, dims + 1):
        raise InteropError(f"a {dims}D texture needs a {dims}D array (optionally with channels), "
                           f"got shape {array.shape}")
    depth, height, width = ((1,) + tuple(array.shape[:2]) if dims == 2 else tuple(array.shape[:3]))
    texel = array.itemsize * (array.shape[-1] if array.ndim == dims + 1 else 1)
    if texel == 1 and resource.flags_surface:
        def launch(surface):
            wide = 4 if width % 4 == 0 and array.data.ptr % 4 == 0 else 1  # 32-bit loads need 4-byte alignment
            units = depth * height * (width // wide)
            kernel = _function(copy_module(cupy), f"copy_to_surface<{dims}, {wide}>")
            kernel((_blocks(units),), (SURFACE_THREADS,),
                   (array, np.uint64(surface), np.int32(width), np.int32(height), np.int64(units)))

        _write_through_surface(resource, array, (depth, height, width), stream, launch)
        return
    with resource.mapped(stream):
        cuda_array = resource.mapped_array()
        _check_extent(resource, texel, array, width, height, depth, dims)
        kind = rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        row = width * texel
        if dims == 2:
            _check(rt.cudaMemcpy2DToArrayAsync(cuda_array, 0, 0, array.data.ptr, row, row, height, kind, stream),
                   "cudaMemcpy2DToArrayAsync")
        else:
            params = rt.cudaMemcpy3DParms()
            params.srcPtr = rt.make_cudaPitchedPtr(array.data.ptr, row, width, height)
            params.dstArray = cuda_array
            params.extent = rt.make_cudaExtent(width, height, depth)
            params.kind = kind
            _check(rt.cudaMemcpy3DAsync(params, stream), "cudaMemcpy3DAsync")


def kernel_arrays(xp, arrays) -> tuple[tuple, bool]:
    """The encoder's array arguments as a kernel takes them, and whether all of them are 4-byte aligned.

    Generic, by dtype: a bool array becomes one byte per cell (0 or 1), a real one float32, any other stays as
    it is; all C-contiguous. An absent array (None) is a null pointer. ``xp``: CuPy, or NumPy for the CPU
    emulator of the kernels (sim/gpu/emulate.py)."""
    arguments, aligned = [], True
    for array in arrays:
        if array is None:
            arguments.append(np.uint64(0))
            continue
        if array.dtype == xp.bool_:
            array = xp.ascontiguousarray(array).view(xp.uint8)
        elif array.dtype.kind == "f":
            array = xp.ascontiguousarray(array.astype(xp.float32, copy=False))
        else:
            array = xp.ascontiguousarray(array)
        pointer = array.data.ptr if hasattr(array.data, "ptr") else array.ctypes.data
        aligned = aligned and pointer % 4 == 0
        arguments.append(array)
    return tuple(arguments), aligned


def encode_into_texture(resource: GraphicsResource, picture, stream=None):
    """Write the byte codes of a picture (sim/picture.py) whose arrays are on the GPU into a registered r8
    texture, in one pass.

    One kernel -- the picture encoder's ``cell_code`` (its ``cuda_source``) composed with ``encode_to_surface``
    of render/kernels/texture_surface.cu -- computes each cell's code from the model's arrays and stores it
    through a surface object: the codes equal ``picture.codes()`` (tests/test_field_view.py), with no
    intermediate array.
    """
    cupy, _ = _cuda_modules()
    dims = 3 if resource.target == GL_TEXTURE_3D else 2
    shape = tuple(int(n) for n in picture.shape)
    if len(shape) != dims:
        raise InteropError(f"picture: a {dims}D texture needs a {dims}D picture; got shape {shape}")
    for array in picture.arrays:
        if array is not None and tuple(array.shape) != shape:
            raise InteropError(f"picture: an array of shape {tuple(array.shape)} in a picture of shape {shape}")
    depth, height, width = (1,) * (3 - dims) + shape
    module = encoder_module(cupy, picture.encoder)
    arrays, aligned = kernel_arrays(cupy, picture.arrays)
    _write_through_surface(resource, f"picture of shape {shape} ({picture.encoder.name})", shape, stream,
                           lambda surface: launch_encode(cupy, module, arrays, picture.scalars, surface, dims,
                                                         (depth, height, width), 4 if aligned else 1))


def launch_encode(xp, module, arrays, scalars, surface: int, dims: int, shape, wide: int = 4) -> None:
    """Launch ``encode_to_surface<dims, 4 or 1>`` of an ``encoder_module`` over a (depth, height, width) surface.

    ``arrays`` as ``kernel_arrays`` gives them; ``wide`` 4 (four cells a thread, used only where the width is a
    multiple of 4) or 1. On CuPy's current stream; ``xp`` may be the CPU emulator (tests)."""
    depth, height, width = shape
    wide = 4 if wide == 4 and width % 4 == 0 else 1
    units = depth * height * (width // wide)
    f0, f1 = (np.float32(value) for value in scalars)
    kernel = _function(module, f"encode_to_surface<{dims}, {wide}>")
    kernel((_blocks(units),), (SURFACE_THREADS,),
           (*arrays, f0, f1, np.uint64(surface), np.int32(width), np.int32(height), np.int64(units)))


class _RawStream:
    """A bare cudaStream_t handle, seen through the CUDA stream protocol (for cupy.cuda.Stream.from_external)."""

    def __init__(self, handle: int):
        self.handle = int(handle)

    def __cuda_stream__(self):
        return 0, self.handle


def _write_through_surface(resource: GraphicsResource, what: str, shape, stream, launch):
    """Map ``resource``, check it against one-byte texels of ``shape`` ((H, W) or (D, H, W); ``what`` names
    them in errors), and call ``launch(surface)`` on ``stream`` (CuPy's current one by default, the stream the
    mapping is ordered on) to run a surface kernel."""
    cupy, _ = _cuda_modules()
    dims = 3 if resource.target == GL_TEXTURE_3D else 2
    depth, height, width = (1,) * (3 - len(shape)) + tuple(shape)
    current = _stream_handle()
    stream = current if stream is None else stream
    on_stream = contextlib.nullcontext() if stream == current else cupy.cuda.Stream.from_external(_RawStream(stream))
    with resource.mapped(stream), resource.surface() as surface, on_stream:
        _check_extent(resource, 1, what, width, height, depth, dims)
        launch(surface)


def _check_extent(resource, texel, what, width, height, depth, dims):
    """Raise InteropError unless the mapped texture's texel size and extent fit the data (``what`` describes
    it: an array, or a string; first map: unknown)."""
    if not isinstance(what, str):
        what = f"the array ({what.dtype}, shape {what.shape})"
    if resource.bytes_per_texel and resource.bytes_per_texel != texel:
        raise InteropError(
            f"texture GL {resource.gl_name} stores {resource.bytes_per_texel} bytes per texel but {what} "
            f"gives {texel}; give the texture a matching internalformat")
    if resource.extent is not None and (resource.extent[:2] != (width, height)
                                        or (dims == 3 and resource.extent[2] != depth)):
        raise InteropError(f"texture GL {resource.gl_name} has extent {resource.extent}, "
                           f"{what} needs {(width, height, depth)}")


SURFACE_KERNELS = Path(__file__).resolve().parent / "kernels" / "texture_surface.cu"
SURFACE_THREADS = 256
SURFACE_OPTIONS = ("--std=c++17",)
_surface_modules: dict = {}
_functions: dict = {}


def _function(module, name: str):
    """``module.get_function(name)``, looked up once per module and name (a frame launches one)."""
    key = (id(module), name)
    if key not in _functions:
        _functions[key] = (module, module.get_function(name))   # the module is kept alive with its function
    return _functions[key][1]
_uncompiled_encoders: set = set()  # encoders whose CUDA source did not compile (logged once each)


def _blocks(units: int) -> int:
    return max(1, min(-(-units // SURFACE_THREADS), 65535))


def copy_module(xp, prelude: str = ""):
    """texture_surface.cu alone: copy_to_surface<2|3, 1|4> (compiled once per process). ``xp``: CuPy, or the CPU
    emulator's stand-in; ``prelude`` goes first (the tests' emulated surface functions)."""
    key = (id(xp.RawModule), None, prelude)
    if key not in _surface_modules:
        from latticelab.sim.gpu.kernels import kernel_source
        names = tuple(f"copy_to_surface<{d}, {w}>" for d in (2, 3) for w in (1, 4))
        _surface_modules[key] = xp.RawModule(code=prelude + "\n" + kernel_source(SURFACE_KERNELS),
                                             options=SURFACE_OPTIONS, name_expressions=names)
    return _surface_modules[key]


def encoder_source(encoder, prelude: str = "") -> str:
    """The CUDA source of the one-pass writer for ``encoder`` (sim/picture.py: CellEncoder): its ``cuda_source``
    (with its local includes inlined) in front of texture_surface.cu, with LATTICELAB_CELL_CODE defined so that
    ``encode_to_surface`` is compiled. ``prelude`` goes first (the tests' emulated surface functions)."""
    from latticelab.sim.gpu.kernels import kernel_source
    if encoder.cuda_source is None:
        raise InteropError(f"encoder {encoder.name!r} has no CUDA source")
    return "\n".join((prelude, "#define LATTICELAB_CELL_CODE 1", kernel_source(Path(encoder.cuda_source)),
                      kernel_source(SURFACE_KERNELS)))


def encoder_module(xp, encoder, prelude: str = ""):
    """The compiled ``encode_to_surface<2|3, 1|4>`` of ``encoder``, cached per encoder (name and source path);
    ``xp``: CuPy, or the CPU emulator's stand-in (sim/gpu/emulate.py: emulated_xp)."""
    key = (id(xp.RawModule), encoder.name, str(encoder.cuda_source), prelude)
    if key not in _surface_modules:
        names = tuple(f"encode_to_surface<{d}, {w}>" for d in (2, 3) for w in (1, 4))
        module = xp.RawModule(code=encoder_source(encoder, prelude), options=SURFACE_OPTIONS,
                              name_expressions=names)
        module.get_function(names[0])  # compiles now, should CuPy defer it: a failure is the caller's to handle
        _surface_modules[key] = module
    return _surface_modules[key]


def prepare_picture_kernels(picture) -> bool:
    """Compile now the kernels that write ``picture`` into a texture: its encoder's one-pass writer and the plain
    copy (NVRTC: a few hundred ms with a cold cache). Meant for the thread that builds a new model
    (app/preparing.py), so that the first frame after the swap, on the GUI thread, compiles nothing. Compiled
    modules are kept per process, as when a frame compiles them. True when the encoder's writer is ready; False
    (nothing raised) without CuPy, for an encoder with no CUDA source, or when its source does not compile (the
    frame then logs that and takes the two-pass path, as it would have)."""
    encoder = picture.encoder
    try:
        cupy = _cuda_modules()[0]
    except ImportError:
        return False
    try:
        copy_module(cupy).get_function("copy_to_surface<2, 1>")
        if encoder.cuda_source is None or encoder.name in _uncompiled_encoders:
            return False
        encoder_module(cupy, encoder)
        return True
    except Exception as exc:      # reported by the frame that needs it
        log.debug("could not compile the texture writers ahead (%s: %s)", type(exc).__name__, exc)
        return False


# ------------------------------------------------------------------- VisPy's private side ---

def gl_object_name(canvas, gloo_object) -> int:
    """The OpenGL name (``glGenTextures``/``glGenBuffers`` id) of a gloo object in ``canvas``.

    PRIVATE VisPy API (vispy 0.17): gloo objects only know their GLIR id; the real GL name lives in
    the context's GLIR parser. This is the only place in the project that reaches for it. It joins
    the object's pending GLIR commands to the canvas's queue and runs them, so the GL storage exists
    with its current size. The canvas's GL context must be current.
    """
    context = canvas.context
    queue = getattr(gloo_object, "glir", None)
    if queue is None:
        raise InteropError(f"{gloo_object!r} has been deleted")
    context.glir.associate(queue)
    context.flush_commands()
    glir_object = context.shared.parser.get_object(gloo_object.id)
    handle = getattr(glir_object, "handle", None)
    if not handle:
        raise InteropError(f"VisPy has no GL object for {gloo_object!r} in this canvas")
    return int(handle)


def owning_canvas(gloo_object):
    """The live canvas whose GL context holds (or will create) ``gloo_object``; None if none yet.

    PRIVATE VisPy API (vispy 0.17), like gl_object_name: VisPy keeps the canvases that were made
    current in ``vispy.gloo.context.canvasses``; an object belongs to a canvas once that canvas's
    GLIR parser knows its id, or once its command queue has been joined to the canvas's queue.
    """
    from vispy.gloo import context as gloo_context
    queue = getattr(gloo_object, "glir", None)
    if queue is None:
        return None
    for ref in reversed(gloo_context.canvasses):
        canvas = ref()
        context = getattr(canvas, "context", None)
        parser = getattr(getattr(context, "shared", None), "parser", None)
        if parser is None:
            continue
        if parser.get_object(gloo_object.id) is not None or queue._shared is context.glir._shared:
            return canvas
    return None


def _make_current(canvas):
    """Make the canvas's GL context current, unless VisPy already has it current.

    Skipping the call when it is current matters inside a draw: ``set_current`` makes the next
    GLIR flush re-bind the canvas's default framebuffer, which would break a render into an FBO.
    """
    from vispy.gloo.context import get_current_canvas
    if get_current_canvas() is not canvas:
        canvas.set_current()


def _gl_identity(canvas) -> tuple[str, str]:
    from vispy.gloo import gl
    _make_current(canvas)
    return str(gl.glGetParameter(gl.GL_VENDOR)), str(gl.glGetParameter(gl.GL_RENDERER))


def _gl_cuda_devices(runtime, count: int) -> list[int]:
    """CUDA devices that drive the current GL context (cudaGLGetDevices)."""
    n, devices = _check(runtime.cudaGLGetDevices(max(count, 1), runtime.cudaGLDeviceList.cudaGLDeviceListAll),
                        "cudaGLGetDevices")
    return [int(d) for d in list(devices)[:n]]


EGL_DEVICE_EXT = 0x322C
EGL_CUDA_DEVICE_NV = 0x323A


def _egl_cuda_device() -> int | None:
    """The CUDA device of the display of VisPy's headless EGL backend (EGL_EXT_device_query with NVIDIA's
    EGL_NV_device_cuda), or None: another backend, an EGL without those extensions, any failure."""
    import ctypes
    import sys
    backend = sys.modules.get("vispy.app.backends._egl")
    display = getattr(backend, "_EGL_DISPLAY", None)
    if display is None:
        return None
    try:
        from vispy.ext import egl
        lookup = egl._lib.eglGetProcAddress
        lookup.restype, lookup.argtypes = ctypes.c_void_p, (ctypes.c_char_p,)
        query_display = lookup(b"eglQueryDisplayAttribEXT")
        query_device = lookup(b"eglQueryDeviceAttribEXT")
        if not (query_display and query_device):
            return None
        signature = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_ssize_t))
        device, cuda = ctypes.c_ssize_t(0), ctypes.c_ssize_t(-1)
        if not signature(query_display)(display, EGL_DEVICE_EXT, ctypes.byref(device)) or not device.value:
            return None
        if not signature(query_device)(ctypes.c_void_p(device.value), EGL_CUDA_DEVICE_NV, ctypes.byref(cuda)):
            return None
        return int(cuda.value) if cuda.value >= 0 else None
    except Exception as exc:         # a best effort: the caller assumes the current device
        log.debug("no CUDA device from EGL: %s: %s", type(exc).__name__, exc)
        return None


def _texture_target(texture) -> int | None:
    from vispy.gloo import Texture2D, Texture3D
    from vispy.gloo.texture import TextureEmulated3D
    if isinstance(texture, Texture3D):
        return GL_TEXTURE_3D
    if isinstance(texture, Texture2D) and not isinstance(texture, TextureEmulated3D):
        return GL_TEXTURE_2D
    return None


def _signature(gloo_object):
    """What decides the GL storage: a change means VisPy re-created it and CUDA must register again."""
    if hasattr(gloo_object, "internalformat"):
        return ("texture", tuple(gloo_object.shape), gloo_object.format, gloo_object.internalformat)
    return ("buffer", int(gloo_object.nbytes))


# ---------------------------------------------------------------------- per-canvas state ---

class CanvasInterop:
    """Interop state of one canvas: whether it is on, why not, and its registration cache.

    The cache maps a gloo object's id to its GraphicsResource; an entry is dropped (unregistered)
    when the object is garbage-collected, deleted, resized, or its GL name changes.
    """

    def __init__(self, canvas):
        self._canvas = weakref.ref(canvas)
        self._decided = False
        self.enabled = False
        self.reason = "not decided yet (no upload so far)"
        self._resources: dict[int, tuple[weakref.ref, GraphicsResource]] = {}
        self._shadows: dict[int, object] = {}  # host-path stand-ins for mapped buffers
        self.uploads = {"interop": 0, "host": 0}  # how each upload went (host: the caller copied from host)
        self._draw_hooked = False
        self.device = None                # the CUDA device the GL context is on (once decided and enabled)
        self._handed: dict = {}           # (slot, shape, dtype) -> buffer on ``device`` for arrays handed over
        self._peers: set = set()          # devices whose peer access to ``device`` is enabled

    # -- deciding ----------------------------------------------------------------------------
    def _probe(self) -> tuple[bool, str]:
        if os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "off", "no", "false"):
            return False, f"switched off by {ENV_SWITCH}={os.environ[ENV_SWITCH]}"
        try:
            cupy, runtime = _cuda_modules()
            count = cupy.cuda.runtime.getDeviceCount()
            device = cupy.cuda.Device().id
        except Exception as exc:  # ImportError, or CUDA raising on a machine without a driver
            return False, f"no CUDA ({type(exc).__name__}: {exc})"
        if count < 1:
            return False, "no CUDA (no CUDA device)"
        vendor, renderer = _gl_identity(self.canvas)
        if "nvidia" not in (vendor + renderer).lower():
            return False, (f"CUDA is usable but the OpenGL context is not on a CUDA device "
                           f"(GL_VENDOR {vendor!r}, GL_RENDERER {renderer!r})")
        try:
            gl_devices = _gl_cuda_devices(runtime, count)
        except InteropError as exc:
            # Some drivers cannot answer for every kind of context (EGL, say); the vendor is NVIDIA, so let
            # the first registration decide: if it fails, that failure is logged and uploads go through host.
            # A headless EGL context says its CUDA device itself; any other is taken to be on the current one.
            egl = _egl_cuda_device()
            self.device = device if egl is None else egl
            log.debug("cudaGLGetDevices gave no answer (%s); trying registration", exc)
            return True, (f"OpenGL context {renderer!r} is on an NVIDIA GPU, "
                          + (f"CUDA device {egl} (its EGL device)" if egl is not None
                             else f"taken to be CUDA device {device}") + f" (cudaGLGetDevices: {exc})")
        if device in gl_devices or not gl_devices:
            self.device = device
            return True, f"OpenGL context {renderer!r} is on CUDA device {device}"
        # The dual-GPU mode: the simulation's device is not the one that draws; each frame's arrays are handed
        # over to the drawing device by peer copy (``_hand_over``) and encoded there.
        self.device = gl_devices[0]
        return True, (f"OpenGL context {renderer!r} is on CUDA device {self.device}, the simulation on device "
                      f"{device}: frames are handed over by peer copy and drawn on device {self.device}")

    def decide(self) -> bool:
        """Decide once (logging why) whether this canvas uses interop; returns the decision."""
        if not self._decided:
            self._decided = True
            self.enabled, self.reason = self._probe()
            if self.enabled:
                log.info("CUDA-OpenGL interop on: %s", self.reason)
            else:
                self._log_off()
        return self.enabled

    def _log_off(self):
        level = logging.INFO if self.reason.startswith(("no CUDA", "switched off")) else logging.WARNING
        log.log(level, "CUDA-OpenGL interop off, uploading through host memory: %s", self.reason)

    def force_host(self, reason: str = "host uploads requested"):
        """Switch this canvas to host uploads for good (logged once); registrations are released."""
        self._decided = True
        if self.enabled or self.reason != reason:
            self.enabled, self.reason = False, reason
            self._log_off()
        self.release()

    def _fail(self, exc: Exception):
        detail = str(exc) if isinstance(exc, InteropError) else f"{type(exc).__name__}: {exc}"
        self.force_host(f"registration or mapping failed ({detail})")

    @property
    def canvas(self):
        canvas = self._canvas()
        if canvas is None:
            raise InteropError("the canvas has been closed")
        return canvas

    # -- registration cache ----------------------------------------------------------------
    def _resource(self, gloo_object, target, flags) -> GraphicsResource:
        self._drop_dead()
        name = gl_object_name(self.canvas, gloo_object)
        signature = (name, _signature(gloo_object))
        entry = self._resources.get(gloo_object.id)
        if entry is not None:
            resource = entry[1]
            if resource.signature == signature and resource.registered:
                return resource
            try:  # its storage was re-created behind our back (a host upload resized it): CUDA may object
                self._unregister(gloo_object.id)
            except InteropError as exc:
                log.debug("unregistering the stale registration of GL object %s: %s", name, exc)
        resource = GraphicsResource(name, target, flags, signature)
        gid = gloo_object.id
        self._resources[gid] = (weakref.ref(gloo_object, lambda _ref, gid=gid: self._on_collected(gid)), resource)
        return resource

    def _on_collected(self, gid: int):
        # Runs while VisPy's DELETE command is still queued, so the GL object still exists. Only
        # unregister at once when this canvas's context is current (no context switch from inside
        # a garbage collection); otherwise the next upload's _drop_dead does it.
        from vispy.gloo.context import get_current_canvas
        canvas = self._canvas()
        if canvas is None or gid not in self._resources or get_current_canvas() is not canvas:
            return
        try:
            self._unregister(gid)
        except Exception as exc:  # never raise from a weakref callback
            log.debug("unregistering collected GL object %s: %s", gid, exc)

    def _drop_dead(self):
        for gid, (ref, _) in list(self._resources.items()):
            obj = ref()
            if obj is None or getattr(obj, "glir", None) is None:
                try:
                    self._unregister(gid)
                except InteropError as exc:  # its GL object may already be gone
                    log.debug("unregistering deleted GL object %s: %s", gid, exc)

    def _unregister(self, gid: int):
        entry = self._resources.pop(gid, None)
        if entry is not None:
            entry[1].unregister()

    def release(self):
        """Unregister everything this canvas registered (call with the canvas still open)."""
        canvas = self._canvas()
        if canvas is not None and self._resources:
            _make_current(canvas)
        errors = []
        with self.on_display_device():
            for gid in list(self._resources):
                try:
                    self._unregister(gid)
                except InteropError as exc:
                    errors.append(str(exc))
        self._shadows.clear()
        self._handed.clear()
        if errors:
            log.debug("release: %s", "; ".join(errors))

    def resources(self) -> int:
        return len(self._resources)

    # -- frame phases ----------------------------------------------------------------------
    def acquire(self) -> None:
        """Map this canvas's registered textures for CUDA now, before the simulation step whose result the
        next upload writes into them, so that the step and the write form one CUDA phase between two GL ones.

        A switch of the GPU between the GL and the CUDA context is what a frame mostly costs: a texture mapped
        after the step would add one (docs/design/rendering.md). An
        upload finds the texture mapped, writes and unmaps it; whatever is still mapped when the canvas draws
        is unmapped first (a hook on the draw event), so a frame without an upload is safe. Off the interop
        path this does nothing.
        """
        if not (self._decided and self.enabled):
            return
        try:
            _make_current(self.canvas)
            self._drop_dead()
            with self.on_display_device():
                for _, resource in self._resources.values():
                    if resource.target is not None:
                        resource.map()
            if not self._draw_hooked:
                self.canvas.events.draw.connect(self._unmap_before_draw, position="first")
                self._draw_hooked = True
        except Exception as exc:
            self._fail(exc)

    def unmap_all(self) -> None:
        """Give every mapped texture back to GL: before a draw that does not come through the canvas's draw
        event (``canvas.render()`` for a screenshot), which would otherwise sample a texture CUDA still holds
        (GL_INVALID_OPERATION, the visual not drawn)."""
        if self._resources:
            _make_current(self.canvas)
            self._unmap_before_draw()

    def _unmap_before_draw(self, event=None) -> None:
        with self.on_display_device():
            for _, resource in list(self._resources.values()):
                try:
                    resource.unmap()
                except InteropError as exc:
                    self._fail(exc)
                    return

    # -- uploads ---------------------------------------------------------------------------
    def try_texture(self, texture, data) -> bool:
        """Copy device ``data`` into a gloo Texture2D/Texture3D through interop.

        ``data`` is (H, W[, C]) or (D, H, W[, C]); a shape change resizes the texture first (VisPy
        then re-creates the GL storage, so it is registered again). Returns False, having done
        nothing, when the caller must upload from host memory instead: interop is off here (the
        reason is logged once), ``data`` is not a CuPy array, or the texture kind is unsupported.
        """
        def write(resource):
            cupy, _ = _cuda_modules()
            copy_into_texture(resource, cupy.ascontiguousarray(self._hand_over(data, "texture")))

        return self._texture_upload(texture, getattr(data, "shape", ()), _is_device_array(data), write)

    def try_picture(self, texture, picture) -> bool:
        """Write the byte codes of a picture (sim/picture.py) into an r8 texture in one pass, when its arrays
        are on the GPU and its encoder has a CUDA twin.

        The same as ``try_texture(texture, picture.codes())`` without the intermediate array (``encode_into_
        texture``). False, having done nothing, when the caller must encode and upload another way: interop is
        off, an array is not a CuPy one, the encoder has no ``cuda_source``, or its source does not compile
        (logged once per encoder; the caller's ``picture.codes()`` then goes through ``try_texture``).
        """
        encoder = picture.encoder
        arrays = [array for array in picture.arrays if array is not None]
        if (encoder.cuda_source is None or not arrays or encoder.name in _uncompiled_encoders
                or len(picture.shape) != getattr(texture, "_ndim", None)):
            return False
        on_device = all(_is_device_array(array) for array in arrays)
        if on_device and self.decide():
            try:
                encoder_module(_cuda_modules()[0], encoder)
            except Exception as exc:  # a model's .cuh that NVRTC refuses: that model's pictures take two passes
                _uncompiled_encoders.add(encoder.name)
                log.warning("one-pass texture writes off for encoder %r (%s: %s); its codes are computed first",
                            encoder.name, type(exc).__name__, str(exc)[-2000:])
                return False
        def write(resource):
            arrays = tuple(None if a is None else self._hand_over(a, i) for i, a in enumerate(picture.arrays))
            encode_into_texture(resource, dataclasses.replace(picture, arrays=arrays))

        return self._texture_upload(texture, tuple(picture.shape), on_device, write,
                                    count_refusal=False)  # the caller's fallback goes through try_texture

    def on_display_device(self):
        """A context in which CuPy's current device is the one the GL context is on (nothing to do until
        decided, or off the interop path)."""
        if self.device is None or not self.enabled:
            return contextlib.nullcontext()
        try:
            return _cuda_modules()[0].cuda.Device(self.device)
        except ImportError:          # CUDA gone since (a test's stand-in): nothing of it is left to unmap
            return contextlib.nullcontext()

    def _hand_over(self, array, slot):
        """``array`` on the display device: itself when it is there already; else (the dual-GPU mode: the model
        runs on another GPU) a peer copy into a buffer kept there for ``slot``, queued on the array's device's
        current stream -- after the steps that made it, and before any later ones that change it -- and waited
        for by the display device's current stream. The simulating GPU only runs the copy (its copy engine)."""
        cupy, _ = _cuda_modules()
        source = array.device.id
        if source == self.device:
            return array
        if source not in self._peers:
            from latticelab.sim.multidevice.exchange import enable_peer_access
            enable_peer_access(cupy, (source, self.device))
            self._peers.add(source)
        key = (slot, tuple(array.shape), array.dtype.str)
        buffer = self._handed.get(key)
        if buffer is None:
            self._handed = {k: v for k, v in self._handed.items() if k[0] != slot}
            with cupy.cuda.Device(self.device):
                buffer = cupy.empty(array.shape, dtype=array.dtype)
            self._handed[key] = buffer
        with cupy.cuda.Device(source):
            array = cupy.ascontiguousarray(array)
            stream = cupy.cuda.get_current_stream()
            cupy.cuda.runtime.memcpyAsync(buffer.data.ptr, array.data.ptr, array.nbytes, MEMCPY_DEFAULT, stream.ptr)
            copied = cupy.cuda.Event(disable_timing=True)
            copied.record(stream)
        with cupy.cuda.Device(self.device):
            cupy.cuda.get_current_stream().wait_event(copied)
        return buffer

    def _texture_upload(self, texture, shape, on_device: bool, write, count_refusal: bool = True) -> bool:
        target = _texture_target(texture)
        # host data never probes CUDA: the probe imports CuPy and makes a CUDA context, which takes seconds on
        # the GUI thread at the first picture of a NumPy model on a GPU machine
        if not (on_device and target is not None and self.decide()):
            self.uploads["host"] += count_refusal
            return False
        try:
            with self.on_display_device():
                self._write_texture(texture, shape, target, write)
        except Exception as exc:  # InteropError, or anything unforeseen: the frame must still be drawn
            self._fail(exc)
            self.uploads["host"] += count_refusal
            return False
        self.uploads["interop"] += 1
        return True

    def _write_texture(self, texture, shape, target, write) -> None:
        """Resize ``texture`` to ``shape`` if needed, register it and ``write(resource)``."""
        runtime = _cuda_modules()[1]
        _make_current(self.canvas)
        if _normalised_shape(texture, shape) != tuple(texture.shape):
            self._unregister(texture.id)  # before VisPy re-creates the storage
            texture.resize(_normalised_shape(texture, shape))
        resource = self._resource(texture, target,
                                  runtime.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsSurfaceLoadStore)
        write(resource)

    def try_buffer(self, buffer, data, offset: int = 0) -> bool:
        """Copy device ``data`` into a gloo buffer at byte ``offset`` through interop.

        With offset 0 and a different size the buffer is resized first (and registered again).
        Returns False, having done nothing, when the caller must upload from host memory.
        """
        if not (_is_device_array(data) and self.decide()):
            self.uploads["host"] += 1
            return False
        cupy, runtime = _cuda_modules()
        try:
            with self.on_display_device():
                self._write_buffer(buffer, cupy.ascontiguousarray(self._hand_over(data, "buffer")), offset)
        except Exception as exc:  # InteropError, or anything unforeseen: the frame must still be drawn
            self._fail(exc)
            self.uploads["host"] += 1
            return False
        self.uploads["interop"] += 1
        return True

    def _write_buffer(self, buffer, source, offset: int) -> None:
        """Resize ``buffer`` when ``source`` fills it from offset 0 with another size, register it and copy."""
        runtime = _cuda_modules()[1]
        _make_current(self.canvas)
        nbytes = int(source.nbytes)
        if offset == 0 and nbytes != buffer.nbytes:
            self._unregister(buffer.id)  # before VisPy re-creates the storage
            buffer.resize_bytes(nbytes)
        resource = self._resource(buffer, None, runtime.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsNone)
        with resource.mapped():
            ptr, size = resource.mapped_pointer()
            if offset + nbytes > size:
                raise InteropError(f"{nbytes} bytes at offset {offset} do not fit a {size}-byte buffer")
            _check(runtime.cudaMemcpyAsync(ptr + offset, source.data.ptr, nbytes,
                                           runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice, _stream_handle()),
                   "cudaMemcpyAsync")

    def upload_texture(self, texture, data) -> str:
        """``try_texture``, else a host upload (``set_data``). Returns the path taken: "interop" or "host"."""
        if self.try_texture(texture, data):
            return "interop"
        texture.set_data(to_numpy(data))
        return "host"

    def upload_buffer(self, buffer, data, offset: int = 0) -> str:
        """``try_buffer``, else a host upload. Returns the path taken: "interop" or "host"."""
        if self.try_buffer(buffer, data, offset):
            return "interop"
        host = to_numpy(data)
        if offset == 0 and host.nbytes != buffer.nbytes:
            buffer.set_data(host)
        else:
            buffer.set_subdata(host, offset=offset)
        return "host"

    @contextlib.contextmanager
    def mapped_buffer(self, buffer, dtype, shape=None):
        """Yield the buffer's memory as a CuPy array of ``dtype`` (and ``shape``) to write in place.

        Through interop this is the GL buffer itself. On the host path it is a persistent stand-in
        array (CuPy when available, else NumPy) that is uploaded with ``set_data`` on exit, so the
        caller's code is the same either way.
        """
        dtype = np.dtype(dtype)
        count = buffer.nbytes // dtype.itemsize
        shape = (count,) if shape is None else tuple(shape)
        if int(np.prod(shape)) * dtype.itemsize > buffer.nbytes:
            raise ValueError(f"shape {shape} of {dtype} needs more than the buffer's {buffer.nbytes} bytes")
        if self.decide():
            cupy, runtime = _cuda_modules()
            stack = contextlib.ExitStack()
            try:
                _make_current(self.canvas)
                resource = self._resource(buffer, None, runtime.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsNone)
                stack.enter_context(resource.mapped())
                ptr, size = resource.mapped_pointer()
            except InteropError as exc:
                with contextlib.suppress(InteropError):
                    stack.close()
                self._fail(exc)
            else:
                with stack:  # unmaps on exit, also when the caller's block raises
                    memory = cupy.cuda.UnownedMemory(ptr, size, resource)
                    self.uploads["interop"] += 1
                    yield cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0))
                return
        shadow = self._shadows.get(buffer.id)
        if shadow is None or shadow.shape != shape or shadow.dtype != dtype:
            try:
                xp = _cuda_modules()[0]
                xp.cuda.runtime.getDeviceCount()
            except Exception:
                xp = np
            shadow = xp.zeros(shape, dtype)
            self._shadows[buffer.id] = shadow
        yield shadow
        buffer.set_subdata(to_numpy(shadow), offset=0)
        self.uploads["host"] += 1


def _normalised_shape(texture, shape) -> tuple:
    """The texture shape (with channel axis) that an array of ``shape`` needs."""
    dims = 3 if _texture_target(texture) == GL_TEXTURE_3D else 2
    shape = tuple(int(s) for s in shape)
    return shape + (1,) if len(shape) == dims else shape


_by_context: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def try_upload_texture(texture, data) -> bool:
    """Interop upload into whichever canvas owns ``texture`` (see CanvasInterop.try_texture).

    False (caller uploads from host memory) also when no canvas has used the texture yet: VisPy
    creates the GL object at the first draw, so the very first upload of a new texture is a host one.
    """
    canvas = owning_canvas(texture)
    return canvas is not None and interop_for(canvas).try_texture(texture, data)


def try_upload_picture(texture, picture) -> bool:
    """One-pass upload of a picture's codes into whichever canvas owns ``texture`` (see CanvasInterop.try_picture)."""
    canvas = owning_canvas(texture)
    return canvas is not None and interop_for(canvas).try_picture(texture, picture)


def display_device(texture) -> int | None:
    """The CUDA device that writes ``texture`` through interop (the one its canvas's GL context is on), or None
    when it is written from host memory (no canvas yet, interop off). Decides the canvas's interop if needed."""
    canvas = owning_canvas(texture)
    if canvas is None:
        return None
    state = interop_for(canvas)
    return state.device if state.decide() and _texture_target(texture) is not None else None


def try_upload_buffer(buffer, data, offset: int = 0) -> bool:
    """Interop upload into whichever canvas owns ``buffer`` (see CanvasInterop.try_buffer)."""
    canvas = owning_canvas(buffer)
    return canvas is not None and interop_for(canvas).try_buffer(buffer, data, offset)


def interop_for(canvas) -> CanvasInterop:
    """The interop state of ``canvas`` (one per GL context), created on first use."""
    state = _by_context.get(canvas.context)
    if state is None or state._canvas() is None:
        state = CanvasInterop(canvas)
        _by_context[canvas.context] = state
    return state
