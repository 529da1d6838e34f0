// Cortical model, the network: thesis 003, section 8.2 and Algorithm 58 ("generate the network structure").
// NumPy twins: network.py connect (int32 lists) and connect_offsets + pack_offsets (packed offsets).
//
// Uniform in-degree, pull model: receiver i = y L + x gets k sources. Source j's offset (dx, dy) is a pair of
// normal deviates (sigma = r/3, Box-Muller from the Philox counter (i, TAG_CONNECT, j, attempt)) rounded to the
// nearest integers, floor(sigma z + 1/2); an offset outside the disc dx^2 + dy^2 <= r^2 or on the receiver
// itself is drawn again with the next attempt. After MAX_ATTEMPTS rejections (probability below 1e-100 for any
// r >= 1) the right-hand neighbour is taken.
//
// Both kernels build the lists of the receivers first .. first + count - 1 (all N = L^2 of them on one device;
// a row slab's on a split network, sim/models/cortex/slabs.py), receiver first + q at column q.
// cortex_connect: the source ((y + dy - row_offset) mod L) L + (x + dx) mod L stored at sources[j * count + q]
// (figure 8.3: consecutive receivers at consecutive addresses); row_offset 0 gives the global index, a slab's
// first halo row the index into the slab's data bytes with their halo rows. One thread per (j, q).
// cortex_connect_packed (r <= 127): the offsets themselves, dx in the low and dy in the high byte of a 16-bit
// lane, sources 4m .. 4m+3 in lanes 0 .. 3 of the 64-bit word packed[m * count + q] (lanes past k are 0). One
// thread per (m, q).
#include "cortex_math.cuh"

#define CORTEX_MAX_ATTEMPTS 1000

__device__ __forceinline__ void cortex_source_offset(const int i, const int j, const int r, const double sigma,
                                                     const unsigned int seed_lo, const unsigned int seed_hi,
                                                     int* dx_out, int* dy_out)
{
    int dx = 1, dy = 0;
    for (int attempt = 0; attempt < CORTEX_MAX_ATTEMPTS; ++attempt) {
        const uint4 w = cortex_draw((unsigned int)i, CORTEX_TAG_CONNECT, (unsigned int)j, (unsigned int)attempt,
                                    seed_lo, seed_hi);
        double z0, z1;
        cortex_normal_pair(w.x, w.y, &z0, &z1);
        const int ox = (int)floor(__dadd_rn(__dmul_rn(sigma, z0), 0.5));
        const int oy = (int)floor(__dadd_rn(__dmul_rn(sigma, z1), 0.5));
        if (ox * ox + oy * oy <= r * r && (ox != 0 || oy != 0)) {
            dx = ox;
            dy = oy;
            break;
        }
    }
    *dx_out = dx;
    *dy_out = dy;
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS) cortex_connect(int* __restrict__ sources, const int L, const int k,
                                                          const int r, const double sigma,
                                                          const unsigned int seed_lo, const unsigned int seed_hi,
                                                          const int first, const int count, const int row_offset)
{
    const long long total = (long long)count * k;
    for (long long q = (long long)blockIdx.x * THREADS + threadIdx.x; q < total; q += (long long)gridDim.x * THREADS) {
        const int j = (int)(q / count), i = first + (int)(q % count);
        const int x = i % L, y = i / L;
        int dx, dy;
        cortex_source_offset(i, j, r, sigma, seed_lo, seed_hi, &dx, &dy);
        const int sx = ((x + dx) % L + L) % L, sy = ((y + dy - row_offset) % L + L) % L;
        sources[q] = sy * L + sx;
    }
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS) cortex_connect_packed(
    unsigned long long* __restrict__ packed, const int L, const int k, const int r, const double sigma,
    const unsigned int seed_lo, const unsigned int seed_hi, const int first, const int count, const int row_offset)
{
    const int words = (k + 3) / 4;
    const long long total = (long long)count * words;
    for (long long q = (long long)blockIdx.x * THREADS + threadIdx.x; q < total; q += (long long)gridDim.x * THREADS) {
        const int m = (int)(q / count), i = first + (int)(q % count);
        unsigned long long word = 0ull;
        for (int lane = 0; lane < 4; ++lane) {
            const int j = 4 * m + lane;
            if (j >= k) break;
            int dx, dy;
            cortex_source_offset(i, j, r, sigma, seed_lo, seed_hi, &dx, &dy);
            const unsigned long long bits = (unsigned long long)(((unsigned int)dx & 0xFFu) |
                                                                 (((unsigned int)dy & 0xFFu) << 8));
            word |= bits << (16 * lane);
        }
        packed[q] = word;
    }
}
