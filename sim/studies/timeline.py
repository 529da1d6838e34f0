"""Advancing a model by a span of its own time (steps, milliseconds, simulated time), with a study's schedule of
parameter changes applied when their time comes (thesis 003, section 8.4: "step -> parameter -> value").

``Timeline(model, schedule, checkpoint).advance(span)`` steps until ``model.time`` has grown by ``span``: in
pieces sized from the time the last step took (one step of a model whose time is its step count is exactly one
unit), never past the next scheduled change, which is applied (``model.update``) once its time is reached. A
model with adaptive steps may end a span up to one step late. ``checkpoint()`` runs before every piece.
"""
from __future__ import annotations

import math

PIECES = 50             # a span is stepped in about this many pieces when a checkpoint is given


class Timeline:
    def __init__(self, model, schedule=(), checkpoint=None):
        self.model = model
        self.pending = [(float(at), dict(values)) for at, values in schedule]
        self.checkpoint = checkpoint
        self.origin = float(model.time)
        self.per_step: float | None = None
        self._apply_due()

    @property
    def now(self) -> float:
        """Model time since the timeline began."""
        return float(self.model.time) - self.origin

    def _apply_due(self) -> None:
        while self.pending and self.pending[0][0] <= self.now + 1e-9:
            _, values = self.pending.pop(0)
            self.model.update(**values)

    def advance(self, span: float) -> None:
        target = self.now + float(span)
        piece_span = float(span) / PIECES if self.checkpoint is not None else math.inf
        while self.now < target - 1e-9 * max(1.0, abs(target)):
            if self.checkpoint is not None:
                self.checkpoint()
            stop = min(target, self.pending[0][0]) if self.pending else target
            stop = min(stop, self.now + piece_span) if math.isfinite(piece_span) else stop
            self._step_until(stop)
            self._apply_due()

    def _step_until(self, stop: float) -> None:
        remaining = stop - self.now
        if self.per_step is None:
            before = self.now
            self.model.step(1)
            taken = self.now - before
            self.per_step = taken if taken > 0 else 1.0
            return
        n = max(1, int(math.floor(remaining / self.per_step + 1e-9)))
        before = self.now
        self.model.step(n)
        taken = self.now - before
        if taken > 0:
            self.per_step = taken / n
