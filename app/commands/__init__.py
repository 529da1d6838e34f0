"""The ``latticelab`` command line, a module per command: ``run`` (headless), ``gui`` (the default), ``sweep``
and ``tc`` (studies), ``prepare-gpu``; ``options`` holds what they share and ``main`` puts them together. The
composition root (latticelab/__main__.py) adds the benchmarks."""
