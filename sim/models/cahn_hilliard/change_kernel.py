"""Launch settings of kernels/ch_change.cu (the fused max-change reduction of the adaptive step control), shared by
the model (the host-read control, model.FusedChange) and the spectral steps (the control on the device) without
either importing the other."""
from __future__ import annotations

from latticelab.sim.models.cahn_hilliard import KERNEL_DIR

CHANGE_FILE = KERNEL_DIR / "ch_change.cu"
CHANGE_THREADS = 256       # CH_CHANGE_THREADS of ch_change.cu
CHANGE_CELLS_PER_THREAD = 4    # at least, before the grid is capped
CHANGE_MAX_BLOCKS = 1024
CHANGE_KERNELS = ("ch_change<float>", "ch_change<double>")


def change_launch(n: int, max_blocks: int = CHANGE_MAX_BLOCKS) -> tuple[tuple, tuple]:
    """(grid, block) of ch_change over n cells: CHANGE_CELLS_PER_THREAD cells a thread or more (grid-stride)."""
    blocks = max(1, min(max_blocks, -(-n // (CHANGE_THREADS * CHANGE_CELLS_PER_THREAD))))
    return (blocks,), (CHANGE_THREADS,)
