"""The counter-based generator of the CUDA kernels: Philox4x32-10, its counter conventions, its statistics."""
import numpy as np
import pytest
from scipy import stats

from latticelab.sim.backend import to_numpy
from latticelab.sim.gpu import philox

from helpers import DEVICES, device_xp

# Random123's tests/kat_vectors, the three "philox4x32 10" lines: counter[4] key[2] -> result[4].
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,expected", KNOWN_ANSWERS)
def test_known_answer_vectors(counter, key, expected):
    assert tuple(int(v) for v in philox.philox4x32(counter, key)[:, 0]) == expected
    assert philox.philox4x32_scalar(counter, key) == expected


def half_sweep_numbers(seed: int, stream: int, n_sites: int = 1 << 16) -> dict[int, np.ndarray]:
    """The 64-bit numbers of a 2D half-sweep of a 256-wide lattice for the sites of each colour (C order)."""
    sites = np.arange(n_sites)
    colour = ((sites // 256) + sites) % 2
    return {c: philox.metropolis_numbers((seed, stream), c, sites[colour == c]) for c in (0, 1)}


def test_uniform_across_sites_and_streams():
    for seed, stream in ((1, 0), (2 ** 62 + 3, 17), (12345, 2 ** 40)):
        for numbers in half_sweep_numbers(seed, stream).values():
            u = numbers / 2.0 ** 64
            counts = np.bincount((u * 64).astype(int), minlength=64)
            assert stats.chisquare(counts).pvalue > 1e-4
            assert stats.kstest(u, "uniform").pvalue > 1e-4
            # every bit is fair, the 8 of the bit planes and the 56 of the tail call
            bits = (numbers[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
            assert np.all(np.abs(bits.mean(axis=0) - 0.5) < 5 * 0.5 / np.sqrt(numbers.size))


def test_independent_across_neighbouring_sites_colours_and_steps():
    n = 1 << 16
    a = half_sweep_numbers(7, 100, n)
    b = half_sweep_numbers(7, 101, n)   # the next update
    c = half_sweep_numbers(8, 100, n)   # another seed
    limit = 5 / np.sqrt(n / 2)
    pairs = {
        "next site of one colour": (a[0][:-1], a[0][1:]),
        "the two colours": (a[0], a[1]),
        "next step": (a[0], b[0]),
        "other seed": (a[0], c[0]),
    }
    for name, (x, y) in pairs.items():
        x, y = x / 2.0 ** 64, y / 2.0 ** 64
        assert abs(np.corrcoef(x, y)[0, 1]) < limit, name
        # joint distribution on a 16 x 16 grid: independent uniform pairs fill it evenly
        joint = np.bincount((x * 16).astype(int) * 16 + (y * 16).astype(int), minlength=256)
        assert stats.chisquare(joint).pvalue > 1e-4, name


def test_the_active_sites_of_a_call_use_distinct_slots():
    # In a row of even length the active colour alternates: the 16 active sites among 32 consecutive ones have
    # the colour indices q = site // 2 of one call (q // 16) and take its slots 0..15 (q % 16).
    for parity in (0, 1):
        q = np.arange(parity, 128, 2) >> 1
        assert all(sorted(q[(q >> 4) == g] & 15) == list(range(16)) for g in range(4))


def test_metropolis_numbers_are_bit_planes_and_a_tail_call():
    """Top byte: bit 7 - j is bit q % 16 + 16 (j % 2) of word j // 2 of call q // 16; low 56 bits: word 0 and
    the top 24 bits of word 1 of call q (TAG_METROPOLIS_LOW). Rebuilt here from single Philox calls."""
    key, sites = (5, 9), np.array([0, 3, 17, 30, 31, 64, 1001])
    got = philox.metropolis_numbers(key, 1, sites)
    for site, number in zip(sites, got):
        q = int(site) // 2
        planes = philox.philox4x32_scalar((q // 16, philox.TAG_METROPOLIS + 1, 9, 0), (5, 0))
        top = 0
        for j in range(8):
            top = top << 1 | (planes[j // 2] >> (q % 16 + 16 * (j % 2))) & 1
        tail = philox.philox4x32_scalar((q, philox.TAG_METROPOLIS_LOW + 1, 9, 0), (5, 0))
        assert int(number) == top << 56 | tail[0] << 24 | tail[1] >> 8


def test_thresholds_are_the_doubles_times_two_to_the_64():
    p = np.array([np.exp(-8 / 2.269), np.exp(-4 / 2.269), 2.0 ** -11, 0.5, 0.0, 1e-30])
    got = philox.threshold64(p)
    assert got.dtype == np.uint64
    for value, threshold in zip(p, got):
        assert int(threshold) == int(value * 2 ** 64) if value >= 2.0 ** -11 else int(threshold) <= value * 2 ** 64
    assert int(got[0]) / 2 ** 64 == p[0] and int(philox.threshold64(1.0)) == 2 ** 64 - 1


def test_a_detectable_flaw_fails_the_checks():
    """The statistics above can fail: a generator that repeats every 8th number is caught."""
    numbers = half_sweep_numbers(7, 100)[0].copy()
    numbers[1::2] = numbers[0::2]
    x, y = numbers[:-1] / 2.0 ** 64, numbers[1:] / 2.0 ** 64
    joint = np.bincount((x * 16).astype(int) * 16 + (y * 16).astype(int), minlength=256)
    assert stats.chisquare(joint).pvalue < 1e-4


@pytest.mark.parametrize("device", DEVICES)
def test_the_device_generator_equals_its_numpy_twin(device):
    from latticelab.sim.gpu.kernels import get_kernel
    xp = device_xp(device)
    kernel = get_kernel(xp, "philox.cu", "philox_words<0>")
    indices = np.concatenate([np.arange(1000), [2 ** 31 - 1, 2 ** 32 - 1]]).astype(np.int64)
    out = xp.zeros(4 * indices.size, dtype=xp.uint32)
    for tag, seed, stream in ((0, 1, 0), (3, 2 ** 63 - 1, 2 ** 64 - 1), (5, 99, 2 ** 33 + 7)):
        s_lo, s_hi = philox.split64(seed)
        t_lo, t_hi = philox.split64(stream)
        args = (out, xp.asarray(indices), np.int32(indices.size), np.uint32(tag), np.uint32(s_lo), np.uint32(s_hi),
                np.uint32(t_lo), np.uint32(t_hi))
        kernel((-(-indices.size // 128),), (128,), args)
        expected = philox.draw((seed, stream), tag, indices).T.reshape(-1)
        np.testing.assert_array_equal(to_numpy(out), expected)
