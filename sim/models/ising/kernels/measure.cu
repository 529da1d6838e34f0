// Energy and magnetisation of the rewired Ising model in one pass over the spins (a block reduction each).
//
// measure_lattice: sum over all lattice edges (site, site + e_axis) of s_i s_j, and the sum of the spins.
// A thread reads CHUNK = 4*WORDS bytes of a row and its forward neighbours (the next byte, the next row, the
// next slice) and counts unlike pairs with the same byte-wise trick as metropolis.cu: popc((a ^ b) & 0x02...).
// measure_sites does the same one site per thread (L not divisible by 4).
// measure_rewired then subtracts the lattice edges that rewiring removed and adds the edges that replaced them.
// Totals are 64-bit two's-complement sums in totals[0] (bonds) and totals[1] (spins).

template <int THREADS>
__device__ __forceinline__ void block_add(long long bonds, long long spin_sum, unsigned long long* totals)
{
    __shared__ long long partial[2][THREADS / 32];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        bonds += __shfl_down_sync(0xffffffffu, bonds, offset);
        spin_sum += __shfl_down_sync(0xffffffffu, spin_sum, offset);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        partial[0][warp] = bonds;
        partial[1][warp] = spin_sum;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        long long b = 0, s = 0;
        for (int i = 0; i < THREADS / 32; ++i) {
            b += partial[0][i];
            s += partial[1][i];
        }
        atomicAdd(&totals[0], (unsigned long long)b);
        atomicAdd(&totals[1], (unsigned long long)s);
    }
}

template <int DIM, int WORDS, int THREADS>
__global__ void __launch_bounds__(THREADS) measure_lattice(const signed char* __restrict__ spins, const int L,
                                                           unsigned long long* __restrict__ totals)
{
    constexpr int CHUNK = 4 * WORDS;
    constexpr unsigned int BIT1 = 0x02020202u;
    const int per_row = L / CHUNK;
    const long long chunks = (long long)per_row * L * (DIM == 3 ? L : 1);
    long long bonds = 0, spin_sum = 0;
    for (long long q = (long long)blockIdx.x * THREADS + threadIdx.x; q < chunks; q += (long long)gridDim.x * THREADS) {
        const int cx = (int)(q % per_row);
        const int rows = (int)(q / per_row);
        const int y = rows % L, z = rows / L;
        const int row = (z * L + y) * L, x0 = cx * CHUNK;
        unsigned int c[WORDS], down[WORDS], front[WORDS];
        const unsigned int* pc = reinterpret_cast<const unsigned int*>(spins + row + x0);
        const unsigned int* pd = reinterpret_cast<const unsigned int*>(spins + (z * L + (y == L - 1 ? 0 : y + 1)) * L + x0);
        const unsigned int* pf = reinterpret_cast<const unsigned int*>(spins + ((z == L - 1 ? 0 : z + 1) * L + y) * L + x0);
#pragma unroll
        for (int w = 0; w < WORDS; ++w) {
            c[w] = pc[w];
            down[w] = pd[w];
            if (DIM == 3) front[w] = pf[w];
        }
        const unsigned int right_byte = (unsigned char)spins[row + (x0 + CHUNK == L ? 0 : x0 + CHUNK)];
        int unlike = 0, negative = 0;
#pragma unroll
        for (int w = 0; w < WORDS; ++w) {
            const unsigned int next = w == WORDS - 1 ? right_byte : c[w == WORDS - 1 ? w : w + 1];
            const unsigned int right = __funnelshift_r(c[w], next, 8);
            unlike += __popc((c[w] ^ right) & BIT1) + __popc((c[w] ^ down[w]) & BIT1);
            if (DIM == 3) unlike += __popc((c[w] ^ front[w]) & BIT1);
            negative += __popc(c[w] & BIT1);
        }
        bonds += DIM * CHUNK - 2 * unlike;
        spin_sum += CHUNK - 2 * negative;
    }
    block_add<THREADS>(bonds, spin_sum, totals);
}

template <int DIM, int THREADS>
__global__ void __launch_bounds__(THREADS) measure_sites(const signed char* __restrict__ spins, const int L,
                                                         unsigned long long* __restrict__ totals)
{
    const int n = DIM == 3 ? L * L * L : L * L;
    long long bonds = 0, spin_sum = 0;
    for (int site = blockIdx.x * THREADS + threadIdx.x; site < n; site += gridDim.x * THREADS) {
        const int x = site % L, y = (site / L) % L, z = DIM == 3 ? site / (L * L) : 0;
        const int s = spins[site];
        int h = spins[site + (x == L - 1 ? 1 - L : 1)] + spins[site + (y == L - 1 ? 1 - L : 1) * L];
        if (DIM == 3) h += spins[site + (z == L - 1 ? 1 - L : 1) * L * L];
        bonds += s * h;
        spin_sum += s;
    }
    block_add<THREADS>(bonds, spin_sum, totals);
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS) measure_rewired(
    const signed char* __restrict__ spins, const int* __restrict__ removed_u, const int* __restrict__ removed_v,
    const int* __restrict__ added_u, const int* __restrict__ added_v, const int count,
    unsigned long long* __restrict__ totals)
{
    long long bonds = 0;
    for (int j = blockIdx.x * THREADS + threadIdx.x; j < count; j += gridDim.x * THREADS)
        bonds += spins[added_u[j]] * spins[added_v[j]] - spins[removed_u[j]] * spins[removed_v[j]];
    block_add<THREADS>(bonds, 0, totals);
}
