// Per-arc counts for clustering coefficients of an undirected simple graph in CSR form (sorted neighbour
// lists, no self-loops). Host side and NumPy/SciPy twins: sim/analysis/graph.py.
//
// arc_triangles: Leist, Hawick & Playne's arc-parallel clustering kernel (seed 004, Algorithm 8; thesis 003,
//   section 6.2.2): one thread per arc (v -> u) instead of one per vertex, so the warps see similar work for
//   graphs of near-constant degree. Where Algorithm 8 walks A_u and then A_k, each thread here merges the two
//   sorted lists A_v and A_u (thesis Algorithm 13, countSharedNbrs): common[arc] = |N(v) n N(u)|, the
//   triangles through the edge vu. The triangles at v are half the sum over v's arcs, and Newman's
//   C = 3 x triangles / connected triples = sum_v T_v / sum_v k_v (k_v - 1) / 2.
//
// arc_squares: the numerator of the square (4-cycle) clustering coefficient (Lind, Gonzalez & Herrmann 2005,
//   the form networkx's square_clustering computes): for the arc (v -> u), the sum over the neighbours w > u
//   of v of q(u, w) = |N(u) n N(w)| - 1 (common neighbours of u and w other than v). Summed over v's arcs it
//   is Q_v = sum over pairs {u, w} of N(v) of q(u, w), the squares through v. Bipartite graphs (the rewired
//   Ising lattice keeps its checkerboard colouring) have no triangles, but squares.
//
// Arcs of vertex v are offsets[v] .. offsets[v+1]-1 of `neighbours`; `sources[arc]` is v (Algorithm 7's S).
// A launch counts the n_arcs arcs from first_arc on (all of them on one device; a device's share of the vertices
// when they are partitioned over several, seed 004 chapter 6), writing out[arc - first_arc].
// Each thread writes only its own output element: no atomics, results independent of the launch shape.

__device__ __forceinline__ long long sorted_common(const int* a, long long na, const int* b, long long nb)
{
    long long i = 0, j = 0, count = 0;
    while (i < na && j < nb) {
        const int x = a[i], y = b[j];
        count += (x == y);
        i += (x <= y);
        j += (y <= x);
    }
    return count;
}

extern "C" __global__ void arc_triangles(const long long* offsets, const int* neighbours, const int* sources,
                                         long long n_arcs, long long* common, long long first_arc)
{
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n_arcs;
         q += (long long)gridDim.x * blockDim.x) {
        const long long arc = first_arc + q;
        const int v = sources[arc], u = neighbours[arc];
        const long long v0 = offsets[v], u0 = offsets[u];
        common[q] = sorted_common(neighbours + v0, offsets[v + 1] - v0, neighbours + u0, offsets[u + 1] - u0);
    }
}

extern "C" __global__ void arc_squares(const long long* offsets, const int* neighbours, const int* sources,
                                       long long n_arcs, long long* squares, long long first_arc)
{
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n_arcs;
         q += (long long)gridDim.x * blockDim.x) {
        const long long arc = first_arc + q;
        const int v = sources[arc], u = neighbours[arc];
        const long long u0 = offsets[u], nu = offsets[u + 1] - u0;
        long long total = 0;
        // neighbours of v after u in v's sorted list are exactly those w > u
        for (long long k = arc + 1; k < offsets[v + 1]; ++k) {
            const int w = neighbours[k];
            const long long w0 = offsets[w];
            total += sorted_common(neighbours + u0, nu, neighbours + w0, offsets[w + 1] - w0) - 1;
        }
        squares[q] = total;
    }
}
