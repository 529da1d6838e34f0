"""VisPy views of the simulations: take NumPy/CuPy arrays, draw through shaders; no Qt widgets here."""
