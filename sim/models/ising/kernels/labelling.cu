// Connected-component labelling of the random bond graph of the rewired Ising model, and the cluster updates
// built on it (Wolff, Swendsen-Wang). Union-find with atomicMin hooking, in two levels as in Playne & Hawick,
// "A new algorithm for parallel connected-component labelling on GPUs" (IEEE TPDS 2018), after Komura & Okabe's
// label-equivalence Swendsen-Wang (Comput. Phys. Commun. 2012); x-runs from warp ballots as in the block-based
// union-find of Allegretti, Bolelli & Grana (IEEE TPDS 2020).
//
// Bonds: a graph edge (i, j) is active when s_i == s_j and its Philox number r < bond_threshold (a 64-bit
// threshold, 2^32 = always). Lattice edge (site, axis): in 2D word 2*(site % 2) + axis of the call
// (site / 2, TAG_BOND), so two x-neighbours share a call; in 3D word `axis` of (site, TAG_BOND). Rewired edge j:
// word 0 of (j, TAG_NEW_BOND). Each edge is drawn exactly once wherever it is examined, so no bond state is
// stored. Lattice edges removed by rewiring are skipped (rewired.cuh).
//
// 1. label_tiles: a block labels one tile of 32 x TY (x TZ) sites, one site per thread, one warp per tile row.
//    x-bonds come from a ballot over the row: a run of x-bonded sites is labelled by its first site without
//    any atomics. Vertical (y, z) bonds unite runs in a shared-memory union-find, one union per pair of
//    overlapping runs (the leftmost open vertical bond where they overlap). Every site then gets the global
//    index of the smallest site of its tile component.
// 2. label_merge: the lattice edges leaving a tile (and the periodic wrap) and the rewired edges are united in
//    global memory; a face bond is skipped when the bond beside it joins the same two tile components.
// 3. label_compress: each site stores its root. wolff_flip / cluster_flip: each site finds its root (without
//    storing it: nothing reads the labels after a flip, and the store would be a third of the kernels' bytes);
//    Wolff flips the component of a seed site, Swendsen-Wang every component whose root draws an odd word
//    (TAG_CLUSTER_FLIP).
//
// Union-find with atomicMin hooking (Playne & Hawick): a root r has lab[r] == r, every other label points to a
// smaller site of the same component, and a union hooks the larger root under the smaller with atomicMin
// (if the target stopped being a root meanwhile, the loop goes on from whatever it pointed to). No thread
// shortens paths while unions run. Final labels are the smallest site of each component, whatever the schedule.
#include "philox.cuh"
#include "rewired.cuh"

#define FULL_WARP 0xFFFFFFFFu
#define TILE_X 32  // tiles are one warp wide

template <int DIM>
__device__ __forceinline__ uint4 bond_call(const PhiloxKey key, const int site)
{
    return philox_draw(key, TAG_BOND, (unsigned int)(DIM == 2 ? site >> 1 : site));
}

template <int DIM>
__device__ __forceinline__ unsigned int bond_word(const uint4 call, const int site, const int axis)
{
    return philox_word(call, DIM == 2 ? 2 * (site & 1) + axis : axis);
}

__device__ __forceinline__ bool bond_open(const unsigned int word, const unsigned long long bond_threshold)
{
    return (unsigned long long)word < bond_threshold;
}

// ---- union-find in shared memory (one tile) ------------------------------------------------------------------
__device__ __forceinline__ int find_local(const volatile int* lab, int x)
{
    int p;
    while ((p = lab[x]) != x) {
        SCHEDULE_POINT();
        x = p;
    }
    return x;
}

// The roots of a and b, both chains walked in the same loop (twice the loads in flight of two finds in a row).
__device__ __forceinline__ void find_both_local(const volatile int* lab, int& a, int& b)
{
    while (true) {
        const int pa = lab[a], pb = lab[b];
        if (pa == a && pb == b) return;
        SCHEDULE_POINT();
        a = pa;
        b = pb;
    }
}

__device__ __forceinline__ void unite_local(volatile int* lab, int a, int b)
{
    while (true) {
        find_both_local(lab, a, b);
        if (a == b) return;
        if (a > b) {
            const int t = a;
            a = b;
            b = t;
        }
        const int old = atomicMin((int*)&lab[b], a);  // hook the larger root under the smaller
        if (old == b) return;
        b = old;  // b had been hooked meanwhile: go on from where it pointed
    }
}

// ---- union-find in global memory (other blocks change labels meanwhile: loads bypass L1) ---------------------
__device__ __forceinline__ void find_both_global(const int* lab, int& a, int& b)
{
    while (true) {
        const int pa = __ldcg(lab + a), pb = __ldcg(lab + b);
        if (pa == a && pb == b) return;
        a = pa;
        b = pb;
    }
}

__device__ __forceinline__ void unite_global(int* lab, int a, int b)
{
    while (true) {
        find_both_global(lab, a, b);
        if (a == b) return;
        if (a > b) {
            const int t = a;
            a = b;
            b = t;
        }
        const int old = atomicMin(&lab[b], a);
        if (old == b) return;
        b = old;
    }
}

// After the merge no label changes any more: a plain walk to the root.
__device__ __forceinline__ int find_root(const int* lab, int x)
{
    int p;
    while ((p = lab[x]) != x) x = p;
    return x;
}

// First lane of the x-run holding `lane`, given the row's x-bond ballot (bit l: bond l -> l + 1 open).
__device__ __forceinline__ int run_start(const unsigned int xbonds, const int lane)
{
    const unsigned int starts = ~(xbonds << 1);  // lane l starts a run unless bond l-1 -> l is open
    return 31 - __clz(starts & (FULL_WARP >> (31 - lane)));
}

template <int DIM, int TY, int TZ>
__global__ void __launch_bounds__(TILE_X * TY * TZ) label_tiles(
    const signed char* __restrict__ spins, int* __restrict__ labels, const int L, const unsigned int seed_lo,
    const unsigned int seed_hi, const unsigned int stream_lo, const unsigned int stream_hi,
    const unsigned long long bond_threshold, const int has_modified, const unsigned int* __restrict__ mod_bits,
    const unsigned int* __restrict__ mod_rank, const unsigned char* __restrict__ fwd_intact)
{
    constexpr int ROWS = TY * TZ, TN = TILE_X * ROWS;
    static_assert((DIM == 2 && TZ == 1) || DIM == 3, "2D tiles have TZ = 1");
    __shared__ volatile int lab[TN];           // union-find over the tile's sites (only run starts take part)
    __shared__ unsigned int row_xbonds[ROWS];  // each row's x-bond ballot
    const Rewired g = {has_modified, mod_bits, mod_rank, nullptr, nullptr, fwd_intact};
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    const int t = threadIdx.x, lane = t % TILE_X, row = t / TILE_X, ty = row % TY, tz = row / TY;
    const int x = blockIdx.x * TILE_X + lane, y = blockIdx.y * TY + ty, z = DIM == 3 ? blockIdx.z * TZ + tz : 0;
    const bool inside = x < L && y < L && z < L;
    const int site = (z * L + y) * L + x;
    const int s = inside ? spins[site] : 0;
    const int right = __shfl_down_sync(FULL_WARP, s, 1);

    // Open forward bonds inside the tile, bit `axis` (axis DIM-1 is x).
    unsigned int open = 0;
    if (inside) {
        if (lane + 1 < TILE_X && x + 1 < L && right == s) open |= 1u << (DIM - 1);
        if (ty + 1 < TY && y + 1 < L && spins[site + L] == s) open |= 1u << (DIM - 2);
        if (DIM == 3 && tz + 1 < TZ && z + 1 < L && spins[site + L * L] == s) open |= 1u;
        if (open) open &= intact_forward_edges(g, site, DIM);
        if (open && bond_threshold <= 0xFFFFFFFFull) {
            const uint4 call = bond_call<DIM>(key, site);
#pragma unroll
            for (int a = 0; a < DIM; ++a)
                if (!bond_open(bond_word<DIM>(call, site, a), bond_threshold)) open &= ~(1u << a);
        }
    }
    const unsigned int xbonds = __ballot_sync(FULL_WARP, (open >> (DIM - 1)) & 1u);
    const int start = run_start(xbonds, lane);
    lab[t] = t;
    if (lane == 0) row_xbonds[row] = xbonds;
    __syncthreads();

    // Vertical bonds: the runs above and below overlap from max(their starts) to here; only the leftmost
    // open vertical bond of that overlap unites them, the others would find them united already.
#pragma unroll
    for (int a = 0; a < DIM - 1; ++a) {  // a == DIM-2: y; a == 0 in 3D: z
        const bool up = (open >> a) & 1u;
        const unsigned int vertical = __ballot_sync(FULL_WARP, up);
        if (up) {
            const int other = row + (a == DIM - 2 ? 1 : TY);
            const int other_start = run_start(row_xbonds[other], lane);
            const int overlap = max(start, other_start);
            const unsigned int before = (1u << lane) - (1u << overlap);  // lanes overlap .. lane-1
            if (!(vertical & before)) unite_local(lab, row * TILE_X + start, other * TILE_X + other_start);
        }
    }
    __syncthreads();

    const int root = find_local(lab, row * TILE_X + start);
    if (inside) {
        const int root_row = root / TILE_X;
        const int rx = blockIdx.x * TILE_X + root % TILE_X, ry = blockIdx.y * TY + root_row % TY;
        const int rz = DIM == 3 ? blockIdx.z * TZ + root_row / TY : 0;
        labels[site] = (rz * L + ry) * L + rx;
    }
}

template <int DIM, int TY, int TZ>
__global__ void label_merge(
    const signed char* __restrict__ spins, int* __restrict__ labels, const int L, const unsigned int seed_lo,
    const unsigned int seed_hi, const unsigned int stream_lo, const unsigned int stream_hi,
    const unsigned long long bond_threshold, const int has_modified, const unsigned int* __restrict__ mod_bits,
    const unsigned int* __restrict__ mod_rank, const unsigned char* __restrict__ fwd_intact,
    const int* __restrict__ new_u, const int* __restrict__ new_v, const int n_new)
{
    const Rewired g = {has_modified, mod_bits, mod_rank, nullptr, nullptr, fwd_intact};
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    const int part = blockIdx.y;  // 0..DIM-1: tile faces normal to that axis; DIM: the rewired edges
    const int step = gridDim.x * blockDim.x;
    if (part == DIM) {
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n_new; j += step) {
            const int u = new_u[j], v = new_v[j];
            if (spins[u] != spins[v]) continue;
            if (bond_threshold > 0xFFFFFFFFull || bond_open(philox_draw(key, TAG_NEW_BOND, (unsigned int)j).x, bond_threshold))
                unite_global(labels, u, v);
        }
        return;
    }
    const int axis = part;
    const int T = axis == DIM - 1 ? TILE_X : (axis == DIM - 2 ? TY : TZ);
    const int faces = (L + T - 1) / T;  // coordinates T-1, 2T-1, ..., and L-1 (the periodic wrap)
    const int rows = DIM == 3 ? L * L : L;
    const int count = faces * rows;
    const int stride = axis == DIM - 1 ? 1 : (axis == DIM - 2 ? L : L * L);
    const int lane = threadIdx.x % 32;
    // Whole warps go round the loop together (ballots and shuffles below): blockDim is a multiple of 32.
    for (int base = blockIdx.x * blockDim.x; base < count; base += step) {
        const int i = base + threadIdx.x;
        // Face bond i; bond i-1 lies beside it (one step along x, or along y for x faces) when `beside`.
        bool open = false, beside = false;
        int a = 0, b = 0;
        if (i < count) {
            int site, c;
            if (axis == DIM - 1) {            // x faces: i = face * rows + row, rows in C order
                const int r = i % rows;
                c = min((i / rows) * T + T - 1, L - 1);
                site = r * L + c;
                beside = r % L > 0;
            } else if (axis == DIM - 2) {     // y faces: i = (z * faces + face) * L + x
                const int x = i % L, rest = i / L;
                c = min((rest % faces) * T + T - 1, L - 1);
                site = ((rest / faces) * L + c) * L + x;
                beside = x > 0;
            } else {                          // z faces: i = face * L*L + (y * L + x)
                c = min((i / rows) * T + T - 1, L - 1);
                site = c * rows + i % rows;
                beside = i % L > 0;
            }
            const int nb = c == L - 1 ? site - (L - 1) * stride : site + stride;
            open = spins[site] == spins[nb] && ((intact_forward_edges(g, site, DIM) >> axis) & 1u) &&
                   (bond_threshold > 0xFFFFFFFFull ||
                    bond_open(bond_word<DIM>(bond_call<DIM>(key, site), site, axis), bond_threshold));
            if (open) {
                a = __ldcg(labels + site);
                b = __ldcg(labels + nb);
            }
        }
        const unsigned int opens = __ballot_sync(FULL_WARP, open);
        const int left_a = __shfl_up_sync(FULL_WARP, a, 1), left_b = __shfl_up_sync(FULL_WARP, b, 1);
        // The bond beside is open and its ends carry our ends' labels (labels only ever point within a
        // component): it joins the same two components, and it is united unless skipped for the same reason.
        const bool redundant = lane > 0 && beside && ((opens >> (lane - 1)) & 1u) && left_a == a && left_b == b;
        if (open && !redundant) unite_global(labels, a, b);
    }
}

template <int UNUSED>
__global__ void label_compress(int* __restrict__ labels, const int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        labels[i] = find_root(labels, i);
}

template <int UNUSED>
__global__ void wolff_flip(signed char* __restrict__ spins, unsigned char* __restrict__ flipped,
                           const int* __restrict__ labels, const int n, const int seed_site, const int write_mask)
{
    const int cluster = find_root(labels, seed_site);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const bool in = find_root(labels, i) == cluster;
        if (in) spins[i] = (signed char)(-spins[i]);
        if (write_mask) flipped[i] = in;
    }
}

template <int UNUSED>
__global__ void cluster_flip(signed char* __restrict__ spins, unsigned char* __restrict__ flipped,
                             const int* __restrict__ labels, const int n, const unsigned int seed_lo,
                             const unsigned int seed_hi, const unsigned int stream_lo, const unsigned int stream_hi,
                             const int write_mask)
{
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const bool flip = philox_draw(key, TAG_CLUSTER_FLIP, (unsigned int)find_root(labels, i)).x & 1u;
        if (flip) spins[i] = (signed char)(-spins[i]);
        if (write_mask) flipped[i] = flip;
    }
}
