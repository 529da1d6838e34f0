// Exact-operation normal deviates for the cortical model: the CUDA twin of sim/models/cortex/numbers.py.
//
// Box-Muller from two Philox words, in double precision, with a logarithm and a sine/cosine made of IEEE-exact
// operations only (+, -, *, / and sqrt, each correctly rounded, never fused into multiply-adds: the __d*_rn
// intrinsics forbid contraction). The same numbers, bit for bit, come out of NumPy (numbers.py), of the CPU
// emulator (g++) and of the GPU; library log/cos would differ in the last bit between the three.
// The polynomial coefficients are the Python reprs of numbers.py's ATANH, COS and SIN (keep them in step;
// tests/test_cortex_kernels.py compares the deviates bit for bit).
#pragma once
#include "philox.cuh"

#ifndef __CUDACC__
// The CPU emulator (sim/gpu/emulate.py, g++): plain IEEE arithmetic, no contraction into fused multiply-adds.
#include <cmath>
#pragma GCC optimize("fp-contract=off")
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __int2float_rn(int a) { return (float)a; }
inline float __double2float_rn(double a) { return (float)a; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
#endif

#define CORTEX_TAG_INIT 16u
#define CORTEX_TAG_INPUT 17u
#define CORTEX_TAG_CONNECT 18u
#define CORTEX_LN2 0.6931471805599453
#define CORTEX_SQRT2 1.4142135623730951
#define CORTEX_TWO_PI 6.283185307179586
#define CORTEX_TWO_M32 2.3283064365386963e-10

// ln u1 for u1 = (word + 1) / 2^32 in (0, 1]
__device__ __forceinline__ double cortex_log_unit(const unsigned int word)
{
    const unsigned long long n = (unsigned long long)word + 1ull;      // 1 .. 2^32
    int e = 63 - __clzll((long long)n);                               // n = m 2^e, m in [1, 2)
    double m = ldexp((double)n, -e);
    if (m > CORTEX_SQRT2) {
        m = __dmul_rn(m, 0.5);
        e += 1;
    }
    const double s = __ddiv_rn(__dsub_rn(m, 1.0), __dadd_rn(m, 1.0));
    const double s2 = __dmul_rn(s, s);
    double p = 0.04;
    p = __dadd_rn(__dmul_rn(p, s2), 0.043478260869565216);
    p = __dadd_rn(__dmul_rn(p, s2), 0.047619047619047616);
    p = __dadd_rn(__dmul_rn(p, s2), 0.05263157894736842);
    p = __dadd_rn(__dmul_rn(p, s2), 0.058823529411764705);
    p = __dadd_rn(__dmul_rn(p, s2), 0.06666666666666667);
    p = __dadd_rn(__dmul_rn(p, s2), 0.07692307692307693);
    p = __dadd_rn(__dmul_rn(p, s2), 0.09090909090909091);
    p = __dadd_rn(__dmul_rn(p, s2), 0.1111111111111111);
    p = __dadd_rn(__dmul_rn(p, s2), 0.14285714285714285);
    p = __dadd_rn(__dmul_rn(p, s2), 0.2);
    p = __dadd_rn(__dmul_rn(p, s2), 0.3333333333333333);
    p = __dadd_rn(__dmul_rn(p, s2), 1.0);
    return __dadd_rn(__dmul_rn((double)(e - 32), CORTEX_LN2), __dmul_rn(__dmul_rn(2.0, s), p));
}

// sin and cos of 2 pi word / 2^32: the quadrant from the top two bits, polynomials on [0, pi/4]
__device__ __forceinline__ void cortex_sincos_2pi(const unsigned int word, double* sin_out, double* cos_out)
{
    const unsigned int quadrant = word >> 30;
    const double f = __dmul_rn((double)(word & 0x3FFFFFFFu), CORTEX_TWO_M32);   // [0, 0.25), exact
    const bool swap = f > 0.125;
    const double g = swap ? __dsub_rn(0.25, f) : f;
    const double x = __dmul_rn(CORTEX_TWO_PI, g);
    const double x2 = __dmul_rn(x, x);
    double c0 = 4.110317623312165e-19;
    c0 = __dadd_rn(__dmul_rn(c0, x2), -1.5619206968586225e-16);
    c0 = __dadd_rn(__dmul_rn(c0, x2), 4.779477332387385e-14);
    c0 = __dadd_rn(__dmul_rn(c0, x2), -1.1470745597729725e-11);
    c0 = __dadd_rn(__dmul_rn(c0, x2), 2.08767569878681e-09);
    c0 = __dadd_rn(__dmul_rn(c0, x2), -2.755731922398589e-07);
    c0 = __dadd_rn(__dmul_rn(c0, x2), 2.48015873015873e-05);
    c0 = __dadd_rn(__dmul_rn(c0, x2), -0.001388888888888889);
    c0 = __dadd_rn(__dmul_rn(c0, x2), 0.041666666666666664);
    c0 = __dadd_rn(__dmul_rn(c0, x2), -0.5);
    c0 = __dadd_rn(__dmul_rn(c0, x2), 1.0);
    double ps = 1.9572941063391263e-20;
    ps = __dadd_rn(__dmul_rn(ps, x2), -8.22063524662433e-18);
    ps = __dadd_rn(__dmul_rn(ps, x2), 2.8114572543455206e-15);
    ps = __dadd_rn(__dmul_rn(ps, x2), -7.647163731819816e-13);
    ps = __dadd_rn(__dmul_rn(ps, x2), 1.6059043836821613e-10);
    ps = __dadd_rn(__dmul_rn(ps, x2), -2.505210838544172e-08);
    ps = __dadd_rn(__dmul_rn(ps, x2), 2.7557319223985893e-06);
    ps = __dadd_rn(__dmul_rn(ps, x2), -0.0001984126984126984);
    ps = __dadd_rn(__dmul_rn(ps, x2), 0.008333333333333333);
    ps = __dadd_rn(__dmul_rn(ps, x2), -0.16666666666666666);
    ps = __dadd_rn(__dmul_rn(ps, x2), 1.0);
    const double s0 = __dmul_rn(x, ps);
    const double c = swap ? s0 : c0, s = swap ? c0 : s0;
    *cos_out = quadrant == 0 ? c : (quadrant == 1 ? -s : (quadrant == 2 ? -c : s));
    *sin_out = quadrant == 0 ? s : (quadrant == 1 ? c : (quadrant == 2 ? -s : -c));
}

// Two standard normal deviates from two words (Box-Muller): z0 = sqrt(-2 ln u1) cos(2 pi u2), z1 = ... sin
__device__ __forceinline__ void cortex_normal_pair(const unsigned int w0, const unsigned int w1, double* z0, double* z1)
{
    const double radius = __dsqrt_rn(__dmul_rn(-2.0, cortex_log_unit(w0)));
    double s, c;
    cortex_sincos_2pi(w1, &s, &c);
    *z0 = __dmul_rn(radius, c);
    *z1 = __dmul_rn(radius, s);
}

// Philox4x32-10 of the counter (index, tag, c2, c3) under the 64-bit seed (seed_lo, seed_hi)
__device__ __forceinline__ uint4 cortex_draw(const unsigned int index, const unsigned int tag, const unsigned int c2,
                                             const unsigned int c3, const unsigned int seed_lo,
                                             const unsigned int seed_hi)
{
    return philox4x32_10(make_uint4(index, tag, c2, c3), seed_lo, seed_hi);
}
