"""``mpirun -n 2 latticelab bench mpi``: the weak-scaling Ising case of ``bench multigpu`` with one process per GPU
(issue 40) against the same GPUs driven by one process, in one run.

Case ``mpi-metropolis-2d-L32768-per-gpu-<n>proc``: a 2D lattice of n x 32768 rows by 32768 columns (32768^2 sites
per GPU, p = 0, T = 2.269), packed Metropolis sweeps in slabs (sim/models/ising/gpu/slabs.py), one slab per MPI
process, halos moved by the job's transport (sim/multidevice/mpi.py). Variants: ``nccl`` (NCCL bootstrapped over
MPI), ``host`` (staged through host memory) and ``cuda-aware`` where the MPI library is. The baseline is
``bench multigpu``'s default variant over the same GPUs (one process: deep halos, multi-GPU CUDA graphs, peer
copies), measured by rank 0 once the job's processes have freed their GPUs; ratio = the best MPI variant's
flips/ns over it (target >= 0.9). Each timed repetition starts and ends with a barrier, so its wall time is the
slowest process's. Rank 0 writes bench/results/mpi-<device>.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from latticelab.bench.common import add_output_arguments, finish
from latticelab.bench.multigpu import T_CRITICAL, _engine, _free, _sweep_rate

CASE = "mpi-metropolis-2d-L32768-per-gpu"
L_PER_GPU = 32768
RATIO_TARGET = 0.9


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sweeps", type=int, default=200, help="sweeps per timed repetition")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions (median reported)")
    parser.add_argument("--small", action="store_true", help="lattices 16x smaller per side (a smoke run)")
    add_output_arguments(parser, "mpi-<device>.json")


def _mpi_rate(cp, job, L: int, rows: int, transport: str, sweeps: int, repeats: int) -> dict:
    """Median flips/ns of the whole job (barriers around each repetition) with halos by ``transport``."""
    from latticelab.sim.models.ising.gpu.slabs import SlabMetropolis
    from latticelab.sim.multidevice.exchange import make_parts
    from latticelab.sim.multidevice.mpi import MpiExchanger
    parts = make_parts(cp, job.devices)
    engine = SlabMetropolis(parts, MpiExchanger(parts, job, transport), 2, L, None, rows=rows)
    engine.load_random(seed=1)
    rates = []
    for repetition in range(repeats + 1):       # the first one warms up
        job.comm.Barrier()
        start = time.perf_counter()
        engine.sweeps(T_CRITICAL, 7, repetition * sweeps, sweeps)
        engine.synchronize()
        job.comm.Barrier()
        if repetition:
            rates.append(engine.n_sites * sweeps / (time.perf_counter() - start) / 1e9)
    result = {"flips_per_ns": statistics.median(rates), "halo_depth": engine.depth}
    del engine, parts
    cp.get_default_memory_pool().free_all_blocks()      # this process's device (the current one)
    return result


def main(args) -> int:
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")     # never NVLink multicast (docs/design/multigpu.md)
    from latticelab.sim.multidevice.mpi import TRANSPORTS, join_job
    from latticelab.sim.params import ParameterError
    try:
        job = join_job("cuda")
    except ParameterError as exc:
        print(f"latticelab bench mpi: {exc}")
        return 2
    except Exception as exc:          # no usable CUDA device
        print(f"latticelab bench mpi needs CUDA GPUs: {exc}")
        return 1
    cp = job.xp
    if job.size < 2:
        print("latticelab bench mpi: start it with at least 2 processes: mpirun -n 2 latticelab bench mpi")
        return 2
    n = job.size
    L = L_PER_GPU // (16 if args.small else 1)
    rows = L * n
    from latticelab.sim.multidevice.mpi import _mpi_is_cuda_aware, _nccl_usable
    usable = {"cuda-aware": _mpi_is_cuda_aware(), "nccl": _nccl_usable(cp), "host": True}
    measured = {}
    for transport in TRANSPORTS:
        if usable[transport]:          # the same libraries in every process of this one-host job
            measured[transport] = _mpi_rate(cp, job, L, rows, transport, args.sweeps, args.repeats)
            if job.root:
                print(f"  {CASE}-{n}proc {transport}: {measured[transport]['flips_per_ns']:.1f} flips/ns", flush=True)
    job.comm.Barrier()
    if not job.root:
        job.comm.Barrier()
        return 0
    engine = _engine(cp, tuple(range(n)), L, rows, "peer", True, True, None)
    one = _sweep_rate(engine, engine.n_sites, args.sweeps, args.repeats)
    one["graphs"] = bool(engine._capture)
    _free(cp, engine)
    del engine
    job.comm.Barrier()
    print(f"  one process over {n} GPUs: {one['flips_per_ns']:.1f} flips/ns", flush=True)
    best = max(measured, key=lambda k: measured[k]["flips_per_ns"])
    value, base = measured[best]["flips_per_ns"], one["flips_per_ns"]
    from latticelab.sim.backend import select_backend
    device = select_backend("cuda").device_name
    case = {"case": f"{CASE}-{n}proc", "metric": "flips_per_ns", "value": round(value, 1),
            "baseline": f"one process over the same {n} GPUs (bench multigpu's split variant)",
            "baseline_value": round(base, 1), "ratio": round(value / base, 3),
            "target": round(RATIO_TARGET * base, 1), "target_met": bool(value / base >= RATIO_TARGET),
            "details": {"lattice": f"{rows} x {L}", "processes": n, "sweeps": args.sweeps, "T": T_CRITICAL,
                        "p": 0.0, "best_transport": best, "job_transport": job.transport,
                        "transports_not_usable_here": [t for t in TRANSPORTS if not usable[t]],
                        **{f"mpi_{k}": v for k, v in measured.items()}, "one_process": one,
                        "ratio_target": RATIO_TARGET}}
    return finish("mpi", device, [case], args, args.small)
