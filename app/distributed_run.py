"""``latticelab run <model> --distributed``: one run over the processes of an MPI job (sim/multidevice/mpi.py).

Every process runs the same command and takes the same steps (the slabs' exchanges and sums are collective);
rank 0 alone writes the files and prints, the others compute what is written and discard it. A failure in one
process ends the whole job (the others would wait for it forever).
"""
from __future__ import annotations

import contextlib
import os


class Discarded:
    """What a process other than rank 0 writes into instead of an output file: nothing is kept."""

    def __init__(self):
        self.file = open(os.devnull, "w")

    def commit(self) -> None:
        self.file.close()

    discard = commit


def join(args, usage_error):
    """The MPI job of a ``--distributed`` run (None without the option), after checking the options that go
    with it; ``usage_error``: the exception class for a bad combination (a one-line message naming the option)."""
    if not args.distributed:
        return None
    if args.devices is not None:
        raise usage_error("--distributed: each process drives one device (rank r the r-th GPU of its host); "
                          "leave out --devices")
    for option, value in (("--record", args.record), ("--output", args.output)):
        if value:
            raise usage_error(f"{option}: not written by a --distributed run; write --csv and --save-state, then "
                              f"make it from the saved state in one process")
    from latticelab.sim.multidevice.mpi import join_job
    return join_job(args.backend)


@contextlib.contextmanager
def quiet_unless_root(job):
    """Standard output and error of the processes other than rank 0 discarded inside the block (rank 0 speaks
    for the job); error messages raised out of it are still printed by the caller."""
    if job is None or job.root:
        yield
        return
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield

