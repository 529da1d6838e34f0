"""The package's version, in a module of its own: the subpackages that write it into files (sim/export.py,
sim/output/metadata.py) import this, not the package ``latticelab`` itself, whose ``open`` imports them."""
__version__ = "0.2.0"
