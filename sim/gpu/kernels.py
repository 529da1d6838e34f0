"""Loading the kernel sources of sim/kernels/ into compiled modules (CuPy RawModule, or the CPU emulator)."""
from __future__ import annotations

import functools
import re
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
NVRTC_OPTIONS = ("--std=c++17",)
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)


def kernel_source(filename: str) -> str:
    """The source of sim/kernels/<filename> with its local #include "..." files inlined (once each).

    Inlining keeps CuPy's compile cache, which hashes only the source text, in step with the headers.
    """
    seen: set[str] = set()

    def expand(name: str) -> str:
        if name in seen:
            return ""
        seen.add(name)
        text = (KERNEL_DIR / name).read_text()
        return _INCLUDE.sub(lambda m: expand(m.group(1)), text.replace("#pragma once", ""))

    return expand(filename)


@functools.lru_cache(maxsize=None)
def _module(xp, filename: str, name_expressions: tuple[str, ...]):
    return xp.RawModule(code=kernel_source(filename), options=NVRTC_OPTIONS, name_expressions=name_expressions)


def get_kernel(xp, filename: str, name: str, all_names: tuple[str, ...] | None = None):
    """Kernel ``name`` (a template instance such as 'metropolis_chunks<2, 4>') from sim/kernels/<filename>.

    ``all_names`` lists every instance to compile into the module at once (it must contain ``name``).
    """
    names = tuple(all_names) if all_names else (name,)
    return _module(xp, filename, names).get_function(name)
