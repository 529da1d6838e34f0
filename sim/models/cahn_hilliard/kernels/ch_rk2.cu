// One stage of the explicit second-order Runge-Kutta (midpoint) step of the Cahn-Hilliard equation
//     dphi/dt = m lap(mu),   mu = -b phi + u phi^3 - K lap(phi)
// on a periodic or mirror (zero-flux) grid, as in seed 001 section 3.1.3 (two kernel calls per step):
//     stage 1:  half = phi + (m dt/2) lap(mu(phi))        base = eval = phi,  hm = m dt / 2
//     stage 2:  new  = phi + (m dt)   lap(mu(half))       base = phi, eval = half,  hm = m dt
// Two kernels compute the same stage (same values, same bits); finite_difference.KERNELS names them, the model
// runs finite_difference.DEFAULT_KERNEL and bench/cahn_hilliard.py times them all:
//
// ch_rk2_stage_rows ("rows", "rows16"; at the end of this file): register blocking along y, warp shuffles along
// x, a 2D/3D launch without div/mod; mu once per cell (plus two halo rows per strip of R rows).
//
// ch_rk2_stage ("cache", the first kernel): one thread per cell computes mu
// at its cell and at its 2*DIM neighbours from phi read through the L1/L2 caches, then the Laplacian of mu.
//
// Floating-point order is fixed so that the NumPy twin (finite_difference.rk2_stage_twin) gives the same bits
// on the CPU emulator: neighbour sums run over axes in array order (axis 0 = slowest, x last), +1 before -1,
// starting from the first term; then (sum - 2*DIM*centre) * inv_dx2. Mirror boundaries reflect about the cell
// faces (index -1 -> 0, -2 -> 1, L -> L-1, L+1 -> L-2): the ghost cells equal their mirror images, so no flux
// of phi or of mu crosses a wall and mass is conserved. Periodic boundaries wrap.

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


// ---- the row-blocked stage ---------------------------------------------------------------------------------
// ch_rk2_stage_rows: register blocking along y with warp shuffles along x, no shared memory, no div/mod.
// Launch: blocks of 32 x CH_ROWS_WARPS threads; grid (ceil(L / 30), ceil(L / (R CH_ROWS_WARPS)), L in 3D else 1).
// Each warp owns one x-strip of 32 consecutive columns (logical x = 30 blockIdx.x - 1 + lane: lanes 1..30 write,
// lanes 0 and 31 are its halo) and R consecutive rows y0 .. y0+R-1 of one z plane (blockIdx.z in 3D). It
// marches up the rows, keeping a sliding window of three rows of phi (per plane: z-1, z, z+1 in 3D) in
// registers, so each phi value is loaded once per warp (the planes z+-2 once per row), and computes mu once
// per (row, column) on the plane z: R + 2 times for R cells instead of 2*DIM + 1 times per cell. In 3D mu on the
// planes z+-1 (for the z terms of lap mu) is computed at the rows being written. The x neighbours come from the
// neighbouring lanes by __shfl_up/down_sync; the two edge lanes read their outer phi neighbour from memory.
// Boundaries: every index a thread touches is in [-2, L+1] (wrapped or mirrored by one compare and select);
// lanes, rows and planes just beyond a wall (-1 or L) hold the ghost values the twin uses. For a mirrored ghost
// position the cell it stands for lies on the other side, so its + and - neighbours swap (flip below); mu
// there then equals the twin's mu at the mirror cell, same operands in the same order, bit for bit. (For the
// first pair of a sum, z in 3D and y in 2D, the swap changes no bit, a + b being b + a; it is kept for uniformity.)
constexpr int CH_ROWS_WARPS = 4;   // warps per block, one strip of rows each
constexpr int CH_ROWS_OUT = 30;    // columns a warp writes (lanes 1 .. 30)

// j in [-L, 2L) onto the grid (one wrap or reflection); any other j onto some cell (values never written)
template <bool MIRROR>
__device__ __forceinline__ int ch_near(int j, int L)
{
    const int w = ch_wrap<MIRROR>(j, L);
    return w < 0 ? 0 : (w >= L ? L - 1 : w);
}

// a value at this lane's cell with its x neighbours, in summation order (+x, -x)
template <typename Real> struct ChRow { Real c, xp, xm; };

// row[cx] and its x neighbours: from lanes +-1, the edge lanes reading theirs (column xo) from memory;
// flip: this lane stands for a mirrored ghost cell, whose +x neighbour is at logical x - 1
template <typename Real>
__device__ __forceinline__ ChRow<Real> ch_row(const Real* __restrict__ row, int cx, int xo, bool first, bool edge,
                                              bool flip)
{
    ChRow<Real> v;
    v.c = row[cx];
    Real up = __shfl_down_sync(0xffffffffu, v.c, 1);     // logical x + 1
    Real dn = __shfl_up_sync(0xffffffffu, v.c, 1);       // logical x - 1
    if (edge) {
        const Real e = row[xo];
        if (first) dn = e; else up = e;
    }
    v.xp = flip ? dn : up;
    v.xm = flip ? up : dn;
    return v;
}

// mu from phi at the centre and its neighbours, given in summation order (z+, z-, y+, y-, x+, x-)
template <typename Real, int DIM>
__device__ __forceinline__ Real ch_mu_at(Real c, Real zp, Real zm, Real yp, Real ym, Real xp, Real xm, Real b, Real u,
                                         Real K, Real inv_dx2)
{
    Real s;
    if (DIM == 3) {
        s = zp;
        s = s + zm;
        s = s + yp;
    } else {
        s = yp;
    }
    s = s + ym;
    s = s + xp;
    s = s + xm;
    const Real lap = (s - Real(2 * DIM) * c) * inv_dx2;
    return u * c * c * c - b * c - K * lap;
}

// first, end: the slowest axis's indices written (y in 2D, z in 3D; the grid's y or z size is their count): 0
// and L on a whole grid. A slab of a grid split over devices (sim/models/cahn_hilliard/slabs.py) passes first = 2:
// its array holds end + 2 slow indices, the two before first and after end - 1 being halos filled with the
// neighbours' values (or, at a mirror wall, the mirror images), so the slow axis is neither wrapped nor mirrored
// (the mirror's swap of + and - neighbours is then a swap of a sum's first pair: the same bits).
template <typename Real, int DIM, bool MIRROR, int R>
__global__ void __launch_bounds__(32 * CH_ROWS_WARPS)
ch_rk2_stage_rows(const Real* __restrict__ base, const Real* __restrict__ eval, Real* __restrict__ out,
                  const int L, const Real b, const Real u, const Real K, const Real inv_dx2, const Real hm,
                  const int first_slow, const int end_slow)
{
    const bool slab = first_slow > 0;
    const bool slab_y = slab && DIM == 2, slab_z = slab && DIM == 3;
    const int lane = (int)threadIdx.x;
    const int x = (int)blockIdx.x * CH_ROWS_OUT - 1 + lane;                  // logical column, from -1
    const int y_first = DIM == 2 ? first_slow : 0, y_end = DIM == 2 ? end_slow : L;
    const int y0 = y_first + ((int)blockIdx.y * CH_ROWS_WARPS + (int)threadIdx.y) * R;
    if (y0 >= y_end) return;                                                 // the whole warp
    const int y1 = min(y0 + R, y_end);                                       // rows [y0, y1) written
    const bool first = lane == 0, edge = first || lane == 31;
    const int cx = ch_near<MIRROR>(x, L), xo = ch_near<MIRROR>(first ? x - 1 : x + 1, L);
    const bool flipx = MIRROR && (x < 0 || x >= L);
    const bool writes = lane >= 1 && lane <= CH_ROWS_OUT && x < L;

    // plane offsets of z-2 .. z+2 (3D; in 2D the middle one only, 0)
    const int z = DIM == 3 ? first_slow + (int)blockIdx.z : 0;
    int oz[5];
#pragma unroll
    for (int k = 0; k < 5; ++k) oz[k] = DIM == 3 ? (slab_z ? z + k - 2 : ch_wrap<MIRROR>(z + k - 2, L)) * L * L : 0;
    const bool flip_up = DIM == 3 && MIRROR && !slab_z && z + 1 >= L;
    const bool flip_dn = DIM == 3 && MIRROR && !slab_z && z == 0;

    // windows of phi rows r-1, r, r+1 on the planes z-1, z, z+1 (3D) or on the grid (2D); plane index P0 = z
    constexpr int NP = DIM == 3 ? 3 : 1, P0 = DIM == 3 ? 1 : 0;
    ChRow<Real> w[NP][3];
#pragma unroll
    for (int p = 0; p < NP; ++p) {
        const Real* plane = eval + oz[p + 2 - P0];
        w[p][0] = ch_row(plane + (slab_y ? y0 - 2 : ch_near<MIRROR>(y0 - 2, L)) * L, cx, xo, first, edge, flipx);
        w[p][1] = ch_row(plane + (slab_y ? y0 - 1 : ch_near<MIRROR>(y0 - 1, L)) * L, cx, xo, first, edge, flipx);
    }
    Real mu2 = Real(0);                        // mu(z, r-2)
    ChRow<Real> mu1 = {Real(0), Real(0), Real(0)};      // mu(z, r-1) with its x neighbours
    Real mu1_zp = Real(0), mu1_zm = Real(0);   // mu(z+1, r-1), mu(z-1, r-1) (3D)

#pragma unroll
    for (int i = 0; i < R + 2; ++i) {
        const int r = y0 - 1 + i;             // mu at row r; the row r-1 written
        if (r > y1) break;
        const int ry = (slab_y ? r + 1 : ch_near<MIRROR>(r + 1, L)) * L;
#pragma unroll
        for (int p = 0; p < NP; ++p) w[p][2] = ch_row(eval + oz[p + 2 - P0] + ry, cx, xo, first, edge, flipx);

        // mu(z, r); a mirrored ghost row r (-1 or L) swaps its y neighbours
        const bool flipy = MIRROR && !slab_y && (r < 0 || r >= L);
        const ChRow<Real>& c = w[P0][1];
        const Real zp = DIM == 3 ? w[2][1].c : Real(0), zm = DIM == 3 ? w[0][1].c : Real(0);
        ChRow<Real> mu0;
        mu0.c = ch_mu_at<Real, DIM>(c.c, zp, zm, flipy ? w[P0][0].c : w[P0][2].c, flipy ? w[P0][2].c : w[P0][0].c,
                                    c.xp, c.xm, b, u, K, inv_dx2);
        mu0.xp = __shfl_down_sync(0xffffffffu, mu0.c, 1);   // writing lanes stand for themselves: no flip
        mu0.xm = __shfl_up_sync(0xffffffffu, mu0.c, 1);

        // mu(z+-1, r) on a row to be written (3D), needed by the next iteration
        Real mu0_zp = Real(0), mu0_zm = Real(0);
        if (DIM == 3 && r >= y0 && r < y1) {
            const int ryc = (slab_y ? r : ch_near<MIRROR>(r, L)) * L;
            const Real far_p = eval[oz[4] + ryc + cx], far_m = eval[oz[0] + ryc + cx];   // phi(z+2), phi(z-2)
            const ChRow<Real>& a = w[NP - 1][1];
            const ChRow<Real>& d = w[0][1];
            mu0_zp = ch_mu_at<Real, DIM>(a.c, flip_up ? c.c : far_p, flip_up ? far_p : c.c, w[NP - 1][2].c,
                                         w[NP - 1][0].c, a.xp, a.xm, b, u, K, inv_dx2);
            mu0_zm = ch_mu_at<Real, DIM>(d.c, flip_dn ? far_m : c.c, flip_dn ? c.c : far_m, w[0][2].c, w[0][0].c,
                                         d.xp, d.xm, b, u, K, inv_dx2);
        }

        // the row q = r - 1: lap mu in the twin's order (z+, z-, y+, y-, x+, x-)
        const int q = r - 1;
        if (q >= y0 && writes) {
            Real s;
            if (DIM == 3) {
                s = mu1_zp;
                s = s + mu1_zm;
                s = s + mu0.c;
            } else {
                s = mu0.c;
            }
            s = s + mu2;
            s = s + mu1.xp;
            s = s + mu1.xm;
            const Real lap_mu = (s - Real(2 * DIM) * mu1.c) * inv_dx2;
            const int cell = oz[2] + q * L + x;
            out[cell] = base[cell] + hm * lap_mu;
        }

        // slide the windows one row up
        mu2 = mu1.c;
        mu1 = mu0;
        mu1_zp = mu0_zp;
        mu1_zm = mu0_zm;
#pragma unroll
        for (int p = 0; p < NP; ++p) {
            w[p][0] = w[p][1];
            w[p][1] = w[p][2];
        }
    }
}
