// Writing one-byte texels straight into an OpenGL texture that CUDA has mapped (render/interop.py), through a
// CUDA surface object: the SMs store into the texture's own block-linear layout. A frame written this way is
// cheaper than one copied with cudaMemcpy2DToArrayAsync / cudaMemcpy3DAsync into the same mapped array, and the
// cell codes are computed in the same kernel (docs/design/rendering.md).
//
// A texture of shape (D, H, W) -- D = 1 for a 2D texture -- is D*H rows of W texels. Unit i of a launch covers
// WIDE consecutive texels of one row (WIDE = 4 when W % 4 == 0: one 32-bit surface store, else WIDE = 1);
// launches are grid-stride loops over all units, so any size fits the grid.
//
// copy_to_surface:   texels from a C-contiguous uint8/int8 array of the texture's shape.
// encode_to_surface: the byte codes of a model's picture (sim/picture.py), computed from the model's arrays on
//                    the fly by the model's device function ``cell_code`` (WIDE = 1), or ``cell_code4`` for
//                    four consecutive cells at once where the encoder defines LATTICELAB_HAS_CELL_CODE4
//                    (WIDE = 4; else four ``cell_code`` calls packed into one 32-bit store), so encoding and
//                    copy are one pass. render/interop.py compiles this file behind the encoder's source, with
//                    LATTICELAB_CELL_CODE defined; alone it holds copy_to_surface only. The arrays arrive
//                    C-contiguous, bool masks as one byte per cell (0 or 1), real arrays as float32, absent
//                    ones as null pointers; for WIDE = 4 every array starts 4-byte aligned.

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

#ifdef LATTICELAB_CELL_CODE
// The codes of cells 4*i4 .. 4*i4+3, the first in the lowest byte (the texel at the lowest x).
__device__ __forceinline__ unsigned int cell_codes_of_four(const long long i4, const void* a0, const void* a1,
                                                           const void* a2, const float f0, const float f1)
{
#ifdef LATTICELAB_HAS_CELL_CODE4
    return cell_code4(i4, a0, a1, a2, f0, f1);
#else
    const long long i = 4 * i4;
    return (unsigned int)cell_code(i, a0, a1, a2, f0, f1)
         | ((unsigned int)cell_code(i + 1, a0, a1, a2, f0, f1) << 8)
         | ((unsigned int)cell_code(i + 2, a0, a1, a2, f0, f1) << 16)
         | ((unsigned int)cell_code(i + 3, a0, a1, a2, f0, f1) << 24);
#endif
}

template <int DIM, int WIDE>
__global__ void encode_to_surface(const void* __restrict__ a0, const void* __restrict__ a1,
                                  const void* __restrict__ a2, const float f0, const float f1,
                                  const unsigned long long surface, const int width, const int height,
                                  const long long units)
{
    const int per_row = width / WIDE;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < units; i += (long long)gridDim.x * blockDim.x) {
        const int x = (int)(i % per_row) * WIDE;
        const long long row = i / per_row;
        if (WIDE == 4)
            surface_store<DIM>(cell_codes_of_four(i, a0, a1, a2, f0, f1), surface, x, row, height);
        else
            surface_store<DIM>(cell_code(i, a0, a1, a2, f0, f1), surface, x, row, height);
    }
}
#endif  // LATTICELAB_CELL_CODE
