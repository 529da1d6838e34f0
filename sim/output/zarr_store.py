"""Fields and observables to a Zarr store that ``xarray.open_zarr`` opens with its dimensions, units and
attributes (issue 43).

Layout (Zarr format 2, the one every Zarr reader knows; xarray's ``_ARRAY_DIMENSIONS`` names the dimensions)::

    run.zarr/
      x, y[, z]                 cell centres (grid spacing x index), units of length ("1": lattice units)
      time, step                one entry per snapshot: the model's time (its units) and the step count
      <field> (time, x, y[, z]) each of the model's fields, in its own dtype (bit for bit), chunked by snapshot
                                and tiles of the grid
      series_time, series_step  one entry per recorded step
      <observable> (series_time)  every declared observable, with its label and unit
      .zmetadata                consolidated metadata: what readers see

Atomicity: a new store is built under a hidden temporary name beside the target and renamed into place
when its first snapshot (or the run's end) is written, so an interrupted run never leaves a partial store
under the user's name. What readers open is the consolidated metadata (``.zmetadata``), and it carries each
array's *logical* length: a write (a snapshot, a block of series) first writes its chunks -- into arrays that
grow ahead of the data, so most writes touch no array metadata -- and only then replaces ``.zmetadata``
(atomically) with the new lengths. A store whose writer was killed therefore reads as it was at its last
complete write; ``close`` cuts every array to its length and consolidates the metadata from the arrays. An
append (a resumed run, ``append=True``) continues from the consolidated lengths, over anything written
after them.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from latticelab.sim.io import OutputError, OutputExists, check_output
from latticelab.sim.output.extras import require
from latticelab.sim.output.background import BackgroundWriter, HostCopy
from latticelab.sim.output.metadata import field_units, grid_spacing, run_attributes, time_units

AXES = ("x", "y", "z")
SERIES_CHUNK = 4096
SERIES_FLUSH = 1024          # steps of observables gathered before they go to the writer thread
GROW = 64                    # rows an array grows by at least (a field: 64 snapshots' worth of chunk rows)


CHUNK_BYTES = 4 << 20         # the most bytes of one chunk of a field snapshot


def _tile(shape, itemsize: int) -> tuple[int, ...]:
    """Chunk shape of one snapshot: square (cubic) tiles of the largest power-of-two side holding at most
    CHUNK_BYTES (2048^2 int8 spins, 512^2 float64 in 2D; 128^3 int8, 64^3 float64 in 3D). Each chunk costs the
    writer a fixed overhead besides its bytes, so tiles are as large as still suits readers of parts of a field."""
    side = 1
    while (2 * side) ** len(shape) * itemsize <= CHUNK_BYTES:
        side *= 2
    return tuple(min(n, side) for n in shape)


class ZarrWriter:
    """Writes ``model``'s fields every ``every`` steps and its observables at every step given, to ``path``."""

    def __init__(self, path, model, *, every: int = 1, overwrite: bool = False, append: bool = False,
                 inputs: dict | None = None):
        (self._zarr,) = require(path, "zarr")
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise ValueError(f"every: must be a positive integer number of steps; got {every!r}")
        self.path = Path(path)
        self.every = int(every)
        self._fields = {name: (tuple(a.shape), np.dtype(str(a.dtype))) for name, a in model.fields().items()}
        self._observables = [o for o in model.declared_observables]
        self._pending: list[tuple] = []         # (time, step, {name: value}) not yet given to the thread
        self._arrays: dict = {}                 # the group's arrays, opened once
        self._last_step = self._last_series_step = -1      # in the store: a resumed run's repeats are skipped
        self._placed = True
        self._old = None
        self._inputs = {f"input_{k}": str(v) for k, v in (inputs or {}).items()}
        if append and self.path.exists():
            self._root = self.path
            self._open_existing(model)
        else:
            self._root = self._new_location(overwrite)
            self._create(model)
        self._writer = BackgroundWriter(self._write, name="latticelab-zarr")

    # ---- where the store is built -----------------------------------------------------------------------
    def _new_location(self, overwrite: bool) -> Path:
        if self.path.is_dir():
            if not overwrite:
                raise OutputExists(self.path, "it exists already; choose another name, allow overwriting, or "
                                              "append to it (a resumed run)")
            self._old = self.path
        else:
            check_output(self.path, overwrite=overwrite)
        folder = self.path.parent if str(self.path.parent) else Path(".")
        try:
            temporary = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", suffix=".part", dir=folder))
        except OSError as exc:
            raise OutputError(self.path, exc.strerror or str(exc), exc.errno) from None
        self._placed = False
        return temporary

    def _place(self) -> None:
        """Move the store built under its temporary name to the user's name (once)."""
        if self._placed:
            return
        if self._old is not None:
            aside = self._old.with_name(f".{self._old.name}.old-{os.getpid()}")
            os.rename(self._old, aside)
            os.rename(self._root, self.path)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            if os.path.lexists(self.path):
                raise OutputExists(self.path, "it was created while this run was writing; the store is kept as "
                                              f"{self._root}")
            os.rename(self._root, self.path)
        self._root, self._placed = self.path, True
        self._group = self._zarr.open_group(str(self.path), mode="r+", zarr_format=2, use_consolidated=False)
        self._arrays = {}

    # ---- layout -------------------------------------------------------------------------------------
    def _array(self, group, name, shape, chunks, dtype, dims, attrs):
        return group.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=None,
                                  attributes={"_ARRAY_DIMENSIONS": list(dims), **attrs})

    def _create(self, model) -> None:
        group = self._zarr.open_group(str(self._root), mode="w", zarr_format=2)
        group.attrs.update({**run_attributes(model), "snapshot_every": self.every, **self._inputs})
        first = next(iter(self._fields.values()))[0]
        axes = AXES[:len(first)]
        spacing = grid_spacing(model)
        for axis, n in zip(axes, first):
            coord = self._array(group, axis, (n,), (n,), "f8", (axis,),
                                {"units": "1" if spacing == 1.0 else "length", "axis": axis.upper(),
                                 "long_name": f"cell centre along {axis}", "grid_spacing": spacing})
            coord[:] = np.arange(n) * spacing
        tu, label = time_units(type(model)), type(model).time_label
        self._array(group, "time", (0,), (SERIES_CHUNK,), "f8", ("time",),
                    {"units": tu, "long_name": f"{label} of the snapshot", "axis": "T"})
        self._array(group, "step", (0,), (SERIES_CHUNK,), "i8", ("time",),
                    {"units": "1", "long_name": "steps taken at the snapshot"})
        for name, (shape, dtype) in self._fields.items():
            self._array(group, name, (0, *shape), (1, *_tile(shape, dtype.itemsize)), dtype, ("time", *axes),
                        {"units": field_units(model, name), "long_name": name, "coordinates": "step"})
        self._array(group, "series_time", (0,), (SERIES_CHUNK,), "f8", ("series_time",),
                    {"units": tu, "long_name": label, "axis": "T"})
        self._array(group, "series_step", (0,), (SERIES_CHUNK,), "i8", ("series_time",),
                    {"units": "1", "long_name": "steps taken"})
        for o in self._observables:
            self._array(group, o.name, (0,), (SERIES_CHUNK,), "f8", ("series_time",),
                        {"units": o.unit or "1", "long_name": o.label, "coordinates": "series_step"})
        self._group = group
        self._length = {name: 0 for name in ("time", "step", *self._fields, "series_time", "series_step",
                                             *(o.name for o in self._observables))}
        self._zarr.consolidate_metadata(str(self._root), zarr_format=2)
        self._load_consolidated()

    def _open_existing(self, model) -> None:
        """A store to append to: same model and grid, ending before the model's step; arrays trimmed to the
        consolidated (last complete) lengths."""
        zarr = self._zarr
        try:
            seen = zarr.open_consolidated(str(self.path), mode="r", zarr_format=2)
        except Exception as exc:                           # not a store latticelab wrote
            raise OutputError(self.path, f"cannot append: not a latticelab Zarr store ({exc})") from None
        if seen.attrs.get("model") != model.name:
            raise OutputError(self.path, f"cannot append: the store holds model {seen.attrs.get('model')!r}, "
                                         f"not {model.name!r}")
        lengths = {name: seen[name].shape for name, _ in seen.arrays()}
        for name, (shape, _dtype) in self._fields.items():
            if name not in lengths or tuple(lengths[name][1:]) != shape:
                raise OutputError(self.path, f"cannot append: its field {name!r} is not of the model's shape {shape}")
        steps, series_steps = seen["step"][:], seen["series_step"][:]
        if steps.size and int(steps[-1]) > model.step_count:
            raise OutputError(self.path, f"cannot append: the store ends at step {int(steps[-1])} and the model is "
                                         f"at step {model.step_count}; a resumed run continues from the store's end")
        self.every = int(seen.attrs.get("snapshot_every", self.every))
        self._last_step = int(steps[-1]) if steps.size else -1
        self._last_series_step = int(series_steps[-1]) if series_steps.size else -1
        self._group = zarr.open_group(str(self.path), mode="r+", zarr_format=2, use_consolidated=False)
        self._length = {name: shape[0] for name, shape in lengths.items() if len(shape) and name not in AXES}
        self._load_consolidated()

    def _load_consolidated(self) -> None:
        with open(self._root / ".zmetadata", encoding="utf-8") as f:
            self._consolidated = json.load(f)

    def _commit(self) -> None:
        """Publish the lengths written so far: the consolidated metadata with each array's logical length."""
        entries = self._consolidated["metadata"]
        for name, n in self._length.items():
            entries[f"{name}/.zarray"]["shape"][0] = n
        # replaced by a rename, as Zarr's local store writes every file: a reader sees the old or the new
        # lengths; no fsync per write (it would cost more than the write on a busy disk)
        target = self._root / ".zmetadata"
        partial = target.with_name(f".zmetadata.{os.getpid()}.partial")
        partial.write_text(json.dumps(self._consolidated, indent=2), encoding="utf-8")
        os.replace(partial, target)

    def _finish(self) -> None:
        """At the end: every array cut to its length, and the metadata consolidated from the arrays."""
        for name, n in self._length.items():
            array = self._group[name]                   # as on disk now
            if array.shape[0] != n:
                array.resize((n, *array.shape[1:]))
        self._zarr.consolidate_metadata(str(self._root), zarr_format=2)

    # ---- the caller's side ----------------------------------------------------------------------------
    def due(self, step: int) -> bool:
        return step % self.every == 0

    def snapshot(self, model) -> None:
        """Queue the model's fields now (copies start at once; the writing happens in the writer's thread)."""
        if model.step_count <= self._last_step:
            return
        self._last_step = model.step_count
        fields = model.fields()
        copies = {name: HostCopy(fields[name]) for name in self._fields}
        self._give_series()
        self._writer.put(("snapshot", float(model.time), int(model.step_count), copies))

    def series(self, times, steps, values: dict) -> None:
        """Observables of recorded steps: ``times``, ``steps`` (n,) and ``values[name]`` (n,)."""
        steps = np.atleast_1d(np.asarray(steps, np.int64))
        new = (steps > self._last_series_step) | (steps < 0)        # -1: a sample whose step is not known
        if not new.any():
            return
        self._last_series_step = max(self._last_series_step, int(steps.max()))
        self._pending.append((np.atleast_1d(np.asarray(times, np.float64))[new], steps[new],
                              {o.name: np.atleast_1d(np.asarray(values[o.name], np.float64))[new]
                               for o in self._observables}))
        if sum(p[0].size for p in self._pending) >= SERIES_FLUSH:
            self._give_series()

    def _give_series(self) -> None:
        if not self._pending:
            return
        times = np.concatenate([p[0] for p in self._pending])
        steps = np.concatenate([p[1] for p in self._pending])
        values = {o.name: np.concatenate([p[2][o.name] for p in self._pending]) for o in self._observables}
        self._pending = []
        self._writer.put(("series", times, steps, values))

    def close(self) -> Path:
        """Write everything given, commit, and put the store under its name; returns the path."""
        self._give_series()
        self._writer.close()
        self._finish()
        self._place()
        return self.path

    def abort(self) -> None:
        """Stop without writing what is still queued: a store never placed is removed; a placed one stays as
        of its last complete write."""
        self._pending = []
        try:
            self._writer.close()
        except Exception:
            pass
        if not self._placed:
            shutil.rmtree(self._root, ignore_errors=True)

    def describe(self) -> str:
        return f"wrote {self.path} (Zarr; open with xarray.open_zarr)"

    # ---- the writer thread --------------------------------------------------------------------------
    def _append(self, name: str, values: np.ndarray) -> None:
        """Write ``values`` after the array's logical length; the array grows ahead (by half its length, at
        least GROW rows) so that most appends are chunk writes only."""
        array = self._arrays.get(name)
        if array is None:
            array = self._arrays[name] = self._group[name]
        n = self._length[name]
        end = n + values.shape[0]
        if end > array.shape[0]:
            array.resize((max(end, n + max(GROW, n // 2)), *array.shape[1:]))
        array[n:end] = values
        self._length[name] = end

    def _write(self, item) -> None:
        if item[0] == "snapshot":
            _, time_value, step, copies = item
            for name, copy in copies.items():
                self._append(name, copy.result()[None])
            self._append("time", np.array([time_value]))
            self._append("step", np.array([step], np.int64))
        else:
            _, times, steps, values = item
            for name, v in values.items():
                self._append(name, v)
            self._append("series_time", times)
            self._append("series_step", steps)
        self._commit()
        if item[0] == "snapshot":
            self._place()
