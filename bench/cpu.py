"""`latticelab bench cpu`: the NumPy path's Metropolis sweeps against a plain vectorised checkerboard.

The baseline is the textbook NumPy checkerboard on a regular lattice (rolls, a random array, a Boltzmann
table); our path does the same plus the rewired sites' explicit adjacency. Both run in this process,
one thread, so the ratio is meaningful whatever the machine.
"""
from __future__ import annotations

import os
import platform

import numpy as np

from latticelab.bench.report import median_rate, print_table, write_results
from latticelab.sim.models.ising.model import IsingModel


def add_arguments(parser) -> None:
    parser.add_argument("--L", type=int, default=512, help="2D lattice side (default 512)")
    parser.add_argument("--sweeps", type=int, default=40, help="sweeps per timed repetition")
    parser.add_argument("--out", default="bench/results", help="folder for the JSON results")


def plain_checkerboard(L: int, T: float, seed: int):
    rng = np.random.default_rng(seed)
    s = (rng.integers(0, 2, (L, L), dtype=np.int8) * 2 - 1).astype(np.int8)
    colour = (np.indices((L, L)).sum(0) % 2).astype(bool)
    table = np.minimum(1, np.exp(-2 * np.arange(-4, 5) / T)).astype(np.float32)

    def sweep():
        nonlocal s
        for c in (colour, ~colour):
            h = np.roll(s, 1, 0) + np.roll(s, -1, 0) + np.roll(s, 1, 1) + np.roll(s, -1, 1)
            accept = (rng.random((L, L), dtype=np.float32) < table[(s * h + 4).astype(np.uint8)]) & c
            s = np.where(accept, -s, s)
    return sweep


def main(args) -> int:
    L, sweeps, T = args.L, args.sweeps, 2.269
    cpu = platform.processor() or platform.machine()
    device = f"CPU {cpu} ({os.cpu_count()} cores), NumPy {np.__version__}, 1 thread"
    baseline_sweep = plain_checkerboard(L, T, 1)
    baseline = median_rate(lambda: [baseline_sweep() for _ in range(sweeps)], sweeps)
    cases = []
    for p in (0.0, 1e-4, 1e-2):
        model = IsingModel(dim=2, L=L, T=T, p=p, seed=1, backend="numpy")
        rate = median_rate(lambda: model.step(sweeps), sweeps)
        cases.append({"case": f"metropolis-2d-L{L}-p{p:g}-numpy", "metric": "sweeps_per_s", "value": round(rate, 1),
                      "baseline": "plain-numpy-checkerboard", "baseline_value": round(baseline, 1),
                      "ratio": round(rate / baseline, 3)})
    print_table(cases)
    print("wrote", write_results("cpu", device, cases, args.out, slug="CPU"))
    return 0
