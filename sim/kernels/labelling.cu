// Connected-component labelling of the random bond graph of the rewired Ising model, and the cluster updates
// built on it (Wolff, Swendsen-Wang). Union-find with atomicMin hooking, in two levels as in Playne & Hawick,
// "A new algorithm for parallel connected-component labelling on GPUs" (IEEE TPDS 2018), after Komura & Okabe's
// label-equivalence Swendsen-Wang (Comput. Phys. Commun. 2012).
//
// Bonds: a graph edge (i, j) is active when s_i == s_j and its Philox number r < bond_threshold (a 64-bit
// threshold, 2^32 = always). Lattice edge (site, axis): in 2D word 2*(site % 2) + axis of the call
// (site / 2, TAG_BOND), so two x-neighbours share a call; in 3D word `axis` of (site, TAG_BOND). Rewired edge j:
// word 0 of (j, TAG_NEW_BOND). Each edge is drawn exactly once wherever it is examined, so no bond state is
// stored. Lattice edges removed by rewiring are skipped (rewired.cuh).
//
// 1. label_tiles: a block labels one tile of TX*TY*TZ sites in shared memory from the tile's internal lattice
//    edges; every site gets the global index of the smallest site of its tile component.
// 2. label_merge: the lattice edges leaving a tile (and the periodic wrap) and the rewired edges are united in
//    global memory.
// 3. label_compress / wolff_flip / cluster_flip: each site finds its root (and stores it); Wolff flips the
//    component of a seed site, Swendsen-Wang every component whose root draws an odd word (TAG_CLUSTER_FLIP).
//
// Union-find with atomicMin hooking (Playne & Hawick): a root r has lab[r] == r, every other label points to a
// smaller site of the same component, and a union hooks the larger root under the smaller with atomicMin
// (if the target stopped being a root meanwhile, the loop goes on from whatever it pointed to). No thread
// shortens paths while unions run: in the tiles, unions come in stages by bond level -- bonds crossing the
// boundaries of aligned 2-, 4-, 8-, ... site blocks -- and after each stage a barrier-separated pass points
// every site straight at its root, so the next stage starts from flat trees and finds stay short.
// Final labels are the smallest site of each component, whatever the schedule.
#include "philox.cuh"
#include "rewired.cuh"

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

__device__ __forceinline__ void unite_local(volatile int* lab, int a, int b)
{
    while (true) {
        a = find_local(lab, a);
        b = find_local(lab, b);
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
__device__ __forceinline__ int find_global(const int* lab, int x)
{
    int p;
    while ((p = __ldcg(lab + x)) != x) x = p;
    return x;
}

__device__ __forceinline__ void unite_global(int* lab, int a, int b)
{
    while (true) {
        a = find_global(lab, a);
        b = find_global(lab, b);
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

// Level of the lattice edge c -> c + 1 inside a tile: the smallest aligned block of 2^(level+1) sites holding both.
__device__ __forceinline__ int bond_level(const int c) { return __ffs(~c) - 1; }

template <int N>
struct Log2 {
    static constexpr int value = 1 + Log2<N / 2>::value;
};
template <>
struct Log2<1> {
    static constexpr int value = 0;
};

__device__ __forceinline__ bool bond_open(const unsigned int word, const unsigned long long bond_threshold)
{
    return (unsigned long long)word < bond_threshold;
}

template <int DIM, int TX, int TY, int TZ, int THREADS>
__global__ void __launch_bounds__(THREADS) label_tiles(
    const signed char* __restrict__ spins, int* __restrict__ labels, const int L, const unsigned int seed_lo,
    const unsigned int seed_hi, const unsigned int stream_lo, const unsigned int stream_hi,
    const unsigned long long bond_threshold, const int has_modified, const unsigned int* __restrict__ mod_bits,
    const unsigned int* __restrict__ mod_rank, const unsigned char* __restrict__ fwd_intact)
{
    constexpr int TN = TX * TY * TZ;
    constexpr int PER = TN / THREADS;  // sites per thread: pairs of x-neighbours (2q, 2q + 1)
    static_assert(TX % 2 == 0 && PER % 2 == 0 && PER * THREADS == TN && PER * DIM <= 64, "tile shape");
    constexpr int LEVELS = Log2<(TX > TY ? (TX > TZ ? TX : TZ) : (TY > TZ ? TY : TZ))>::value;
    __shared__ volatile int lab[TN];
    __shared__ signed char tile[TN];
    const Rewired g = {has_modified, mod_bits, mod_rank, nullptr, nullptr, fwd_intact};
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    const int ox = blockIdx.x * TX, oy = blockIdx.y * TY, oz = DIM == 3 ? (int)blockIdx.z * TZ : 0;

    for (int t = threadIdx.x; t < TN; t += THREADS) {
        const int x = ox + t % TX, y = oy + (t / TX) % TY, z = oz + t / (TX * TY);
        tile[t] = (x < L && y < L && z < L) ? spins[(z * L + y) * L + x] : 0;
        lab[t] = t;
    }
    __syncthreads();

    // Open forward bonds inside the tile of this thread's sites, bit DIM*j + axis (axis DIM-1 is x).
    const bool always = bond_threshold > 0xFFFFFFFFull;
    unsigned long long open = 0;
#pragma unroll
    for (int j = 0; j < PER; ++j) {
        const int t = 2 * (threadIdx.x + (j >> 1) * THREADS) + (j & 1);
        const int tx = t % TX, ty = (t / TX) % TY, tz = t / (TX * TY);
        const int x = ox + tx, y = oy + ty, z = oz + tz;
        if (x >= L || y >= L || z >= L) continue;
        const signed char s = tile[t];
        unsigned int like = 0;
        if (tx + 1 < TX && x + 1 < L && tile[t + 1] == s) like |= 1u << (DIM - 1);
        if (ty + 1 < TY && y + 1 < L && tile[t + TX] == s) like |= 1u << (DIM - 2);
        if (DIM == 3 && tz + 1 < TZ && z + 1 < L && tile[t + TX * TY] == s) like |= 1u;
        if (!like) continue;
        const int site = (z * L + y) * L + x;
        like &= intact_forward_edges(g, site, DIM);
        if (like && !always) {
            const uint4 call = bond_call<DIM>(key, site);  // in 2D the pair's two sites draw the same call
#pragma unroll
            for (int a = 0; a < DIM; ++a)
                if (!bond_open(bond_word<DIM>(call, site, a), bond_threshold)) like &= ~(1u << a);
        }
        open |= (unsigned long long)like << (DIM * j);
    }

    for (int level = 0; level < LEVELS; ++level) {
        if (open) {
#pragma unroll
            for (int j = 0; j < PER; ++j) {
                const unsigned int mine = (unsigned int)(open >> (DIM * j)) & ((1u << DIM) - 1u);
                if (!mine) continue;
                const int t = 2 * (threadIdx.x + (j >> 1) * THREADS) + (j & 1);
                const int tx = t % TX, ty = (t / TX) % TY, tz = t / (TX * TY);
                if (((mine >> (DIM - 1)) & 1u) && bond_level(tx) == level) unite_local(lab, t, t + 1);
                if (((mine >> (DIM - 2)) & 1u) && bond_level(ty) == level) unite_local(lab, t, t + TX);
                if (DIM == 3 && (mine & 1u) && bond_level(tz) == level) unite_local(lab, t, t + TX * TY);
            }
        }
        __syncthreads();
        // flatten: no unions run now, so every site can point straight at its root
#pragma unroll
        for (int j = 0; j < PER; ++j) {
            const int t = 2 * (threadIdx.x + (j >> 1) * THREADS) + (j & 1);
            lab[t] = find_local(lab, t);
        }
        __syncthreads();
    }

    for (int t = threadIdx.x; t < TN; t += THREADS) {
        const int x = ox + t % TX, y = oy + (t / TX) % TY, z = oz + t / (TX * TY);
        if (x >= L || y >= L || z >= L) continue;
        const int root = lab[t];
        const int rx = ox + root % TX, ry = oy + (root / TX) % TY, rz = oz + root / (TX * TY);
        labels[(z * L + y) * L + x] = (rz * L + ry) * L + rx;
    }
}

template <int DIM, int TX, int TY, int TZ>
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
    const int start = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
    if (part == DIM) {
        for (int j = start; j < n_new; j += step) {
            const int u = new_u[j], v = new_v[j];
            if (spins[u] != spins[v]) continue;
            if (bond_threshold > 0xFFFFFFFFull || bond_open(philox_draw(key, TAG_NEW_BOND, (unsigned int)j).x, bond_threshold))
                unite_global(labels, u, v);
        }
        return;
    }
    const int axis = part;
    const int T = axis == DIM - 1 ? TX : (axis == DIM - 2 ? TY : TZ);
    const int faces = (L + T - 1) / T;  // coordinates T-1, 2T-1, ..., and L-1 (the periodic wrap)
    const int other = DIM == 3 ? L * L : L;
    const int count = faces * other;
    const int stride = axis == DIM - 1 ? 1 : (axis == DIM - 2 ? L : L * L);
    for (int i = start; i < count; i += step) {
        // i enumerates (face, other coordinates) in C order of the lattice, axis `axis` replaced by the face.
        int site, c;
        if (axis == DIM - 1) {            // x faces: i = row * faces + face
            c = min((i % faces) * T + T - 1, L - 1);
            site = (i / faces) * L + c;
        } else if (axis == DIM - 2) {     // y faces: i = (z * faces + face) * L + x
            const int x = i % L, rest = i / L;
            c = min((rest % faces) * T + T - 1, L - 1);
            site = ((rest / faces) * L + c) * L + x;
        } else {                          // z faces: i = face * L*L + (y * L + x)
            c = min((i / other) * T + T - 1, L - 1);
            site = c * other + i % other;
        }
        const int nb = c == L - 1 ? site - (L - 1) * stride : site + stride;
        if (spins[site] != spins[nb]) continue;
        if (!((intact_forward_edges(g, site, DIM) >> axis) & 1u)) continue;
        if (bond_threshold > 0xFFFFFFFFull || bond_open(bond_word<DIM>(bond_call<DIM>(key, site), site, axis), bond_threshold))
            unite_global(labels, site, nb);
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
                           int* __restrict__ labels, const int n, const int seed_site, const int write_mask)
{
    const int cluster = find_root(labels, seed_site);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int root = find_root(labels, i);
        labels[i] = root;
        const bool in = root == cluster;
        if (in) spins[i] = (signed char)(-spins[i]);
        if (write_mask) flipped[i] = in;
    }
}

template <int UNUSED>
__global__ void cluster_flip(signed char* __restrict__ spins, unsigned char* __restrict__ flipped,
                             int* __restrict__ labels, const int n, const unsigned int seed_lo,
                             const unsigned int seed_hi, const unsigned int stream_lo, const unsigned int stream_hi,
                             const int write_mask)
{
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int root = find_root(labels, i);
        labels[i] = root;
        const bool flip = philox_draw(key, TAG_CLUSTER_FLIP, (unsigned int)root).x & 1u;
        if (flip) spins[i] = (signed char)(-spins[i]);
        if (write_mask) flipped[i] = flip;
    }
}
