"""Loading CUDA kernel sources into compiled modules (CuPy RawModule, or the CPU emulator).

Kernels live in the ``kernels/`` folder of the package that uses them (a model's, ``sim/analysis/kernels``);
headers shared by all of them (Philox) are in ``sim/kernels``. A kernel is named by its path, or by a bare
file name for the shared folder; ``#include "x.cuh"`` looks beside the including file, then in the shared
folder.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

SHARED_KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
NVRTC_OPTIONS = ("--std=c++17",)
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)


def kernel_path(filename) -> Path:
    """A kernel file's path: ``filename`` itself when it is a path with a folder, else in the shared folder."""
    path = Path(filename)
    return path if path.parent != Path(".") else SHARED_KERNEL_DIR / path


def kernel_source(filename) -> str:
    """The source of a kernel file with its local #include "..." files inlined (once each).

    Inlining keeps CuPy's compile cache, which hashes only the source text, in step with the headers.
    """
    seen: set[Path] = set()

    def expand(path: Path) -> str:
        if path in seen:
            return ""
        seen.add(path)
        text = path.read_text()

        def include(match) -> str:
            beside = path.parent / match.group(1)
            return expand(beside if beside.is_file() else SHARED_KERNEL_DIR / match.group(1))

        return _INCLUDE.sub(include, text.replace("#pragma once", ""))

    return expand(kernel_path(filename).resolve())


@functools.lru_cache(maxsize=None)
def _module(xp, filename, name_expressions: tuple[str, ...]):
    return xp.RawModule(code=kernel_source(filename), options=NVRTC_OPTIONS, name_expressions=name_expressions)


def get_kernel(xp, filename, name: str, all_names: tuple[str, ...] | None = None):
    """Kernel ``name`` (a template instance such as 'metropolis_chunks<2, 4>') from a kernel file (see kernel_path).

    ``all_names`` lists every instance to compile into the module at once (it must contain ``name``).
    """
    names = tuple(all_names) if all_names else (name,)
    return _module(xp, filename, names).get_function(name)
