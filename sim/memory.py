"""Refuse models that cannot fit in the chosen backend's memory, before allocating anything.

Host memory is the smallest of what the system has free, the cgroup's limit (containers, systemd slices)
less its usage, and the address-space limit (``ulimit -v``) less what this process already maps.
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


def host_available_bytes() -> int:
    """Free host memory this process may use: system free memory, cgroup and ulimit limits."""
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        free = _UNLIMITED
    try:   # MemAvailable counts reclaimable caches too, which SC_AVPHYS_PAGES does not
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = max(free, int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    limits = [free, *(v for v in (cgroup_free_bytes(), address_space_free_bytes()) if v is not None)]
    return min(limits)


def available_bytes(backend) -> int:
    if backend.is_gpu:
        free, _total = backend.xp.cuda.runtime.memGetInfo()
        return int(free)
    return host_available_bytes()


def check_fits(need_bytes: int, backend, parameter: str, what: str) -> None:
    """Raise ParameterError(parameter) when ``need_bytes`` exceed the free memory of the backend's device;
    ``what`` describes the request in the message ("a 2D lattice of side 8192")."""
    have = available_bytes(backend)
    if need_bytes > have:
        where = f"GPU {backend.device_name}" if backend.is_gpu else "host memory"
        raise ParameterError(parameter, f"{what} needs about {need_bytes / 2**30:.1f} GiB; "
                                        f"only {have / 2**30:.1f} GiB is free on the {where}; choose a smaller {parameter}")
