"""`latticelab bench iso`: how long a new iso value on a 256^3 spectrum takes (case ``iso-3d-L256``).

One update = marching cubes of the spectrum at a new iso value (a fraction of its maximum), plus, when
the caller passes a ``show_factory`` (the app side wires render/isosurface.py's ``make_show_hook``),
handing the mesh to the renderer and drawing a frame; the case records whether it was there. The GPU path
(CuPy kernels) is timed against scikit-image on the CPU in the same run, on the same volume and levels.

The spectrum comes from a 3D Ising run near T_c (sim.ising, Metropolis, a few dozen sweeps) or, with
``--source synthetic`` or when the model cannot run, from a field of smooth random domains.
"""
from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from latticelab.sim.backend import select_backend
from latticelab.bench.report import device_slug, git_commit
from latticelab.sim.analysis.marching_cubes import marching_cubes
from latticelab.sim.analysis.spectral import fft_magnitude
from latticelab.sim.io import free_path

log = logging.getLogger(__name__)

CASE = "iso-3d-L256"  # the case name for the default L; other sizes are named iso-3d-L<L>
DEFAULT_LEVELS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--L", type=int, default=256, help="lattice side of the 3D spectrum (default 256)")
    parser.add_argument("--levels", default=",".join(str(v) for v in DEFAULT_LEVELS),
                        help="iso values as fractions of the maximum magnitude, comma separated")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes over the levels (GPU path)")
    parser.add_argument("--baseline-repeats", type=int, default=1, help="timed passes for scikit-image")
    parser.add_argument("--no-baseline", action="store_true", help="skip the scikit-image baseline")
    parser.add_argument("--source", choices=("ising", "synthetic"), default="ising",
                        help="where the spectrum comes from (default: a 3D Ising run)")
    parser.add_argument("--sweeps", type=int, default=64, help="Metropolis sweeps before the spectrum")
    parser.add_argument("--backend", choices=("auto", "cuda", "numpy"), default="auto")
    parser.add_argument("--out", default=None,
                        help="results JSON (default bench/results/iso-<GPU>.json); never overwritten: "
                             "an existing file gets a numbered sibling")
    parser.add_argument("--commit", default=None, help="commit to record (default: git rev-parse)")


def _parse_levels(text: str) -> list[float]:
    try:
        levels = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"levels must be comma-separated numbers; got {text!r}") from None
    if not levels or any(not 0 < v < 1 for v in levels):
        raise ValueError(f"levels must lie strictly between 0 and 1 (fractions of the maximum); got {text!r}")
    return levels


def smooth_domains(xp, L: int, correlation: float = 3.0, seed: int = 1):
    """+-1 field of random domains about ``correlation`` sites across (Gaussian-filtered noise, sign)."""
    rng = np.random.default_rng(seed)
    noise = xp.asarray(rng.standard_normal((L, L, L), dtype=np.float32))
    k = xp.fft.fftfreq(L).astype(xp.float32)
    k2 = k[:, None, None] ** 2 + k[None, :, None] ** 2 + k[None, None, :] ** 2
    smooth = xp.fft.ifftn(xp.fft.fftn(noise) * xp.exp(-2 * (np.pi * correlation) ** 2 * k2)).real
    return xp.where(smooth >= 0, 1, -1).astype(xp.int8)


def make_spectrum(xp, backend_name: str, L: int, source: str, sweeps: int):
    """(normalised 3D magnitude with max 1, description of where it came from)."""
    if source == "ising":
        try:
            from latticelab.sim.models.ising.model import IsingModel
            model = IsingModel(dim=3, L=L, T=4.5115, p=0.0, algorithm="metropolis", seed=1, backend=backend_name)
            model.step(sweeps)
            field, what = model.spins, f"3D Ising L={L} T=4.5115 p=0 after {sweeps} Metropolis sweeps"
        except Exception as exc:  # the model is another module's: fall back rather than give no number
            log.warning("Ising source failed (%s: %s); using synthetic domains", type(exc).__name__, exc)
            source = "synthetic"
    if source == "synthetic":
        field, what = smooth_domains(xp, L), f"synthetic +-1 domains L={L}, correlation 3 sites"
    mag = fft_magnitude(field, xp)
    return mag / mag.max(), what


def _sync(xp):
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def time_updates(volume, levels, repeats: int, method: str, show=None) -> tuple[list[float], list[int]]:
    """Milliseconds per update over ``repeats`` passes through ``levels``, and the face counts seen."""
    xp = np if isinstance(volume, np.ndarray) else __import__("cupy")
    times, faces = [], []
    for _ in range(repeats):
        for level in levels:
            _sync(xp)
            t0 = time.perf_counter()
            mesh = marching_cubes(volume, level, method=method)
            if show is not None:
                show(mesh)
            _sync(xp)
            times.append((time.perf_counter() - t0) * 1e3)
            faces.append(mesh.n_faces)
    return times, faces


def run(args, show_factory=None, command: str | None = None) -> dict:
    """Time the updates. ``show_factory(volume) -> hook(mesh)`` (e.g. render/isosurface.py's
    ``make_show_hook``) makes each update also hand its mesh to the renderer and draw a frame."""
    levels = _parse_levels(args.levels)
    if args.L < 8:
        raise ValueError(f"L must be at least 8; got {args.L}")
    backend = select_backend(args.backend)
    xp = backend.xp
    volume, source = make_spectrum(xp, backend.name, args.L, args.source, args.sweeps)
    show = show_factory(volume) if show_factory is not None else None
    method = "cuda" if backend.is_gpu else "numpy"
    time_updates(volume, levels[:1], 1, method, show)  # warm-up: kernel compilation, GL buffers
    times, faces = time_updates(volume, levels, args.repeats, method, show)
    shown_by = show.describe() if hasattr(show, "describe") else None
    case = {"case": f"iso-3d-L{args.L}", "metric": "ms_per_update", "value": round(statistics.median(times), 3)}
    details = {"path": f"marching cubes on {method}", "levels": levels, "source": source,
               "with_show_hook": show is not None, "show": shown_by, "updates": len(times),
               "min_ms": round(min(times), 3), "max_ms": round(max(times), 3),
               "faces_per_level": faces[:len(levels)]}
    if not args.no_baseline:
        host = volume if xp is np else volume.get()
        base_times, base_faces = time_updates(host, levels, args.baseline_repeats, "skimage", show)
        case["baseline"] = "scikit-image-cpu"
        case["baseline_value"] = round(statistics.median(base_times), 3)
        case["ratio"] = round(case["baseline_value"] / case["value"], 2)  # speed-up: lower ms is better
        details["baseline_faces_per_level"] = base_faces[:len(levels)]
        details["cpu"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical cores"
    case["details"] = details
    return {
        "command": command or " ".join(["latticelab", *sys.argv[1:]]),
        "commit": args.commit or git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": backend.device_name,
        "cases": [case],
    }


def main(args, show_factory=None, command: str | None = None) -> int:
    try:
        result = run(args, show_factory, command)
    except ValueError as exc:
        print(f"latticelab bench iso: {exc}")
        return 2
    out = Path(args.out) if args.out else Path("bench/results") / f"iso-{device_slug(result['device'])}.json"
    out = free_path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    c = result["cases"][0]
    line = f"{c['case']}: {c['value']} ms per update ({c['details']['path']})"
    if "baseline_value" in c:
        line += f"; scikit-image on CPU {c['baseline_value']} ms; ratio {c['ratio']}x"
    print(line)
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="latticelab bench iso", description=__doc__.splitlines()[0])
    add_arguments(p)
    raise SystemExit(main(p.parse_args(), command="python3 -m sim.bench_iso"))
