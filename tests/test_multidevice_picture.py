"""The picture of a model split over devices (issue 40): each slab encoded on its own device, reduced there
when the view is smaller than the lattice, and the slabs gathered into one picture (sim/multidevice/picture.py).

On the CPU the slabs are NumPy arrays of one process (the kernels under the CUDA emulator), as in
tests/test_multidevice_ising.py; on the 2-GPU machine (marked gpu) the slabs are on the GPUs and are gathered
by peer copy on either of them. Either way the codes must be the one-device picture's, cell for cell, and a
reduced picture the one-device picture's every k-th cell.
"""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.multidevice.picture import kept_range, reduced_shape, reduction_step

from helpers import device_xp, emulate_devices


def test_the_kept_cells_and_the_reduction_step():
    assert kept_range(0, 10, 4) == (0, 3) and kept_range(5, 10, 4) == (8, 1) and kept_range(9, 11, 4)[1] == 0
    assert reduced_shape((10, 7), 4) == (3, 2)
    # the largest power of two that divides both sides and leaves at least the view's pixels
    assert reduction_step((4096, 4096), (1000, 700)) == 4
    assert reduction_step((4096, 2048), (600, 700)) == 2
    assert reduction_step((64, 64), (700, 700)) == 1
    assert reduction_step((96, 4096), (2, 2)) == 32       # 96 = 3 x 32: 64 does not divide it
    assert reduction_step((64, 64, 64), (10, 10)) == 1    # 3D pictures are not reduced


@pytest.fixture
def emulated_models(monkeypatch):
    """IsingModel on the CPU with its CUDA kernels emulated and several 'devices' allowed (NumPy slabs)."""
    emulate_devices(monkeypatch)
    from latticelab.sim.models.ising.model import IsingModel
    return IsingModel


def _assert_pictures_agree(one, split, batch_one, batch_split, steps=(1, 2, 4, 8)):
    for marks in (False, True):
        a, b = one.picture(batch_one, marks), split.picture(batch_split, marks)
        codes = to_numpy(a.codes())
        np.testing.assert_array_equal(b.codes(), codes, err_msg=f"marks={marks}")
        np.testing.assert_array_equal(b.palette, a.palette)
        assert b.legend == a.legend and (b.links is None) == (a.links is None)
        for step in steps if one.dim == 2 else (1,):
            np.testing.assert_array_equal(b.slabs.codes(step), codes[::step, ::step], err_msg=f"step {step}")


@pytest.mark.parametrize("dim, L, p, devices", [(2, 128, 0.05, (0, 1, 2)), (3, 64, 0.01, (0, 1)),
                                                 (2, 128, 0.0, (0, 1, 2))])
def test_split_pictures_are_the_one_device_picture(emulated_models, dim, L, p, devices):
    """Spins, the highlight of a frame's flips (kept in the slabs' flip words), of a single step's (a host
    mask), and the rewired sites; slabs of unequal sizes (128 rows over 3 parts) and reductions by 2 to 8; at
    p = 0 the frame's sweeps run at once on slabs with deep halos (SlabMetropolis.frame_sweeps)."""
    IsingModel = emulated_models
    values = dict(dim=dim, L=L, p=p, T=2.3 if dim == 2 else 4.5, algorithm="metropolis", seed=5)
    one, split = IsingModel(**values), IsingModel(**values, devices=devices)
    a, b = one.advance(3), split.advance(3)
    assert type(b.changed).__name__ == "DeviceFlips"
    np.testing.assert_array_equal(np.asarray(b.changed), to_numpy(a.changed))
    _assert_pictures_agree(one, split, a.changed, b.changed)
    for model in (one, split):
        model.step(1)
    _assert_pictures_agree(one, split, one.changed(), split.changed())
    _assert_pictures_agree(one, split, None, None)
    spins = to_numpy(one.spins)
    for index in [(0,) * dim, (L // 2 - 1,) + (3,) * (dim - 1), (L // 2,) + (5,) * (dim - 1), (L - 1,) * dim]:
        assert split.main_field_at(index) == ("spins", int(spins[index]))


def test_leaving_out_a_slab_or_its_offset_shows(emulated_models, monkeypatch):
    """The gathered picture is not right by accident: a slab drawn at another part's rows, or a reduction that
    keeps each slab's first row instead of the rows that are multiples of the step, changes it."""
    from dataclasses import replace

    import latticelab.sim.multidevice.picture as split_picture
    IsingModel = emulated_models
    values = dict(dim=2, L=128, p=0.0, T=2.3, algorithm="metropolis", seed=2)
    one, split = IsingModel(**values), IsingModel(**values, devices=(0, 1, 2))
    one.step(2)
    split.step(2)
    codes = to_numpy(one.picture(None).codes())
    slabs = split.picture(None).slabs
    swapped = replace(slabs, slabs=(replace(slabs.slabs[0], picture=slabs.slabs[1].picture),) + slabs.slabs[1:])
    assert not np.array_equal(swapped.codes(), codes)
    np.testing.assert_array_equal(slabs.codes(4), codes[::4, ::4])
    # slab 1 owns rows 43..85: at step 4 it must give rows 44, 48, ..., not 43, 47, ...
    monkeypatch.setattr(split_picture, "kept_range", lambda start, stop, step: (start, -(-(stop - start) // step)))
    assert not np.array_equal(slabs.codes(4), codes[::4, ::4])


@pytest.mark.parametrize("dim, L", [(2, 48), (3, 16)])
def test_a_split_cahn_hilliard_picture_is_the_one_device_picture(monkeypatch, dim, L):
    """The field's slabs through the model's colormap, with a highlight mask, reduced in 2D; the key, range and
    colour bar of the whole field."""
    emulate_devices(monkeypatch)
    from latticelab.sim.models.cahn_hilliard.model import CahnHilliardModel
    values = dict(dim=dim, L=L, boundary="periodic", dt=0.01, noise=0.1, seed=3)
    one = CahnHilliardModel.create(backend="numpy", **values)
    split = CahnHilliardModel.create(backend="numpy", devices=(0, 1, 2), **values)
    for model in (one, split):
        model.step(3)
    mask = np.random.default_rng(1).random((L,) * dim) < 0.1
    for highlight in (None, mask):
        a, b = one.picture(highlight), split.picture(highlight)
        assert b.slabs is not None and b.shape == a.shape
        codes = to_numpy(a.codes())
        assert len(np.unique(codes)) > 20
        np.testing.assert_array_equal(b.codes(), codes)
        assert (b.legend, b.value_range, b.colour_bar) == (a.legend, a.value_range, a.colour_bar)
        np.testing.assert_array_equal(b.palette, a.palette)
        for step in (2, 4, 8) if dim == 2 else ():
            np.testing.assert_array_equal(b.slabs.codes(step), codes[::step, ::step], err_msg=f"step {step}")
    phi = to_numpy(one.phi)
    for index in [(0,) * dim, (L // 3 - 1,) + (2,) * (dim - 1), (L // 3,) * dim, (L - 1,) * dim]:
        assert split.main_field_at(index) == ("phi", float(phi[index]))


@pytest.mark.gpu
def test_split_pictures_on_two_gpus_are_gathered_on_either():
    xp = device_xp("cuda")
    if xp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    from latticelab.sim.models.ising.model import IsingModel
    for p in (0.01, 0.0):      # sweep by sweep; a frame's sweeps replayed at once (frame_sweeps)
        values = dict(dim=2, L=1024, p=p, T=2.3, algorithm="metropolis", seed=5, backend="cuda")
        one, split = IsingModel(**values), IsingModel(**values, devices="0,1")
        a, b = one.advance(4), split.advance(4)
        _assert_gathered_on_either(one, split, a, b)


def _assert_gathered_on_either(one, split, a, b):
    for marks in (False, True):
        codes = to_numpy(one.picture(a.changed, marks).codes())
        slabs = split.picture(b.changed, marks).slabs
        for device in (0, 1):
            for step in (1, 4):
                gathered = slabs.codes(step, device)
                assert gathered.device.id == device
                np.testing.assert_array_equal(gathered.get(), codes[::step, ::step],
                                              err_msg=f"marks={marks} device={device} step={step}")
