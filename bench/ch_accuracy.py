"""`latticelab bench ch-accuracy`: Cahn-Hilliard finite differences against the spectral solver at equal accuracy.

Issue 14's target: the spectral solver reaches a given accuracy of the free-energy curve at least 30x cheaper
(wall time to the same simulated time) than the finite-difference RK2 solver.

The default problem (``--problem smooth``): 2D, periodic, m = b = u = K = 1, a square domain of side ``--domain``
(default 32), double precision, no noise, from one smooth initial field made of a few Fourier modes of the domain (so
every grid holds exactly the same field): amplitude 0.05, spinodal decomposition to ``--until`` (default 30: the linear
growth and the first nonlinear phase separation; F falls by several times its initial value).

The accuracy: the free-energy curve F(t) = sum(-b/2 phi^2 + u/4 phi^4 + K/2 |grad phi|^2) dx^2 (each
integrator's own F, sim/models/cahn_hilliard/model.py) sampled at ``--samples`` equally spaced times, against a
converged reference run (``--reference-integrator``, default the second-order spectral step, on the finest
grid, at the tiny ``--reference-dt``):

    error = max_i |F(t_i) - F_ref(t_i)| / (F_ref(0) - F_ref(until))

i.e. the largest deviation as a fraction of the whole drop of F. The field's relative L2 error at ``until``
(at the points the run's grid and the reference's share) is reported beside it. The reference's own error is
estimated by a second reference run at twice its dt (``reference_self_error``); it must be far below the
target for the comparison to mean anything.

The runs: finite differences on each grid of ``--grids`` (dx values) at the fractions ``--fd-fractions`` of
the RK2 stability limit (the spatial O(dx^2) error needs fine grids, the stability limit then forces
dt ~ dx^4), and each spectral integrator of ``--spectral-integrators`` (default both: "spectral", first order
in time, and "spectral-bdf2", second order) on each grid at the steps ``--spectral-dts``. Each run's wall time
covers only the steps (the device synchronised before each clock reading; observables are computed outside); a
run shorter than 2 s is made again from a fresh model, ``--repeats`` times in all (default 3), and its shortest
time is its cost (the runs are deterministic; every timing is in the JSON).

The result: for each method the wall time at exactly the target error ``--target`` (default 0.01), interpolated
on the method's cost-error front (the runs no other run of the method beats in both): between the two front runs
on either side of the target, log(wall time) linear in log(error). A method whose every run is below the target
has no bracket; its cheapest run is taken (an upper bound of its cost, flagged ``bracketed: false``). The case's
value is the largest ratio finite differences / spectral method at the target over the spectral methods run
(each integrator with fixed steps, and with adaptive steps when ``--adaptive-changes`` are given or the problem sets
them): the spectral solver run the cheapest way it reaches that accuracy (``value_for`` names it; every method's ratio
and the ratios of the cheapest measured runs are in the details); every run is listed in the JSON's details.

The PFHub problem (``--problem pfhub-1a``): PFHub benchmark 1a (spinodal decomposition, 200 x 200, periodic;
sim/models/cahn_hilliard/pfhub.py maps it exactly onto this model: m = 125, b = u = 0.032, K = 0.08, phi =
(c - 0.5)/0.2, PFHub's dx = 1) from PFHub's own initial field sampled at x = i dx on each grid, to ``--until``
(default 1000, PFHub's first snapshot: the fast drop of F around t = 10-30, where every scheme's error peaks,
then coarsening). F is sampled at every time unit to t = 100 and every 10 after (``--samples`` equal base
intervals, the first 100 kept, then every 10th). The reference is ``--reference-integrator`` on PFHub's own
grid (``--reference-dx``, default 1, L = 200) at ``--reference-dt`` (default 0.02); besides its self-error at
2 dt, a grid check compares the 2 dt run with the same scheme and dt on the grid twice as fine
(``grid_check`` in the reference's details: the spatial error of the reference plus the grid dependence of PFHub's
initial field, which is not periodic on 200 and so has a seam whose discrete energy depends on dx; it is the floor of
any comparison across grids). Finite differences run on ``--grids`` (default 2, 1.25, 1: L = 100, 160, 200; dx = 1
already meets 1% at about 0.4%, so coarser grids bracket the target), the spectral steps on
``--spectral-grids`` (default PFHub's dx = 1; on a GPU a 200^2 spectral step is launch-bound, a coarser grid
would not be cheaper), at the fixed ``--spectral-dts`` and with adaptive steps (the model's ``time_step
adaptive``: the step grows up to ``--adaptive-dt-max`` while the largest change of phi per step stays near
``max_change``) for each of ``--adaptive-changes``, starting from ``--adaptive-dt``. An adaptive run is timed
in one ``advance_to(until)`` and then repeated untimed (the runs are deterministic) to read F at the steps
around each sample time; F at the sample time is interpolated linearly between them (landing on each sample
time would shorten a step and restart the second-order step at first order). Steps to t = 1000 at 0.8 of the
stability limit: 35,000 (dx = 2), 189,000 (dx = 1.25), 441,000 (dx = 1), 6.6 million (dx = 0.5, left out:
minutes on a GPU, and not needed). The smooth problem stays the default: its results and tests
(tests/test_cahn_hilliard_accuracy.py) are for it, and ``--problem pfhub-1a`` names what is measured.

``--backend numpy`` runs the same cases on the CPU (smooth: under a minute at the defaults on one idle core;
pfhub-1a: the finite-difference runs alone take about half an hour to t = 1000, use ``--until 50``);
``--small`` is a smoke run of the code path (tiny domain and time; pfhub-1a: coarse grids dx = 4, 2, reference
on dx = 2, t = 0 .. 20, seconds). Nothing here assumes NumPy arrays: the model's arrays stay on its device and
only the observables and the final field are copied back.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from latticelab.bench.cahn_hilliard import finish, open_backend, synchronizer

PFHUB_SIDE = 200.0              # PFHub benchmark 1's domain (pfhub.SIDE)

PROBLEMS = ("smooth", "pfhub-1a")
# per-problem defaults of the options left at None, and the --small settings (explicit options win over both)
DEFAULTS = {
    "smooth": dict(domain=32.0, until=30.0, samples=10, grids="1,0.5", spectral_grids=None, fd_fractions="0.8",
                   spectral_dts="0.5,0.2,0.1,0.05,0.02,0.01,0.005", reference_dt=0.001, reference_dx=None,
                   adaptive_changes="", adaptive_dt=0.01, adaptive_dt_max=10.0),
    "pfhub-1a": dict(domain=200.0, until=1000.0, samples=None, grids="2,1.25,1", spectral_grids="1",
                     fd_fractions="0.8", spectral_dts="1,0.5,0.2,0.1,0.05,0.02", reference_dt=0.02,
                     reference_dx=1.0, adaptive_changes="0.1,0.05,0.02,0.01,0.005,0.002", adaptive_dt=0.01,
                     adaptive_dt_max=50.0),
}
SMALL = {
    "smooth": dict(domain=8.0, until=2.0, grids="1,0.5", fd_fractions="0.8,0.4", spectral_dts="0.2,0.1",
                   reference_dt=0.005, samples=4),
    "pfhub-1a": dict(until=20.0, samples=20, grids="4,2", spectral_grids="2", spectral_dts="1,0.5,0.2",
                     reference_dt=0.05, reference_dx=2.0, adaptive_changes="0.02"),
}
SETTINGS = tuple(DEFAULTS["smooth"])
SPECTRAL = ("spectral", "spectral-bdf2")
BEST = "spectral-bdf2"          # the case value's method when no spectral method reached the target
MODES = ((1, 0, 1.0), (0, 1, 0.8), (2, 1, 0.6), (1, 3, 0.5), (3, 2, 0.4))   # (jx, jy, weight) of 2 pi / domain
DENSE_UNTIL, THIN = 100.0, 10   # pfhub-1a: every base sample to t = 100, then every 10th
ADAPTIVE = "-adaptive"          # method label of adaptive runs: "spectral-adaptive", "spectral-bdf2-adaptive"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("cuda", "numpy"), default="cuda",
                        help="cuda (default; the lead's GPU run) or numpy (the same cases on the CPU)")
    parser.add_argument("--problem", choices=PROBLEMS, default="smooth",
                        help="smooth (default: a smooth field of a few modes, domain --domain, t = 0 .. 30) or "
                             "pfhub-1a (PFHub benchmark 1a, 200 x 200, t = 0 .. 1000); the defaults below are "
                             "per problem")
    parser.add_argument("--domain", type=float, default=None,
                        help="side of the square domain (smooth; default 32; pfhub-1a: fixed at 200)")
    parser.add_argument("--until", type=float, default=None, help="simulated end time (default 30; pfhub-1a 1000)")
    parser.add_argument("--samples", type=int, default=None,
                        help="equal intervals of the free-energy samples (default 10; pfhub-1a: one per time unit, "
                             "every one kept to t = 100, every 10th after)")
    parser.add_argument("--grids", default=None,
                        help="grid spacings dx, comma-separated (default 1,0.5; pfhub-1a 2,1.25,1)")
    parser.add_argument("--spectral-grids", default=None,
                        help="grid spacings of the spectral runs (default: --grids; pfhub-1a: 1, PFHub's grid)")
    parser.add_argument("--fd-fractions", default=None,
                        help="finite-difference dt as fractions of its stability limit (default 0.8: at these "
                             "grids its error is spatial, smaller steps only cost more; try 0.8,0.4,0.2)")
    parser.add_argument("--spectral-dts", default=None,
                        help="spectral time steps (default 0.5,0.2,0.1,0.05,0.02,0.01,0.005: the second-order "
                             "step meets 1%% at the larger ones, so the target needs them to be bracketed; "
                             "pfhub-1a 1,0.5,0.2,0.1,0.05,0.02)")
    parser.add_argument("--spectral-integrators", default="spectral,spectral-bdf2",
                        help="spectral integrators to measure (default spectral,spectral-bdf2)")
    parser.add_argument("--adaptive-changes", default=None,
                        help="adaptive spectral runs, one per max_change (the target change of phi per step "
                             "relative to its amplitude), comma-separated; empty: none (default none; pfhub-1a "
                             "0.1,0.05,0.02,0.01,0.005,0.002)")
    parser.add_argument("--adaptive-dt", type=float, default=None,
                        help="first and smallest adaptive step (default 0.01)")
    parser.add_argument("--adaptive-dt-max", type=float, default=None,
                        help="largest adaptive step (default 10; pfhub-1a 50)")
    parser.add_argument("--reference-dt", type=float, default=None,
                        help="time step of the reference (default 0.001; pfhub-1a 0.02)")
    parser.add_argument("--reference-dx", type=float, default=None,
                        help="grid of the reference (default: the finest of --grids; pfhub-1a 1, PFHub's grid)")
    parser.add_argument("--reference-integrator", choices=SPECTRAL, default="spectral-bdf2",
                        help="integrator of the reference (default spectral-bdf2, second order in time)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="times each run shorter than 2 s is timed (fresh model each time; the shortest kept)")
    parser.add_argument("--target", type=float, default=0.01,
                        help="target error of the free-energy curve, a fraction of its drop (default 0.01)")
    parser.add_argument("--small", action="store_true", help="a smoke run: tiny domain (pfhub-1a: coarse grids), "
                                                             "short time")
    parser.add_argument("--out-dir", default="bench/results", help="where ch-accuracy-<device>.json goes")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--commit", default=None, help="commit to record (default: git rev-parse)")


def settings_for(args) -> dict:
    """The problem's defaults, then --small's, then every option given explicitly."""
    problem = getattr(args, "problem", "smooth")
    out = dict(DEFAULTS[problem])
    if args.small:
        out.update(SMALL[problem])
    for k in SETTINGS:
        if getattr(args, k, None) is not None:
            out[k] = getattr(args, k)
    return out


# ---- the problem -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    domain: float = 32.0
    until: float = 30.0
    samples: int = 10
    amplitude: float = 0.05
    name: str = "smooth"           # "smooth" or "pfhub-1a"

    def __post_init__(self):
        if self.name not in PROBLEMS:
            raise ValueError(f"--problem: choose from {', '.join(PROBLEMS)}; got {self.name!r}")
        if self.name == "pfhub-1a" and self.domain != PFHUB_SIDE:
            raise ValueError(f"--domain: PFHub benchmark 1a is fixed at {PFHUB_SIDE:g} x {PFHUB_SIDE:g}; "
                             f"got {self.domain:g}")

    @property
    def coefficients(self) -> dict:
        """m, b, u, K of the equation (pfhub-1a: PFHub's mapped exactly, sim/models/cahn_hilliard/pfhub.py)."""
        if self.name == "pfhub-1a":
            from latticelab.sim.models.cahn_hilliard.pfhub import preset_values
            values = preset_values("pfhub-1a")
            return {k: values[k] for k in ("m", "b", "u", "K")}
        return {"m": 1.0, "b": 1.0, "u": 1.0, "K": 1.0}

    @property
    def energy_offset(self) -> float:
        """PFHub's F minus this model's F (rho w^4 times the area; 0 for the smooth problem): error-neutral,
        reported so the curve can be put beside PFHub's."""
        if self.name == "pfhub-1a":
            from latticelab.sim.models.cahn_hilliard.pfhub import BULK_CONSTANT
            return BULK_CONSTANT * self.domain ** 2
        return 0.0

    def base_times(self) -> np.ndarray:
        return np.linspace(0.0, self.until, self.samples + 1)

    def kept(self) -> np.ndarray:
        """Indices into ``base_times()`` of the samples taken: all (smooth); pfhub-1a every one to t = 100, then
        every 10th, and the end."""
        n = self.samples
        if self.name != "pfhub-1a":
            return np.arange(n + 1)
        t = self.base_times()
        keep = [i for i in range(n + 1) if t[i] <= DENSE_UNTIL * (1 + 1e-12) or i % THIN == 0 or i == n]
        return np.asarray(keep)

    def times(self) -> np.ndarray:
        return self.base_times()[self.kept()]

    def grid_side(self, dx: float) -> int:
        L = round(self.domain / dx)
        if L < 4 or not math.isclose(L * dx, self.domain, rel_tol=1e-9):
            raise ValueError(f"--grids: dx = {dx:g} does not divide the domain {self.domain:g} into >= 4 cells")
        return L

    def fd_stable_dt(self, dx: float) -> float:
        from latticelab.sim.models.cahn_hilliard.params import fd_stable_dt as limit
        c = self.coefficients
        return limit(2, dx, c["m"], c["b"], c["u"], c["K"])

    def initial_field(self, dx: float) -> np.ndarray:
        """The initial field at the cell points x = i dx (host float64). Smooth: the same continuous,
        periodic, band-limited field on every grid, so grids differ only in how well they resolve what follows.
        pfhub-1a: PFHub's c(x, y, 0) mapped to phi = (c - 0.5)/0.2 (pfhub.initial_phi, as the preset)."""
        L = self.grid_side(dx)
        if self.name == "pfhub-1a":
            from latticelab.sim.models.cahn_hilliard.pfhub import initial_phi
            return initial_phi(L, dx, "periodic")
        y, x = np.meshgrid(np.arange(L) * dx, np.arange(L) * dx, indexing="ij")
        k = 2 * np.pi / self.domain
        phi = sum(w * np.cos(k * (jx * x + jy * y) + 0.7 * (jx + 2 * jy)) for jx, jy, w in MODES)
        return self.amplitude * phi / sum(w for _, _, w in MODES)

    def describe(self) -> dict:
        c = self.coefficients
        out = {"name": self.name, "dim": 2, "domain": self.domain, "until": self.until,
               "window": [0.0, self.until], "samples": int(len(self.kept())),
               "sample_times": "every " + (f"{self.until / self.samples:g} to t = {DENSE_UNTIL:g}, then every "
                                           f"{THIN * self.until / self.samples:g}" if self.name == "pfhub-1a"
                                           else f"{self.until / self.samples:g}"),
               **c, "precision": "double", "boundary": "periodic"}
        if self.name == "pfhub-1a":
            out.update(pfhub="benchmark 1a (Jokisaari et al. 2017), c = 0.5 + 0.2 phi, PFHub dx = 1",
                       pfhub_energy_offset=self.energy_offset)
        return out


@dataclass
class Run:
    method: str          # "finite-difference", "spectral", "spectral-bdf2", or "<spectral>-adaptive"
    dx: float
    dt: float            # the step used (requested dt shortened so each sample interval is whole steps; adaptive:
                         # the mean step until / steps)
    steps: int
    wall_s: float
    free_energy: list[float]
    phi_end: np.ndarray = field(repr=False)
    error: float | None = None
    field_error: float | None = None
    max_change: float | None = None     # adaptive runs: the model's max_change
    walls: list[float] = field(default_factory=list)   # every timing of the run (wall_s is the shortest)

    def summary(self) -> dict:
        out = {"method": self.method, "dx": self.dx, "dt": self.dt, "steps": self.steps,
               "wall_s": round(self.wall_s, 4), "error": self.error, "field_error": self.field_error}
        if self.max_change is not None:
            out["max_change"] = self.max_change
        if len(self.walls) > 1:
            out["wall_s_timings"] = [round(w, 4) for w in self.walls]
        return out


def _model(backend_name: str, problem: Problem, integrator: str, dx: float, dt: float, **extra):
    from latticelab.sim.models import get_model
    cls = get_model("cahn-hilliard")
    model = cls.create(backend=backend_name, dim=2, L=problem.grid_side(dx), dx=dx, boundary="periodic",
                       integrator=integrator, precision="double", dt=dt, noise=0.0, phi0=0.0, thermal=0.0,
                       **problem.coefficients, **extra)
    model.set_field(problem.initial_field(dx))
    return model


REPEAT_BELOW_S = 2.0   # a run timed below this is timed again (``--repeats`` in all), its shortest time kept


def timings(timed, repeats: int) -> list[float]:
    """Call ``timed()`` (one whole run from a fresh model, returning its wall time) once, and again while the
    times stay below REPEAT_BELOW_S, ``repeats`` times at most. The runs are deterministic, so the repeats differ
    only in time: the shortest is the run's cost without the host's and the device's jitter (clocks ramping up,
    a first launch's set-up), which in runs of tens of milliseconds (the adaptive spectral steps on a GPU) moved
    the case's ratio by some 15% between two otherwise equal runs."""
    walls = [timed()]
    while len(walls) < max(1, repeats) and max(walls) < REPEAT_BELOW_S:
        walls.append(timed())
    return walls


def run(backend_name: str, problem: Problem, method: str, dx: float, dt: float, repeats: int = 1) -> Run:
    """One run from the initial field to ``until``, F sampled at ``problem.times()``; wall time of the steps only
    (the shortest of ``timings``)."""
    interval = problem.until / problem.samples
    per_sample = max(1, math.ceil(interval / dt - 1e-9))
    dt = interval / per_sample
    kept = problem.kept()
    outcome = {}

    def timed() -> float:
        model = _model(backend_name, problem, method, dx, dt)
        sync = synchronizer(model.xp)
        energies = [model.observables()["free_energy"]]
        wall = 0.0
        for a, b in zip(kept[:-1], kept[1:]):
            sync()
            start = time.perf_counter()
            model.step(int(b - a) * per_sample)
            sync()
            wall += time.perf_counter() - start
            energies.append(model.observables()["free_energy"])
        if not outcome:               # the first run's results (the repeats give the same); no model kept
            from latticelab.sim.backend import to_numpy
            outcome.update(energies=energies, phi_end=to_numpy(model.phi).astype(np.float64))
        return wall

    walls = timings(timed, repeats)
    return Run(method, dx, dt, per_sample * problem.samples, min(walls), outcome["energies"], outcome["phi_end"],
               walls=walls)


def run_adaptive(backend_name: str, problem: Problem, integrator: str, dx: float, max_change: float,
                 dt_min: float, dt_max: float, repeats: int = 1) -> Run:
    """One adaptive run (the model's ``time_step="adaptive"``) to ``until``: timed as one ``advance_to(until)``,
    then repeated untimed (deterministic) with F read before and after every step that crosses a sample time and
    interpolated linearly to it. The run lands on ``until`` exactly (its last step shortened)."""
    from latticelab.sim.backend import to_numpy
    options = dict(time_step="adaptive", dt_max=dt_max, max_change=max_change)
    outcome = {}

    def timed() -> float:
        model = _model(backend_name, problem, integrator, dx, dt_min, **options)
        sync = synchronizer(model.xp)
        sync()
        start = time.perf_counter()
        model.advance_to(problem.until)
        sync()
        wall = time.perf_counter() - start
        if not outcome:               # the first run's results (the repeats give the same); no model kept
            outcome.update(steps=model.step_count, phi_end=to_numpy(model.phi).astype(np.float64))
        return wall

    walls = timings(timed, repeats)
    steps, phi_end = outcome["steps"], outcome["phi_end"]

    replay = _model(backend_name, problem, integrator, dx, dt_min, **options)
    times = problem.times()
    ts, fs = [0.0], [replay.observables()["free_energy"]]
    i = 1                                                   # the next sample time
    until = problem.until
    while until - replay.time > replay.dt_current:         # advance_to's own adaptive steps, one at a time
        crossing = i < len(times) and times[i] <= replay.time + replay.dt_current
        if crossing and ts[-1] != replay.time:
            ts.append(replay.time)
            fs.append(replay.observables()["free_energy"])
        replay.step(1)
        if crossing:
            ts.append(replay.time)
            fs.append(replay.observables()["free_energy"])
            while i < len(times) and times[i] <= replay.time:
                i += 1
    if ts[-1] != replay.time:
        ts.append(replay.time)
        fs.append(replay.observables()["free_energy"])
    replay.advance_to(until)
    ts.append(replay.time)
    fs.append(replay.observables()["free_energy"])
    if replay.step_count != steps:
        raise RuntimeError(f"the adaptive replay took {replay.step_count} steps, the timed run {steps}")
    energies = np.interp(times, np.asarray(ts), np.asarray(fs)).tolist()
    return Run(integrator + ADAPTIVE, dx, until / steps, steps, min(walls), energies, phi_end, max_change=max_change,
               walls=walls)


def curve_error(run_: Run, reference: Run) -> float:
    """max_i |F(t_i) - F_ref(t_i)| over the drop F_ref(0) - F_ref(until) (see the module docstring)."""
    f, ref = np.asarray(run_.free_energy), np.asarray(reference.free_energy)
    if f.shape != ref.shape:
        raise ValueError("runs sampled at different times cannot be compared")
    drop = ref[0] - ref[-1]
    if not drop > 0:
        raise ValueError("the reference's free energy does not fall: nothing to measure the error against")
    return float(np.max(np.abs(f - ref)) / drop)


def field_error(run_: Run, reference: Run) -> float | None:
    """Relative L2 distance of the final fields at the points the two grids share (x = i dx on both: every
    point of the coarser grid when one spacing is a multiple of the other); None if they share fewer than 4 per
    side."""
    L, Lr = run_.phi_end.shape[0], reference.phi_end.shape[0]
    common = math.gcd(L, Lr)
    if common < 4:
        return None
    mine, ref = run_.phi_end[::L // common, ::L // common], reference.phi_end[::Lr // common, ::Lr // common]
    return float(np.linalg.norm(mine - ref) / np.linalg.norm(ref))


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
    settings = settings_for(args)
    pfhub = getattr(args, "problem", "smooth") == "pfhub-1a"
    try:
        until = float(settings["until"])
        samples = settings["samples"]
        if samples is None:                     # pfhub-1a: one base interval per time unit
            samples = max(1, round(until))
        problem = Problem(domain=float(settings["domain"]), until=until, samples=int(samples),
                          name=getattr(args, "problem", "smooth"))
        if not (problem.until > 0 and problem.samples >= 1 and problem.domain > 0):
            raise ValueError("--until, --samples and --domain must be positive")
        grids = sorted(_floats(str(settings["grids"]), "--grids"), reverse=True)
        spectral_grids = (grids if settings["spectral_grids"] is None else
                          sorted(_floats(str(settings["spectral_grids"]), "--spectral-grids"), reverse=True))
        fractions = _floats(str(settings["fd_fractions"]), "--fd-fractions")
        if max(fractions) >= 1:
            raise ValueError("--fd-fractions: each must be below 1 (the stability limit)")
        spectral_dts = _floats(str(settings["spectral_dts"]), "--spectral-dts")
        integrators = [v.strip() for v in args.spectral_integrators.split(",") if v.strip()]
        if not integrators or not set(integrators) <= set(SPECTRAL):
            raise ValueError(f"--spectral-integrators: choose from {', '.join(SPECTRAL)}; got "
                             f"{args.spectral_integrators!r}")
        changes = (_floats(str(settings["adaptive_changes"]), "--adaptive-changes")
                   if str(settings["adaptive_changes"]).strip() else [])
        if changes and max(changes) > 1:
            raise ValueError("--adaptive-changes: each must be at most 1")
        adaptive_dt = _floats(str(settings["adaptive_dt"]), "--adaptive-dt")[0]
        adaptive_dt_max = _floats(str(settings["adaptive_dt_max"]), "--adaptive-dt-max")[0]
        if changes and adaptive_dt_max < adaptive_dt:
            raise ValueError("--adaptive-dt-max must be >= --adaptive-dt")
        reference_dt = _floats(str(settings["reference_dt"]), "--reference-dt")[0]
        reference_dx = (min(grids) if settings["reference_dx"] is None else
                        _floats(str(settings["reference_dx"]), "--reference-dx")[0])
        for dx in {*grids, *spectral_grids, reference_dx}:
            problem.grid_side(dx)
        if not 0 < args.target < 1:
            raise ValueError("--target must be a fraction in (0, 1)")
        if not 1 <= args.repeats <= 20:
            raise ValueError(f"--repeats must be 1 to 20; got {args.repeats}")
    except ValueError as exc:
        print(f"latticelab bench ch-accuracy: {exc}")
        return 2
    try:
        backend, device = open_backend(args.backend, "ch-accuracy")
    except BackendError as exc:
        print(f"latticelab bench ch-accuracy needs a CUDA GPU (or --backend numpy): {exc}")
        return 1
    name = backend.name
    window = (f"t = 0 .. {problem.until:g}, {len(problem.times())} free-energy samples "
              f"({problem.describe()['sample_times']})")
    print(f"problem {problem.name}: {window}", flush=True)
    warm = replace(problem, until=problem.until / problem.samples, samples=1)     # warm-up: kernels, FFT plans
    for method in integrators:
        for dx in sorted({*spectral_grids, reference_dx}):
            run(name, warm, method, dx, spectral_dts[0])
    for dx in grids:
        run(name, warm, "finite-difference", dx, fractions[0] * problem.fd_stable_dt(dx))
    reference = run(name, problem, args.reference_integrator, reference_dx, reference_dt)
    check = run(name, problem, args.reference_integrator, reference_dx, 2 * reference_dt)
    self_error = curve_error(check, reference)
    print(f"reference: {reference.method}, dx = {reference_dx:g}, dt = {reference.dt:g}, {reference.steps} steps, "
          f"{reference.wall_s:.2f} s; error of the same at 2 dt: {self_error:.2e}", flush=True)
    grid_check = None
    if pfhub:        # the reference's grid dependence: the same scheme at 2 dt on the grid twice as fine
        fine = run(name, problem, args.reference_integrator, reference_dx / 2, 2 * reference_dt)
        grid_check = {"dx": fine.dx, "dt": fine.dt, "error": curve_error(fine, check),
                      "field_error": field_error(fine, check), "wall_s": round(fine.wall_s, 4)}
        print(f"reference grid check: dx = {fine.dx:g} against dx = {reference_dx:g}, both at dt = {check.dt:g}: "
              f"F error {grid_check['error']:.2e} (the floor of comparisons across grids)", flush=True)
    runs = []
    for dx in grids:
        for fraction in fractions:
            runs.append(run(name, problem, "finite-difference", dx, fraction * problem.fd_stable_dt(dx),
                            repeats=args.repeats))
    for dx in spectral_grids:
        for method in integrators:
            for dt in spectral_dts:
                runs.append(run(name, problem, method, dx, dt, repeats=args.repeats))
            for change in changes:
                runs.append(run_adaptive(name, problem, method, dx, change, adaptive_dt, adaptive_dt_max,
                                         repeats=args.repeats))
    for r in runs:
        r.error, r.field_error = curve_error(r, reference), field_error(r, reference)
        tol = f" max_change {r.max_change:g}" if r.max_change is not None else ""
        fe = f"{r.field_error:.2e}" if r.field_error is not None else "n/a"
        print(f"  {r.method:22} dx {r.dx:<5g} dt {r.dt:<9.4g} {r.steps:7d} steps {r.wall_s:8.3f} s  "
              f"F error {r.error:.2e}  field error {fe}{tol}", flush=True)
    spectral_methods = [*integrators, *([m + ADAPTIVE for m in integrators] if changes else [])]
    methods = ["finite-difference", *spectral_methods]
    at_target = {m: cost_at_target(runs, m, args.target) for m in methods}
    cheap = {m: cheapest(runs, m, args.target) for m in methods}
    fd, fd_cheap = at_target["finite-difference"], cheap["finite-difference"]
    ratios, cheapest_ratios = {}, {}
    for m in spectral_methods:
        if fd and at_target[m]:
            ratios[m] = round(fd["wall_s"] / at_target[m]["wall_s"], 2)
            cheapest_ratios[m] = round(fd_cheap.wall_s / cheap[m].wall_s, 2)
        report_method(m, at_target[m], cheap[m], args.target)
    report_method("finite-difference", fd, fd_cheap, args.target)
    for m in spectral_methods:
        if m in ratios:
            print(f"finite differences / {m} at error {args.target:g}: interpolated {ratios[m]}, cheapest measured "
                  f"runs {cheapest_ratios[m]}", flush=True)
    # the value: the spectral solver as a user would run it for this accuracy, i.e. its cheapest way there (each
    # integrator, with fixed or adaptive steps); BEST when no spectral method reached the target
    best = max(ratios, key=ratios.get) if ratios else (BEST if BEST in integrators else integrators[0])
    ratio = ratios.get(best)
    offset = problem.energy_offset
    reference_summary = {**reference.summary(), "self_error_at_2dt": self_error}
    if pfhub:
        reference_summary.update(
            grid_check=grid_check,
            free_energy_pfhub={f"{t:g}": v + offset for t, v in zip(problem.times(), reference.free_energy)
                               if t in (0.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, problem.until)})
    details = {"problem": problem.describe(),
               "error_definition": f"max_i |F(t_i) - F_ref(t_i)| / (F_ref(0) - F_ref({problem.until:g})) over the "
                                   f"samples t_i in [0, {problem.until:g}]",
               "target_error": args.target, "value_for": best,
               "cost_definition": "wall time at the target error, log-log interpolated on each method's "
                                  "cost-error front (bracketed: false = the cheapest run below the target)",
               "reference": reference_summary,
               "cost_at_target": at_target, "ratio_at_target": ratios,
               "cheapest_at_target": {m: (r.summary() if r else None) for m, r in cheap.items()},
               "ratio_cheapest_measured": cheapest_ratios,
               "runs": [r.summary() for r in runs]}
    if changes:
        details["adaptive"] = {"max_change": changes, "dt": adaptive_dt, "dt_max": adaptive_dt_max,
                               "sampling": "F interpolated linearly between the steps around each sample time"}
    stem = "ch-accuracy-pfhub-1a-spectral-vs-fd" if pfhub else "ch-accuracy-2d-spectral-vs-fd"
    case = {"case": stem + ("-small" if args.small else ""),
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
