"""``latticelab bench multigpu``: one simulation split over the GPUs of one host against the same code on one.

Cases (issue 38; the 4-GPU twins run where four GPUs are present):

- ``multigpu-metropolis-2d-L32768-per-gpu-<n>gpu``: weak scaling -- a 2D lattice of n x 32768 rows by 32768
  columns (32768^2 sites per GPU, p = 0, T = 2.269), packed Metropolis sweeps in slabs (sim/models/ising/gpu/
  slabs.py); flips_per_ns over all GPUs; baseline: the same slab code on one GPU with 32768^2, ratio = speed-up.
  The details add CudaEngine's own packed sweeps on one GPU (the unsplit path) and the split run's variants:
  ``split`` (the default: 8-row deep halos moved every 8 half-sweeps, sweeps replayed from multi-GPU CUDA
  graphs, peer copies), ``split_halo1`` (one halo row moved every half-sweep, borders first), the same without
  the overlap, direct launches without graphs, and NCCL's send/receive (direct launches).
- ``multigpu-metropolis-2d-L16384-total-<n>gpu``: strong scaling -- one 16384^2 lattice over n GPUs against 1.
- ``multigpu-ch-fd-2d-L16384-total-<n>gpu``, ``multigpu-ch-fd-3d-L512-total-<n>gpu``: Cahn-Hilliard RK2
  finite-difference steps (float64) of one field in slabs (sim/models/cahn_hilliard/slabs.py); steps_per_s,
  ratio against the same slab code on one GPU; the details add the model's own one-GPU stepper.

- the cortex cases (bench/multigpu_cortex.py): ``multigpu-cortex-N2^23-total-2gpu`` (weak scaling, 2^22 neurons
  per GPU, against the model's step at 2^22 on one GPU) and ``multigpu-cortex-N2^22-total-2gpu`` (strong).

A device lacking for a case is said, and the case left out.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from latticelab.bench.common import add_output_arguments, finish, select_cases
from latticelab.bench.multigpu_cortex import CORTEX_CASES, run_cortex_cases

CH_CASES = {
    "multigpu-ch-fd-2d-L16384-total": {"alias": "ch2d", "dim": 2, "L": 16384, "ratio_targets": {2: 1.85}},
    "multigpu-ch-fd-3d-L512-total": {"alias": "ch3d", "dim": 3, "L": 512, "ratio_targets": {2: 1.8}},
}
CH_ARGS = (0.005, 1.0, 1.0, 1.0, 1.0, 1.0)      # dt, m, b, u, K, dx
CASES = {
    "multigpu-metropolis-2d-L32768-per-gpu": {"alias": "weak", "L": 32768, "per_gpu": True,
                                              "targets": {2: 1900.0, 4: 3700.0}, "ratio_targets": {2: 1.9}},
    "multigpu-metropolis-2d-L16384-total": {"alias": "strong", "L": 16384, "per_gpu": False, "targets": {},
                                            "ratio_targets": {2: 1.8}},
}
T_CRITICAL = 2.269


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cases", default="all",
                        help="comma-separated case prefixes or aliases (weak, strong, ch2d, ch3d, cortex, "
                             "cortex-strong)")
    parser.add_argument("--sweeps", type=int, default=200, help="sweeps (cortex: steps) per timed repetition")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions (median reported)")
    parser.add_argument("--small", action="store_true", help="lattices 16x smaller per side (a smoke run)")
    add_output_arguments(parser, "multigpu-<device>.json")


def _engine(cp, devices, L: int, rows: int, exchanger: str, overlap: bool, graphs: bool, depth: int | None):
    from latticelab.sim.models.ising.gpu.slabs import SlabMetropolis
    from latticelab.sim.multidevice.exchange import make_exchanger, make_parts
    parts = make_parts(cp, devices)
    engine = SlabMetropolis(parts, make_exchanger(parts, exchanger), 2, L, None, rows=rows, overlap=overlap,
                            graphs=graphs, depth=depth)
    engine.load_random(seed=1)
    return engine


def _sweep_rate(engine, sites: int, sweeps: int, repeats: int) -> dict:
    """Median flips/ns of ``sweeps`` sweeps (all devices waited for), and the host's seconds to enqueue them
    against the wall seconds (launch-bound when close to 1)."""
    stream = [0]

    def work():
        engine.sweeps(T_CRITICAL, 7, stream[0], sweeps)
        stream[0] += sweeps

    work()
    engine.synchronize()
    rates, enqueue = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        queued = time.perf_counter() - start
        engine.synchronize()
        wall = time.perf_counter() - start
        rates.append(sites * sweeps / wall / 1e9)
        enqueue.append(queued / wall)
    return {"flips_per_ns": statistics.median(rates), "enqueue_fraction": round(statistics.median(enqueue), 3)}


def _unsplit_rate(cp, L: int, sweeps: int, repeats: int) -> float:
    """CudaEngine's packed sweeps on one GPU (the single-device path), flips/ns."""
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    from latticelab.sim.models.ising.lattice import build_lattice
    from latticelab.sim.rng import StreamRNG
    engine = CudaEngine(cp, build_lattice(2, L, 0.0, "all", np.random.default_rng(0)))
    spins = cp.where(cp.random.random((L, L)) < 0.5, 1, -1).astype(cp.int8)
    rng = StreamRNG(cp, 7)
    engine.metropolis_sweeps(spins, T_CRITICAL, rng, sweeps, want_mask=False)
    cp.cuda.Device().synchronize()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        engine.metropolis_sweeps(spins, T_CRITICAL, rng, sweeps, want_mask=False)
        cp.cuda.Device().synchronize()
        rates.append(L * L * sweeps / (time.perf_counter() - start) / 1e9)
    del spins, engine
    cp.get_default_memory_pool().free_all_blocks()
    return statistics.median(rates)


def _free(cp, engine) -> None:
    engine.synchronize()
    for part in engine.parts:
        with cp.cuda.Device(part.device):
            cp.get_default_memory_pool().free_all_blocks()


def run_case(cp, name: str, spec: dict, n: int, args) -> dict:
    L = spec["L"] // (16 if args.small else 1)
    rows = L * n if spec["per_gpu"] else L
    measured = {}
    split = tuple(range(n))
    for label, devices, exchanger, overlap, graphs, depth in (("one_gpu", (0,), "peer", True, True, None),
                                                              ("split", split, "peer", True, True, None),
                                                              ("split_halo1", split, "peer", True, True, 1),
                                                              ("split_halo1_no_overlap", split, "peer", False, True, 1),
                                                              ("split_direct", split, "peer", True, False, 1),
                                                              ("split_nccl", split, "nccl", True, False, 1)):
        engine = _engine(cp, devices, L, L if label == "one_gpu" else rows, exchanger, overlap, graphs, depth)
        measured[label] = _sweep_rate(engine, engine.n_sites, args.sweeps, args.repeats)
        measured[label]["graphs"] = bool(engine._capture)      # False also where the capture was refused
        measured[label]["halo_depth"] = engine.depth
        print(f"  {name}-{n}gpu {label}: {measured[label]['flips_per_ns']:.1f} flips/ns "
              f"(host enqueue {100 * measured[label]['enqueue_fraction']:.0f}% of wall)", flush=True)
        _free(cp, engine)
        del engine
    unsplit = _unsplit_rate(cp, L, args.sweeps, args.repeats)
    print(f"  {name}: CudaEngine on one GPU {unsplit:.1f} flips/ns", flush=True)
    best = max((k for k in measured if k != "one_gpu"), key=lambda k: measured[k]["flips_per_ns"])
    value, base = measured[best]["flips_per_ns"], measured["one_gpu"]["flips_per_ns"]
    case = {"case": f"{name}-{n}gpu", "metric": "flips_per_ns", "value": round(value, 1),
            "baseline": f"the same slab code on one GPU, {L}^2", "baseline_value": round(base, 1),
            "ratio": round(value / base, 3),
            "details": {"lattice": f"{rows} x {L}", "gpus": n, "sweeps": args.sweeps, "T": T_CRITICAL, "p": 0.0,
                        "best_variant": best, **{k: v for k, v in measured.items()},
                        "cuda_engine_one_gpu_flips_per_ns": round(unsplit, 1),
                        "ratio_to_cuda_engine_one_gpu": round(value / unsplit, 3)}}
    target = spec["targets"].get(n)
    if target is not None:
        case.update(target=target, target_met=bool(value >= target))
    ratio_target = spec["ratio_targets"].get(n)
    if ratio_target is not None:
        case["details"]["ratio_target"] = ratio_target
        case["details"]["ratio_target_met"] = bool(value / base >= ratio_target)
        if target is None:
            case.update(target=ratio_target * base, target_met=bool(value / base >= ratio_target))
    return case


def _ch_rate(cp, devices, dim: int, L: int, phi0, steps: int, repeats: int) -> float:
    from latticelab.sim.models.cahn_hilliard.slabs import SlabFiniteDifference
    from latticelab.sim.multidevice.exchange import make_exchanger, make_parts
    parts = make_parts(cp, devices)
    engine = SlabFiniteDifference(parts, make_exchanger(parts), dim, L, np.float64, "periodic")
    engine.load(phi0)
    engine.step(2, *CH_ARGS)
    engine.synchronize()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        engine.step(steps, *CH_ARGS)
        engine.synchronize()
        rates.append(steps / (time.perf_counter() - start))
    del engine
    for device in devices:
        with cp.cuda.Device(device):
            cp.get_default_memory_pool().free_all_blocks()
    return statistics.median(rates)


def _ch_unsplit_rate(cp, phi0, steps: int, repeats: int) -> float:
    """The model's own finite-difference stepper on one GPU (the row-blocked kernel on the whole grid)."""
    from latticelab.sim.models.cahn_hilliard.finite_difference import FiniteDifferenceStepper
    stepper = FiniteDifferenceStepper(cp, phi0.shape, np.float64, "periodic", use_kernel=True)
    phi = cp.asarray(phi0)
    phi = stepper.step(phi, *CH_ARGS)
    cp.cuda.Device().synchronize()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            phi = stepper.step(phi, *CH_ARGS)
        cp.cuda.Device().synchronize()
        rates.append(steps / (time.perf_counter() - start))
    del phi, stepper
    cp.get_default_memory_pool().free_all_blocks()
    return statistics.median(rates)


def run_ch_case(cp, name: str, spec: dict, n: int, args) -> dict:
    dim, L = spec["dim"], spec["L"] // (16 if args.small else 1)
    phi0 = np.random.default_rng(1).uniform(-0.5, 0.5, (L,) * dim)
    steps = max(4, args.sweeps // 10)
    one = _ch_rate(cp, (0,), dim, L, phi0, steps, args.repeats)
    split = _ch_rate(cp, tuple(range(n)), dim, L, phi0, steps, args.repeats)
    unsplit = _ch_unsplit_rate(cp, phi0, steps, args.repeats)
    print(f"  {name}-{n}gpu: {split:.1f} steps/s on {n} GPUs, {one:.1f} on one (the model's stepper: "
          f"{unsplit:.1f})", flush=True)
    ratio_target = spec["ratio_targets"].get(n)
    case = {"case": f"{name}-{n}gpu", "metric": "steps_per_s", "value": round(split, 2),
            "baseline": f"the same slab code on one GPU, {L}^{dim}", "baseline_value": round(one, 2),
            "ratio": round(split / one, 3),
            "details": {"grid": f"{L}^{dim}", "gpus": n, "precision": "double", "boundary": "periodic",
                        "steps": steps, "model_stepper_one_gpu_steps_per_s": round(unsplit, 2),
                        "ratio_to_model_stepper_one_gpu": round(split / unsplit, 3)}}
    if ratio_target is not None:
        case["details"]["ratio_target"] = ratio_target
        case["details"]["ratio_target_met"] = bool(split / one >= ratio_target)
        case.update(target=round(ratio_target * one, 2), target_met=bool(split / one >= ratio_target))
    return case


def main(args) -> int:
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")     # never NVLink multicast (docs/design/multigpu.md)
    every = {**CASES, **CH_CASES, **CORTEX_CASES}
    try:
        chosen = select_cases(args.cases, every)
    except ValueError as exc:
        print(f"latticelab bench multigpu: {exc}")
        return 2
    from latticelab.sim.backend import BackendError, select_backend
    try:
        backend = select_backend("cuda")
    except BackendError as exc:
        print(f"latticelab bench multigpu needs CUDA GPUs: {exc}")
        return 1
    cp = backend.xp
    count = cp.cuda.runtime.getDeviceCount()
    if count < 2:
        print(f"latticelab bench multigpu needs at least 2 GPUs; this machine has {count}")
        return 1
    device = f"{count} x {backend.device_name}"
    print(f"latticelab bench multigpu on {device}", flush=True)
    cases = []
    for name in [c for c in chosen if c not in CORTEX_CASES]:
        for n in (2, 4):
            if n > count:
                print(f"  {name}-{n}gpu: not run ({count} GPUs here)")
                continue
            cases.append(run_case(cp, name, CASES[name], n, args) if name in CASES
                         else run_ch_case(cp, name, CH_CASES[name], n, args))
    cortex = [c for c in chosen if c in CORTEX_CASES]
    if cortex:
        cases += run_cortex_cases(cp, cortex, [n for n in (2, 4) if n <= count], args)
    for c in cases:
        d = c["details"]
        if "ratio_target" in d:
            print(f"{c['case']}: x{c['ratio']} of one GPU (target >= {d['ratio_target']}: "
                  f"{'met' if d['ratio_target_met'] else 'MISSED'})")
    return finish("multigpu", backend.device_name, cases, args, args.small)
