"""python/bench/rangeio_bench.py URL: ranged-read load from Python, with peers.

Run from the tree, beside the package it measures (not installed with it):
    PYTHONPATH=build/python /usr/bin/python3 python/bench/rangeio_bench.py URL

The workload of `rangeio bench url`: --reads reads of --block bytes at
random block-aligned offsets (a fixed seed, the same ranges for every row),
--concurrency reads in flight. Rows, in one run:
  rangeio          one thread iterating Reader.read_ranges (as-completed);
  rangeio-batched  --threads Python threads sharing one BatchedReader, each
                   iterating read_many over its share (one stream each, on
                   the shared limiter);
  rangeio-batched-futures  the same with read_async: each thread keeps
                   concurrency/threads futures in flight;
  boto3            (s3://) get_object(Range=...) on a ThreadPoolExecutor of
                   --concurrency workers, one client (max_pool_connections);
  urllib3          (http://) --concurrency threads on one PoolManager;
  fsspec-http      (http://) fsspec's HTTPFileSystem.cat_ranges, batch_size
                   --concurrency;
  c++ bench url    (--cli PATH) the C++ `rangeio bench url`, same workload.
Figures: reads/s, MiB/s, p50/p99 latency of one read (request to bytes;
for the rangeio rows the library's per-read histogram), CPU seconds of the
whole process (every thread) per 1,000 reads. The machine's other load
shows in every figure: compare rows of one run, not runs.
"""

import argparse
import concurrent.futures
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque

import rangeio

_SUFFIX = {"": 1, "K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20,
           "G": 1 << 30, "GIB": 1 << 30}
_CDF_QUANTILES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95,
                  0.99, 0.999, 1.0)


def parse_bytes(text):
    digits = text.rstrip("KkMmGgIiBb")
    return int(digits) * _SUFFIX[text[len(digits):].upper()]


def make_ranges(size, block, reads, seed=0x5EED):
    slots = size // block
    if slots == 0:
        raise ValueError(f"the object ({size} bytes) is smaller than --block")
    rng = random.Random(seed)
    return [(rng.randrange(slots) * block, block) for _ in range(reads)]


def quantile(sorted_ms, q):
    if not sorted_ms:
        return None
    return sorted_ms[min(int(q * len(sorted_ms)), len(sorted_ms) - 1)]


class Measure:
    """Wall time and process CPU time (every thread) of one row."""

    def __enter__(self):
        self.wall = time.perf_counter()
        self.cpu = time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def row(name, ranges, m, latencies_ms=None, cdf=None, p50=None, p99=None):
    reads = len(ranges)
    total = sum(length for _, length in ranges)
    if latencies_ms is not None:
        latencies_ms = sorted(latencies_ms)
        p50, p99 = quantile(latencies_ms, 0.5), quantile(latencies_ms, 0.99)
        cdf = [[quantile(latencies_ms, q), q] for q in _CDF_QUANTILES]
    return {"strategy": name, "reads": reads, "elapsed_s": m.wall,
            "reads_per_s": reads / m.wall, "mib_per_s": total / m.wall / 2**20,
            "p50_ms": p50, "p99_ms": p99,
            "cpu_s_per_1000_reads": m.cpu / reads * 1000, "latency_cdf": cdf}


def library_latency(reader):
    s = reader.stats()
    return dict(p50=s["read_latency_p50_ms"], p99=s["read_latency_p99_ms"],
                cdf=s["read_latency_cdf"])


def run_rangeio(url, ranges, args, options):
    reader = rangeio.open(url, read_thread_num=args.concurrency, **options)
    with Measure() as m:
        for _, view in reader.read_ranges(ranges):
            assert len(view) == ranges[0][1]
    return row("rangeio", ranges, m, **library_latency(reader))


def run_batched_threads(name, url, ranges, args, options, work):
    reader = rangeio.open(url, read_thread_num=args.concurrency, **options)
    batched = rangeio.BatchedReader(reader)
    window = max(args.concurrency // args.threads, 1)
    parts = [ranges[i::args.threads] for i in range(args.threads)]
    with Measure() as m:
        threads = [threading.Thread(target=work, args=(batched, p, window))
                   for p in parts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return row(f"{name}-{args.threads}threads", ranges, m,
               **library_latency(reader))


def run_rangeio_batched(url, ranges, args, options):
    def work(batched, part, _window):
        for _, view in batched.read_many(part):
            assert len(view) == part[0][1]

    return run_batched_threads("rangeio-batched", url, ranges, args, options,
                               work)


def run_rangeio_batched_futures(url, ranges, args, options):
    def work(batched, part, window):
        pending = deque()
        for offset, length in part:
            if len(pending) == window:
                assert len(pending.popleft().result()) == length
            pending.append(batched.read_async(offset, length))
        for f in pending:
            f.result()

    return run_batched_threads("rangeio-batched-futures", url, ranges, args,
                               options, work)


def run_thread_pool(name, ranges, args, get):
    latencies = []

    def one(r):
        t0 = time.perf_counter()
        data = get(r)
        latencies.append((time.perf_counter() - t0) * 1e3)
        if len(data) != r[1]:
            raise OSError(f"{name}: short read of {r}: {len(data)} bytes")

    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        with Measure() as m:
            list(pool.map(one, ranges))
    return row(name, ranges, m, latencies_ms=latencies)


def run_boto3(url, ranges, args, options):
    import boto3
    import botocore.config
    bucket, _, key = url[len("s3://"):].partition("/")
    client = boto3.client(
        "s3", endpoint_url=options.get("endpoint") or os.environ.get(
            "AWS_ENDPOINT_URL"),
        region_name=options.get("region", "us-east-1"),
        config=botocore.config.Config(max_pool_connections=args.concurrency))

    def get(r):
        resp = client.get_object(Bucket=bucket, Key=key,
                                 Range=f"bytes={r[0]}-{r[0] + r[1] - 1}")
        return resp["Body"].read()

    return run_thread_pool("boto3-threadpool", ranges, args, get)


def run_urllib3(url, ranges, args, options):
    import urllib3
    pool = urllib3.PoolManager(maxsize=args.concurrency, block=True)

    def get(r):
        resp = pool.request("GET", url, headers={
            "Range": f"bytes={r[0]}-{r[0] + r[1] - 1}"})
        return resp.data

    return run_thread_pool("urllib3-threads", ranges, args, get)


def run_fsspec_http(url, ranges, args, options):
    import fsspec
    fs = fsspec.filesystem("http", skip_instance_cache=True)
    starts = [o for o, _ in ranges]
    ends = [o + n for o, n in ranges]
    with Measure() as m:
        out = fs.cat_ranges([url] * len(ranges), starts, ends,
                            batch_size=args.concurrency)
    bad = [x for x in out if not isinstance(x, bytes) or len(x) != ranges[0][1]]
    if bad:
        raise OSError(f"fsspec-http: {len(bad)} reads failed, e.g. {bad[0]!r}")
    return row("fsspec-http-cat_ranges", ranges, m)


def run_cli(url, ranges, args, options):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "url.json")
        cmd = [args.cli, "bench", "url", url, "--reads", str(len(ranges)),
               "--block", str(ranges[0][1]), "--concurrency",
               str(args.concurrency), "--json", out, "--quiet"]
        for k, v in options.items():
            cmd += ["-o", f"{k.replace('_', '-')}={v}"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(out) as f:
            rows = json.load(f)["rows"]
    r = next(x for x in rows if x["strategy"] == "rangeio")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"strategy": "c++ bench url", "reads": r["reads"],
            "elapsed_s": r["reads"] / r["reads_per_s"],
            "reads_per_s": r["reads_per_s"], "mib_per_s": r.get("mib_per_s"),
            "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"],
            "cpu_s_per_1000_reads": cpu / r["reads"] * 1000,
            "latency_cdf": None}


def strategies(url, args):
    rows = [run_rangeio, run_rangeio_batched, run_rangeio_batched_futures]
    if url.startswith("s3://"):
        rows.append(run_boto3)
    if url.startswith("http://") or url.startswith("https://"):
        rows += [run_urllib3, run_fsspec_http]
    if args.cli:
        rows.append(run_cli)
    return rows


def print_table(rows):
    print(f"{'strategy':34} {'reads/s':>9} {'MiB/s':>8} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'CPU s/1k':>9}")
    for r in rows:
        def f(v, spec):
            return format(v, spec) if v is not None else "-"
        print(f"{r['strategy']:34} {f(r['reads_per_s'], '9.0f')} "
              f"{f(r['mib_per_s'], '8.1f')} {f(r['p50_ms'], '8.2f')} "
              f"{f(r['p99_ms'], '8.2f')} {f(r['cpu_s_per_1000_reads'], '9.3f')}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="rangeio_bench.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("url", help="the object to read (s3://, http(s)://, path)")
    p.add_argument("--reads", type=int, default=2000)
    p.add_argument("--block", default="100KiB")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--threads", type=int, default=8,
                   help="Python threads of the rangeio-batched row")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every row this many times, in rotating order")
    p.add_argument("--cli", help="the rangeio CLI, for a C++ row")
    p.add_argument("-o", "--option", action="append", default=[],
                   help="key=value, reader and source options (repeatable)")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    options = dict(kv.split("=", 1) for kv in args.option)
    options = {k.replace("-", "_"): v for k, v in options.items()}
    size = rangeio.open(args.url, **options).size
    ranges = make_ranges(size, parse_bytes(args.block), args.reads)
    rows = []
    runs = strategies(args.url, args)
    for rnd in range(args.rounds):
        shift = rnd % len(runs)
        for run in runs[shift:] + runs[:shift]:
            rows.append(run(args.url, ranges, args, options))
            rows[-1]["round"] = rnd
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "python url", "config": {
                "url": args.url, "reads": args.reads, "block": args.block,
                "concurrency": args.concurrency, "threads": args.threads,
                "python": sys.version.split()[0], "cpus": os.cpu_count()},
                "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
