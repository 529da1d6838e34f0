// One stage of the explicit second-order Runge-Kutta (midpoint) step of the Cahn-Hilliard equation
//     dphi/dt = m lap(mu),   mu = -b phi + u phi^3 - K lap(phi)
// on a periodic or mirror (zero-flux) grid, as in seed 001 section 3.1.3 (two kernel calls per step):
//     stage 1:  half = phi + (m dt/2) lap(mu(phi))        base = eval = phi,  hm = m dt / 2
//     stage 2:  new  = phi + (m dt)   lap(mu(half))       base = phi, eval = half,  hm = m dt
// Two kernels compute the same stage (same values, same bits):
//
// ch_rk2_stage_tiled (the one the model runs): shared-memory tiling of the 13-point (2D) / 25-point (3D)
// stencil of seed 001 figure 5. A block owns a tile of cells (ChTile: 32 x 16 in 2D, 32 x 4 x 4 in 3D, x
// fastest). (1) The block loads phi on the tile plus a halo of 2 cells into shared memory, each value read from
// global memory once (boundaries applied while loading: wrapped or mirrored indices). (2) It computes mu on the
// tile plus a halo of 1 cell into shared memory (each mu once per block instead of 2*DIM+1 times per cell).
// (3) Each thread takes the Laplacian of mu at its cell and writes base + hm lap(mu).
//
// ch_rk2_stage (the earlier kernel, kept to compare in bench/cahn_hilliard.py): one thread per cell computes mu
// at its cell and at its 2*DIM neighbours from phi read through the L1/L2 caches, then the Laplacian of mu.
//
// Floating-point order is fixed so that the NumPy twin (finite_difference.rk2_stage_twin) gives the same bits
// on the CPU emulator: neighbour sums run over axes in array order (axis 0 = slowest, x last), +1 before -1,
// starting from the first term; then (sum - 2*DIM*centre) * inv_dx2. Mirror boundaries reflect about the cell
// faces (index -1 -> 0, -2 -> 1, L -> L-1, L+1 -> L-2): the ghost cells equal their mirror images, so no flux
// of phi or of mu crosses a wall and mass is conserved. Periodic boundaries wrap. In the tiled kernel the ghost
// values of mu (one cell beyond a mirror wall) are computed at the mirror cell inside, from its own neighbours
// in the same order, so they equal the twin's bit for bit; with periodic boundaries the halo holds the wrapped
// values and mu there is already the wrapped cell's.

template <bool MIRROR>
__device__ __forceinline__ int ch_wrap(int j, int L)
{
    if (MIRROR) return j < 0 ? -1 - j : (j >= L ? 2 * L - 1 - j : j);
    return j < 0 ? j + L : (j >= L ? j - L : j);
}

template <int DIM>
__device__ __forceinline__ int ch_flat(const int* c, int L)
{
    int i = c[0];
#pragma unroll
    for (int a = 1; a < DIM; ++a) i = i * L + c[a];
    return i;
}

// mu at the (in-range) cell c
template <typename Real, int DIM, bool MIRROR>
__device__ __forceinline__ Real ch_mu(const Real* __restrict__ p, const int* c, int L, Real b, Real u, Real K,
                                      Real inv_dx2)
{
    const Real centre = p[ch_flat<DIM>(c, L)];
    Real s = Real(0);
#pragma unroll
    for (int a = 0; a < DIM; ++a) {
#pragma unroll
        for (int side = 0; side < 2; ++side) {
            int n[DIM];
#pragma unroll
            for (int k = 0; k < DIM; ++k) n[k] = c[k];
            n[a] = ch_wrap<MIRROR>(c[a] + (side == 0 ? 1 : -1), L);
            const Real v = p[ch_flat<DIM>(n, L)];
            s = (a == 0 && side == 0) ? v : s + v;
        }
    }
    const Real lap = (s - Real(2 * DIM) * centre) * inv_dx2;
    return u * centre * centre * centre - b * centre - K * lap;
}

template <typename Real, int DIM, bool MIRROR>
__global__ void __launch_bounds__(256) ch_rk2_stage(const Real* __restrict__ base, const Real* __restrict__ eval,
                                                    Real* __restrict__ out, const int L, const Real b, const Real u,
                                                    const Real K, const Real inv_dx2, const Real hm)
{
    int cells = L;
#pragma unroll
    for (int a = 1; a < DIM; ++a) cells *= L;
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= cells) return;
    int c[DIM];
    int rest = i;
#pragma unroll
    for (int a = DIM - 1; a >= 0; --a) {
        c[a] = rest % L;
        rest /= L;
    }
    const Real mu_c = ch_mu<Real, DIM, MIRROR>(eval, c, L, b, u, K, inv_dx2);
    Real s = Real(0);
#pragma unroll
    for (int a = 0; a < DIM; ++a) {
#pragma unroll
        for (int side = 0; side < 2; ++side) {
            int n[DIM];
#pragma unroll
            for (int k = 0; k < DIM; ++k) n[k] = c[k];
            n[a] = ch_wrap<MIRROR>(c[a] + (side == 0 ? 1 : -1), L);
            const Real v = ch_mu<Real, DIM, MIRROR>(eval, n, L, b, u, K, inv_dx2);
            s = (a == 0 && side == 0) ? v : s + v;
        }
    }
    const Real lap_mu = (s - Real(2 * DIM) * mu_c) * inv_dx2;
    out[i] = base[i] + hm * lap_mu;
}


// ---- the tiled stage ---------------------------------------------------------------------------------------
template <int DIM> struct ChTile;
template <> struct ChTile<2> { static constexpr int X = 32, Y = 16, Z = 1; };
template <> struct ChTile<3> { static constexpr int X = 32, Y = 4, Z = 4; };

// any index, however far outside [0, L), onto the grid: periodic images, or reflections about the faces
// (period 2L); tiles wider than a small grid reach more than one image away
template <bool MIRROR>
__device__ __forceinline__ int ch_image(int j, int L)
{
    if (MIRROR) {
        const int m = ((j % (2 * L)) + 2 * L) % (2 * L);
        return m < L ? m : 2 * L - 1 - m;
    }
    return ((j % L) + L) % L;
}

// for a mirror grid, the position (in region coordinates) whose mu a halo position one cell beyond a wall
// takes: the cell inside, next to the wall; every other position is itself
template <bool MIRROR>
__device__ __forceinline__ int ch_inside(int region_pos, int global_pos, int L)
{
    if (!MIRROR) return region_pos;
    if (global_pos == -1) return region_pos + 1;
    if (global_pos == L) return region_pos - 1;
    return region_pos;
}

template <typename Real, int DIM, bool MIRROR>
__global__ void __launch_bounds__(ChTile<DIM>::X * ChTile<DIM>::Y * ChTile<DIM>::Z)
ch_rk2_stage_tiled(const Real* __restrict__ base, const Real* __restrict__ eval, Real* __restrict__ out,
                   const int L, const Real b, const Real u, const Real K, const Real inv_dx2, const Real hm)
{
    constexpr int TX = ChTile<DIM>::X, TY = ChTile<DIM>::Y, TZ = ChTile<DIM>::Z;
    constexpr int HZ = DIM == 3 ? 1 : 0;                 // a z halo only in 3D
    constexpr int PX = TX + 4, PY = TY + 4, PZ = TZ + 4 * HZ;      // phi: tile + 2
    constexpr int MX = TX + 2, MY = TY + 2, MZ = TZ + 2 * HZ;      // mu: tile + 1
    constexpr int THREADS = TX * TY * TZ;
    __shared__ Real p[PZ * PY * PX];
    __shared__ Real mu[MZ * MY * MX];

    const int t = (int)(threadIdx.x + TX * (threadIdx.y + TY * threadIdx.z));
    const int x0 = (int)blockIdx.x * TX, y0 = (int)blockIdx.y * TY, z0 = (int)blockIdx.z * TZ;

    // (1) phi on the tile + 2 (region position (i, j, k) is global (x0 - 2 + i, y0 - 2 + j, z0 - 2 HZ + k))
    for (int r = t; r < PX * PY * PZ; r += THREADS) {
        const int i = r % PX, j = (r / PX) % PY, k = r / (PX * PY);
        const int x = ch_image<MIRROR>(x0 - 2 + i, L), y = ch_image<MIRROR>(y0 - 2 + j, L);
        const int cell = DIM == 3 ? (ch_image<MIRROR>(z0 - 2 + k, L) * L + y) * L + x : y * L + x;
        p[r] = eval[cell];
    }
    __syncthreads();

    // (2) mu on the tile + 1, neighbours summed in array order (z, y, x; +1 before -1) as ch_mu does
    for (int r = t; r < MX * MY * MZ; r += THREADS) {
        const int i = r % MX, j = (r / MX) % MY, k = r / (MX * MY);
        const int pi = ch_inside<MIRROR>(i + 1, x0 - 1 + i, L);
        const int pj = ch_inside<MIRROR>(j + 1, y0 - 1 + j, L);
        const int pk = DIM == 3 ? ch_inside<MIRROR>(k + 1, z0 - 1 + k, L) : 0;
        const int c = (pk * PY + pj) * PX + pi;
        Real s;
        if (DIM == 3) {
            s = p[c + PX * PY];
            s = s + p[c - PX * PY];
            s = s + p[c + PX];
        } else {
            s = p[c + PX];
        }
        s = s + p[c - PX];
        s = s + p[c + 1];
        s = s + p[c - 1];
        const Real centre = p[c];
        const Real lap = (s - Real(2 * DIM) * centre) * inv_dx2;
        mu[r] = u * centre * centre * centre - b * centre - K * lap;
    }
    __syncthreads();

    // (3) the Laplacian of mu at this thread's cell, and the stage's value
    const int x = x0 + (int)threadIdx.x, y = y0 + (int)threadIdx.y, z = z0 + (int)threadIdx.z;
    if (x >= L || y >= L || (DIM == 3 && z >= L)) return;
    const int c = ((int)(threadIdx.z + HZ) * MY + (int)threadIdx.y + 1) * MX + (int)threadIdx.x + 1;
    Real s;
    if (DIM == 3) {
        s = mu[c + MX * MY];
        s = s + mu[c - MX * MY];
        s = s + mu[c + MX];
    } else {
        s = mu[c + MX];
    }
    s = s + mu[c - MX];
    s = s + mu[c + 1];
    s = s + mu[c - 1];
    const Real lap_mu = (s - Real(2 * DIM) * mu[c]) * inv_dx2;
    const int cell = DIM == 3 ? (z * L + y) * L + x : y * L + x;
    out[cell] = base[cell] + hm * lap_mu;
}
