"""How much memory a rewired Ising model takes, from its parameters alone (``IsingModel.estimate_bytes``).

The peak is the larger of two moments:

* building the rewired graph (lattice.py, on the host): ``_modified_adjacency`` sorts the adjacency entries of
  every site that rewiring touched (ids, ends, keep masks, the lexsort order and the reordered copies): about
  8 (11 + dim) bytes per entry; drawing and de-duplicating the rewired ends adds about 90 bytes per end;
* running: the spins and the vectorised update's temporaries (24 bytes per site: the float32 randoms, the
  field, masks), the lattice's stored arrays (rewired edge ids, new edges, the CSR of the modified sites),
  the reference engine's copies (per-colour segments, the merged CSR for Wolff, removed and added edge ends)
  and, for Swendsen-Wang, the bond list and scipy's CSR of the whole bond graph (8 + 56 dim bytes per site).

The expected counts follow from p: each of the 2 E edge ends (E = dim L^dim) moves with probability p/2, an
edge changes when either end moves, a site is modified when one of its 2 dim edges changes or a moved end
lands on it. The byte factors were measured with tracemalloc on NumPy (2D L = 256, 3D L = 40, p from 0 to 1,
every algorithm, T from 0.5 to 8; tests/test_memory_estimate.py keeps the estimate within [0.8, 1.5] of the
measured peak). On a GPU the CUDA engine keeps int32 copies of the graph, the spins, a flip mask and, for
cluster updates, int32 labels; that device figure is counted from those arrays, not measured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

RUN_BYTES_PER_SITE = 24            # spins, float32 randoms, field, acceptance masks (measured 17-22)
SW_BYTES_PER_SITE_AND_AXIS = 56    # bond ends, masks and scipy's CSR per lattice edge (measured 52-57)
BUILD_BYTES_PER_END = 90           # choosing, sorting and redrawing the rewired ends


@dataclass(frozen=True)
class RewiringCounts:
    """Expected sizes of the rewired graph of a dim-dimensional lattice of side L."""
    sites: float
    ends: float          # rewired edge ends
    edges: float         # rewired edges (either end moved)
    modified: float      # sites with explicit adjacency
    entries: float       # adjacency entries of the modified sites (their degrees summed)


def rewiring_counts(dim: int, L: int, p: float) -> RewiringCounts:
    n = float(L) ** dim
    edges_total = dim * n
    ends = edges_total * p                                  # 2 E ends, each with probability p / 2
    edge_changed = 1.0 - (1.0 - p / 2.0) ** 2
    untouched = (1.0 - edge_changed) ** (2 * dim) * math.exp(-ends / n) if p > 0 else 1.0
    modified = n * (1.0 - untouched)
    return RewiringCounts(sites=n, ends=ends, edges=edges_total * edge_changed, modified=modified,
                          entries=2 * dim * modified)       # rewiring keeps the degree sum 2 E


def host_peak_bytes(dim: int, L: int, p: float, schedule: tuple[str, ...]) -> int:
    """Peak host bytes of building and stepping on NumPy (the reference engine)."""
    c = rewiring_counts(dim, L, p)
    build = 8 * (11 + dim) * c.entries + BUILD_BYTES_PER_END * c.ends
    lattice = 24 * c.edges + 16 * c.modified + 8 * c.entries           # ids, new edges, the CSR
    engine = (c.sites                                                  # colour mask (bool)
              + 8 * c.entries                                          # Metropolis: entry owners
              + 16 * c.modified + 16 * c.entries                       # Wolff: merged CSR and owners
              + 32 * c.edges)                                          # removed and added edge ends
    step = RUN_BYTES_PER_SITE * c.sites
    if "swendsen-wang" in schedule:
        step += (8 + SW_BYTES_PER_SITE_AND_AXIS * dim) * c.sites
    return int(max(build, lattice + engine + step))


def device_bytes(dim: int, L: int, p: float, schedule: tuple[str, ...]) -> int:
    """Bytes on the GPU for the CUDA engine: spins and flip mask, the graph's int32 arrays (modified-site bits
    and ranks, CSR, per-colour lists, removed and new edges), int32 labels for cluster updates."""
    c = rewiring_counts(dim, L, p)
    per_site = 1 + 1 + 1 + 1      # spins, flip mask, picture codes, bit masks and ranks
    if any(step in ("wolff", "swendsen-wang") for step in schedule):
        per_site += 4             # labels
    graph = 4 * (3 * c.modified + 2 * c.entries) + 16 * c.edges
    return int(per_site * c.sites + graph)
