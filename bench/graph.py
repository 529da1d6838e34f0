"""`latticelab bench graph`: clustering coefficients on the GPU (sim/analysis/graph.py, issue 12).

Cases (seed 004's figure 4 and the rewired lattice of issue 12):

* Watts-Strogatz graphs, k = 50, p = 0.1, 10^5 .. 10^6 vertices: Newman's C and the mean local clustering
  (the arc-parallel triangle kernel, kernels/graph_counts.cu) per graph, the graph already on the device.
  References measured in the same run: our SciPy CPU path (sparse products, one process) at every size,
  networkx (pure Python) up to --nx-max-n, and igraph's C implementation when python-igraph is installed.
* the 2D rewired Ising lattice with 4096^2 sites (p = 0.01): C and the square clustering (it is bipartite),
  against the SciPy CPU path.

Seed 004 gives no absolute times in its text (figure 4 is a plot); its table 2 reports, for the largest
small-world graph (V = 10^6), a GTX480 (kernel 1, one GPU) 11.8 times faster than one core of a Core i7 970
running the sequential C++ code. That speed-up is recorded beside ours for comparison; ours is against the
SciPy path (compiled sparse products, one core) and igraph where present, not the same C++ code.
"""
from __future__ import annotations

import os
import platform
import time

import numpy as np

from latticelab.bench.report import print_table, write_results
from latticelab.sim.analysis import graph as G

SEED004_GPU_SPEEDUP = {"device": "GTX480, kernel 1, 1 GPU", "vs": "Core i7 970, 1 core, sequential C++",
                       "V": 1_000_000, "speedup": 11.8}


def add_arguments(parser) -> None:
    parser.add_argument("--sizes", default="100000,200000,500000,1000000",
                        help="Watts-Strogatz vertex counts, comma-separated (default 1e5,2e5,5e5,1e6)")
    parser.add_argument("--k", type=int, default=50, help="Watts-Strogatz degree (default 50)")
    parser.add_argument("--p", type=float, default=0.1, help="Watts-Strogatz rewiring probability (default 0.1)")
    parser.add_argument("--L", type=int, default=4096, help="rewired 2D lattice side (default 4096; 0 skips it)")
    parser.add_argument("--lattice-p", type=float, default=0.01, help="rewired lattice p (default 0.01)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions on the GPU (median)")
    parser.add_argument("--nx-max-n", type=int, default=100000,
                        help="largest graph networkx is timed on (pure Python; default 1e5, 0: never)")
    parser.add_argument("--cpu-max-n", type=int, default=1000000,
                        help="largest Watts-Strogatz graph the SciPy CPU path is timed on (default 1e6)")
    parser.add_argument("--backend", default="cuda", help="array backend of the timed path (cuda, or numpy to try it)")
    parser.add_argument("--out", default="bench/results", help="folder for the JSON results")


def _median_seconds(work, repeats: int) -> float:
    work()  # warm-up: compiles the kernels
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _once(work) -> tuple[float, object]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def _networkx_seconds(g: G.Graph) -> tuple[float, float]:
    import networkx as nx
    h = nx.Graph()
    h.add_nodes_from(range(g.n))
    h.add_edges_from(g.edges().tolist())
    seconds, value = _once(lambda: nx.transitivity(h))
    return seconds, value


def _igraph_seconds(g: G.Graph) -> tuple[float, float] | None:
    try:
        import igraph
    except ImportError:
        return None
    h = igraph.Graph(n=g.n, edges=g.edges().tolist())
    return _once(lambda: h.transitivity_undirected())


def main(args) -> int:
    from latticelab.sim.backend import select_backend
    backend = select_backend(args.backend)
    xp = backend.xp
    cpu = platform.processor() or platform.machine()
    device = f"{backend.device_name}; CPU {cpu} ({os.cpu_count()} cores)"
    cases = []

    def case(name, metric, value, **extra):
        cases.append({"case": name, "metric": metric, "value": round(value, 6), **extra})

    for n in (int(float(s)) for s in args.sizes.split(",") if s):
        gen_s, g = _once(lambda: G.watts_strogatz(n, args.k, args.p, seed=1, xp=xp))
        gpu_s = _median_seconds(lambda: G.clustering(g, squares=False), args.repeats)
        result = G.clustering(g, squares=False)
        label = f"ws-n{n}-k{args.k}-p{args.p:g}"
        refs = {}
        if n <= args.cpu_max_n:
            host = g.to(np)
            cpu_s, cpu_result = _once(lambda: G.clustering(host, squares=False))
            assert abs(cpu_result.newman - result.newman) < 1e-12, (cpu_result, result)
            refs["scipy-cpu"] = cpu_s
        if n <= args.nx_max_n:
            nx_s, nx_c = _networkx_seconds(g)
            assert abs(nx_c - result.newman) < 1e-9, (nx_c, result.newman)
            refs["networkx"] = nx_s
        ig = _igraph_seconds(g)
        if ig is not None:
            assert abs(ig[1] - result.newman) < 1e-9, (ig[1], result.newman)
            refs["igraph"] = ig[0]
        case(f"{label}-generate-{backend.name}", "seconds", gen_s)
        for ref, seconds in refs.items() or [(None, None)]:
            extra = {} if ref is None else {"baseline": ref, "baseline_value": round(seconds, 6),
                                            "ratio": round(seconds / gpu_s, 2)}
            name = f"{label}-clustering-{backend.name}" + (f"-vs-{ref}" if ref else "")
            case(name, "seconds", gpu_s, C=round(result.newman, 6),
                 mean_local=round(result.mean_local, 6), edges=g.n_edges, **extra)
        if n == 1_000_000:
            cases[-1]["seed004"] = SEED004_GPU_SPEEDUP

    if args.L:
        from latticelab.sim.models.ising.model import IsingModel
        build_s, model = _once(lambda: IsingModel.create(backend=backend.name, dim=2, L=args.L, T=2.269,
                                                         p=args.lattice_p, seed=1))
        csr_s, g = _once(lambda: G.graph_of(model, xp=xp))
        gpu_s = _median_seconds(lambda: G.clustering(g), args.repeats)
        result = G.clustering(g)
        host = g.to(np)
        cpu_s, cpu_result = _once(lambda: G.clustering(host))
        assert cpu_result == result, (cpu_result, result)
        case(f"lattice-2d-L{args.L}-p{args.lattice_p:g}-csr-{backend.name}", "seconds", csr_s,
             model_build_seconds=round(build_s, 3))
        case(f"lattice-2d-L{args.L}-p{args.lattice_p:g}-clustering-{backend.name}", "seconds", gpu_s,
             C=result.newman, mean_square=round(result.mean_square, 6), bipartite=result.bipartite,
             baseline="scipy-cpu", baseline_value=round(cpu_s, 3), ratio=round(cpu_s / gpu_s, 2))

    print_table(cases)
    print("wrote", write_results("graph", device, cases, args.out))
    return 0
