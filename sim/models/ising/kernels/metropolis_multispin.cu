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
// Random numbers (metropolis_numbers.cuh): a word's 32 sites have the colour indices q0 .. q0 + 31, q0 =
// (r*L + 64w) / 2 with r the row's global number (a slab's rows are local: see slab_offset), and take the top bytes of their 64-bit numbers as 8 bit planes from the two Philox calls
// q0 / 16 and q0 / 16 + 1 (low and high 16 bits of each plane). The planes are compared with the top bytes of
// the thresholds of k = 2, 4 (, 6) for all 32 sites at once (bit-sliced: 3 logic operations per plane and
// threshold); sites whose byte ties their threshold's (probability 2^-8 each) draw their low 56 bits, one call
// each. The decision is exactly R < P_k for every site's 64-bit R, as the NumPy twin computes it.
//
// Modified sites (rewired.cuh's role, in packed terms): mod_words marks them in the same layout and their
// CSR rows are ordered by packed position (row = mod_rank[word] + popcount of the lower bits), so a word's
// modified sites have consecutive rows; their neighbours are given as packed bit positions. Two ways, the same
// decisions: when they are few, the thread owning the word decides them one after the other from that adjacency
// (inline); when they are many (modified_apart), multispin_decide_modified decides them first, one thread per
// site, into a bit per row (mod_decided), and the packed pass only moves the word's run of row bits onto the
// word's modified bits.
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

// The low popcount(mask) bits of `bits`, in order, moved to the positions of mask's set bits (a software PDEP):
// a word's run of modified-site decisions onto the word's modified bits.
__device__ __forceinline__ unsigned int deposit_bits(unsigned int bits, unsigned int mask)
{
    unsigned int out = 0u;
    while (mask) {
        const unsigned int lowest = mask & (0u - mask);
        if (bits & 1u) out |= lowest;
        bits >>= 1;
        mask ^= lowest;
    }
    return out;
}

// What stays fixed from sweep to sweep (arrays and thresholds), in one device buffer, so that a launch passes
// six arguments: Python's launch cost per argument, not the GPU, limited the sweeps through the model API.
struct MultispinParams {
    unsigned int* flips;                        // flip words: the sweep's, or their union over a frame
    const unsigned long long* thresholds;       // floor(exp(-2k/T) 2^64) for k = 0 .. max_k (modified sites)
    const unsigned int* mod_words;              // PackedRewired (sim/gpu/multispin.py)
    const unsigned int* mod_rank;
    const int* mod_offsets;
    const int* mod_neighbours;
    const int* mod_positions;                   // packed bit position of each modified site (CSR row)
    unsigned int* mod_decided;                  // bit per CSR row: flips (multispin_decide_modified)
    unsigned long long* totals;                 // per measured sweep: lattice bonds, spin sum, flips (int64)
    unsigned long long t2, t4, t6;              // thresholds of k = 2, 4, 6
    unsigned int top_masks[3][8];               // their top bytes as planes_below's masks (host: engine.py)
    int has_modified;
    int modified_apart;                         // modified sites decided by multispin_decide_modified
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
// ROUNDS: the Philox rounds of the bit-plane calls, 10 (the engine's); bench sim also times 7 (philox.cuh).
template <int DIM, int ROUNDS>
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
        const unsigned int q0 = ((unsigned int)global_r * (unsigned int)L + 64u * (unsigned int)w) >> 1;
        unsigned int planes[8];
        word_planes<ROUNDS>(key, colour, q0 >> 4, planes);
        unsigned int lt[3] = {0u, 0u, 0u}, eq[3] = {0u, 0u, 0u};
#pragma unroll
        for (int t = 0; t < (DIM == 3 ? 3 : 2); ++t) {
            const uint4* m4 = reinterpret_cast<const uint4*>(params->top_masks[t]);
            const uint4 lo = m4[0], hi = m4[1];
            const unsigned int masks[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            planes_below(planes, masks, lt[t], eq[t]);
        }

        // unlike-neighbour bits, counted by adders: u = unlike neighbours of each site
        const unsigned int a = s ^ same, b = s ^ side, c = s ^ up, d = s ^ down;
        unsigned int flip, need2, need4, need6 = 0u;  // need_k: the sites with that k > 0
        if constexpr (DIM == 2) {
            const unsigned int ones = a ^ b ^ c ^ d;                          // u odd
            const unsigned int two_or_more = (a & b) | (c & d) | ((a ^ b) & (c ^ d));
            // u >= 2: k <= 0, always; u = 1: k = 2; u = 0: k = 4
            need2 = ones & ~two_or_more;
            need4 = ~(a | b | c | d);
            flip = two_or_more | (need2 & lt[0]) | (need4 & lt[1]);
        } else {
            const unsigned int e = s ^ back, f = s ^ front;
            const unsigned int s1 = a ^ b ^ c, c1 = (a & b) | (c & (a ^ b));  // a + b + c = s1 + 2 c1
            const unsigned int s2 = d ^ e ^ f, c2 = (d & e) | (f & (d ^ e));
            const unsigned int ones = s1 ^ s2, c3 = s1 & s2;                  // u = ones + 2 (c1 + c2 + c3)
            const unsigned int any_two = c1 | c2 | c3;
            const unsigned int two_twos = (c1 & c2) | (c3 & (c1 ^ c2));
            const unsigned int one_two = (c1 ^ c2 ^ c3) & ~two_twos;
            // u >= 3: always; u = 2: k = 2; u = 1: k = 4; u = 0: k = 6
            need2 = ~ones & one_two;
            need4 = ones & ~any_two;
            need6 = ~ones & ~any_two;
            flip = two_twos | (ones & any_two) | (need2 & lt[0]) | (need4 & lt[1]) | (need6 & lt[2]);
        }
        // ties of the top bytes (~ 2^-8 per site): the low 56 bits decide, one call per tied site
        const unsigned int ties = ((need2 & eq[0]) | (need4 & eq[1]) | (need6 & eq[2])) & ~modified;
        if (ties) {
            const unsigned int need[3] = {need2, need4, need6};
            const unsigned long long full[3] = {params->t2, params->t4, params->t6};
            flip |= tied_sites_below<3>(ties, need, full, key, colour, q0);
        }

        if (modified && params->modified_apart) {
            // decided before this pass: the word's modified sites are the rows first_row .. in bit order
            const unsigned int first_row = g.rank[own];
            const unsigned int* decided = params->mod_decided + (first_row >> 5);
            flip = (flip & ~modified) | deposit_bits(__funnelshift_r(decided[0], decided[1], first_row & 31u),
                                                     modified);
        } else if (modified) {
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
                if (k <= 0 || number_below(planes_top_byte(planes, bit), params->thresholds[k], key, colour,
                                           q0 + (unsigned int)bit))
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

// The modified sites of one colour (CSR rows first_row .. first_row + count - 1), decided before that colour's
// packed pass, one thread per site: the same rule and the same random bits as the packed kernel's inline loop
// (site_number_below draws the site's top-bytes call; colour index q = position - colour * half). Their
// neighbours are all of the other colour, which this half-sweep does not change, and the packed pass has not yet
// changed their own spins. Each warp's 32 decisions (rows 32j .. 32j + 31) become word j of mod_decided by a
// ballot: no atomics. A word shared with the other colour's rows is written by both colours' launches, each
// read by its own packed pass in between.
// On a slab (slab_extent > 0) the CSR rows are the slab's own modified sites, mod_decided is the slab's, a
// neighbour entry j < 0 reads entry -1 - j of ``remote`` (as in the packed pass), and the colour index is made
// global: half / slab_extent colour indices per slow index, the local slow index moved by slab_offset.
__global__ void multispin_decide_modified(const unsigned int* __restrict__ packed,
                                          const MultispinParams* __restrict__ params, const int first_row,
                                          const int count, const int colour, const unsigned int half,
                                          const unsigned long long seed, const unsigned long long stream)
{
    const int row = (first_row & ~31) + (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int end = first_row + count;
    bool flip = false;
    if (row >= first_row && row < end) {
        const unsigned int position = (unsigned int)params->mod_positions[row];
        const int* __restrict__ neighbours = params->mod_neighbours;
        int h = 0;
        for (int j = params->mod_offsets[row]; j < params->mod_offsets[row + 1]; ++j) {
            const int at = neighbours[j];
            h += 1 - 2 * (int)(at >= 0 ? packed_bit(packed, at) : params->remote[-1 - at] & 1u);
        }
        const int k = (1 - 2 * (int)packed_bit(packed, (int)position)) * h;
        if (k <= 0) {
            flip = true;
        } else {
            const unsigned long long sweep_stream = stream + params->stream_base;
            const PhiloxKey key = {(unsigned int)seed, (unsigned int)(seed >> 32), (unsigned int)sweep_stream,
                                   (unsigned int)(sweep_stream >> 32)};
            unsigned int q = position - (unsigned int)colour * half;
            if (params->slab_extent > 0) {
                const unsigned int per_slow = half / (unsigned int)params->slab_extent;
                int slow = (int)(q / per_slow) + params->slab_offset;
                if (slow < 0) slow += params->slab_total;
                if (slow >= params->slab_total) slow -= params->slab_total;
                q = (unsigned int)slow * per_slow + q % per_slow;
            }
            flip = site_number_below(params->thresholds[k], key, colour, 2u * q);
        }
    }
    const unsigned int votes = __ballot_sync(0xffffffffu, flip);
    if ((threadIdx.x & 31) == 0 && row < end) params->mod_decided[row >> 5] = votes;
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
