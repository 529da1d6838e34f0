"""GLSL sources (data files), installed beside render/; render/shaders.py reads them."""
