"""Moving snapshots off the simulation's critical path (sim/output/background.py): ``HostCopy`` holds the array
as it was when the copy was asked for, however soon the simulation overwrites it, and ``BackgroundWriter``
writes in order and never loses an error of its thread."""
import threading

import numpy as np
import pytest

from latticelab.sim.output.background import BackgroundWriter, HostCopy


def test_a_host_copy_of_a_numpy_array_keeps_the_values_of_the_call():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    copy = HostCopy(a)
    a += 100
    assert np.array_equal(copy.result(), np.arange(12).reshape(3, 4)) and copy.result().dtype == np.int32


def test_the_writer_writes_in_order_and_close_waits_for_the_last():
    written = []
    writer = BackgroundWriter(written.append, depth=2)
    for i in range(50):
        writer.put(i)
    writer.close()
    assert written == list(range(50))


def test_an_error_in_the_writer_s_thread_is_raised_by_the_next_call():
    def write(item):
        if item == 3:
            raise OSError(28, "No space left on device")
    writer = BackgroundWriter(write, depth=1)
    for i in range(4):
        writer.put(i)
    with pytest.raises(OSError, match="No space left"):
        writer.flush()
    writer.close()                                   # raised once, not twice


@pytest.mark.gpu
@pytest.mark.parametrize("stream", ["default", "non-blocking"])
def test_a_device_snapshot_is_the_array_of_the_call_while_the_next_kernels_overwrite_it(stream):
    """The asynchronous copy to pinned host memory takes milliseconds for 256 MiB; the kernels queued right
    after the snapshot change every element many times within that time. The host copy, read in another
    thread as the writer does, must hold the values at the call: the device-side copy is ordered before
    them on the simulation's stream, whichever stream that is."""
    import cupy
    context = cupy.cuda.Stream(non_blocking=True) if stream == "non-blocking" else cupy.cuda.Stream.null
    with context:
        a = cupy.arange(1 << 26, dtype=cupy.int32)              # 256 MiB
        a *= 3
        copy = HostCopy(a)
        for _ in range(20):
            a += 1
        got = {}
        reader = threading.Thread(target=lambda: got.setdefault("host", copy.result()))
        reader.start()
        reader.join()
        want = np.arange(1 << 26, dtype=np.int32) * 3
        assert isinstance(got["host"], np.ndarray) and np.array_equal(got["host"], want)
        assert int(a[5].get()) == 15 + 20                     # the kernels did run after the snapshot
