"""Cahn-Hilliard phase separation (seed 001, section 3): everything Cahn-Hilliard lives in this package.

model.py (CahnHilliardModel, the protocol), params.py (the parameter schema, the finite-difference stability
limit), finite_difference.py (explicit RK2 finite differences: the NumPy twin and the driver of the fused
CUDA stage kernel in kernels/ch_rk2.cu), spectral.py (the semi-implicit Fourier / cosine spectral step),
pfhub.py (PFHub benchmark 1: presets, the exact mapping onto this model, the result writer).
"""
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
