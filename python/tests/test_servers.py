"""HTTP and S3 through the test servers (tests/servers/run_servers.sh)."""

import fsspec
import pytest

import rangeio
import rangeio.fsspec  # noqa: F401
from rangeio_testing import expected

PATTERN_SIZE = (1 << 20) + 13


def test_http_read_ranges(nginx):
    reader = rangeio.open(nginx + "/pattern.bin")
    ranges = [(0, 100), (PATTERN_SIZE - 13, 13), (300_000, 65536)]
    got = dict(reader.read_ranges(ranges))
    assert {i: bytes(v) for i, v in got.items()} == \
        {i: expected(*r) for i, r in enumerate(ranges)}
    assert reader.size == PATTERN_SIZE


def test_http_missing_object_is_file_not_found(nginx):
    with pytest.raises(FileNotFoundError, match="no-such.bin"):
        rangeio.open(nginx + "/no-such.bin").read(0, 1)


def test_s3_read_and_missing_key(s3_options):
    url, opts = s3_options
    reader = rangeio.open(url, **opts)
    assert bytes(reader.read(1000, 50)) == expected(1000, 50)
    with pytest.raises(FileNotFoundError):
        rangeio.open(url + ".missing", **opts).read(0, 1)


def test_http_403_is_permission_error(fault_listener):
    base = fault_listener([{"first": 100, "kind": "status", "status": 403,
                            "code": "AccessDenied"}])
    with pytest.raises(PermissionError):
        rangeio.open(base + "/pattern.bin", size_hint=PATTERN_SIZE).read(0, 10)


def test_http_500_is_read_error_naming_the_range(fault_listener):
    base = fault_listener([{"first": 100, "kind": "status", "status": 500,
                            "code": "InternalError"}])
    reader = rangeio.open(base + "/pattern.bin", size_hint=PATTERN_SIZE,
                          max_attempts=1)
    with pytest.raises(rangeio.ReadError, match=r"\[10, 20\)") as info:
        reader.read(10, 10)
    assert isinstance(info.value, OSError)


def test_fsspec_over_http_and_s3(nginx, s3_options):
    url, opts = s3_options
    fs = fsspec.filesystem("rangeio", skip_instance_cache=True, **opts)
    http = nginx + "/pattern.bin"
    got = fs.cat_ranges([http, url, http], [0, 10, 20], [5, 15, 25])
    assert got == [expected(0, 5), expected(10, 5), expected(20, 5)]


def test_http_stats_count_gets_and_throttling(nginx, fault_listener, tmp_path):
    reader = rangeio.open(nginx + "/pattern.bin", planner="none")
    list(reader.read_ranges([(0, 10), (5000, 10), (90_000, 10)]))
    stats = reader.http_stats()
    assert stats["reads_ok"] == 3 and stats["heads"] == 0
    assert stats["gets"] >= 3 and stats["retries"] == 0
    assert stats["throttled"] == 0 and stats["endpoint_limit"] >= 1

    # The first two requests answered 503 SlowDown: the read succeeds on its
    # third attempt, and both throttled answers are counted.
    base = fault_listener([{"first": 2, "kind": "slowdown"}])
    throttled = rangeio.open(base + "/pattern.bin", size_hint=PATTERN_SIZE,
                             max_attempts=5)
    assert bytes(throttled.read(100, 10)) == expected(100, 10)
    stats = throttled.http_stats()
    assert stats["throttled"] == 2 and stats["retries_throttled"] == 2
    assert stats["gets"] == 3 and stats["reads_ok"] == 1
    assert stats["endpoint_throttles"] == 2

    local = tmp_path / "f.bin"
    local.write_bytes(b"x" * 10)
    assert rangeio.open(str(local)).http_stats() is None
