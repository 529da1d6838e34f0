"""The rewired Ising model's parameters, declared once (sim/params.py says what is derived from them)."""
from __future__ import annotations

import re
from typing import ClassVar

import pydantic

from latticelab.sim.models.ising.lattice import parse_rewire_dims
from latticelab.sim.params import ModelParams, ParameterError, param

ALGORITHMS = ("metropolis", "wolff", "swendsen-wang")
_HYBRID = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")
HYBRID_MAX = 10_000      # m and w of a hybrid schedule "m:w" are at most this
# Flat site indices stay below 2**31 so GPU kernels can use 32-bit indices.
MAX_SITES = 2 ** 31 - 1
T_C = {2: 2.269185314, 3: 4.511523}          # regular lattice: Onsager (2D), Monte Carlo (3D)
DEFAULT_T = {2: 2.25, 3: 4.45}               # just below T_c
DEFAULT_L = {(2, False): 512, (2, True): 2048, (3, False): 64, (3, True): 256}   # (dim, gpu) -> L
STARTS = ("hot", "cold")


class IsingParams(ModelParams):
    """Parameters of the rewired Ising model (thesis 003, chapter 7). J = k_B = 1."""

    model_name = "ising"
    variant_fields = ("dim",)
    rewiring_field = "p"

    dim: int = param(2, label="Dimension", help="2 or 3", choices=(2, 3), applies="rebuild", widget="dimension_choice")
    L: int = param(512, label="Size L", help="lattice side (even, >= 4); default 512 (2D) / 64 (3D) on the CPU, "
                   "2048 / 256 on a GPU", applies="rebuild", ge=4, widget="editable_choice")
    T: float = param(DEFAULT_T[2], label="Temperature", help="temperature (> 0); default just below T_c",
                     unit="J/k_B", gt=0, widget="centred_slider")
    p: float = param(0.0, label="Rewiring p", help="probability that an edge end is rewired, in [0, 1]",
                     ge=0, le=1, widget="zero_log_slider", slow=True)     # a new graph is drawn: seconds at large L
    rewire_dims: str = param("all", label="Rewired dims", help="'all' or the axes a rewired end may move along, "
                             "e.g. 'x', 'xy' (x is the horizontal axis)", widget="choice", slow=True)
    algorithm: str = param("metropolis", label="Algorithm", help="metropolis, wolff, swendsen-wang or a hybrid "
                           "m:w such as 8:1 (m sweeps, then w cluster flips)", widget="hybrid_schedule")
    start: str = param("hot", label="Start", help="initial spins: hot (random) or cold (all up)",
                       choices=STARTS, applies="reset")

    @classmethod
    def suggested(cls, gpu: bool = False, **given) -> dict:
        dim = given.get("dim", 2)
        if dim not in (2, 3):
            return {}
        return {"L": DEFAULT_L[(dim, bool(gpu))], "T": DEFAULT_T[dim]}

    @classmethod
    def options(cls, name: str, values: dict) -> tuple | None:
        dim = values.get("dim", 2)
        if name == "L":     # powers of two from 4,096 to 16.8 million sites
            return tuple(n for n in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096) if 2 ** 12 <= n ** dim <= 2 ** 24)
        if name == "rewire_dims":
            return ("all", "x", "xy") if dim == 2 else ("all", "x", "xy", "z", "xyz")
        if name == "algorithm":
            return ALGORITHMS
        return None

    @staticmethod
    def hybrid(algorithm) -> tuple[int, int] | None:
        """(m, w) of a hybrid "m:w" ``algorithm``, or None (the form's schedule widget reads it so)."""
        return parse_hybrid(algorithm)

    hybrid_max: ClassVar[int] = HYBRID_MAX

    @classmethod
    def centre(cls, name: str, values: dict) -> float | None:
        return T_C.get(values.get("dim", 2)) if name == "T" else None

    @pydantic.field_validator("L")
    @classmethod
    def _even(cls, L: int) -> int:
        if L % 2:
            raise ParameterError("L", f"must be an even integer >= 4; got {L!r}")
        return L

    @pydantic.field_validator("algorithm")
    @classmethod
    def _schedule(cls, algorithm: str) -> str:
        parse_algorithm(algorithm)
        return algorithm

    @pydantic.model_validator(mode="after")
    def _fits_dimension(self):
        check_sites(self.L, self.dim)
        try:
            parse_rewire_dims(self.rewire_dims, self.dim)
        except ValueError as exc:
            raise ParameterError("rewire_dims", str(exc).removeprefix("rewire_dims: ")) from None
        return self


def check_sites(L: int, dim: int) -> None:
    if L ** dim > MAX_SITES:
        largest = int(MAX_SITES ** (1 / dim)) // 2 * 2
        raise ParameterError("L", f"a {dim}D lattice of side {L} has {L ** dim:,} sites; "
                                  f"at most {MAX_SITES:,} are allowed (L <= {largest})")


def parse_hybrid(text) -> tuple[int, int] | None:
    """(m, w) of a hybrid schedule "m:w" (m Metropolis sweeps, then w cluster flips), or None for any other
    value; m + w > 0 and each at most HYBRID_MAX."""
    match = _HYBRID.match(text) if isinstance(text, str) else None
    if match:
        m, w = int(match.group(1)), int(match.group(2))
        if m + w > 0 and m <= HYBRID_MAX and w <= HYBRID_MAX:
            return m, w
    return None


def parse_algorithm(algorithm) -> tuple[str, ...]:
    """The update schedule: ("metropolis",), ("wolff",), ("swendsen-wang",) or m x metropolis then w x wolff
    for "m:w"."""
    allowed = ("'metropolis', 'wolff', 'swendsen-wang' or a hybrid 'm:w' "
               "(e.g. '8:1': 8 sweeps then 1 cluster flip)")
    if not isinstance(algorithm, str):
        raise ParameterError("algorithm", f"must be {allowed}; got {algorithm!r}")
    if algorithm in ALGORITHMS:
        return (algorithm,)
    hybrid = parse_hybrid(algorithm)
    if hybrid is not None:
        m, w = hybrid
        return ("metropolis",) * m + ("wolff",) * w
    raise ParameterError("algorithm", f"must be {allowed}; got {algorithm!r}")
