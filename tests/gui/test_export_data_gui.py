"""File > Export data... (issue 43): the window's fields now and its plotted observables to a Zarr store that
xarray reads back exactly, written by a worker thread while the window keeps running."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy

xr = pytest.importorskip("xarray")


def test_export_data_writes_the_fields_and_the_plot_history(make_window, qtbot, tmp_path):
    window = make_window(L=16, size=(900, 700))
    rec = window.recording
    menu = next(a.menu() for a in window.menuBar().actions() if a.menu() and "File" in a.menu().title())
    assert "Export data..." in [a.text() for a in menu.actions()]
    done = []
    rec.run_steps(5, then=lambda: done.append(True))
    qtbot.waitUntil(lambda: bool(done), timeout=60000)
    spins = to_numpy(window.model.fields()["spins"]).copy()
    times, values = window.runner.history.arrays()
    future = rec.export_fields(tmp_path / "now.zarr", confirm=False)
    qtbot.waitUntil(future.done, timeout=60000)
    assert future.result() == tmp_path / "now.zarr"
    qtbot.waitUntil(lambda: not rec._exports, timeout=10000)          # the window took note of the end
    ds = xr.open_zarr(tmp_path / "now.zarr")
    assert ds.step.values.tolist() == [5] and np.array_equal(ds.spins.isel(time=0).values, spins)
    assert ds.series_time.values.tolist() == times.tolist()
    assert np.array_equal(ds.energy.values, values["energy"]) and ds.attrs["parameter_L"] == 16
    # an existing store is kept: a script's export takes a free name beside it
    again = rec.export_fields(tmp_path / "now.zarr", confirm=False)
    qtbot.waitUntil(again.done, timeout=60000)
    assert again.result() == tmp_path / "now-1.zarr"
    # an unknown suffix is refused with the known ones named, nothing written
    window.interactive = False            # the message goes to the status bar and stderr, not a dialog
    assert rec.export_fields(tmp_path / "now.txt", confirm=False) is None
    assert ".zarr, .nwb, .pvd, .vtk" in window.last_error
    assert not (tmp_path / "now.txt").exists()
