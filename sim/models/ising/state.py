"""Checking a saved model state before anything is rebuilt from it."""
from __future__ import annotations

import numpy as np

from latticelab.sim import params
from latticelab.sim.models.ising.lattice import parse_rewire_dims
from latticelab.sim.params import ParameterError

_SCALARS = {"format": int, "dim": int, "L": int, "T": float, "p": float, "rewire_dims": str, "algorithm": str,
            "seed": int, "streams_used": int, "step_count": int, "phase": int, "rewired_ends": int}


def _bad(detail: str) -> ParameterError:
    return ParameterError("state", f"the saved state is damaged or not a latticelab Ising state: {detail}")


def validate_state(state) -> dict:
    """Return the state's fields as Python scalars and NumPy arrays, or raise ParameterError('state')."""
    try:
        out = {}
        for key, kind in _SCALARS.items():
            if key not in state:
                raise _bad(f"missing field {key!r}")
            out[key] = kind(np.asarray(state[key]).item())
        for key in ("spins", "flipped", "rewired_edge_ids", "new_edges"):
            if key not in state:
                raise _bad(f"missing field {key!r}")
            out[key] = np.asarray(state[key])
    except ParameterError:
        raise
    except Exception as exc:  # unreadable arrays, wrong types, truncated archives
        raise _bad(f"{type(exc).__name__}: {exc}") from None
    from latticelab.sim.models.ising.model import STATE_FORMAT
    if out["format"] != STATE_FORMAT:
        raise _bad(f"format {out['format']} is not the supported format {STATE_FORMAT}")
    try:
        dim = params.check_dim(out["dim"])
        L = params.check_L(out["L"], dim)
        params.check_T(out["T"]), params.check_p(out["p"]), params.check_seed(out["seed"])
        params.parse_algorithm(out["algorithm"])
        parse_rewire_dims(out["rewire_dims"], dim)
    except ParameterError as exc:
        raise _bad(str(exc)) from None
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
    if min(out["streams_used"], out["step_count"], out["phase"], out["rewired_ends"]) < 0:
        raise _bad("negative counters")
    out["rewired_edge_ids"], out["new_edges"] = ids, new
    return out
