"""Reader: content, zero-copy buffers, their lifetime and budget, errors."""

import gc
import os

import numpy
import pytest

import rangeio
import rangeio_testing
from rangeio_testing import expected


def wait_until(predicate, timeout_s=10.0):
    """Polls `predicate` (a state, not a speed): True once it holds."""
    import time
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def test_read_ranges_ordered_and_as_completed(pattern_file):
    path, size = pattern_file
    reader = rangeio.open(path)
    ranges = [(0, 10), (size - 13, 13), (4096, 0), (500_000, 70_000)]
    ordered = list(reader.read_ranges(ranges, order="ordered"))
    assert [i for i, _ in ordered] == [0, 1, 2, 3]
    for i, view in ordered:
        assert bytes(view) == expected(*ranges[i])
    done = dict(reader.read_ranges(ranges, order="as-completed"))
    assert sorted(done) == [0, 1, 2, 3]
    assert all(bytes(done[i]) == expected(*ranges[i]) for i in done)
    assert reader.size == size


def test_numpy_ranges(pattern_file):
    path, _ = pattern_file
    reader = rangeio.open(path)
    ranges = numpy.array([[0, 10], [4096, 20], [70_000, 5]], dtype=numpy.int64)
    got = dict(reader.read_ranges(ranges, order="ordered"))
    assert [bytes(got[i]) for i in range(3)] == \
        [expected(int(o), int(n)) for o, n in ranges]
    with pytest.raises(ValueError, match="range 1: offset -5 is negative"):
        reader.read_ranges(numpy.array([[0, 1], [-5, 1]]))
    with pytest.raises(ValueError, match="must be an int, not float"):
        reader.read_ranges([(0.5, 1)])


def test_views_are_read_only_and_zero_copy(pattern_file):
    path, _ = pattern_file
    reader = rangeio.open(path)
    view = reader.read(100, 4096)
    assert isinstance(view, memoryview) and view.readonly
    array = numpy.frombuffer(view, dtype=numpy.uint8)
    assert not array.flags.owndata and not array.flags.writeable
    # The array's memory is the view's: the same address, no copy.
    assert array.__array_interface__["data"][0] == \
        numpy.frombuffer(view, dtype=numpy.uint8).__array_interface__["data"][0]
    assert array.tobytes() == expected(100, 4096)
    with pytest.raises(TypeError):
        view[0] = 1


def test_view_outlives_reader_and_iterator(pattern_file):
    path, _ = pattern_file
    reader = rangeio.open(path, planner="none")
    it = reader.read_ranges([(0, 4096), (8192, 4096)], order="ordered")
    kept = [view for _, view in it]
    single = numpy.frombuffer(reader.read(1 << 20, 13), dtype=numpy.uint8)
    limiter = reader.limiter
    del reader, it
    gc.collect()
    assert bytes(kept[0]) == expected(0, 4096)
    assert bytes(kept[1]) == expected(8192, 4096)
    assert single.tobytes() == expected(1 << 20, 13)
    # Each held view keeps its response budget charged until dropped.
    assert limiter.stats()["retained_count"] == 3
    del kept, single
    gc.collect()
    assert limiter.stats()["retained_count"] == 0
    assert limiter.stats()["retained_bytes"] == 0


def test_dropping_an_iterator_mid_stream_returns_every_permit():
    limiter = rangeio.Limiter(read_thread_num=16)
    source = rangeio_testing.simulated_source(64 << 20, latency_ms=2)
    reader = rangeio.open(source, limiter=limiter, planner="none")
    ranges = [(i * 65536, 4096) for i in range(1000)]
    it = reader.read_ranges(ranges)
    taken = [next(it) for _ in range(3)]
    assert limiter.stats()["peak_in_flight"] == 16
    del it  # cancels the queued reads
    # In-flight reads return their permits as they complete.
    assert wait_until(lambda: limiter.stats()["in_flight"] == 0)
    assert limiter.stats()["retained_count"] == 3  # the views still held
    del taken
    gc.collect()
    stats = limiter.stats()
    assert stats["in_flight"] == 0 and stats["retained_count"] == 0
    assert stats["retained_bytes"] == 0
    assert stats["physical_reads"] < 1000  # the rest were never read


def test_close_cancels_and_ends_iteration():
    source = rangeio_testing.simulated_source(1 << 20, latency_ms=1)
    reader = rangeio.open(source, read_thread_num=4)
    with reader.read_ranges([(i, 1) for i in range(100)]) as it:
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert wait_until(lambda: reader.limiter.stats()["in_flight"] == 0)


def test_shared_limiter_bounds_two_readers(pattern_file):
    path, _ = pattern_file
    limiter = rangeio.Limiter(read_thread_num=3, response_budget_count=6)
    a = rangeio.open(path, limiter=limiter, planner="none")
    b = rangeio.open(rangeio_testing.simulated_source(1 << 20), limiter=limiter)
    assert a.limiter is limiter and b.limiter is limiter
    # Each view is dropped as the loop moves on, returning its budget.
    for _, view in a.read_ranges([(i * 100, 10) for i in range(50)]):
        assert len(view) == 10
    for _, view in b.read_ranges([(i * 100, 10) for i in range(50)]):
        assert len(view) == 10
    stats = limiter.stats()
    assert stats["physical_reads"] >= 100
    assert stats["peak_in_flight"] <= 3 and stats["peak_retained_count"] <= 6


def test_options_that_would_do_nothing_are_refused(pattern_file):
    path, _ = pattern_file
    limiter = rangeio.Limiter(io_concurrency=3)
    assert limiter.io_concurrency == 3
    # A limiter option for a reader that shares a limiter, a reader option
    # for a limiter, a source option for an open source: each ValueError.
    with pytest.raises(ValueError, match=r"io-concurrency \(alias read-thread-num\)=8"):
        rangeio.open(path, limiter=limiter, read_thread_num=8)
    with pytest.raises(ValueError, match="planner is not a limiter option"):
        rangeio.Limiter(planner="none")
    with pytest.raises(ValueError, match="connect-timeout-ms opens a source"):
        rangeio.open(rangeio_testing.simulated_source(100),
                     connect_timeout_ms=10)


def test_bad_input_raises_value_error(pattern_file):
    path, size = pattern_file
    reader = rangeio.open(path)
    cases = [
        lambda: reader.read(size - 1, 2),             # past the end
        lambda: reader.read(-1, 1),                   # negative
        lambda: reader.read(2**64 - 1, 2),            # overflow
        lambda: reader.read("0", 1),                  # not an int
        lambda: reader.read_ranges([(0, 1), (5,)]),   # not a pair
        lambda: reader.read_ranges([(0, 1)], order="random"),
        lambda: rangeio.open(path, no_such_option=1),
        lambda: rangeio.open(path, read_thread_num=0),
        lambda: rangeio.open(path, read_thread_num=1.5),
        lambda: rangeio.open("gopher://host/x"),
        lambda: rangeio.Limiter(response_budget_bytes="lots"),
    ]
    for case in cases:
        with pytest.raises(ValueError):
            case()
    with pytest.raises(ValueError, match=r"\[1048588, 1048590\)"):
        reader.read(size - 1, 2)  # names the range


def test_missing_file_raises_file_not_found(tmp_path):
    missing = str(tmp_path / "missing.bin")
    with pytest.raises(FileNotFoundError, match="missing.bin") as info:
        rangeio.open(missing)
    assert info.value.errno == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_raises_permission_error(tmp_path):
    path = tmp_path / "secret.bin"
    path.write_bytes(b"x" * 10)
    path.chmod(0)
    with pytest.raises(PermissionError):
        rangeio.open(str(path))


def test_error_types_are_os_errors():
    for name in ("ReadError", "CancelledError", "BudgetError"):
        assert issubclass(getattr(rangeio, name), OSError)


def test_stats_count_reads(pattern_file):
    path, _ = pattern_file
    reader = rangeio.open(path, planner="none")
    list(reader.read_ranges([(0, 10), (100, 10)]))
    stats = reader.stats()
    assert stats["ranges_delivered"] == 2 and stats["logical_bytes"] == 20
    assert stats["physical_reads"] == 2
