"""The main window's status bar: the backend, the model and its lattice, the step, and the step and frame rates
over the last status interval (the frame loop counts them, app/frame_loop.py); while a worker steps the model or
builds the next one, what it is doing and for how long."""
from __future__ import annotations

import math
import time

from PySide6 import QtWidgets

KEYS = ("backend", "lattice", "step", "steps_per_s", "frames_per_s")
LONG_BATCH_S = 1.0           # running, a batch of background steps this long is named in the status bar


def describe_lattice(model) -> str:
    """``64x64 (4,096 cells)``."""
    shape = "x".join(str(n) for n in model.shape)
    return f"{shape} ({math.prod(model.shape):,} cells)"


class StatusBar:
    """The permanent labels of ``window``'s status bar (``labels``, by key), refreshed by ``update``."""

    def __init__(self, window):
        self.window = window
        self.labels = {}
        bar = window.statusBar()
        for key in KEYS:
            label = QtWidgets.QLabel(objectName=f"status_{key}")
            label.setContentsMargins(6, 0, 6, 0)
            bar.addPermanentWidget(label)
            self.labels[key] = label

    def update(self) -> None:
        window = self.window
        frames, life = window.frames, window.lifecycle
        m = window.model
        now = time.perf_counter()
        counters = frames.counters
        elapsed = max(now - counters["t"], 1e-9)
        labels = self.labels
        device = m.device_name if m.backend_name == "cuda" else "CPU (NumPy)"
        labels["backend"].setText(f"backend: {device}")
        labels["lattice"].setText(f"{m.title}: {describe_lattice(m)}")
        labels["step"].setText(f"step {m.step_count:,}")
        if window.running:
            labels["steps_per_s"].setText(f"{counters['steps'] / elapsed:,.1f} steps/s")
            labels["frames_per_s"].setText(f"{counters['frames'] / elapsed:,.1f} frames/s")
        else:
            labels["steps_per_s"].setText("paused")
            labels["frames_per_s"].setText("")
        self.show_background_work_if_due()
        if life.preparer.busy:
            labels["lattice"].setText(f"preparing {life.preparer.what} ({life.preparer.elapsed():.1f} s)...")
        frames.restart_counters()

    def show_background_work_if_due(self) -> None:
        """Say what the worker computes: paused (a step asked for), at once; running, only once its batch has
        taken LONG_BATCH_S (until then the status shows steps/s: it showed "computing 1 step" all the time while
        Swendsen-Wang ran, whose every batch goes to the worker)."""
        stepper = self.window.frames.stepper
        if stepper.busy and (not self.window.running or stepper.elapsed() >= LONG_BATCH_S):
            self.show_background_work()

    def show_background_work(self) -> None:
        stepper = self.window.frames.stepper
        self.labels["steps_per_s"].setText(f"computing {stepper.steps:,} step{'s' if stepper.steps != 1 else ''} "
                                           f"({stepper.elapsed():.1f} s)...")
