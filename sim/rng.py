"""Reproducible random streams keyed by (seed, stream number).

Each update draws from a fresh counter-based stream, so the whole random state of a run is two
integers: the seed and how many streams were used. That makes save/resume exact and keeps NumPy
and CuPy runs reproducible without carrying generator internals around.
"""
from __future__ import annotations

import numpy as np

# The most streams (or steps) a saved state may claim: a run of 10^9 steps a second would take 146 years to
# use them; far below where the Philox keys (seed + stream << 64, 64-bit kernel counters) overflow.
MAX_COUNT = 2 ** 62


def counter_problem(name: str, value: int) -> str | None:
    """Why a saved counter (``streams_used``, ``step_count``, ...) cannot be right, or None."""
    if not 0 <= value <= MAX_COUNT:
        return f"{name} = {value} is outside 0 .. 2**62"
    return None


class StreamRNG:
    def __init__(self, xp, seed: int, streams_used: int = 0):
        self.xp = xp
        self.seed = int(seed)
        self.streams_used = int(streams_used)

    def next_stream(self):
        """A generator for the next stream: NumPy Philox keyed by (seed, stream), or CuPy's Philox."""
        stream = self.streams_used
        self.streams_used += 1
        if self.xp is np:
            return np.random.Generator(np.random.Philox(key=self.seed + (stream << 64)))
        from cupy.cuda import curand
        key = np.random.SeedSequence([self.seed, stream]).generate_state(1, np.uint64)[0]
        return _CupyStream(self.xp.random.RandomState(int(key) >> 1, method=curand.CURAND_RNG_PSEUDO_PHILOX4_32_10))

    def next_key(self) -> tuple[int, int]:
        """(seed, stream) for kernels with their own counter-based generator (Philox keyed by seed, stream, site)."""
        return self.next_keys(1)

    def next_keys(self, n: int) -> tuple[int, int]:
        """(seed, first stream) of the next ``n`` keys: what ``n`` calls of ``next_key`` would give, streams
        first .. first + n - 1, for kernels that take their stream relative to a device-side base."""
        first = self.streams_used
        self.streams_used += int(n)
        return self.seed, first

    def host_stream(self) -> np.random.Generator:
        """A NumPy generator for the next stream, whatever the backend (graph building, seeds)."""
        stream = self.streams_used
        self.streams_used += 1
        return np.random.Generator(np.random.Philox(key=self.seed + (stream << 64)))


class _CupyStream:
    """The subset of numpy.random.Generator's interface the updates use, on CuPy's RandomState."""

    def __init__(self, state):
        self._state = state

    def random(self, size, dtype=np.float32):
        return self._state.random_sample(size, dtype=dtype)

    def integers(self, low, high, size=None):
        return self._state.randint(low, high, size=size)
