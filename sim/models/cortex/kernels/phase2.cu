// Cortical model, phase 2 of a step: thesis 003, Algorithm 62 (kernel Phase2). NumPy twin: engines.py phase2.
//
// Pull model: one thread per receiving neuron of first .. end - 1 (grid-stride loop) counts the excitatory and the inhibitory
// sources that fire in this step. It then adds count_e W_e(t) + count_i W_i(t) for t = 0 .. w-1 to slots
// ev_idx + t of its own extra-volts ring (ev[slot * n + i], coalesced); phase 1 reads slot (step index - delay),
// so a spike's washout reaches the receiver delay + 1 steps after it fired. washout holds W_e in [0, 60) and
// W_i in [60, 120). A neuron with no firing source adds nothing (the sum would be unchanged, bit for bit: the
// ring never holds -0).
//
// Two layouts of the source lists (network.py):
//   cortex_phase2         int32 indices sources[j * n + i] (any r) and each source's data byte (bit 0 fired,
//                         bit 1 type) -- consecutive threads read consecutive addresses (figure 8.3);
//   cortex_phase2_packed  16-bit offsets (dx, dy), four to a 64-bit word packed[m * n + i] (r <= 127), and the
//                         sources' codes in phase 1's halo array (1 firing excitatory, 32 firing inhibitory):
//                         the source of (dx, dy) is centre[dy * side + dx], no wrapping. The codes of up to 31
//                         sources add up in one word without carries (count_e = sum & 31, count_i = sum >> 5).
//
// A network split into row slabs (sim/models/cortex/slabs.py) runs the receivers whose sources are all its own
// (the inner core) while the border rows travel, then the rest: hence the range first .. end - 1 less the
// receivers skip_first .. skip_end - 1 (the inner core, when both border bands go in one launch; an empty skip:
// skip_first = skip_end). n is the stride of the arrays.
//
// record != 0: block 0 first finishes phase 1's pseudo-EEG sums (cortex_record) -- phase 1 has completed when
// phase 2 starts -- and writes them, scaled, to last[0..2] and row slot of trace (with v of the probe neuron),
// so a step needs no other launch.
#include "cortex_math.cuh"

#define CORTEX_EV_MAX 75
#define CORTEX_W_MAX 60

// partials: 3 G doubles from phase 1 (v sum, firing excitatory, firing inhibitory of each chunk in turn)
template <int THREADS>
__device__ __forceinline__ void cortex_record(const double* __restrict__ partials, const int G,
                                              const float* __restrict__ v, const int probe, const double scale_e,
                                              const double scale_i, double* __restrict__ trace, const int slot,
                                              double* __restrict__ last)
{
    // warp shuffles, then the warps' sums through 3 x THREADS/32 doubles of shared memory (kept small: every
    // block of the launch reserves it, and the gathers want the rest of the SM's L1)
    static_assert(THREADS % 32 == 0, "whole warps");
    __shared__ double sums[3][THREADS / 32];
    double a = 0.0, b = 0.0, c = 0.0;
    for (int j = threadIdx.x; j < G; j += THREADS) {
        a += partials[3 * j];
        b += partials[3 * j + 1];
        c += partials[3 * j + 2];
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, offset);
        b += __shfl_down_sync(0xffffffffu, b, offset);
        c += __shfl_down_sync(0xffffffffu, c, offset);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        sums[0][warp] = a;
        sums[1][warp] = b;
        sums[2][warp] = c;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int q = 1; q < THREADS / 32; ++q) {
            sums[0][0] += sums[0][q];
            sums[1][0] += sums[1][q];
            sums[2][0] += sums[2][q];
        }
    }
    if (threadIdx.x == 0) {
        const double eeg = __dmul_rn(sums[0][0], scale_e), fe = __dmul_rn(sums[1][0], scale_e);
        const double fi = __dmul_rn(sums[2][0], scale_i);
        last[0] = eeg;
        last[1] = fe;
        last[2] = fi;
        double* row = trace + 4LL * slot;
        row[0] = eeg;
        row[1] = fe;
        row[2] = fi;
        row[3] = (double)v[probe];
    }
}

__device__ __forceinline__ void cortex_add_washout(float* __restrict__ ev, const float* __restrict__ washout,
                                                   const int n, const int i, const int ev_idx, const int w,
                                                   const int count_e, const int count_i)
{
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

template <int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS) cortex_phase2(
    const int* __restrict__ sources, const unsigned char* __restrict__ data, float* __restrict__ ev,
    const float* __restrict__ washout, const int n, const int k, const int ev_idx, const int w,
    const int record, const double* __restrict__ partials, const int G, const float* __restrict__ v,
    const int probe, const double scale_e, const double scale_i, double* __restrict__ trace, const int slot,
    double* __restrict__ last, const int first, const int end, const int skip_first, const int skip_end)
{
    if (record && blockIdx.x == 0) cortex_record<THREADS>(partials, G, v, probe, scale_e, scale_i, trace, slot, last);
    const int count = end - first - (skip_end - skip_first);
    for (int q = blockIdx.x * THREADS + threadIdx.x; q < count; q += gridDim.x * THREADS) {
        const int i = first + q < skip_first ? first + q : first + q + (skip_end - skip_first);
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
        cortex_add_washout(ev, washout, n, i, ev_idx, w, count_e, count_i);
    }
}

// the halo code of the source in a 16-bit lane (dx low byte, dy high byte, both signed)
__device__ __forceinline__ unsigned int cortex_lane_code(const unsigned int lane, const unsigned char* centre,
                                                         const int side)
{
    const int dx = (int)(signed char)(lane & 0xFFu), dy = (int)(signed char)((lane >> 8) & 0xFFu);
    return centre[dy * side + dx];
}

// the sum of the codes of the four sources of a word
__device__ __forceinline__ unsigned int cortex_word_codes(const unsigned long long word,
                                                          const unsigned char* centre, const int side)
{
    const unsigned int lo = (unsigned int)word, hi = (unsigned int)(word >> 32);
    return cortex_lane_code(lo, centre, side) + cortex_lane_code(lo >> 16, centre, side) +
           cortex_lane_code(hi, centre, side) + cortex_lane_code(hi >> 16, centre, side);
}

template <int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS) cortex_phase2_packed(
    const unsigned long long* __restrict__ packed, const unsigned char* __restrict__ halo, float* __restrict__ ev,
    const float* __restrict__ washout, const int n, const int L, const int pad, const int k, const int ev_idx,
    const int w, const int record, const double* __restrict__ partials, const int G, const float* __restrict__ v,
    const int probe, const double scale_e, const double scale_i, double* __restrict__ trace, const int slot,
    double* __restrict__ last, const int first, const int end, const int skip_first, const int skip_end)
{
    static_assert(UNROLL >= 1 && 4 * UNROLL <= 31 && 4 * (UNROLL - 1) + 3 <= 31, "codes must not carry past 5 bits");
    if (record && blockIdx.x == 0) cortex_record<THREADS>(partials, G, v, probe, scale_e, scale_i, trace, slot, last);
    const int side = L + 2 * pad;
    const int full = k >> 2, tail = k & 3;           // words with four sources; sources in the last word
    const int count = end - first - (skip_end - skip_first);
    for (int q = blockIdx.x * THREADS + threadIdx.x; q < count; q += gridDim.x * THREADS) {
        const int i = first + q < skip_first ? first + q : first + q + (skip_end - skip_first);
        const int x = i % L, y = i / L;
        const unsigned char* centre = halo + ((long long)(y + pad) * side + x + pad);
        const unsigned long long* column = packed + i;
        int count_e = 0, count_i = 0;
        int m = 0;
        for (; m + UNROLL <= full; m += UNROLL) {
            unsigned int sum = 0;
#pragma unroll
            for (int q = 0; q < UNROLL; ++q) sum += cortex_word_codes(column[(long long)(m + q) * n], centre, side);
            count_e += (int)(sum & 31u);
            count_i += (int)(sum >> 5);
        }
        unsigned int sum = 0;                        // at most UNROLL - 1 words and 3 sources: no carry
        for (; m < full; ++m) sum += cortex_word_codes(column[(long long)m * n], centre, side);
        if (tail) {
            const unsigned long long word = column[(long long)full * n];
            for (int lane = 0; lane < tail; ++lane)
                sum += cortex_lane_code((unsigned int)(word >> (16 * lane)), centre, side);
        }
        count_e += (int)(sum & 31u);
        count_i += (int)(sum >> 5);
        if (count_e == 0 && count_i == 0) continue;
        cortex_add_washout(ev, washout, n, i, ev_idx, w, count_e, count_i);
    }
}
