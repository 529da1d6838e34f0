"""Network analysis of the models' graphs: clustering coefficients, square clustering, degrees, components,
path lengths, Watts-Strogatz and Barabasi-Albert generators, and the small-world curve (issue 12).

Everything works on an undirected simple graph in CSR form (``Graph``: sorted neighbour lists, each edge in
both directions, no self-loops) held on one array module: NumPy, CuPy, or the CPU emulator's stand-in for
CuPy (sim/gpu/emulate.py). Where the module can run CUDA kernels (``RawModule``), the counts run in
kernels/graph_counts.cu and the generators in kernels/graph_generate.cu; on NumPy the same numbers come from
SciPy sparse products and vectorised NumPy twins. Results are equal, element by element, on both paths.

Definitions (seed 004, Newman et al. 2001; Watts & Strogatz 1998; Lind, Gonzalez & Herrmann 2005):

* T_v: triangles through vertex v; k_v its degree; S_v = sum of the degrees of v's neighbours.
* Newman's (global) clustering coefficient C = 3 x triangles / connected triples = sum T_v / sum C(k_v, 2).
* local clustering c_v = T_v / C(k_v, 2) (0 where k_v < 2); the mean local clustering averages it over all
  vertices (networkx's ``average_clustering``).
* square clustering c4_v = Q_v / (( k_v - 1) S_v - k_v (k_v - 1) - 2 T_v - Q_v) (0 where that is 0), with Q_v the
  number of pairs {u, w} of v's neighbours joined through a vertex other than v, counted with
  multiplicity: the squares through v (networkx's ``square_clustering``). Bipartite graphs -- the rewired
  Ising lattice keeps its checkerboard colouring -- have no triangles, so C = 0 for every p, and their
  clustering is measured by c4.
* the counts T_v and Q_v may be split over several GPUs (``clustering(g, devices=...)``): each holds the graph
  and counts its share of the vertices (seed 004, chapter 6); integers, so equal to one device's.
* the mean shortest path length l over ordered pairs of distinct vertices of the largest component, exact
  by breadth-first search from every vertex, or estimated from sampled sources with a standard error.

The small-world curve (``small_world_curve``) rebuilds the current model's geometry at other rewiring
probabilities through the registry-generic ``type(model).create`` with the model's parameters, the one
changed being the field the model's schema names as ``rewiring_field`` (a ClassVar of its ModelParams).
Nothing here names a model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from latticelab.sim.backend import to_numpy

KERNEL_DIR = Path(__file__).with_name("kernels")
COUNTS_FILE = KERNEL_DIR / "graph_counts.cu"
GENERATE_FILE = KERNEL_DIR / "graph_generate.cu"
THREADS = 256
TAG_WS, TAG_BA = 64, 65          # keep in step with kernels/graph_generate.cu
TAG_BA_STEPS = 66                # + 16 x selection round: the thesis generator's numbers (host-drawn, no kernel)
BA_METHODS = ("thesis", "batagelj-brandes")
_MAX_ROUNDS = 200
_BFS_PAIRS = 1 << 25             # (sources x vertices) visited flags held at once by the batched BFS


class GraphError(ValueError):
    """A graph that the analysis cannot take (no vertices, self-loops, ends out of range, ...)."""


# ---- the graph ----------------------------------------------------------------------------------------
@dataclass
class Graph:
    """Undirected simple graph on vertices 0 .. n-1: the arcs of vertex v are neighbours[offsets[v]:offsets[v+1]],
    sorted; every edge appears as two arcs. ``xp`` is the array module holding the arrays."""
    n: int
    offsets: Any      # int64 (n + 1,)
    neighbours: Any   # int32 (2 E,)
    xp: Any = field(default=np, repr=False)

    @property
    def n_edges(self) -> int:
        return int(self.neighbours.size) // 2

    @property
    def degrees(self):
        return self.offsets[1:] - self.offsets[:-1]

    @property
    def uses_kernels(self) -> bool:
        return hasattr(self.xp, "RawModule")

    def sources(self):
        """The source vertex of every arc (int32), Algorithm 7's S."""
        xp = self.xp
        arcs = xp.arange(self.neighbours.size, dtype=xp.int64)
        return (xp.searchsorted(self.offsets, arcs, side="right") - 1).astype(xp.int32)

    def edges(self) -> np.ndarray:
        """(E, 2) host int64 array, each edge once with u < v."""
        u = to_numpy(self.sources()).astype(np.int64)
        v = to_numpy(self.neighbours).astype(np.int64)
        keep = u < v
        return np.stack([u[keep], v[keep]], axis=1)

    def to(self, xp) -> "Graph":
        """The same graph on another array module."""
        return Graph(self.n, xp.asarray(to_numpy(self.offsets)), xp.asarray(to_numpy(self.neighbours)), xp)

    def scipy(self):
        """The adjacency matrix as a SciPy CSR matrix of int64 ones (host)."""
        from scipy.sparse import csr_matrix
        nb = to_numpy(self.neighbours)
        return csr_matrix((np.ones(nb.size, dtype=np.int64), nb, to_numpy(self.offsets)), shape=(self.n, self.n))


def from_edges(n: int, edges, xp=None, loops: str = "error") -> Graph:
    """The undirected simple graph on ``n`` vertices with the given (E, 2) edges (any array module; the pairs
    are taken unordered and repeated pairs count once). ``loops``: "error" raises GraphError on a self-loop
    (clustering and path lengths are defined for simple graphs), "drop" removes them. ``xp``: the array module
    of the result (default: NumPy)."""
    xp = xp or np
    n = int(n)
    if n <= 0:
        raise GraphError(f"a graph needs at least one vertex; got n={n}")
    if n >= 2 ** 31:
        raise GraphError(f"at most 2**31 - 1 vertices are supported; got n={n}")
    if loops not in ("error", "drop"):
        raise GraphError(f"loops must be 'error' or 'drop'; got {loops!r}")
    edges = xp.asarray(edges if hasattr(edges, "shape") else np.asarray(edges, dtype=np.int64))
    if edges.size == 0:
        edges = xp.zeros((0, 2), dtype=xp.int64)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise GraphError(f"edges must be an (E, 2) array; got shape {tuple(edges.shape)}")
    if edges.dtype.kind not in "iu":
        raise GraphError(f"edges must hold integer vertex ids; got dtype {edges.dtype}")
    u, v = edges[:, 0].astype(xp.int64), edges[:, 1].astype(xp.int64)
    if u.size:
        low, high = int(xp.minimum(u, v).min()), int(xp.maximum(u, v).max())
        if low < 0 or high >= n:
            raise GraphError(f"edge ends must be vertex ids in [0, {n}); got {low if low < 0 else high}")
    loop = u == v
    if bool(loop.any()):
        if loops == "error":
            first = int(u[loop][0])
            raise GraphError(f"self-loops are not allowed ({int(loop.sum())} found, e.g. at vertex {first}); "
                             "pass loops='drop' to remove them")
        u, v = u[~loop], v[~loop]
    keys = xp.unique(xp.concatenate([u * n + v, v * n + u]))
    src, dst = keys // n, keys % n
    offsets = xp.searchsorted(src, xp.arange(n + 1, dtype=xp.int64)).astype(xp.int64)
    return Graph(n, offsets, dst.astype(xp.int32), xp)


def graph_of(model, xp=None, stored: bool = True) -> Graph:
    """The current interaction graph of a model with the ``HasGraph`` capability (sim/model.py), on ``xp``
    (default: the model's own array module). Vertices are the flat cell indices; directed connections are
    taken undirected and repeated ones once. A model that stores its adjacency (the optional
    ``adjacency_csr()``) is measured on those arrays as they are; ``stored=False`` rebuilds the CSR from
    ``edges()`` instead (what the tests compare it with)."""
    from latticelab.sim.model import HasGraph
    if not isinstance(model, HasGraph):
        raise GraphError(f"{type(model).__name__} does not expose a graph (no edges())")
    n = int(np.prod(model.shape))
    xp = xp or getattr(model, "xp", np)
    adjacency_csr = getattr(model, "adjacency_csr", None) if stored else None
    if callable(adjacency_csr):
        return stored_graph(n, *adjacency_csr(), xp=xp)
    return from_edges(n, model.edges(), xp=xp)


def stored_graph(n: int, offsets, neighbours, xp=None) -> Graph:
    """A Graph on a model's own CSR arrays (see HasGraph in sim/model.py); their shape is checked, their
    promise (sorted rows, both directions, no self-loops) is the model's."""
    xp = xp or np
    offsets, neighbours = to_numpy(offsets), to_numpy(neighbours)
    if offsets.shape != (n + 1,) or offsets[0] != 0 or offsets[-1] != neighbours.size or neighbours.ndim != 1:
        raise GraphError(f"adjacency_csr(): expected offsets of length {n + 1} from 0 to the number of "
                         f"neighbours ({neighbours.size}); got shape {offsets.shape}")
    if neighbours.size and (neighbours.min() < 0 or neighbours.max() >= n):
        raise GraphError(f"adjacency_csr(): neighbours must be cell indices in [0, {n})")
    return Graph(n, xp.asarray(offsets.astype(np.int64, copy=False)),
                 xp.asarray(neighbours.astype(np.int32, copy=False)), xp)


# ---- kernels --------------------------------------------------------------------------------------------
def _kernel(xp, filename, name, names):
    from latticelab.sim.gpu.kernels import get_kernel
    return get_kernel(xp, filename, name, names)


def _grid(count: int, most: int = 1 << 16) -> int:
    return max(1, min(most, -(-int(count) // THREADS)))


def _segment_sums(xp, offsets, values):
    """Sums of ``values`` (per arc) over each vertex's arcs, int64."""
    c = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(values.astype(xp.int64))])
    return c[offsets[1:]] - c[offsets[:-1]]


def arc_counts(g: Graph, what: str, arcs: tuple[int, int] | None = None):
    """Per-arc kernel outputs (kernels/graph_counts.cu): "triangles" gives |N(v) n N(u)| for every arc
    v -> u, "squares" the sum over v's neighbours w > u of |N(u) n N(w)| - 1; ``arcs`` (first, end): those arcs
    only. Kernel path only."""
    if not g.uses_kernels:
        raise GraphError("arc_counts runs the CUDA kernels; the graph's array module has none (use CuPy or "
                         "the emulator)")
    xp = g.xp
    name = {"triangles": "arc_triangles", "squares": "arc_squares"}[what]
    kernel = _kernel(xp, COUNTS_FILE, name, ("arc_triangles", "arc_squares"))
    first, end = arcs if arcs is not None else (0, int(g.neighbours.size))
    n_arcs = end - first
    out = xp.zeros(max(n_arcs, 1), dtype=xp.int64)
    if n_arcs:
        kernel((_grid(n_arcs),), (THREADS,), (g.offsets, g.neighbours, g.sources(), np.int64(n_arcs), out,
                                              np.int64(first)))
    return out[:n_arcs]


def _row_blocks(g: Graph, budget: int = 1 << 24):
    """Row ranges whose two-step products hold about ``budget`` entries (keeps the CPU path's memory flat)."""
    deg = to_numpy(g.degrees).astype(np.int64)
    two_step = np.concatenate([[0], np.cumsum(deg * np.maximum(deg, 1))])
    start = 0
    while start < g.n:
        stop = int(np.searchsorted(two_step, two_step[start] + budget, side="right"))
        stop = min(max(stop, start + 1), g.n)
        yield start, stop
        start = stop


def _cpu_counts(g: Graph, squares: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """(T_v, Q_v or None) on the host by SciPy sparse products: 2 T_v = sum_u A_vu (A^2)_vu and
    Q_v = ((A^4)_vv - S_v - k_v (k_v - 1)) / 2, with (A^4)_vv = sum_x (A^2)_vx^2 (A symmetric)."""
    a = g.scipy()
    deg = np.diff(a.indptr).astype(np.int64)
    tri = np.zeros(g.n, dtype=np.int64)
    quad = np.zeros(g.n, dtype=np.int64) if squares else None
    s = a @ deg if squares else None
    for r0, r1 in _row_blocks(g):
        rows = a[r0:r1]
        two = rows @ a
        tri[r0:r1] = np.asarray(two.multiply(rows).sum(axis=1)).ravel() // 2
        if squares:
            a4 = np.asarray(two.multiply(two).sum(axis=1)).ravel()
            k = deg[r0:r1]
            quad[r0:r1] = (a4 - s[r0:r1] - k * (k - 1)) // 2
    return tri, quad


def triangle_counts(g: Graph):
    """T_v, the triangles through each vertex (int64 on the graph's module; host NumPy on the CPU path)."""
    if g.uses_kernels:
        return _segment_sums(g.xp, g.offsets, arc_counts(g, "triangles")) // 2
    return _cpu_counts(g, squares=False)[0]


def square_counts(g: Graph):
    """Q_v, the squares through each vertex as counted by the square clustering coefficient (int64)."""
    if g.uses_kernels:
        return _segment_sums(g.xp, g.offsets, arc_counts(g, "squares"))
    return _cpu_counts(g, squares=True)[1]


def _host_counts(g: Graph, squares: bool):
    if g.uses_kernels:
        tri = to_numpy(triangle_counts(g))
        return tri, (to_numpy(square_counts(g)) if squares else None)
    return _cpu_counts(g, squares)


# ---- the vertices partitioned over several devices ---------------------------------------------------------
def vertex_ranges(g: Graph, parts: int) -> list[tuple[int, int]]:
    """Contiguous vertex ranges, one per part, of about equal numbers of arcs (the counts' work)."""
    offsets = to_numpy(g.offsets).astype(np.int64)
    total = int(offsets[-1])
    cuts = [int(np.searchsorted(offsets, total * i // parts, side="left")) for i in range(1, parts)]
    bounds = np.maximum.accumulate(np.minimum([0, *cuts, g.n], g.n))
    return [(int(bounds[i]), int(bounds[i + 1])) for i in range(parts)]


def partitioned_counts(g: Graph, devices, squares: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """(T_v, Q_v or None) on the host, the vertices partitioned over ``devices`` (CUDA device ids of the graph's
    module, CuPy or the CPU emulator's stand-in): as on the thesis's two GPUs (seed 004, chapter 6), every device
    holds the whole graph and counts the arcs of its contiguous vertex range (vertex_ranges); the counts are
    integers, joined in vertex order: equal to one device's."""
    from latticelab.sim.multidevice.exchange import make_parts
    if not g.uses_kernels:
        raise GraphError("counting over several devices runs the CUDA kernels; the graph's array module has none")
    parts = make_parts(g.xp, devices)
    offsets, neighbours = to_numpy(g.offsets), to_numpy(g.neighbours)
    launched = []
    for part, (v0, v1) in zip(parts, vertex_ranges(g, len(parts))):
        with part.use():
            xp = part.xp
            local = Graph(g.n, xp.asarray(offsets), xp.asarray(neighbours), xp)
            a0, a1 = int(offsets[v0]), int(offsets[v1])
            rows = local.offsets[v0:v1 + 1] - a0
            tri = _segment_sums(xp, rows, arc_counts(local, "triangles", (a0, a1))) // 2
            quad = _segment_sums(xp, rows, arc_counts(local, "squares", (a0, a1))) if squares else None
            launched.append((part, tri, quad))
    tri, quad = [], []
    for part, t, q in launched:               # every device counts before the first result is copied back
        with part.use():
            tri.append(to_numpy(t).astype(np.int64))
            quad.append(to_numpy(q).astype(np.int64) if squares else None)
    return np.concatenate(tri), (np.concatenate(quad) if squares else None)


# ---- clustering ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Clustering:
    newman: float          # C = 3 x triangles / connected triples (0 when there are no triples)
    mean_local: float      # mean of c_v over all vertices
    mean_square: float     # mean of c4_v over all vertices
    triangles: int
    triples: int
    bipartite: bool        # no odd cycle: C is 0 by construction, c4 measures the clustering

    @property
    def measure(self) -> str:
        """Which clustering a small-world picture uses: "square" on bipartite graphs, else "newman"."""
        return "square" if self.bipartite else "newman"

    @property
    def value(self) -> float:
        return self.mean_square if self.bipartite else self.newman


def _local(tri: np.ndarray, deg: np.ndarray) -> np.ndarray:
    pairs = deg * (deg - 1) // 2
    out = np.zeros(tri.size, dtype=np.float64)
    np.divide(tri, pairs, out=out, where=pairs > 0)
    return out


def _square(quad: np.ndarray, tri: np.ndarray, deg: np.ndarray, s: np.ndarray) -> np.ndarray:
    potential = (deg - 1) * s - deg * (deg - 1) - 2 * tri - quad
    out = np.zeros(quad.size, dtype=np.float64)
    np.divide(quad, potential, out=out, where=(potential > 0) & (deg > 1))
    return out


def local_clustering(g: Graph) -> np.ndarray:
    """c_v per vertex (host float64), networkx's ``clustering``."""
    tri, _ = _host_counts(g, squares=False)
    return _local(tri, to_numpy(g.degrees).astype(np.int64))


def square_clustering(g: Graph) -> np.ndarray:
    """c4_v per vertex (host float64), networkx's ``square_clustering``."""
    tri, quad = _host_counts(g, squares=True)
    return _square(quad, tri, *_deg_and_s(g))


def _deg_and_s(g: Graph) -> tuple[np.ndarray, np.ndarray]:
    """(k_v, S_v) on the host; S_v is summed on the graph's own module."""
    xp = g.xp
    deg = g.degrees.astype(xp.int64)
    s = _segment_sums(xp, g.offsets, deg[g.neighbours])
    return to_numpy(deg).astype(np.int64), to_numpy(s).astype(np.int64)


def is_bipartite(g: Graph) -> bool:
    """Whether the graph has no odd cycle: a component is bipartite exactly when its bipartite double cover
    (vertices (v, side), each edge uv joining (u, 0)-(v, 1) and (u, 1)-(v, 0)) splits it in two, i.e. when
    (v, 0) and (v, 1) land in different components. Vectorised, on the graph's own path."""
    xp, n = g.xp, g.n
    src = g.sources().astype(xp.int64)
    dst = g.neighbours.astype(xp.int64)
    cover = Graph(2 * n, None, None, xp)
    u = xp.concatenate([src, src + n])
    v = xp.concatenate([dst + n, dst])
    labels = _labels(cover, u, v)
    return bool(np.all(labels[:n] != labels[n:]))


def clustering(g: Graph, squares: bool = True, devices=None) -> Clustering:
    """Newman's C, the mean local and (``squares``) mean square clustering, in one pass of the counts;
    ``devices`` (several CUDA device ids): the counts with the vertices partitioned over them
    (partitioned_counts), the same numbers."""
    if devices is not None and len(devices) > 1:
        tri, quad = partitioned_counts(g, devices, squares)
    else:
        tri, quad = _host_counts(g, squares)
    deg, s = _deg_and_s(g)
    triples = int((deg * (deg - 1) // 2).sum())
    n_tri = int(tri.sum()) // 3
    c4 = float(_square(quad, tri, deg, s).mean()) if squares else float("nan")
    return Clustering(newman=3 * n_tri / triples if triples else 0.0, mean_local=float(_local(tri, deg).mean()),
                      mean_square=c4, triangles=n_tri, triples=triples,
                      bipartite=n_tri == 0 and is_bipartite(g))


# ---- degrees and components ------------------------------------------------------------------------------
def degree_histogram(g: Graph) -> np.ndarray:
    """Number of vertices of each degree 0 .. max (host int64), networkx's ``degree_histogram``."""
    return np.bincount(to_numpy(g.degrees).astype(np.int64)).astype(np.int64)


def component_labels(g: Graph) -> np.ndarray:
    """Smallest-vertex labels of the connected components (host int64; sim/analysis/components.py's
    convention): SciPy's csgraph on the CPU path, hook-and-jump on the graph's module on the kernel path."""
    return _labels(g, g.sources(), g.neighbours)


def _labels(g: Graph, u, v) -> np.ndarray:
    from latticelab.sim.analysis.components import csgraph_labels, label_by_hook_and_jump
    if g.uses_kernels:
        xp = g.xp
        return to_numpy(label_by_hook_and_jump(g.n, u.astype(xp.int64), v.astype(xp.int64), xp=xp))
    return csgraph_labels(g.n, u, v)


@dataclass(frozen=True)
class Components:
    count: int
    sizes: np.ndarray      # largest first
    largest_root: int      # the smallest vertex of the (first) largest component


def components(g: Graph) -> Components:
    labels = component_labels(g)
    roots, sizes = np.unique(labels, return_counts=True)
    order = np.lexsort((roots, -sizes))
    return Components(count=int(roots.size), sizes=sizes[order].astype(np.int64), largest_root=int(roots[order[0]]))


# ---- path lengths ----------------------------------------------------------------------------------------
def bfs_distance_sums(g: Graph, sources) -> tuple[np.ndarray, np.ndarray]:
    """(sum of distances to all reached vertices, number reached including the source) from each source, by a
    level-synchronous breadth-first search of all sources at once on the graph's module (host int64)."""
    xp = g.xp
    sources = np.asarray(to_numpy(sources), dtype=np.int64).ravel()
    totals = np.zeros(sources.size, dtype=np.int64)
    reached = np.zeros(sources.size, dtype=np.int64)
    batch = max(1, _BFS_PAIRS // max(g.n, 1))
    n = g.n
    for b0 in range(0, sources.size, batch):
        src = xp.asarray(sources[b0:b0 + batch])
        m = int(src.size)
        visited = xp.zeros(m * n, dtype=bool)
        fs = xp.arange(m, dtype=xp.int64)
        fv = src.astype(xp.int64)
        visited[fs * n + fv] = True
        tot = xp.zeros(m, dtype=xp.int64)
        cnt = xp.ones(m, dtype=xp.int64)
        level = 0
        while fv.size:
            level += 1
            start = g.offsets[fv]
            deg = g.offsets[fv + 1] - start
            ends = xp.cumsum(deg)
            total = int(ends[-1])
            if total == 0:
                break
            idx = xp.arange(total, dtype=xp.int64)
            owner = xp.searchsorted(ends, idx, side="right")
            arc = start[owner] + idx - (ends[owner] - deg[owner])
            keys = fs[owner] * n + g.neighbours[arc].astype(xp.int64)
            keys = xp.unique(keys[~visited[keys]])
            visited[keys] = True
            fs, fv = keys // n, keys % n
            found = xp.bincount(fs, minlength=m)
            tot += level * found
            cnt += found
        totals[b0:b0 + m] = to_numpy(tot)
        reached[b0:b0 + m] = to_numpy(cnt)
    return totals, reached


@dataclass(frozen=True)
class PathLength:
    mean: float            # mean shortest path length over ordered pairs of the largest component
    error: float           # standard error of the estimate (0 when exact)
    sources: int           # breadth-first searches done
    component_size: int    # vertices of the largest component (the whole graph when connected)
    connected: bool

    @property
    def exact(self) -> bool:
        return self.sources >= self.component_size


def mean_path_length(g: Graph, samples: int | None = None, seed: int = 0) -> PathLength:
    """l of the largest component: exact (BFS from each of its vertices) when ``samples`` is None or not
    smaller than the component, else the mean over ``samples`` random sources (without replacement) with the
    standard error of that mean (finite-population corrected)."""
    labels = component_labels(g)
    comp = components(g)
    members = np.flatnonzero(labels == comp.largest_root)
    size = members.size
    if size < 2:
        raise GraphError("the mean path length needs a component of at least two vertices; the largest has "
                         f"{size}")
    if samples is not None and samples < 2:
        raise GraphError(f"samples must be at least 2 (or None for the exact value); got {samples}")
    if samples is None or samples >= size:
        totals, _ = bfs_distance_sums(g, members)
        return PathLength(float(totals.sum()) / (size * (size - 1)), 0.0, size, size, comp.count == 1)
    chosen = np.sort(np.random.default_rng(seed).choice(members, size=samples, replace=False))
    totals, _ = bfs_distance_sums(g, chosen)
    per_source = totals / (size - 1)
    error = per_source.std(ddof=1) / math.sqrt(samples) * math.sqrt(1 - samples / size)
    return PathLength(float(per_source.mean()), float(error), samples, size, comp.count == 1)


# ---- generators ------------------------------------------------------------------------------------------
def _key_words(seed: int, stream: int) -> tuple:
    from latticelab.sim.gpu.philox import split64
    s_lo, s_hi = split64(seed)
    t_lo, t_hi = split64(stream)
    return tuple(np.uint32(x) for x in (s_lo, s_hi, t_lo, t_hi))


def _ws_targets_numpy(slots: np.ndarray, n: int, half_k: int, threshold: int, rnd: int, key) -> np.ndarray:
    """NumPy twin of ws_targets."""
    from latticelab.sim.gpu.philox import draw
    words = draw(key, TAG_WS + 16 * rnd, slots).astype(np.uint64)
    u, j = slots // half_k, slots % half_k + 1
    offset = 1 + ((words[1] * np.uint64(n - 1)) >> np.uint64(32)).astype(np.int64)
    rewire = np.ones(slots.size, bool) if rnd > 0 else words[0] < np.uint64(threshold)
    return np.where(rewire, (u + offset) % n, (u + j) % n)


def watts_strogatz(n: int, k: int, p: float, seed: int = 0, xp=None, stream: int = 0) -> Graph:
    """Watts-Strogatz small-world graph: a ring of ``n`` vertices each joined to its ``k`` nearest neighbours
    (k even), each edge's far end moved with probability ``p`` to a uniform vertex, repeated and
    self-joining edges redrawn. Random numbers are Philox keyed by (seed, stream): the same graph on every
    array module (kernels/graph_generate.cu on CuPy and the emulator)."""
    xp = xp or np
    if k < 2 or k % 2 or k >= n - 1:
        raise GraphError(f"k must be even, at least 2 and below n - 1 = {n - 1}; got k={k}")
    if not 0 <= p <= 1:
        raise GraphError(f"p must be in [0, 1]; got {p}")
    from latticelab.sim.gpu.philox import threshold32
    half = k // 2
    n_slots = n * half
    threshold = int(threshold32(p)) if p < 1 else 2 ** 32 - 1
    key = _key_words(seed, stream)
    target = xp.zeros(n_slots, dtype=xp.int64)
    pending = xp.arange(n_slots, dtype=xp.int64)
    owner = xp.arange(n_slots, dtype=xp.int64) // half
    lattice_end = (owner + xp.arange(n_slots, dtype=xp.int64) % half + 1) % n
    rewired = xp.zeros(n_slots, dtype=bool)
    kernel = (_kernel(xp, GENERATE_FILE, "ws_targets", ("ws_targets", "ba_targets"))
              if hasattr(xp, "RawModule") else None)
    for rnd in range(_MAX_ROUNDS):
        if kernel is not None:
            out = xp.zeros(max(int(pending.size), 1), dtype=xp.int64)
            kernel((_grid(pending.size),), (THREADS,),
                   (pending, np.int64(pending.size), np.int64(n), np.int32(half), np.uint32(threshold),
                    np.int32(rnd), *key, out))
            target[pending] = out[:pending.size]
        else:
            target[pending] = xp.asarray(_ws_targets_numpy(to_numpy(pending), n, half, threshold, rnd,
                                                           (seed, stream)))
        if rnd == 0:
            rewired = target != lattice_end
        pending = _ws_collisions(xp, owner, target, rewired, n)
        if pending.size == 0:
            edges = xp.stack([owner, target], axis=1)
            return from_edges(n, edges, xp=xp)
    raise GraphError(f"could not place the rewired edges of a ({n}, {k}, {p}) Watts-Strogatz graph without "
                     "repeats; use a larger n")


def _ws_collisions(xp, owner, target, rewired, n):
    """Slots whose rewired edge repeats an edge of a lower slot or a kept lattice edge (to draw again)."""
    keys = xp.minimum(owner, target) * n + xp.maximum(owner, target)
    # kept lattice edges first, then by slot: the first of each key keeps it
    order = xp.lexsort(xp.stack([xp.arange(keys.size), rewired.astype(xp.int64), keys]))
    sk = keys[order]
    repeat = xp.zeros(keys.size, dtype=bool)
    repeat[1:] = sk[1:] == sk[:-1]
    bad = xp.zeros(keys.size, dtype=bool)
    bad[order] = repeat
    return xp.flatnonzero(bad & rewired).astype(xp.int64)


def _ba_core(m0: int) -> np.ndarray:
    i, j = np.triu_indices(m0, 1)
    return np.stack([i, j], axis=1).ravel().astype(np.int64)


def _ba_targets_numpy(core_ends: np.ndarray, m0: int, m: int, n_slots: int, key) -> np.ndarray:
    """NumPy twin of ba_targets: draw every slot's end, then resolve the references by pointer jumping."""
    from latticelab.sim.gpu.philox import draw
    core = core_ends.size // 2
    slots = core + np.arange(n_slots, dtype=np.int64)
    t = m0 + (slots - core) // m
    earlier = 2 * (core + (t - m0) * m)
    end = ((draw(key, TAG_BA, slots)[0].astype(np.uint64) * earlier.astype(np.uint64)) >> np.uint64(32)).astype(
        np.int64)
    result = np.full(n_slots, -1, dtype=np.int64)
    in_core = end < 2 * core
    result[in_core] = core_ends[end[in_core]]
    even = ~in_core & (end % 2 == 0)
    result[even] = m0 + (end[even] // 2 - core) // m
    ref = np.where(result < 0, end // 2 - core, np.arange(n_slots))   # an earlier drawn slot, or itself
    while True:
        nxt = np.where(result[ref] >= 0, ref, ref[ref])
        if np.array_equal(nxt, ref):
            break
        ref = nxt
    return result[ref]


def barabasi_albert(n: int, m: int, seed: int = 0, xp=None, stream: int = 0, method: str = "thesis") -> Graph:
    """Barabasi-Albert scale-free graph: a complete core of m + 1 vertices, then each new vertex joined to
    ``m`` earlier vertices chosen with probability proportional to their degree. Philox keyed by (seed, stream):
    the same graph on every array module.

    ``method``: "thesis" (default) follows thesis 003, section 5.2 (``ba_thesis_edges``): exactly m distinct
    new edges per vertex, so m (m + 1) / 2 + (n - m - 1) m edges, no self-loops, no repeats; its steps run
    one after another (O(n^2) work, as in the thesis). "batagelj-brandes" samples all edges at once (Batagelj &
    Brandes 2005's edge-list view, kernels/graph_generate.cu on a GPU): fast for large n, but a target drawn
    twice by one new vertex gives one edge, so a few vertices have fewer than m new edges."""
    xp = xp or np
    if m < 1 or m >= n:
        raise GraphError(f"m must be in [1, n); got m={m}, n={n}")
    if method == "thesis":
        return from_edges(n, ba_thesis_edges(n, m, seed, xp, stream), xp=xp)
    if method != "batagelj-brandes":
        raise GraphError(f"method must be one of {', '.join(BA_METHODS)}; got {method!r}")
    m0 = m + 1
    core_ends = _ba_core(m0)
    n_slots = (n - m0) * m
    if hasattr(xp, "RawModule") and n_slots:
        kernel = _kernel(xp, GENERATE_FILE, "ba_targets", ("ws_targets", "ba_targets"))
        out = xp.zeros(n_slots, dtype=xp.int64)
        kernel((_grid(n_slots),), (THREADS,), (xp.asarray(core_ends), np.int64(core_ends.size // 2), np.int64(m0),
                                               np.int64(m), np.int64(n_slots), *_key_words(seed, stream), out))
        target = out
    else:
        target = xp.asarray(_ba_targets_numpy(core_ends, m0, m, n_slots, (seed, stream)))
    new = m0 + xp.arange(n_slots, dtype=xp.int64) // m
    edges = xp.concatenate([xp.asarray(core_ends.reshape(-1, 2)), xp.stack([new, target], axis=1)])
    return from_edges(n, edges, xp=xp)


def ba_thesis_edges(n: int, m: int, seed: int = 0, xp=None, stream: int = 0):
    """The (E, 2) edge list of the Barabasi-Albert generator of thesis 003, section 5.2: the sequential
    Algorithm 16 (5.2.1), with each step done the way the GPU version does it (5.2.3, Algorithms 17 and 18).

    The core is the complete graph on n0 = m + 1 vertices (5.2: every core vertex equally likely for the first
    new vertex; m <= n0 makes m distinct edges possible). Then for t = n0 .. n-1:

    1. the propensities Pi(v_i) = k_i / 2|E| of the existing vertices and their inclusive prefix sum (the
       thesis's compute_pi_kernel and cudppScan); here in integers, the prefix sums of the degrees;
    2. m - c random numbers r in [0, 2|E|) (the thesis's [0, 1) scaled by 2|E|), drawn on the host as in
       Algorithm 17; vertex v_i takes r when cum(i-1) <= r < cum(i) (select_nbr_kernel's interval test);
    3. a vertex hit twice, or already chosen in an earlier round, is taken once (the thesis's flag array F);
       the round repeats with only m - c new numbers -- never more, which would bias the choice -- until c = m;
    4. v_t's sorted list of m neighbours is kept and every chosen vertex's degree grows by one (append_kernel).

    Randomness: word 0 of Philox4x32 under key (seed, stream) at counter ((t - n0) m + j, TAG_BA_STEPS + 16
    round), so every array module gives the same graph. Returns the edges on ``xp``: the core's, then
    (t, neighbour) for each new vertex in order; no self-loops and no repeated pair, by construction."""
    from latticelab.sim.gpu.philox import draw
    xp = xp or np
    if m < 1 or m >= n:
        raise GraphError(f"m must be in [1, n); got m={m}, n={n}")
    m0 = m + 1
    if (n - m0) * m >= 2 ** 32:
        raise GraphError(f"n x m must stay below 2**32 for the generator's random counters; got n={n}, m={m}")
    degree = xp.zeros(n, dtype=xp.int64)
    degree[:m0] = m0 - 1
    chosen_all = np.empty((n - m0, m), dtype=np.int64)
    # the first round's numbers do not depend on the graph, so they are drawn for every step at once
    first_words = draw((seed, stream), TAG_BA_STEPS, np.arange((n - m0) * m)).reshape(4, n - m0, m)[0]
    for t in range(m0, n):
        total = np.uint64(m0 * (m0 - 1) + 2 * m * (t - m0))          # 2|E| before v_t joins
        cum = xp.cumsum(degree[:t])
        chosen = np.empty(0, dtype=np.int64)
        for rnd in range(_MAX_ROUNDS):
            need = m - chosen.size
            if need == 0:
                break
            words = (first_words[t - m0] if rnd == 0 else
                     draw((seed, stream), TAG_BA_STEPS + 16 * rnd, (t - m0) * m + np.arange(need))[0])
            r = ((words.astype(np.uint64) * total) >> np.uint64(32)).astype(np.int64)
            hit = to_numpy(xp.searchsorted(cum, xp.asarray(r), side="right"))
            chosen = _add_new(chosen, hit, m)
        else:
            raise GraphError(f"could not choose {m} distinct neighbours for vertex {t} in {_MAX_ROUNDS} rounds")
        chosen_all[t - m0] = chosen
        degree[xp.asarray(chosen)] += 1
        degree[t] = m
    new = np.repeat(np.arange(m0, n, dtype=np.int64), m)
    edges = np.concatenate([_ba_core(m0).reshape(-1, 2), np.stack([new, chosen_all.ravel()], axis=1)])
    return xp.asarray(edges)


def _add_new(chosen: np.ndarray, hit: np.ndarray, m: int) -> np.ndarray:
    """``chosen`` with the vertices of ``hit`` it lacks (each once, in draw order), sorted; at most m in all."""
    _, first = np.unique(hit, return_index=True)
    fresh = hit[np.sort(first)]
    fresh = fresh[~np.isin(fresh, chosen)][:m - chosen.size]
    return np.sort(np.concatenate([chosen, fresh]))


# ---- the small-world curve -------------------------------------------------------------------------------
def rewiring_field(model_or_class) -> str | None:
    """The parameter a model's schema names as its rewiring probability (``Params.rewiring_field``), or None."""
    cls = model_or_class if isinstance(model_or_class, type) else type(model_or_class)
    params = getattr(cls, "Params", None)
    name = getattr(params, "rewiring_field", None)
    return name if isinstance(name, str) and params is not None and name in params.model_fields else None


@dataclass(frozen=True)
class SmallWorldPoint:
    p: float
    clustering: Clustering
    path: PathLength


@dataclass
class SmallWorldCurve:
    field: str
    measure: str                       # "newman" or "square"
    reference: SmallWorldPoint | None = None
    points: list[SmallWorldPoint] = field(default_factory=list)

    def ratios(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p, C(p)/C(0), l(p)/l(0)) of the points so far."""
        ref = self.reference
        c0 = (ref.clustering.mean_square if self.measure == "square" else ref.clustering.newman) or float("nan")
        ps = np.array([q.p for q in self.points])
        cs = np.array([(q.clustering.mean_square if self.measure == "square" else q.clustering.newman)
                       for q in self.points]) / c0
        ls = np.array([q.path.mean for q in self.points]) / ref.path.mean
        return ps, cs, ls


def measure_point(model_class, params: dict, field_name: str, p: float, backend: str = "numpy",
                  samples: int | None = 64, seed: int = 0, xp=None) -> SmallWorldPoint:
    """Build the model at rewiring ``p`` (all other parameters kept) and measure its graph."""
    model = model_class.create(backend=backend, **{**params, field_name: p})
    g = graph_of(model, xp=xp)
    return SmallWorldPoint(float(p), clustering(g), mean_path_length(g, samples=samples, seed=seed))


def default_probabilities(count: int = 10, low: float = 1e-4, high: float = 1.0) -> np.ndarray:
    """Log-spaced rewiring probabilities for the curve (Watts & Strogatz's figure 2 spans 1e-4 .. 1)."""
    return np.logspace(math.log10(low), math.log10(high), count)


def small_world_curve(model, probabilities=None, samples: int | None = 64, seed: int = 0, backend: str | None = None,
                      on_point: Callable[[SmallWorldCurve], None] | None = None,
                      cancelled: Callable[[], bool] | None = None) -> SmallWorldCurve:
    """C(p)/C(0) and l(p)/l(0) for the current model's geometry at other rewiring probabilities. The model is
    rebuilt through ``type(model).create`` with its parameters, ``rewiring_field`` changed; ``on_point`` is
    called after the reference and after each point, ``cancelled`` is asked between points. The running model
    is only read (its class and parameters)."""
    return curve_for(type(model), dict(model.params.model_dump()), backend or getattr(model, "backend_name", "numpy"),
                     probabilities, samples, seed, on_point, cancelled)


def curve_for(model_class, params: dict, backend: str = "numpy", probabilities=None, samples: int | None = 64,
              seed: int = 0, on_point=None, cancelled=None, measure=measure_point) -> SmallWorldCurve | None:
    """``small_world_curve`` from a model class and plain parameters (what a worker thread is handed).
    ``measure`` has ``measure_point``'s signature: the caller may have each point measured elsewhere (the
    window sends them to a worker process) and return None to end the curve there (cancelled)."""
    name = rewiring_field(model_class)
    if name is None:
        raise GraphError(f"{model_class.__name__} names no rewiring parameter (Params.rewiring_field), so its "
                         "geometry cannot be rebuilt at other p")
    probabilities = default_probabilities() if probabilities is None else np.asarray(probabilities, float)
    ref = measure(model_class, params, name, 0.0, backend, samples, seed)
    if ref is None:
        return None
    curve = SmallWorldCurve(name, ref.clustering.measure, ref)
    if on_point:
        on_point(curve)
    for p in probabilities:
        if cancelled is not None and cancelled():
            break
        point = measure(model_class, params, name, float(p), backend, samples, seed)
        if point is None:
            break
        curve.points.append(point)
        if on_point:
            on_point(curve)
    return curve
