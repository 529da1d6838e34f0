"""The cortex cases of ``latticelab bench multigpu``: the network split into row slabs over n GPUs
(sim/models/cortex/slabs.py; thesis 003 Algorithm 63), k = 100 sources within r = 64, the default inputs.

- ``multigpu-cortex-N2^(22+log2 n)-total-<n>gpu``: weak scaling -- n x 2^22 neurons (L = 2048 sqrt(n), rounded:
  2896 for 2 GPUs, 2^23 - 0.02%) over n GPUs; steps_per_s; the baseline is the model's own one-GPU step at
  2^22 neurons (L = 2048) in the same run, and the ratio, split steps/s over those, is the weak-scaling efficiency.
  The details add the split run's variants: ``split`` (the default: phase 1 of the border rows first, their spike
  codes moved by peer copies while the inner rows and the inner core's phase 2 run), without the overlap, and with
  NCCL's send/receive.
- ``multigpu-cortex-N2^22-total-<n>gpu``: strong scaling -- the 2^22 network over n GPUs against the one-GPU step.

Each run starts from the seed's initial state, takes ``WARMUP`` steps into the network's active regime, then times
``steps`` steps (median of ``repeats``, every GPU waited for), with the host's share of the wall time spent
enqueuing them.
"""
from __future__ import annotations

import math
import statistics
import time

CORTEX_CASES = {
    "multigpu-cortex-per-gpu": {"alias": "cortex", "per_gpu": True, "ratio_targets": {2: 0.9, 4: 0.9}},
    "multigpu-cortex-N2^22-total": {"alias": "cortex-strong", "per_gpu": False, "ratio_targets": {}},
}
K, RADIUS, SEED = 100, 64, 1
L_ONE = 2048
WARMUP = 200


def case_name(name: str, spec: dict, n: int) -> str:
    if spec["per_gpu"]:
        return f"multigpu-cortex-N2^{22 + int(math.log2(n))}-total-{n}gpu"
    return f"{name}-{n}gpu"


class Runner:
    """Steps a network (one GPU: the model's CudaPhases.step; split: SplitCortex.step) as the model does."""

    def __init__(self, cp, params, step_one):
        from latticelab.sim.models.cortex.engines import Inputs, Record, washout_tables
        self.cp, self.params, self.step_one = cp, params, step_one
        self.inputs = Inputs.from_params(params)
        self.table, self.w = washout_tables(params, warn=False)
        with cp.cuda.Device(0):             # the trace on GPU 0 (the scales do not change the work)
            self.record = Record(cp.zeros((4096, 4), cp.float64), 0, cp.zeros(3, cp.float64), 0, 1e-6, 1e-6)
        self.count = 0

    def steps(self, n: int) -> None:
        for _ in range(n):
            self.record.slot = self.count % 4096
            self.step_one(self.count, self)
            self.count += 1


def _rate(cp, runner: Runner, devices, steps: int, repeats: int) -> dict:
    def wait():
        for d in devices:
            with cp.cuda.Device(d):
                cp.cuda.Device(d).synchronize()

    runner.steps(WARMUP)
    wait()
    rates, enqueue = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        runner.steps(steps)
        queued = time.perf_counter() - start
        wait()
        wall = time.perf_counter() - start
        rates.append(steps / wall)
        enqueue.append(queued / wall)
    return {"steps_per_s": round(statistics.median(rates), 2), "enqueue_fraction": round(statistics.median(enqueue), 3)}


def _free(cp, devices) -> None:
    for d in devices:
        with cp.cuda.Device(d):
            cp.cuda.Device(d).synchronize()
            cp.get_default_memory_pool().free_all_blocks()


def _params(L: int):
    from latticelab.sim.models.cortex.params import CortexParams
    return CortexParams.create(gpu=True, L=L, k=K, r=RADIUS, seed=SEED)


def _one_gpu(cp, L: int, steps: int, repeats: int) -> tuple[dict, object]:
    """The model's own step on GPU 0; returns (rate, the network's initial neurons for the split runs)."""
    rate, neurons = _time_one_gpu(cp, L, steps, repeats)
    _free(cp, (0,))
    return rate, neurons


def _time_one_gpu(cp, L: int, steps: int, repeats: int) -> tuple[dict, object]:
    from latticelab.sim.backend import to_numpy
    from latticelab.sim.models.cortex.model import CortexModel
    from latticelab.sim.models.cortex.network import Neurons
    model = CortexModel(_params(L), backend="cuda")
    s, phases = model.state, model._phases
    neurons = Neurons(model._types, to_numpy(s.tv), to_numpy(s.delay), to_numpy(s.v), to_numpy(s.u))

    def step_one(count, r):
        phases.step(s, SEED, count, r.inputs, r.table, r.w, r.record)

    return _rate(cp, Runner(cp, model.params, step_one), (0,), steps, repeats), neurons


def _split(cp, devices, L: int, neurons, steps: int, repeats: int, **options) -> dict:
    rate = _time_split(cp, devices, L, neurons, steps, repeats, **options)
    _free(cp, devices)
    return rate


def _time_split(cp, devices, L: int, neurons, steps: int, repeats: int, **options) -> dict:
    from latticelab.sim.models.cortex.slabs import SplitCortex
    params = _params(L)
    split = SplitCortex(cp, devices, params, **options)
    split.build(SEED, neurons)

    def step_one(count, r):
        split.step(SEED, count, r.inputs, r.table, r.w, r.record)

    return _rate(cp, Runner(cp, params, step_one), devices, steps, repeats)


def run_cortex_cases(cp, chosen: list[str], counts: list[int], args) -> list[dict]:
    """Every chosen cortex case on each GPU count in ``counts``; the one-GPU baseline measured once."""
    from latticelab.sim.models.cortex.network import make_neurons
    shrink = 16 if args.small else 1
    steps = max(20, args.sweeps)
    L1 = L_ONE // shrink
    one, neurons_one = _one_gpu(cp, L1, steps, args.repeats)
    print(f"  cortex 2^22 on one GPU (the model's step): {one['steps_per_s']:.1f} steps/s", flush=True)
    cases = []
    for n in counts:
        devices = tuple(range(n))
        for name in chosen:
            spec = CORTEX_CASES[name]
            L = int(round(L1 * math.sqrt(n))) if spec["per_gpu"] else L1
            neurons = make_neurons(SEED, L * L, _params(L).excitatory_fraction) if L != L1 else neurons_one
            variants = {"split": {}}
            if spec["per_gpu"]:
                variants.update(split_no_overlap={"overlap": False}, split_nccl={"exchanger": "nccl"})
            measured = {}
            for label, options in variants.items():
                measured[label] = _split(cp, devices, L, neurons, steps, args.repeats, **options)
                print(f"  {case_name(name, spec, n)} {label}: {measured[label]['steps_per_s']:.1f} steps/s (host "
                      f"enqueue {100 * measured[label]['enqueue_fraction']:.0f}% of wall)", flush=True)
            best = max(measured, key=lambda k: measured[k]["steps_per_s"])
            value, base = measured["split"]["steps_per_s"], one["steps_per_s"]
            case = {"case": case_name(name, spec, n), "metric": "steps_per_s", "value": value,
                    "baseline": f"the model's step on one GPU, 2^22 neurons (L = {L1})", "baseline_value": base,
                    "ratio": round(value / base, 3),
                    "details": {"grid": f"{L} x {L}", "neurons": L * L, "gpus": n, "k": K, "r": RADIUS,
                                "steps": steps, "warmup": WARMUP, "best_variant": best, "one_gpu": one,
                                **measured}}
            target = spec["ratio_targets"].get(n)
            if target is not None:
                met = bool(value / base >= target)
                case["details"].update(ratio_target=target, ratio_target_met=met)
                case.update(target=round(target * base, 2), target_met=met)
            cases.append(case)
    return cases
