// Checkerboard Metropolis for the rewired Ising model (thesis 003, 7.1.3): one launch per half-sweep.
//
// Spins are int8 +-1 in C order, updated in place. Rewiring never joins two sites of one colour, so every site
// of the active colour can be updated at once: its neighbours all have the other colour and stay fixed.
//
// metropolis_chunks: a thread owns CHUNK = 4*WORDS consecutive sites of one row and updates the active half of
// them. Unmodified sites count their unlike neighbours with byte-wise SIMD on 32-bit words: bit 1 of an int8
// spin is 0 for +1 (0x01) and 1 for -1 (0xFF), so (a ^ b) & 0x02 marks an unlike pair in every byte at once,
// and the 4 (2D) or 6 (3D) words add up without carries. Left and right neighbours come from funnel shifts of
// the row's words; flipping a byte between 0x01 and 0xFF is xor 0xFE. Sites touched by rewiring (rewired.cuh)
// are handled off this path: INLINE_MODIFIED loops over the few in the chunk (small p), otherwise they are
// left alone and metropolis_modified updates them from per-colour lists (thesis 7.1.2), one thread each.
// metropolis_sites: one thread per site, for L not divisible by 4; the same arithmetic, site by site.
//
// Random numbers (metropolis_numbers.cuh): an active site with k = s*h > 0 flips when its 64-bit number R is
// below P_k = floor(exp(-2k/T) 2^64) (thresholds[k]; thr2, thr4, thr6 for the lattice's k); k <= 0 always
// flips. The top 8 bits of R decide unless they tie with P_k's; the 8 active sites of a 16-site chunk (colour
// index q = site / 2, 8 consecutive q) take their top bytes from one Philox call as 8 bit planes, compared
// for all 8 at once; a tie (probability 2^-8) draws that site's low 56 bits. Exactly R < P_k, site by site.
#include "philox.cuh"
#include "rewired.cuh"
#include "metropolis_numbers.cuh"

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

__device__ __forceinline__ bool modified_site_flips(const Rewired& g, const signed char* spins, const int site,
                                                    const unsigned int top, const unsigned long long* thresholds,
                                                    const PhiloxKey key, const int colour)
{
    const int k = spins[site] * modified_field(g, spins, site);
    return k <= 0 || number_below(top, thresholds[k], key, colour, (unsigned int)site >> 1);
}

// 4 bits -> 4 bytes of 0x00 / 0xFF.
__device__ __forceinline__ unsigned int spread_bits(const unsigned int four)
{
    return ((four * 0x00204081u) & 0x01010101u) * 0xFFu;
}

template <int DIM, int WORDS, bool INLINE_MODIFIED>
__global__ void metropolis_chunks(
    signed char* __restrict__ spins, unsigned char* __restrict__ flipped, const int L, const int colour,
    const int write_mask, const unsigned int seed_lo, const unsigned int seed_hi, const unsigned int stream_lo,
    const unsigned int stream_hi, const unsigned long long* __restrict__ thresholds, const unsigned long long thr2,
    const unsigned long long thr4, const unsigned long long thr6, const int has_modified,
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

    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    const int row = (z * L + y) * L;
    const int site0 = row + x0;
    // One call holds the top bytes of the chunk's active sites: CHUNK / 2 consecutive slots from slot0.
    const uint4 call = philox_draw(key, TAG_METROPOLIS + colour, top_call_index((unsigned int)site0));
    constexpr int ACTIVE = CHUNK / 2;
    const int slot0 = top_slot((unsigned int)site0);

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
    unsigned int modified = 0;
    if (has_modified) modified = (mod_bits[site0 >> 5] >> (site0 & 31)) & ((1u << CHUNK) - 1u);

    // Active bytes are parity and parity + 2 of every word; shifting by 8*parity puts them at bytes 0 and 2.
    const int parity = (colour ^ y ^ z) & 1;
    const int shift = 8 * parity;
    // Active site m (0 .. ACTIVE-1) is byte parity + 2m of the chunk: byte 2 (m % 2) of word m / 2 after the shift.
    unsigned int planes[8], masks[8], lt[3] = {0u, 0u, 0u}, eq[3] = {0u, 0u, 0u};
#pragma unroll
    for (int j = 0; j < 8; ++j)
        planes[j] = (philox_word(call, j >> 1) >> (slot0 + 16 * (j & 1))) & ((1u << ACTIVE) - 1u);
    const unsigned long long full[3] = {thr2, thr4, thr6};
#pragma unroll
    for (int t = 0; t < (DIM == 3 ? 3 : 2); ++t) {
        top_byte_masks(full[t], masks);
        planes_below(planes, masks, lt[t], eq[t]);
    }
    unsigned int unlike[WORDS];  // 2 * unlike neighbours in bytes 0 and 2 (after the parity shift)
    unsigned int flips[WORDS];
    unsigned int ties = 0;       // bit m: active site m's top byte equals its threshold's
#pragma unroll
    for (int w = 0; w < WORDS; ++w) {
        const unsigned int prev = w == 0 ? left_byte << 24 : c[w == 0 ? 0 : w - 1];
        const unsigned int next = w == WORDS - 1 ? right_byte : c[w == WORDS - 1 ? w : w + 1];
        const unsigned int left = __funnelshift_l(prev, c[w], 8);
        const unsigned int right = __funnelshift_r(c[w], next, 8);
        unsigned int unlike2 = ((c[w] ^ up[w]) & BIT1) + ((c[w] ^ down[w]) & BIT1) + ((c[w] ^ left) & BIT1) +
                               ((c[w] ^ right) & BIT1);
        if constexpr (DIM == 3) unlike2 += ((c[w] ^ back[w]) & BIT1) + ((c[w] ^ front[w]) & BIT1);
        unlike[w] = unlike2 >> shift;
        unsigned int f = 0;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int m = 2 * w + j;
            const int k = 2 * DIM - (int)((unlike[w] >> (16 * j)) & 0xFFu);  // like - unlike neighbours
            // the masks of k's threshold (constant indices: the arrays stay in registers)
            const unsigned int lt_k = k <= 2 ? lt[0] : (k == 4 ? lt[1] : lt[2]);
            const unsigned int eq_k = k <= 2 ? eq[0] : (k == 4 ? eq[1] : eq[2]);
            if (k <= 0 || ((lt_k >> m) & 1u)) f |= 0xFEu << (16 * j);
            if (k > 0 && ((eq_k >> m) & 1u)) ties |= 1u << m;
        }
        flips[w] = f << shift;
    }
    if (ties) {  // probability ~ 2^-8 per site: decide those on their low 56 bits
#pragma unroll
        for (int w = 0; w < WORDS; ++w) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int m = 2 * w + j;
                if (!((ties >> m) & 1u)) continue;
                const int k = 2 * DIM - (int)((unlike[w] >> (16 * j)) & 0xFFu);
                const unsigned long long threshold = k == 2 ? thr2 : (k == 4 ? thr4 : thr6);
                if (low_bits_below(key, colour, (unsigned int)(site0 >> 1) + m, threshold))
                    flips[w] |= 0xFEu << (shift + 16 * j);
            }
        }
    }

    const unsigned int mine = modified & ((CHUNK == 4 ? 0x5u : 0x5555u) << parity);
    if (mine) {
        if constexpr (INLINE_MODIFIED) {
            const Rewired g = {has_modified, mod_bits, mod_rank, mod_offsets, mod_neighbours, nullptr};
            unsigned int todo = mine;
            while (todo) {
                const int pos = __ffs(todo) - 1;
                todo &= todo - 1;
                const int site = site0 + pos;
                const bool accept = modified_site_flips(g, spins, site, call_top_byte(call, top_slot(site)),
                                                        thresholds, key, colour);
#pragma unroll
                for (int w = 0; w < WORDS; ++w) {
                    if (w == pos >> 2) {
                        const unsigned int byte = 0xFFu << (8 * (pos & 3));
                        flips[w] = (flips[w] & ~byte) | (accept ? 0xFEu << (8 * (pos & 3)) : 0u);
                    }
                }
            }
        } else {
#pragma unroll
            for (int w = 0; w < WORDS; ++w) flips[w] &= ~spread_bits((mine >> (4 * w)) & 0xFu);
        }
    }

    unsigned int any_flip = 0;
#pragma unroll
    for (int w = 0; w < WORDS; ++w) any_flip |= flips[w];
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

// The modified sites of one colour, one thread each, from that colour's CSR lists (run after metropolis_chunks
// without INLINE_MODIFIED, which leaves these sites alone).
template <int UNUSED>
__global__ void metropolis_modified(
    signed char* __restrict__ spins, unsigned char* __restrict__ flipped, const int colour, const int write_mask,
    const unsigned int seed_lo, const unsigned int seed_hi, const unsigned int stream_lo,
    const unsigned int stream_hi, const unsigned long long* __restrict__ thresholds, const int* __restrict__ sites,
    const int* __restrict__ offsets, const int* __restrict__ neighbours, const int count)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    const int site = sites[i];
    const int s = spins[site];
    int h = 0;
    for (int j = offsets[i]; j < offsets[i + 1]; ++j) h += spins[neighbours[j]];
    const int k = s * h;
    const bool flip = k <= 0 || site_number_below(thresholds[k], key, colour, (unsigned int)site);
    if (flip) spins[site] = (signed char)(-s);
    if (write_mask) flipped[site] = colour == 0 ? (unsigned char)flip : (unsigned char)(flipped[site] | flip);
}

template <int DIM>
__global__ void metropolis_sites(
    signed char* __restrict__ spins, unsigned char* __restrict__ flipped, const int L, const int colour,
    const int write_mask, const unsigned int seed_lo, const unsigned int seed_hi, const unsigned int stream_lo,
    const unsigned int stream_hi, const unsigned long long* __restrict__ thresholds, const int has_modified,
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
    const bool flip = k <= 0 || site_number_below(thresholds[k], key, colour, (unsigned int)site);
    if (flip) spins[site] = (signed char)(-s);
    if (write_mask) flipped[site] = colour == 0 ? (unsigned char)flip : (unsigned char)(flipped[site] | flip);
}
