"""Recent observables for the live plots: a fixed-size ring of the last N steps, plus the standard
deviations of energy and fraction flipped over a sliding window of the most recent samples."""
from __future__ import annotations

import numpy as np

RECORDED = ("energy", "magnetisation", "flipped_fraction")
DERIVED = {"energy_std": "energy", "flipped_std": "flipped_fraction"}


class ObservableHistory:
    def __init__(self, capacity: int = 1000, window: int = 50):
        if capacity < 2 or window < 2:
            raise ValueError("capacity and window must be at least 2")
        self.capacity, self.window = capacity, window
        self._steps = np.zeros(capacity, np.int64)
        self._values = {key: np.full(capacity, np.nan) for key in (*RECORDED, *DERIVED)}
        self._count = 0   # samples pushed since the last clear
        self.version = 0  # increases with every change, so views redraw only when needed

    def __len__(self) -> int:
        return min(self._count, self.capacity)

    def clear(self) -> None:
        self._count = 0
        for values in self._values.values():
            values.fill(np.nan)
        self.version += 1

    def push(self, step: int, observables: dict) -> None:
        i = self._count % self.capacity
        self._steps[i] = step
        for key in RECORDED:
            self._values[key][i] = observables[key]
        self._count += 1
        n = min(self._count, self.window)
        recent = (np.arange(self._count - n, self._count)) % self.capacity
        for key, source in DERIVED.items():
            self._values[key][i] = self._values[source][recent].std() if n >= 2 else np.nan
        self.version += 1

    def arrays(self) -> tuple[np.ndarray, dict]:
        """(steps, {name: values}) in chronological order."""
        n = len(self)
        order = np.arange(self._count - n, self._count) % self.capacity
        return self._steps[order], {key: values[order] for key, values in self._values.items()}
