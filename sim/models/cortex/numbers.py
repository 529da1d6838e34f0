"""The cortical model's random numbers: Philox4x32-10 (sim/gpu/philox.py) keyed by the seed, with counters
that name what a number is for, and normal deviates computed the same way, bit for bit, in NumPy, in the
CPU emulator of the kernels and on the GPU (kernels/cortex_math.cuh is the CUDA twin of this file).

Counters (key = the 64-bit seed as two words):
    (neuron, TAG_INIT, 0, 0)            word 0 type, 1 dynamics r, 2 initial v, 3 delay
    (neuron, TAG_INPUT, step lo, hi)    words 0, 1 the noise deviate (Box-Muller), word 2 the boost draw
    (receiver, TAG_CONNECT, j, attempt) words 0, 1 the offset of source j (Box-Muller pair), redrawn with the
                                        next attempt while outside the radius or on the receiver itself

Every number is a pure function of (seed, purpose, neuron, step), so a run does not depend on the launch
shape and a saved state resumes exactly. The tags are distinct from those of sim/gpu/philox.py (0 to 8).

Normal deviates (Box-Muller, z0 = sqrt(-2 ln u1) cos(2 pi u2), z1 = ... sin ...) are computed in double
precision from IEEE-exact operations only (+, -, *, /, sqrt, power-of-two scaling): the logarithm and the
sine and cosine are fixed polynomials below, evaluated in a fixed order without fused multiply-adds. The
library functions (log, cos) differ between NumPy, glibc and CUDA in the last bit; these do not.
"""
from __future__ import annotations

import numpy as np

from latticelab.sim.gpu.philox import philox4x32, split64

TAG_INIT = 16
TAG_INPUT = 17
TAG_CONNECT = 18

LN2 = 0.6931471805599453
SQRT2 = 1.4142135623730951
TWO_PI = 6.283185307179586
# ln m = 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...), s = (m - 1)/(m + 1), |s| <= 0.172 for m in [1/sqrt2, sqrt2]
ATANH = (1.0, 0.3333333333333333, 0.2, 0.14285714285714285, 0.1111111111111111, 0.09090909090909091,
         0.07692307692307693, 0.06666666666666667, 0.058823529411764705, 0.05263157894736842,
         0.047619047619047616, 0.043478260869565216, 0.04)
# cos x and sin x / x as polynomials in x^2 (Taylor, x in [0, pi/4])
COS = (1.0, -0.5, 0.041666666666666664, -0.001388888888888889, 2.48015873015873e-05, -2.755731922398589e-07,
       2.08767569878681e-09, -1.1470745597729725e-11, 4.779477332387385e-14, -1.5619206968586225e-16,
       4.110317623312165e-19)
SIN = (1.0, -0.16666666666666666, 0.008333333333333333, -0.0001984126984126984, 2.7557319223985893e-06,
       -2.505210838544172e-08, 1.6059043836821613e-10, -7.647163731819816e-13, 2.8114572543455206e-15,
       -8.22063524662433e-18, 1.9572941063391263e-20)
TWO_M32 = 2.0 ** -32


def words(seed: int, tag: int, index, c2=0, c3=0) -> np.ndarray:
    """(4, n) uint32: Philox4x32-10 of counters (index, tag, c2, c3) under the seed."""
    return philox4x32((np.asarray(index, dtype=np.int64), tag, c2, c3), split64(seed))


def uniform01(word) -> np.ndarray:
    """A 32-bit word as a double in [0, 1): word / 2^32 (exact)."""
    return np.asarray(word, dtype=np.float64) * TWO_M32


def _horner(coefficients, x2):
    p = np.full_like(x2, coefficients[-1])
    for c in coefficients[-2::-1]:
        p = p * x2 + c
    return p


def log_unit(word) -> np.ndarray:
    """ln u1 for u1 = (word + 1) / 2^32 in (0, 1] (float64), the kernels' exact-operation logarithm."""
    n = np.asarray(word, dtype=np.uint64) + np.uint64(1)                  # 1 .. 2^32
    half, e = np.frexp(n.astype(np.float64))                              # n = half * 2^e, half in [0.5, 1)
    m = half * 2.0                                                        # [1, 2), exact
    e = e.astype(np.int64) - 1
    big = m > SQRT2
    m = np.where(big, m * 0.5, m)
    e = e + big
    s = (m - 1.0) / (m + 1.0)
    p = _horner(ATANH, s * s)
    return (e - 32).astype(np.float64) * LN2 + (2.0 * s) * p


def sincos_2pi(word) -> tuple[np.ndarray, np.ndarray]:
    """(sin, cos) of 2 pi word / 2^32 (float64), from the quadrant (top two bits) and polynomials on [0, pi/4]."""
    w = np.asarray(word, dtype=np.uint32)
    quadrant = w >> np.uint32(30)
    f = (w & np.uint32(0x3FFFFFFF)).astype(np.float64) * TWO_M32          # [0, 0.25), exact
    swap = f > 0.125
    g = np.where(swap, 0.25 - f, f)                                       # [0, 0.125], exact
    x = TWO_PI * g
    x2 = x * x
    c0 = _horner(COS, x2)
    s0 = x * _horner(SIN, x2)
    c, s = np.where(swap, s0, c0), np.where(swap, c0, s0)                 # angle 2 pi f in [0, pi/2)
    cos = np.select([quadrant == 0, quadrant == 1, quadrant == 2], [c, -s, -c], s)
    sin = np.select([quadrant == 0, quadrant == 1, quadrant == 2], [s, c, -s], -c)
    return sin, cos


def normal_pair(word0, word1) -> tuple[np.ndarray, np.ndarray]:
    """Two independent standard normal deviates (float64) from two 32-bit words, by Box-Muller."""
    radius = np.sqrt(-2.0 * log_unit(word0))
    sin, cos = sincos_2pi(word1)
    return radius * cos, radius * sin


def threshold32(probability: float) -> int:
    """t with P(word < t) = probability for a uniform 32-bit word (as a Python int up to 2^32)."""
    p = min(max(float(probability), 0.0), 1.0)
    return int(np.floor(p * 2.0 ** 32))
