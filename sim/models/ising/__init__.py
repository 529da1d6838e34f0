"""The small-world rewired Ising model (thesis 003, chapter 7): everything Ising lives in this package.

model.py (IsingModel and its reference engine), params.py (the parameter schema), lattice.py (the rewired
graph), metropolis.py / wolff.py / swendsen_wang.py (the NumPy/CuPy reference updates), clusters.py
(like-spin clusters), exact.py (exact enumeration, Onsager, Yang), state.py (checking saved states),
gpu/ and kernels/ (the CUDA engine).
"""
