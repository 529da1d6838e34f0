"""`latticelab bench cortex`: steps of the cortical spiking network against a plain CuPy step, in one run.

Cases (the results files' case names; ``--cases`` also takes the short names in brackets), the H100 targets,
k = 100 sources per neuron within r = 64:
  cortex-N2^20-k100  [N2^20]  L = 1024  steps_per_s >= 4000  (four times real time: one step is 1 ms)
  cortex-N2^22-k100  [N2^22]  L = 2048  steps_per_s >= 1000  (real time)

Each case builds ``CortexModel(L, k=100, r=64, seed=1)`` with the default inputs (the thesis's test
configuration), runs ``--warmup`` steps so the network is in its active regime, then times ``model.step(n)``
(median of ``--repeats``; the step includes the model's per-step EEG sums and trace record, as in the
application: on CUDA two launches a step, phase 2 finishing the EEG sums into the trace). The baseline is a
plain version of the same update written here (``PlainCortex``): whole-array xp operations, nothing fused, the
network's sources as int32 lists (k, N) (decoded from the model's packed offsets where it uses them) gathered as
``data[sources]``, cupy.random normals; it starts from the model's state after the warm-up and is timed in the
same run.

``details`` gives the model's source layout ("packed": 16-bit offsets, four to a 64-bit word, read through
phase 1's halo of spike codes, for r <= 127; "int32": 4-byte indices) and estimates the bytes per neuron per step
the kernels move -- phase 1: its per-neuron arrays, one ring slot and (packed) the halo bytes it writes; phase 2:
the source lists (8 ceil(k/4) bytes packed, 4k int32), the sources' codes once (the halo, or the data bytes) and
the w ring slots of the receivers that have a firing source, a fraction measured after the timing -- against a
device-to-device copy measured in the same run, and (CUDA) each phase's kernel time from CUDA events and the CPU
time to enqueue a step.

``--backend numpy --small``: a CPU smoke run of every code path at tiny sizes (the tests use it).
"""
from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

from latticelab.bench.common import (EventClock, add_case_arguments, add_output_arguments, add_smoke_arguments,
                                     enqueue_seconds, free_memory, run_benchmark, select_cases, target_met, timed)

CASES = {
    "cortex-N2^20-k100": dict(L=1024, k=100, r=64, target=4000.0, alias="N2^20"),
    "cortex-N2^22-k100": dict(L=2048, k=100, r=64, target=1000.0, alias="N2^22"),
}
SMALL = {"cortex-N2^20-k100": dict(L=16, k=10, r=4), "cortex-N2^22-k100": dict(L=32, k=10, r=4)}
EV_MAX = 75                 # ring slots of pending input (the model's: longest washout 60 + longest delay 15)
V_PEAK = 30.0
PHASE1_BYTES = 35           # data r/w 2, tv 8, delay 1, v r/w 8, u r/w 8, ring slot r/w 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_case_arguments(parser, CASES)
    parser.add_argument("--warmup", type=int, default=None,
                        help="steps before timing, into the network's active regime (default 200; --small 4)")
    add_smoke_arguments(parser, "tiny networks (L = 16 and 32, k = 10, r = 4): a smoke run of the code path")
    add_output_arguments(parser, "cortex-<device>.json")


# ---- the plain baseline (not the project's code: whole-array operations, nothing fused) ------------------------
class PlainCortex:
    """The same update as the model (Izhikevich Euler step with reset, input noise, delayed input from a ring of
    EV_MAX slots, pull of the k stored sources, washout added to the next w slots) as plain xp operations.
    Built from a model: the network (sources, types, dynamics, delays) is shared read-only, the dynamic state
    (v, u, fired bits, ring) is copied."""

    def __init__(self, xp, model, seed: int = 2):
        self.xp = xp
        s, p = model.state, model.params
        f = xp.float32
        self.n, self.k = s.n, s.k
        self.sources = s.source_indices(xp)                # int32 (k, N): the model's, or decoded from its offsets
        self.types = (s.data >> 1) & 1                     # uint8 (N,)
        inh = self.types == 1
        self.inh, self.exc = inh, ~inh
        eff = p.effective()
        self.base = xp.where(inh, f(eff["i"]["I"]), f(eff["e"]["I"])).astype(f)
        self.noise = xp.where(inh, f(eff["i"]["n"]), f(eff["e"]["n"])).astype(f)
        self.boost, self.boost_fraction = f(p.boost), p.boost_fraction
        self.a = xp.where(inh, s.tv[0], f(0.02)).astype(f)
        self.b = xp.where(inh, s.tv[1], f(0.2)).astype(f)
        self.c = xp.where(inh, f(-65.0), s.tv[0]).astype(f)
        self.d = xp.where(inh, f(2.0), s.tv[1]).astype(f)
        self.delay = s.delay.astype(xp.int64)
        self.cells = xp.arange(self.n, dtype=xp.int64)
        self.v, self.u, self.data, self.ev = s.v.copy(), s.u.copy(), s.data.copy(), s.ev.copy()
        self.ev_idx = s.ev_idx
        self.w = int(model.effective()["w"])
        t = np.arange(self.w, dtype=np.float64)
        self.we = xp.asarray((eff["e"]["A"] * np.exp(-t / eff["e"]["tau"])).astype(np.float32)[:, None])
        self.wi = xp.asarray((eff["i"]["A"] * np.exp(-t / eff["i"]["tau"])).astype(np.float32)[:, None])
        self.random = xp.random.RandomState(seed) if xp is not np else np.random.default_rng(seed)
        self.sums = None

    def step(self) -> None:
        xp, f = self.xp, self.xp.float32
        n = self.n
        # phase 1: input, reset, Euler step, delayed input, cap, fired bits, EEG sums
        z = self.random.standard_normal(n, dtype=f)
        current = xp.maximum(self.base + z * self.noise, f(0))
        if self.boost_fraction > 0:
            draw = self.random.random_sample if xp is not np else self.random.random
            current = current + xp.where(draw(n, dtype=f) < self.boost_fraction, self.boost, f(0))
        reset = self.v >= f(V_PEAK)
        u = xp.where(reset, self.u + self.d, self.u)
        v = xp.where(reset, self.c, self.v)
        dv = f(0.04) * v * v + f(5.0) * v + f(140.0) - u + current
        du = self.a * (self.b * v - u)
        ring = self.ev.reshape(-1)
        flat = ((self.ev_idx - self.delay) % EV_MAX) * n + self.cells
        extra = ring[flat]
        ring[flat] = f(0)
        v = xp.minimum(v + dv + extra, f(V_PEAK))
        self.u = u + du
        self.v = v
        fired = v >= f(V_PEAK)
        self.data = (self.types << 1) | fired.astype(xp.uint8)
        self.sums = (xp.where(self.exc, v, f(0)).sum(dtype=xp.float64), (fired & self.exc).sum(),
                     (fired & self.inh).sum())
        self.ev_idx = (self.ev_idx + 1) % EV_MAX
        # phase 2: each receiver counts its firing sources per type and adds their washout to the next w slots
        codes = self.data[self.sources]                    # (k, N) uint8 gather through the stored indices
        count_e = (codes == 1).sum(axis=0, dtype=xp.int32)
        count_i = (codes == 3).sum(axis=0, dtype=xp.int32)
        rows = (self.ev_idx + xp.arange(self.w)) % EV_MAX
        self.ev[rows] += count_e.astype(f) * self.we + count_i.astype(f) * self.wi

    def firing_e(self) -> float:
        return float(self.sums[1]) / max(int(self.exc.sum()), 1)


# ---- kernel clocks (CUDA) -------------------------------------------------------------------------------------
class PhaseClock(EventClock):
    """Brackets each launch of the model's two phase kernels with CUDA events; totals in ms per kernel."""

    def __init__(self, cp, phases):
        super().__init__(cp)
        self.phases = phases
        for name in ("_phase1", "_phase2"):
            kernels = getattr(phases, name)                 # {layout is packed: kernel}
            self.saved.append((name, kernels))
            setattr(phases, name, {key: self._timed(kernel, name.strip("_")) for key, kernel in kernels.items()})

    def _put_back(self) -> None:
        for name, kernels in self.saved:
            setattr(self.phases, name, kernels)


def active_fraction(xp, model, steps: int) -> float:
    """Mean fraction of receivers with at least one source firing in a step (the ones phase 2 writes w ring
    slots for), over ``steps`` further steps."""
    s = model.state
    sources = s.source_indices(xp)
    total = 0.0
    for _ in range(steps):
        model.step(1)
        fired = (s.data & 1).astype(bool)
        total += float(fired[sources].any(axis=0).mean())
    return total / steps


def bytes_per_neuron(k: int, w: int, active: float, layout: str = "int32", L: int = 1, r: int = 0) -> dict:
    """Estimated device-memory bytes per neuron per step, by kernel (module docstring). Packed: phase 1 also
    writes the halo ((L + 2r)^2 / L^2 bytes a neuron), phase 2 reads 8 ceil(k/4) bytes of offsets and the halo."""
    if layout == "packed":
        halo = (L + 2 * r) ** 2 / (L * L)
        phase1, sources, codes = PHASE1_BYTES + halo, 8 * ((k + 3) // 4), halo
    else:
        phase1, sources, codes = PHASE1_BYTES, 4 * k, 1
    ring = active * 8 * w
    return {"phase1": round(phase1, 2), "phase2_sources": sources, "phase2_data": round(codes, 2),
            "phase2_ring": round(ring, 2), "total": round(phase1 + sources + codes + ring, 2)}


# ---- a case ---------------------------------------------------------------------------------------------------
def run_case(backend, name: str, spec: dict, args, bandwidth: float) -> dict:
    from latticelab.sim.models.cortex.engines import CudaPhases
    from latticelab.sim.models.cortex.model import CortexModel
    xp = backend.xp
    small = args.small
    size = SMALL[name] if small else spec
    L, k, r = size["L"], size["k"], size["r"]
    n = L * L
    steps = args.steps or (4 if small else 200)
    warmup = args.warmup if args.warmup is not None else (4 if small else 200)
    repeats = args.repeats
    model = CortexModel(backend=backend.name, L=L, k=k, r=r, seed=1)
    w = int(model.effective()["w"])
    model.step(max(1, warmup))                   # compilation, and into the active regime
    times = timed(xp, lambda: model.step(steps), repeats)
    per_step = statistics.median(times) / steps
    value = 1.0 / per_step
    details = {"L": L, "N": n, "k": k, "r": r, "w": w, "warmup_steps": warmup, "steps_per_repeat": steps,
               "repeats": repeats, "ms_per_step": round(per_step * 1e3, 5),
               "spread": [round(steps / t, 2) for t in sorted(times, reverse=True)]}
    enqueue = enqueue_seconds(xp, lambda: model.step(steps))
    if enqueue is not None:
        details["enqueue_ms_per_step"] = round(enqueue / steps * 1e3, 5)
    if isinstance(model._phases, CudaPhases) and xp is not np:
        clock = PhaseClock(xp, model._phases)
        model.step(steps)
        per_kernel = clock.restore()
        details["kernel_ms_per_step"] = {kname: round(ms / steps, 5) for kname, ms in per_kernel.items()}
        kernels = sum(per_kernel.values()) / steps
        details["kernels_share_of_step"] = round(kernels / (per_step * 1e3), 3)
    obs = model.observables()
    details["firing_e"], details["firing_i"] = round(obs["firing_e"], 5), round(obs["firing_i"], 5)
    details["eeg_mV"] = round(obs["eeg"], 3)

    # the baseline, from the model's state now
    plain = PlainCortex(xp, model)
    base_steps = max(2, steps // 4)

    def base_work():
        for _ in range(base_steps):
            plain.step()
    base_work()                                  # warm-up (kernel compilation, memory pool)
    base = statistics.median(timed(xp, base_work, repeats)) / base_steps
    baseline = 1.0 / base
    details["baseline_steps"] = base_steps
    details["baseline_ms_per_step"] = round(base * 1e3, 5)
    details["baseline_firing_e"] = round(plain.firing_e(), 5)
    details["baseline_finite"] = bool(xp.isfinite(plain.v).all())
    plain = base_work = None
    free_memory(xp)

    # the bytes the kernels move, against the copy bandwidth
    active = active_fraction(xp, model, 2 if small else 10)
    layout = model.state.layout
    moved = bytes_per_neuron(k, w, active, layout, L, r)
    per_step_bytes = moved["total"] * n
    details.update({
        "layout": layout,
        "active_receiver_fraction": round(active, 4),
        "bytes_per_neuron_per_step": moved,
        "bytes_per_step": int(per_step_bytes),
        "achieved_TBps": round(per_step_bytes * value / 1e12, 4),
        "bandwidth_fraction": round(per_step_bytes * value / bandwidth, 4),
        "copy_bandwidth_TBps": round(bandwidth / 1e12, 4),
        "bandwidth_bound_steps_per_s": round(bandwidth / per_step_bytes, 1),
    })
    if "kernel_ms_per_step" in details:
        km = details["kernel_ms_per_step"]
        for kname, part in (("phase1", moved["phase1"]), ("phase2", moved["total"] - moved["phase1"])):
            if km.get(kname):
                details[f"{kname}_TBps"] = round(part * n / (km[kname] * 1e-3) / 1e12, 4)
    model = None
    free_memory(xp)
    case_name = name if not small else f"cortex-N2^{int(round(math.log2(n)))}-k{k}"
    return {"case": case_name, "metric": "steps_per_s", "value": round(value, 2),
            "baseline": "plain-unfused-xp", "baseline_value": round(baseline, 2), "ratio": round(value / baseline, 2),
            "target": spec["target"], "target_met": None if small else target_met(value, spec["target"], False),
            "details": details}


def _chosen_cases(args) -> list[str]:
    names = select_cases(args.cases, CASES)
    if args.repeats < 1 or args.steps < 0 or (args.warmup is not None and args.warmup < 0):
        raise ValueError("--repeats must be >= 1, --steps and --warmup >= 0")
    return names


def _run_and_say(backend, name: str, args, bandwidth: float) -> dict:
    case = run_case(backend, name, CASES[name], args, bandwidth)
    d = case["details"]
    print(f"  {case['case']}: {case['value']} steps/s ({d['ms_per_step']} ms/step, "
          f"{d['bytes_per_neuron_per_step']['total']} B/neuron ({d['layout']}), "
          f"{100 * d['bandwidth_fraction']:.0f}% of copy "
          f"bandwidth, kernels {d.get('kernel_ms_per_step', '-')}); plain {case['baseline_value']} steps/s, "
          f"x{case['ratio']}", flush=True)
    return case


def main(args) -> int:
    return run_benchmark("cortex", args, _chosen_cases, _run_and_say)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="latticelab bench cortex", description=__doc__.splitlines()[0])
    add_arguments(parser)
    raise SystemExit(main(parser.parse_args()))
