"""Statistics of model states that do not depend on the model."""
from __future__ import annotations

import numpy as np


def size_histogram(sizes: np.ndarray, n_sites: int) -> tuple[np.ndarray, np.ndarray]:
    """Histogram of cluster sizes over powers of two: bin i counts clusters of size in [2^i, 2^(i+1)).

    Returns (bin lower edges, counts); the last edge covers the whole lattice.
    """
    top = int(np.floor(np.log2(max(n_sites, 1)))) + 1
    edges = 2 ** np.arange(top + 1, dtype=np.int64)
    counts, _ = np.histogram(np.asarray(sizes), bins=edges)
    return edges[:-1], counts.astype(np.int64)
