"""PFHub benchmark 1 (spinodal decomposition; Jokisaari et al., Comput. Mater. Sci. 126 (2017) 139-151,
https://pages.nist.gov/pfhub/benchmarks/benchmark1.ipynb) as presets of the Cahn-Hilliard model, and a writer
of PFHub's result data (free energy against time, the field at t = 1e3, 1e4, 1e5, 1e6).

The benchmark, in its own variables (concentration c, time t, lengths in its units)::

    F_PFHub = integral of [ f(c) + kappa/2 |grad c|^2 ] dV,   f(c) = rho (c - c_a)^2 (c_b - c)^2
    dc/dt   = div( M grad mu_c ),  mu_c = f'(c) - kappa laplacian(c)
    rho = 5, c_a = 0.3, c_b = 0.7, kappa = 2, M = 5, domain 200 x 200, c0 = 0.5, epsilon = 0.01
    c(x, y, 0) = c0 + epsilon [cos(0.105 x) cos(0.11 y) + (cos(0.13 x) cos(0.087 y))^2
                               + cos(0.025 x - 0.15 y) cos(0.07 x - 0.02 y)]
    1a: periodic boundaries;  1b: no-flux boundaries (grad c . n = grad mu_c . n = 0)

The exact mapping onto this model, dphi/dt = m laplacian(-b phi + u phi^3 - K laplacian(phi)), with
c = (c_a + c_b)/2 + (c_b - c_a)/2 phi = 0.5 + 0.2 phi (so c_a -> phi = -1, c_b -> phi = +1); write
w = (c_b - c_a)/2 = 0.2:

* bulk:  f = rho w^4 (1 - phi^2)^2 = rho w^4 - 2 rho w^4 phi^2 + rho w^4 phi^4; ours is -b/2 phi^2 + u/4 phi^4, so
  b = 4 rho w^4 = 0.032,  u = 4 rho w^4 = 0.032,  and a constant rho w^4 = 0.008 per unit area;
* gradient:  kappa/2 |grad c|^2 = kappa w^2/2 |grad phi|^2, so K = kappa w^2 = 0.08;
* chemical potentials:  mu_c = df/dc - kappa lap c = (1/w)(-b phi + u phi^3 - K lap phi) = mu_phi / w;
* mobility:  w dphi/dt = M lap(mu_phi / w), so m = M / w^2 = 125;
* space and time are not rescaled: dx = 1 on a 200 x 200 grid (any L, dx with L dx = 200 may be used for
  convergence studies), t is PFHub's t.
* free energy:  F_PFHub = F + rho w^4 V = F + 0.008 * 40,000 = F + 320, with F this model's ``free_energy``
  (the same discrete gradient as the integrator uses) and V the domain area.

Grid points: periodic runs (1a) sample the initial field at x_i = i dx, i = 0 .. L-1 (the field is not
periodic on 200 and has a small seam, as in every periodic submission); no-flux runs (1b) at cell centres
x_i = (i + 1/2) dx, where the mirror boundary (and the type-II cosine transform) puts the zero-flux walls at
x = 0 and x = 200. x is the last array axis, y the first.
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

PRESETS = ("none", "pfhub-1a", "pfhub-1b")
RHO, C_A, C_B, KAPPA, M, SIDE, C0, EPSILON = 5.0, 0.3, 0.7, 2.0, 5.0, 200.0, 0.5, 0.01
W = (C_B - C_A) / 2                         # 0.2: c = C_MID + W phi
C_MID = (C_A + C_B) / 2                     # 0.5
BULK_CONSTANT = RHO * W ** 4                # 0.008: f_PFHub - f_ours per unit area
OUTPUT_TIMES = (1e3, 1e4, 1e5, 1e6)         # PFHub's field snapshots


def preset_values(preset: str) -> dict:
    """The model parameters a preset fixes (dim, L, dx, m, b, u, K, boundary), plus its suggested integrator
    and time stepping; {} for "none"."""
    if preset == "none":
        return {}
    if preset not in PRESETS:
        raise ValueError(f"preset: must be one of {', '.join(PRESETS)}; got {preset!r}")
    # m = M / w^2, b = u = 4 rho w^4, K = kappa w^2 (module docstring), written as the decimals they are
    return {"dim": 2, "L": 200, "dx": 1.0, "m": 125.0, "b": 0.032, "u": 0.032, "K": 0.08,
            "boundary": "periodic" if preset == "pfhub-1a" else "mirror",
            "integrator": "spectral", "time_step": "adaptive", "dt": 0.05, "dt_max": 50.0, "phi0": 0.0,
            "noise": 0.0}


FIXED = ("dim", "m", "b", "u", "K", "boundary")    # must equal the preset's values (L dx = 200 is checked too)


def positions(L: int, dx: float, boundary: str) -> np.ndarray:
    """Coordinates of the grid points along one axis (see the module docstring)."""
    offset = 0.5 if boundary == "mirror" else 0.0
    return (np.arange(L, dtype=np.float64) + offset) * dx


def initial_concentration(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """PFHub 1's initial c at points (x, y) (NumPy broadcasting)."""
    return C0 + EPSILON * (np.cos(0.105 * x) * np.cos(0.11 * y) + (np.cos(0.13 * x) * np.cos(0.087 * y)) ** 2
                           + np.cos(0.025 * x - 0.15 * y) * np.cos(0.07 * x - 0.02 * y))


def initial_phi(L: int, dx: float, boundary: str) -> np.ndarray:
    """The preset's initial phi = (c - 0.5)/0.2 on the L x L grid (axis 0 = y, axis 1 = x), float64."""
    p = positions(L, dx, boundary)
    return (initial_concentration(p[None, :], p[:, None]) - C_MID) / W


def concentration(phi) -> np.ndarray:
    return C_MID + W * np.asarray(phi, dtype=np.float64)


def pfhub_free_energy(model) -> float:
    """PFHub's F of the model's current state: this model's free energy plus rho w^4 times the area."""
    volume = (model.params.L * model.params.dx) ** model.params.dim
    return model.observables()["free_energy"] + BULK_CONSTANT * volume


def analytic_free_energy(preset: str = "pfhub-1a", points: int = 2000) -> float:
    """PFHub's F at t = 0 from the formula (the analytic gradient of the initial c, midpoint quadrature on
    ``points``^2 points over [0, 200]^2): an independent check of the discrete energy."""
    h = SIDE / points
    p = (np.arange(points) + 0.5) * h
    x, y = p[None, :], p[:, None]
    c = initial_concentration(x, y)
    a = np.cos(0.13 * x) * np.cos(0.087 * y)             # the squared term's base
    b, d = 0.025 * x - 0.15 * y, 0.07 * x - 0.02 * y      # the phases of the last product
    cx = EPSILON * (-0.105 * np.sin(0.105 * x) * np.cos(0.11 * y) - 2 * a * 0.13 * np.sin(0.13 * x) * np.cos(0.087 * y)
                    - 0.025 * np.sin(b) * np.cos(d) - 0.07 * np.cos(b) * np.sin(d))
    cy = EPSILON * (-0.11 * np.cos(0.105 * x) * np.sin(0.11 * y) - 2 * a * 0.087 * np.cos(0.13 * x) * np.sin(0.087 * y)
                    + 0.15 * np.sin(b) * np.cos(d) + 0.02 * np.cos(b) * np.sin(d))
    f = RHO * (c - C_A) ** 2 * (C_B - c) ** 2 + KAPPA / 2 * (cx ** 2 + cy ** 2)
    return float(f.sum() * h * h)


# ---- running to a time and writing PFHub's result data ------------------------------------------------------
def run_pfhub(model, folder, until: float = 1e6, times=OUTPUT_TIMES, samples_per_decade: int = 50,
              overwrite: bool = False, progress=None) -> dict[str, Path]:
    """Run ``model`` (a PFHub-preset Cahn-Hilliard model, at t = 0 or later) to simulated time ``until`` and
    write PFHub's result data into ``folder``, each file atomically (sim/io.py):

    - ``free_energy.csv``: columns ``time,free_energy`` (PFHub's F, see ``pfhub_free_energy``): t = 0, then
      ``samples_per_decade`` log-spaced times per decade from t = 1e-2 up to ``until`` and every output time;
    - ``c_t<time>.csv`` for each output time <= until (``c_t1000.csv`` ... ``c_t1000000.csv``): columns
      ``x,y,c`` (one row per grid point, x fastest);
    - ``meta.yaml``: the benchmark, parameters, steps taken and wall time (PFHub's upload metadata style).

    The model lands exactly on every sample and output time (the step before is shortened). ``progress``, if
    given, is called with (time, free energy) at each sample. Returns {name: path}. Existing files are kept
    (FileExistsError) unless ``overwrite``.
    """
    import time as wall

    from latticelab.sim.backend import to_numpy
    from latticelab.sim.io import write_atomic

    params = model.params
    if params.preset == "none":
        raise ValueError("run_pfhub: the model must use a PFHub preset (preset pfhub-1a or pfhub-1b)")
    if not (math.isfinite(until) and until > model.time):
        raise ValueError(f"until: must be a finite time after the model's time {model.time:g}; got {until!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    outputs = sorted(t for t in times if model.time < t <= until)
    first = max(model.time, 1e-2)
    n = max(1, int(math.ceil(samples_per_decade * math.log10(until / first))))
    samples = sorted({*np.geomspace(first, until, n + 1).tolist(), *outputs, until} - {model.time})
    samples = [t for t in samples if t > model.time]
    rows = [(model.time, pfhub_free_energy(model))]
    written: dict[str, Path] = {}
    start, steps0 = wall.perf_counter(), model.step_count
    for t in samples:
        model.advance_to(t)
        rows.append((model.time, pfhub_free_energy(model)))
        if progress is not None:
            progress(*rows[-1])
        if t in outputs:
            name = f"c_t{_time_text(t)}"
            written[name] = _write_field(model, folder / f"{name}.csv", overwrite, to_numpy, write_atomic)
    elapsed = wall.perf_counter() - start

    def energy(f):
        f.write("time,free_energy\n")
        for t, value in rows:
            f.write(f"{t!r},{value!r}\n")

    written["free_energy"] = write_atomic(folder / "free_energy.csv", energy, overwrite, binary=False)
    meta = "\n".join([
        "# latticelab result for PFHub benchmark 1 (spinodal decomposition)",
        f"benchmark: {{id: '1{'a' if params.boundary == 'periodic' else 'b'}', version: '1'}}",
        "software: {name: latticelab, url: 'sim/models/cahn_hilliard'}",
        f"implementation: {{integrator: {params.integrator}, time_step: {params.time_step}, dt: {params.dt!r}, "
        f"dt_max: {params.dt_max!r}, max_change: {params.max_change!r}, precision: {params.precision}, "
        f"L: {params.L}, dx: {params.dx!r}, backend: {model.backend_name}, device: '{model.device_name}'}}",
        f"mapping: {{c: '0.5 + 0.2 phi', m: {params.m!r}, b: {params.b!r}, u: {params.u!r}, K: {params.K!r}}}",
        f"run: {{until: {model.time!r}, steps: {model.step_count - steps0}, wall_time_s: {elapsed:.3f}}}",
        "data:",
        "  - {name: free_energy, url: free_energy.csv, format: {type: csv, "
        "parse: {time: number, free_energy: number}}}",
        *[f"  - {{name: {name}, url: {path.name}, format: {{type: csv, parse: {{x: number, y: number, c: number}}}}}}"
          for name, path in written.items() if name.startswith("c_t")],
        ""])
    written["meta"] = write_atomic(folder / "meta.yaml", lambda f: f.write(meta), overwrite, binary=False)
    return written


def _time_text(t: float) -> str:
    """1000.0 -> '1000', 2.5 -> '2.5' (file names of the snapshots)."""
    return str(int(t)) if float(t).is_integer() else f"{t:g}"


def _write_field(model, path: Path, overwrite: bool, to_numpy, write_atomic) -> Path:
    params = model.params
    c = concentration(to_numpy(model.fields()["phi"]))
    p = positions(params.L, params.dx, params.boundary)
    x, y = np.meshgrid(p, p, indexing="xy")
    table = np.column_stack([x.reshape(-1), y.reshape(-1), c.reshape(-1)])

    def write(f):
        buffer = io.StringIO()
        buffer.write("x,y,c\n")
        np.savetxt(buffer, table, fmt=["%.6g", "%.6g", "%.17g"], delimiter=",")
        f.write(buffer.getvalue())

    return write_atomic(path, write, overwrite, binary=False)


def read_free_energy(path) -> np.ndarray:
    """(n, 2) array of (time, free_energy) from a ``free_energy.csv`` written by ``run_pfhub``."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0] != ["time", "free_energy"]:
        raise ValueError(f"{path} is not a PFHub free_energy.csv (header time,free_energy)")
    return np.array(rows[1:], dtype=np.float64).reshape(-1, 2)
