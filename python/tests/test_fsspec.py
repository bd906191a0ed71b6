"""rangeio.fsspec: fsspec's API over rangeio, one Limiter for every path."""

import fsspec
import pytest

import rangeio
import rangeio.fsspec  # noqa: F401  (registers the "rangeio" protocol)
from rangeio_testing import expected


def test_cat_ranges_cat_file_and_open(pattern_file):
    path, size = pattern_file
    fs = fsspec.filesystem("rangeio", read_thread_num=8,
                           skip_instance_cache=True)
    starts = [0, 100, size - 5, 4096]
    ends = [10, 300, size, 4096]
    got = fs.cat_ranges([path] * 4, starts, ends)
    assert got == [expected(s, e - s) for s, e in zip(starts, ends)]
    assert fs.cat_file(path, 10, 20) == expected(10, 10)
    assert fs.cat_file(path, -3) == expected(size - 3, 3)
    assert fs.cat_file("rangeio://" + path, 0, 5) == expected(0, 5)
    assert fs.info(path)["size"] == size
    with fs.open(path, block_size=4096) as f:
        f.seek(5000)
        assert f.read(10000) == expected(5000, 10000)
    with fsspec.open("rangeio://" + path, "rb", skip_instance_cache=True) as f:
        assert f.read(7) == expected(0, 7)


def test_one_limiter_for_every_path(pattern_file, tmp_path):
    path, size = pattern_file
    other = tmp_path / "other.bin"
    other.write_bytes(expected(0, 1000))
    limiter = rangeio.Limiter(read_thread_num=2, response_budget_count=4)
    fs = fsspec.filesystem("rangeio", limiter=limiter, skip_instance_cache=True)
    assert fs.reader(path).limiter is limiter
    assert fs.reader(str(other)).limiter is limiter
    paths = [path, str(other)] * 20
    starts = [i * 10 for i in range(40)]
    got = fs.cat_ranges(paths, starts, [s + 5 for s in starts])
    assert got == [expected(s, 5) for s in starts]
    stats = limiter.stats()
    assert stats["peak_in_flight"] <= 2 and stats["peak_retained_count"] <= 4
    assert stats["in_flight"] == 0


def test_errors_returned_or_raised(pattern_file, tmp_path):
    path, size = pattern_file
    fs = fsspec.filesystem("rangeio", skip_instance_cache=True)
    missing = str(tmp_path / "missing.bin")
    got = fs.cat_ranges([path, missing], [0, 0], [4, 4])
    assert got[0] == expected(0, 4)
    assert isinstance(got[1], FileNotFoundError)
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([missing], [0], [4], on_error="raise")
    with pytest.raises(ValueError):
        fs.cat_file(path, size + 1, size + 2)
    with pytest.raises(ValueError):
        fs.open(path, "wb")


def test_cat_ranges_over_many_objects_takes_them_as_they_complete(tmp_path):
    # More objects than the response budget holds results: a call that
    # drained one object's stream after another left the later objects'
    # results filling the budget while the first waited (BudgetError for
    # valid ranges, or a stall). Every range must come back, right. Ranges
    # 10,000 bytes apart are five reads per object (no coalescing).
    objects, per_object = 40, 5
    paths, starts = [], []
    for k in range(objects):
        p = tmp_path / f"o{k}.bin"
        p.write_bytes(expected(k * 1000, 50000))
        for j in range(per_object):
            paths.append(str(p))
            starts.append(j * 10000)
    limiter = rangeio.Limiter(read_thread_num=4, response_budget_count=16)
    fs = fsspec.filesystem("rangeio", limiter=limiter,
                           response_stall_timeout_ms=300,
                           skip_instance_cache=True)
    got = fs.cat_ranges(paths, starts, [s + 100 for s in starts])
    errors = [g for g in got if isinstance(g, BaseException)]
    assert errors == []
    assert got == [expected((i // per_object) * 1000 + s, 100)
                   for i, s in enumerate(starts)]
    stats = limiter.stats()
    assert stats["peak_retained_count"] <= 16
    assert stats["in_flight"] == 0 and stats["retained_count"] == 0

