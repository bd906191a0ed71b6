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
