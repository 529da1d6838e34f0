// Checkerboard Metropolis for the rewired Ising model (thesis 003, 7.1.3): one launch per half-sweep.
//
// Spins are int8 +-1 in C order, updated in place. Rewiring never joins two sites of one colour, so every site
// of the active colour can be updated at once: its neighbours all have the other colour and stay fixed.
//
// metropolis_chunks: a thread owns CHUNK = 4*WORDS consecutive sites of one row and updates the active half of
// them. Unmodified sites count their unlike neighbours with byte-wise SIMD on 32-bit words: bit 1 of an int8
// spin is 0 for +1 (0x01) and 1 for -1 (0xFF), so (a ^ b) & 0x02 marks an unlike pair in every byte at once,
// and the 4 (2D) or 6 (3D) words add up without carries. Left and right neighbours come from funnel shifts of
// the row's words. A site touched by rewiring takes its field from its explicit adjacency instead (rewired.cuh);
// flipping a byte between 0x01 and 0xFF is xor 0xFE.
//
// metropolis_sites: one thread per site, for L not divisible by 4; the same arithmetic, site by site.
//
// Both draw one 32-bit Philox number per site per half-sweep: word (site % 8) / 2 of the call for
// (site / 8, colour, stream) -- the two colours of 8 consecutive sites of a row use the 4 words between them.
// A site with k = s*h > 0 flips when r < thresholds[k] (floor(exp(-2k/T) * 2^32)); k <= 0 always flips.
#include "philox.cuh"
#include "rewired.cuh"

template <int WORDS>
__device__ __forceinline__ void load_words(const signed char* p, unsigned int (&w)[WORDS])
{
    if constexpr (WORDS == 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(p);
        w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
    } else {
#pragma unroll
        for (int i = 0; i < WORDS; ++i) w[i] = reinterpret_cast<const unsigned int*>(p)[i];
    }
}

template <int WORDS>
__device__ __forceinline__ void store_words(void* p, const unsigned int (&w)[WORDS])
{
    if constexpr (WORDS == 4) {
        *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
#pragma unroll
        for (int i = 0; i < WORDS; ++i) reinterpret_cast<unsigned int*>(p)[i] = w[i];
    }
}

__device__ __forceinline__ unsigned int regular_threshold(const int k, const unsigned int thr2,
                                                          const unsigned int thr4, const unsigned int thr6)
{
    return k == 2 ? thr2 : (k == 4 ? thr4 : thr6);
}

template <int DIM, int WORDS>
__global__ void metropolis_chunks(
    signed char* __restrict__ spins, unsigned char* __restrict__ flipped, const int L, const int colour,
    const int write_mask, const unsigned int seed_lo, const unsigned int seed_hi, const unsigned int stream_lo,
    const unsigned int stream_hi, const unsigned int* __restrict__ thresholds, const unsigned int thr2,
    const unsigned int thr4, const unsigned int thr6, const int has_modified,
    const unsigned int* __restrict__ mod_bits, const unsigned int* __restrict__ mod_rank,
    const int* __restrict__ mod_offsets, const int* __restrict__ mod_neighbours)
{
    constexpr int CHUNK = 4 * WORDS;
    constexpr unsigned int BIT1 = 0x02020202u;
    const int cx = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = DIM == 3 ? (int)blockIdx.z : 0;
    const int x0 = cx * CHUNK;
    if (x0 >= L || y >= L) return;

    const Rewired g = {has_modified, mod_bits, mod_rank, mod_offsets, mod_neighbours, nullptr};
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    const int row = (z * L + y) * L;
    const int site0 = row + x0;

    // Random words first: they depend on nothing loaded, so the loads below overlap with them.
    constexpr int GROUPS = CHUNK >= 8 ? CHUNK / 8 : 1;
    uint4 rnd[GROUPS];
#pragma unroll
    for (int i = 0; i < GROUPS; ++i)
        rnd[i] = philox_draw(key, TAG_METROPOLIS + colour, (unsigned int)((site0 >> 3) + i));

    unsigned int c[WORDS], up[WORDS], down[WORDS], back[WORDS], front[WORDS];
    load_words<WORDS>(spins + site0, c);
    load_words<WORDS>(spins + (z * L + (y == 0 ? L - 1 : y - 1)) * L + x0, up);
    load_words<WORDS>(spins + (z * L + (y == L - 1 ? 0 : y + 1)) * L + x0, down);
    if constexpr (DIM == 3) {
        load_words<WORDS>(spins + ((z == 0 ? L - 1 : z - 1) * L + y) * L + x0, back);
        load_words<WORDS>(spins + ((z == L - 1 ? 0 : z + 1) * L + y) * L + x0, front);
    }
    const unsigned int left_byte = (unsigned char)spins[row + (x0 == 0 ? L - 1 : x0 - 1)];
    const unsigned int right_byte = (unsigned char)spins[row + (x0 + CHUNK == L ? 0 : x0 + CHUNK)];
    unsigned int mbits = 0;
    if (has_modified) mbits = (mod_bits[site0 >> 5] >> (site0 & 31)) & ((1u << CHUNK) - 1u);

    const int parity = (colour ^ y ^ z) & 1;  // active bytes of every word: parity and parity + 2
    unsigned int flips[WORDS];
    unsigned int any_flip = 0;
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const unsigned int prev = w == 0 ? left_byte << 24 : c[w == 0 ? 0 : w - 1];
        const unsigned int next = w == WORDS - 1 ? right_byte : c[w == WORDS - 1 ? w : w + 1];
        const unsigned int left = __funnelshift_l(prev, c[w], 8);
        const unsigned int right = __funnelshift_r(c[w], next, 8);
        unsigned int unlike2 = ((c[w] ^ up[w]) & BIT1) + ((c[w] ^ down[w]) & BIT1) + ((c[w] ^ left) & BIT1) +
                               ((c[w] ^ right) & BIT1);
        if constexpr (DIM == 3) unlike2 += ((c[w] ^ back[w]) & BIT1) + ((c[w] ^ front[w]) & BIT1);

        const int site_w = site0 + 4 * w;
        const uint4 r = rnd[CHUNK >= 8 ? w >> 1 : 0];
        const bool upper = (site_w >> 2) & 1;  // which half of its group of 8 this word is
        unsigned int f = 0;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int b = parity + 2 * j;
            const unsigned int number = upper ? (j ? r.w : r.z) : (j ? r.y : r.x);
            int k;
            unsigned int threshold;
            if (!((mbits >> (4 * w + b)) & 1u)) {
                const int unlike = (unlike2 >> (8 * b + 1)) & 0xF;
                k = 2 * DIM - 2 * unlike;
                threshold = regular_threshold(k, thr2, thr4, thr6);
            } else {
                const int s = (signed char)(c[w] >> (8 * b));
                k = s * modified_field(g, spins, site_w + b);
                threshold = k > 0 ? thresholds[k] : 0u;
            }
            if (k <= 0 || number < threshold) f |= 0xFEu << (8 * b);
        }
        flips[w] = f;
        any_flip |= f;
    }

    if (any_flip) {
        unsigned int out[WORDS];
#pragma unroll
        for (int w = 0; w < WORDS; ++w) out[w] = c[w] ^ flips[w];
        store_words<WORDS>(spins + site0, out);
    }
    if (write_mask) {
        unsigned int m[WORDS];
#pragma unroll
        for (int w = 0; w < WORDS; ++w) m[w] = (flips[w] >> 1) & 0x01010101u;
        if (colour == 1) {
            unsigned int before[WORDS];
            load_words<WORDS>(reinterpret_cast<const signed char*>(flipped) + site0, before);
#pragma unroll
            for (int w = 0; w < WORDS; ++w) m[w] |= before[w];
        }
        store_words<WORDS>(flipped + site0, m);
    }
}

template <int DIM>
__global__ void metropolis_sites(
    signed char* __restrict__ spins, unsigned char* __restrict__ flipped, const int L, const int colour,
    const int write_mask, const unsigned int seed_lo, const unsigned int seed_hi, const unsigned int stream_lo,
    const unsigned int stream_hi, const unsigned int* __restrict__ thresholds, const int has_modified,
    const unsigned int* __restrict__ mod_bits, const unsigned int* __restrict__ mod_rank,
    const int* __restrict__ mod_offsets, const int* __restrict__ mod_neighbours)
{
    const int n = DIM == 3 ? L * L * L : L * L;
    const int site = blockIdx.x * blockDim.x + threadIdx.x;
    if (site >= n) return;
    const int x = site % L, y = (site / L) % L, z = DIM == 3 ? site / (L * L) : 0;
    const bool active = ((x + y + z) & 1) == colour;
    if (!active) {
        if (write_mask && colour == 0) flipped[site] = 0;
        return;
    }
    const Rewired g = {has_modified, mod_bits, mod_rank, mod_offsets, mod_neighbours, nullptr};
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    const int s = spins[site];
    int h;
    if (is_modified(g, site)) {
        h = modified_field(g, spins, site);
    } else {
        const int row = site - x;
        h = spins[row + (x == 0 ? L - 1 : x - 1)] + spins[row + (x == L - 1 ? 0 : x + 1)] +
            spins[site + (y == 0 ? L - 1 : -1) * L] + spins[site + (y == L - 1 ? 1 - L : 1) * L];
        if (DIM == 3)
            h += spins[site + (z == 0 ? L - 1 : -1) * L * L] + spins[site + (z == L - 1 ? 1 - L : 1) * L * L];
    }
    const int k = s * h;
    const uint4 r = philox_draw(key, TAG_METROPOLIS + colour, (unsigned int)(site >> 3));
    const unsigned int number = philox_word(r, (site & 7) >> 1);
    const bool flip = k <= 0 || number < thresholds[k];
    if (flip) spins[site] = (signed char)(-s);
    if (write_mask) flipped[site] = colour == 0 ? (unsigned char)flip : (unsigned char)(flipped[site] | flip);
}
