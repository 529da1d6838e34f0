"""GPU plumbing shared by every model: kernel loading (kernels.py), Philox4x32 on the host (philox.py), and
the CPU emulator that runs CUDA kernel sources without a GPU (emulate.py, cuda_emulator.h).

Nothing here imports CuPy at import time: the array module arrives as ``xp`` (sim/backend.py).
"""
