// Ising state codes for the field view (sim/models/ising/picture.py: encode_codes is the NumPy twin).
// a0: int8 spins (+1 / -1); a1: bool (one byte) mask of the cells flipped since the last frame, or null;
// a2: bool mask of the sites touched by rewiring, or null. Code: bit 0 spin up, bit 1 flipped, bit 2 rewired.
// Composed with the surface writer of render/kernels/texture_surface.cu (sim/picture.py says how).
#pragma once

__device__ __forceinline__ unsigned char cell_code(long long i, const void* a0, const void* a1, const void* a2,
                                                   float, float)
{
    unsigned char code = reinterpret_cast<const signed char*>(a0)[i] > 0 ? 1 : 0;
    if (a1 != nullptr && reinterpret_cast<const unsigned char*>(a1)[i]) code |= 2;
    if (a2 != nullptr && reinterpret_cast<const unsigned char*>(a2)[i]) code |= 4;
    return code;
}

// Four consecutive cells at once (i4 counts groups of four): one 32-bit load per array, one 32-bit store.
// Spins are int8 +-1: bit 1 of the byte is 0 for +1 (0x01) and 1 for -1 (0xFF).
#define LATTICELAB_HAS_CELL_CODE4 1
__device__ __forceinline__ unsigned int cell_code4(long long i4, const void* a0, const void* a1, const void* a2,
                                                   float, float)
{
    const unsigned int s = reinterpret_cast<const unsigned int*>(a0)[i4];
    unsigned int code = (~s >> 1) & 0x01010101u;
    if (a1 != nullptr) code |= (reinterpret_cast<const unsigned int*>(a1)[i4] & 0x01010101u) << 1;
    if (a2 != nullptr) code |= (reinterpret_cast<const unsigned int*>(a2)[i4] & 0x01010101u) << 2;
    return code;
}
