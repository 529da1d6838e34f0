"""``latticelab prepare-gpu``: every registered model's GPU kernels compiled now, in the foreground
(app/kernel_cache.py); the window starts the same command in the background once per installation and GPU."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from latticelab.app.kernel_cache import device_identity, marker_path, prepare, running_path


def add_command(sub, parser_class) -> None:
    p = sub.add_parser("prepare-gpu", help="compile every model's GPU kernels now (the window otherwise does it "
                                           "in the background once per installation and GPU)")
    p.add_argument("--marker", default=None, help=argparse.SUPPRESS)    # the window's background run
    p.set_defaults(handler=run_command)


def run_command(args) -> int:
    from latticelab.sim.backend import select_backend
    xp = select_backend("cuda").xp             # BackendError (exit 2, its message) without a usable GPU
    marker = Path(args.marker) if args.marker else marker_path(device_identity(xp))
    running = running_path(marker)
    try:
        failed = prepare()
        if not failed:
            from latticelab.sim.io import write_atomic
            write_atomic(marker, lambda f: f.write(time.strftime("%Y-%m-%dT%H:%M:%S\n").encode()), overwrite=True)
        return 1 if failed else 0
    finally:
        running.unlink(missing_ok=True)
