"""The Cahn-Hilliard model's parameters, declared once (sim/params.py says what is derived from them), and the
stability limit of the explicit finite-difference step.

Stability of the RK2 finite-difference step. Linearised about a uniform phi, a Fourier mode of the discrete
Laplacian eigenvalue -kappa (0 <= kappa <= kappa_max = 4 dim / dx^2) evolves as exp(lambda t) with
lambda = -m kappa (f'' + K kappa), f'' = -b + 3 u phi^2. RK2 multiplies it by 1 + z + z^2/2 per step,
z = lambda dt, which has modulus <= 1 on the real axis exactly for -2 <= z <= 0. The fastest decaying mode is
at kappa_max and the largest f'' over the states the field visits (|phi| <= a = max(1, sqrt(b/u)), the
equilibrium values being +-sqrt(b/u)) is 3 u a^2 - b, so the largest stable step is

    dt_max = 2 / (m kappa_max (K kappa_max + 3 u a^2 - b))        (no limit when the bracket is <= 0).
"""
from __future__ import annotations

import math

import pydantic

from latticelab.sim.models.cahn_hilliard.pfhub import FIXED, PRESETS, SIDE, preset_values
from latticelab.sim.params import ModelParams, ParameterError, param

INTEGRATORS = ("finite-difference", "spectral", "spectral-bdf2")
SPECTRAL = ("spectral", "spectral-bdf2")     # the integrators that keep the field's transform (spectral.py)
BOUNDARIES = ("periodic", "mirror")
TIME_STEPS = ("fixed", "adaptive")
PRECISIONS = ("double", "single")
MAX_CELLS = 2 ** 31 - 1                      # 32-bit flat indices in the kernels
DEFAULT_L = {(2, False): 256, (2, True): 1024, (3, False): 64, (3, True): 256}   # (dim, gpu) -> L
SAFETY = 0.8                                 # suggested dt = SAFETY x the finite-difference limit
# The coefficients' range: wide enough for any choice of units, narrow enough that the free energy and its
# derivatives stay far from float64's overflow on any grid.
COEFFICIENT_MAX = 1e6
# Thermal noise far above the double well's depth (b^2 / 4u = 0.25 at the defaults) leaves no phases to see,
# and drives the field into values where every explicit step is unstable (at the defaults the finite-difference
# field diverges from thermal ~ 1 on); larger values are refused rather than run into overflow.
THERMAL_MAX = 10.0
# The smallest time step: 1e-12 of the unit time (the defaults step 0.02); a subnormal dt (1e-320) never got
# anywhere, and a time of order 1 adds nothing to it.
DT_MIN = 1e-12
# A field beyond this many times its phase amplitude max(1, sqrt(b/u)) has left the double well for good: the
# steps are unstable (an initial field is allowed up to INITIAL_AMPLITUDE times it).
DIVERGED_AMPLITUDE = 100.0
INITIAL_AMPLITUDE = 10.0


def phase_amplitude(b: float, u: float) -> float:
    """The largest |phi| the field settles at: max(1, sqrt(b/u))."""
    return max(1.0, math.sqrt(b / u)) if b > 0 else 1.0


def fd_stable_dt(dim: int, dx: float, m: float, b: float, u: float, K: float) -> float:
    """Largest stable time step of the RK2 finite-difference integrator (module docstring); inf if none."""
    kappa = 4.0 * dim / dx ** 2
    a = phase_amplitude(b, u)
    rate = m * kappa * (K * kappa + 3.0 * u * a * a - b)
    return 2.0 / rate if rate > 0 else math.inf


def _round_down(value: float, digits: int = 2) -> float:
    """``value`` rounded down to ``digits`` significant digits (a readable suggested step)."""
    if not math.isfinite(value) or value <= 0:
        return value
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return math.floor(value / scale) * scale


class CahnHilliardParams(ModelParams):
    """Parameters of the Cahn-Hilliard model dphi/dt = m lap(-b phi + u phi^3 - K lap phi) (seed 001, eq. 2)."""

    model_name = "cahn-hilliard"
    variant_fields = ("dim",)

    dim: int = param(2, label="Dimension", help="2 or 3", choices=(2, 3), applies="rebuild", widget="dimension_choice")
    L: int = param(256, label="Size L", help="cells per side (any integer >= 4); default 256 (2D) / 64 (3D) on the "
                   "CPU, 1024 / 256 on a GPU", applies="rebuild", ge=4, widget="editable_choice")
    dx: float = param(1.0, label="Grid spacing dx", help="distance between cell centres", applies="rebuild",
                      ge=1e-3, le=1e3)
    boundary: str = param("periodic", label="Boundaries", help="periodic, or mirror (zero flux: no mass crosses "
                          "the walls)", choices=BOUNDARIES, applies="rebuild")
    integrator: str = param("finite-difference", label="Integrator", help="finite-difference (explicit RK2, as in "
                            "seed 001; dt limited by stability), spectral (semi-implicit, stabilised, large steps; "
                            "first order in time) or spectral-bdf2 (the same, second order in time: SBDF2, several "
                            "times more accurate at a given dt)", choices=INTEGRATORS)
    precision: str = param("double", label="Precision", help="floating point of the field: double (float64) or "
                           "single (float32, half the memory traffic)", choices=PRECISIONS, applies="rebuild")
    m: float = param(1.0, label="Mobility m", help="mobility (> 0)", gt=0, le=COEFFICIENT_MAX)
    b: float = param(1.0, label="b", help="coefficient of -phi^2/2 in the bulk free energy (> 0: two phases at "
                     "phi = +-sqrt(b/u))", ge=-COEFFICIENT_MAX, le=COEFFICIENT_MAX)
    u: float = param(1.0, label="u", help="coefficient of phi^4/4 in the bulk free energy (> 0)",
                     ge=1 / COEFFICIENT_MAX, le=COEFFICIENT_MAX)
    K: float = param(1.0, label="Gradient K", help="gradient energy coefficient (> 0): interface width "
                     "~ sqrt(2K/b)", gt=0, le=COEFFICIENT_MAX)
    dt: float = param(0.02, label="Time step dt", help="time step; the finite-difference integrator refuses a dt "
                      "above its stability limit; with adaptive steps the first and smallest step", ge=DT_MIN,
                      le=COEFFICIENT_MAX)
    time_step: str = param("fixed", label="Time steps", help="fixed, or adaptive (spectral integrators only: the "
                           "step grows as coarsening slows, between dt and dt_max)", choices=TIME_STEPS)
    dt_max: float = param(10.0, label="Largest dt", help="largest adaptive time step (>= dt)", ge=DT_MIN,
                          le=COEFFICIENT_MAX)
    max_change: float = param(0.01, label="Change per step", help="adaptive steps: the target largest change of "
                              "phi in one step, relative to the field's amplitude (max - min) / 2", gt=0, le=1)
    thermal: float = param(0.0, label="Thermal noise", help="amplitude of the conserved thermal noise "
                           "(Cahn-Hilliard-Cook, a temperature in units of the bulk energy density; 0: none; "
                           f"above {THERMAL_MAX:g} the field is noise, and the steps blow up)", ge=0,
                           le=THERMAL_MAX)
    phi0: float = param(0.0, label="Mean phi0", help="initial mean of phi in [-1, 1] (0: 50/50 spinodal "
                        "decomposition, -0.5: 25/75 droplets)", applies="reset", ge=-1, le=1)
    noise: float = param(0.05, label="Initial noise", help="amplitude of the uniform initial noise about phi0",
                         applies="reset", ge=0, le=1)
    preset: str = param("none", label="Preset", help="none, or PFHub benchmark 1: pfhub-1a (periodic) or "
                        "pfhub-1b (no-flux); fixes dim, m, b, u, K, boundaries, L dx = 200 and the initial field",
                        choices=PRESETS, applies="reset")

    @classmethod
    def suggested(cls, gpu: bool = False, **given) -> dict:
        preset = given.get("preset", "none")
        if preset != "none" and preset in PRESETS:
            values = preset_values(preset)
            L, dx = given.get("L"), given.get("dx")
            if isinstance(L, int) and not isinstance(L, bool) and L > 0 and dx is None:
                values["dx"] = SIDE / L
            elif isinstance(dx, (int, float)) and not isinstance(dx, bool) and dx > 0 and L is None:
                values["L"] = max(4, round(SIDE / dx))
            return values
        dim = given.get("dim", 2)
        if dim not in (2, 3):
            return {}
        out = {"L": DEFAULT_L[(dim, bool(gpu))]}
        if given.get("integrator", cls.model_fields["integrator"].default) in SPECTRAL:
            # the finite-difference limit does not bind the spectral steps (stable at large dt, spectral.py): it
            # made a 3D spectral field take 0.00047 steps at m = 20 and look frozen
            out["dt"] = cls.model_fields["dt"].default
            return out
        try:
            merged = {name: given.get(name, cls.model_fields[name].default) for name in ("dx", "m", "b", "u", "K")}
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                   for v in merged.values()) and merged["dx"] > 0 and merged["u"] > 0:
                limit = fd_stable_dt(dim, **merged)
                dt = _round_down(SAFETY * limit) if math.isfinite(limit) else 0.1
                largest = given.get("dt_max", cls.model_fields["dt_max"].default)
                if isinstance(largest, (int, float)) and not isinstance(largest, bool) and largest > 0:
                    dt = min(dt, largest)     # a suggestion never breaks another rule (dt <= dt_max)
                out["dt"] = dt
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            pass
        return out

    @classmethod
    def options(cls, name: str, values: dict) -> tuple | None:
        if name == "L":
            return (64, 128, 200, 256, 512, 1024, 2048, 4096) if values.get("dim", 2) == 2 else (32, 48, 64, 96,
                                                                                                  128, 192, 256)
        return None

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        if self.L ** self.dim > MAX_CELLS:
            largest = int(MAX_CELLS ** (1 / self.dim))
            raise ParameterError("L", f"a {self.dim}D grid of side {self.L} has {self.L ** self.dim:,} cells; at most "
                                      f"{MAX_CELLS:,} are allowed (L <= {largest})")
        if self.preset != "none":
            fixed = preset_values(self.preset)
            for name in FIXED:
                if getattr(self, name) != fixed[name]:
                    raise ParameterError(name, f"the preset {self.preset} fixes {name} = {fixed[name]!r}; got "
                                               f"{getattr(self, name)!r} (choose preset 'none' to change it)")
            if abs(self.L * self.dx - SIDE) > 1e-9 * SIDE:
                raise ParameterError("L", f"the preset {self.preset} needs L * dx = {SIDE:g} (200 x 200 domain); "
                                          f"got L = {self.L}, dx = {self.dx!r}")
        if self.integrator == "finite-difference":
            limit = fd_stable_dt(self.dim, self.dx, self.m, self.b, self.u, self.K)
            if self.dt > limit:
                raise ParameterError("dt", f"{self.dt!r} is above the stability limit of the finite-difference RK2 "
                                           f"step for these m, b, u, K, dx and dimension: the largest stable dt is "
                                           f"{limit:.6g}; choose dt <= {limit:.6g} or the spectral integrator")
        if self.dt_max < self.dt:
            raise ParameterError("dt_max", f"must be >= dt = {self.dt!r}; got {self.dt_max!r}")
        return self

    @property
    def stable_dt(self) -> float:
        """The finite-difference stability limit for these parameters."""
        return fd_stable_dt(self.dim, self.dx, self.m, self.b, self.u, self.K)
