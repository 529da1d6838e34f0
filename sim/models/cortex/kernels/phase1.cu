// Cortical model, phase 1 of a step: thesis 003, Algorithm 61 (kernel Phase1). NumPy twin: engines.py phase1.
//
// One thread per neuron. The neuron's input
// I = I_type + n_type N(0,1) + boost (never below 0), the normal deviate and the boost draw from Philox keyed
// by (seed, step, global neuron index); a neuron that fired in the previous step (v >= 30) is reset first (v = c,
// u += d); then one Euler step (dt = 1 ms) of v' = 0.04 v^2 + 5 v + 140 - u + I, u' = a (b v - u), plus the delayed
// post-synaptic input waiting in the neuron's slot (ev_idx - delay) of the extra-volts ring, which is then
// cleared; v is capped at 30 mV, and a neuron at 30 fires (bit 0 of its data byte; bit 1 is its type).
// Every float operation is an explicit round-to-nearest intrinsic, in the twin's order: no fused multiply-add.
//
// The neurons are taken in chunks of whole rows or parts of one row: a row of L >= THREADS neurons is
// cpr = ceil(L / THREADS) chunks (chunk c is row c / cpr, columns (c % cpr) THREADS ..); narrower rows go
// rpc = THREADS / L rows to a chunk (chunk c is rows c rpc ..). One chunk per block at a time (a block-stride
// loop over the chunks chunk_first .. chunk_end - 1 less skip_first .. skip_end - 1, so any grid gives the
// same result; the skip lets a slab's two border bands go in one launch). Each chunk leaves three partial sums
// for the pseudo-EEG, reduced over the chunk by a fixed tree: partials[3c], partials[3c + 1], partials[3c + 2]:
// the membrane potentials of the excitatory neurons and the numbers of firing excitatory and inhibitory neurons;
// phase 2's block 0 adds the chunks' partials (phase2.cu cortex_record). A chunk's sums depend only on the
// chunk's neurons, so the partials of a network split into row slabs (sim/models/cortex/slabs.py) that begin on
// chunk boundaries, gathered in row order, are the one-device partials: the EEG is the same bits on any number of
// devices.
//
// Slabs: the n = rows L neurons here are rows of a larger grid; base is the global index of neuron 0 (the
// Philox key is base + i) and wrap_rows says whether the rows wrap (the whole grid on one device) or not (a
// slab, whose neighbours' rows reach the halo by copies).
//
// HALO (the packed source layout, r <= 127): each neuron also writes its spike code (1 firing excitatory, 32
// firing inhibitory, 0 silent) into the halo array, rows + 2 pad rows of L + 2 pad bytes (network.py), at its
// own place and at its periodic copies near the edges (columns always; rows only with wrap_rows: at most four
// bytes), so phase 2 finds any source within pad of its receiver without wrapping.
// want_union != 0: a firing neuron also sets its byte of fired_union (the frame's union of spikes).
#include "cortex_math.cuh"

#define CORTEX_EV_MAX 75    // ring length: the longest washout (60) + the longest delay (15)

template <int THREADS, bool HALO>
__global__ void __launch_bounds__(THREADS) cortex_phase1(
    float* __restrict__ v, float* __restrict__ u, unsigned char* __restrict__ data, const float* __restrict__ tv,
    const unsigned char* __restrict__ delay, float* __restrict__ ev, double* __restrict__ partials, const int n,
    const int ev_idx, const unsigned int seed_lo, const unsigned int seed_hi, const unsigned int step_lo,
    const unsigned int step_hi, const float current_e, const float current_i, const float noise_e,
    const float noise_i, const float boost, const unsigned int boost_threshold, unsigned char* __restrict__ halo,
    const int L, const int pad, unsigned char* __restrict__ fired_union, const int want_union,
    const int chunk_first, const int chunk_end, const int skip_first, const int skip_end, const long long base,
    const int wrap_rows)
{
    __shared__ double v_sum[THREADS];
    __shared__ int fired_e[THREADS], fired_i[THREADS];
    const bool wide = L >= THREADS;
    const int cpr = wide ? (L + THREADS - 1) / THREADS : 1;  // chunks per row (wide rows)
    const int rpc = wide ? 1 : THREADS / L;                  // rows per chunk (narrow rows)
    const int rows = n / L;
    const int side = L + 2 * pad;
    const int chunks = chunk_end - chunk_first - (skip_end - skip_first);
    for (int q = blockIdx.x; q < chunks; q += gridDim.x) {
        const int chunk = chunk_first + q < skip_first ? chunk_first + q : chunk_first + q + (skip_end - skip_first);
        const int y = wide ? chunk / cpr : chunk * rpc + threadIdx.x / L;
        const int x = wide ? (chunk % cpr) * THREADS + threadIdx.x : threadIdx.x % L;
        double my_v = 0.0;
        int my_fe = 0, my_fi = 0;
        if (wide ? x < L : (threadIdx.x < rpc * L && y < rows)) {
            const int i = y * L + x;
            const int type = (data[i] >> 1) & 1;
            const uint4 r = cortex_draw((unsigned int)(base + i), CORTEX_TAG_INPUT, step_lo, step_hi, seed_lo,
                                        seed_hi);
            double z0, z1;
            cortex_normal_pair(r.x, r.y, &z0, &z1);
            const float z = __double2float_rn(z0);
            const float b_in = r.z < boost_threshold ? boost : 0.0f;
            float I = __fadd_rn(__fadd_rn(type ? current_i : current_e, __fmul_rn(z, type ? noise_i : noise_e)),
                                b_in);
            I = I > 0.0f ? I : 0.0f;
            const float t0 = tv[i], t1 = tv[(long long)n + i];
            const float a = type ? t0 : (float)0.02, b = type ? t1 : (float)0.2;
            const float c = type ? (float)-65.0 : t0, d = type ? (float)2.0 : t1;
            float vi = v[i], ui = u[i];
            if (!(vi < 30.0f)) {         // fired in the previous step: after-spike reset (equation 8.2)
                ui = __fadd_rn(ui, d);
                vi = c;
            }
            float dv = __fmul_rn(__fmul_rn((float)0.04, vi), vi);
            dv = __fadd_rn(dv, __fmul_rn((float)5.0, vi));
            dv = __fadd_rn(dv, (float)140.0);
            dv = __fsub_rn(dv, ui);
            dv = __fadd_rn(dv, I);
            const float du = __fmul_rn(a, __fsub_rn(__fmul_rn(b, vi), ui));
            int slot = ev_idx - (int)delay[i];
            if (slot < 0) slot += CORTEX_EV_MAX;
            const long long at = (long long)slot * n + i;
            float nv = __fadd_rn(__fadd_rn(vi, dv), ev[at]);
            nv = nv > 30.0f ? 30.0f : nv;
            const int fired = nv < 30.0f ? 0 : 1;
            v[i] = nv;
            u[i] = __fadd_rn(ui, du);
            ev[at] = 0.0f;
            data[i] = (unsigned char)((type << 1) | fired);
            if (HALO) {
                const unsigned char code = fired ? (type ? 32 : 1) : 0;
                const int hx = x + pad, hy = y + pad;
                // the second copy of a column (row) within pad of an edge, -1 if none (2 pad <= L: at most one)
                const int hx2 = x < pad ? hx + L : (x >= L - pad ? hx - L : -1);
                const int hy2 = !wrap_rows ? -1 : (y < pad ? hy + L : (y >= L - pad ? hy - L : -1));
                halo[(long long)hy * side + hx] = code;
                if (hx2 >= 0) halo[(long long)hy * side + hx2] = code;
                if (hy2 >= 0) {
                    halo[(long long)hy2 * side + hx] = code;
                    if (hx2 >= 0) halo[(long long)hy2 * side + hx2] = code;
                }
            }
            if (want_union && fired) fired_union[i] = 1;
            if (type == 0) {
                my_v = (double)nv;
                my_fe = fired;
            } else {
                my_fi = fired;
            }
        }
        v_sum[threadIdx.x] = my_v;
        fired_e[threadIdx.x] = my_fe;
        fired_i[threadIdx.x] = my_fi;
        __syncthreads();
        for (int half = THREADS / 2; half > 0; half >>= 1) {
            if (threadIdx.x < half) {
                v_sum[threadIdx.x] += v_sum[threadIdx.x + half];
                fired_e[threadIdx.x] += fired_e[threadIdx.x + half];
                fired_i[threadIdx.x] += fired_i[threadIdx.x + half];
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            partials[3 * chunk] = v_sum[0];
            partials[3 * chunk + 1] = (double)fired_e[0];
            partials[3 * chunk + 2] = (double)fired_i[0];
        }
        __syncthreads();             // the next chunk rewrites the shared sums
    }
}
