// Philox4x32-10 exposed as a kernel: out[4*i + w] = word w of the call for (indices[i], tag, stream) under the
// seed. Used by the tests to check the device generator against its NumPy twin (sim/gpu/philox.py).
#include "philox.cuh"

template <int UNUSED>
__global__ void philox_words(unsigned int* __restrict__ out, const long long* __restrict__ indices, const int n,
                             const unsigned int tag, const unsigned int seed_lo, const unsigned int seed_hi,
                             const unsigned int stream_lo, const unsigned int stream_hi)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const PhiloxKey key = {seed_lo, seed_hi, stream_lo, stream_hi};
    const uint4 r = philox_draw(key, tag, (unsigned int)indices[i]);
    out[4 * i + 0] = r.x;
    out[4 * i + 1] = r.y;
    out[4 * i + 2] = r.z;
    out[4 * i + 3] = r.w;
}
