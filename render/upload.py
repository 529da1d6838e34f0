"""The one path from simulation arrays (NumPy or CuPy) to OpenGL objects.

Every view hands its data to the functions here and nowhere else, so the GPU-resident path
(CUDA-OpenGL interop, render/interop.py) can replace the host copy below without any view changing.

State encoding (one uint8 per site, decoded in shaders/state_colour.glsl):
    bit 0  spin up (+1)
    bit 1  flipped in the last step (highlight)
    bit 2  site touched by rewiring
"""
from __future__ import annotations

import numpy as np

from latticelab.render import interop

SPIN_UP = 1
FLIPPED = 2
REWIRED = 4


def encode_state(xp, spins, flipped=None, rewired_mask=None):
    """uint8 state codes for a spin array of any shape, computed by ``xp`` where the spins live."""
    if xp is not np and hasattr(xp, "ElementwiseKernel"):  # CuPy: one fused kernel instead of five array passes
        return _encode_kernel(xp)(spins, False if flipped is None else flipped,
                                  False if rewired_mask is None else rewired_mask)
    state = (spins > 0).astype(xp.uint8)
    if flipped is not None:
        state |= flipped.astype(xp.uint8) << 1
    if rewired_mask is not None:
        state |= rewired_mask.astype(xp.uint8) << 2
    return state


_encode_kernels: dict = {}


def _encode_kernel(cupy):
    """The CuPy kernel behind encode_state (compiled once per process)."""
    if "state" not in _encode_kernels:
        _encode_kernels["state"] = cupy.ElementwiseKernel(
            "S spin, bool flipped, bool rewired", "uint8 state",
            "state = (spin > 0 ? 1 : 0) | (flipped ? 2 : 0) | (rewired ? 4 : 0)",
            "latticelab_encode_state")
    return _encode_kernels["state"]


def to_host(array) -> np.ndarray:
    """A C-contiguous NumPy copy of a NumPy or CuPy array (NumPy input is not copied when it can be used)."""
    if not isinstance(array, np.ndarray):
        array = array.get()
    return np.ascontiguousarray(array)


def upload_texture(texture, array) -> None:
    """Write a 2D (H, W) or 3D (D, H, W) single-channel array into a gloo Texture2D / Texture3D.

    The texture is resized when the shape changes (the GL storage is then new: interop must register again).
    """
    if array.ndim != texture._ndim:
        raise ValueError(f"array: a {texture._ndim}D texture needs a {texture._ndim}D array; got shape {array.shape}")
    if interop.try_upload_texture(texture, array):  # CuPy on a CUDA-GL canvas: device-to-device, no host copy
        return
    host = to_host(array)[..., np.newaxis]
    if tuple(texture.shape) != host.shape:
        texture.resize(host.shape)
    texture.set_data(host)


def upload_state(texture, xp, spins, flipped=None, rewired_mask=None) -> None:
    """Show spins (and optional bool masks) as state codes in an r8 texture: ``upload_texture(texture,
    encode_state(...))``, except that CuPy arrays on a CUDA-GL canvas are encoded straight into the texture
    by one kernel (render/interop.py), with no intermediate array and no host copy."""
    if interop.try_upload_state(texture, spins, flipped, rewired_mask):
        return
    upload_texture(texture, encode_state(xp, spins, flipped, rewired_mask))


def upload_buffer(vbo, array) -> None:
    """Write an (N, k) float32 array into a gloo VertexBuffer (resizing it when N changes)."""
    if not isinstance(array, np.ndarray):
        device = array.astype("float32", copy=False)
        if interop.try_upload_buffer(vbo, device[:, None] if device.ndim == 1 else device):
            return
    host = to_host(array).astype(np.float32, copy=False)
    if host.ndim == 1:
        host = host[:, np.newaxis]
    vbo.set_data(host)
