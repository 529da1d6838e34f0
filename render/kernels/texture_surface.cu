// Writing one-byte texels straight into an OpenGL texture that CUDA has mapped (render/interop.py), through a
// CUDA surface object: the SMs store into the texture's own block-linear layout. On the H100 a frame written
// this way took about 0.4 ms less than cudaMemcpy2DToArrayAsync / cudaMemcpy3DAsync into the same mapped array
// (bench/NOTES.md, "Rendering").
//
// A texture of shape (D, H, W) -- D = 1 for a 2D texture -- is D*H rows of W texels. Unit i of a launch covers
// WIDE consecutive texels of one row (WIDE = 4 when W % 4 == 0: one 32-bit load and one 32-bit surface store,
// else WIDE = 1); launches are grid-stride loops over all units, so any size fits the grid.
//
// copy_to_surface:   texels from a C-contiguous uint8/int8 array of the texture's shape.
// encode_to_surface: state codes computed from the simulation's arrays on the fly (render/upload.py encoding:
//                    bit 0 spin up, bit 1 flipped in the last step, bit 2 site touched by rewiring), so the
//                    colouring pass and the copy are one pass. Spins are int8 +-1: bit 1 of the byte is 0 for
//                    +1 (0x01) and 1 for -1 (0xFF); flipped and rewired are bool bytes (0 or 1), or absent.

template <int DIM, typename T>
__device__ __forceinline__ void surface_store(const T value, const unsigned long long surface, const int x_bytes,
                                              const long long row, const int height)
{
    const cudaSurfaceObject_t s = (cudaSurfaceObject_t)surface;
    if (DIM == 2)
        surf2Dwrite(value, s, x_bytes, (int)row);
    else
        surf3Dwrite(value, s, x_bytes, (int)(row % height), (int)(row / height));
}

template <int DIM, int WIDE>
__global__ void copy_to_surface(const unsigned char* __restrict__ texels, const unsigned long long surface,
                                const int width, const int height, const long long units)
{
    const int per_row = width / WIDE;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < units; i += (long long)gridDim.x * blockDim.x) {
        const int x = (int)(i % per_row) * WIDE;
        const long long row = i / per_row;
        if (WIDE == 4)
            surface_store<DIM>(reinterpret_cast<const unsigned int*>(texels)[i], surface, x, row, height);
        else
            surface_store<DIM>(texels[i], surface, x, row, height);
    }
}

template <int DIM, int WIDE>
__global__ void encode_to_surface(const signed char* __restrict__ spins, const unsigned char* __restrict__ flipped,
                                  const unsigned char* __restrict__ rewired, const int has_flipped,
                                  const int has_rewired, const unsigned long long surface, const int width,
                                  const int height, const long long units)
{
    const int per_row = width / WIDE;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < units; i += (long long)gridDim.x * blockDim.x) {
        const int x = (int)(i % per_row) * WIDE;
        const long long row = i / per_row;
        if (WIDE == 4) {
            const unsigned int s = reinterpret_cast<const unsigned int*>(spins)[i];
            unsigned int code = (~s >> 1) & 0x01010101u;  // bit 0 of each byte: spin up
            if (has_flipped) code |= (reinterpret_cast<const unsigned int*>(flipped)[i] & 0x01010101u) << 1;
            if (has_rewired) code |= (reinterpret_cast<const unsigned int*>(rewired)[i] & 0x01010101u) << 2;
            surface_store<DIM>(code, surface, x, row, height);
        } else {
            unsigned char code = spins[i] > 0 ? 1 : 0;
            if (has_flipped && flipped[i]) code |= 2;
            if (has_rewired && rewired[i]) code |= 4;
            surface_store<DIM>(code, surface, x, row, height);
        }
    }
}
