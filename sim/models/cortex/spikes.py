"""Spike trains of the cortical model (issue 43): which neurons of a chosen band fired in which step.

The model's update kernels already leave a "fired" bit per neuron after every step (bit 0 of
``CortexState.data``); recording reads it and changes nothing else. On CUDA a small compaction kernel
(kernels/spikes.cu) appends the indices of the band's firing neurons to a device buffer and closes each step
with its end offset, so a step costs two tiny launches and no host synchronisation; the buffer is copied to the
host in batches, when it could be full (it is sized for every neuron of the band firing in every step of a
batch, so no spike is ever dropped) or when the spikes are asked for. ``NumpySpikes`` is the twin on NumPy and
the reference the tests compare the kernel with.

Spikes are kept on the host compactly as two arrays: the step (int64, the step count after the step in which
the neuron fired, i.e. its time in ms) and the neuron's flat index (int32), ordered by step, then index.
"""
from __future__ import annotations

import numpy as np

from latticelab.sim.params import ParameterError

DEVICE_BUFFER = 1 << 22             # spike slots of the device buffer (16 MiB); at least one step's band
THREADS = 256


def check_band(n_neurons: int, neurons) -> tuple[int, int]:
    """(first, count) of a band of neurons: None (all), a ``range`` with step 1, or (first, count)."""
    if neurons is None:
        return 0, n_neurons
    if isinstance(neurons, range):
        if neurons.step != 1:
            raise ParameterError("neurons", f"must be a contiguous band (a range with step 1); got {neurons!r}")
        first, count = neurons.start, len(neurons)
    else:
        try:
            first, count = (int(x) for x in neurons)
        except (TypeError, ValueError):
            raise ParameterError("neurons", f"must be None, a range or (first, count); got {neurons!r}") from None
    if not (0 <= first and count >= 1 and first + count <= n_neurons):
        raise ParameterError("neurons", f"must be a band of neurons within [0, {n_neurons}); got first {first}, "
                                        f"count {count}")
    return first, count


class SpikeTrains:
    """Host side of a recording: batches of (steps, indices), joined on demand."""

    def __init__(self, first: int, count: int):
        self.first, self.count = first, count
        self._steps: list[np.ndarray] = []
        self._indices: list[np.ndarray] = []
        self.taken = 0                      # spikes handed out by ``take`` so far

    def add(self, steps: np.ndarray, indices: np.ndarray) -> None:
        if steps.size:
            self._steps.append(steps.astype(np.int64, copy=False))
            self._indices.append(indices.astype(np.int32, copy=False))

    def drop_before(self, step: int) -> None:
        """Forget the spikes of steps before ``step`` (a live raster keeps the seconds it shows)."""
        steps, indices = self.arrays()
        keep = steps >= step
        if not keep.all():
            self._steps, self._indices = [steps[keep]], [indices[keep]]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if len(self._steps) > 1:
            self._steps, self._indices = [np.concatenate(self._steps)], [np.concatenate(self._indices)]
        if not self._steps:
            return np.zeros(0, np.int64), np.zeros(0, np.int32)
        return self._steps[0], self._indices[0]


class NumpySpikes:
    """The recording on NumPy: the firing neurons of the band after each step, straight into host arrays."""

    def __init__(self, n_neurons: int, neurons=None):
        self.first, self.count = check_band(n_neurons, neurons)
        self.trains = SpikeTrains(self.first, self.count)

    def record(self, data, step: int) -> None:
        band = np.asarray(data[self.first:self.first + self.count])
        fired = np.flatnonzero(band & 1).astype(np.int32) + self.first
        self.trains.add(np.full(fired.size, step, np.int64), fired)

    def drain(self) -> None:
        """Nothing waits on the device here."""

    def spikes(self) -> tuple[np.ndarray, np.ndarray]:
        return self.trains.arrays()


class CudaSpikes:
    """The recording on CuPy (or the CPU emulator of the kernels): compaction into a device buffer after each
    step, copied to the host per batch of steps."""

    def __init__(self, xp, n_neurons: int, neurons=None, capacity: int = DEVICE_BUFFER):
        from latticelab.sim.gpu.kernels import get_kernel
        from latticelab.sim.models.cortex.engines import KERNEL_DIR
        self.xp = xp
        self.first, self.count = check_band(n_neurons, neurons)
        self.trains = SpikeTrains(self.first, self.count)
        capacity = max(int(capacity), self.count)
        self.batch_steps = capacity // self.count        # every neuron of the band firing every step still fits
        self.capacity = self.batch_steps * self.count
        names = ("cortex_spike_compact", "cortex_spike_close_step")
        self._compact = get_kernel(xp, KERNEL_DIR / "spikes.cu", names[0], names)
        self._close = get_kernel(xp, KERNEL_DIR / "spikes.cu", names[1], names)
        self._out = xp.zeros(self.capacity, xp.int32)
        self._fill = xp.zeros(1, xp.uint32)
        self._ends = xp.zeros(self.batch_steps, xp.uint32)
        self._batch_steps: list[int] = []          # the step of each row of ends[]
        self._in_batch = 0
        self._grid = max(1, min(65535, (self.count + THREADS - 1) // THREADS))

    def record(self, data, step: int) -> None:
        self._batch_steps.append(int(step))
        self._compact((self._grid,), (THREADS,), (data, np.int32(self.first), np.int32(self.count), self._out,
                                                  self._fill, np.uint32(self.capacity)))
        self._close((1,), (1,), (self._fill, self._ends, np.int32(self._in_batch)))
        self._in_batch += 1
        if self._in_batch == self.batch_steps:
            self.drain()

    def drain(self) -> None:
        """Copy the batch's spikes to the host (sorted by step, then neuron) and empty the device buffer."""
        if self._in_batch == 0:
            return
        from latticelab.sim.backend import to_numpy
        ends = to_numpy(self._ends[:self._in_batch]).astype(np.int64)
        total = int(ends[-1])
        indices = to_numpy(self._out[:total]).copy()
        counts = np.diff(ends, prepend=0)
        steps = np.repeat(np.array(self._batch_steps, np.int64), counts)
        order = np.lexsort((indices, steps))
        self.trains.add(steps[order], indices[order])
        self._fill[...] = 0
        self._in_batch = 0
        self._batch_steps = []

    def spikes(self) -> tuple[np.ndarray, np.ndarray]:
        self.drain()
        return self.trains.arrays()
