// The statistics of one time step that the adaptive step control of the Cahn-Hilliard model needs (model.py:
// FusedChange, adapted_dt), in one pass over the new field `next` and the previous field `prev` of n cells:
//     result[0] = key(max |next - prev|),   result[1] = key(max prev),   result[2] = key(max -prev) = key(-min prev)
// max-reduced into three 64-bit words by atomics; the same launch zeroes `clear[0..2]` (the other slot of a
// pair of result slots, which the next launch reduces into: no memset launch is needed).
//
// Keys: the value is widened to double (exact for float and double) and its bits b mapped to b | 2^63 when the
// sign bit is clear, ~b when it is set, so that the unsigned order of the keys is the order of the values
// (-0 just below +0) and 0 lies below every key: zeroed words are the identity of the max. A NaN of either sign
// takes the largest key, ~0 (it decodes to a NaN), so NaN propagates as NumPy's max and min do. |d| is d with
// the sign bit cleared (fabs: a NaN stays a NaN, with a key above every number's), and min prev comes as
// max(-prev) (negation is exact). The difference next - prev is rounded to Real, as the NumPy/CuPy twin's
// new - old is, and only then widened. The maxima are exact: the decoded values equal NumPy's max and min bit
// for bit (model.change_keys_twin is the NumPy twin of the three words).
//
// The reduction: a grid-stride loop per thread (model.change_launch caps the grid), a warp max by
// shuffles, the warps' maxima through shared memory, the first warp reduces them, and thread 0 of each block does
// three atomicMax. Any n >= 1 and any number of blocks; blockDim.x must be CH_CHANGE_THREADS.
#define CH_CHANGE_THREADS 256

#include "ch_keys.cuh"

template <typename Real>
__global__ void __launch_bounds__(CH_CHANGE_THREADS)
ch_change(const Real* __restrict__ next, const Real* __restrict__ prev, const long long n,
          unsigned long long* __restrict__ result, unsigned long long* __restrict__ clear)
{
    const int t = (int)threadIdx.x;
    if (blockIdx.x == 0 && t < 3) clear[t] = 0ull;

    unsigned long long change = 0ull, top = 0ull, neg_bottom = 0ull;     // 0: below every key
    const long long stride = (long long)gridDim.x * CH_CHANGE_THREADS;
    for (long long i = (long long)blockIdx.x * CH_CHANGE_THREADS + t; i < n; i += stride) {
        const Real old = prev[i];
        const Real d = next[i] - old;                                    // rounded to Real, as the twin's
        change = ch_umax(change, ch_abs_key((double)d));
        top = ch_umax(top, ch_key((double)old));
        neg_bottom = ch_umax(neg_bottom, ch_key(-(double)old));
    }
    ch_block_max3<CH_CHANGE_THREADS>(change, top, neg_bottom, result);
}
