"""VisPy views of the simulations: take NumPy/CuPy arrays, draw through shaders; no Qt widgets here."""
from latticelab.render import text_kernel as _text_kernel

_text_kernel.install()
