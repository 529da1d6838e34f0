"""``latticelab bench <name>``: the benchmarks, each writing bench/results/<name>-<device>.json.

Registered on the application's command line by the composition root (latticelab/__main__.py); nothing in
sim, render or app imports this package.
"""
from __future__ import annotations

import argparse
import importlib
from pathlib import Path

# Where every benchmark's results go by default: bench/results/ beside this file, whatever the current folder
RESULTS_DIR = Path(__file__).resolve().parent / "results"

# name -> (module under latticelab.bench, help). Each module has add_arguments(parser) and main(args).
BENCHMARKS = {
    "sim": ("sim", "Ising update kernels against the naive CuPy reference (CUDA GPU)"),
    "render": ("render", "full frames through CUDA-OpenGL interop against host uploads (CUDA GPU)"),
    "cpu": ("cpu", "the NumPy path's Metropolis sweeps against a plain vectorised NumPy checkerboard"),
    "iso": ("iso", "iso-surfaces of a 3D spectrum: GPU marching cubes against scikit-image"),
    "graph": ("graph", "clustering coefficients of Watts-Strogatz graphs and the rewired lattice (GPU) against CPU"),
    "cahn-hilliard": ("cahn_hilliard",
                      "Cahn-Hilliard steps (finite differences, spectral) and PFHub 1a against plain CuPy"),
    "ch-accuracy": ("ch_accuracy", "Cahn-Hilliard finite differences against spectral: cost to reach equal accuracy"),
    "cortex": ("cortex", "cortical spiking network steps at N = 2^20 and 2^22 against a plain CuPy step"),
    "window": ("window", "the application's window on a 2D and a 3D lattice: frames/s, sweeps/s against headless"),
    "sweep-scaling": ("sweep_scaling", "one study on a local Dask cluster of 1 and of N workers (one per GPU): "
                      "points per hour and their ratio"),
    "notebook": ("notebook", "the notebook's live view (jupyter_rfb canvas, off screen): frames/s by jupyter_rfb's "
                 "own accounting, the simulation stepping between frames"),
    "io": ("output", "the same Ising run with and without fields written to Zarr every N sweeps: the overhead"),
    "multigpu": ("multigpu", "one Ising lattice split over the GPUs of one host (slabs, halos) against one GPU: "
                 "weak and strong scaling"),
    "mpi": ("mpi", "the weak-scaling Ising case with one MPI process per GPU against one process over the same GPUs "
            "(start with mpirun -n 2)"),
    "window-gpus": ("window_gpus", "the lattice view with two GPUs, headless: one GPU simulating and the other "
                    "drawing (dual-GPU mode) against one GPU doing both, and a lattice split over both drawn in one "
                    "view, against headless"),
    "responsiveness": ("responsiveness", "the window on the CPU while slow work runs (Swendsen-Wang at 2048^2, the "
                       "Spectrum dock at 3D 128^3): longest gaps between frames and event-loop iterations"),
}


def add_bench_command(subcommands, parser_class) -> None:
    """Add ``bench`` and its benchmarks to the application's subcommands (an argparse subparsers object)."""
    bench = subcommands.add_parser("bench", help="benchmarks; each writes bench/results/<name>-<gpu>.json")
    bench_sub = bench.add_subparsers(dest="benchmark", parser_class=parser_class, required=True)
    for name, (module, help_text) in BENCHMARKS.items():
        parser = bench_sub.add_parser(name, help=help_text)
        parser.set_defaults(handler=run_bench, bench_module=f"latticelab.bench.{module}")
        try:
            importlib.import_module(f"latticelab.bench.{module}").add_arguments(parser)
        except ImportError as exc:
            parser.set_defaults(bench_unavailable=f"bench {name} cannot be imported: {exc}")
        if name == "cpu":   # its --out default was relative to the current folder
            parser.set_defaults(out=str(RESULTS_DIR))
        if name == "iso":
            parser.add_argument("--show", action="store_true",
                                help="time the whole update: mesh handed to a VisPy iso view and drawn off-screen")
            parser.add_argument("--gl-app", default=None,
                                help="VisPy app backend for --show, e.g. egl on a headless GPU machine")


def run_bench(args: argparse.Namespace) -> int:
    if getattr(args, "bench_unavailable", None):
        from latticelab.sim.params import ParameterError
        raise ParameterError("bench", args.bench_unavailable)
    module = importlib.import_module(args.bench_module)
    if getattr(args, "show", False):
        import vispy
        if args.gl_app:
            vispy.use(app=args.gl_app)
        from latticelab.render.isosurface import make_show_hook
        return module.main(args, show_factory=make_show_hook)
    return module.main(args)
