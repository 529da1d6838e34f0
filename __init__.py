"""latticelab: an interactive GPU laboratory for lattice and network models.

The repository's top-level folders are the subpackages of this one namespace (pyproject.toml maps the
repository root to ``latticelab``), so an installed latticelab never clashes with another ``app`` or ``sim``:

- ``latticelab.sim``: models and analysis, no GUI (NumPy or CuPy, chosen at run time);
- ``latticelab.render``: VisPy views, no Qt widgets;
- ``latticelab.app``: the Qt application and the command line;
- ``latticelab.shaders``: GLSL sources (data);
- ``latticelab.bench``: benchmarks; nothing in sim, render or app imports it.

``latticelab.__main__`` is the composition root that joins the application's commands and the benchmarks
into the ``latticelab`` command.
"""
__version__ = "0.2.0"
