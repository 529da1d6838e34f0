"""`latticelab bench ch-accuracy`: Cahn-Hilliard finite differences against the spectral solver at equal accuracy.

Issue 14's target: the spectral solver reaches a given accuracy of the free-energy curve at least 30x cheaper
(wall time to the same simulated time) than the finite-difference RK2 solver.

The problem: 2D, periodic, m = b = u = K = 1, a square domain of side ``--domain`` (default 32), double
precision, no noise, from one smooth initial field made of a few Fourier modes of the domain (so every grid
holds exactly the same field): amplitude 0.05, spinodal decomposition to ``--until`` (default 30: the linear
growth and the first nonlinear phase separation; F falls by several times its initial value).

The accuracy: the free-energy curve F(t) = sum(-b/2 phi^2 + u/4 phi^4 + K/2 |grad phi|^2) dx^2 (each
integrator's own F, sim/models/cahn_hilliard/model.py) sampled at ``--samples`` equally spaced times, against a
converged reference run (``--reference-integrator``, default the second-order spectral step, on the finest
grid, at the tiny ``--reference-dt``):

    error = max_i |F(t_i) - F_ref(t_i)| / (F_ref(0) - F_ref(until))

i.e. the largest deviation as a fraction of the whole drop of F. The field's relative L2 error at ``until``
(the reference taken at the coarser grid's points) is reported beside it. The reference's own error is
estimated by a second reference run at twice its dt (``reference_self_error``); it must be far below the
target for the comparison to mean anything.

The runs: finite differences on each grid of ``--grids`` (dx values) at the fractions ``--fd-fractions`` of
the RK2 stability limit (the spatial O(dx^2) error needs fine grids, the stability limit then forces
dt ~ dx^4), and each spectral integrator of ``--spectral-integrators`` (default both: "spectral", first order
in time, and "spectral-bdf2", second order) on each grid at the steps ``--spectral-dts``. Each run's wall time
covers only the steps (the device synchronised before each clock reading; observables are computed outside).

The result: for each method the wall time at exactly the target error ``--target`` (default 0.01), interpolated
on the method's cost-error front (the runs no other run of the method beats in both): between the two front runs
on either side of the target, log(wall time) linear in log(error). A method whose every run is below the target
has no bracket; its cheapest run is taken (an upper bound of its cost, flagged ``bracketed: false``). The case's
value is the ratio finite differences / spectral-bdf2 at the target (the first-order step's ratio and the ratios
of the cheapest measured runs are in the details); every run is listed in the JSON's details.

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
SPECTRAL = ("spectral", "spectral-bdf2")
BEST = "spectral-bdf2"          # the spectral integrator the case's value is for
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
    parser.add_argument("--spectral-dts", default="0.5,0.2,0.1,0.05,0.02,0.01,0.005",
                        help="spectral time steps (default 0.5,0.2,0.1,0.05,0.02,0.01,0.005: the second-order "
                             "step meets 1% at the larger ones, so the target needs them to be bracketed)")
    parser.add_argument("--spectral-integrators", default="spectral,spectral-bdf2",
                        help="spectral integrators to measure (default spectral,spectral-bdf2)")
    parser.add_argument("--reference-dt", type=float, default=0.001,
                        help="time step of the spectral reference on the finest grid (default 0.001)")
    parser.add_argument("--reference-integrator", choices=SPECTRAL, default="spectral-bdf2",
                        help="integrator of the reference (default spectral-bdf2, second order in time)")
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
    method: str          # the integrator: "finite-difference", "spectral" or "spectral-bdf2"
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


def front(runs: list[Run], method: str) -> list[Run]:
    """The method's cost-error front: runs that no other run beats in both wall time and error, cheapest first
    (so their errors fall)."""
    mine = sorted((r for r in runs if r.method == method and r.error is not None and r.error > 0),
                  key=lambda r: (r.wall_s, r.error))
    out = []
    for r in mine:
        if not out or r.error < out[-1].error:
            out.append(r)
    return out


def cost_at_target(runs: list[Run], method: str, target: float) -> dict | None:
    """Wall time at exactly ``target`` error: log-log interpolation between the two front runs around it
    ({"wall_s", "bracketed": True, "between": [run, run]}); the cheapest run when every run is below the target
    ({"bracketed": False}: an upper bound); None when no run reaches the target."""
    points = front(runs, method)
    below = [i for i, r in enumerate(points) if r.error <= target]
    if not below:
        return None
    i = below[0]
    if i == 0:
        return {"wall_s": points[0].wall_s, "bracketed": False, "between": [points[0].summary()]}
    hi, lo = points[i - 1], points[i]          # hi: error above the target, cheaper; lo: below, dearer
    x = (math.log(target) - math.log(hi.error)) / (math.log(lo.error) - math.log(hi.error))
    wall = math.exp(math.log(hi.wall_s) + x * (math.log(lo.wall_s) - math.log(hi.wall_s)))
    return {"wall_s": wall, "bracketed": True, "between": [hi.summary(), lo.summary()]}


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
        integrators = [v.strip() for v in args.spectral_integrators.split(",") if v.strip()]
        if not integrators or not set(integrators) <= set(SPECTRAL):
            raise ValueError(f"--spectral-integrators: choose from {', '.join(SPECTRAL)}; got "
                             f"{args.spectral_integrators!r}")
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
    for method in integrators:                                      # warm-up: kernels, FFT plans
        run(name, problem, method, grids[0], spectral_dts[0])
    run(name, problem, "finite-difference", grids[0], fractions[0] * fd_stable_dt(grids[0]))
    reference = run(name, problem, args.reference_integrator, finest, reference_dt)
    check = run(name, problem, args.reference_integrator, finest, 2 * reference_dt)
    self_error = curve_error(check, reference)
    print(f"reference: {reference.method}, dx = {finest:g}, dt = {reference.dt:g}, {reference.steps} steps, "
          f"{reference.wall_s:.2f} s; error of the same at 2 dt: {self_error:.2e}", flush=True)
    runs = []
    for dx in grids:
        for fraction in fractions:
            runs.append(run(name, problem, "finite-difference", dx, fraction * fd_stable_dt(dx)))
        for method in integrators:
            for dt in spectral_dts:
                runs.append(run(name, problem, method, dx, dt))
    for r in runs:
        r.error, r.field_error = curve_error(r, reference), field_error(r, reference)
        print(f"  {r.method:18} dx {r.dx:<5g} dt {r.dt:<9.4g} {r.steps:7d} steps {r.wall_s:8.3f} s  "
              f"F error {r.error:.2e}  field error {r.field_error:.2e}", flush=True)
    methods = ["finite-difference", *integrators]
    at_target = {m: cost_at_target(runs, m, args.target) for m in methods}
    cheap = {m: cheapest(runs, m, args.target) for m in methods}
    fd, fd_cheap = at_target["finite-difference"], cheap["finite-difference"]
    ratios, cheapest_ratios = {}, {}
    for m in integrators:
        if fd and at_target[m]:
            ratios[m] = round(fd["wall_s"] / at_target[m]["wall_s"], 2)
            cheapest_ratios[m] = round(fd_cheap.wall_s / cheap[m].wall_s, 2)
        report_method(m, at_target[m], cheap[m], args.target)
    report_method("finite-difference", fd, fd_cheap, args.target)
    for m in integrators:
        if m in ratios:
            print(f"finite differences / {m} at error {args.target:g}: interpolated {ratios[m]}, cheapest measured "
                  f"runs {cheapest_ratios[m]}", flush=True)
    best = BEST if BEST in integrators else integrators[0]
    ratio = ratios.get(best)
    details = {"problem": {"dim": 2, "domain": problem.domain, "until": problem.until, "samples": problem.samples,
                           "m": 1, "b": 1, "u": 1, "K": 1, "precision": "double", "boundary": "periodic"},
               "error_definition": "max_i |F(t_i) - F_ref(t_i)| / (F_ref(0) - F_ref(until))",
               "target_error": args.target, "value_for": best,
               "cost_definition": "wall time at the target error, log-log interpolated on each method's "
                                  "cost-error front (bracketed: false = the cheapest run below the target)",
               "reference": {**reference.summary(), "self_error_at_2dt": self_error},
               "cost_at_target": at_target, "ratio_at_target": ratios,
               "cheapest_at_target": {m: (r.summary() if r else None) for m, r in cheap.items()},
               "ratio_cheapest_measured": cheapest_ratios,
               "runs": [r.summary() for r in runs]}
    case = {"case": "ch-accuracy-2d-spectral-vs-fd" + ("-small" if args.small else ""),
            "metric": "cost_ratio", "value": ratio if ratio is not None else float("nan"),
            "target": 30.0, "target_met": bool(ratio is not None and ratio >= 30.0),
            "unit": f"wall time of finite differences / {best} at the target error", "details": details}
    if ratio is None:
        missing = [m for m in ("finite-difference", best) if at_target[m] is None]
        print(f"no {' and no '.join(missing)} run reached the target error {args.target:g}: add finer grids or "
              "smaller steps", flush=True)
    return finish("ch-accuracy", device, [case], args, args.small)


def report_method(method: str, at: dict | None, cheap: Run | None, target: float) -> None:
    if at is None:
        print(f"  {method}: no run reached {target:g}", flush=True)
        return
    how = "interpolated" if at["bracketed"] else "cheapest run (every run below the target: an upper bound)"
    print(f"  {method}: {at['wall_s']:.4g} s at error {target:g} ({how}); cheapest measured run at or below it "
          f"{cheap.wall_s:.4g} s (dx {cheap.dx:g}, dt {cheap.dt:.3g}, error {cheap.error:.2e})", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="latticelab bench ch-accuracy", description=__doc__.splitlines()[0])
    add_arguments(parser)
    raise SystemExit(main(parser.parse_args()))
