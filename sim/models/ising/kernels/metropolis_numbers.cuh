// The Metropolis numbers of one site (sim/gpu/philox.py: metropolis_uniforms): the high 16 bits come from slot
// j = (site % 16) / 2 of the call (site / 16, TAG_METROPOLIS + colour), half j % 2 of word j / 2; the low 16 bits
// from the same slot of the TAG_METROPOLIS_LOW call, drawn only when the high halves of number and threshold tie.
#pragma once
#include "philox.cuh"

// The high 16 bits of a site's number, from the call for its group of 16.
__device__ __forceinline__ unsigned int number_high(const uint4 group_call, const int site)
{
    const int slot = (site & 15) >> 1;
    return (philox_word(group_call, slot >> 1) >> (16 * (slot & 1))) & 0xFFFFu;
}

__device__ __forceinline__ unsigned int number_low(const PhiloxKey key, const int colour, const int site)
{
    return number_high(philox_draw(key, TAG_METROPOLIS_LOW + colour, (unsigned int)(site >> 4)), site);
}

// r < threshold, with r = high:low and the low half drawn only on a tie.
__device__ __forceinline__ bool number_below(const unsigned int high, const unsigned int threshold,
                                             const PhiloxKey key, const int colour, const int site)
{
    const unsigned int t = threshold >> 16;
    if (high != t) return high < t;
    return number_low(key, colour, site) < (threshold & 0xFFFFu);
}
