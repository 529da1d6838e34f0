"""Refuse lattices that cannot fit in the chosen backend's memory, before allocating anything."""
from __future__ import annotations

import os

from latticelab.sim.params import ParameterError

# Working set of the vectorised updates per site: spins, a float32 random, the field, masks and temporaries.
BYTES_PER_SITE = 24


def available_bytes(backend) -> int:
    if backend.is_gpu:
        free, _total = backend.xp.cuda.runtime.memGetInfo()
        return int(free)
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 1 << 62


def check_fits(dim: int, L: int, backend) -> None:
    need = BYTES_PER_SITE * L ** dim
    have = available_bytes(backend)
    if need > have:
        where = f"GPU {backend.device_name}" if backend.is_gpu else "host memory"
        raise ParameterError("L", f"a {dim}D lattice of side {L} needs about {need / 2**30:.1f} GiB; "
                                  f"only {have / 2**30:.1f} GiB is free on the {where}; choose a smaller L")
