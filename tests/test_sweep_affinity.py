"""GPU workers of a local sweep cluster are pinned to the CPU cores nearest their GPU (nvidia-smi topo -m)."""
import os
import subprocess
import sys

import pytest

from latticelab.sim.studies.sweep import gpu_cpu_affinity
from latticelab.sim.studies.worker_setup import parse_cpu_list

# `nvidia-smi topo -m` of a two-socket machine with two GPUs, as printed (tabs, underline codes on the header)
TWO_SOCKETS = ("\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
               "GPU0\t X \tSYS\tPIX\t0-15,32-47\t0\t\tN/A\n"
               "GPU1\tSYS\t X \tSYS\t16-31,48-63\t1\t\tN/A\n"
               "NIC0\tPIX\tSYS\t X \t\t\t\t\n\nLegend:\n\n  X    = Self\n")


def test_affinity_is_read_per_gpu_from_the_topology_table():
    assert gpu_cpu_affinity(TWO_SOCKETS) == {"0": "0-15,32-47", "1": "16-31,48-63"}


def test_no_table_means_no_pinning():
    assert gpu_cpu_affinity("NVIDIA-SMI has failed") == {}
    assert gpu_cpu_affinity("\tGPU0\tCPU Affinity\nGPU0\t X \tN/A\n") == {}


def test_cpu_lists():
    assert parse_cpu_list("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    for bad in ("", "3-1", "a-b"):
        with pytest.raises(ValueError):
            parse_cpu_list(bad)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_the_preload_pins_every_thread_of_the_worker_process():
    allowed = sorted(os.sched_getaffinity(0))
    code = ("import os, threading, time\n"
            "t = threading.Thread(target=time.sleep, args=(2,)); t.start()\n"   # a thread that exists before
            "from latticelab.sim.studies.worker_setup import dask_setup\n"
            "dask_setup()\n"
            "tids = os.listdir('/proc/self/task')\n"
            "print(sorted({min(os.sched_getaffinity(int(t))) for t in tids}), len(tids))\n")
    env = {**os.environ, "LATTICELAB_CPU_AFFINITY": str(allowed[-1])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    cpus, threads = out.stdout.split()[0], int(out.stdout.split()[-1])
    assert cpus == f"[{allowed[-1]}]" and threads >= 2
