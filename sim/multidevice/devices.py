"""The ``devices`` run option: which devices one simulation is split over.

``latticelab run <model> --devices 0,1`` (or ``all``), ``Model.create(..., devices=(0, 1))`` and the window's
``--devices`` all come here. One device (the default) is the ordinary single-device run. Several devices need
a model that declares the capability (``Model.splits_across_devices``) and the CUDA backend; anything else is
refused with one line naming the option and what is allowed. A run split over the processes of an MPI job
(``--distributed``, sim/multidevice/mpi.py) passes a ``ProcessDevices`` instead: one device per process.
"""
from __future__ import annotations

from collections.abc import Sequence

from latticelab.sim.params import ParameterError

_FORM = "'all' or device numbers separated by commas (0,1)"


class ProcessDevices(tuple):
    """The devices of a run split over the processes of an MPI job: entry r is rank r's device (one part per
    process); ``job`` is the job (sim/multidevice/mpi.py). ``here``: the devices this process drives."""

    job = None

    def __new__(cls, devices, job):
        self = super().__new__(cls, devices)
        self.job = job
        return self

    @property
    def here(self) -> tuple[int, ...]:
        return (self[self.job.rank],)


def parse_devices(value) -> tuple[int, ...] | str | None:
    """The option as given: None (default: one device), "all", or a tuple of distinct non-negative ids from
    "0,1", an int or a sequence of ints. Raises ParameterError('devices', ...) for anything else."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text == "all":
            return "all"
        parts = [p.strip() for p in text.split(",")]
        if not all(p.isdigit() for p in parts):
            raise ParameterError("devices", f"must be {_FORM}; got {value!r}")
        ids = tuple(int(p) for p in parts)
    elif isinstance(value, int) and not isinstance(value, bool):
        ids = (value,)
    elif isinstance(value, Sequence) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        ids = tuple(value)
    else:
        raise ParameterError("devices", f"must be {_FORM}; got {value!r}")
    if not ids or any(i < 0 for i in ids):
        raise ParameterError("devices", f"must be {_FORM}, each number >= 0; got {value!r}")
    if len(set(ids)) != len(ids):
        raise ParameterError("devices", f"each device may appear once; got {value!r}")
    return ids


def device_option(model_cls, devices) -> dict:
    """The ``devices`` keyword a window's model build passes: the option for a model that splits, nothing for
    one that does not (the window runs those on one device rather than refusing them)."""
    if devices is None or not getattr(model_cls, "splits_across_devices", False):
        return {}
    return {"devices": devices}


def device_count(backend) -> int:
    """CUDA devices visible to this process (0 off CUDA)."""
    if not backend.is_gpu:
        return 0
    return int(backend.xp.cuda.runtime.getDeviceCount())


def resolve_devices(model_cls, value, backend) -> tuple[int, ...]:
    """The device ids a model of ``model_cls`` runs on with the option ``value`` on ``backend`` (a Backend):
    (0,) by default; several only for a model that splits, on CUDA, each id an existing device. An MPI job's
    ``ProcessDevices`` are taken as they are (CUDA or the CPU) by a model that splits."""
    if isinstance(value, ProcessDevices):
        across = getattr(model_cls, "splits_across_processes", None)
        if across is None:
            across = getattr(model_cls, "splits_across_devices", False)
        if len(value) > 1 and not across:
            raise ParameterError("distributed", f"the {model_cls.name} model ({model_cls.title}) runs in one "
                                                "process only; leave out --distributed and the MPI launcher")
        return value
    ids = parse_devices(value)
    if ids is None:
        return (0,)
    if ids == "all":
        ids = tuple(range(device_count(backend))) or (0,)
    if len(ids) > 1:
        if not getattr(model_cls, "splits_across_devices", False):
            raise ParameterError("devices", f"the {model_cls.name} model ({model_cls.title}) runs on one device "
                                            "only; leave out --devices")
        if not backend.is_gpu:
            raise ParameterError("devices", "several devices need the CUDA backend; on the CPU a model runs in "
                                            "one process (leave out --devices)")
        have = device_count(backend)
        missing = [i for i in ids if i >= have]
        if missing:
            raise ParameterError("devices", f"device {missing[0]} does not exist; this machine has {have} CUDA "
                                            f"device{'s' if have != 1 else ''}")
    elif ids[0] != 0:
        raise ParameterError("devices", "a one-device run uses the current device (0); choose another one with "
                                        "CUDA_VISIBLE_DEVICES")
    return ids
