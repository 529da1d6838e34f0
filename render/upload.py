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

SPIN_UP = 1
FLIPPED = 2
REWIRED = 4


def encode_state(xp, spins, flipped=None, rewired_mask=None):
    """uint8 state codes for a spin array of any shape, computed by ``xp`` where the spins live."""
    state = (spins > 0).astype(xp.uint8)
    if flipped is not None:
        state |= flipped.astype(xp.uint8) << 1
    if rewired_mask is not None:
        state |= rewired_mask.astype(xp.uint8) << 2
    return state


def to_host(array) -> np.ndarray:
    """A C-contiguous NumPy copy of a NumPy or CuPy array (NumPy input is not copied when it can be used)."""
    if not isinstance(array, np.ndarray):
        array = array.get()
    return np.ascontiguousarray(array)


def upload_texture(texture, array) -> None:
    """Write a 2D (H, W) or 3D (D, H, W) single-channel array into a gloo Texture2D / Texture3D.

    The texture is resized when the shape changes (the GL storage is then new: interop must register again).
    """
    host = to_host(array)
    if host.ndim != texture._ndim:
        raise ValueError(f"array: a {texture._ndim}D texture needs a {texture._ndim}D array; got shape {host.shape}")
    host = host[..., np.newaxis]
    if tuple(texture.shape) != host.shape:
        texture.resize(host.shape)
    texture.set_data(host)


def upload_buffer(vbo, array) -> None:
    """Write an (N, k) float32 array into a gloo VertexBuffer (resizing it when N changes)."""
    host = to_host(array).astype(np.float32, copy=False)
    if host.ndim == 1:
        host = host[:, np.newaxis]
    vbo.set_data(host)
