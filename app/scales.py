"""Slider scales: integer slider positions to parameter values, and back.

Centred scale (a temperature around its critical value): positions 0..TEMPERATURE_STEPS map to values through
a sinh curve centred on ``centre``, so steps are about 1.3e-4 x centre there (3e-4 at the 2D Ising T_c) and
coarser far from it. Zero-then-log scale (a probability): position 0 is 0, positions 1..P_MAX_POSITION run
logarithmically from 1e-7 to 1.
"""
from __future__ import annotations

import math

TEMPERATURE_STEPS = 2000
_T_SHAPE = 4.0         # curvature of the sinh scale: larger means finer near T_c
_T_LOW = 0.05          # lowest temperature reachable by the slider, as a fraction of T_c
_T_HIGH = 2.5          # highest, as a multiple of T_c
P_MIN_EXPONENT = -7
P_STEPS_PER_DECADE = 20
P_MAX_POSITION = 1 - P_MIN_EXPONENT * P_STEPS_PER_DECADE   # the position of p = 1


def temperature_at(position: int, centre: float) -> float:
    u = 2.0 * position / TEMPERATURE_STEPS - 1.0        # -1 .. 1, 0 at the centre
    tc = centre
    span = tc * (1 - _T_LOW) if u < 0 else tc * (_T_HIGH - 1)
    return tc + span * math.sinh(_T_SHAPE * u) / math.sinh(_T_SHAPE)


def position_of_temperature(T: float, centre: float) -> int:
    tc = centre
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
