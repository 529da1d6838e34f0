// One stage of the explicit second-order Runge-Kutta (midpoint) step of the Cahn-Hilliard equation
//     dphi/dt = m lap(mu),   mu = -b phi + u phi^3 - K lap(phi)
// on a periodic or mirror (zero-flux) grid, as in seed 001 section 3.1.3 (two kernel calls per step):
//     stage 1:  half = phi + (m dt/2) lap(mu(phi))        base = eval = phi,  hm = m dt / 2
//     stage 2:  new  = phi + (m dt)   lap(mu(half))       base = phi, eval = half,  hm = m dt
// Algorithm (one fused pass per stage, one thread per cell): the thread computes the chemical potential mu at
// its cell and at its 2*DIM neighbours, each from the (2*DIM+1)-point Laplacian of phi there, then the
// Laplacian of mu and the new value -- the 13-point (2D) / 25-point (3D) stencil of seed 001 figure 5, read
// through the L1/L2 caches (neighbouring threads share most of it), written once. No intermediate mu array.
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
