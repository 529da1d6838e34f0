"""Checking the Ising arrays of a saved state before anything is rebuilt from them (the parameters and the
file itself are checked by sim/state.py)."""
from __future__ import annotations

import numpy as np

from latticelab.sim.models.ising.params import IsingParams
from latticelab.sim.params import ParameterError

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
    ids, new = out["rewired_edge_ids"].astype(np.int64), out["new_edges"].astype(np.int64).reshape(-1, 2)
    n_sites = L ** dim
    if ids.ndim != 1 or new.shape[0] != ids.size or np.any(np.diff(ids) <= 0):
        raise _bad("rewired edge ids must be sorted, unique, one per new edge")
    if ids.size and (ids[0] < 0 or ids[-1] >= dim * n_sites or new.min() < 0 or new.max() >= n_sites):
        raise _bad("graph indices out of range")
    if min(out[k] for k in COUNTERS) < 0:
        raise _bad("negative counters")
    out["spins"] = np.ascontiguousarray(spins)
    out["flipped"] = np.ascontiguousarray(flipped)
    out["rewired_edge_ids"], out["new_edges"] = ids, new
    return out
