"""Every registered model's GPU kernels compiled ahead of their first use, in a process of their own.

CuPy compiles a kernel (NVRTC) the first time a process uses it and keeps the result on disk (its kernel cache,
``~/.cupy/kernel_cache`` or ``CUPY_CACHE_DIR``); later processes only load it. On a new installation the first
build of each kind of model therefore compiles its kernels: on the H100 Cahn-Hilliard's took 15-18 s on the
window's worker thread, and while they were loaded into the window's CUDA context the GUI thread's own CUDA
calls (the view's texture write) waited: the first switch to it stalled the window for 86-453 ms
(docs/design/window-gpu.md). A separate process shares no CUDA context with the window, so compiling there
stalls nothing; the window's later builds find the kernels on disk.

``latticelab prepare-gpu`` (app/commands/prepare_gpu.py) builds each registered model in each of its variants
(``variant_fields``, e.g. the dimension) with its GPU defaults and runs a frame's work once (app/preparing.py
``build_model``), in the foreground. The window starts it in the background (``start_in_background``) when
this installation has not done it yet for this GPU: a marker in the kernel cache, named after the kernel
sources, CuPy and the device, says it was done; a second file says a preparation is running, so that several
windows start one.
"""
from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)

RUNNING_FOR_AT_MOST_S = 15 * 60     # a "running" file older than this was left by a preparation that died


def cache_dir() -> Path:
    """CuPy's kernel cache (where it writes what NVRTC compiled): CUPY_CACHE_DIR, else ~/.cupy/kernel_cache."""
    return Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")


def sources_digest() -> str:
    """A digest of the package's CUDA sources: a change to any kernel asks for a new preparation."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha1()
    sources = [p for folder in ("sim", "render") for p in (root / folder).rglob("*.cu*")]   # the library's kernels
    for path in sorted(sources):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def device_identity(xp) -> str:
    """CuPy's version and the current device's compute capability (what the compiled kernels depend on)."""
    return f"cupy{xp.__version__}-sm{xp.cuda.Device().compute_capability}"


def marker_path(identity: str, folder: Path | None = None) -> Path:
    return (folder or cache_dir()) / f"latticelab-prepared-{sources_digest()}-{identity}"


def running_path(marker: Path) -> Path:
    """The file that says a preparation for ``marker`` is running."""
    return marker.with_name(marker.name + ".running")


def variants(cls) -> list[dict]:
    """The values of ``cls``'s variant fields to prepare: every combination of their choices (one empty dict for
    a model without variant fields)."""
    from latticelab.sim.params import field_info
    combos = [{}]
    for name in cls.Params.variant_fields:
        info = field_info(cls.Params, name)
        choices = info.get("choices") or (info["default"],)
        combos = [{**combo, name: value} for combo in combos for value in choices]
    return combos


def prepare(out=print) -> list[str]:
    """Build every registered model in each variant with its GPU defaults, on CUDA, as a window's worker does
    (kernels compiled, a frame's work run once), one at a time; return what failed (reported, not raised: one
    model that does not fit this GPU leaves the others prepared). Raises BackendError without a usable GPU."""
    from latticelab.app.preparing import build_model
    from latticelab.sim.backend import select_backend
    from latticelab.sim.models import all_models
    xp = select_backend("cuda").xp
    failed = []
    for name, cls in all_models().items():
        for values in variants(cls):
            label = " ".join([name] + [f"{k}={v}" for k, v in values.items()])
            start = time.perf_counter()
            try:
                model = build_model(cls, cls.Params.create(gpu=True, **values), "cuda")
                del model
                out(f"{label}: prepared in {time.perf_counter() - start:.1f} s")
            except Exception as exc:         # the next model may still fit
                failed.append(label)
                out(f"{label}: not prepared ({type(exc).__name__}: {exc})")
            finally:
                xp.get_default_memory_pool().free_all_blocks()
    return failed


def start_in_background(identity: str, folder: Path | None = None, spawn=None) -> bool:
    """Start ``latticelab prepare-gpu`` in a process of its own unless it was done for ``identity`` (the marker
    exists) or one is running (its file is younger than RUNNING_FOR_AT_MOST_S). Returns whether one started.
    ``spawn(command)`` starts the process (tests replace it)."""
    marker = marker_path(identity, folder)
    if marker.exists():
        return False
    running = running_path(marker)
    try:
        if time.time() - running.stat().st_mtime < RUNNING_FOR_AT_MOST_S:
            return False
        running.unlink()                      # left by one that died
    except FileNotFoundError:
        pass
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        with open(running, "x"):              # one window starts it, the others see the file
            pass
    except OSError as exc:                    # another window was first, or the cache is not writable
        log.info("GPU kernels not prepared in the background: %s", exc)
        return False
    command = [sys.executable, "-m", "latticelab", "prepare-gpu", "--marker", str(marker)]
    try:
        (spawn or _spawn_detached)(command)
    except OSError as exc:
        running.unlink(missing_ok=True)
        log.warning("could not start the GPU kernels' preparation: %s", exc)
        return False
    log.info("compiling the models' GPU kernels in a background process (once per installation and GPU)")
    return True


def _spawn_detached(command: list[str]) -> None:
    subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)
