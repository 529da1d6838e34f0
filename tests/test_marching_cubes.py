"""Marching cubes: case tables, the NumPy twin of the GPU algorithm, the CUDA kernels' logic compiled for
the host, and (on a CUDA machine) the GPU path against scikit-image."""
import shutil
import subprocess

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter

from latticelab.sim.analysis.marching_cubes import (KERNEL_FILE, _kernel_source, case_tables, marching_cubes,
                                mesh_area, mesh_signed_volume)


def sphere_volume(n=48, centre=(22.7, 24.1, 23.3), radius=None):
    z, y, x = np.mgrid[:n, :n, :n].astype(np.float32)
    return -np.sqrt((z - centre[0]) ** 2 + (y - centre[1]) ** 2 + (x - centre[2]) ** 2)


def smooth_noise(shape=(40, 50, 60), seed=0, pad=0):
    rng = np.random.default_rng(seed)
    vol = gaussian_filter(rng.normal(size=shape), 2).astype(np.float32)
    if pad:
        out = np.full(tuple(s + 2 * pad for s in shape), vol.min() - 1, dtype=np.float32)
        out[pad:-pad, pad:-pad, pad:-pad] = vol
        vol = out
    return vol


def directed_edges(faces):
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]).astype(np.int64)
    return e[:, 0] * (1 << 32) + e[:, 1], e[:, 1] * (1 << 32) + e[:, 0]


def test_case_tables_are_complementary_in_size_and_empty_only_for_uniform_cubes():
    counts, table = case_tables()
    assert counts[0] == 0 and counts[255] == 0
    assert (counts[1:255] > 0).all()
    # a single inside (or outside) corner is cut off by exactly one triangle
    for c in range(8):
        assert counts[1 << c] == 1 and counts[255 ^ (1 << c)] == 1
    # triangles only use edges whose two corners differ
    from latticelab.sim.analysis.marching_cubes import EDGES
    for case in range(256):
        inside = [(case >> c) & 1 for c in range(8)]
        used = table[case][table[case] >= 0]
        assert len(used) == 3 * counts[case]
        for e in used:
            a, b = EDGES[e]
            assert inside[a] != inside[b]


@pytest.mark.parametrize("radius", [6.0, 11.5, 17.0])
def test_sphere_area_and_volume_match_the_formulae(radius):
    vol = sphere_volume()
    mesh = marching_cubes(vol, -radius, method="numpy")
    area, volume = mesh_area(mesh.vertices, mesh.faces), mesh_signed_volume(mesh.vertices, mesh.faces)
    # flat triangles between points on the sphere cut it short by a relative amount of order
    # (grid step / radius)^2 (about 0.31/r^2 for the area and 0.6/r^2 for the volume)
    tol = 0.7 / radius ** 2
    assert area == pytest.approx(4 * np.pi * radius ** 2, rel=tol)
    assert volume == pytest.approx(4 / 3 * np.pi * radius ** 3, rel=tol)
    # vertices lie on the sphere to within the interpolation error
    r = np.linalg.norm(mesh.vertices - np.array([22.7, 24.1, 23.3]), axis=1)
    assert np.abs(r - radius).max() < 0.05


def test_closed_surface_is_watertight_and_consistently_oriented():
    vol = smooth_noise(pad=2)
    mesh = marching_cubes(vol, 0.01, method="numpy")
    forward, backward = directed_edges(mesh.faces)
    assert np.unique(forward).size == forward.size          # no directed edge twice
    assert np.isin(backward, forward).all()                  # every edge has its opposite: closed
    assert mesh_signed_volume(mesh.vertices, mesh.faces) > 0  # high values enclosed, faces outward
    # face winding agrees with the gradient normals (x, y, z frame)
    xyz = mesh.vertices[:, ::-1]
    f = mesh.faces
    face_n = np.cross(xyz[f[:, 1]] - xyz[f[:, 0]], xyz[f[:, 2]] - xyz[f[:, 0]])
    assert np.mean((face_n * mesh.normals[f[:, 0]][:, ::-1]).sum(axis=1) > 0) > 0.95


@pytest.mark.parametrize("level", [-0.02, 0.0, 0.013])
def test_numpy_path_agrees_with_scikit_image(level):
    vol = smooth_noise()
    ours = marching_cubes(vol, level, method="numpy")
    ref = marching_cubes(vol, level, method="skimage")
    assert ours.n_vertices == pytest.approx(ref.n_vertices, rel=0.01)
    assert mesh_area(ours.vertices, ours.faces) == pytest.approx(mesh_area(ref.vertices, ref.faces), rel=0.01)
    # the same vertex set: one per crossed edge
    a = np.unique(np.round(ours.vertices, 3), axis=0)
    b = np.unique(np.round(ref.vertices, 3), axis=0)
    common = (a[:, None] == b[None]).all(-1).any(1).sum() if a.shape[0] < 3000 else None
    if common is not None:
        assert common >= 0.99 * a.shape[0]


def test_level_outside_the_data_gives_an_empty_mesh_and_bad_input_is_named():
    vol = smooth_noise((8, 8, 8))
    for method in ("numpy", "skimage"):
        mesh = marching_cubes(vol, 10.0, method=method)
        assert mesh.n_vertices == 0 and mesh.n_faces == 0
    with pytest.raises(ValueError, match="volume"):
        marching_cubes(np.zeros((4, 4)), 0.0)
    with pytest.raises(ValueError, match="level"):
        marching_cubes(vol, float("nan"))
    with pytest.raises(ValueError, match="method"):
        marching_cubes(vol, 0.0, method="fast")


HOST_SHIM = r"""
#include <cmath>
#include <cstdio>
#include <vector>
struct dim3_ { unsigned x, y, z; };
static dim3_ blockIdx, threadIdx, blockDim;
struct float3 { float x, y, z; };
#define __global__
#define __device__
#define __forceinline__ inline
#define __constant__ static const
#define __restrict__
static inline float shim_rsqrtf(float v) { return 1.0f / std::sqrt(v); }
#define rsqrtf shim_rsqrtf  /* C23 libcs may declare their own rsqrtf */
#include "kernel.cu"
int main(int argc, char** argv) {
    FILE* in = std::fopen(argv[1], "rb");
    int dims[3]; float level;
    if (std::fread(dims, 4, 3, in) != 3 || std::fread(&level, 4, 1, in) != 1) return 2;
    int nx = dims[0], ny = dims[1], nz = dims[2];
    long long n = (long long)nx * ny * nz;
    std::vector<float> vol(n);
    if ((long long)std::fread(vol.data(), 4, n, in) != n) return 3;
    std::vector<int> flags(3 * n), tris(n), escan(3 * n), tscan(n);
    std::vector<unsigned char> cases(n);
    blockDim.x = 1; threadIdx.x = 0;
    for (long long i = 0; i < n; ++i) { blockIdx.x = (unsigned)i;
        mc_classify(vol.data(), level, nx, ny, nz, flags.data(), tris.data(), cases.data()); }
    int s = 0; for (long long i = 0; i < 3 * n; ++i) escan[i] = (s += flags[i]);
    int t = 0; for (long long i = 0; i < n; ++i) tscan[i] = (t += tris[i]);
    std::vector<float> verts(3 * (size_t)s), normals(3 * (size_t)s);
    std::vector<int> faces(3 * (size_t)t);
    for (long long i = 0; i < n; ++i) { blockIdx.x = (unsigned)i;
        mc_emit_vertices(vol.data(), level, nx, ny, nz, flags.data(), escan.data(), verts.data(), normals.data());
        mc_emit_faces(nx, ny, nz, cases.data(), tris.data(), tscan.data(), escan.data(), faces.data()); }
    FILE* out = std::fopen(argv[2], "wb");
    std::fwrite(&s, 4, 1, out); std::fwrite(&t, 4, 1, out);
    std::fwrite(verts.data(), 4, verts.size(), out); std::fwrite(normals.data(), 4, normals.size(), out);
    std::fwrite(faces.data(), 4, faces.size(), out);
    std::fclose(out);
    return 0;
}
"""


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    """The CUDA kernels of sim/kernels/marching_cubes.cu compiled as plain C++, one 'thread' at a time."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler to run the CUDA kernels' logic on the host")
    d = tmp_path_factory.mktemp("mc_host")
    (d / "kernel.cu").write_text(_kernel_source())
    (d / "shim.cpp").write_text(HOST_SHIM)
    build = subprocess.run([cxx, "-O2", "-std=c++17", "-o", str(d / "mc"), str(d / "shim.cpp")],
                           capture_output=True, text=True)
    if build.returncode != 0:
        pytest.fail(f"compiling the kernels for the host failed:\n{build.stderr[-3000:]}")

    def run(vol, level):
        nz, ny, nx = vol.shape
        with open(d / "in.bin", "wb") as f:
            np.array([nx, ny, nz], np.int32).tofile(f)
            np.array([level], np.float32).tofile(f)
            np.ascontiguousarray(vol, np.float32).tofile(f)
        subprocess.run([str(d / "mc"), str(d / "in.bin"), str(d / "out.bin")], check=True)
        raw = np.fromfile(d / "out.bin", dtype=np.int32)
        nv = raw[0]                                   # raw[1]: the triangle count, implied by the rest
        floats = raw[2:2 + 6 * nv].view(np.float32)
        return floats[:3 * nv].reshape(-1, 3), floats[3 * nv:].reshape(-1, 3), raw[2 + 6 * nv:].reshape(-1, 3)
    return run


@pytest.mark.parametrize("shape,quantile", [((17, 23, 29), 0.5), ((12, 12, 40), 0.8), ((2, 9, 5), 0.3)])
def test_cuda_kernels_compiled_for_the_host_match_the_numpy_twin(host_kernel, shape, quantile):
    vol = smooth_noise(shape, seed=sum(shape))
    level = float(np.quantile(vol, quantile))
    verts, normals, faces = host_kernel(vol, level)
    ref = marching_cubes(vol, level, method="numpy")
    assert faces.shape[0] > 0
    np.testing.assert_array_equal(faces, ref.faces)
    np.testing.assert_allclose(verts, ref.vertices, atol=1e-5)
    np.testing.assert_allclose(normals, ref.normals, atol=1e-4)


def test_kernel_file_names_its_algorithm():
    text = KERNEL_FILE.read_text()
    assert "Lorensen" in text and "mc_classify" in text


@pytest.mark.gpu
@pytest.mark.parametrize("level", [0.0, 0.015])
def test_gpu_mesh_agrees_with_scikit_image(level):
    import cupy
    vol = smooth_noise((64, 80, 96), seed=3)
    gpu = marching_cubes(cupy.asarray(vol), level)            # auto -> CUDA for a CuPy volume
    assert isinstance(gpu.vertices, cupy.ndarray)
    ref = marching_cubes(vol, level, method="skimage")
    assert gpu.n_vertices == pytest.approx(ref.n_vertices, rel=0.01)
    area_gpu = mesh_area(gpu.vertices, gpu.faces)
    assert area_gpu == pytest.approx(mesh_area(ref.vertices, ref.faces), rel=0.01)
    twin = marching_cubes(vol, level, method="numpy")
    np.testing.assert_array_equal(gpu.faces.get(), twin.faces)
    np.testing.assert_allclose(gpu.vertices.get(), twin.vertices, atol=1e-4)


@pytest.mark.gpu
def test_gpu_sphere_area_and_repeated_levels_reuse_buffers():
    import cupy
    vol = cupy.asarray(sphere_volume())
    for radius in (15.0, 8.0, 15.0):
        mesh = marching_cubes(vol, -radius)
        assert mesh_area(mesh.vertices, mesh.faces) == pytest.approx(4 * np.pi * radius ** 2, rel=0.01)


def test_bench_iso_writes_its_case_and_never_overwrites(tmp_path):
    import argparse
    import json

    from latticelab.bench import iso as bench_iso
    parser = argparse.ArgumentParser()
    bench_iso.add_arguments(parser)
    args = parser.parse_args(["--L", "16", "--repeats", "1", "--backend", "numpy", "--source", "synthetic",
                              "--levels", "0.2,0.5", "--out", str(tmp_path / "iso.json"), "--commit", "abc1234"])
    assert bench_iso.main(args) == 0
    assert bench_iso.main(args) == 0
    first = json.loads((tmp_path / "iso.json").read_text())
    assert (tmp_path / "iso-1.json").exists()
    case = first["cases"][0]
    assert case["case"] == "iso-3d-L16" and case["metric"] == "ms_per_update"
    assert case["value"] > 0 and case["baseline"] == "scikit-image-cpu"
    assert case["ratio"] == pytest.approx(case["baseline_value"] / case["value"], rel=0.02, abs=0.01)  # rounding
    assert first["commit"] == "abc1234" and first["device"] == "CPU"
    bad = parser.parse_args(["--levels", "0.5,1.5", "--backend", "numpy"])
    assert bench_iso.main(bad) == 2
