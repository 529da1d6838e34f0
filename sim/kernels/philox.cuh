// Philox4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator of Random123. A 128-bit counter and a 64-bit key give four 32-bit words; there is no
// state to load or store, so every thread draws exactly the numbers of its own (index, tag, stream) counter.
// Host twin and counter conventions: sim/gpu/philox.py (keep the tags in step with it).
#pragma once

// A point where the CPU emulator (sim/gpu/cuda_emulator.h) may switch threads; nothing on the GPU.
#ifndef SCHEDULE_POINT
#define SCHEDULE_POINT()
#endif

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

#define TAG_METROPOLIS 0u     // + colour: top 8 bits of the sites' numbers, as bit planes (metropolis_numbers.cuh)
#define TAG_METROPOLIS_LOW 8u // + colour: low 56 bits of a site's number, drawn only on a tie
#define TAG_BOND 2u
#define TAG_NEW_BOND 3u
#define TAG_CLUSTER_FLIP 4u

// Philox4x32 with ROUNDS rounds. 10 everywhere the results are kept; the paper's Table 2 finds 7 rounds
// already Crush-resistant (all of TestU01's SmallCrush, Crush and BigCrush) and recommends 10 for a margin, so
// bench sim times 7 as the published alternative without making it the default.
template <int ROUNDS>
__device__ __forceinline__ uint4 philox4x32(uint4 c, unsigned int k0, unsigned int k1)
{
#pragma unroll
    for (int round = 0; round < ROUNDS; ++round) {
        const unsigned int hi0 = __umulhi(PHILOX_M0, c.x), lo0 = PHILOX_M0 * c.x;
        const unsigned int hi1 = __umulhi(PHILOX_M1, c.z), lo1 = PHILOX_M1 * c.z;
        c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    return c;
}

__device__ __forceinline__ uint4 philox4x32_10(uint4 c, unsigned int k0, unsigned int k1)
{
    return philox4x32<10>(c, k0, k1);
}

// Word i (0..3) of a Philox result, for a run-time i.
__device__ __forceinline__ unsigned int philox_word(const uint4 r, const int i)
{
    return i == 0 ? r.x : (i == 1 ? r.y : (i == 2 ? r.z : r.w));
}

// The run's key and stream, as every kernel receives them.
struct PhiloxKey {
    unsigned int seed_lo, seed_hi, stream_lo, stream_hi;
};

template <int ROUNDS = 10>
__device__ __forceinline__ uint4 philox_draw(const PhiloxKey k, const unsigned int tag, const unsigned int index)
{
    return philox4x32<ROUNDS>(make_uint4(index, tag, k.stream_lo, k.stream_hi), k.seed_lo, k.seed_hi);
}
