// Naive checkerboard Metropolis: the baseline of `latticelab bench sim`, the straightforward kernel a first GPU
// port would be (its rate is in bench/results/sim-<gpu>.json as each Metropolis case's baseline_value).
//
// One thread per site of the lattice, int8 spins +-1, regular periodic lattice only; the sites of the other
// colour return at once. The random number of each site is read from a float32 array filled by
// cupy.random before every half-sweep, and exp() is evaluated per site: the plain way to write it.
template <int DIM>
__global__ void naive_metropolis(signed char* s, const float* r, const float beta, const int L, const int colour)
{
    const long long n = DIM == 2 ? (long long)L * L : (long long)L * L * L;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int x = (int)(i % L), y = (int)((i / L) % L), z = DIM == 3 ? (int)(i / ((long long)L * L)) : 0;
    if (((x + y + z) & 1) != colour) return;
    const long long row = i - x, plane = (long long)z * L * L;
    int h = s[row + (x + 1) % L] + s[row + (x + L - 1) % L]
          + s[plane + (long long)((y + 1) % L) * L + x] + s[plane + (long long)((y + L - 1) % L) * L + x];
    if (DIM == 3) {
        const long long line = (long long)y * L + x, area = (long long)L * L;
        h += s[((z + 1) % L) * area + line] + s[((z + L - 1) % L) * area + line];
    }
    const int sc = s[i];
    const float dE = 2.0f * sc * h;
    if (dE <= 0.0f || r[i] < __expf(-beta * dE)) s[i] = -sc;
}
