"""app/preparing.py ``warm_up`` on a CUDA device: after it, what the docks read of a new model at their first
refresh (a model with a signal: its trace; a model with a probe: the picked cell's readout) compiles no kernel.
CuPy compiles its own kernels (indexing, strided copies) at their first use, and a compile on the GUI thread
stalled a switch to the cortex for 107 ms (bench window, a cold kernel cache). Each case runs in a new process
with an empty kernel cache; a control without the warm-up shows that the count sees those compiles."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from latticelab.sim.models import all_models

SCRIPT = r"""
import os, sys
from pathlib import Path
from latticelab.app.preparing import warm_up
from latticelab.sim.model import HasProbe, HasSignal
from latticelab.sim.models import get_model
cache = Path(os.environ["CUPY_CACHE_DIR"])
model = get_model(sys.argv[1]).create(backend="cuda", L=int(sys.argv[3]))
if sys.argv[2] == "warm":
    warm_up(model)
else:
    model.advance(2)
    model.observables()
before = sum(1 for _ in cache.rglob("*.cubin"))
if isinstance(model, HasSignal):
    model.trace(since=0)
if isinstance(model, HasProbe):
    model.probe_info(model.probe)
print("compiled", before, sum(1 for _ in cache.rglob("*.cubin")))
"""


def docked_models() -> list[str]:
    """Models whose instances have what the docks read (the capabilities are checked on the class's members)."""
    names = []
    for name, cls in all_models().items():
        members = set(dir(cls))
        if {"trace", "signal_rate"} <= members or {"probe_info", "probe_label"} <= members:
            names.append(name)
    return names


def compiles(name: str, how: str, tmp_path) -> tuple[int, int]:
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path / how))
    done = subprocess.run([sys.executable, "-c", SCRIPT, name, how, "64"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("compiled")][-1]
    before, after = (int(v) for v in line.split()[1:])
    return before, after


@pytest.mark.gpu
@pytest.mark.parametrize("name", docked_models())
def test_after_the_warm_up_the_docks_first_reads_compile_nothing(name, tmp_path):
    before, after = compiles(name, "warm", tmp_path)
    assert before > 0 and after == before
    before, after = compiles(name, "cold", tmp_path)      # the control: the same reads without the warm-up
    assert after > before
