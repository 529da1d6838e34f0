// Metropolis decisions from as few random bits as possible, decided exactly (an exact lazy comparison).
//
// What is decided. An active site with k = s*h > 0 flips with probability exp(-2k/T). The host tabulates
// P_k = floor(exp(-2k/T) * 2^64) (sim/gpu/philox.py: threshold64; the double exp(-2k/T) times 2^64, floored,
// which is the double itself whenever it is >= 2^-11 and within 2^-64 of it otherwise). Each site of a
// half-sweep owns a 64-bit uniform number R, and the site flips exactly when R < P_k: probability P_k / 2^64.
// k <= 0 flips without any random bits.
//
// How little is drawn. R is never drawn whole: its top 8 bits are compared with the top 8 bits of P_k; when
// they differ they decide (R < P_k iff top8(R) < top8(P_k)), and only when they are equal (probability 2^-8)
// are the low 56 bits drawn and compared with the low 56 bits of P_k. The result is that of the full 64-bit
// comparison, bit for bit (R == P_k rejects, as R < P_k is false); the NumPy twin draws all 64 bits of every
// site and compares them directly, and the tests check the two agree site by site.
//
// Where the bits come from (keyed by global site and sweep only, so independent of the launch geometry, the
// thread's chunk or a slab's first row): site s (C order, L even) of colour c has the colour index q = s / 2
// (s and s + 1 share a row and differ in colour). Its top 8 bits are bit planes of the Philox4x32-10 call
// (index q / 16, tag TAG_METROPOLIS + c): bit 7 - j of the byte (j = 0 the most significant) is bit
// (q % 16) + 16 (j % 2) of word j / 2, so one call holds the top bytes of 16 sites of a colour (32 consecutive
// sites of a row), and a multi-spin word of 32 sites takes its 8 bit planes from two calls. Its low 56 bits are
// word x (bits 55..24) and the top 24 bits of word y (bits 23..0) of the call (index q, tag
// TAG_METROPOLIS_LOW + c), drawn only on a tie. Twin: sim/gpu/philox.py metropolis_numbers.
#pragma once
#include "philox.cuh"

// Call index of the top bytes of site `site`, and its slot (0..15) in that call.
__device__ __forceinline__ unsigned int top_call_index(const unsigned int site) { return site >> 5; }
__device__ __forceinline__ int top_slot(const unsigned int site) { return (int)((site >> 1) & 15u); }

// The top byte of the site in slot `slot` of a top-bytes call.
__device__ __forceinline__ unsigned int call_top_byte(const uint4 call, const int slot)
{
    unsigned int byte = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) byte = (byte << 1) | ((philox_word(call, j >> 1) >> (slot + 16 * (j & 1))) & 1u);
    return byte;
}

// The top byte of site `bit` of 32 sites given as bit planes (bit i of planes[j]: bit 7 - j of site i's byte).
__device__ __forceinline__ unsigned int planes_top_byte(const unsigned int (&planes)[8], const int bit)
{
    unsigned int byte = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) byte = (byte << 1) | ((planes[j] >> bit) & 1u);
    return byte;
}

// The low 56 bits of the number of the site with colour index q against the low 56 bits of the threshold: the
// rare path after a tie.
__device__ bool low_bits_below(const PhiloxKey key, const int colour, const unsigned int q,
                               const unsigned long long threshold)
{
    const uint4 tail = philox_draw(key, TAG_METROPOLIS_LOW + colour, q);
    const unsigned long long low = ((unsigned long long)tail.x << 24) | (tail.y >> 8);
    return low < (threshold & 0x00FFFFFFFFFFFFFFull);
}

// R < threshold for the site with colour index q and top byte `top`: decided by the top bytes unless they tie.
__device__ __forceinline__ bool number_below(const unsigned int top, const unsigned long long threshold,
                                             const PhiloxKey key, const int colour, const unsigned int q)
{
    const unsigned int t = (unsigned int)(threshold >> 56);
    if (top != t) return top < t;
    return low_bits_below(key, colour, q, threshold);
}

// The bit planes of the top bytes of the 32 sites q0 .. q0 + 31 (q0 a multiple of 32): sites 0..15 from the
// call for group0 = q0 / 16, sites 16..31 from the call for group0 + 1. (ROUNDS other than 10: timing only.)
template <int ROUNDS = 10>
__device__ __forceinline__ void word_planes(const PhiloxKey key, const int colour, const unsigned int group0,
                                            unsigned int (&planes)[8])
{
    const uint4 a = philox_draw<ROUNDS>(key, TAG_METROPOLIS + colour, group0);
    const uint4 b = philox_draw<ROUNDS>(key, TAG_METROPOLIS + colour, group0 + 1);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        const unsigned int wa = philox_word(a, m), wb = philox_word(b, m);
        planes[2 * m] = (wa & 0xFFFFu) | (wb << 16);
        planes[2 * m + 1] = (wa >> 16) | (wb & 0xFFFF0000u);
    }
}

// Bit-sliced comparison of up to 32 sites' top bytes (bit planes) with one threshold's top byte, given as
// masks (bit_masks[j] all ones when bit 7 - j of the byte is set): lt marks the sites whose byte is below it,
// eq those equal to it (the ties). Three logic operations per plane for 32 sites at once.
__device__ __forceinline__ void planes_below(const unsigned int (&planes)[8], const unsigned int (&bit_masks)[8],
                                             unsigned int& lt, unsigned int& eq)
{
    lt = 0u;
    eq = ~0u;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        lt |= eq & ~planes[j] & bit_masks[j];
        eq &= ~(planes[j] ^ bit_masks[j]);
    }
}

// The masks of a threshold's top byte for planes_below.
__device__ __forceinline__ void top_byte_masks(const unsigned long long threshold, unsigned int (&bit_masks)[8])
{
#pragma unroll
    for (int j = 0; j < 8; ++j) bit_masks[j] = 0u - (unsigned int)((threshold >> (63 - j)) & 1u);
}

// R < threshold for one site on its own (one-site-per-thread kernels): its top-bytes call, then number_below.
__device__ __forceinline__ bool site_number_below(const unsigned long long threshold, const PhiloxKey key,
                                                  const int colour, const unsigned int site)
{
    const uint4 call = philox_draw(key, TAG_METROPOLIS + colour, top_call_index(site));
    return number_below(call_top_byte(call, top_slot(site)), threshold, key, colour, site >> 1);
}

// The tied sites (bits of `ties`, colour indices q0 + bit) whose low 56 bits are below those of their
// threshold: full[c] for the sites in need[c] (the first class that has the site). One call per tied site.
template <int CLASSES>
__device__ __forceinline__ unsigned int tied_sites_below(unsigned int ties, const unsigned int (&need)[CLASSES],
                                                         const unsigned long long (&full)[CLASSES],
                                                         const PhiloxKey key, const int colour,
                                                         const unsigned int q0)
{
    unsigned int below = 0u;
    while (ties) {
        const int bit = __ffs(ties) - 1;
        ties &= ties - 1;
        unsigned long long threshold = full[CLASSES - 1];
#pragma unroll
        for (int c = CLASSES - 2; c >= 0; --c)
            if ((need[c] >> bit) & 1u) threshold = full[c];
        if (low_bits_below(key, colour, q0 + (unsigned int)bit, threshold)) below |= 1u << bit;
    }
    return below;
}
