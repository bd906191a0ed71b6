"""python/bench/soak.py: the Python surfaces under load, nothing held after.

Run from the tree, beside the package it checks (not installed with it):
    PYTHONPATH=build/python /usr/bin/python3 python/bench/soak.py --seconds 20

The Python half of `rangeio-bench soak` (issue 42): for --seconds, threads
on one small-budget Limiter do three things at once and check every byte
against rangeio_testing.expected:
  read_async   BatchedReader.read_async futures, each taken, dropped before
               it resolves, or taken and its view dropped at once;
  cat_ranges   fsspec cat_ranges over --objects local files, a few ranges
               each (far more results than the budget holds);
  read_ranges  streams over a pattern file (and nginx's pattern.bin when
               RANGEIO_TEST_NGINX is set), drained or dropped midway.
At the end, after gc.collect(), the limiter must have nothing in flight and
nothing retained, and one read of the whole byte budget must succeed.
Verdicts, not rates: the machine is shared. --json FILE writes them.
"""

import argparse
import collections
import functools
import gc
import json
import os
import random
import sys
import tempfile
import threading
import time

import fsspec

import rangeio
import rangeio.fsspec  # noqa: F401 (registers "rangeio")
from rangeio_testing import expected

_PATTERN_BYTES = (1 << 20) + 13  # tests/servers/seed.js's pattern.bin
_OBJECT_BYTES = 16 << 10
_BUDGET_COUNT = 32
_BUDGET_BYTES = 1 << 20


class Tally:
    """Counters shared by the soak's threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.first_errors = []

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def error(self, key, err):
        self.add(key)
        with self.lock:
            if len(self.first_errors) < 5:
                self.first_errors.append(f"{key}: {err!r}")

    def check(self, got, offset, length):
        if bytes(got) != expected(offset, length):
            self.error("wrong_results", f"range {offset}+{length}")


def read_async_loop(batched, size, stop, tally, rng):
    # At most 12 futures of this thread alive at once, so that two such
    # threads hold fewer results than the budget: a resolved future holds
    # its view (documented), and the soak checks rangeio, not its caller.
    while not stop.is_set():
        pending = collections.deque()
        for _ in range(12):
            o, n = rng.randrange(size - 4096), rng.randrange(1, 4096)
            pending.append((o, n, batched.read_async(o, n)))
        while pending:
            o, n, future = pending.popleft()
            fate = rng.random()
            if fate < 0.2:
                tally.add("async_dropped")
                del future  # dropped unresolved: its result must not be held
                continue
            try:
                view = future.result(timeout=60)
            except Exception as err:  # noqa: BLE001 (counted, reported)
                tally.error("unexpected_errors", err)
                continue
            if fate < 0.9:
                tally.check(view, o, n)
            del future, view
            tally.add("async_reads")


def cat_ranges_loop(fs, paths, stop, tally, rng):
    """`paths`: {path: offset in the pattern where its bytes start}."""
    while not stop.is_set():
        call_paths, starts = [], []
        for p in paths:
            for _ in range(3):
                call_paths.append(p)
                starts.append(rng.randrange(_OBJECT_BYTES - 512))
        ends = [s + 1 + rng.randrange(511) for s in starts]
        got = fs.cat_ranges(call_paths, starts, ends)
        for p, s, e, g in zip(call_paths, starts, ends, got):
            if isinstance(g, BaseException):
                tally.error("unexpected_errors", g)
                continue
            tally.check(g, paths[p] + s, e - s)
        tally.add("cat_calls")
        tally.add("cat_ranges", len(got))


def read_ranges_loop(reader, size, stop, tally, rng):
    while not stop.is_set():
        ranges = [(rng.randrange(size - 65536), rng.randrange(1, 65536))
                  for _ in range(rng.randrange(1, 33))]
        drop_after = rng.randrange(len(ranges) + 1)
        stream = reader.read_ranges(ranges)
        try:
            for taken, (k, view) in enumerate(stream):
                if taken == drop_after:
                    tally.add("streams_dropped")
                    break
                tally.check(view, *ranges[k])
        except Exception as err:  # noqa: BLE001 (counted, reported)
            tally.error("unexpected_errors", err)
        del stream
        tally.add("streams")


def write_objects(folder, count):
    """{path: offset in the pattern where its bytes start} of new files."""
    paths = {}
    for k in range(count):
        path = os.path.join(folder, f"o{k}.bin")
        with open(path, "wb") as f:
            f.write(expected(k * 1000, _OBJECT_BYTES))
        paths[path] = k * 1000
    return paths


def wait_until(predicate, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def run(args, folder):
    pattern = os.path.join(folder, "pattern.bin")
    with open(pattern, "wb") as f:
        f.write(expected(0, _PATTERN_BYTES))
    paths = write_objects(folder, args.objects)
    limiter = rangeio.Limiter(read_thread_num=16,
                              response_budget_count=_BUDGET_COUNT,
                              response_budget_bytes=_BUDGET_BYTES)
    stall = {"response_stall_timeout_ms": 30000}
    readers = [rangeio.open(pattern, limiter=limiter, **stall)]
    nginx = os.environ.get("RANGEIO_TEST_NGINX")
    if nginx:
        readers.append(rangeio.open(nginx + "/pattern.bin", limiter=limiter,
                                    **stall))
    batched = rangeio.BatchedReader(readers[0])
    fs = fsspec.filesystem("rangeio", limiter=limiter, hit_threads=0,
                           skip_instance_cache=True, **stall)
    tally = Tally()
    stop = threading.Event()
    work = [functools.partial(read_async_loop, batched, _PATTERN_BYTES),
            functools.partial(read_async_loop, batched, _PATTERN_BYTES),
            functools.partial(cat_ranges_loop, fs, paths)]
    work += [functools.partial(read_ranges_loop, reader, _PATTERN_BYTES)
             for reader in readers]

    def guarded(body, seed):
        try:
            body(stop, tally, random.Random(seed))
        except Exception as err:  # noqa: BLE001 (a thread's escape is a failure)
            tally.error("unexpected_errors", err)

    threads = [threading.Thread(target=guarded, args=(body, seed))
               for seed, body in enumerate(work)]
    for t in threads:
        t.start()
    time.sleep(args.seconds)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    hung = sum(t.is_alive() for t in threads)
    del batched, work  # the partials hold it too
    gc.collect()
    wait_until(lambda: limiter.stats()["in_flight"] == 0
               and limiter.stats()["retained_count"] == 0)
    end = limiter.stats()
    # The whole byte budget comes back: one read of all of it is admitted.
    try:
        tally.check(readers[0].read(0, _BUDGET_BYTES), 0, _BUDGET_BYTES)
        budget_back = True
    except Exception as err:  # noqa: BLE001 (the verdict below)
        tally.error("unexpected_errors", err)
        budget_back = False
    counts = tally.counts
    row = {
        "seconds": args.seconds, "objects": args.objects,
        "sources": "local" + (",nginx" if nginx else ""),
        "async_reads": counts.get("async_reads", 0),
        "async_dropped": counts.get("async_dropped", 0),
        "cat_calls": counts.get("cat_calls", 0),
        "cat_ranges": counts.get("cat_ranges", 0),
        "streams": counts.get("streams", 0),
        "streams_dropped": counts.get("streams_dropped", 0),
        "wrong_results": counts.get("wrong_results", 0),
        "unexpected_errors": counts.get("unexpected_errors", 0),
        "hung_threads": hung,
        "end_in_flight": end["in_flight"],
        "end_retained": end["retained_count"],
        "end_retained_bytes": end["retained_bytes"],
        "budget_back": budget_back,
        "first_errors": tally.first_errors,
    }
    row["pass"] = (row["wrong_results"] == 0 and row["unexpected_errors"] == 0
                   and hung == 0 and row["end_in_flight"] == 0
                   and row["end_retained"] == 0 and budget_back
                   and row["async_reads"] > 0 and row["async_dropped"] > 0
                   and row["cat_calls"] > 0 and row["streams_dropped"] > 0)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--objects", type=int, default=300)
    parser.add_argument("--json", help="write the verdicts to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rangeio-soak-") as folder:
        row = run(args, folder)
    for key, value in row.items():
        print(f"{key:>20}  {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": [row]}, f, indent=1)
    print("soak:", "PASS" if row["pass"] else "FAIL")
    return 0 if row["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
