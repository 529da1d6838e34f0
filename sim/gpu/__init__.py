"""Fast CUDA kernels for the rewired Ising model (issue 5): CudaEngine and GPU connected-component labelling.

Nothing here imports CuPy at import time: the array module arrives as ``xp`` (sim/backend.py). The kernel
sources live in sim/kernels/*.cu; sim/gpu/emulate.py runs the same sources on the CPU for tests without a GPU.
"""
