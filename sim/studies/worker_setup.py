"""Set-up of a sweep's GPU worker process, run by Dask as a preload module before the worker takes tasks.

A GPU worker is pinned to the CPU cores nearest its GPU (the "CPU Affinity" that ``nvidia-smi topo -m`` reports,
passed in LATTICELAB_CPU_AFFINITY by sweep.local_cluster), as dask-cuda's LocalCUDACluster does: small lattices
are limited by how fast the host enqueues kernels, and a process on the far socket of a two-socket machine
enqueues more slowly.
"""
from __future__ import annotations

import os

AFFINITY_VARIABLE = "LATTICELAB_CPU_AFFINITY"


def parse_cpu_list(text: str) -> set[int]:
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11}; ValueError when malformed."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        lo, hi = int(first), int(last or first)
        if hi < lo:
            raise ValueError(f"CPU range {part!r} runs backwards")
        cpus.update(range(lo, hi + 1))
    if not cpus:
        raise ValueError(f"no CPUs in {text!r}")
    return cpus


def pin_this_process(text: str) -> set[int]:
    """Restrict every thread of this process to the CPUs in ``text`` that exist here; returns them (empty and
    nothing changed when none of them is available)."""
    cpus = parse_cpu_list(text) & os.sched_getaffinity(0)
    if not cpus:
        return set()
    for tid in os.listdir("/proc/self/task"):       # sched_setaffinity(pid) sets one thread on Linux
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass                                    # a thread that ended meanwhile
    return cpus


def dask_setup(worker=None) -> None:
    """Dask's preload hook."""
    text = os.environ.get(AFFINITY_VARIABLE)
    if text and hasattr(os, "sched_setaffinity"):
        try:
            pin_this_process(text)
        except ValueError:
            pass                                    # a malformed value pins nothing rather than failing the worker
