// Order-preserving 64-bit keys of doubles and warp maxima of them: the shared pieces of the max reductions of
// the Cahn-Hilliard adaptive step control (ch_change.cu; ch_spectral.cu's ch_nonlinear_change). Keys: the value
// widened to double (exact for float and double), its bits b mapped to b | 2^63 when the sign bit is clear, ~b
// when it is set, so that the unsigned order of the keys is the order of the values (-0 just below +0) and 0 lies
// below every key (zeroed words are the identity of the max); any NaN takes the largest key, ~0. model.decode_keys
// maps keys back; model.change_keys_twin is the NumPy twin.
#pragma once
#ifndef __CUDACC__
// The CPU emulator (sim/gpu/emulate.py, g++) provides only the atomics other kernels use; this one, with the
// emulator's scheduling point in front as its other atomics have, and the bit casts.
#include <cstring>
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v)
{
    SCHEDULE_POINT();
    const unsigned long long old = *p;
    *p = old > v ? old : v;
    return old;
}
inline long long __double_as_longlong(double v)
{
    long long b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}
inline double __longlong_as_double(long long b)
{
    double v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}
#endif

__device__ __forceinline__ unsigned long long ch_key(double v)
{
    if (v != v) return ~0ull;                     // any NaN above everything, so NaN propagates as in NumPy
    const unsigned long long b = (unsigned long long)__double_as_longlong(v);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

// the key of |v|: the sign bit cleared, then mapped as a non-negative value; any NaN the largest key, ~0, as in
// ch_key (its bits are not used: a NaN's payload differs between the GPU, whose float arithmetic returns
// 0x7fffffff, and NumPy, which keeps the operand's)
__device__ __forceinline__ unsigned long long ch_abs_key(double v)
{
    if (v != v) return ~0ull;
    return (unsigned long long)__double_as_longlong(v) | 0x8000000000000000ull;
}

// the value of a key (model.decode_keys): the inverse of ch_key for every non-NaN key; ~0 decodes to a NaN
__device__ __forceinline__ double ch_unkey(unsigned long long k)
{
    const unsigned long long b = (k & 0x8000000000000000ull) ? (k ^ 0x8000000000000000ull) : ~k;
    return __longlong_as_double((long long)b);
}

__device__ __forceinline__ unsigned long long ch_umax(unsigned long long a, unsigned long long b)
{
    return a > b ? a : b;
}

__device__ __forceinline__ unsigned long long ch_warp_max(unsigned long long v)
{
#pragma unroll
    for (int delta = 16; delta > 0; delta >>= 1) v = ch_umax(v, __shfl_down_sync(0xffffffffu, v, delta));
    return v;
}

// the block's maxima of three keys into result[0..2] by one atomicMax each (thread 0 of warp 0); every thread of
// the block calls it (blockDim.x == THREADS, a multiple of 32)
template <int THREADS>
__device__ __forceinline__ void ch_block_max3(unsigned long long a, unsigned long long b, unsigned long long c,
                                              unsigned long long* __restrict__ result)
{
    __shared__ unsigned long long partial[3][THREADS / 32];
    const int t = (int)threadIdx.x, lane = t & 31, warp = t >> 5;
    a = ch_warp_max(a);
    b = ch_warp_max(b);
    c = ch_warp_max(c);
    if (lane == 0) {
        partial[0][warp] = a;
        partial[1][warp] = b;
        partial[2][warp] = c;
    }
    __syncthreads();
    if (warp == 0) {
        constexpr int WARPS = THREADS / 32;
        a = lane < WARPS ? partial[0][lane] : 0ull;
        b = lane < WARPS ? partial[1][lane] : 0ull;
        c = lane < WARPS ? partial[2][lane] : 0ull;
        a = ch_warp_max(a);
        b = ch_warp_max(b);
        c = ch_warp_max(c);
        if (lane == 0) {
            atomicMax(result + 0, a);
            atomicMax(result + 1, b);
            atomicMax(result + 2, c);
        }
    }
}
