// The pointwise passes of the semi-implicit stabilised spectral steps of the Cahn-Hilliard equation on a periodic
// grid (spectral.py: the first-order step of Chen and Shen 1998 with the stabiliser of Shen and Yang 2010, and
// the variable-step SBDF2 step; the formulas are in spectral.py's module docstring). A step is
//     ch_nonlinear            N = u phi^3 - (b + S) phi                    (real space; phi -> N)
//     cuFFT R2C               N -> N_hat                                   (half spectrum)
//     ch_spectral_update      phi_hat' = (phi_hat - a N_hat) / (1 + a (S + K k^2)),   a = dt m k^2
//  or ch_sbdf2_update         phi_hat' = phi_hat + (g (phi_hat - phi_hat_prev) - a (D phi_hat + e0 N_hat - e1 N_hat_prev)
//                                        [+ eta]) / (c + a D),   D = S + K k^2
//     cuFFT C2R               phi_hat' / n -> phi'
// The updates write phi_hat' (kept for the next step) and phi_hat' / n (the input of the unnormalised C2R
// transform, which destroys it), and take k^2 from the index: k^2 = k_0^2 + k_1^2 (+ k_2^2), summed in double
// from three tiny per-axis tables (spectral.axis_tables; L1-resident) in the order of spectral.wavenumbers_squared
// and rounded to Real once, so it equals the k^2 array the NumPy twin uses bit for bit, and no k^2 grid is read.
//
// Adaptive steps decided on the device (ch_nonlinear_change + ch_spectral_update_control; spectral.py
// DeviceControl): the nonlinear pass of step i also reduces max |phi_i - phi_{i-1}|, max phi_{i-1} and
// max -phi_{i-1} into one of two result slots (the keys of ch_keys.cuh; it zeroes the other slot, as ch_change
// does), and the update of step i reads them, computes dt_i from dt_{i-1} exactly as model.adapted_dt does (the
// same double operations in the same order, Python's max/min semantics for NaN), the SBDF2 coefficients exactly
// as spectral.bdf2_coefficients does (or the first-order restart when dt_i > MAX_RATIO dt_{i-1}), and records
// dt_i in dt_log[i]. The host reads the dt log back once per run of steps instead of synchronising every step.
//
// Launches: the nonlinear passes are flat (one thread per cell; the reducing one grid-stride, capped like
// ch_change); the updates run blocks of 32 x 8 threads over (last axis, the other axes flattened), so the
// index needs one division in 3D and none in 2D. Complex numbers are (re, im) pairs, float2/double2.
#include "ch_keys.cuh"

#ifndef __CUDACC__
struct float2 { float x, y; };
struct double2 { double x, y; };
#endif

#define CH_UPDATE_X 32
#define CH_UPDATE_Y 8
#define CH_NONLINEAR_THREADS 256

template <typename Real> struct ChComplex;
template <> struct ChComplex<float> { typedef float2 T; };
template <> struct ChComplex<double> { typedef double2 T; };

// ---- real space ----------------------------------------------------------------------------------------------
// the stabilised nonlinear term, in the twin's order: u * p * p * p - bs * p
template <typename Real>
__device__ __forceinline__ Real ch_nonlinear_term(Real p, Real u, Real bs)
{
    return u * p * p * p - bs * p;
}

template <typename Real>
__global__ void __launch_bounds__(CH_NONLINEAR_THREADS)
ch_nonlinear(const Real* __restrict__ phi, Real* __restrict__ out, const long long n, const Real u, const Real bs)
{
    const long long i = (long long)blockIdx.x * CH_NONLINEAR_THREADS + threadIdx.x;
    if (i < n) out[i] = ch_nonlinear_term(phi[i], u, bs);
}

// the same, and the statistics of the previous step (phi = phi_i, prev = phi_{i-1}) into result[0..2]; the
// same launch zeroes clear[0..2]. ``prev`` may be ``out`` (each cell is read before it is written, by the same
// thread), so neither is __restrict__.
template <typename Real>
__global__ void __launch_bounds__(CH_NONLINEAR_THREADS)
ch_nonlinear_change(const Real* __restrict__ phi, const Real* prev, Real* out, const long long n, const Real u,
                    const Real bs, unsigned long long* __restrict__ result, unsigned long long* __restrict__ clear)
{
    const int t = (int)threadIdx.x;
    if (blockIdx.x == 0 && t < 3) clear[t] = 0ull;
    unsigned long long change = 0ull, top = 0ull, neg_bottom = 0ull;
    const long long stride = (long long)gridDim.x * CH_NONLINEAR_THREADS;
    for (long long i = (long long)blockIdx.x * CH_NONLINEAR_THREADS + t; i < n; i += stride) {
        const Real p = phi[i], old = prev[i];
        const Real d = p - old;                                          // rounded to Real, as ch_change's
        change = ch_umax(change, ch_abs_key((double)d));
        top = ch_umax(top, ch_key((double)old));
        neg_bottom = ch_umax(neg_bottom, ch_key(-(double)old));
        out[i] = ch_nonlinear_term(p, u, bs);
    }
    ch_block_max3<CH_NONLINEAR_THREADS>(change, top, neg_bottom, result);
}

// ---- the half spectrum ---------------------------------------------------------------------------------------
// This thread's cell of the half spectrum: flat index, k^2 (Real); false when outside. Rows are the leading axes
// flattened (n0 in 2D, n0 n1 in 3D), columns the last axis (nl = n_last / 2 + 1); kk = [k_0^2 | k_1^2 | k_2^2].
template <typename Real, int DIM>
__device__ __forceinline__ bool ch_mode(const double* __restrict__ kk, int n0, int n1, int nl, long long& i, Real& k2)
{
    const int col = (int)(blockIdx.x * CH_UPDATE_X + threadIdx.x);
    const int row = (int)(blockIdx.y * CH_UPDATE_Y + threadIdx.y);
    const int rows = DIM == 3 ? n0 * n1 : n0;
    if (col >= nl || row >= rows) return false;
    i = (long long)row * nl + col;
    double s;
    if (DIM == 3) {
        const int i0 = row / n1, i1 = row - i0 * n1;
        s = kk[i0] + kk[n0 + i1];
        s = s + kk[n0 + n1 + col];
    } else {
        s = kk[row] + kk[n0 + col];
    }
    k2 = (Real)s;
    return true;
}

template <typename Real>
__device__ __forceinline__ Real ch_first_order_part(Real ph, Real nh, Real a, Real den)
{
    return (ph - nh * a) / den;
}

template <typename Real>
__device__ __forceinline__ Real ch_sbdf2_part(Real ph, Real pm, Real nh, Real nm, Real eta, Real a, Real d, Real den,
                                              Real g, Real e0, Real e1)
{
    return ph + (g * (ph - pm) - a * (d * ph + (e0 * nh - e1 * nm)) + eta) / den;
}

template <typename Real>
__device__ __forceinline__ Real ch_sbdf2_part(Real ph, Real pm, Real nh, Real nm, Real a, Real d, Real den, Real g,
                                              Real e0, Real e1)
{
    return ph + (g * (ph - pm) - a * (d * ph + (e0 * nh - e1 * nm))) / den;
}

template <typename Real, typename C>
__device__ __forceinline__ void ch_store(C* __restrict__ out, C* __restrict__ scaled, long long i, Real re, Real im,
                                         Real inv_n)
{
    C v;
    v.x = re;
    v.y = im;
    out[i] = v;
    v.x = re * inv_n;
    v.y = im * inv_n;
    scaled[i] = v;
}

// the first-order update (coefficients from the host)
template <typename Real, int DIM>
__global__ void __launch_bounds__(CH_UPDATE_X * CH_UPDATE_Y)
ch_spectral_update(const typename ChComplex<Real>::T* __restrict__ ph, const typename ChComplex<Real>::T* __restrict__ nh,
                   typename ChComplex<Real>::T* __restrict__ out, typename ChComplex<Real>::T* __restrict__ scaled,
                   const double* __restrict__ kk, const int n0, const int n1, const int nl, const Real dtm,
                   const Real stab, const Real grad, const Real inv_n)
{
    long long i;
    Real k2;
    if (!ch_mode<Real, DIM>(kk, n0, n1, nl, i, k2)) return;
    const Real a = dtm * k2;
    const Real den = Real(1) + a * (stab + grad * k2);
    const typename ChComplex<Real>::T p = ph[i], q = nh[i];
    ch_store(out, scaled, i, ch_first_order_part(p.x, q.x, a, den), ch_first_order_part(p.y, q.y, a, den), inv_n);
}

// the SBDF2 update (coefficients from the host; NOISE: the transform of the step's noise added to the rise)
template <typename Real, int DIM, bool NOISE>
__global__ void __launch_bounds__(CH_UPDATE_X * CH_UPDATE_Y)
ch_sbdf2_update(const typename ChComplex<Real>::T* __restrict__ ph, const typename ChComplex<Real>::T* __restrict__ pm,
                const typename ChComplex<Real>::T* __restrict__ nh, const typename ChComplex<Real>::T* __restrict__ nm,
                const typename ChComplex<Real>::T* __restrict__ eta, typename ChComplex<Real>::T* __restrict__ out,
                typename ChComplex<Real>::T* __restrict__ scaled, const double* __restrict__ kk, const int n0,
                const int n1, const int nl, const Real dtm, const Real stab, const Real grad, const Real c, const Real g,
                const Real e0, const Real e1, const Real inv_n)
{
    long long i;
    Real k2;
    if (!ch_mode<Real, DIM>(kk, n0, n1, nl, i, k2)) return;
    const Real a = dtm * k2;
    const Real d = stab + grad * k2;
    const Real den = c + a * d;
    const typename ChComplex<Real>::T p = ph[i], pp = pm[i], q = nh[i], qq = nm[i];
    Real re, im;
    if (NOISE) {
        const typename ChComplex<Real>::T e = eta[i];
        re = ch_sbdf2_part(p.x, pp.x, q.x, qq.x, e.x, a, d, den, g, e0, e1);
        im = ch_sbdf2_part(p.y, pp.y, q.y, qq.y, e.y, a, d, den, g, e0, e1);
    } else {
        re = ch_sbdf2_part(p.x, pp.x, q.x, qq.x, a, d, den, g, e0, e1);
        im = ch_sbdf2_part(p.y, pp.y, q.y, qq.y, a, d, den, g, e0, e1);
    }
    ch_store(out, scaled, i, re, im, inv_n);
}

// ---- the step-size control on the device ---------------------------------------------------------------------
// Python's max(a, b) and min(a, b): the first argument unless the second compares greater (less)
__device__ __forceinline__ double ch_py_max(double a, double b) { return b > a ? b : a; }
__device__ __forceinline__ double ch_py_min(double a, double b) { return b < a ? b : a; }

// model.adapted_dt from the three result words of the previous step (its change, max and min of its old field)
template <typename Real>
__device__ __forceinline__ double ch_adapted_dt(double dt_current, const unsigned long long* __restrict__ stats,
                                                double dt_min, double dt_max, double max_change, double growth,
                                                double shrink)
{
    const Real change = (Real)ch_unkey(stats[0]), top = (Real)ch_unkey(stats[1]), bottom = (Real)-ch_unkey(stats[2]);
    const Real spread = top - bottom;                                    // in the field's precision
    const double rel = (double)change / ch_py_max(0.5 * (double)spread, 1e-12);
    const double factor = rel > 0 ? ch_py_min(growth, ch_py_max(shrink, max_change / rel)) : growth;
    return ch_py_min(dt_max, ch_py_max(dt_min, dt_current * factor));
}

// The update of step ``index`` of a run of adaptive steps: dt from the host (index 0) or from the previous step's
// dt (dt_log[index - 1]) and statistics (``stats``); ORDER2: the SBDF2 update when there is a history
// (``have_history`` at index 0; always after) and 0 < dt <= max_ratio dt_prev, else the first-order update,
// which the first-order integrator (ORDER2 false) always takes. Block (0, 0)'s thread 0 records dt_log[index].
template <typename Real, int DIM, bool ORDER2>
__global__ void __launch_bounds__(CH_UPDATE_X * CH_UPDATE_Y)
ch_spectral_update_control(const typename ChComplex<Real>::T* __restrict__ ph,
                           const typename ChComplex<Real>::T* __restrict__ pm,
                           const typename ChComplex<Real>::T* __restrict__ nh,
                           const typename ChComplex<Real>::T* __restrict__ nm,
                           typename ChComplex<Real>::T* __restrict__ out, typename ChComplex<Real>::T* __restrict__ scaled,
                           const double* __restrict__ kk, const int n0, const int n1, const int nl, const double m,
                           const Real stab, const Real grad, const Real inv_n,
                           const unsigned long long* __restrict__ stats, double* __restrict__ dt_log, const int index,
                           const double dt_host, const double dt_prev_host, const int have_history,
                           const double dt_min, const double dt_max, const double max_change, const double growth,
                           const double shrink, const double max_ratio)
{
    double dt, dt_prev;
    bool history;
    if (index == 0) {
        dt = dt_host;
        dt_prev = dt_prev_host;
        history = have_history != 0;
    } else {
        dt_prev = dt_log[index - 1];
        dt = ch_adapted_dt<Real>(dt_prev, stats, dt_min, dt_max, max_change, growth, shrink);
        history = true;
    }
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) dt_log[index] = dt;
    long long i;
    Real k2;
    if (!ch_mode<Real, DIM>(kk, n0, n1, nl, i, k2)) return;
    const Real dtm = (Real)(dt * m);
    const typename ChComplex<Real>::T p = ph[i], q = nh[i];
    if (ORDER2 && history && 0 < dt && dt <= max_ratio * dt_prev) {
        // spectral.bdf2_coefficients
        const double w = dt / dt_prev;
        const Real c = (Real)((1 + 2 * w) / (1 + w)), g = (Real)(w * w / (1 + w)), e0 = (Real)(1 + w), e1 = (Real)w;
        const Real a = dtm * k2;
        const Real d = stab + grad * k2;
        const Real den = c + a * d;
        const typename ChComplex<Real>::T pp = pm[i], qq = nm[i];
        ch_store(out, scaled, i, ch_sbdf2_part(p.x, pp.x, q.x, qq.x, a, d, den, g, e0, e1),
                 ch_sbdf2_part(p.y, pp.y, q.y, qq.y, a, d, den, g, e0, e1), inv_n);
    } else {
        const Real a = dtm * k2;
        const Real den = Real(1) + a * (stab + grad * k2);
        ch_store(out, scaled, i, ch_first_order_part(p.x, q.x, a, den), ch_first_order_part(p.y, q.y, a, den), inv_n);
    }
}
