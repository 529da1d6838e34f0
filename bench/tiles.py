"""Labelling tile shapes compared on the GPU: per-kernel times of one label + flip step per tile shape
(``python3 -m latticelab.bench.tiles`` on a CUDA machine). For measuring, not for tests."""
from __future__ import annotations

import numpy as np

from latticelab.sim.gpu.philox import split64
from latticelab.sim.models.ising.gpu.labelling import THREADS, Labeller, grid_for


def time_kernels(cp, model, tiles, steps: int = 20, flip: str = "wolff_flip") -> list[dict]:
    """Per-kernel times (CUDA events, ms per step) of one label + flip step on ``model``'s spins, per tile shape.

    Each shape also labels one key and reports whether its compressed labels equal the first shape's.
    Works on a copy of the spins; for measuring, not for tests.
    """
    import math

    from latticelab.sim.gpu.philox import wolff_seed_site
    lattice, graph, n = model.graph, model._engine.graph, model.n_sites
    p_bond = -math.expm1(-2.0 / model.T)
    reference, rows = None, []
    for tile in tiles:
        labeller = Labeller(cp, lattice, graph, tile)
        spins = model.spins.reshape(-1).copy()
        labeller.label(spins, p_bond, (7, 7))
        labels = labeller.compress().copy()
        if reference is None:
            reference = labels
        same = bool((labels == reference).all())
        records = []

        def timed(kernel, name):
            def launch(*args):
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                kernel(*args)
                end.record()
                records.append((name, start, end))
            return launch

        kernels = {name: timed(k, name) for name, k in labeller.kernels.items()}
        saved, labeller.kernels = labeller.kernels, kernels
        for warm in (True, False):
            records.clear()
            for k in range(2 if warm else steps):
                key = (11, 1000 + k)
                labeller.label(spins, p_bond, key)
                args = (np.int32(wolff_seed_site(key, n)),) if flip == "wolff_flip" else tuple(
                    np.uint32(v) for v in (*split64(key[0]), *split64(key[1])))
                kernels[flip]((grid_for(n),), (THREADS,), (spins, spins, labeller.labels, np.int32(n), *args,
                                                            np.int32(0)))
        labeller.kernels = saved
        cp.cuda.Device().synchronize()
        totals: dict[str, float] = {}
        for name, start, end in records:
            totals[name] = totals.get(name, 0.0) + cp.cuda.get_elapsed_time(start, end) / steps
        regs = {name: getattr(k, "num_regs", None) for name, k in saved.items() if name.startswith("label")}
        rows.append({"tile": tile, "same_labels": same, "registers": regs,
                     **{k: round(v, 4) for k, v in totals.items()},
                     "total": round(sum(totals.values()), 4)})
    return rows


if __name__ == "__main__":  # python3 -m latticelab.bench.tiles: tile shapes compared on equilibrated lattices
    import cupy

    from latticelab.sim.models.ising.model import IsingModel
    cases = [("wolff-2d-L4096-p1e-4", dict(dim=2, L=4096, T=2.269, p=1e-4), "wolff_flip",
              [(32, 8, 1), (32, 4, 1), (32, 16, 1), (32, 32, 1)]),
             ("wolff-3d-L256-p1e-4", dict(dim=3, L=256, T=4.5115, p=1e-4), "wolff_flip",
              [(32, 8, 4), (32, 4, 8), (32, 4, 4), (32, 8, 2), (32, 16, 2)]),
             ("swendsen-wang-2d-L4096", dict(dim=2, L=4096, T=2.269, p=0.0), "cluster_flip", [(32, 8, 1), (32, 4, 1)])]
    for name, spec, flip, tiles in cases:
        model = IsingModel(algorithm="swendsen-wang", seed=1, backend="cuda", **spec)
        model.step(200)
        for row in time_kernels(cupy, model, tiles, flip=flip):
            print(name, row, flush=True)
