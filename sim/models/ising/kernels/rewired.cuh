// Sites touched by rewiring, as the kernels see them (built by sim/gpu/graph.py from sim/lattice.py):
// bit (site % 32) of mod_bits[site / 32] is set for a modified site; its row in the site-sorted CSR adjacency
// of all modified sites is its rank, mod_rank[site / 32] + popcount of the lower bits of that word.
// fwd_intact[row] has bit `axis` set when the lattice edge (site, site + e_axis) survived rewiring.
#pragma once

struct Rewired {
    int has_modified;
    const unsigned int* __restrict__ bits;
    const unsigned int* __restrict__ rank;
    const int* __restrict__ offsets;
    const int* __restrict__ neighbours;
    const unsigned char* __restrict__ fwd_intact;
};

__device__ __forceinline__ bool is_modified(const Rewired& g, const int site)
{
    return g.has_modified && ((g.bits[site >> 5] >> (site & 31)) & 1u);
}

__device__ __forceinline__ int modified_row(const Rewired& g, const int site)
{
    const unsigned int below = (1u << (site & 31)) - 1u;
    return (int)(g.rank[site >> 5] + __popc(g.bits[site >> 5] & below));
}

// Sum of the spins adjacent to a modified site, from its explicit adjacency.
__device__ __forceinline__ int modified_field(const Rewired& g, const signed char* spins, const int site)
{
    const int row = modified_row(g, site);
    int h = 0;
    for (int j = g.offsets[row]; j < g.offsets[row + 1]; ++j) h += spins[g.neighbours[j]];
    return h;
}

// The lattice edges (site, site + e_axis) of a site that are still in the graph, one bit per axis.
__device__ __forceinline__ unsigned int intact_forward_edges(const Rewired& g, const int site, const int dim)
{
    if (!is_modified(g, site)) return (1u << dim) - 1u;
    return g.fwd_intact[modified_row(g, site)];
}
