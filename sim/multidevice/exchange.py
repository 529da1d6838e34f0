"""Moving data between the parts of a split simulation: halos, gathered values, sums.

A *part* is one device's share of the run (``Part``: its array module, device id and two streams on CUDA: one
for the updates, one for the copies). An ``Exchanger`` gives the parts two operations:

- ``transfer(moves, overlap)``: each ``Move`` copies one part's contiguous array into another part's array of
  the same size. A move starts after the work queued so far on the source's and the destination's update
  streams and lands before the work queued next on the destination's update stream. With ``overlap`` the
  source's update stream goes on meanwhile (the slab's interior is updated while its borders travel): the
  caller must not write a source before its next ``transfer`` call, which waits for the moves; without it the
  source's next work waits for them.
- ``sum_in_order(values)``: one number per part of this process, summed on the host in part order over all the
  parts: a global sum whose result does not depend on how the lattice was cut (integers exactly; floats reduced
  in a fixed order).
- ``share(array, blocks)``: each part of this process wrote its block (a range of the first axis) of a host
  array; afterwards the array holds every part's block in every process (the gathered lattice or field).

A run split over the processes of an MPI job (sim/multidevice/mpi.py) holds one part per process: the others
are ``RemotePart``s, whose arrays are placeholders (``placeholder_xp``: their shape and size, no memory), so an
engine builds the same moves in every process, naming the other processes' arrays by their part and shape.
Engines therefore do their work on the parts ``here`` only (``local_indices``) and build every part's moves.

Implementations: ``LocalExchanger`` (NumPy arrays in one process: CI tests the decomposition with it, the CUDA
kernels running under the CPU emulator), ``PeerExchanger`` (CUDA peer copies between the GPUs of one process,
over NVLink where present), ``NcclExchanger`` (NCCL send/receive between the GPUs of one process, through
cupy.cuda.nccl) and, one process per part, ``mpi.MpiExchanger``. docs/design/multigpu.md says why peer copies
are the default within one process.
"""
from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


MEMCPY_DEFAULT = 4          # cudaMemcpyDefault: the direction from the pointers (unified virtual addressing)


class Part:
    """One device's share of a split run: the array module, the CUDA device id and its streams (None off CUDA).
    ``use()`` makes the device and the update stream current for the launches and allocations in its block.
    ``job``: the MPI job (sim/multidevice/mpi.py) when the run's parts are processes, else None."""

    local = True

    def __init__(self, xp, device: int, job=None):
        self.xp, self.device, self.job = xp, int(device), job
        self.cuda = hasattr(xp, "cuda") and hasattr(getattr(xp, "cuda", None), "Stream")
        self.stream = self.copy_stream = None
        if self.cuda:
            with xp.cuda.Device(self.device):
                self.stream = xp.cuda.Stream(non_blocking=True)
                self.copy_stream = xp.cuda.Stream(non_blocking=True)

    @contextlib.contextmanager
    def use(self):
        if not self.cuda:
            yield
            return
        with self.xp.cuda.Device(self.device), self.stream:
            yield

    def event(self, stream):
        """An event recorded now on ``stream`` of this part's device."""
        with self.xp.cuda.Device(self.device):
            event = self.xp.cuda.Event(disable_timing=True)
            event.record(stream)
        return event

    def synchronize(self) -> None:
        if self.cuda:
            with self.xp.cuda.Device(self.device):
                self.stream.synchronize()
                self.copy_stream.synchronize()


def enable_peer_access(xp, devices: Sequence[int]) -> None:
    """Let each of ``devices`` (CUDA ids) address the others' memory where the driver allows it (NVLink or
    PCIe); copies between the others are staged through the host by the driver."""
    runtime = xp.cuda.runtime
    for a in devices:
        for b in devices:
            if a != b and runtime.deviceCanAccessPeer(a, b):
                with xp.cuda.Device(a):
                    try:
                        runtime.deviceEnablePeerAccess(b)
                    except Exception:        # already enabled (by CuPy's own peer copies, or an earlier call)
                        pass


class _Placeholders:
    """An array module whose arrays are placeholders: NumPy arrays of the asked shape and type that take no
    memory (every element the same zero, read-only), for another process's part. Slicing and reshaping give
    placeholders of the sizes the real arrays would have."""

    def __getattr__(self, name):          # the dtypes (uint32, ...) as NumPy's
        return getattr(np, name)

    @staticmethod
    def zeros(shape, dtype=float):
        return np.broadcast_to(np.zeros((), dtype=dtype), shape)

    empty = zeros

    @staticmethod
    def asarray(array, dtype=None):
        array = np.asarray(array, dtype=dtype)
        return np.broadcast_to(np.zeros((), dtype=array.dtype), array.shape)


placeholder_xp = _Placeholders()


class RemotePart:
    """Another process's part of a run split over an MPI job: its index (the rank) and device, arrays that are
    placeholders; nothing runs here."""

    local = False
    cuda = False
    stream = copy_stream = None
    xp = placeholder_xp

    def __init__(self, device: int, job):
        self.device, self.job = int(device), job

    def use(self):
        return contextlib.nullcontext()

    def synchronize(self) -> None:
        pass


def make_parts(xp, devices: Sequence[int]) -> list:
    """One part per device. ``devices`` from an MPI job (ProcessDevices): this process's part and a RemotePart
    for each other process; on the CPU its kernels run under the CUDA emulator (sim/gpu/emulate.py)."""
    job = getattr(devices, "job", None)
    if job is None:
        return [Part(xp, d) for d in devices]
    if xp is np:
        from latticelab.sim.gpu.emulate import emulated_xp
        xp = emulated_xp()
    return [Part(xp, d, job) if rank == job.rank else RemotePart(d, job) for rank, d in enumerate(devices)]


def local_indices(parts: Sequence) -> list[int]:
    """The indices of the parts this process runs (all of them, except in an MPI job)."""
    return [i for i, part in enumerate(parts) if part.local]


@dataclass(frozen=True)
class Move:
    dst_part: int
    dst: Any       # contiguous array on the destination part
    src_part: int
    src: Any       # contiguous array of the same byte size on the source part


class Exchanger(abc.ABC):
    """Moves data between the parts of one split run (see the module docstring)."""

    name = "exchanger"

    def __init__(self, parts: Sequence[Part]):
        self.parts = list(parts)

    @abc.abstractmethod
    def transfer(self, moves: Sequence[Move], overlap: bool = True) -> None:
        """Copy each move's source into its destination, ordered as the module docstring says."""

    def sum_in_order(self, values: Sequence) -> Any:
        """The values of this process's parts (host numbers or one-element arrays; one per part in one
        process) with those of the other processes, summed in part order on the host."""
        total = None
        for value in values:
            value = value.item() if hasattr(value, "item") else value
            total = value if total is None else total + value
        return total

    def share(self, array: np.ndarray, blocks: Sequence[tuple[int, int]]) -> None:
        """``blocks[i]``: the range (start, stop) of ``array``'s first axis that part i wrote (host array, every
        process the same shape). In one process every part wrote its own: nothing to do."""

    capturable = False      # whether its moves can be captured into a CUDA graph

    def forget_pending(self) -> None:
        """Drop what the next ``transfer`` would wait for (around a CUDA graph capture, whose events belong to
        the graph; the caller orders the streams itself)."""

    def finish(self) -> None:
        """Wait until every move made so far has landed."""
        for part in self.parts:
            part.synchronize()


class LocalExchanger(Exchanger):
    """Parts whose arrays are host (NumPy) arrays of one process: a move is a copy, made at once."""

    name = "local"

    def transfer(self, moves: Sequence[Move], overlap: bool = True) -> None:
        for move in moves:
            move.dst.reshape(-1).view(np.uint8)[...] = move.src.reshape(-1).view(np.uint8)


class _StreamedExchanger(Exchanger):
    """What the CUDA exchangers share: the moves run on the sources' copy streams after the work queued on
    their update streams; each destination's update stream waits for what was sent to it; each source's update
    stream waits, at the next call, until its outgoing moves are done (so it cannot overwrite them)."""

    def __init__(self, parts: Sequence[Part]):
        super().__init__(parts)
        self._outgoing: dict[int, Any] = {}

    def forget_pending(self) -> None:
        self._outgoing = {}

    def transfer(self, moves: Sequence[Move], overlap: bool = True) -> None:
        if not moves:
            return
        for index, event in self._outgoing.items():
            part = self.parts[index]
            with part.xp.cuda.Device(part.device):
                part.stream.wait_event(event)
        self._outgoing = {}
        sources = sorted({m.src_part for m in moves} | {m.dst_part for m in moves})
        ready = {index: self.parts[index].event(self.parts[index].stream) for index in sources}
        for index in sources:
            part = self.parts[index]
            with part.xp.cuda.Device(part.device):
                part.copy_stream.wait_event(ready[index])
                # a copy into another part also waits until that part no longer reads what it replaces
                for move in moves:
                    if move.src_part == index and move.dst_part != index:
                        part.copy_stream.wait_event(ready[move.dst_part])
        self._send(moves)
        for index in sources:
            part = self.parts[index]
            self._outgoing[index] = part.event(part.copy_stream)
        for move in moves:
            dst = self.parts[move.dst_part]
            with dst.xp.cuda.Device(dst.device):
                dst.stream.wait_event(self._outgoing[move.src_part])
                if move.dst_part in self._outgoing:
                    dst.stream.wait_event(self._outgoing[move.dst_part])
        if not overlap:
            for index in {m.src_part for m in moves}:
                part = self.parts[index]
                with part.xp.cuda.Device(part.device):
                    part.stream.wait_event(self._outgoing[index])

    @abc.abstractmethod
    def _send(self, moves: Sequence[Move]) -> None:
        """Queue the moves on the copy streams."""


class PeerExchanger(_StreamedExchanger):
    """CUDA copies between the GPUs (cudaMemcpyAsync, kind default: unified addressing finds both ends) on the
    source's copy stream; peer access is enabled between every pair of parts where the driver allows it (NVLink
    or PCIe), otherwise the driver stages through the host. The copies can be captured into CUDA graphs."""

    name = "peer"
    capturable = True

    def __init__(self, parts: Sequence[Part]):
        super().__init__(parts)
        enable_peer_access(parts[0].xp, [part.device for part in parts])

    def _send(self, moves: Sequence[Move]) -> None:
        for move in moves:
            src = self.parts[move.src_part]
            with src.xp.cuda.Device(src.device):
                src.xp.cuda.runtime.memcpyAsync(move.dst.data.ptr, move.src.data.ptr, move.src.nbytes,
                                                MEMCPY_DEFAULT, src.copy_stream.ptr)


class NcclExchanger(_StreamedExchanger):
    """NCCL point-to-point send/receive (cupy.cuda.nccl), all of a call's moves in one NCCL group; one
    communicator per part, made by ncclCommInitAll in this process."""

    name = "nccl"

    def __init__(self, parts: Sequence[Part]):
        super().__init__(parts)
        import os
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")   # never NVLink multicast: it can take a host's GPUs down
        from cupy.cuda import nccl
        self._nccl = nccl
        self._comms = nccl.NcclCommunicator.initAll([p.device for p in parts])

    def _send(self, moves: Sequence[Move]) -> None:
        nccl = self._nccl
        nccl.groupStart()
        try:
            for move in moves:
                src, dst = self.parts[move.src_part], self.parts[move.dst_part]
                self._comms[move.src_part].send(move.src.data.ptr, move.src.nbytes, nccl.NCCL_UINT8, move.dst_part,
                                                src.copy_stream.ptr)
                self._comms[move.dst_part].recv(move.dst.data.ptr, move.dst.nbytes, nccl.NCCL_UINT8, move.src_part,
                                                dst.copy_stream.ptr)
        finally:
            nccl.groupEnd()


EXCHANGERS = {"peer": PeerExchanger, "nccl": NcclExchanger}


def make_exchanger(parts: Sequence[Part], kind: str = "peer") -> Exchanger:
    """The exchanger for these parts: the MPI job's for the parts of processes; LocalExchanger off CUDA, else
    PeerExchanger ("peer") or NcclExchanger."""
    if parts[0].job is not None:
        return parts[0].job.exchanger(parts)
    if not parts[0].cuda:
        return LocalExchanger(parts)
    return EXCHANGERS[kind](parts)
