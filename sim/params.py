"""Validation of user-facing model parameters: every error names the parameter and what is allowed."""
from __future__ import annotations

import math
import re


class ParameterError(ValueError):
    """A parameter is out of range; ``parameter`` names it and the message says what is allowed."""

    def __init__(self, parameter: str, message: str):
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter


ALGORITHMS = ("metropolis", "wolff", "swendsen-wang")
_HYBRID = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")
# Flat site indices stay below 2**31 so GPU kernels can use 32-bit indices.
MAX_SITES = 2 ** 31 - 1


def check_dim(dim) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim not in (2, 3):
        raise ParameterError("dim", f"must be 2 or 3; got {dim!r}")
    return dim


def check_L(L, dim: int) -> int:
    if isinstance(L, bool) or not isinstance(L, int) or L < 4 or L % 2:
        raise ParameterError("L", f"must be an even integer >= 4; got {L!r}")
    if L ** dim > MAX_SITES:
        largest = int(MAX_SITES ** (1 / dim)) // 2 * 2
        raise ParameterError("L", f"a {dim}D lattice of side {L} has {L ** dim:,} sites; "
                                  f"at most {MAX_SITES:,} are allowed (L <= {largest})")
    return L


def check_T(T) -> float:
    try:
        T = float(T)
    except (TypeError, ValueError):
        raise ParameterError("T", f"must be a positive number; got {T!r}") from None
    if not math.isfinite(T) or T <= 0:
        raise ParameterError("T", f"must be a positive finite number; got {T!r}")
    return T


def check_p(p) -> float:
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise ParameterError("p", f"must be a number in [0, 1]; got {p!r}") from None
    if not 0.0 <= p <= 1.0:
        raise ParameterError("p", f"must be in [0, 1]; got {p!r}")
    return p


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 63:
        raise ParameterError("seed", f"must be an integer in [0, 2**63); got {seed!r}")
    return seed


def parse_algorithm(algorithm) -> tuple[str, ...]:
    """The update schedule: ("metropolis",), ("wolff",), ("swendsen-wang",) or m x metropolis then w x wolff
    for "m:w"."""
    allowed = ("'metropolis', 'wolff', 'swendsen-wang' or a hybrid 'm:w' "
               "(e.g. '8:1': 8 sweeps then 1 cluster flip)")
    if not isinstance(algorithm, str):
        raise ParameterError("algorithm", f"must be {allowed}; got {algorithm!r}")
    if algorithm in ALGORITHMS:
        return (algorithm,)
    match = _HYBRID.match(algorithm)
    if match:
        m, w = int(match.group(1)), int(match.group(2))
        if m + w > 0 and m <= 10_000 and w <= 10_000:
            return ("metropolis",) * m + ("wolff",) * w
    raise ParameterError("algorithm", f"must be {allowed}; got {algorithm!r}")
