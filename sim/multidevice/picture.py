"""The picture of a model split over devices, drawn as one (issue 40).

A split model hands the view a ``Picture`` (sim/picture.py) whose ``slabs`` is a ``SlabbedPicture``: per part,
a function that makes the picture of the slow indices the part owns, with its arrays on the part's device.
``SlabbedPicture.codes(step, device)`` assembles the whole picture's byte codes:

- each part encodes its own slab where the slab lives (the model's encoder, on the part's update stream, so
  after its sweeps) -- reduced there when ``step`` > 1: only the cells whose every global index is a multiple
  of ``step`` are kept, so a view with fewer pixels than the lattice has cells receives a picture its size;
- the slabs' codes are copied into one array on the display device (``device``: a CUDA device id; a peer copy
  from the other GPUs) or on the host (``device`` None), rows in global order. The window writes that array
  into its texture (render/upload.py).

On the CPU the parts are NumPy slabs and the copies plain assignments: the same code assembles the picture, so
the tests check on the CPU what the GPUs run. ``reduction_step`` picks the step from the view's size.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from latticelab.sim.multidevice.exchange import MEMCPY_DEFAULT



def kept_range(start: int, stop: int, step: int) -> tuple[int, int]:
    """(first, count): the first global index >= ``start`` that is a multiple of ``step``, and how many such
    indices lie in ``start .. stop - 1``."""
    first = start + (-start) % step
    return first, max(0, -(-(stop - first) // step))


def kept_slices(first: int, count: int, step: int, ndim: int) -> tuple[slice, ...]:
    """The index of ``count`` slow indices from ``first`` on, ``step`` apart, and of every ``step``-th cell along
    the other ``ndim - 1`` axes."""
    return (slice(first, first + step * count, step),) + (slice(None, None, step),) * (ndim - 1)


def host_rows(mask: np.ndarray, part, start: int, stop: int, step: int):
    """The cells of a host array of the whole lattice that the slab owning ``start .. stop - 1`` shows at
    ``step``, copied to ``part``'s device (call inside ``part.use()``)."""
    first, count = kept_range(start, stop, step)
    return part.xp.asarray(np.ascontiguousarray(mask[kept_slices(first, count, step, mask.ndim)]))


def whole_picture(slabs: "SlabbedPicture", sample):
    """The Picture (sim/picture.py) of a split lattice: the palette, key and range of ``sample`` (a picture made
    the way the slabs' are, of any shape), the shape and codes of ``slabs``."""
    return dataclasses.replace(sample, xp=np, shape=tuple(slabs.shape), arrays=(), slabs=slabs)


def reduced_shape(shape, step: int) -> tuple[int, ...]:
    """The shape of a picture of ``shape`` keeping every ``step``-th cell along each axis (from index 0)."""
    return tuple(-(-int(n) // step) for n in shape)


def reduction_step(shape, pixels) -> int:
    """The largest power of two k dividing both sides of a 2D ``shape`` (H, W) such that the picture reduced
    by k still has at least the view's ``pixels`` (width, height) along each axis; 1 for 3D pictures and for
    views at least as large as the picture."""
    if len(shape) != 2 or not pixels:
        return 1
    height, width = (int(n) for n in shape)
    px, py = (max(1, int(p)) for p in pixels)
    k = 1
    while height % (2 * k) == 0 and width % (2 * k) == 0 and height // (2 * k) >= py and width // (2 * k) >= px:
        k *= 2
    return k


@dataclass(frozen=True)
class PictureSlab:
    """One part's share of a split picture: it owns global slow indices ``start .. stop - 1``, and
    ``picture(step)`` is the Picture (sim/picture.py) of the kept ones (``kept_range``), every ``step``-th cell
    along the other axes, with its arrays on ``part``'s device (sim/multidevice/exchange.py: Part)."""
    part: Any
    start: int
    stop: int
    picture: Callable[[int], Any]


@dataclass(frozen=True)
class SlabbedPicture:
    """The slabs of a picture of ``shape`` split along its first axis (see the module docstring)."""
    shape: tuple[int, ...]
    slabs: tuple[PictureSlab, ...]

    def codes(self, step: int = 1, device: int | None = None):
        """uint8 codes of the whole picture, reduced by ``step``: a host array (``device`` None) or a CuPy array
        on CUDA device ``device``, ready on that device's current stream."""
        if step > 1 and len(self.shape) != 2:
            raise ValueError(f"step: only 2D pictures are reduced; got step {step} for shape {self.shape}")
        out_shape = reduced_shape(self.shape, step)
        cuda = device is not None
        xp = self.slabs[0].part.xp if cuda else np
        if cuda:
            with xp.cuda.Device(device):
                out = xp.empty(out_shape, dtype=xp.uint8)
                display = xp.cuda.get_current_stream()
                allocated = xp.cuda.Event(disable_timing=True)
                allocated.record(display)
        else:
            out = np.empty(out_shape, dtype=np.uint8)
        for slab in self.slabs:
            first, count = kept_range(slab.start, slab.stop, step)
            if not count:
                continue
            row = first // step
            part = slab.part
            with part.use():
                codes = slab.picture(step).codes()
                if not cuda:
                    out[row:row + count] = _to_host(codes)
                    continue
                codes = part.xp.ascontiguousarray(codes)
                target = out[row:row + count]
                if codes.shape != target.shape:
                    raise ValueError(f"slab {slab.start}..{slab.stop}: codes of shape {codes.shape}, expected "
                                     f"{target.shape}")
                part.stream.wait_event(allocated)       # the rows may reuse memory the display stream still reads
                part.xp.cuda.runtime.memcpyAsync(target.data.ptr, codes.data.ptr, codes.nbytes, MEMCPY_DEFAULT,
                                                 part.stream.ptr)
                done = part.event(part.stream)
            with xp.cuda.Device(device):
                display.wait_event(done)
        return out


def _to_host(codes) -> np.ndarray:
    return codes.get() if hasattr(codes, "get") else np.asarray(codes)

