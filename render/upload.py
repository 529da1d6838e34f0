"""The one path from simulation arrays (NumPy or CuPy) to OpenGL objects.

Every view hands its data to the functions here and nowhere else, so the GPU-resident path
(CUDA-OpenGL interop, render/interop.py) can replace the host copy below without any view changing.

What a model draws arrives as a ``Picture`` (sim/picture.py): one byte code per cell, computed by the model's
encoder, and a 256-colour palette. ``upload_codes`` puts the codes into an r8 texture -- on a CUDA-GL canvas
by one kernel that encodes and stores at once (the model's CUDA ``cell_code`` composed with the surface writer
of render/kernels/texture_surface.cu) -- and ``upload_palette`` the palette into a 256 x 1 RGBA texture that
the fragment shaders read (shaders/palette.glsl). Nothing here knows what the codes mean.
"""
from __future__ import annotations

import numpy as np

from latticelab.render import interop
from latticelab.sim.backend import to_numpy

PALETTE_SIZE = 256


def upload_texture(texture, array) -> None:
    """Write a 2D (H, W) or 3D (D, H, W) single-channel array into a gloo Texture2D / Texture3D.

    The texture is resized when the shape changes (the GL storage is then new: interop must register again).
    """
    if array.ndim != texture._ndim:
        raise ValueError(f"array: a {texture._ndim}D texture needs a {texture._ndim}D array; got shape {array.shape}")
    if interop.try_upload_texture(texture, array):  # CuPy on a CUDA-GL canvas: device-to-device, no host copy
        return
    host = to_numpy(array)[..., np.newaxis]
    if tuple(texture.shape) != host.shape:
        texture.resize(host.shape)
    texture.set_data(host)


def upload_codes(texture, picture, step: int = 1) -> None:
    """A picture's byte codes into an r8 texture of its dimension: ``upload_texture(texture, picture.codes())``,
    except that device arrays on a CUDA-GL canvas are encoded straight into the texture by one kernel (the
    encoder's ``cell_code`` with the surface writer; render/interop.py), with no intermediate array and no host
    copy.

    A picture split over devices (``picture.slabs``) is encoded slab by slab where each slab lives, every
    ``step``-th cell kept (the texture is then smaller than the picture: the view stretches it over the
    picture's cells), and the slabs gathered on the device that writes the texture -- or on the host, which
    uploads them (sim/multidevice/picture.py)."""
    if len(picture.shape) != texture._ndim:
        raise ValueError(f"picture: a {texture._ndim}D texture needs a {texture._ndim}D picture; "
                         f"got shape {tuple(picture.shape)}")
    if picture.slabs is not None:
        # NumPy slabs never probe CUDA (see render/interop.py: _texture_upload)
        on_gpu = picture.slabs.slabs[0].part.cuda
        upload_texture(texture, picture.slabs.codes(step, interop.display_device(texture) if on_gpu else None))
        return
    if interop.try_upload_picture(texture, picture):
        return
    upload_texture(texture, picture.codes())


def upload_palette(texture, palette) -> None:
    """A (256, 4) float RGBA palette (0..1) into a 256 x 1 float RGBA texture (host memory: it is 4 KiB)."""
    host = np.ascontiguousarray(to_numpy(palette), np.float32)
    if host.shape != (PALETTE_SIZE, 4):
        raise ValueError(f"palette: must be ({PALETTE_SIZE}, 4) float; got {host.dtype} {host.shape}")
    texture.set_data(host[np.newaxis])


def upload_buffer(vbo, array) -> None:
    """Write an (N, k) float32 array into a gloo VertexBuffer (resizing it when N changes)."""
    if not isinstance(array, np.ndarray):
        device = array.astype("float32", copy=False)
        if interop.try_upload_buffer(vbo, device[:, None] if device.ndim == 1 else device):
            return
    host = to_numpy(array).astype(np.float32, copy=False)
    if host.ndim == 1:
        host = host[:, np.newaxis]
    vbo.set_data(host)
