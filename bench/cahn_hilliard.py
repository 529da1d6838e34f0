"""`latticelab bench cahn-hilliard`: the Cahn-Hilliard model's steps against plain CuPy steps, in one run.

Cases (the results files' case names; ``--cases`` also takes the short names in brackets), the H100 targets:
  cahn-hilliard-2d-L4096-fd        [fd-2d-L4096]        steps_per_s >= 3000   RK2 finite-difference steps
  cahn-hilliard-3d-L256-fd         [fd-3d-L256]         steps_per_s >= 1500
  cahn-hilliard-2d-L4096-spectral  [spectral-2d-L4096]  steps_per_s >= 2000   semi-implicit spectral steps
  cahn-hilliard-3d-L256-spectral   [spectral-3d-L256]   steps_per_s >= 2000
  pfhub-1a-t1e6                    [pfhub-1a]           seconds     <= 30     wall time to t = 1e6 (PFHub 1a)
  cahn-hilliard-2d-L200-adaptive   [adaptive-2d-L200]   us_per_step (no target; only when named in --cases)
                                                                  adaptive against fixed spectral steps

Grid cases are timed through ``CahnHilliardModel.step(n)`` with fixed time steps (no observables are computed
in a step), median of ``--repeats`` repetitions after a warm-up. Each is compared with a plain version of the
same step written here and timed in the same run (``baseline``/``ratio``): whole-array ``xp.roll`` finite
differences with RK2, or an unfused ``xp.fft`` semi-implicit stabilised step. Precision defaults to single
(float32), as the issue's baseline figures were measured (``--precision double`` for the model's default).

``--spectral-integrator spectral-bdf2`` runs the spectral cases with the second-order step instead (same case
names; ``details`` says which). On a GPU each grid case also times the earlier path of the same step in the same
run (``details.previous_path``): the cache-read finite-difference kernel, or the cupyx.scipy.fft spectral path
(irfftn copying its input and normalising in a further pass, outputs allocated per step) instead of cuFFT plans
called directly into kept buffers. The finite-difference cases time every stage kernel variant of
finite_difference.KERNELS the same way, through the model's step (``details.fd_kernels``: steps/s and ms/step of
each, ``details.fastest_fd_kernel``); the case's value is the model's kernel (``details.fd_kernel``: the model's
default, or ``--fd-kernel``).

``details`` has the bytes a step must move at least (each array read or written once; each transform one pass
over its input and output), the rate that implies against a device-to-device copy measured in the same run
(``bandwidth_fraction``), and for the spectral cases the simulated time per wall second against the
finite-difference case of the same dimension (at the benchmark's time steps, not at equal accuracy).

``pfhub-1a-t1e6`` runs the pfhub-1a preset (200 x 200, spectral, adaptive steps, double precision) through
``run_pfhub`` into a temporary folder (or ``--pfhub-out``) and reports the wall time, the steps and PFHub's
free energy at the output times; ``--skip-pfhub`` leaves it out.

``cahn-hilliard-2d-L200-adaptive`` (run only when --cases names it, e.g. ``--cases adaptive``) times, on PFHub
1a's grid (the pfhub-1a preset: 200 x 200, double precision, periodic), the model's steps with adaptive and with
fixed time steps, for both spectral integrators (``model.step(n)``, median of ``--repeats``): its value is the
microseconds per adaptive spectral-bdf2 step, its baseline the fixed step's, and ``details.per_integrator``
has for each integrator the fixed step, the adaptive step through ``step(n)`` and through ``advance_to`` (the
path of ``bench ch-accuracy``), the adaptive control alone (``control_only_us``: the statistics of one step and
the next dt) and, on a GPU, the earlier path of the control (CuPy array reductions, ``fused_change`` off) timed
the same way in the same run, and (``host_control_*``) the control on the host with the fused reduction (one
synchronisation per step; the model's ``device_control`` off) -- by default the adaptive steps of the direct GPU
path are decided on the device and read back once per chunk of steps.

``--backend numpy --small``: a CPU smoke run of every code path at tiny sizes (the tests use it).
"""
from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time

import numpy as np

from latticelab.bench.common import (add_case_arguments, add_output_arguments, add_smoke_arguments,
                                     enqueue_seconds, free_memory, run_benchmark, select_cases, target_met, timed)
# bench/ch_accuracy.py imports these from here
from latticelab.bench.common import finish, open_backend, synchronizer  # noqa: F401

# name -> spec; "alias" is the short name --cases accepts too
CASES = {
    "cahn-hilliard-2d-L4096-fd": dict(kind="fd", dim=2, L=4096, target=3000.0, alias="fd-2d-L4096"),
    "cahn-hilliard-3d-L256-fd": dict(kind="fd", dim=3, L=256, target=1500.0, alias="fd-3d-L256"),
    "cahn-hilliard-2d-L4096-spectral": dict(kind="spectral", dim=2, L=4096, target=2000.0,
                                            alias="spectral-2d-L4096"),
    "cahn-hilliard-3d-L256-spectral": dict(kind="spectral", dim=3, L=256, target=2000.0,
                                           alias="spectral-3d-L256"),
    "pfhub-1a-t1e6": dict(kind="pfhub", target=30.0, alias="pfhub-1a",
                          anchor=388.0, anchor_name="FEniCS on 24 cores (PFHub 1a, published)"),
    # opt-in: run only when --cases names it ("all" leaves it out)
    "cahn-hilliard-2d-L200-adaptive": dict(kind="adaptive", dim=2, L=200, target=None, alias="adaptive-2d-L200",
                                           opt_in=True),
}
SMALL_L = {2: 32, 3: 12}           # --small grid sides
SMALL_PFHUB = dict(L=50, until=100.0)
INTEGRATOR = {"fd": "finite-difference", "spectral": "spectral"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_case_arguments(parser, CASES)
    parser.add_argument("--precision", choices=("single", "double"), default="single",
                        help="floating point of the grid cases (default single, as the issue's baselines)")
    parser.add_argument("--spectral-dt", type=float, default=0.5,
                        help="time step of the spectral cases (default 0.5; finite differences use the "
                             "schema's suggested dt, 0.8 x the stability limit)")
    parser.add_argument("--spectral-integrator", choices=("spectral", "spectral-bdf2"), default="spectral",
                        help="integrator of the spectral cases (default spectral, first order in time)")
    parser.add_argument("--skip-previous", action="store_true",
                        help="do not time the earlier GPU path of each grid case (nor the other finite-difference "
                             "stage kernels)")
    parser.add_argument("--fd-kernel", default=None,
                        help="finite-difference stage kernel the model runs for the case's value (default: the "
                             "model's, finite_difference.DEFAULT_KERNEL); every variant is timed in details")
    parser.add_argument("--skip-pfhub", action="store_true", help="leave out the pfhub-1a-t1e6 case")
    parser.add_argument("--pfhub-until", type=float, default=None,
                        help="simulated end time of the PFHub case (default 1e6; --small 100)")
    parser.add_argument("--pfhub-out", default=None,
                        help="keep the PFHub result files in this folder (default: a temporary folder)")
    add_smoke_arguments(parser, "tiny sizes (2D L=32, 3D L=12, PFHub L=50 to t=100): a smoke run of the code path")
    add_output_arguments(parser, "cahn-hilliard-<device>.json")


# ---- the plain baselines (not the project's code: whole-array operations, nothing fused) -----------------------
def plain_fd_step(xp, phi, dt: float, m: float, b: float, u: float, K: float, dx: float):
    """One RK2 (midpoint) step of dphi/dt = m lap(u phi^3 - b phi - K lap phi), the Laplacian from whole-array
    ``xp.roll`` (periodic): what a first CuPy port of the seed's finite differences looks like."""
    def lap(p):
        s = xp.roll(p, 1, 0) + xp.roll(p, -1, 0)
        for a in range(1, p.ndim):
            s = s + xp.roll(p, 1, a) + xp.roll(p, -1, a)
        return (s - 2 * p.ndim * p) / (dx * dx)

    def rhs(p):
        return m * lap(u * p ** 3 - b * p - K * lap(p))

    half = phi + (0.5 * dt) * rhs(phi)
    return phi + dt * rhs(half)


class PlainSpectral:
    """The semi-implicit stabilised Fourier step (Chen and Shen 1998) with ``xp.fft`` and unfused array
    operations: phi_hat' = (phi_hat - dt m k^2 FFT(u phi^3 - (b + S) phi)) / (1 + dt m k^2 (S + K k^2)),
    S = max|f''| / 2 over |phi| <= max(1, sqrt(b/u)); phi_hat is kept between steps (two transforms a step)."""

    def __init__(self, xp, phi, dt: float, m: float, b: float, u: float, K: float, dx: float):
        self.xp, self.shape = xp, phi.shape
        self.dt, self.m, self.b, self.u, self.K = dt, m, b, u, K
        a = max(1.0, math.sqrt(b / u)) if b > 0 else 1.0
        self.S = 0.5 * max(abs(b), 3.0 * u * a * a - b)
        axes = [2 * np.pi * np.fft.fftfreq(n, d=dx) for n in self.shape[:-1]]
        axes.append(2 * np.pi * np.fft.rfftfreq(self.shape[-1], d=dx))
        k2 = sum(g ** 2 for g in np.meshgrid(*axes, indexing="ij", sparse=True))
        self.k2 = xp.asarray(k2.astype(phi.dtype))
        self.phi = phi
        self.phi_hat = xp.fft.rfftn(phi)

    def step(self):
        xp = self.xp
        n_hat = xp.fft.rfftn(self.u * self.phi ** 3 - (self.b + self.S) * self.phi)
        a = (self.dt * self.m) * self.k2
        self.phi_hat = (self.phi_hat - a * n_hat) / (1 + a * (self.S + self.K * self.k2))
        axes = tuple(range(len(self.shape)))
        self.phi = xp.fft.irfftn(self.phi_hat, s=self.shape, axes=axes).astype(self.phi.dtype, copy=False)


def bytes_per_step(kind: str, shape: tuple, itemsize: int) -> int:
    """The least a step must move: finite differences 5 grids (stage 1 reads phi and writes half, stage 2 reads
    phi and half and writes the new field; stencil neighbours from cache); spectral 4 real grids (nonlinear term
    in and out, inverse transform out, forward transform in) plus 10 half-spectrum grids of reals (forward out 2,
    update in 2 + 2 and out 2, inverse in 2; k^2 comes from the index, ch_spectral.cu); the second-order step
    (``spectral-bdf2``) reads the previous step's phi_hat and N_hat too: 14. (The direct cuFFT path writes the
    update twice, once scaled for the inverse transform to destroy: 2 more than this least; the earlier cupyx
    path reads a k^2 grid too.)"""
    n = int(np.prod(shape))
    if kind == "fd":
        return 5 * n * itemsize
    half = int(np.prod(shape[:-1])) * (shape[-1] // 2 + 1)
    return (4 * n + (14 if kind == "spectral-bdf2" else 10) * half) * itemsize


def _timed_steps(model, xp, steps: int, repeats: int) -> dict:
    model.step(max(2, steps // 4))                         # warm-up: compile the kernel, make the plans
    per_step = statistics.median(timed(xp, lambda: model.step(steps), repeats)) / steps
    return {"steps_per_s": round(1.0 / per_step, 2), "ms_per_step": round(per_step * 1e3, 5)}


def time_fd_kernels(model, xp, steps: int, repeats: int) -> dict | None:
    """Steps/s of the model's finite-difference step with each stage kernel variant (finite_difference.KERNELS),
    timed like the model's path, one after the other in this run; the model's own variant is restored (None on
    NumPy, which runs the array twin)."""
    if xp is np:
        return None
    from latticelab.sim.models.cahn_hilliard.finite_difference import KERNELS
    stepper = model._fd_stepper()
    chosen = stepper.kernel
    results = {}
    try:
        for kernel in KERNELS:
            stepper.kernel = kernel
            results[kernel] = _timed_steps(model, xp, steps, repeats)
    finally:
        stepper.kernel = chosen
    return results


def time_previous_path(model, xp, steps: int, repeats: int, fd_kernels: dict | None = None) -> dict | None:
    """Steps/s of the earlier GPU path of the model's step, timed like the new one (None on NumPy, where both
    are the same code): the cache-read finite-difference kernel (taken from ``fd_kernels`` when timed there),
    or the cupyx.scipy.fft spectral path."""
    if xp is np:
        return None
    if model.params.integrator == "finite-difference":
        if fd_kernels and "cache" in fd_kernels:
            return {"path": "cache-read stage kernel", **fd_kernels["cache"]}
        stepper, flag, earlier, path = model._fd_stepper(), "kernel", "cache", "cache-read stage kernel"
    else:
        stepper, flag, earlier, path = model._spectral_stepper(), "direct", False, "cupyx.scipy.fft rfftn/irfftn"
    now = getattr(stepper, flag)
    setattr(stepper, flag, earlier)
    try:
        result = _timed_steps(model, xp, steps, repeats)
    finally:
        setattr(stepper, flag, now)
    return {"path": path, **result}


# ---- the cases ------------------------------------------------------------------------------------------------
def run_grid_case(backend, name: str, spec: dict, args, bandwidth: float) -> dict:
    from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel
    xp = backend.xp
    small = args.small
    kind, dim = spec["kind"], spec["dim"]
    L = SMALL_L[dim] if small else spec["L"]
    steps = args.steps or (4 if small else 200)
    repeats = args.repeats
    integrator = args.spectral_integrator if kind == "spectral" else INTEGRATOR[kind]
    values = dict(dim=dim, L=L, integrator=integrator, precision=args.precision, seed=1)
    if kind == "spectral":
        values["dt"] = args.spectral_dt
    model = CahnHilliardModel(backend=backend.name, **values)
    p = model.params
    shape, dtype = model.shape, model.dtype
    fd_kernel = None                            # the stage kernel the model's finite-difference steps run
    if kind == "fd" and backend.is_gpu:
        if args.fd_kernel:
            model._fd_stepper().kernel = args.fd_kernel
        fd_kernel = model._fd_stepper().kernel

    # the baseline agrees with the model: one step from the same field (before anything is timed)
    phi0 = model.phi.copy()
    model.step(1)
    if kind == "fd":
        plain_phi = plain_fd_step(xp, phi0, p.dt, p.m, p.b, p.u, p.K, p.dx)
        plain = None
    else:
        plain = PlainSpectral(xp, phi0, p.dt, p.m, p.b, p.u, p.K, p.dx)
        plain.step()
        plain_phi = plain.phi
    agreement = float(xp.abs(plain_phi.astype(xp.float64) - model.phi.astype(xp.float64)).max())
    del plain_phi

    model.step(max(2, steps // 4))              # warm-up: compilation, FFT plans, the memory pool
    before = model.step_count
    times = timed(xp, lambda: model.step(steps), repeats)
    per_step = statistics.median(times) / steps
    enqueue = enqueue_seconds(xp, lambda: model.step(steps))
    steps_timed = model.step_count - before
    finite = bool(xp.isfinite(model.phi).all())
    fd_kernels = None if args.skip_previous or kind != "fd" else time_fd_kernels(model, xp, steps, repeats)
    previous = None if args.skip_previous else time_previous_path(model, xp, steps, repeats, fd_kernels)
    model = None                                 # its memory freed before the baseline runs
    free_memory(xp)

    # the plain baseline, continuing from the agreed first step
    base_steps = max(2, steps // 4)
    if kind == "fd":
        state = {"phi": phi0}

        def base_work():
            for _ in range(base_steps):
                state["phi"] = plain_fd_step(xp, state["phi"], p.dt, p.m, p.b, p.u, p.K, p.dx)
    else:
        def base_work():
            for _ in range(base_steps):
                plain.step()
    base_work()                                  # warm-up
    base = statistics.median(timed(xp, base_work, repeats)) / base_steps
    phi0 = plain = base_work = None
    free_memory(xp)

    value = 1.0 / per_step
    baseline = 1.0 / base
    moved = bytes_per_step(integrator if kind == "spectral" else kind, shape, np.dtype(dtype).itemsize)
    details = {
        "dim": dim, "L": L, "integrator": p.integrator, "precision": p.precision, "dt": p.dt,
        "boundary": p.boundary, "m": p.m, "b": p.b, "u": p.u, "K": p.K, "dx": p.dx,
        "steps_per_repeat": steps, "repeats": repeats, "steps_timed": steps_timed,
        "ms_per_step": round(per_step * 1e3, 5),
        "spread": [round(steps / t, 2) for t in sorted(times, reverse=True)],
        "simulated_time_per_s": round(value * p.dt, 4),
        "bytes_per_step": moved,
        "achieved_TBps": round(moved * value / 1e12, 4),
        "bandwidth_fraction": round(moved * value / bandwidth, 4),
        "copy_bandwidth_TBps": round(bandwidth / 1e12, 4),
        "bandwidth_bound_steps_per_s": round(bandwidth / moved, 1),
        "baseline_steps": base_steps, "baseline_ms_per_step": round(base * 1e3, 5),
        "baseline_max_abs_difference_after_one_step": agreement,
        "finite": finite,
        "previous_path": previous,
    }
    if previous:
        details["speedup_vs_previous_path"] = round(value / previous["steps_per_s"], 3)
    if fd_kernel:
        details["fd_kernel"] = fd_kernel
    if fd_kernels:
        details["fd_kernels"] = fd_kernels
        details["fastest_fd_kernel"] = max(fd_kernels, key=lambda k: fd_kernels[k]["steps_per_s"])
    if enqueue is not None:
        details["enqueue_ms_per_step"] = round(enqueue / steps * 1e3, 5)
    return {"case": case_name(name, spec, L, small), "metric": "steps_per_s", "value": round(value, 2),
            "baseline": "plain-roll-rk2" if kind == "fd" else "plain-unfused-fft",
            "baseline_value": round(baseline, 2), "ratio": round(value / baseline, 2),
            "target": spec["target"], "target_met": None if small else target_met(value, spec["target"], False),
            "details": details}


def run_pfhub_case(backend, name: str, spec: dict, args) -> dict:
    from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel
    from latticelab.sim.models.cahn_hilliard.pfhub import read_free_energy, run_pfhub
    small = args.small
    until = args.pfhub_until or (SMALL_PFHUB["until"] if small else 1e6)
    sizes = {"L": SMALL_PFHUB["L"]} if small else {}
    warm = CahnHilliardModel(backend=backend.name, preset="pfhub-1a", **sizes)   # compile kernels, FFT plans
    warm.step(3)
    warm.observables()
    del warm
    model = CahnHilliardModel(backend=backend.name, preset="pfhub-1a", **sizes)
    p = model.params

    def run(folder):
        start = time.perf_counter()
        written = run_pfhub(model, folder, until=until, overwrite=True)
        elapsed = time.perf_counter() - start
        curve = read_free_energy(written["free_energy"])
        return elapsed, curve

    if args.pfhub_out:
        elapsed, curve = run(args.pfhub_out)
    else:
        with tempfile.TemporaryDirectory(prefix="latticelab-pfhub-") as folder:
            elapsed, curve = run(folder)
    energies = {f"{t:g}": float(curve[np.argmin(np.abs(curve[:, 0] - t)), 1])
                for t in (0.0, 1e2, 1e3, 1e4, 1e5, 1e6) if t <= until}
    details = {"preset": "pfhub-1a", "L": p.L, "dx": p.dx, "integrator": p.integrator, "time_step": p.time_step,
               "dt": p.dt, "dt_max": p.dt_max, "max_change": p.max_change, "precision": p.precision,
               "until": until, "steps": model.step_count, "final_time": model.time,
               "last_dt": model.observables()["dt"], "samples": int(curve.shape[0]),
               "free_energy_pfhub": energies, "files": args.pfhub_out or "temporary folder",
               "published": "MOOSE 8 cores ~1250-1950 s, FEniCS 24 cores 388 s"}
    case = {"case": case_name(name, spec, p.L, small, until), "metric": "seconds", "value": round(elapsed, 3),
            "target": spec["target"], "lower_is_better": True,
            "target_met": None if small else target_met(elapsed, spec["target"], True),
            "anchor": spec["anchor"], "anchor_name": spec["anchor_name"],
            "anchor_ratio": round(spec["anchor"] / elapsed, 1), "details": details}
    return case


def _us_per_step(xp, model, work, repeats: int) -> float:
    """Median microseconds per model step of ``work()`` (steps counted by the model), over ``repeats``."""
    per_step = []
    sync = synchronizer(xp)
    for _ in range(repeats):
        before = model.step_count
        sync()
        start = time.perf_counter()
        work()
        sync()
        per_step.append((time.perf_counter() - start) / max(1, model.step_count - before))
    return round(statistics.median(per_step) * 1e6, 2)


def time_adaptive_steps(backend, integrator: str, L: int | None, steps: int, repeats: int) -> dict:
    """Microseconds per step of the pfhub-1a model with ``integrator``: fixed steps, adaptive steps through
    ``step(n)`` and ``advance_to``, the adaptive control alone, and on a GPU the same with the control's earlier
    path (CuPy array reductions)."""
    from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel, adapted_dt
    xp = backend.xp
    sizes = {"L": L} if L else {}
    fixed = CahnHilliardModel(backend=backend.name, preset="pfhub-1a", integrator=integrator, time_step="fixed",
                              dt=1.0, **sizes)
    fixed.step(max(2, steps // 4))                                     # warm-up: kernels, plans, memory pool
    out = {"fixed_us": _us_per_step(xp, fixed, lambda: fixed.step(steps), repeats)}

    def adaptive_model():
        model = CahnHilliardModel(backend=backend.name, preset="pfhub-1a", integrator=integrator, **sizes)
        model.step(max(2, steps // 4))
        return model

    # on a GPU also the control on the host (one synchronisation per step through the fused reduction) and the
    # earlier control path (CuPy array reductions), both timed the same way in the same run
    paths = [("", True, True)] + ([("host_control_", True, False), ("previous_path_", False, False)]
                                  if backend.is_gpu else [])
    for prefix, fused, on_device in paths:
        model = adaptive_model()
        model.fused_change = fused
        model.device_control = on_device
        model.step(2)
        out[prefix + "adaptive_step_us"] = _us_per_step(xp, model, lambda: model.step(steps), repeats)
        # advance_to: the adaptive steps of bench ch-accuracy (its last step shortened, no adaptation there)
        out[prefix + "adaptive_advance_to_us"] = _us_per_step(
            xp, model, lambda: model.advance_to(model.time + steps * model.dt_current), repeats)
        old, new = model.phi.copy(), model.phi
        p = model.params

        def control():
            for _ in range(steps):
                change, top, bottom = model._change_stats(new, old)
                adapted_dt(model.dt_current, change, top, bottom, p)
        calls = []
        for _ in range(repeats):
            start = time.perf_counter()
            control()
            calls.append((time.perf_counter() - start) / steps)
        out[prefix + "control_only_us"] = round(statistics.median(calls) * 1e6, 2)
        out[prefix + "dt_after"] = model.dt_current
    out["adaptive_over_fixed"] = round(out["adaptive_step_us"] / out["fixed_us"], 3)
    out["adaptive_overhead_us"] = round(out["adaptive_step_us"] - out["fixed_us"], 2)
    if "host_control_adaptive_step_us" in out:
        out["host_control_adaptive_over_fixed"] = round(out["host_control_adaptive_step_us"] / out["fixed_us"], 3)
    if "previous_path_adaptive_step_us" in out:
        out["previous_path_adaptive_over_fixed"] = round(out["previous_path_adaptive_step_us"] / out["fixed_us"], 3)
    free_memory(xp)
    return out


def run_adaptive_case(backend, name: str, spec: dict, args) -> dict:
    small = args.small
    L = SMALL_PFHUB["L"] if small else spec["L"]
    steps = args.steps or (4 if small else 200)
    results = {integrator: time_adaptive_steps(backend, integrator, L if small else None, steps, args.repeats)
               for integrator in ("spectral-bdf2", "spectral")}
    main = results["spectral-bdf2"]
    details = {"preset": "pfhub-1a", "L": L, "precision": "double", "fixed_dt": 1.0, "steps_per_repeat": steps,
               "repeats": args.repeats, "per_integrator": results,
               "note": "value: us per adaptive spectral-bdf2 step through step(n); baseline: a fixed one"}
    return {"case": case_name(name, spec, L, small), "metric": "us_per_step", "value": main["adaptive_step_us"],
            "lower_is_better": True, "baseline": "fixed-dt-step", "baseline_value": main["fixed_us"],
            "ratio": main["adaptive_over_fixed"], "target": None, "target_met": None, "details": details}


def case_name(name: str, spec: dict, L: int, small: bool, until: float | None = None) -> str:
    """The bench-format name; --small runs name their real sizes so they never pass for the real cases."""
    if not small:
        return name
    if spec["kind"] == "pfhub":
        return f"pfhub-1a-L{L}-t{until:g}"
    return f"cahn-hilliard-{spec['dim']}d-L{L}-{spec['kind']}"


def _chosen_cases(args) -> list[str]:
    names = select_cases(args.cases, CASES)
    if args.cases == "all":
        names = [n for n in names if not CASES[n].get("opt_in")]
    if args.skip_pfhub:
        names = [n for n in names if CASES[n]["kind"] != "pfhub"]
    if args.repeats < 1 or args.steps < 0:
        raise ValueError("--repeats must be >= 1 and --steps >= 0")
    if not args.spectral_dt > 0:
        raise ValueError("--spectral-dt must be > 0")
    if args.pfhub_until is not None and not (math.isfinite(args.pfhub_until) and args.pfhub_until > 0):
        raise ValueError("--pfhub-until must be a finite time > 0")
    if not names:
        raise ValueError("no case left to run")
    from latticelab.sim.models.cahn_hilliard.finite_difference import KERNELS
    if args.fd_kernel is not None and args.fd_kernel not in KERNELS:
        raise ValueError(f"--fd-kernel must be one of {', '.join(KERNELS)}")
    return names


def _run_and_say(backend, name: str, args, bandwidth: float) -> dict:
    spec = CASES[name]
    if spec["kind"] == "adaptive":
        case = run_adaptive_case(backend, name, spec, args)
        for integrator, r in case["details"]["per_integrator"].items():
            earlier = (f"; control on the host {r['host_control_adaptive_step_us']} us/step (advance_to "
                       f"{r['host_control_adaptive_advance_to_us']}), earlier control "
                       f"{r['previous_path_adaptive_step_us']} us/step"
                       if "previous_path_adaptive_step_us" in r else "")
            print(f"  {case['case']} {integrator}: fixed {r['fixed_us']} us/step, adaptive {r['adaptive_step_us']} "
                  f"(advance_to {r['adaptive_advance_to_us']}, control alone {r['control_only_us']}) us/step, "
                  f"x{r['adaptive_over_fixed']}{earlier}", flush=True)
    elif spec["kind"] == "pfhub":
        case = run_pfhub_case(backend, name, spec, args)
        d = case["details"]
        print(f"  {case['case']}: {case['value']} s to t = {d['until']:g} ({d['steps']} steps)", flush=True)
    else:
        case = run_grid_case(backend, name, spec, args, bandwidth)
        d = case["details"]
        earlier = d.get("previous_path")
        before = f"; earlier path {earlier['steps_per_s']} steps/s" if earlier else ""
        if d.get("fd_kernels"):
            before += f"; kernel {d['fd_kernel']}; variants " + ", ".join(
                f"{k} {v['steps_per_s']}" for k, v in d["fd_kernels"].items()) + " steps/s"
        print(f"  {case['case']}: {case['value']} steps/s ({d['ms_per_step']} ms/step, "
              f"{100 * d['bandwidth_fraction']:.0f}% of copy bandwidth); plain {case['baseline_value']} "
              f"steps/s, x{case['ratio']}{before}", flush=True)
    return case


def _compare(cases: list[dict]) -> None:
    """Spectral against finite differences in simulated time per wall second (same dimension, this run)."""
    by_kind = {(c["details"].get("dim"), c["details"].get("integrator")): c for c in cases if "dim" in c["details"]}
    for dim in (2, 3):
        fd, sp = by_kind.get((dim, "finite-difference")), by_kind.get((dim, "spectral"))
        if fd and sp:
            sp["details"]["simulated_time_ratio_vs_fd"] = round(
                sp["details"]["simulated_time_per_s"] / fd["details"]["simulated_time_per_s"], 2)
            sp["details"]["simulated_time_ratio_note"] = (f"spectral dt {sp['details']['dt']:g} against finite "
                                                          f"differences dt {fd['details']['dt']:g}; not at equal "
                                                          "accuracy")


def main(args) -> int:
    return run_benchmark("cahn-hilliard", args, _chosen_cases, _run_and_say, _compare)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="latticelab bench cahn-hilliard", description=__doc__.splitlines()[0])
    add_arguments(parser)
    raise SystemExit(main(parser.parse_args()))
