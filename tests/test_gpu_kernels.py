"""The CUDA engine's kernels (sim/kernels/*.cu) against NumPy twins that draw the same Philox numbers.

Every random number of the kernels is a function of (seed, stream, tag, index), so a NumPy reference
that follows the same conventions must give the very same spins, masks and observables, element by
element. Each test runs twice: on the CPU emulator of the kernels (sim/gpu/emulate.py, small lattices,
no GPU needed) and on a real CUDA device (marked gpu, larger lattices).
"""
import itertools
import math

import numpy as np
import pytest

from latticelab.sim.backend import to_numpy
from latticelab.sim.gpu import philox
from latticelab.sim.models.ising.engines import ReferenceEngine
from latticelab.sim.models.ising.model import IsingModel
from latticelab.sim.models.ising.swendsen_wang import label_components
from latticelab.sim.models.ising.lattice import build_lattice, site_colour
from latticelab.sim.rng import StreamRNG

from helpers import DEVICES, device_xp, random_spins


def metropolis_twin(lattice, spins: np.ndarray, T: float, key) -> tuple[np.ndarray, np.ndarray]:
    """One checkerboard sweep in NumPy drawing exactly the kernels' numbers (sim/gpu/philox.py)."""
    dim, L = lattice.dim, lattice.L
    s = spins.astype(np.int64).reshape(-1).copy()
    colour = site_colour(np.arange(s.size), dim, L)
    k_max = max(lattice.max_degree, 2 * dim)
    table = philox.threshold64(np.exp(-2.0 * np.arange(k_max + 1) / T))
    flipped = np.zeros(s.size, dtype=bool)
    for c in (0, 1):
        grid = s.reshape((L,) * dim)
        h = sum(np.roll(grid, shift, axis) for axis in range(dim) for shift in (1, -1)).reshape(-1)
        adj = lattice.by_colour[c]
        if adj.sites.size:
            owner = np.repeat(np.arange(adj.sites.size), adj.degrees)
            h[adj.sites] = np.bincount(owner, weights=s[adj.neighbours], minlength=adj.sites.size).astype(np.int64)
        sites = np.flatnonzero(colour == c)
        k = s[sites] * h[sites]
        r = philox.metropolis_numbers(key, c, sites)   # all 64 bits: the full-precision comparison
        flip = (k <= 0) | (r < table[np.clip(k, 0, k_max)])
        s[sites[flip]] *= -1
        flipped[sites[flip]] = True
    return s.reshape(spins.shape).astype(np.int8), flipped.reshape(spins.shape)


def wolff_twin(lattice, spins: np.ndarray, T: float, key) -> tuple[np.ndarray, np.ndarray]:
    """One Wolff flip in NumPy: the component of the seed site in the kernels' FK bond graph."""
    labels = label_components(np, lattice, spins, -math.expm1(-2.0 / T), key).reshape(-1)
    cluster = (labels == labels[philox.wolff_seed_site(key, lattice.n_sites)]).reshape(spins.shape)
    return np.where(cluster, -spins, spins).astype(np.int8), cluster


METROPOLIS_CASES = {
    "emulator": [(2, 4, 0.0), (2, 4, 0.25), (2, 16, 0.0), (2, 16, 0.15), (2, 12, 0.1), (2, 6, 0.1),
                 (3, 4, 0.1), (3, 16, 0.02), (3, 6, 0.05)],
    "cuda": [(2, 4, 0.25), (2, 6, 0.1), (2, 12, 0.1), (2, 256, 0.0), (2, 256, 0.02), (2, 100, 0.05),
             (3, 4, 0.1), (3, 64, 0.01), (3, 30, 0.05), (3, 48, 0.2)],
}


@pytest.mark.parametrize("device", DEVICES)
def test_metropolis_kernels_match_their_numpy_twin(device):
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    xp = device_xp(device)
    for (dim, L, p), inline in itertools.product(METROPOLIS_CASES[device], (True, False)):
        if inline is False and (p == 0 or L % 4):
            continue  # no modified sites, or the one-site-per-thread kernel: one way only
        lattice = build_lattice(dim, L, p, "all", np.random.default_rng(L + dim))
        engine = CudaEngine(xp, lattice, inline_modified=inline)
        assert engine.inline_modified == (inline or L % 4 != 0)
        host = random_spins((L,) * dim, seed=L)
        spins = xp.asarray(host)
        rng = StreamRNG(xp, 11)
        for step, T in enumerate([1.0, 2.269, 3.5, 5.0]):
            key = (rng.seed, rng.streams_used)
            host, host_mask = metropolis_twin(lattice, host, T, key)
            spins, mask = engine.metropolis(spins, T, rng, want_mask=step % 2 == 0)
            where = f"{dim}D L={L} p={p} inline={inline} sweep {step}"
            np.testing.assert_array_equal(to_numpy(spins), host, err_msg=where)
            if step % 2 == 0:
                np.testing.assert_array_equal(to_numpy(mask), host_mask, err_msg=where)
            else:
                assert mask is None


@pytest.mark.parametrize("device", DEVICES)
def test_measure_matches_the_reference_engine(device):
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    xp = device_xp(device)
    cases = [(2, 4, 0.3), (2, 16, 0.1), (2, 10, 0.2), (3, 8, 0.1), (3, 6, 0.0)]
    if device == "cuda":
        cases += [(2, 512, 0.01), (3, 96, 0.02), (2, 1000, 0.0)]
    for dim, L, p in cases:
        lattice = build_lattice(dim, L, p, "all", np.random.default_rng(L))
        for up in (0.5, 0.9):
            host = random_spins((L,) * dim, seed=L + int(10 * up), up=up)
            expected = ReferenceEngine(np, lattice).measure(host)
            assert CudaEngine(xp, lattice).measure(xp.asarray(host)) == expected, (dim, L, p, up)


@pytest.mark.parametrize("device", DEVICES)
def test_wolff_kernels_match_their_numpy_twin(device):
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    xp = device_xp(device)
    cases = [(2, 16, 0.1), (2, 70, 0.01), (3, 8, 0.05), (2, 6, 0.2)]
    if device == "cuda":
        cases += [(2, 300, 0.01), (3, 40, 0.01)]
    for dim, L, p in cases:
        lattice = build_lattice(dim, L, p, "all", np.random.default_rng(L))
        engine = CudaEngine(xp, lattice)
        host = random_spins((L,) * dim, seed=3)
        spins = xp.asarray(host)
        rng = StreamRNG(xp, 5)
        for T in (1.2, 2.3, 4.5, 9.0):
            host, cluster = wolff_twin(lattice, host, T, (rng.seed, rng.streams_used))
            spins, mask = engine.wolff(spins, T, rng, want_mask=True)
            np.testing.assert_array_equal(to_numpy(spins), host, err_msg=f"{dim}D L={L} T={T}")
            np.testing.assert_array_equal(to_numpy(mask), cluster)


@pytest.mark.gpu
def test_the_cuda_backend_uses_the_fast_engine_in_place():
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    m = IsingModel(dim=2, L=64, T=2.5, p=0.01, seed=3, backend="cuda")
    assert isinstance(m._engine, CudaEngine)
    for algorithm in ("metropolis", "wolff", "swendsen-wang"):
        m.algorithm = algorithm
        before = m.spins
        m.step(2)
        assert m.spins is before  # updated in place: no copy per step
        s = to_numpy(m.spins)
        assert s.dtype == np.int8 and s.shape == (64, 64) and set(np.unique(s)) <= {-1, 1}


@pytest.mark.gpu
def test_onsager_energy_at_a_large_lattice():
    """The SIMD kernel at a production-like size: L = 1024, far from T_c on both sides."""
    from latticelab.sim.models.ising.exact import onsager_energy
    for T, start in ((1.8, "cold"), (3.0, "hot")):
        m = IsingModel(dim=2, L=1024, T=T, seed=5, backend="cuda", start=start)
        m.step(500)
        energy = []
        for _ in range(200):
            m.step(5)
            energy.append(m.observables()["energy"])
        # 1M spins: the statistical error of the mean is ~1e-5; finite-size effects are far smaller at L=1024.
        assert abs(np.mean(energy) - onsager_energy(T)) < 5e-4, (T, np.mean(energy), onsager_energy(T))


MULTISPIN_CASES = {
    "emulator": [(2, 64, 0.0), (2, 64, 0.1), (2, 128, 0.02), (3, 64, 0.0), (3, 64, 0.01)],
    "cuda": [(2, 64, 0.1), (2, 512, 0.0), (2, 512, 0.01), (2, 1024, 1e-4), (3, 64, 0.05), (3, 128, 0.002)],
}


def test_packed_layout_round_trip_and_positions():
    from latticelab.sim.models.ising.gpu import multispin
    for dim, L in ((2, 64), (2, 128), (3, 64)):
        host = random_spins((L,) * dim, seed=L + dim)
        words = multispin.pack(host)
        assert words.dtype == np.uint32 and words.size == host.size // 32
        np.testing.assert_array_equal(multispin.unpack(words, host.shape), host)
        positions = multispin.bit_position(np.arange(host.size), dim, L)
        assert np.array_equal(np.sort(positions), np.arange(host.size))  # a bijection
        colour = site_colour(np.arange(host.size), dim, L)
        assert np.all((positions >= host.size // 2) == (colour == 1))  # each colour in its own half


@pytest.mark.parametrize("device", DEVICES)
def test_multispin_sweeps_match_their_numpy_twin(device):
    """metropolis_sweeps on packed spins: the twin's spins after every call and the last sweep's mask."""
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    xp = device_xp(device)
    for (dim, L, p), inline in itertools.product(MULTISPIN_CASES[device], (True, False)):
        if inline is False and p == 0:
            continue  # no modified sites: one way only
        lattice = build_lattice(dim, L, p, "all", np.random.default_rng(L + dim))
        engine = CudaEngine(xp, lattice, inline_modified=inline)
        host = random_spins((L,) * dim, seed=L)
        spins = xp.asarray(host)
        rng = StreamRNG(xp, 11)
        for T, n in ((1.0, 2), (2.269, 3), (4.5115, 2), (9.0, 2)):
            where = f"{dim}D L={L} p={p} inline={inline} T={T}"
            mask_expected = None
            for _ in range(n):
                host, mask_expected = metropolis_twin(lattice, host, T, (rng.seed, rng.streams_used))
                rng.streams_used += 1
            rng.streams_used -= n
            want_mask = T != 4.5115
            spins, mask = engine.metropolis_sweeps(spins, T, rng, n, want_mask=want_mask)
            np.testing.assert_array_equal(to_numpy(spins), host, err_msg=where)
            if want_mask:
                np.testing.assert_array_equal(to_numpy(mask), mask_expected, err_msg=where)
            else:
                assert mask is None
        assert rng.streams_used == 9
        # decided apart (multispin_decide_modified) exactly when asked and there are modified sites
        assert engine._multispin["modified_apart"] == (not inline and p > 0)


def _top_byte_ties(lattice, host: np.ndarray, T: float, key) -> int:
    """How many sites of the first half-sweep (colour 0) from ``host`` have a top byte equal to their
    threshold's: the sites the kernels decide on their low 56 bits."""
    dim, L = lattice.dim, lattice.L
    s = host.astype(np.int64).reshape(-1)
    h = sum(np.roll(host.astype(np.int64), shift, axis) for axis in range(dim) for shift in (1, -1)).reshape(-1)
    sites = np.flatnonzero(site_colour(np.arange(s.size), dim, L) == 0)
    k = s[sites] * h[sites]
    table = philox.threshold64(np.exp(-2.0 * np.arange(2 * dim + 1) / T))
    top = philox.metropolis_numbers(key, 0, sites) >> np.uint64(56)
    return int(((k > 0) & (top == table[np.clip(k, 0, 2 * dim)] >> np.uint64(56))).sum())


@pytest.mark.parametrize("device", DEVICES)
def test_multispin_ties_take_the_exact_path(device):
    """Sweeps whose sites tie a threshold in their top 8 bits (about one site in 256) are decided on all 64 bits,
    like the twin's full comparison: the packed kernel's tie path runs and agrees site by site."""
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    xp = device_xp(device)
    for dim, L, T in ((2, 64, 2.269), (3, 64, 4.5115)):
        lattice = build_lattice(dim, L, 0.0, "all", np.random.default_rng(1))
        engine = CudaEngine(xp, lattice)
        # a cold start: most sites have k = 2*dim and draw bits
        for start in (np.ones((L,) * dim, np.int8), random_spins((L,) * dim, seed=5)):
            assert _top_byte_ties(lattice, start, T, (3, 40)) > 0, f"{dim}D: no tie to test"
            expected = start
            for i in range(2):
                expected, mask_expected = metropolis_twin(lattice, expected, T, (3, 40 + i))
            rng = StreamRNG(xp, 3, 40)
            spins, mask = engine.metropolis_sweeps(xp.asarray(start), T, rng, 2)
            np.testing.assert_array_equal(to_numpy(spins), expected, err_msg=f"{dim}D")
            np.testing.assert_array_equal(to_numpy(mask), mask_expected, err_msg=f"{dim}D")


def _forced_tie_thresholds(numbers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Thresholds whose top byte equals each number's, with low 56 bits: equal to the number's (R == P: no
    flip), one above, one below, and random -- every one a tie the top byte cannot decide."""
    low_mask = np.uint64((1 << 56) - 1)
    top, low = numbers & ~low_mask, numbers & low_mask
    random_low = rng.integers(0, 1 << 56, size=numbers.size, dtype=np.uint64)
    choice = np.arange(numbers.size) % 4
    # low + 1 and low - 1 stay inside the 56 bits but for the two extreme values (probability 2^-55)
    forced = np.select([choice == 0, choice == 1, choice == 2], [low, np.minimum(low + np.uint64(1), low_mask),
                                                                 np.maximum(low, np.uint64(1)) - np.uint64(1)],
                       random_low)
    return top | forced


@pytest.mark.parametrize("device", DEVICES)
def test_forced_ties_are_decided_as_the_full_64_bit_comparison(device):
    """The exact lazy comparison with every site tied in its top byte: the per-site rule (metropolis_sites,
    metropolis_modified) and the packed rule (bit planes, bit-sliced comparison, then the ties) against R < P
    on the twin's whole 64-bit numbers, for P equal to R, one above, one below and random in the low bits."""
    from latticelab.sim.gpu.kernels import get_kernel
    from latticelab.sim.models.ising.gpu import KERNEL_DIR
    xp = device_xp(device)
    names = ("metropolis_site_probe<0>", "metropolis_word_probe<0>")
    site_probe, word_probe = (get_kernel(xp, KERNEL_DIR / "metropolis_probe.cu", name, names) for name in names)
    rng = np.random.default_rng(9)
    for (seed, stream), colour in itertools.product(((3, 40), (2 ** 63 + 5, 2 ** 40 + 1)), (0, 1)):
        key_args = tuple(np.uint32(v) for v in (*philox.split64(seed), *philox.split64(stream)))
        # per site: 512 sites, every threshold forced to tie
        sites = rng.choice(1 << 20, size=512, replace=False).astype(np.int32)
        numbers = philox.metropolis_numbers((seed, stream), colour, sites)
        thresholds = _forced_tie_thresholds(numbers, rng)
        out = xp.zeros(sites.size, dtype=xp.uint8)
        site_probe((-(-sites.size // 128),), (128,), (out, xp.asarray(sites), xp.asarray(thresholds),
                                                      np.int32(sites.size), np.int32(colour), *key_args))
        np.testing.assert_array_equal(to_numpy(out).astype(bool), numbers < thresholds)
        # per word: word w's threshold ties its site w % 32 (its other sites mostly decided by the top byte)
        n_words = 256
        q = np.arange(32 * n_words)
        numbers = philox.metropolis_numbers((seed, stream), colour, 2 * q).reshape(n_words, 32)
        tied = numbers[np.arange(n_words), np.arange(n_words) % 32]
        thresholds = _forced_tie_thresholds(tied, rng)
        out = xp.zeros(n_words, dtype=xp.uint32)
        word_probe((-(-n_words // 64),), (64,), (out, xp.asarray(thresholds), np.int32(n_words), np.int32(colour),
                                                 *key_args))
        below = numbers < thresholds[:, None]
        expected = (below.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1).astype(np.uint32)
        np.testing.assert_array_equal(to_numpy(out), expected)
        assert (below[np.arange(n_words), np.arange(n_words) % 32]).any()  # some ties accepted ...
        assert not below[np.arange(0, n_words, 4), np.arange(0, n_words, 4) % 32].any()  # ... and R == P never


@pytest.mark.gpu
def test_ising_model_steps_use_the_packed_sweeps_with_the_same_trajectory():
    """IsingModel.step(n) (n packed sweeps at once) equals n single steps, and resumes exactly from a state."""
    for dim, L, p in ((2, 128, 0.01), (3, 64, 0.01)):
        a = IsingModel(dim=dim, L=L, T=2.5 * dim - 1, p=p, seed=4, backend="cuda")
        b = IsingModel(dim=dim, L=L, T=2.5 * dim - 1, p=p, seed=4, backend="cuda")
        a.step(7)
        for _ in range(7):
            b.step(1)
        np.testing.assert_array_equal(to_numpy(a.spins), to_numpy(b.spins))
        np.testing.assert_array_equal(to_numpy(a.flipped), to_numpy(b.flipped))
        assert a.step_count == b.step_count == 7 and a.get_state()["streams_used"] == b.get_state()["streams_used"]
        from latticelab.sim.state import restore, state_of
        resumed = restore(state_of(a), backend="cuda")
        a.step(5)
        resumed.step(5)
        np.testing.assert_array_equal(to_numpy(a.spins), to_numpy(resumed.spins))


def _twin_frame(lattice, host, T, rng, n):
    """n twin sweeps: the final spins, the union of their flips, and each sweep's (bond sum, spin sum, flips)
    counted directly from the spins and the lattice's edge list."""
    edges = np.asarray(lattice.edges(), dtype=np.int64)
    union = np.zeros(host.shape, bool)
    rows = []
    for _ in range(n):
        host, mask = metropolis_twin(lattice, host, T, (rng.seed, rng.streams_used))
        rng.streams_used += 1
        union |= mask
        s = host.reshape(-1).astype(np.int64)
        rows.append((int((s[edges[:, 0]] * s[edges[:, 1]]).sum()), int(s.sum()), int(mask.sum())))
    return host, union, np.array(rows, dtype=np.int64)


FRAME_CASES = {
    "emulator": [(2, 64, 0.0), (2, 64, 0.1), (3, 64, 0.01)],
    "cuda": [(2, 64, 0.1), (2, 512, 0.0), (2, 512, 0.01), (3, 64, 0.05), (3, 128, 0.002), (2, 192, 0.02)],
}


@pytest.mark.parametrize("device", DEVICES)
def test_a_packed_frame_measures_each_sweep_and_unions_the_flips(device):
    """metropolis_frame: the twin's spins after n sweeps, the union of the n sweeps' flips, and each sweep's
    bond sum, spin sum and flip count -- reduced inside the sweep launches -- equal to counts made directly
    from the twin's spins and the lattice's edges."""
    from latticelab.sim.models.ising.gpu.engine import CudaEngine
    xp = device_xp(device)
    for (dim, L, p), inline in itertools.product(FRAME_CASES[device], (True, False)):
        if inline is False and p == 0:
            continue  # no modified sites: one way only
        lattice = build_lattice(dim, L, p, "all", np.random.default_rng(L + dim))
        engine = CudaEngine(xp, lattice, inline_modified=inline)
        host = random_spins((L,) * dim, seed=L)
        spins = xp.asarray(host)
        for T, n in ((2.269 if dim == 2 else 4.5115, 3), (1.0, 2)):
            twin_rng, rng = StreamRNG(np, 21, 2), StreamRNG(xp, 21, 2)
            host, union, rows = _twin_frame(lattice, host, T, twin_rng, n)
            spins, mask, totals = engine.metropolis_frame(spins, T, rng, n)
            where = f"{dim}D L={L} p={p} inline={inline} T={T}"
            np.testing.assert_array_equal(to_numpy(spins), host, err_msg=where)
            np.testing.assert_array_equal(to_numpy(mask), union, err_msg=where)
            np.testing.assert_array_equal(totals, rows, err_msg=where)


@pytest.mark.gpu
@pytest.mark.parametrize("dim, L, p, algorithm", [(2, 128, 0.01, "metropolis"), (2, 100, 0.01, "metropolis"),
                                                  (3, 64, 0.01, "metropolis"), (2, 128, 0.01, "4:1"),
                                                  (3, 32, 0.0, "swendsen-wang"), (2, 64, 0.02, "wolff")])
def test_a_frame_on_the_gpu_equals_single_steps(dim, L, p, algorithm):
    """IsingModel.advance(n) on CUDA (packed frame, or the device-buffer loop for cluster schedules): the same
    spins, per-step observables and union of flips as n single steps with observables() after each."""
    T = 2.3 if dim == 2 else 4.5
    a = IsingModel(dim=dim, L=L, T=T, p=p, seed=4, algorithm=algorithm, backend="cuda")
    b = IsingModel(dim=dim, L=L, T=T, p=p, seed=4, algorithm=algorithm, backend="cuda")
    for n in (1, 9):
        rows, union = [], np.zeros((L,) * dim, bool)
        for _ in range(n):
            a.step(1)
            union |= to_numpy(a.changed()).astype(bool)
            rows.append(a.observables())
        batch = b.advance(n)
        np.testing.assert_array_equal(to_numpy(a.spins), to_numpy(b.spins))
        np.testing.assert_array_equal(to_numpy(batch.changed), union)
        for name in ("energy", "abs_magnetisation", "flipped_fraction"):
            np.testing.assert_allclose(batch.observables[name], [r[name] for r in rows], rtol=1e-12, err_msg=name)
        assert list(batch.times) == list(range(a.step_count - n + 1, a.step_count + 1))


@pytest.mark.gpu
def test_a_frame_that_does_not_wait_delivers_the_same_observables_later():
    """advance(n, wait=False): the batch returns before the device is done; its observables, once copied, equal
    those of a waiting frame on a twin model, and the runner's history takes them in order."""
    from latticelab.sim.runner import Runner
    a = IsingModel(dim=2, L=256, T=2.3, p=0.01, seed=6, algorithm="metropolis", backend="cuda")
    b = IsingModel(dim=2, L=256, T=2.3, p=0.01, seed=6, algorithm="metropolis", backend="cuda")
    for n in (5, 40):
        waited, pending = a.advance(n), b.advance(n, wait=False)
        assert not isinstance(pending.observables, dict)
        got = pending.observables.result()
        assert pending.observables.ready() and pending.observables.device_seconds() > 0
        for name, values in waited.observables.items():
            np.testing.assert_array_equal(got[name], values, err_msg=name)
    # timed frames queue their steps behind the last frame's before waiting for it: the history and the state
    # are those of a twin whose frames each wait for the device
    params = {"dim": 2, "L": 256, "T": 2.3, "seed": 6, "algorithm": "metropolis"}
    runner = Runner("ising", params, backend="cuda")
    twin = Runner("ising", params, backend="cuda")
    for max_steps in (1, 50, 50, 50, 50):
        steps = runner.advance(max_steps, budget_s=0.01)
        assert len(runner._waiting) <= 1               # the older frame was collected
        assert twin.advance(steps) == steps
    runner.collect(wait=True)
    times, values = runner.history.arrays()
    assert times[-1] == runner.model.step_count and np.all(np.diff(times) == 1)
    twin_times, twin_values = twin.history.arrays()
    np.testing.assert_array_equal(times, twin_times)
    for name in ("energy", "abs_magnetisation", "flipped_fraction"):
        np.testing.assert_array_equal(values[name], twin_values[name], err_msg=name)
    np.testing.assert_array_equal(to_numpy(runner.model.spins), to_numpy(twin.model.spins))
