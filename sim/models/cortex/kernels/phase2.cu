// Cortical model, phase 2 of a step: thesis 003, Algorithm 62 (kernel Phase2). NumPy twin: engines.py phase2.
//
// Pull model: one thread per receiving neuron (grid-stride loop) reads its k source indices from
// sources[j * n + i] -- consecutive threads read consecutive addresses, the coalesced layout of the thesis's
// figure 8.3 -- and each source's data byte (bit 0 fired, bit 1 type), counting the excitatory and the
// inhibitory sources that fire in this step. It then adds count_e W_e(t) + count_i W_i(t) for t = 0 .. w-1 to
// slots ev_idx + t of its own extra-volts ring (ev[slot * n + i], again coalesced); phase 1 reads slot
// (step index - delay), so a spike's washout reaches the receiver delay + 1 steps after it fired.
// washout holds W_e in [0, 60) and W_i in [60, 120). A neuron with no firing source adds nothing (the sum
// would be unchanged, bit for bit: the ring never holds -0).
#include "cortex_math.cuh"

#define CORTEX_EV_MAX 75
#define CORTEX_W_MAX 60

template <int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS) cortex_phase2(
    const int* __restrict__ sources, const unsigned char* __restrict__ data, float* __restrict__ ev,
    const float* __restrict__ washout, const int n, const int k, const int ev_idx, const int w)
{
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < n; i += gridDim.x * THREADS) {
        int count_e = 0, count_i = 0;
        const int* column = sources + i;
        int j = 0;
        for (; j + UNROLL <= k; j += UNROLL) {
#pragma unroll
            for (int q = 0; q < UNROLL; ++q) {
                const unsigned char d = data[column[(long long)(j + q) * n]];
                count_e += d == 1;
                count_i += d == 3;
            }
        }
        for (; j < k; ++j) {
            const unsigned char d = data[column[(long long)j * n]];
            count_e += d == 1;
            count_i += d == 3;
        }
        if (count_e == 0 && count_i == 0) continue;
        const float fe = __int2float_rn(count_e), fi = __int2float_rn(count_i);
        int slot = ev_idx;
        for (int t = 0; t < w; ++t) {
            const long long at = (long long)slot * n + i;
            float x = ev[at];
            x = __fadd_rn(x, __fmul_rn(fe, washout[t]));
            x = __fadd_rn(x, __fmul_rn(fi, washout[CORTEX_W_MAX + t]));
            ev[at] = x;
            slot = slot + 1 == CORTEX_EV_MAX ? 0 : slot + 1;
        }
    }
}
