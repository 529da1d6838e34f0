// Random graph generators on the GPU, one thread per edge slot, random numbers from Philox4x32-10 keyed by
// (seed, stream, tag, index) so the NumPy twins in sim/analysis/graph.py draw the very same graphs.
//
// ws_targets: Watts-Strogatz rewiring (Watts & Strogatz 1998; the generator of seed 004's benchmark graphs).
//   The ring lattice has edge slot e = u * h + (j - 1) joining u and u + j (j = 1 .. h = k/2). Round r draws
//   for every slot still to be decided: word 0 < threshold rewires it (p), word 1 picks the new end
//   uniformly among the n - 1 vertices other than u (later rounds redraw only that end). Duplicate and
//   lattice-colliding edges are found by a sort on the array module and drawn again in the next round, as
//   networkx's generator redraws them one by one.
//   Counter: (slot, TAG_WS + 16 * round, stream).
//
// ba_targets: Barabasi-Albert preferential attachment (thesis 003, section 5.2) made parallel by the
//   edge-list view of Batagelj & Brandes (2005): the list of edge ends M holds, for edge slot i, M[2i] = the
//   new vertex t(i) and M[2i+1] = M[r], with r uniform over the ends of the edges that existed before t(i)
//   arrived -- which picks an old vertex with probability proportional to its degree. Each thread follows
//   its own chain of odd references (immutable, so no synchronisation) until it reaches an even index, whose
//   vertex is known. The seed graph is the complete graph on m0 = m + 1 vertices (thesis: a fully connected
//   core), its C(m0, 2) edges listed first. Repeated targets of one new vertex are dropped by the host code.
//   Counter: (slot, TAG_BA, stream).
#include "philox.cuh"

#define TAG_WS 64u
#define TAG_BA 65u

extern "C" __global__ void ws_targets(const long long* slots, long long count, long long n, int half_k,
                                      unsigned int threshold, int round, unsigned int seed_lo, unsigned int seed_hi,
                                      unsigned int stream_lo, unsigned int stream_hi, long long* target)
{
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        const long long e = slots[i];
        const long long u = e / half_k, j = e % half_k + 1;
        const uint4 r = philox_draw(key, TAG_WS + 16u * (unsigned int)round, (unsigned int)e);
        if (round > 0 || r.x < threshold) {  // a redrawn slot was already chosen for rewiring
            const long long offset = 1 + (long long)(((unsigned long long)r.y * (unsigned long long)(n - 1)) >> 32);
            target[i] = (u + offset) % n;
        } else {
            target[i] = (u + j) % n;
        }
    }
}

// Edge slot i < core_edges: an edge of the complete core (not drawn). Slot i >= core_edges belongs to new
// vertex t = m0 + (i - core_edges) / m; its target is drawn among the 2 * (core_edges + (t - m0) * m) ends of
// the earlier edges.
__device__ __forceinline__ long long ba_new_vertex(long long slot, long long core_edges, long long m0, long long m)
{
    return m0 + (slot - core_edges) / m;
}

extern "C" __global__ void ba_targets(const long long* core_ends, long long core_edges, long long m0,
                                      long long m, long long n_slots, unsigned int seed_lo, unsigned int seed_hi,
                                      unsigned int stream_lo, unsigned int stream_hi, long long* target)
{
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_slots;
         i += (long long)gridDim.x * blockDim.x) {
        long long slot = core_edges + i;
        long long result = -1;
        while (result < 0) {
            const long long t = ba_new_vertex(slot, core_edges, m0, m);
            const long long earlier_ends = 2 * (core_edges + (t - m0) * m);
            const uint4 r = philox_draw(key, TAG_BA, (unsigned int)slot);
            const long long end = (long long)(((unsigned long long)r.x * (unsigned long long)earlier_ends) >> 32);
            if (end < 2 * core_edges) {
                result = core_ends[end];
            } else if ((end & 1) == 0) {
                result = ba_new_vertex(end / 2, core_edges, m0, m);
            } else {
                slot = end / 2;  // the other end of an earlier drawn edge: follow its reference
            }
        }
        target[i] = result;
    }
}
