"""`latticelab bench ch-accuracy`: Cahn-Hilliard finite differences against the spectral solver at equal accuracy.

Issue 14's target: the spectral solver reaches a given accuracy of the free-energy curve at least 30x cheaper
(wall time to the same simulated time) than the finite-difference RK2 solver.

The problem: 2D, periodic, m = b = u = K = 1, a square domain of side ``--domain`` (default 32), double
precision, no noise, from one smooth initial field made of a few Fourier modes of the domain (so every grid
holds exactly the same field): amplitude 0.05, spinodal decomposition to ``--until`` (default 30: the linear
growth and the first nonlinear phase separation; F falls by several times its initial value).

The accuracy: the free-energy curve F(t) = sum(-b/2 phi^2 + u/4 phi^4 + K/2 |grad phi|^2) dx^2 (each
integrator's own F, sim/models/cahn_hilliard/model.py) sampled at ``--samples`` equally spaced times, against a
converged reference run (spectral, on the finest grid, at the tiny ``--reference-dt``):

    error = max_i |F(t_i) - F_ref(t_i)| / (F_ref(0) - F_ref(until))

i.e. the largest deviation as a fraction of the whole drop of F. The field's relative L2 error at ``until``
(the reference taken at the coarser grid's points) is reported beside it. The reference's own error is
estimated by a second reference run at twice its dt (``reference_self_error``); it must be far below the
target for the comparison to mean anything.

The runs: finite differences on each grid of ``--grids`` (dx values) at the fractions ``--fd-fractions`` of
the RK2 stability limit (the spatial O(dx^2) error needs fine grids, the stability limit then forces
dt ~ dx^4), and the spectral solver on each grid at the steps ``--spectral-dts``. Each run's wall time covers
only the steps (the device synchronised before each clock reading; observables are computed outside).

The result: for each method the cheapest measured run whose error is at most ``--target`` (default 0.01), and
the cost ratio finite differences / spectral; every run is listed in the JSON's details.

``--backend numpy`` runs the same cases on the CPU (under a minute at the defaults on one idle core); ``--small`` is a smoke
run of the code path (tiny domain and time). Nothing here assumes NumPy arrays: the model's arrays stay on its
device and only the observables and the final field are copied back.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field

import numpy as np

from latticelab.bench.cahn_hilliard import finish, open_backend, synchronizer

SMALL = dict(domain=8.0, until=2.0, grids="1,0.5", fd_fractions="0.8,0.4", spectral_dts="0.2,0.1",
             reference_dt=0.005, samples=4)
MODES = ((1, 0, 1.0), (0, 1, 0.8), (2, 1, 0.6), (1, 3, 0.5), (3, 2, 0.4))   # (jx, jy, weight) of 2 pi / domain


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("cuda", "numpy"), default="cuda",
                        help="cuda (default; the lead's GPU run) or numpy (the same cases on the CPU)")
    parser.add_argument("--domain", type=float, default=32.0, help="side of the square domain (default 32)")
    parser.add_argument("--until", type=float, default=30.0, help="simulated end time (default 30)")
    parser.add_argument("--samples", type=int, default=10, help="free-energy samples over the run (default 10)")
    parser.add_argument("--grids", default="1,0.5", help="grid spacings dx, comma-separated (default 1,0.5)")
    parser.add_argument("--fd-fractions", default="0.8",
                        help="finite-difference dt as fractions of its stability limit (default 0.8: at these "
                             "grids its error is spatial, smaller steps only cost more; try 0.8,0.4,0.2)")
    parser.add_argument("--spectral-dts", default="0.1,0.05,0.02,0.01,0.005",
                        help="spectral time steps (default 0.1,0.05,0.02,0.01,0.005)")
    parser.add_argument("--reference-dt", type=float, default=0.001,
                        help="time step of the spectral reference on the finest grid (default 0.001)")
    parser.add_argument("--target", type=float, default=0.01,
                        help="target error of the free-energy curve, a fraction of its drop (default 0.01)")
    parser.add_argument("--small", action="store_true", help="a smoke run: tiny domain, short time")
    parser.add_argument("--out-dir", default="bench/results", help="where ch-accuracy-<device>.json goes")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--commit", default=None, help="commit to record (default: git rev-parse)")


# ---- the problem -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    domain: float = 32.0
    until: float = 30.0
    samples: int = 10
    amplitude: float = 0.05

    def times(self) -> np.ndarray:
        return np.linspace(0.0, self.until, self.samples + 1)

    def grid_side(self, dx: float) -> int:
        L = round(self.domain / dx)
        if L < 4 or not math.isclose(L * dx, self.domain, rel_tol=1e-9):
            raise ValueError(f"--grids: dx = {dx:g} does not divide the domain {self.domain:g} into >= 4 cells")
        return L

    def initial_field(self, dx: float) -> np.ndarray:
        """The smooth initial field at the cell points x = i dx (host float64): the same continuous field on
        every grid, so grids differ only in how well they resolve what follows."""
        L = self.grid_side(dx)
        y, x = np.meshgrid(np.arange(L) * dx, np.arange(L) * dx, indexing="ij")
        k = 2 * np.pi / self.domain
        phi = sum(w * np.cos(k * (jx * x + jy * y) + 0.7 * (jx + 2 * jy)) for jx, jy, w in MODES)
        return self.amplitude * phi / sum(w for _, _, w in MODES)


@dataclass
class Run:
    method: str          # "finite-difference" or "spectral"
    dx: float
    dt: float            # the step used (requested dt shortened so each sample interval is whole steps)
    steps: int
    wall_s: float
    free_energy: list[float]
    phi_end: np.ndarray = field(repr=False)
    error: float | None = None
    field_error: float | None = None

    def summary(self) -> dict:
        return {"method": self.method, "dx": self.dx, "dt": self.dt, "steps": self.steps,
                "wall_s": round(self.wall_s, 4), "error": self.error, "field_error": self.field_error}


def run(backend_name: str, problem: Problem, method: str, dx: float, dt: float) -> Run:
    """One run from the initial field to ``until``, F sampled at ``problem.times()``; wall time of the steps only."""
    from latticelab.sim.models import get_model
    cls = get_model("cahn-hilliard")
    interval = problem.until / problem.samples
    per_sample = max(1, math.ceil(interval / dt - 1e-9))
    dt = interval / per_sample
    model = cls.create(backend=backend_name, dim=2, L=problem.grid_side(dx), dx=dx, boundary="periodic",
                       integrator=method, precision="double", dt=dt, noise=0.0, phi0=0.0, thermal=0.0)
    model.set_field(problem.initial_field(dx))
    sync = synchronizer(model.xp)
    energies = [model.observables()["free_energy"]]
    wall = 0.0
    for _ in range(problem.samples):
        sync()
        start = time.perf_counter()
        model.step(per_sample)
        sync()
        wall += time.perf_counter() - start
        energies.append(model.observables()["free_energy"])
    from latticelab.sim.backend import to_numpy
    return Run(method, dx, dt, per_sample * problem.samples, wall, energies, to_numpy(model.phi).astype(np.float64))


def curve_error(run_: Run, reference: Run) -> float:
    """max_i |F(t_i) - F_ref(t_i)| over the drop F_ref(0) - F_ref(until) (see the module docstring)."""
    f, ref = np.asarray(run_.free_energy), np.asarray(reference.free_energy)
    if f.shape != ref.shape:
        raise ValueError("runs sampled at different times cannot be compared")
    drop = ref[0] - ref[-1]
    if not drop > 0:
        raise ValueError("the reference's free energy does not fall: nothing to measure the error against")
    return float(np.max(np.abs(f - ref)) / drop)


def field_error(run_: Run, reference: Run) -> float:
    """Relative L2 distance of the final fields, the reference read at the run's grid points."""
    step = round(run_.dx / reference.dx)
    if step < 1 or not math.isclose(step * reference.dx, run_.dx, rel_tol=1e-9):
        raise ValueError(f"dx = {run_.dx:g} is not a multiple of the reference's dx = {reference.dx:g}")
    ref = reference.phi_end[::step, ::step]
    return float(np.linalg.norm(run_.phi_end - ref) / np.linalg.norm(ref))


def cheapest(runs: list[Run], method: str, target: float) -> Run | None:
    meeting = [r for r in runs if r.method == method and r.error is not None and r.error <= target]
    return min(meeting, key=lambda r: r.wall_s) if meeting else None


def fd_stable_dt(dx: float) -> float:
    from latticelab.sim.models.cahn_hilliard.params import fd_stable_dt as limit
    return limit(2, dx, 1.0, 1.0, 1.0, 1.0)


# ---- the benchmark -----------------------------------------------------------------------------------------
def _floats(text: str, flag: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag}: expected comma-separated numbers; got {text!r}") from None
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"{flag}: expected positive numbers; got {text!r}")
    return values


def main(args) -> int:
    from latticelab.sim.backend import BackendError
    settings = {k: getattr(args, k) for k in SMALL}
    if args.small:
        settings.update(SMALL)
    try:
        problem = Problem(domain=float(settings["domain"]), until=float(settings["until"]),
                          samples=int(settings["samples"]))
        if not (problem.until > 0 and problem.samples >= 1 and problem.domain > 0):
            raise ValueError("--until, --samples and --domain must be positive")
        grids = sorted(_floats(str(settings["grids"]), "--grids"), reverse=True)
        fractions = _floats(str(settings["fd_fractions"]), "--fd-fractions")
        if max(fractions) >= 1:
            raise ValueError("--fd-fractions: each must be below 1 (the stability limit)")
        spectral_dts = _floats(str(settings["spectral_dts"]), "--spectral-dts")
        reference_dt = _floats(str(settings["reference_dt"]), "--reference-dt")[0]
        for dx in grids:
            problem.grid_side(dx)
        if not 0 < args.target < 1:
            raise ValueError("--target must be a fraction in (0, 1)")
    except ValueError as exc:
        print(f"latticelab bench ch-accuracy: {exc}")
        return 2
    try:
        backend, device = open_backend(args.backend, "ch-accuracy")
    except BackendError as exc:
        print(f"latticelab bench ch-accuracy needs a CUDA GPU (or --backend numpy): {exc}")
        return 1
    name = backend.name
    finest = grids[-1]
    run(name, problem, "spectral", grids[0], spectral_dts[0])       # warm-up: kernels, FFT plans
    run(name, problem, "finite-difference", grids[0], fractions[0] * fd_stable_dt(grids[0]))
    reference = run(name, problem, "spectral", finest, reference_dt)
    check = run(name, problem, "spectral", finest, 2 * reference_dt)
    self_error = curve_error(check, reference)
    print(f"reference: spectral, dx = {finest:g}, dt = {reference.dt:g}, {reference.steps} steps, "
          f"{reference.wall_s:.2f} s; error of the same at 2 dt: {self_error:.2e}", flush=True)
    runs = []
    for dx in grids:
        for fraction in fractions:
            runs.append(run(name, problem, "finite-difference", dx, fraction * fd_stable_dt(dx)))
        for dt in spectral_dts:
            runs.append(run(name, problem, "spectral", dx, dt))
    for r in runs:
        r.error, r.field_error = curve_error(r, reference), field_error(r, reference)
        print(f"  {r.method:18} dx {r.dx:<5g} dt {r.dt:<9.4g} {r.steps:7d} steps {r.wall_s:8.3f} s  "
              f"F error {r.error:.2e}  field error {r.field_error:.2e}", flush=True)
    fd, sp = cheapest(runs, "finite-difference", args.target), cheapest(runs, "spectral", args.target)
    ratio = round(fd.wall_s / sp.wall_s, 2) if fd and sp else None
    details = {"problem": {"dim": 2, "domain": problem.domain, "until": problem.until, "samples": problem.samples,
                           "m": 1, "b": 1, "u": 1, "K": 1, "precision": "double", "boundary": "periodic"},
               "error_definition": "max_i |F(t_i) - F_ref(t_i)| / (F_ref(0) - F_ref(until))",
               "target_error": args.target,
               "reference": {**reference.summary(), "self_error_at_2dt": self_error},
               "fd_cheapest": fd.summary() if fd else None, "spectral_cheapest": sp.summary() if sp else None,
               "runs": [r.summary() for r in runs]}
    case = {"case": "ch-accuracy-2d-spectral-vs-fd" + ("-small" if args.small else ""),
            "metric": "cost_ratio", "value": ratio if ratio is not None else float("nan"),
            "target": 30.0, "target_met": bool(ratio is not None and ratio >= 30.0),
            "unit": "wall time of finite differences / spectral at the target error", "details": details}
    if ratio is None:
        missing = [m for m, r in (("finite-difference", fd), ("spectral", sp)) if r is None]
        print(f"no {' and no '.join(missing)} run reached the target error {args.target:g}: add finer grids or "
              "smaller steps", flush=True)
    else:
        print(f"cheapest at error <= {args.target:g}: finite differences {fd.wall_s:.3f} s (dx {fd.dx:g}, "
              f"dt {fd.dt:.3g}), spectral {sp.wall_s:.3f} s (dx {sp.dx:g}, dt {sp.dt:.3g}): ratio {ratio}", flush=True)
    return finish("ch-accuracy", device, [case], args, args.small)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="latticelab bench ch-accuracy", description=__doc__.splitlines()[0])
    add_arguments(parser)
    raise SystemExit(main(parser.parse_args()))
