// Cortical model, the network: thesis 003, section 8.2 and Algorithm 58 ("generate the network structure").
// NumPy twin: network.py connect.
//
// Uniform in-degree, pull model: receiver i = y L + x gets k sources. Source j's offset (dx, dy) is a pair of
// normal deviates (sigma = r/3, Box-Muller from the Philox counter (i, TAG_CONNECT, j, attempt)) rounded to the
// nearest integers, floor(sigma z + 1/2); an offset outside the disc dx^2 + dy^2 <= r^2 or on the receiver
// itself is drawn again with the next attempt. The source is ((y + dy) mod L) L + (x + dx) mod L, stored at
// sources[j * N + i] (figure 8.3: consecutive receivers at consecutive addresses). One thread per (j, i).
// After MAX_ATTEMPTS rejections (probability below 1e-100 for any r >= 1) the right-hand neighbour is taken.
#include "cortex_math.cuh"

#define CORTEX_MAX_ATTEMPTS 1000

template <int THREADS>
__global__ void __launch_bounds__(THREADS) cortex_connect(int* __restrict__ sources, const int L, const int k,
                                                          const int r, const double sigma,
                                                          const unsigned int seed_lo, const unsigned int seed_hi)
{
    const long long n = (long long)L * L, total = n * k;
    for (long long q = (long long)blockIdx.x * THREADS + threadIdx.x; q < total; q += (long long)gridDim.x * THREADS) {
        const int j = (int)(q / n), i = (int)(q % n);
        const int x = i % L, y = i / L;
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
        const int sx = ((x + dx) % L + L) % L, sy = ((y + dy) % L + L) % L;
        sources[q] = sy * L + sx;
    }
}
