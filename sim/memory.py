"""Refuse models that cannot fit in the chosen backend's memory, before allocating anything.

Each model class estimates its own peak (``Model.estimate_bytes(params, backend_name)``: from the plan --
dimension, size, algorithm or integrator, rewiring p, in-degree k -- including the engine's scratch arrays);
``check_fits(model_cls, params, backend)`` compares that estimate with what is free and raises a
ParameterError naming the size parameter, with the estimate, what is free and the largest size that fits.

Host memory is the smallest of what the system has free (psutil when installed, else /proc/meminfo
MemAvailable), the cgroup's limit (containers, systemd slices) less its usage, and the address-space limit
(``ulimit -v``) less what this process already maps. Device memory is CuPy's free memory on the current device.
"""
from __future__ import annotations

import os
import resource

from latticelab.sim.params import ParameterError

_UNLIMITED = 1 << 62


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if not text or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value < _UNLIMITED else None


def cgroup_free_bytes() -> int | None:
    """The memory this process's cgroup may still use (v2 memory.max or v1 limit_in_bytes), or None."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit = _read_int(limit_file)
        if limit is not None:
            usage = _read_int(usage_file) or 0
            return max(0, limit - usage)
    return None


def address_space_free_bytes() -> int | None:
    """RLIMIT_AS (``ulimit -v``) less this process's current virtual size, or None when unlimited."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        used = 0
    return max(0, soft - used)


def _psutil_available() -> int | None:
    """psutil's available memory (it knows more systems than /proc), or None when psutil is not installed."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        return int(psutil.virtual_memory().available)
    except Exception:   # psutil raises its own errors on exotic systems; fall back to /proc
        return None


def _meminfo_available() -> int | None:
    """MemAvailable of /proc/meminfo (counts reclaimable caches, which SC_AVPHYS_PAGES does not), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_available_bytes() -> int:
    """Free host memory this process may use: system free memory, cgroup and ulimit limits."""
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        free = _UNLIMITED
    system = _psutil_available()
    if system is None:
        system = _meminfo_available()
    if system is not None:
        free = max(free, system) if free < _UNLIMITED else system
    limits = [free, *(v for v in (cgroup_free_bytes(), address_space_free_bytes()) if v is not None)]
    return min(limits)


def device_available_bytes(xp) -> int:
    """Free memory of the current CUDA device (CuPy's runtime; ``xp`` is the cupy module the backend chose)."""
    free, _total = xp.cuda.runtime.memGetInfo()
    return int(free)


def available_bytes(backend, devices=None) -> int:
    """Free memory where the backend's arrays live: the current GPU's, or the host's. With ``devices`` (ids of
    a run split over several GPUs): the least any of them has free."""
    if not backend.is_gpu:
        return host_available_bytes()
    devices = getattr(devices, "here", devices)       # an MPI job's process checks its own device only
    if devices is None or len(devices) < 2:
        return device_available_bytes(backend.xp)
    free = []
    for device in devices:
        with backend.xp.cuda.Device(device):
            free.append(device_available_bytes(backend.xp))
    return min(free)


def _estimate(model_cls, params, backend_name: str, devices) -> int | None:
    n = 1 if devices is None else len(devices)
    if n == 1:
        return model_cls.estimate_bytes(params, backend_name)
    return model_cls.estimate_bytes_per_device(params, backend_name, n)


# The parameter that sets a model's size, the first of these its schema has: the error names it, and the
# largest value that fits is searched over it.
SIZE_PARAMETERS = ("L", "n")


def size_parameter(params) -> str | None:
    return next((name for name in SIZE_PARAMETERS if name in type(params).model_fields), None)


def _resolve(backend):
    """A Backend from a Backend or a backend name ("auto", "cuda", "numpy")."""
    if isinstance(backend, str):
        from latticelab.sim.backend import select_backend
        return select_backend(backend)
    return backend


def largest_size_that_fits(model_cls, params, backend_name: str, have: int, devices=None) -> int | None:
    """The largest value of the size parameter whose estimate is at most ``have`` bytes and that the schema
    accepts with the other parameters as they are (None when even the smallest does not fit). The estimate
    grows with the size, so a bisection finds it; the schema's own rules (even L, r <= L/2) are then met by
    stepping down."""
    size = size_parameter(params)
    if size is None:
        return None

    def need(value: int) -> int:
        # model_copy skips validation: the estimate only reads the fields, and values in between may break
        # rules (odd L) that the final candidate is checked against below
        return _estimate(model_cls, params.model_copy(update={size: value}), backend_name, devices) or 0

    low, high = 1, int(getattr(params, size))
    if need(low) > have:
        return None
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if need(middle) <= have else (low, middle)
    for value in range(low, max(0, low - 64), -1):
        try:
            params.replace(**{size: value})
        except ValueError:
            continue
        return value
    return None


def check_fits(model_cls, params, backend, devices=None) -> int | None:
    """Raise ParameterError naming the size parameter (L) when ``model_cls`` built with ``params`` would not fit
    in the free memory of ``backend`` (a Backend or a backend name): the message gives the estimate, what is
    free and the largest size that fits. Returns the estimate in bytes (None: the model gives none, no check).
    With ``devices`` (the ids of a run split over several GPUs) the estimate and the free memory are each
    device's: a lattice too large for one GPU is accepted on two when each half fits.

    Call it before building anything: the estimate comes from the parameters alone."""
    backend = _resolve(backend)
    need = _estimate(model_cls, params, backend.name, devices)
    if need is None:
        return None
    have = available_bytes(backend, devices) if devices is not None and len(devices) > 1 else available_bytes(backend)
    if need <= have:
        return int(need)
    size = size_parameter(params) or "params"
    where = f"GPU {backend.device_name}" if backend.is_gpu else "host"
    if devices is not None and len(devices) > 1:
        where = f"each of {len(devices)} GPUs {backend.device_name}"
    best = largest_size_that_fits(model_cls, params, backend.name, have, devices)
    advice = (f"the largest {size} that fits is {best}" if best is not None
              else "even the smallest size does not fit")
    current = getattr(params, size, None)
    raise ParameterError(size, f"{model_cls.title} with {size} = {current} needs about {_gib(need)} of {where} "
                               f"memory; only {_gib(have)} is free; choose a smaller {size} ({advice})")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**28 else f"{n / 2**20:.0f} MiB"


def check_change_fits(model_cls, old_params, new_params, backend, parameter: str) -> None:
    """For a live change of a running model (the Ising model's p, the algorithm): refuse, naming ``parameter``,
    when the new plan needs more memory than the old one by more than is free. The running model's own arrays
    are already allocated, so only the difference has to fit."""
    backend = _resolve(backend)
    old = model_cls.estimate_bytes(old_params, backend.name)
    new = model_cls.estimate_bytes(new_params, backend.name)
    if old is None or new is None or new <= old:
        return
    have = available_bytes(backend)
    if new - old > have:
        raise ParameterError(parameter, f"this change needs about {_gib(new - old)} more memory and "
                                        f"{_gib(have)} is free; the model keeps its current value")
