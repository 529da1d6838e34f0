// Multi-spin-coded checkerboard Metropolis for the rewired Ising model: one bit per spin, 32 sites of one
// colour per 32-bit word, neighbour counts by bitwise adders. Same decisions as metropolis.cu, site for site.
//
// Packed layout (sim/gpu/multispin.py): a "row" is all sites with the same y (2D) or (z, y) (3D), r = z*L + y.
// Its sites of colour c are x = 2i + o with o = (c + y + z) % 2, i = 0 .. L/2 - 1, and bit i % 32 of word
// (c * rows + r) * (L / 64) + i / 32 holds site x (1 = spin -1). L must be a multiple of 64.
// Neighbours of an active site (colour c, row r, index i): the other colour's rows r +- e (y and z) at the same
// index i (the row parity flips with the row, and so does the colour, so the offset o is the same), and in the
// same row the indices i and i - 1 (o = 0) or i and i + 1 (o = 1): one word and a one-bit funnel shift.
//
// Random numbers (sim/gpu/philox.py: metropolis_uniforms): a word covers the 64 consecutive sites r*L + 64w ..
// +63, i.e. the 4 Philox groups g0 + q, g0 = (r*L + 64w) / 16. Site bit b sits at slot b % 8 of group b / 8, so
// call q gives bits 8q .. 8q+7: the low half of word m is bit 8q + 2m, the high half bit 8q + 2m + 1. The hot
// path compares these 16-bit highs with the thresholds' high halves and marks ties; a thread with a tie
// recomputes its masks from full 32-bit numbers (both calls), so the decision is exactly r < threshold.
//
// Modified sites (rewired.cuh's role, in packed terms): mod_words marks them in the same layout and their
// CSR rows are ordered by packed position (row = mod_rank[word] + popcount of the lower bits); their
// neighbours are given as packed bit positions. The thread owning the word decides them from that adjacency.
#include "philox.cuh"
#include "metropolis_numbers.cuh"

struct PackedRewired {
    int has_modified;
    const unsigned int* __restrict__ words;    // bit set: modified site (packed layout)
    const unsigned int* __restrict__ rank;     // modified sites before each word (packed order)
    const int* __restrict__ offsets;           // CSR over modified sites in packed order
    const int* __restrict__ neighbours;        // packed bit positions of the neighbours
};

__device__ __forceinline__ unsigned int packed_bit(const unsigned int* packed, const int pos)
{
    return (packed[pos >> 5] >> (pos & 31)) & 1u;
}

// Masks of the bits (sites) whose number is below each threshold: high halves only, plus "a tie was seen".
template <int DIM>
__device__ __forceinline__ bool below_high(const PhiloxKey key, const int colour, const unsigned int group0,
                                           const unsigned int t2, const unsigned int t4, const unsigned int t6,
                                           unsigned int& lt2, unsigned int& lt4, unsigned int& lt6)
{
    const unsigned int h2 = t2 >> 16, h4 = t4 >> 16, h6 = t6 >> 16;
    bool tie = false;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const uint4 call = philox_draw(key, TAG_METROPOLIS + colour, group0 + q);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const unsigned int v = m == 0 ? call.x : (m == 1 ? call.y : (m == 2 ? call.z : call.w));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const unsigned int number = h ? v >> 16 : v & 0xFFFFu;
                const unsigned int bit = 1u << (8 * q + 2 * m + h);
                if (number < h2) lt2 |= bit;
                if (number < h4) lt4 |= bit;
                if (DIM == 3 && number < h6) lt6 |= bit;
                tie |= number == h2 || number == h4 || (DIM == 3 && number == h6);
            }
        }
    }
    return tie;
}

// The same masks from full 32-bit numbers (high and low calls): the rare path after a tie.
template <int DIM>
__device__ void below_exact(const PhiloxKey key, const int colour, const unsigned int group0, const unsigned int t2,
                            const unsigned int t4, const unsigned int t6, unsigned int& lt2, unsigned int& lt4,
                            unsigned int& lt6)
{
    lt2 = lt4 = lt6 = 0;
    for (int q = 0; q < 4; ++q) {
        const uint4 high = philox_draw(key, TAG_METROPOLIS + colour, group0 + q);
        const uint4 low = philox_draw(key, TAG_METROPOLIS_LOW + colour, group0 + q);
        for (int m = 0; m < 4; ++m) {
            const unsigned int vh = philox_word(high, m), vl = philox_word(low, m);
            for (int h = 0; h < 2; ++h) {
                const unsigned int number = (((vh >> (16 * h)) & 0xFFFFu) << 16) | ((vl >> (16 * h)) & 0xFFFFu);
                const unsigned int bit = 1u << (8 * q + 2 * m + h);
                if (number < t2) lt2 |= bit;
                if (number < t4) lt4 |= bit;
                if (DIM == 3 && number < t6) lt6 |= bit;
            }
        }
    }
}

// What stays fixed from sweep to sweep (arrays and thresholds), in one device buffer, so that a launch passes
// six arguments: Python's launch cost per argument, not the GPU, limited the sweeps through the model API.
struct MultispinParams {
    unsigned int* flips;                        // flip words: the sweep's, or their union over a frame
    const unsigned int* thresholds;             // floor(exp(-2k/T) 2^32) for k = 0 .. max_k (modified sites)
    const unsigned int* mod_words;              // PackedRewired (sim/gpu/multispin.py)
    const unsigned int* mod_rank;
    const int* mod_offsets;
    const int* mod_neighbours;
    unsigned long long* totals;                 // per measured sweep: lattice bonds, spin sum, flips (int64)
    unsigned int t2, t4, t6;                    // thresholds of k = 2, 4, 6
    int has_modified;
    // Added to a launch's stream and totals slot. 0 for launches that pass the real ones; a frame replayed from
    // a CUDA graph (gpu/engine.py FrameReplay) passes 0 .. K-1 and keeps the frame's position here, set before
    // the frame by multispin_set_base and moved on after each replay by multispin_advance_base, so the same
    // captured launches serve every frame (a graph's arguments are fixed at capture).
    unsigned long long stream_base;
    int slot_base;
    int slab_total;        // a slab's whole lattice: the global length of the slow axis (below)
    // A slab of a lattice split along its slowest axis (y in 2D, z in 3D) over several devices
    // (sim/models/ising/gpu/slabs.py). All zero for a whole periodic lattice: then a launch covers every row.
    // With slab_extent > 0 the packed array holds slab_extent slow indices (the slab and its halos), local index j
    // being global index j + slab_offset (mod L): rows are numbered locally, while the colours' offsets, the
    // random numbers and the modified sites' numbers use global coordinates, so each site draws and decides as
    // on one device. The launch updates local slow indices first .. end - 1 (1 .. slab_extent - 2 at most: no
    // wrap is needed; deep halos are updated too, as their owner does, between two exchanges: their global index
    // wraps modulo slab_total), and a modified site's neighbour entry j < 0 is not a local bit position but entry
    // -1 - j of ``remote``:
    // that neighbour's bit, gathered from the device owning it before the half-sweep.
    const unsigned int* remote;
    int slab_extent, slab_offset;
    int first, end;
};

// flags: bit 0 the colour; bit 1 write the flip words; bit 2 OR them into the words already there (the union of
// a frame's sweeps, for the highlight); bit 3 measure this sweep into totals slot flags >> 4.
constexpr int MS_COLOUR = 1, MS_WRITE_FLIPS = 2, MS_UNION_FLIPS = 4, MS_MEASURE = 8, MS_SLOT_SHIFT = 4;

// Sum N values over the block's threads and add them to total[0 .. N-1]: warp shuffles, then one atomic per
// value per block. Every thread of the block must call it (blocks are whole warps: see gpu/engine.py).
template <int N>
__device__ __forceinline__ void block_sums_into(long long (&values)[N], unsigned long long* total)
{
    __shared__ long long partial[N][32];
#pragma unroll
    for (int k = 0; k < N; ++k)
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) values[k] += __shfl_down_sync(0xffffffffu, values[k], offset);
    const int thread = threadIdx.y * blockDim.x + threadIdx.x, warps = (blockDim.x * blockDim.y) >> 5;
    if ((thread & 31) == 0)
#pragma unroll
        for (int k = 0; k < N; ++k) partial[k][thread >> 5] = values[k];
    __syncthreads();
    if (thread < N) {
        long long sum = 0;
        for (int i = 0; i < warps; ++i) sum += partial[thread][i];
        if (sum) atomicAdd(total + thread, (unsigned long long)sum);
    }
}

// One half-sweep (one colour) of the packed lattice. With MS_MEASURE, the sweep's observables are reduced in the
// same pass: every lattice edge joins the two colours (L is even), so during the colour-1 pass, when the
// colour-0 words are final for this sweep, the threads see each edge exactly once: lattice bonds =
// dim N - 2 (unlike pairs); each colour-0 word is the "same" word of exactly one colour-1 thread, so that thread
// counts its down spins too. Flips are counted in both passes. The rewired edges' correction is a separate
// launch (multispin_measure_rewired) after the colour-1 pass.
template <int DIM>
__global__ void metropolis_multispin(unsigned int* __restrict__ packed, const MultispinParams* __restrict__ params,
                                     const int L, const int flags, const unsigned long long seed,
                                     const unsigned long long stream)
{
    const int colour = flags & MS_COLOUR;
    const int W = L >> 6;
    const bool slab = params->slab_extent > 0;
    const int extent = slab ? params->slab_extent : L, first = slab ? params->first : 0;
    const int end = slab ? params->end : L;
    const int w = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y + (DIM == 2 ? first : 0);
    const int z = DIM == 3 ? first + (int)blockIdx.z : 0;
    const bool measure = flags & MS_MEASURE;
    const bool active = w < W && y < (DIM == 2 ? end : L);
    long long unlike_pairs = 0, down_spins = 0, flipped = 0;
    if (active) {
        const int rows = DIM == 3 ? extent * L : extent;
        const int r = z * L + y;
        const int offset = slab ? params->slab_offset : 0;
        int slow = (DIM == 3 ? z : y) + offset;                  // the global slow index (a halo's wraps)
        if (slab && slow < 0) slow += params->slab_total;
        if (slab && slow >= params->slab_total) slow -= params->slab_total;
        const int global_r = DIM == 3 ? slow * L + y : slow;     // the row's number on the whole lattice
        const int o = (colour + y + z + offset) & 1;
        const int own = (colour * rows + r) * W + w;
        const unsigned int* other = packed + (1 - colour) * rows * W;

        const unsigned int s = packed[own];
        const unsigned int same = other[r * W + w];
        const unsigned int side_word = other[r * W + (o ? (w == W - 1 ? 0 : w + 1) : (w == 0 ? W - 1 : w - 1))];
        const unsigned int side = o ? __funnelshift_r(same, side_word, 1) : __funnelshift_l(side_word, same, 1);
        const bool wrap_y = DIM == 3 || !slab;                   // a slab's slow axis has halos instead
        const int y_up = y == 0 && wrap_y ? L - 1 : y - 1, y_down = y == L - 1 && wrap_y ? 0 : y + 1;
        const unsigned int up = other[(z * L + y_up) * W + w];
        const unsigned int down = other[(z * L + y_down) * W + w];
        unsigned int back = 0, front = 0;
        if (DIM == 3) {
            const int z_back = z == 0 && !slab ? L - 1 : z - 1, z_front = z == L - 1 && !slab ? 0 : z + 1;
            back = other[(z_back * L + y) * W + w];
            front = other[(z_front * L + y) * W + w];
        }
        const PackedRewired g = {params->has_modified, params->mod_words, params->mod_rank, params->mod_offsets,
                                 params->mod_neighbours};
        const unsigned int modified = g.has_modified ? g.words[own] : 0u;

        const unsigned long long sweep_stream = stream + params->stream_base;
        const PhiloxKey key = {(unsigned int)seed, (unsigned int)(seed >> 32), (unsigned int)sweep_stream,
                               (unsigned int)(sweep_stream >> 32)};
        const unsigned int t2 = params->t2, t4 = params->t4, t6 = params->t6;
        const unsigned int group0 = ((unsigned int)global_r * (unsigned int)L + 64u * (unsigned int)w) >> 4;
        unsigned int lt2 = 0, lt4 = 0, lt6 = 0;
        if (below_high<DIM>(key, colour, group0, t2, t4, t6, lt2, lt4, lt6))
            below_exact<DIM>(key, colour, group0, t2, t4, t6, lt2, lt4, lt6);

        // unlike-neighbour bits, counted by adders: u = unlike neighbours of each site
        const unsigned int a = s ^ same, b = s ^ side, c = s ^ up, d = s ^ down;
        unsigned int flip;
        if constexpr (DIM == 2) {
            const unsigned int ones = a ^ b ^ c ^ d;                          // u odd
            const unsigned int two_or_more = (a & b) | (c & d) | ((a ^ b) & (c ^ d));
            const unsigned int none = ~(a | b | c | d);
            // u >= 2: k <= 0, always; u = 1: k = 2; u = 0: k = 4
            flip = two_or_more | (ones & ~two_or_more & lt2) | (none & lt4);
        } else {
            const unsigned int e = s ^ back, f = s ^ front;
            const unsigned int s1 = a ^ b ^ c, c1 = (a & b) | (c & (a ^ b));  // a + b + c = s1 + 2 c1
            const unsigned int s2 = d ^ e ^ f, c2 = (d & e) | (f & (d ^ e));
            const unsigned int ones = s1 ^ s2, c3 = s1 & s2;                  // u = ones + 2 (c1 + c2 + c3)
            const unsigned int any_two = c1 | c2 | c3;
            const unsigned int two_twos = (c1 & c2) | (c3 & (c1 ^ c2));
            const unsigned int one_two = (c1 ^ c2 ^ c3) & ~two_twos;
            // u >= 3: always; u = 2: k = 2; u = 1: k = 4; u = 0: k = 6
            flip = two_twos | (ones & any_two) | (~ones & one_two & lt2) | (ones & ~any_two & lt4) |
                   (~ones & ~any_two & lt6);
        }

        if (modified) {
            flip &= ~modified;
            const unsigned int first_row = g.rank[own];
            unsigned int todo = modified;
            while (todo) {
                const int bit = __ffs(todo) - 1;
                todo &= todo - 1;
                const int row = (int)first_row + __popc(modified & ((1u << bit) - 1u));
                int h = 0;
                for (int j = g.offsets[row]; j < g.offsets[row + 1]; ++j) {
                    const int at = g.neighbours[j];
                    h += 1 - 2 * (int)(at >= 0 ? packed_bit(packed, at) : params->remote[-1 - at] & 1u);
                }
                const int k = (1 - 2 * (int)((s >> bit) & 1u)) * h;
                const int site = global_r * L + 2 * (32 * w + bit) + o;
                if (k <= 0 || number_below(number_high(philox_draw(key, TAG_METROPOLIS + colour, (unsigned int)(site >> 4)),
                                                       site),
                                           params->thresholds[k], key, colour, site))
                    flip |= 1u << bit;
            }
        }
        if (flip) packed[own] = s ^ flip;
        if (flags & MS_WRITE_FLIPS) params->flips[own] = (flags & MS_UNION_FLIPS) ? params->flips[own] | flip : flip;
        if (measure) {
            flipped = __popc(flip);
            if (colour == 1) {
                const unsigned int now = s ^ flip;
                unlike_pairs = __popc(now ^ same) + __popc(now ^ side) + __popc(now ^ up) + __popc(now ^ down);
                if (DIM == 3) unlike_pairs += __popc(now ^ back) + __popc(now ^ front);
                down_spins = __popc(now) + __popc(same);
            }
        }
    }
    if (measure) {  // flags are the same for the whole grid: every thread of every block gets here
        unsigned long long* slot = params->totals + 3 * (params->slot_base + (flags >> MS_SLOT_SHIFT));
        if (colour == 1) {
            // a colour-1 word: 32 sites with 2 dim lattice edges each; with its "same" word, 64 spins
            const long long sites = active ? 32 : 0;
            long long sums[3] = {2 * DIM * sites - 2 * unlike_pairs, 2 * sites - 2 * down_spins, flipped};
            block_sums_into<3>(sums, slot);
        } else {
            long long sums[1] = {flipped};
            block_sums_into<1>(sums, slot + 2);
        }
    }
}

// The rewired edges' part of a measured sweep's bond sum: + s_u s_v over the new edges, - over the lattice edges
// rewiring removed (packed bit positions, one thread per rewired edge, after the sweep's colour-1 pass).
__global__ void multispin_measure_rewired(const unsigned int* __restrict__ packed, const int* __restrict__ ends,
                                          const int count, const MultispinParams* __restrict__ params,
                                          const int slot)
{
    long long bonds = 0;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < count; j += gridDim.x * blockDim.x) {
        const int* e = ends + 4 * j;  // removed u, removed v, new u, new v
        const int removed = 1 - 2 * (int)(packed_bit(packed, e[0]) ^ packed_bit(packed, e[1]));
        const int added = 1 - 2 * (int)(packed_bit(packed, e[2]) ^ packed_bit(packed, e[3]));
        bonds += added - removed;
    }
    long long sums[1] = {bonds};
    block_sums_into<1>(sums, params->totals + 3 * (params->slot_base + slot));
}

// A frame's position, for launches that take their stream and slot relative to it (see MultispinParams).
// One thread; launched in the stream between the sweeps, so the sweeps before it read the old values.
__global__ void multispin_set_base(MultispinParams* params, const unsigned long long stream_base,
                                   const int slot_base)
{
    params->stream_base = stream_base;
    params->slot_base = slot_base;
}

__global__ void multispin_advance_base(MultispinParams* params, const int sweeps)
{
    params->stream_base += (unsigned long long)sweeps;
    params->slot_base += sweeps;
}

// int8 spins (C order) -> packed words; one thread per 64 sites of a row (both colours' words).
template <int DIM>
__global__ void multispin_pack(const signed char* __restrict__ spins, unsigned int* __restrict__ packed, const int L)
{
    const int W = L >> 6;
    const int w = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = DIM == 3 ? (int)blockIdx.z : 0;
    if (w >= W || y >= L) return;
    const int rows = DIM == 3 ? L * L : L;
    const int r = z * L + y;
    const uint4* src = reinterpret_cast<const uint4*>(spins + (long long)r * L + 64 * w);
    unsigned int even = 0, odd = 0;  // x even: bit 2j, 2j+1 from bytes 0, 2 of word j; x odd: bytes 1, 3
#pragma unroll
    for (int v4 = 0; v4 < 4; ++v4) {
        const uint4 v = src[v4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int j = 4 * v4 + k;
            const unsigned int d = ((k == 0 ? v.x : (k == 1 ? v.y : (k == 2 ? v.z : v.w))) >> 1) & 0x01010101u;
            even |= ((d & 1u) | ((d >> 15) & 2u)) << (2 * j);
            odd |= (((d >> 8) & 1u) | ((d >> 23) & 2u)) << (2 * j);
        }
    }
    const int even_colour = (y + z) & 1;
    packed[(even_colour * rows + r) * W + w] = even;
    packed[((1 - even_colour) * rows + r) * W + w] = odd;
}

// 2 bits of a colour-split pair (bits 2j, 2j+1 of the even and odd words) -> 4 bytes of 0 / 1.
__device__ __forceinline__ unsigned int unpack_bytes(const unsigned int even, const unsigned int odd, const int j)
{
    return ((even >> (2 * j)) & 1u) | (((odd >> (2 * j)) & 1u) << 8) | (((even >> (2 * j + 1)) & 1u) << 16) |
           (((odd >> (2 * j + 1)) & 1u) << 24);
}

// packed words -> int8 spins, and (write_mask) the flip words of the last sweep -> the bool mask.
template <int DIM>
__global__ void multispin_unpack(signed char* __restrict__ spins, unsigned char* __restrict__ mask,
                                 const unsigned int* __restrict__ packed, const unsigned int* __restrict__ flips,
                                 const int L, const int write_mask)
{
    const int W = L >> 6;
    const int w = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = DIM == 3 ? (int)blockIdx.z : 0;
    if (w >= W || y >= L) return;
    const int rows = DIM == 3 ? L * L : L;
    const int r = z * L + y;
    const int even_colour = (y + z) & 1;
    const int even_at = (even_colour * rows + r) * W + w, odd_at = ((1 - even_colour) * rows + r) * W + w;
    const long long site0 = (long long)r * L + 64 * w;
    uint4* out = reinterpret_cast<uint4*>(spins + site0);
    const unsigned int even = packed[even_at], odd = packed[odd_at];
#pragma unroll
    for (int v4 = 0; v4 < 4; ++v4) {
        unsigned int b[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) b[k] = 0x01010101u ^ (unpack_bytes(even, odd, 4 * v4 + k) * 0xFEu);
        out[v4] = make_uint4(b[0], b[1], b[2], b[3]);
    }
    if (write_mask) {
        uint4* m = reinterpret_cast<uint4*>(mask + site0);
        const unsigned int fe = flips[even_at], fo = flips[odd_at];
#pragma unroll
        for (int v4 = 0; v4 < 4; ++v4)
            m[v4] = make_uint4(unpack_bytes(fe, fo, 4 * v4), unpack_bytes(fe, fo, 4 * v4 + 1),
                               unpack_bytes(fe, fo, 4 * v4 + 2), unpack_bytes(fe, fo, 4 * v4 + 3));
    }
}
