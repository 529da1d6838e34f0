"""Refuse models that cannot fit in the chosen backend's memory, before allocating anything."""
from __future__ import annotations

import os

from latticelab.sim.params import ParameterError

def available_bytes(backend) -> int:
    if backend.is_gpu:
        free, _total = backend.xp.cuda.runtime.memGetInfo()
        return int(free)
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 1 << 62


def check_fits(need_bytes: int, backend, parameter: str, what: str) -> None:
    """Raise ParameterError(parameter) when ``need_bytes`` exceed the free memory of the backend's device;
    ``what`` describes the request in the message ("a 2D lattice of side 8192")."""
    have = available_bytes(backend)
    if need_bytes > have:
        where = f"GPU {backend.device_name}" if backend.is_gpu else "host memory"
        raise ParameterError(parameter, f"{what} needs about {need_bytes / 2**30:.1f} GiB; "
                                        f"only {have / 2**30:.1f} GiB is free on the {where}; choose a smaller {parameter}")
