"""Fast CUDA kernels of the rewired Ising model: CudaEngine and GPU connected-component labelling.

Nothing here imports CuPy at import time: the array module arrives as ``xp`` (sim/backend.py). The kernel
sources live in ``sim/models/ising/kernels/*.cu``; sim/gpu/emulate.py runs the same sources on the CPU for
tests without a GPU.
"""
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
