"""The row-blocked finite-difference stage kernel (ch_rk2_stage_rows in
sim/models/cahn_hilliard/kernels/ch_rk2.cu) against its NumPy twin, bit for bit on the CPU emulator.

The kernel's edge cases are its strips: a warp writes 30 columns (lanes 0 and 31 carry the halo) and R rows
(8 or 16), CH_ROWS_WARPS = 4 strips per block, so the sizes below take grids smaller than one warp's strip
(L = 3, the least), exactly one x strip (30), one more column than a strip (31), partial strips in both x and y
(37, 70: x strips of 30 + 30 + 10, y strips ending mid-strip and blocks with idle warps), in 2D and 3D, periodic
and mirror, float32 and float64. Every cell is checked, including the ones next to the walls where ghost lanes,
ghost rows and ghost planes stand in for mirrored cells. (The other variants are compared with the twin in
test_cahn_hilliard.py.)
"""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.models.cahn_hilliard.finite_difference import (KERNELS, ROWS, CudaStage, Shifts, kernel_name,
                                                                   launch, rk2_stage_twin)

from helpers import DEVICES, device_xp

ROW_KERNELS = [k for k in KERNELS if k in ROWS]
SIZES = {"emulator": [(2, 3), (2, 30), (2, 31), (2, 37), (2, 70), (3, 3), (3, 4), (3, 9), (3, 17), (3, 31)],
         "cuda": [(2, 3), (2, 31), (2, 300), (2, 1001), (3, 3), (3, 17), (3, 70), (3, 129)]}


@pytest.mark.parametrize("kernel", ROW_KERNELS)
@pytest.mark.parametrize("device", DEVICES)
def test_the_row_blocked_stage_equals_its_numpy_twin(device, kernel):
    xp = device_xp(device)
    rng = np.random.default_rng(11)
    args = (1.1, 0.9, 1.3, 1 / 0.7 ** 2, 0.0037)
    for (dim, L), boundary, dtype in ((case, bnd, d) for case in SIZES[device] for bnd in ("periodic", "mirror")
                                      for d in (np.float64, np.float32)):
        shape = (L,) * dim
        base, evaluated = (rng.uniform(-1.2, 1.2, shape).astype(dtype) for _ in range(2))
        twin = rk2_stage_twin(Shifts(np, shape, boundary), base, evaluated, *args)
        out = xp.asarray(np.full(shape, np.nan, dtype))           # a cell left unwritten stays NaN
        inputs = xp.asarray(base), xp.asarray(evaluated)
        CudaStage(xp, dtype, dim, boundary, kernel)(*inputs, out, *args)
        got = to_numpy(out)
        where = f"{kernel} {dim}D L={L} {boundary} {dtype.__name__}"
        assert got.dtype == twin.dtype, where
        if device == "emulator":                 # the same operations in the same order: the same bits
            np.testing.assert_array_equal(got, twin, err_msg=where)
        else:                                    # nvrtc contracts to fused multiply-adds
            tol = 1e-12 if dtype == np.float64 else 2e-5
            np.testing.assert_allclose(got, twin, rtol=tol, atol=tol, err_msg=where)
        np.testing.assert_array_equal(to_numpy(inputs[0]), base)           # the inputs are only read
        np.testing.assert_array_equal(to_numpy(inputs[1]), evaluated)


def test_the_row_blocked_launch_covers_the_grid():
    """x strips of 30 columns, y strips of R rows, 4 per block, one z plane per block in 3D."""
    assert launch("rows", 2, 4096) == ((137, 128, 1), (32, 4, 1))
    assert launch("rows16", 3, 256) == ((9, 4, 256), (32, 4, 1))
    assert launch("rows", 3, 3) == ((1, 1, 3), (32, 4, 1))
    with pytest.raises(ValueError, match="unknown finite-difference stage kernel"):
        kernel_name(np.float32, 2, "periodic", "rows32")
