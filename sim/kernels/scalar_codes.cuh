// Byte codes of a real-valued field for the field view (sim/picture.py: encode_scalar is the NumPy twin).
// a0: float32 values; a1: bool (one byte) highlight mask or null; f0, f1: the values at the bottom of code 0
// and the top of code 253. Codes 0..253 carry floor((v - f0) / (f1 - f0) * 254) clamped to that range; NaN -> 0;
// a highlighted cell is 254. Composed with the surface writer of render/kernels/texture_surface.cu.
#pragma once

__device__ __forceinline__ unsigned char cell_code(long long i, const void* a0, const void* a1, const void* a2,
                                                   float f0, float f1)
{
    if (a1 != nullptr && reinterpret_cast<const unsigned char*>(a1)[i]) return 254;
    const float scale = f1 > f0 ? 254.0f / (f1 - f0) : 0.0f;
    float v = (reinterpret_cast<const float*>(a0)[i] - f0) * scale;
    if (v != v) v = 0.0f;  // NaN
    v = floorf(v);
    return (unsigned char)(v < 0.0f ? 0.0f : (v > 253.0f ? 253.0f : v));
}
