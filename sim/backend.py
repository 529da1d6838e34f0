"""The one place that picks the array module (NumPy or CuPy) for a run, and the two array helpers every
layer uses: ``array_module(array)`` (which module owns an array) and ``to_numpy(array)`` (a host copy).

Everything else receives the chosen module as ``xp``; nothing else imports CuPy at import time.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from types import ModuleType

import numpy

log = logging.getLogger(__name__)

BACKENDS = ("auto", "cuda", "numpy")


class BackendError(ValueError):
    """The requested backend cannot be used; the message says why."""


@dataclass(frozen=True)
class Backend:
    xp: ModuleType
    name: str          # "numpy" or "cuda"
    device_name: str   # "CPU" or the CUDA device's name
    reason: str        # why this backend was chosen

    @property
    def is_gpu(self) -> bool:
        return self.name == "cuda"


def _probe_cuda() -> tuple[ModuleType | None, str]:
    """Return (cupy, device name) if a CUDA device is usable, else (None, reason)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising on import
        return None, f"CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        if count < 1:
            return None, "no CUDA device is present"
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        (cupy.arange(4, dtype=cupy.int32) * 2).sum().item()  # a kernel really runs
        name = props["name"]
        return cupy, name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:
        return None, f"CUDA is not usable ({type(exc).__name__}: {exc})"


_cuda_cache: tuple[ModuleType | None, str] | None = None


def _cuda() -> tuple[ModuleType | None, str]:
    global _cuda_cache
    if _cuda_cache is None:
        _cuda_cache = _probe_cuda()
    return _cuda_cache


def select_backend(name: str = "auto") -> Backend:
    """Pick the array module: ``auto`` (CuPy when a CUDA device is usable, else NumPy), ``cuda`` or ``numpy``."""
    if not isinstance(name, str) or name not in BACKENDS:
        raise BackendError(f"backend must be one of {', '.join(BACKENDS)}; got {name!r}")
    if name == "numpy":
        return Backend(numpy, "numpy", "CPU", "NumPy was requested")
    cupy, detail = _cuda()
    if cupy is not None:
        backend = Backend(cupy, "cuda", detail, f"CUDA device {detail} is usable")
    elif name == "cuda":
        raise BackendError(f"backend 'cuda' is not usable: {detail}; use backend 'numpy' or 'auto'")
    else:
        backend = Backend(numpy, "numpy", "CPU", f"using NumPy because {detail}")
    log.info("array backend: %s (%s)", backend.name, backend.reason)
    return backend


def initialise_gpu_libraries(xp) -> list[str]:
    """Initialise, on the calling thread, the CUDA libraries that models and analyses load on their first use
    (cuFFT: spectra, structure factors, spectral integrators; cuRAND: random streams), and return their names;
    nothing off CUDA.

    Why: a library's first use in a process loads its modules into the CUDA context and holds the context's
    lock meanwhile. Made first by a worker thread (a model being built while the window runs another), it
    blocked the GUI thread's CUDA calls: a first cuFFT transform on one thread stopped another thread's kernel
    launches for a large part of a second, and after a tiny plan made here only for a few milliseconds
    (docs/design/window-gpu.md). The application calls this once, before its window shows."""
    if xp is numpy:
        return []
    from cupy.cuda import cufft, curand
    done = []
    cufft.Plan1d(8, cufft.CUFFT_Z2Z, 1)          # cufftCreate and a plan: the library's modules are loaded
    done.append(f"cuFFT {cufft.getVersion()}")
    generator = curand.createGenerator(curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)
    curand.destroyGenerator(generator)
    done.append(f"cuRAND {curand.getVersion()}")
    xp.cuda.Device().synchronize()
    return done


def array_module(array) -> ModuleType:
    """numpy or cupy, whichever owns ``array``; anything that is not a CuPy array (NumPy arrays and scalars,
    Python numbers, lists) belongs to numpy.

    CuPy is never imported here: an array can only be CuPy's once CuPy has been imported by someone else.
    """
    if isinstance(array, numpy.ndarray):
        return numpy
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy
    return numpy


def to_numpy(array) -> numpy.ndarray:
    """A C-contiguous NumPy array with the values of a NumPy or CuPy array (or anything ``numpy.asarray``
    takes): CuPy arrays are copied to the host; NumPy input is returned as it is when already C-contiguous
    (so callers that will modify the result and need their own copy call ``.copy()``)."""
    if not isinstance(array, numpy.ndarray):
        on_device = array_module(array) is not numpy or (
            hasattr(array, "__cuda_array_interface__") and hasattr(array, "get"))   # CuPy-like device arrays
        array = array.get() if on_device else numpy.asarray(array)
    if array.flags.c_contiguous:
        return array
    return numpy.ascontiguousarray(array)
