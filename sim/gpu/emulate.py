"""Run the CUDA kernels of sim/kernels/ on the CPU, for tests on machines without a GPU.

``emulated_xp()`` returns a stand-in for the ``cupy`` module: NumPy arrays, plus a ``RawModule`` that
compiles the same kernel source with g++ against cuda_emulator.h (every CUDA thread a fiber, barriers and
warp shuffles honoured, atomics interleaved by a seeded scheduler) and launches it through ctypes the way
CUDA's driver does, from an array of pointers to the arguments. It is slow (small lattices only) and checks
logic, not speed: memory-model effects that only real hardware shows are out of its reach.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import types
from pathlib import Path

import numpy as np

HEADER = Path(__file__).resolve().parent / "cuda_emulator.h"
_SCALARS = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.uint32): ctypes.c_uint32,
            np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint64): ctypes.c_uint64,
            np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


class EmulatorUnavailable(RuntimeError):
    pass


def compiler() -> str | None:
    return shutil.which(os.environ.get("CXX", "g++"))


def _cache_dir() -> Path:
    path = Path(os.environ.get("LATTICELAB_EMULATOR_CACHE", Path(tempfile.gettempdir()) / "latticelab-cuda-emulator"))
    path.mkdir(parents=True, exist_ok=True)
    return path


class RawModule:
    """The subset of cupy.RawModule that sim/gpu uses: code, options, name_expressions, get_function."""

    def __init__(self, code: str, options=(), name_expressions=()):
        cxx = compiler()
        if cxx is None:
            raise EmulatorUnavailable("no C++ compiler (g++) to build the CUDA emulator")
        self.names = tuple(name_expressions)
        wrappers = "\n".join(
            f'extern "C" int emu_launch_{i}(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, '
            f'unsigned bz, void** args, unsigned long long seed) {{ return emu::launch(&{name}, '
            f'dim3{{gx, gy, gz}}, dim3{{bx, by, bz}}, args, seed); }}'
            for i, name in enumerate(self.names))
        source = code + "\n" + wrappers + "\n"
        digest = hashlib.sha256((source + HEADER.read_text()).encode()).hexdigest()[:20]
        library = _cache_dir() / f"kernels-{digest}.so"
        if not library.exists():
            # per-process names, renamed into place: parallel test workers may build the same kernels at once
            src = library.with_suffix(f".{os.getpid()}.cpp")
            src.write_text(source)
            tmp = library.with_suffix(f".{os.getpid()}.tmp")
            cmd = [cxx, "-std=c++17", "-O1", "-g", "-shared", "-fPIC", "-Wno-unknown-pragmas",
                   "-include", str(HEADER), "-x", "c++", str(src), "-o", str(tmp)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"emulator build failed:\n{done.stderr[-6000:]}")
            os.replace(tmp, library)
            src.unlink(missing_ok=True)
        self._library = ctypes.CDLL(str(library))
        self.launches = 0

    def get_function(self, name: str) -> "RawKernel":
        return RawKernel(self, getattr(self._library, f"emu_launch_{self.names.index(name)}"), name)


class RawKernel:
    def __init__(self, module: RawModule, entry, name: str):
        self.module, self.entry, self.name = module, entry, name
        self.entry.restype = ctypes.c_int

    def __call__(self, grid, block, args, shared_mem: int = 0):
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        holders = []
        for i, arg in enumerate(args):
            if isinstance(arg, np.ndarray):
                holders.append(ctypes.c_void_p(arg.ctypes.data))
            elif isinstance(arg, np.generic) and arg.dtype in _SCALARS:
                holders.append(_SCALARS[arg.dtype](arg.item()))
            else:
                raise TypeError(f"{self.name}: argument {i} must be an array or a sized NumPy scalar; "
                                f"got {type(arg).__name__}")
        pointers = (ctypes.c_void_p * len(holders))(*(ctypes.cast(ctypes.pointer(h), ctypes.c_void_p)
                                                      for h in holders))
        self.module.launches += 1
        error = self.entry(*(ctypes.c_uint(v) for v in grid + block), pointers,
                           ctypes.c_ulonglong(self.module.launches))
        if error:
            raise RuntimeError(f"{self.name}: the emulated launch failed (deadlock at a barrier)")


def emulated_xp() -> types.ModuleType:
    """A stand-in for the cupy module: NumPy's namespace plus the emulated RawModule."""
    module = types.ModuleType("cupy_emulated")
    module.__dict__.update({k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    module.RawModule = RawModule
    return module
