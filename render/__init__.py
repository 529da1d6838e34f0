"""VisPy views of the simulations: take NumPy/CuPy arrays, draw through shaders; no Qt widgets here."""
from latticelab.render import vispy_speedups as _vispy_speedups

_vispy_speedups.install()
