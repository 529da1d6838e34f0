"""latticelab: an interactive GPU laboratory for lattice and network models.

The repository's top-level folders are the subpackages of this one namespace (pyproject.toml maps the
repository root to ``latticelab``), so an installed latticelab never clashes with another ``app`` or ``sim``:

- ``latticelab.sim``: models and analysis, no GUI (NumPy or CuPy, chosen at run time);
- ``latticelab.render``: VisPy views, no Qt widgets;
- ``latticelab.app``: the Qt application and the command line;
- ``latticelab.shaders``: GLSL sources (data);
- ``latticelab.bench``: benchmarks; nothing in sim, render or app imports it.

``latticelab.open`` (below) is the notebook API (sim/session.py, render/notebook.py).
``latticelab.__main__`` is the composition root that joins the application's commands and the benchmarks
into the ``latticelab`` command.
"""
from latticelab.version import __version__  # noqa: F401  (latticelab.__version__)


def open(model: str = "ising", backend: str = "auto", **params):   # noqa: A001 (the notebook API's verb)
    """A simulation of a registered model for notebooks and scripts: ``sim = latticelab.open("ising", L=1024)``,
    then ``sim.run(1000)``, ``sim.to_xarray()``, ``sim.show()`` (docs/notebooks.md). The GUI libraries load only
    when ``show`` or ``plots`` is called."""
    from latticelab.render.notebook import open as open_simulation   # here: `import latticelab` stays light
    return open_simulation(model, backend, **params)
