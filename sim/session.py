"""latticelab from Python: a simulation object for scripts and notebooks (issue 43).

    import latticelab as ll
    sim = ll.open("ising", L=256, T=2.2)       # any registered model, its parameters by name
    sim.run(1000, output="run.zarr", every=100)  # with a progress bar; fields every 100 steps to Zarr
    ds = sim.to_xarray()                        # the current fields and the recorded observables

``Simulation`` holds a ``Runner`` (sim/runner.py): the model, its observable history and the parameter routing
the window uses, so ``sim.set(T=2.5)`` applies a live change at once, keeps a reset parameter for the next
``reset`` and rebuilds the model for a size change, exactly as the window's form does. No GUI here: the
notebook's live view and plots are added by render/notebook.py (``latticelab.open`` returns that subclass).
"""
from __future__ import annotations

import sys

import numpy as np

from latticelab.sim.backend import to_numpy
from latticelab.sim.runner import Runner

HISTORY = 100_000        # observable samples kept in memory (the plots and to_xarray)


def _progress_bar(total: int, enabled: bool):
    """tqdm's notebook bar in Jupyter (when ipywidgets is there), its text bar on a terminal, none otherwise."""
    if not enabled:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, unit="steps", desc="running", file=sys.stderr, leave=True, dynamic_ncols=True)


class Simulation:
    """One model with its observable history; ``run``, ``set``, ``reset``, ``fields``, ``to_xarray``, states."""

    def __init__(self, model: str = "ising", backend: str = "auto", **params):
        self.runner = Runner(model, params or None, backend, history_length=HISTORY)
        self._outputs: set = set()          # stores this object wrote: later runs append to them

    @classmethod
    def load(cls, path, backend: str = "auto") -> "Simulation":
        """A simulation continuing the state saved in ``path`` (.npz, sim/state.py)."""
        from latticelab.sim.state import load_state
        sim = cls.__new__(cls)
        model = load_state(path, backend)
        sim.runner = Runner(model.name, model.params, "numpy", history_length=HISTORY)
        sim.runner.load(model)
        sim._outputs = set()
        return sim

    # ---- the model -----------------------------------------------------------------------------
    @property
    def model(self):
        return self.runner.model

    @property
    def params(self):
        return self.runner.params

    @property
    def step(self) -> int:
        return self.model.step_count

    @property
    def time(self) -> float:
        return self.model.time

    def set(self, **changes) -> str:
        """Change parameters (validated): "live" ones at once, "reset" ones at the next ``reset``, "rebuild" ones
        make a new model. Returns what happened ("live", "reset", "rebuild" or "none")."""
        return self.runner.set(**changes)

    def reset(self, **values) -> None:
        self.runner.reset(**values)

    def observables(self) -> dict[str, float]:
        return self.model.observables()

    def fields(self) -> dict[str, np.ndarray]:
        """The model's fields as NumPy arrays (copied from the GPU when there)."""
        return {name: to_numpy(a) for name, a in self.model.fields().items()}

    def history(self) -> tuple[np.ndarray, dict]:
        """(times, {observable: values}) recorded so far (the last HISTORY samples)."""
        return self.runner.history.arrays()

    def save_state(self, path, overwrite: bool = False):
        from latticelab.sim.state import save_state
        return save_state(path, self.model, overwrite=overwrite)

    # ---- running -------------------------------------------------------------------------------
    def run(self, steps: int, *, output=None, every: int | None = None, overwrite: bool = False,
            progress: bool = True, **output_options) -> "Simulation":
        """Take ``steps`` steps, recording every step's observables; with ``output`` (a path: .zarr, .nwb,
        .pvd, .vtk) also write the fields every ``every`` steps (default: at the end) and the observables. A
        store this simulation wrote before is appended to. A progress bar shows the time left."""
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise ValueError(f"steps: must be a non-negative integer; got {steps!r}")
        steps = int(steps)
        every = int(every or max(steps, 1))
        writer = self._open(output, every, overwrite, output_options) if output is not None else None
        bar = _progress_bar(steps, progress and steps > 0)
        done = 0
        try:
            if writer is not None and writer.due(self.step):
                writer.snapshot(self.model)
            while done < steps:
                # batches end at the next snapshot, and stay small enough for the bar to move
                n = min(steps - done, every - self.step % every if writer is not None else steps, 1000)
                batch = self.model.advance(n)
                self.runner.commit(batch)
                self.runner.collect(wait=True)
                done += batch.steps
                if writer is not None:
                    values = batch.observables if isinstance(batch.observables, dict) else batch.observables.result()
                    first = self.step - batch.steps + 1
                    writer.series(batch.times, np.arange(first, self.step + 1), values)
                    if writer.due(self.step):
                        writer.snapshot(self.model)
                if bar is not None:
                    bar.update(batch.steps)
        except BaseException:
            if writer is not None:
                writer.close()            # what was written stays complete and appendable
            raise
        finally:
            if bar is not None:
                bar.close()
        if writer is not None:
            writer.close()
        return self

    def _open(self, output, every, overwrite, options):
        from pathlib import Path
        from latticelab.sim.output import open_output
        path = Path(output).resolve()
        append = path in self._outputs and path.exists()
        writer = open_output(path, self.model, every=every, overwrite=overwrite and not append, append=append,
                             **options)
        if path.suffix.lower() == ".zarr":
            self._outputs.add(path)
        return writer

    # ---- data ----------------------------------------------------------------------------------
    def to_xarray(self):
        """An xarray Dataset of the current fields (dims time, x, y[, z]; one snapshot) and the recorded
        observables (dim series_time), with the same names, units and attributes as a Zarr store of the run."""
        from latticelab.sim.output.extras import require
        from latticelab.sim.output.metadata import field_units, grid_spacing, run_attributes, time_units
        (xr,) = require("to_xarray", "xarray")
        model = self.model
        fields = self.fields()
        shape = next(iter(fields.values())).shape
        axes = ("x", "y", "z")[:len(shape)]
        spacing = grid_spacing(model)
        tu = time_units(type(model))
        coords = {axis: (axis, np.arange(n) * spacing, {"units": "1" if spacing == 1.0 else "length",
                                                        "axis": axis.upper()}) for axis, n in zip(axes, shape)}
        coords["time"] = ("time", [float(model.time)], {"units": tu, "long_name": type(model).time_label})
        coords["step"] = ("time", [model.step_count], {"units": "1"})
        times, values = self.history()
        coords["series_time"] = ("series_time", times, {"units": tu, "long_name": type(model).time_label})
        data = {name: (("time", *axes), a[None], {"units": field_units(model, name), "long_name": name})
                for name, a in fields.items()}
        for o in model.declared_observables:
            data[o.name] = ("series_time", values[o.name], {"units": o.unit or "1", "long_name": o.label})
        return xr.Dataset(data, coords=coords, attrs=run_attributes(model))

    def __repr__(self) -> str:
        model = self.model
        return f"<latticelab {model.title}, step {self.step}, {model.backend_name} [{model.device_name}]>"
