"""Spike trains, the pseudo-EEG and firing rates to an NWB file (Neurodata Without Borders, through pynwb), for
the tools of computational neuroscience (issue 43).

What the file holds:
- ``units``: one row per recorded neuron (id = flat index, with its ``x`` and ``y`` on the grid) and its spike
  times in seconds (step / the model's ``signal_rate``), built as whole arrays (no per-unit calls);
- ``acquisition``: every declared observable as a TimeSeries over the recorded steps (the pseudo-EEG in volts,
  converted from mV), and each "fraction" signal of the model also as a rate per neuron in Hz;
- ``notes``: the run's attributes (model, parameters, version, commit) as JSON; ``protocol``: the text of the
  run's input files (a schedule of parameter changes).

The file is written in one go when the run ends, to a temporary file beside the target that is then moved to
its name, so an interrupted write never leaves a damaged file under the user's name.
"""
from __future__ import annotations

import datetime
import json
import uuid
from pathlib import Path

import numpy as np

from latticelab.sim.io import OutputError, check_output
from latticelab.sim.output.extras import require, write_by_name
from latticelab.sim.output.metadata import run_attributes, time_units


def seconds_per_step(model) -> float:
    return 1.0 / float(getattr(model, "signal_rate", 1.0))


def _input_text(inputs: dict) -> str:
    parts = []
    for name, path in (inputs or {}).items():
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = "(not readable when the file was written)"
        parts.append(f"# {name}: {path}\n{text}")
    return "\n".join(parts)


def write_nwb(path, model, spikes: tuple, band: tuple[int, int], times, values: dict, *, overwrite: bool = False,
              inputs: dict | None = None) -> Path:
    """Write ``spikes`` = (steps, indices) of the neurons in ``band`` = (first, count), and the per-step
    observables ``values[name]`` at model times ``times`` (steps counted by ``times``), to ``path``."""
    (pynwb, hdmf_common) = require(path, "pynwb", "hdmf.common")
    from pynwb import NWBHDF5IO, NWBFile, TimeSeries
    from pynwb.misc import Units
    check_output(path, overwrite=overwrite)
    dt = seconds_per_step(model)
    attrs = run_attributes(model)
    start = datetime.datetime.now(datetime.timezone.utc)
    nwb = NWBFile(session_description=f"latticelab simulation: {model.title}", identifier=str(uuid.uuid4()),
                  session_start_time=start, experiment_description=attrs["history"],
                  notes=json.dumps(attrs, default=str), protocol=_input_text(inputs) or None,
                  source_script=f"latticelab {attrs['latticelab_version']} ({attrs['latticelab_commit']})",
                  source_script_file_name="latticelab")
    # units: the band's neurons in order, each with its spikes sorted in time
    first, count = band
    steps, indices = (np.asarray(a) for a in spikes)
    order = np.lexsort((steps, indices))
    spike_times = steps[order].astype(np.float64) * dt
    counts = np.bincount(indices[order] - first, minlength=count)
    ids = np.arange(first, first + count, dtype=np.int64)
    width = model.shape[-1]
    times_data = hdmf_common.VectorData(name="spike_times", description="spike times of the neuron (s)",
                                        data=spike_times)
    columns = [times_data,
               hdmf_common.VectorIndex(name="spike_times_index", data=np.cumsum(counts), target=times_data),
               hdmf_common.VectorData(name="x", description="column of the neuron on the grid", data=ids % width),
               hdmf_common.VectorData(name="y", description="row of the neuron on the grid", data=ids // width)]
    units = Units(name="units", description=f"neurons {first} .. {first + count - 1} (flat index = y * L + x); "
                                            f"spike time = step x {dt:g} s",
                  id=hdmf_common.ElementIdentifiers(name="id", data=ids), columns=columns)
    nwb.units = units
    times = np.asarray(times, np.float64)
    unit = time_units(type(model))
    stamps = times / 1000.0 if unit == "ms" else times if unit == "s" else times * dt    # NWB counts seconds
    for o in type(model).declared_observables:
        data = np.asarray(values[o.name], np.float64)
        unit, conversion = (("volts", 1e-3) if o.unit == "mV" else (o.unit or "1", 1.0))
        nwb.add_acquisition(TimeSeries(name=o.name, description=o.label, data=data, unit=unit,
                                       conversion=conversion, timestamps=stamps))
    for column in getattr(model, "signal_columns", ()):
        if column.role == "fraction" and column.name in values:
            rate = np.asarray(values[column.name], np.float64) * float(model.signal_rate)
            nwb.add_acquisition(TimeSeries(name=f"{column.name}_rate", description=f"firing rate per neuron: "
                                           f"{column.label}", data=rate, unit="Hz", timestamps=stamps))

    def write(name):
        with NWBHDF5IO(name, mode="w") as io:
            io.write(nwb)
    return write_by_name(path, write, overwrite, suffix=".nwb")


class NwbWriter:
    """The NWB output of a run: records the model's spikes (all neurons, or the band ``neurons``) and its
    observables at every step given, and writes the file at ``close``."""

    def __init__(self, path, model, *, every: int = 1, overwrite: bool = False, inputs: dict | None = None,
                 neurons=None):
        require(path, "pynwb")
        if not callable(getattr(model, "record_spikes", None)):
            raise OutputError(path, f"an NWB file holds spike trains, and the model {model.name!r} records none; "
                                    "use .zarr for its fields and observables")
        check_output(path, overwrite=overwrite)
        self.path, self._model, self._overwrite, self._inputs = Path(path), model, overwrite, inputs
        self._recording = model.record_spikes(neurons)
        self._times: list[float] = []
        self._values = {o.name: [] for o in type(model).declared_observables}

    def due(self, step: int) -> bool:
        return False                      # no fields in an NWB file

    def snapshot(self, model) -> None:
        """NWB files hold no field snapshots; nothing to do."""

    def series(self, times, steps, values: dict) -> None:
        self._times.extend(np.atleast_1d(np.asarray(times, np.float64)).tolist())
        for name, column in self._values.items():
            column.extend(np.atleast_1d(np.asarray(values[name], np.float64)).tolist())

    def close(self) -> Path:
        recording = self._model.stop_recording_spikes()
        return write_nwb(self.path, self._model, recording.spikes(), (recording.first, recording.count),
                         self._times, self._values, overwrite=self._overwrite, inputs=self._inputs)

    def abort(self) -> None:
        self._model.stop_recording_spikes()

    def describe(self) -> str:
        return f"wrote {self.path} (NWB; open with pynwb.NWBHDF5IO)"
