"""Checking the Ising arrays of a saved state before anything is rebuilt from them (the parameters and the
file itself are checked by sim/state.py)."""
from __future__ import annotations

import numpy as np

from latticelab.sim.models.ising.lattice import _duplicates, site_colour
from latticelab.sim.models.ising.params import IsingParams, parse_algorithm
from latticelab.sim.params import ParameterError
from latticelab.sim.rng import counter_problem

COUNTERS = ("streams_used", "step_count", "phase", "rewired_ends")
ARRAYS = ("spins", "flipped", "rewired_edge_ids", "new_edges")


def _bad(detail: str) -> ParameterError:
    return ParameterError("state", f"the saved state is damaged or not a latticelab Ising state: {detail}")


def validate_arrays(params: IsingParams, state) -> dict:
    """The counters as Python ints and the arrays as NumPy arrays, or ParameterError('state', ...)."""
    try:
        out = {}
        for key in COUNTERS:
            if key not in state:
                raise _bad(f"missing field {key!r}")
            value = np.asarray(state[key])
            if value.shape != () or value.dtype.kind not in "iu":
                raise _bad(f"{key} must be an integer")
            out[key] = int(value)
        for key in ARRAYS:
            if key not in state:
                raise _bad(f"missing field {key!r}")
            out[key] = np.asarray(state[key])
    except ParameterError:
        raise
    except Exception as exc:  # unreadable arrays, wrong types, truncated archives
        raise _bad(f"{type(exc).__name__}: {exc}") from None
    dim, L = params.dim, params.L
    shape = (L,) * dim
    spins, flipped = out["spins"], out["flipped"]
    if spins.shape != shape or spins.dtype != np.int8 or not np.all(np.abs(spins) == 1):
        raise _bad(f"spins must be int8 +-1 of shape {shape}")
    if flipped.shape != shape or flipped.dtype != bool:
        raise _bad(f"flipped must be bool of shape {shape}")
    ids, new = out["rewired_edge_ids"], out["new_edges"]
    for key, a in (("rewired_edge_ids", ids), ("new_edges", new)):
        if a.dtype.kind not in "iu":
            raise _bad(f"{key} must hold integers; got {a.dtype}")
    ids, new = ids.astype(np.int64), new.astype(np.int64)
    if new.size == 0:
        new = new.reshape(0, 2)
    n_sites = L ** dim
    if ids.ndim != 1 or new.shape != (ids.size, 2) or np.any(np.diff(ids) <= 0):
        raise _bad("rewired edge ids must be sorted, unique, one per new edge (new_edges of shape (R, 2))")
    if ids.size and (ids[0] < 0 or ids[-1] >= dim * n_sites or new.min() < 0 or new.max() >= n_sites):
        raise _bad("graph indices out of range")
    check_graph_rules(ids, new, dim, L)
    if not ids.size <= out["rewired_ends"] <= 2 * ids.size:
        raise _bad(f"rewired_ends {out['rewired_ends']} does not fit {ids.size} rewired edges")
    for key in COUNTERS:
        problem = counter_problem(key, out[key])
        if problem:
            raise _bad(problem)
    schedule = parse_algorithm(params.algorithm)
    if not out["phase"] < len(schedule):
        raise _bad(f"phase = {out['phase']} is not a position in the update schedule {params.algorithm} "
                   f"(0 .. {len(schedule) - 1})")
    out["spins"] = np.ascontiguousarray(spins)
    out["flipped"] = np.ascontiguousarray(flipped)
    out["rewired_edge_ids"], out["new_edges"] = ids, new
    return out


def check_graph_rules(ids: np.ndarray, new: np.ndarray, dim: int, L: int) -> None:
    """The rules rewiring keeps (lattice.py): no self-loop, no duplicate edge (among the new edges or with a
    lattice edge still in place), and every edge joins the two checkerboard colours, so the race-free
    checkerboard update stays exact. ParameterError('state', ...) naming the first broken rule."""
    if not new.size:
        return
    a, b = new[:, 0], new[:, 1]
    loops = np.flatnonzero(a == b)
    if loops.size:
        raise _bad(f"the graph has a self-loop at site {a[loops[0]]}")
    same = np.flatnonzero(site_colour(a, dim, L) == site_colour(b, dim, L))
    if same.size:
        i = same[0]
        raise _bad(f"edge ({a[i]}, {b[i]}) joins two sites of the same checkerboard colour, which the "
                   "checkerboard update cannot handle")
    dup = np.flatnonzero(_duplicates(a, b, ids, dim, L))
    if dup.size:
        i = dup[0]
        raise _bad(f"edge ({a[i]}, {b[i]}) appears twice in the graph")
