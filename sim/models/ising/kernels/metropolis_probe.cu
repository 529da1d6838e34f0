// The Metropolis decision rule of metropolis_numbers.cuh exposed as kernels, for the tests that force ties and
// check the lazy decisions against the full 64-bit comparison of the NumPy twin (sim/gpu/philox.py).
//
// metropolis_site_probe: out[i] = (R < thresholds[i]) for C-order site sites[i], one site per thread, as
//   metropolis_sites and metropolis_modified decide it (site_number_below).
// metropolis_word_probe: out[w] = the 32 decisions (bit i: site 2 (32 w + i) + colour parity) of the sites with
//   colour indices 32w .. 32w + 31 against thresholds[w], as metropolis_multispin decides a word: bit planes,
//   the bit-sliced comparison of the top bytes, then the ties on their low 56 bits (tied_sites_below).
#include "philox.cuh"
#include "metropolis_numbers.cuh"

template <int UNUSED>
__global__ void metropolis_site_probe(unsigned char* __restrict__ out, const int* __restrict__ sites,
                                      const unsigned long long* __restrict__ thresholds, const int n,
                                      const int colour, const unsigned int seed_lo, const unsigned int seed_hi,
                                      const unsigned int stream_lo, const unsigned int stream_hi)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    out[i] = site_number_below(thresholds[i], key, colour, (unsigned int)sites[i]) ? 1 : 0;
}

template <int UNUSED>
__global__ void metropolis_word_probe(unsigned int* __restrict__ out, const unsigned long long* __restrict__ thresholds,
                                      const int n, const int colour, const unsigned int seed_lo,
                                      const unsigned int seed_hi, const unsigned int stream_lo,
                                      const unsigned int stream_hi)
{
    const int w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= n) return;
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    const unsigned int q0 = 32u * (unsigned int)w;
    unsigned int planes[8], masks[8], lt, eq;
    word_planes(key, colour, q0 >> 4, planes);
    top_byte_masks(thresholds[w], masks);
    planes_below(planes, masks, lt, eq);
    const unsigned int need[1] = {~0u};
    const unsigned long long full[1] = {thresholds[w]};
    out[w] = lt | tied_sites_below<1>(eq, need, full, key, colour, q0);
}
