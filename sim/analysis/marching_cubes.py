"""Iso-surfaces of 3D scalar volumes by marching cubes (Lorensen & Cline 1987).

Three paths give the same kind of mesh -- vertices in array-index order (axis0, axis1, axis2), i.e.
(z, y, x), one vertex per crossed grid edge, shared by the triangles around it, and faces wound counter-clockwise
seen from the low-value side in the right-handed (x, y, z) frame, as scikit-image does:

* ``method="skimage"``: scikit-image's ``marching_cubes`` (Lewiner's variant), the CPU reference.
* ``method="numpy"``: this module's vectorised NumPy version of the GPU algorithm, on the same case
  tables as the CUDA kernels; it exists so the tables and the indexing can be tested without a GPU.
* ``method="cuda"``: ``sim/kernels/marching_cubes.cu`` through CuPy: classify every cube and mark
  crossed edges, exclusive scans give each crossed edge its vertex index and each cube its first
  triangle, then one kernel emits vertices and normals and another the faces. The mesh stays on the
  GPU (CuPy arrays).

The case table is built here from the marching cubes rule rather than typed in: in every cube the
surface boundary is traced over the six faces, and a face with two diagonally opposite inside corners
(the ambiguous face of Lorensen & Cline's case table) always separates those corners. Because that
choice depends only on the face's own corners, neighbouring cubes agree on every shared face and the
surface has no cracks (the original complement-symmetric table could leave holes).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

METHODS = ("auto", "skimage", "numpy", "cuda")
KERNEL_FILE = Path(__file__).with_name("kernels") / "marching_cubes.cu"

# Cube corners as (x, y, z) offsets, x = array axis 2, y = axis 1, z = axis 0.
CORNERS = np.array([(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0),
                    (0, 0, 1), (1, 0, 1), (1, 1, 1), (0, 1, 1)], dtype=np.int64)
# The 12 cube edges as corner pairs.
EDGES = np.array([(0, 1), (1, 2), (3, 2), (0, 3), (4, 5), (5, 6), (7, 6), (4, 7),
                  (0, 4), (1, 5), (2, 6), (3, 7)], dtype=np.int64)


@dataclass
class Mesh:
    """A triangle mesh; arrays are NumPy or CuPy (same module for all three)."""
    vertices: object   # (V, 3) float32, array-index order (axis0, axis1, axis2)
    faces: object      # (F, 3) int32
    normals: object    # (V, 3) float32 unit vectors in (z, y, x) order, pointing towards lower values

    @property
    def n_vertices(self) -> int:
        return int(self.vertices.shape[0])

    @property
    def n_faces(self) -> int:
        return int(self.faces.shape[0])


def _edge_origin_and_axis():
    """For each cube edge: offset (x, y, z) of its lower end and its axis (0=x, 1=y, 2=z)."""
    lo = CORNERS[EDGES[:, 0]]
    axis = np.argmax(CORNERS[EDGES[:, 1]] - lo, axis=1)
    return lo, axis


def _faces_ccw():
    """The six cube faces as corner lists, counter-clockwise seen from outside the cube."""
    faces = []
    for axis in range(3):
        for side in (0, 1):
            corners = [c for c in range(8) if CORNERS[c, axis] == side]
            pts = CORNERS[corners].astype(float)
            centre = pts.mean(axis=0)
            normal = np.zeros(3)
            normal[axis] = 1.0 if side else -1.0
            u = np.eye(3)[(axis + 1) % 3]
            v = np.cross(normal, u)
            angles = [np.arctan2(np.dot(p - centre, v), np.dot(p - centre, u)) for p in pts]
            faces.append([corners[i] for i in np.argsort(angles)])
    return faces


def _edge_between(a: int, b: int) -> int:
    for e, (c0, c1) in enumerate(EDGES):
        if {int(c0), int(c1)} == {a, b}:
            return e
    raise ValueError((a, b))


def _triangles_for_case(case: int, faces) -> list[tuple[int, int, int]]:
    """Triangles (as cube-edge triples) of one case; bit c of ``case`` set = corner c is inside (high)."""
    inside = [(case >> c) & 1 == 1 for c in range(8)]
    nxt = {}  # directed boundary segments, cube edge -> cube edge
    for ring in faces:
        n = len(ring)
        for i in range(n):
            # an inside arc starts at corner i: walk to its end, the segment closes it backwards
            if inside[ring[i]] and not inside[ring[i - 1]]:
                start_edge = _edge_between(ring[i - 1], ring[i])
                j = i
                while inside[ring[(j + 1) % n]]:
                    j += 1
                end_edge = _edge_between(ring[j % n], ring[(j + 1) % n])
                nxt[end_edge] = start_edge
    triangles = []
    while nxt:
        first = next(iter(nxt))
        loop = [first]
        while nxt[loop[-1]] != first:
            loop.append(nxt[loop[-1]])
        for e in loop:
            del nxt[e]
        triangles += [(loop[0], loop[k], loop[k + 1]) for k in range(1, len(loop) - 1)]
    return triangles


@lru_cache(maxsize=1)
def case_tables() -> tuple[np.ndarray, np.ndarray]:
    """(tri_count[256], tri_edges[256, 3 * max_tris]) with -1 padding; faces point inside -> outside."""
    faces = _faces_ccw()
    per_case = [_triangles_for_case(case, faces) for case in range(256)]
    # Orient: a lone inside corner 0 must get a normal pointing away from it (towards +x+y+z).
    lo, axis = _edge_origin_and_axis()
    mid = lo + 0.5 * np.eye(3)[axis]
    a, b, c = (mid[list(e)] for e in zip(*per_case[1]))
    flip = np.dot(np.cross(b - a, c - a)[0], [1, 1, 1]) < 0
    if flip:
        per_case = [[(t[0], t[2], t[1]) for t in tris] for tris in per_case]
    max_tris = max(len(t) for t in per_case)
    counts = np.array([len(t) for t in per_case], dtype=np.int32)
    table = np.full((256, 3 * max_tris), -1, dtype=np.int32)
    for case, tris in enumerate(per_case):
        if tris:
            table[case, :3 * len(tris)] = np.array(tris).ravel()
    return counts, table


def check_volume_and_level(volume, level: float):
    if getattr(volume, "ndim", None) != 3 or min(volume.shape) < 2:
        shape = getattr(volume, "shape", None)
        raise ValueError(f"volume must be a 3D array at least 2 along each axis; got shape {shape}")
    try:
        level = float(level)
    except (TypeError, ValueError):
        raise ValueError(f"level must be a number; got {level!r}") from None
    if not np.isfinite(level):
        raise ValueError(f"level must be finite; got {level}")
    return level


def marching_cubes(volume, level: float, method: str = "auto") -> Mesh:
    """Iso-surface of ``volume`` at ``level``. ``auto``: CUDA for a CuPy volume, scikit-image otherwise."""
    level = check_volume_and_level(volume, level)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    on_gpu = not isinstance(volume, np.ndarray)
    if method == "auto":
        method = "cuda" if on_gpu else "skimage"
    if method == "cuda":
        return marching_cubes_cuda(volume, level)
    host = volume.get() if on_gpu else volume
    if method == "numpy":
        return marching_cubes_numpy(host, level)
    return marching_cubes_skimage(host, level)


def marching_cubes_skimage(volume: np.ndarray, level: float) -> Mesh:
    from skimage.measure import marching_cubes as sk_marching_cubes
    lo, hi = float(volume.min()), float(volume.max())
    if not lo < level < hi:  # scikit-image raises for a level outside the data range: no surface
        return _empty_mesh(np)
    verts, faces, normals, _ = sk_marching_cubes(np.asarray(volume, dtype=np.float32), level)
    return Mesh(verts.astype(np.float32), faces.astype(np.int32), normals.astype(np.float32))


def _empty_mesh(xp) -> Mesh:
    return Mesh(xp.zeros((0, 3), xp.float32), xp.zeros((0, 3), xp.int32), xp.zeros((0, 3), xp.float32))


def _gradient(volume: np.ndarray) -> np.ndarray:
    """(3, ...) gradient in (x, y, z) order: central differences inside, one-sided at the borders."""
    return np.stack([np.gradient(volume, axis=a) for a in (2, 1, 0)]).astype(np.float32)


def marching_cubes_numpy(volume: np.ndarray, level: float) -> Mesh:
    """Vectorised host version of the CUDA algorithm (same tables, same vertex order)."""
    vol = np.asarray(volume, dtype=np.float32)
    nz, ny, nx = vol.shape
    inside = vol > level
    counts, table = case_tables()
    # crossed edges along x, y, z from each grid point; vertex ids in (point, axis) order like the kernel
    crossed = np.zeros(vol.shape + (3,), dtype=bool)
    crossed[:, :, :-1, 0] = inside[:, :, :-1] != inside[:, :, 1:]
    crossed[:, :-1, :, 1] = inside[:, :-1, :] != inside[:, 1:, :]
    crossed[:-1, :, :, 2] = inside[:-1, :, :] != inside[1:, :, :]
    flat = crossed.ravel()
    vertex_id = np.cumsum(flat, dtype=np.int64) - 1
    gids = np.flatnonzero(flat)
    point, axis = np.divmod(gids, 3)
    z, y, x = np.unravel_index(point, vol.shape)
    step = np.stack([axis == 2, axis == 1, axis == 0], axis=1).astype(np.int64)  # (dz, dy, dx)
    z1, y1, x1 = z + step[:, 0], y + step[:, 1], x + step[:, 2]
    v0, v1 = vol[z, y, x], vol[z1, y1, x1]
    t = ((level - v0) / (v1 - v0)).astype(np.float32)
    verts = np.stack([z, y, x], axis=1).astype(np.float32) + t[:, None] * step.astype(np.float32)
    grad = _gradient(vol)
    g = (1 - t)[None] * grad[:, z, y, x] + t[None] * grad[:, z1, y1, x1]  # (3, V) in x, y, z
    normals = -g[::-1].T  # to axis order, pointing down the gradient
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-30)
    # cube cases
    c = inside.astype(np.int32)
    case = np.zeros((nz - 1, ny - 1, nx - 1), dtype=np.int32)
    for bit, (dx, dy, dz) in enumerate(CORNERS):
        case |= c[dz:dz + nz - 1, dy:dy + ny - 1, dx:dx + nx - 1] << bit
    cz, cy, cx = np.nonzero(counts[case] > 0)
    cases = case[cz, cy, cx]
    lo, eaxis = _edge_origin_and_axis()
    faces = []
    for k in range(table.shape[1]):
        has = table[cases, k] >= 0
        e = table[cases[has], k]
        px = cx[has] + lo[e, 0]
        py = cy[has] + lo[e, 1]
        pz = cz[has] + lo[e, 2]
        gid = ((pz * ny + py) * nx + px) * 3 + eaxis[e]
        ids = np.full(cases.size, -1, dtype=np.int64)
        ids[has] = vertex_id[gid]
        faces.append(ids)
    faces = np.stack(faces, axis=1).reshape(cases.size, table.shape[1] // 3, 3)  # (cubes, max_tris, 3), cube order
    faces = faces[faces[:, :, 0] >= 0]
    return Mesh(verts.astype(np.float32), faces.astype(np.int32), normals.astype(np.float32))


# ----------------------------------------------------------------------------------------------- CUDA

def _kernel_source() -> str:
    counts, table = case_tables()
    lo, axis = _edge_origin_and_axis()
    fmt = lambda arr: ", ".join(str(int(v)) for v in np.asarray(arr).ravel())  # noqa: E731
    header = (
        f"#define MC_TRI_STRIDE {table.shape[1]}\n"
        f"__constant__ int MC_TRI_COUNT[256] = {{{fmt(counts)}}};\n"
        f"__constant__ signed char MC_TRI_EDGES[256 * MC_TRI_STRIDE] = {{{fmt(table)}}};\n"
        f"__constant__ int MC_EDGE_ORIGIN[12 * 3] = {{{fmt(lo)}}};\n"
        f"__constant__ int MC_EDGE_AXIS[12] = {{{fmt(axis)}}};\n"
    )
    return header + KERNEL_FILE.read_text()


@lru_cache(maxsize=None)
def _kernels(device_id: int):
    import cupy
    module = cupy.RawModule(code=_kernel_source(), options=("-std=c++17",))
    return {name: module.get_function(name)
            for name in ("mc_classify", "mc_emit_vertices", "mc_emit_faces")}


class CudaMarchingCubes:
    """GPU marching cubes that keeps its work buffers between calls (a slider moves the level often)."""

    BLOCK = 256

    def __init__(self):
        self._shape = None
        self._buffers = None

    def _buffers_for(self, shape):
        import cupy
        if self._shape != shape:
            n = int(np.prod(shape))
            self._buffers = {
                "edge_flags": cupy.empty(3 * n, dtype=cupy.int32),
                "cube_tris": cupy.empty(n, dtype=cupy.int32),
                "cube_case": cupy.empty(n, dtype=cupy.uint8),
            }
            self._shape = shape
        return self._buffers

    def __call__(self, volume, level: float) -> Mesh:
        import cupy
        level = check_volume_and_level(volume, level)
        vol = cupy.ascontiguousarray(volume, dtype=cupy.float32)
        nz, ny, nx = vol.shape
        n = nz * ny * nx
        if 3 * n >= 2 ** 31:
            raise ValueError(f"volume of shape {vol.shape} is too large for 32-bit mesh indices")
        k = _kernels(cupy.cuda.Device().id)
        buf = self._buffers_for(vol.shape)
        grid = ((n + self.BLOCK - 1) // self.BLOCK,)
        dims = (np.int32(nx), np.int32(ny), np.int32(nz))
        k["mc_classify"](grid, (self.BLOCK,), (vol, np.float32(level), *dims,
                                               buf["edge_flags"], buf["cube_tris"], buf["cube_case"]))
        edge_scan = cupy.cumsum(buf["edge_flags"], dtype=cupy.int32)   # inclusive
        tri_scan = cupy.cumsum(buf["cube_tris"], dtype=cupy.int32)
        n_verts, n_tris = (int(v) for v in cupy.stack([edge_scan[-1], tri_scan[-1]]).get())
        verts = cupy.empty((n_verts, 3), dtype=cupy.float32)
        normals = cupy.empty((n_verts, 3), dtype=cupy.float32)
        faces = cupy.empty((n_tris, 3), dtype=cupy.int32)
        if n_verts:
            k["mc_emit_vertices"](grid, (self.BLOCK,), (vol, np.float32(level), *dims,
                                                        buf["edge_flags"], edge_scan, verts, normals))
        if n_tris:
            k["mc_emit_faces"](grid, (self.BLOCK,), (*dims, buf["cube_case"], buf["cube_tris"],
                                                     tri_scan, edge_scan, faces))
        return Mesh(verts, faces, normals)


_cuda_instance: CudaMarchingCubes | None = None


def marching_cubes_cuda(volume, level: float) -> Mesh:
    global _cuda_instance
    if _cuda_instance is None:
        _cuda_instance = CudaMarchingCubes()
    return _cuda_instance(volume, level)


# ------------------------------------------------------------------------------------- mesh measures

def mesh_area(vertices, faces) -> float:
    """Total area of a triangle mesh (NumPy or CuPy arrays)."""
    if faces.shape[0] == 0:
        return 0.0
    a, b, c = (vertices[faces[:, i]] for i in range(3))
    cross = _cross(b - a, c - a)
    return float((cross ** 2).sum(axis=1).__pow__(0.5).sum() / 2)


def mesh_signed_volume(vertices, faces) -> float:
    """Signed enclosed volume, positive when the faces wind counter-clockwise seen from outside in the
    right-handed (x, y, z) frame (vertices are given in array order (z, y, x))."""
    xyz = vertices[:, ::-1]
    a, b, c = (xyz[faces[:, i]] for i in range(3))
    return float((a * _cross(b, c)).sum() / 6)


def _cross(u, v):
    return (u[:, [1, 2, 0]] * v[:, [2, 0, 1]]) - (u[:, [2, 0, 1]] * v[:, [1, 2, 0]])
