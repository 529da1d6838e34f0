"""Slider scales: integer slider positions to temperatures and rewiring probabilities, and back.

Temperature: positions 0..TEMPERATURE_STEPS map to T through a sinh curve centred on T_c, so steps are
about 3e-4 (2D) near T_c and coarser far from it. Rewiring p: position 0 is p = 0, positions 1..P_MAX_POSITION run
logarithmically from 1e-7 to 1.
"""
from __future__ import annotations

import math

T_C = {2: 2.269185314, 3: 4.511523}
TEMPERATURE_STEPS = 2000
_T_SHAPE = 4.0         # curvature of the sinh scale: larger means finer near T_c
_T_LOW = 0.05          # lowest temperature reachable by the slider, as a fraction of T_c
_T_HIGH = 2.5          # highest, as a multiple of T_c
P_MIN_EXPONENT = -7
P_STEPS_PER_DECADE = 20
P_MAX_POSITION = 1 - P_MIN_EXPONENT * P_STEPS_PER_DECADE   # the position of p = 1


def temperature_at(position: int, dim: int) -> float:
    u = 2.0 * position / TEMPERATURE_STEPS - 1.0        # -1 .. 1, 0 at T_c
    tc = T_C[dim]
    span = tc * (1 - _T_LOW) if u < 0 else tc * (_T_HIGH - 1)
    return tc + span * math.sinh(_T_SHAPE * u) / math.sinh(_T_SHAPE)


def position_of_temperature(T: float, dim: int) -> int:
    tc = T_C[dim]
    span = tc * (1 - _T_LOW) if T < tc else tc * (_T_HIGH - 1)
    x = max(-1.0, min(1.0, (T - tc) / span))
    u = math.asinh(x * math.sinh(_T_SHAPE)) / _T_SHAPE
    return int(round((u + 1.0) * TEMPERATURE_STEPS / 2.0))


def p_at(position: int) -> float:
    if position <= 0:
        return 0.0
    exponent = P_MIN_EXPONENT + (min(position, P_MAX_POSITION) - 1) / P_STEPS_PER_DECADE
    return min(1.0, 10.0 ** exponent)


def position_of_p(p: float) -> int:
    if p <= 0:
        return 0
    exponent = max(P_MIN_EXPONENT, min(0.0, math.log10(p)))
    return 1 + int(round((exponent - P_MIN_EXPONENT) * P_STEPS_PER_DECADE))
