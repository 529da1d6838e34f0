"""Small-world rewired periodic lattices (thesis 003, sections 7.1.1 and 7.1.2).

A d-dimensional periodic lattice of side L has one edge per site and axis, joining ``site`` and
``site + e_axis``; its id is ``site * dim + axis``. Each end of every edge is independently considered
for rewiring with probability p/2. A rewired end moves to a random site of the same checkerboard colour
as the old one, so no two sites of one colour are ever joined (checkerboard updates stay race-free) and
no self-loop can appear. With ``rewire_dims`` restricted (e.g. "x"), only those coordinates of the new
end are random. Duplicate edges are redrawn.

Only sites touched by rewiring store explicit adjacency (CSR, one list per checkerboard colour); every
other site computes its neighbours from its coordinates, so memory stays near the spins' own.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from latticelab.sim.params import ParameterError

AXIS_NAMES = {2: "yx", 3: "zyx"}  # axis i of spins[...] is named AXIS_NAMES[dim][i]; "x" is the last axis
_MAX_REDRAWS = 200


def parse_rewire_dims(spec: str, dim: int) -> tuple[int, ...]:
    """Axes whose coordinates a rewired end may change: "all", or letters from "xyz" (2D: "xy")."""
    names = AXIS_NAMES[dim]
    allowed = f"'all' or a combination of {', '.join(repr(c) for c in reversed(names))}"
    if not isinstance(spec, str) or not spec:
        raise ParameterError("rewire_dims", f"must be {allowed}; got {spec!r}")
    if spec == "all":
        return tuple(range(dim))
    if any(c not in names for c in spec) or len(set(spec)) != len(spec):
        raise ParameterError("rewire_dims", f"must be {allowed} for a {dim}D lattice; got {spec!r}")
    return tuple(sorted(names.index(c) for c in spec))


def site_colour(sites: np.ndarray, dim: int, L: int) -> np.ndarray:
    """Checkerboard colour (sum of coordinates mod 2) of flat site indices."""
    return np.sum(np.stack(np.unravel_index(sites, (L,) * dim)), axis=0) % 2


@dataclass
class ModifiedAdjacency:
    """Explicit adjacency (CSR) of the modified sites of one checkerboard colour."""
    sites: np.ndarray       # sorted int64 site ids
    offsets: np.ndarray     # int64, len(sites) + 1
    neighbours: np.ndarray  # int64 site ids

    @property
    def degrees(self) -> np.ndarray:
        return np.diff(self.offsets)


@dataclass
class RewiredLattice:
    dim: int
    L: int
    p: float
    rewire_dims: str
    rewired_edge_ids: np.ndarray  # sorted int64 lattice edge ids that were rewired
    new_edges: np.ndarray         # (R, 2) int64, the edge that replaced each rewired lattice edge
    rewired_ends: int             # number of edge ends moved by rewiring
    by_colour: tuple[ModifiedAdjacency, ModifiedAdjacency] = field(init=False)

    def __post_init__(self):
        self.by_colour = _modified_adjacency(self)

    @property
    def n_sites(self) -> int:
        return self.L ** self.dim

    @property
    def n_edges(self) -> int:
        return self.dim * self.n_sites

    @property
    def modified_sites(self) -> np.ndarray:
        return np.union1d(self.by_colour[0].sites, self.by_colour[1].sites)

    @property
    def max_degree(self) -> int:
        degrees = [a.degrees.max() for a in self.by_colour if a.sites.size]
        return int(max([2 * self.dim, *degrees]))

    def edges(self) -> np.ndarray:
        """(E, 2) int64 array of the current graph, each undirected edge once."""
        ids = np.arange(self.n_edges, dtype=np.int64)
        ids = ids[~_isin_sorted(ids, self.rewired_edge_ids)]
        u, v = lattice_edge_ends(ids, self.dim, self.L)
        return np.concatenate([np.stack([u, v], axis=1), self.new_edges.reshape(-1, 2)])

    def neighbours_of(self, site: int) -> np.ndarray:
        """Neighbour list of one site (for tests and tools; updates use the vectorised forms)."""
        adj = self.by_colour[int(site_colour(np.array([site]), self.dim, self.L)[0])]
        pos = np.searchsorted(adj.sites, site)
        if pos < adj.sites.size and adj.sites[pos] == site:
            return adj.neighbours[adj.offsets[pos]:adj.offsets[pos + 1]]
        return regular_neighbours(np.array([site]), self.dim, self.L).ravel()


def lattice_edge_ends(edge_ids: np.ndarray, dim: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    sites, axes = np.divmod(edge_ids, dim)
    return sites, shift_sites(sites, axes, +1, dim, L)


def shift_sites(sites: np.ndarray, axes: np.ndarray | int, step: int, dim: int, L: int) -> np.ndarray:
    """site + step * e_axis with periodic wrap, for flat C-order indices."""
    stride = L ** (dim - 1 - np.asarray(axes, dtype=np.int64))
    coord = (sites // stride) % L
    return sites + (((coord + step) % L) - coord) * stride


def regular_neighbours(sites: np.ndarray, dim: int, L: int) -> np.ndarray:
    """(n, 2*dim) lattice neighbours of each site, in the order -axis0, +axis0, -axis1, ..."""
    cols = [shift_sites(sites, axis, step, dim, L) for axis in range(dim) for step in (-1, +1)]
    return np.stack(cols, axis=1)


def lattice_edge_id(a: np.ndarray, b: np.ndarray, dim: int, L: int) -> np.ndarray:
    """Id of the lattice edge joining a and b, or -1 where a and b are not lattice neighbours."""
    shape = (L,) * dim
    ca = np.stack(np.unravel_index(a, shape))
    cb = np.stack(np.unravel_index(b, shape))
    diff = (cb - ca) % L
    differs = diff != 0
    one_axis = differs.sum(axis=0) == 1
    axis = np.argmax(differs, axis=0)
    d = np.take_along_axis(diff, axis[None], axis=0)[0]
    ids = np.full(a.shape, -1, dtype=np.int64)
    fwd = one_axis & (d == 1)
    bwd = one_axis & (d == L - 1)
    ids[fwd] = a[fwd] * dim + axis[fwd]
    ids[bwd] = b[bwd] * dim + axis[bwd]
    return ids


def _isin_sorted(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    if sorted_set.size == 0:
        return np.zeros(values.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_set, values), sorted_set.size - 1)
    return sorted_set[pos] == values


def _random_same_colour(sites: np.ndarray, axes: tuple[int, ...], dim: int, L: int,
                        rng: np.random.Generator) -> np.ndarray:
    """Uniform random sites of the same colour as ``sites``, differing only along ``axes``."""
    shape = (L,) * dim
    coords = np.stack(np.unravel_index(sites, shape))
    colour = coords.sum(axis=0) % 2
    for axis in axes:
        coords[axis] = rng.integers(0, L, size=sites.size)
    wrong = (coords.sum(axis=0) % 2) != colour
    coords[axes[-1], wrong] ^= 1  # maps the wrong-colour half one-to-one onto the right one (L is even)
    return np.ravel_multi_index(tuple(coords), shape).astype(np.int64)


def _duplicates(a: np.ndarray, b: np.ndarray, rewired_ids: np.ndarray, dim: int, L: int) -> np.ndarray:
    """Mask of new edges (a, b) that repeat another new edge or a lattice edge still in place."""
    n = np.int64(L) ** dim
    keys = np.minimum(a, b) * n + np.maximum(a, b)
    order = np.argsort(keys, kind="stable")
    repeated = np.zeros(keys.size, dtype=bool)
    repeated[order[1:]] = keys[order[1:]] == keys[order[:-1]]
    lattice_id = lattice_edge_id(a, b, dim, L)
    on_lattice = (lattice_id >= 0) & ~_isin_sorted(lattice_id, rewired_ids)
    return repeated | on_lattice


def build_lattice(dim: int, L: int, p: float, rewire_dims: str, rng: np.random.Generator) -> RewiredLattice:
    axes = parse_rewire_dims(rewire_dims, dim)
    n_edges = dim * L ** dim
    n_ends = 2 * n_edges
    k = int(rng.binomial(n_ends, p / 2)) if p > 0 else 0
    ends = np.sort(rng.choice(n_ends, size=k, replace=False)).astype(np.int64) if k else np.empty(0, np.int64)
    edge_of_end, which = np.divmod(ends, 2)
    rewired_ids, first = np.unique(edge_of_end, return_index=True)
    move_u = np.zeros(rewired_ids.size, dtype=bool)
    move_v = np.zeros(rewired_ids.size, dtype=bool)
    pos = np.searchsorted(rewired_ids, edge_of_end)
    move_u[pos[which == 0]] = True
    move_v[pos[which == 1]] = True
    u0, v0 = lattice_edge_ends(rewired_ids, dim, L)
    a, b = u0.copy(), v0.copy()
    redraw = np.ones(rewired_ids.size, dtype=bool)
    for _ in range(_MAX_REDRAWS):
        mu, mv = redraw & move_u, redraw & move_v
        a[mu] = _random_same_colour(u0[mu], axes, dim, L, rng)
        b[mv] = _random_same_colour(v0[mv], axes, dim, L, rng)
        redraw = _duplicates(a, b, rewired_ids, dim, L)
        if not redraw.any():
            break
    else:
        raise ParameterError(
            "p", f"cannot rewire a {dim}D lattice of side {L} with p={p} along {rewire_dims!r} without "
                 "duplicate edges; use a larger L, a smaller p or more rewired dimensions")
    return RewiredLattice(dim=dim, L=L, p=float(p), rewire_dims=rewire_dims,
                          rewired_edge_ids=rewired_ids, new_edges=np.stack([a, b], axis=1).reshape(-1, 2),
                          rewired_ends=int(k))


def _modified_adjacency(lat: RewiredLattice) -> tuple[ModifiedAdjacency, ModifiedAdjacency]:
    dim, L = lat.dim, lat.L
    u0, v0 = lattice_edge_ends(lat.rewired_edge_ids, dim, L)
    a, b = lat.new_edges[:, 0], lat.new_edges[:, 1]
    mods = np.unique(np.concatenate([u0, v0, a, b]))
    # Lattice edges of the modified sites that survived rewiring ...
    axes = np.arange(dim, dtype=np.int64)
    fwd_ids = (mods[:, None] * dim + axes).ravel()
    bwd_sites = np.stack([shift_sites(mods, ax, -1, dim, L) for ax in range(dim)], axis=1)
    bwd_ids = (bwd_sites * dim + axes).ravel()
    src = np.repeat(mods, dim)
    fwd_nb = np.stack([shift_sites(mods, ax, +1, dim, L) for ax in range(dim)], axis=1).ravel()
    keep_f = ~_isin_sorted(fwd_ids, lat.rewired_edge_ids)
    keep_b = ~_isin_sorted(bwd_ids, lat.rewired_edge_ids)
    # ... and the new edges, in both directions.
    all_src = np.concatenate([src[keep_f], src[keep_b], a, b])
    all_dst = np.concatenate([fwd_nb[keep_f], bwd_sites.ravel()[keep_b], b, a])
    order = np.lexsort((all_dst, all_src))
    all_src, all_dst = all_src[order], all_dst[order]
    colours = site_colour(mods, dim, L)
    result = []
    for c in (0, 1):
        sites = mods[colours == c]
        sel = site_colour(all_src, dim, L) == c if all_src.size else np.zeros(0, bool)
        s, d = all_src[sel], all_dst[sel]
        counts = np.searchsorted(s, sites, side="right") - np.searchsorted(s, sites, side="left")
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        result.append(ModifiedAdjacency(sites=sites.astype(np.int64), offsets=offsets,
                                        neighbours=d.astype(np.int64)))
    return result[0], result[1]
