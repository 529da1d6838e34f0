"""The Signal dock's spike raster (issue 43): the spikes of a chosen band of neurons, recorded by the model's
compaction (sim/models/cortex/spikes.py), drawn as dots; the same spikes as an independent run's fired flags."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from latticelab.sim.backend import to_numpy  # noqa: E402
from latticelab.sim.models.cortex.model import CortexModel  # noqa: E402
from test_model_panels import SMALL_CORTEX, cortex_window  # noqa: E402


def fired_flags(steps_before: int, steps: int, band: range):
    """(steps, neurons) of the band's spikes in steps steps_before+1 .. steps_before+steps of a fresh run."""
    model = CortexModel(backend="numpy", **SMALL_CORTEX)
    model.step(steps_before)
    rows = []
    for _ in range(steps):
        model.step(1)
        fired = np.flatnonzero(to_numpy(model.fired).reshape(-1))
        rows += [(model.step_count, i) for i in fired if i in band]
    return np.array(rows).reshape(-1, 2)


def test_the_raster_shows_the_band_s_spikes(make_window, qtbot):
    window = cortex_window(make_window, qtbot)
    panel = window.signal_panel
    panel.tabs.setCurrentWidget(panel.raster_tab)
    assert panel.tabs.isTabEnabled(panel.tabs.indexOf(panel.raster_tab)) and window.model.spike_recording is not None
    start = window.model.step_count
    window.runner.advance(300)
    assert panel.refresh(force=True)
    t, neurons = panel.raster_plot.data
    want = fired_flags(start, 300, range(0, 200))
    assert len(want) > 0 and np.array_equal(np.column_stack([t, neurons]), want.astype(float))   # 1 step = 1 ms
    with_dots = panel.raster_canvas.render(alpha=False)[..., :3].astype(int)
    panel.raster_plot.markers.visible = False
    without = panel.raster_canvas.render(alpha=False)[..., :3].astype(int)
    panel.raster_plot.markers.visible = True
    changed = np.abs(with_dots - without).max(axis=-1) > 30
    rows = np.flatnonzero(changed.any(axis=1))
    assert changed.sum() > 50 and rows.min() > 0                              # dots, below the title
    lighter = (with_dots - without).sum(axis=-1)[changed]
    assert (lighter > 0).all()                                                # light dots on the dark view
    # another band: the recording follows it from now on
    panel.raster_first.setValue(50)
    panel.raster_count.setValue(20)
    recording = window.model.spike_recording
    assert (recording.first, recording.count) == (50, 20)
    window.runner.advance(100)
    assert panel.refresh(force=True)
    _t, neurons = panel.raster_plot.data
    assert neurons.size and neurons.min() >= 50 and neurons.max() < 70
    assert "neurons 50-69" in panel.raster_plot.title.text
