// Marching cubes (Lorensen & Cline 1987) on a float32 volume in C order, shape (nz, ny, nx).
//
// sim/marching_cubes.py prepends the case tables (MC_TRI_COUNT, MC_TRI_EDGES, MC_EDGE_ORIGIN,
// MC_EDGE_AXIS) as __constant__ arrays and runs, one thread per grid point:
//   1. mc_classify      marks the crossed grid edges owned by the point (+x, +y, +z) and, if the point
//                       is a cube origin, stores the cube's case and triangle count;
//   2. (host)           inclusive scans of both give each crossed edge its vertex index and each cube
//                       the end of its triangle range;
//   3. mc_emit_vertices writes one vertex (and normal) per crossed edge, shared by its triangles;
//   4. mc_emit_faces    writes the cube's triangles as vertex indices.
// A corner is inside when its value is above the level; vertices are in (z, y, x) order and normals
// point down the gradient (from high to low values), like the NumPy version in the same module.

extern "C" {

__device__ __forceinline__ bool mc_inside(const float* vol, long long i, float level) {
    return vol[i] > level;
}

__global__ void mc_classify(const float* __restrict__ vol, float level, int nx, int ny, int nz,
                            int* __restrict__ edge_flags, int* __restrict__ cube_tris,
                            unsigned char* __restrict__ cube_case) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)nx * ny * nz;
    if (idx >= n) return;
    int x = (int)(idx % nx);
    int y = (int)((idx / nx) % ny);
    int z = (int)(idx / ((long long)nx * ny));
    long long sy = nx, sz = (long long)nx * ny;
    bool in0 = mc_inside(vol, idx, level);
    edge_flags[3 * idx + 0] = (x + 1 < nx) && (in0 != mc_inside(vol, idx + 1, level));
    edge_flags[3 * idx + 1] = (y + 1 < ny) && (in0 != mc_inside(vol, idx + sy, level));
    edge_flags[3 * idx + 2] = (z + 1 < nz) && (in0 != mc_inside(vol, idx + sz, level));
    int cube = 0;
    if (x + 1 < nx && y + 1 < ny && z + 1 < nz) {
        // corners in (x, y, z) offset order 000 100 110 010 001 101 111 011
        const long long off[8] = {0, 1, 1 + sy, sy, sz, 1 + sz, 1 + sy + sz, sy + sz};
        for (int c = 0; c < 8; ++c) cube |= (int)mc_inside(vol, idx + off[c], level) << c;
    }
    cube_case[idx] = (unsigned char)cube;
    cube_tris[idx] = (x + 1 < nx && y + 1 < ny && z + 1 < nz) ? MC_TRI_COUNT[cube] : 0;
}

// One-sided differences at the borders, central inside (as numpy.gradient); returned as (x, y, z).
__device__ float3 mc_gradient(const float* vol, int x, int y, int z, int nx, int ny, int nz) {
    long long sy = nx, sz = (long long)nx * ny;
    long long i = (long long)z * sz + (long long)y * sy + x;
    float3 g;
    if (x == 0)            g.x = vol[i + 1] - vol[i];
    else if (x == nx - 1)  g.x = vol[i] - vol[i - 1];
    else                   g.x = 0.5f * (vol[i + 1] - vol[i - 1]);
    if (y == 0)            g.y = vol[i + sy] - vol[i];
    else if (y == ny - 1)  g.y = vol[i] - vol[i - sy];
    else                   g.y = 0.5f * (vol[i + sy] - vol[i - sy]);
    if (z == 0)            g.z = vol[i + sz] - vol[i];
    else if (z == nz - 1)  g.z = vol[i] - vol[i - sz];
    else                   g.z = 0.5f * (vol[i + sz] - vol[i - sz]);
    return g;
}

__global__ void mc_emit_vertices(const float* __restrict__ vol, float level, int nx, int ny, int nz,
                                 const int* __restrict__ edge_flags, const int* __restrict__ edge_scan,
                                 float* __restrict__ verts, float* __restrict__ normals) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)nx * ny * nz;
    if (idx >= n) return;
    int x = (int)(idx % nx);
    int y = (int)((idx / nx) % ny);
    int z = (int)(idx / ((long long)nx * ny));
    for (int a = 0; a < 3; ++a) {
        if (!edge_flags[3 * idx + a]) continue;
        int dx = a == 0, dy = a == 1, dz = a == 2;
        long long j = idx + dx + (long long)dy * nx + (long long)dz * nx * ny;
        float v0 = vol[idx], v1 = vol[j];
        float t = (level - v0) / (v1 - v0);
        long long vid = edge_scan[3 * idx + a] - 1;
        verts[3 * vid + 0] = (float)z + t * dz;
        verts[3 * vid + 1] = (float)y + t * dy;
        verts[3 * vid + 2] = (float)x + t * dx;
        float3 g0 = mc_gradient(vol, x, y, z, nx, ny, nz);
        float3 g1 = mc_gradient(vol, x + dx, y + dy, z + dz, nx, ny, nz);
        float gx = (1.f - t) * g0.x + t * g1.x;
        float gy = (1.f - t) * g0.y + t * g1.y;
        float gz = (1.f - t) * g0.z + t * g1.z;
        float inv = rsqrtf(fmaxf(gx * gx + gy * gy + gz * gz, 1e-30f));
        normals[3 * vid + 0] = -gz * inv;
        normals[3 * vid + 1] = -gy * inv;
        normals[3 * vid + 2] = -gx * inv;
    }
}

__global__ void mc_emit_faces(int nx, int ny, int nz, const unsigned char* __restrict__ cube_case,
                              const int* __restrict__ cube_tris, const int* __restrict__ tri_scan,
                              const int* __restrict__ edge_scan, int* __restrict__ faces) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)nx * ny * nz;
    if (idx >= n) return;
    int ntri = cube_tris[idx];
    if (ntri == 0) return;
    int x = (int)(idx % nx);
    int y = (int)((idx / nx) % ny);
    int z = (int)(idx / ((long long)nx * ny));
    int cube = cube_case[idx];
    long long first = (long long)tri_scan[idx] - ntri;
    for (int k = 0; k < 3 * ntri; ++k) {
        int e = MC_TRI_EDGES[cube * MC_TRI_STRIDE + k];
        long long px = x + MC_EDGE_ORIGIN[3 * e + 0];
        long long py = y + MC_EDGE_ORIGIN[3 * e + 1];
        long long pz = z + MC_EDGE_ORIGIN[3 * e + 2];
        long long gid = ((pz * ny + py) * nx + px) * 3 + MC_EDGE_AXIS[e];
        faces[3 * first + k] = edge_scan[gid] - 1;
    }
}

}  // extern "C"
