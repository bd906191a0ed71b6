"""python/bench/rangeio_plot.py BENCH.json -o FILE.png: latency CDFs, reads/s.

Reads any `rangeio-bench ... --json` output or `rangeio_bench.py
--json`: a "rows" list (or rows nested anywhere) of objects with
"strategy" and "reads_per_s". Each row's latency CDF comes from its
"latency_cdf" [[ms, quantile], ...] when present, else from whichever of
p50_ms, p90_ms, p99_ms, p999_ms it has.
"""

import argparse
import json
import sys

_PERCENTILE_KEYS = (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99),
                    ("p999_ms", 0.999))


def find_rows(doc):
    """Every object holding "strategy" and "reads_per_s", in order."""
    if isinstance(doc, dict):
        if "strategy" in doc and "reads_per_s" in doc:
            return [doc]
        return [r for v in doc.values() for r in find_rows(v)]
    if isinstance(doc, list):
        return [r for v in doc for r in find_rows(v)]
    return []


def cdf_points(row):
    if row.get("latency_cdf"):
        return [(ms, q) for ms, q in row["latency_cdf"] if ms is not None]
    return [(row[k], q) for k, q in _PERCENTILE_KEYS if row.get(k) is not None]


def plot(rows, out, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cdf_ax, bar_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in rows:
        pts = cdf_points(r)
        if not pts:
            continue
        ms, q = zip(*pts)
        if r.get("latency_cdf"):
            cdf_ax.step(ms, q, where="post", marker=".", label=r["strategy"])
        else:  # a few percentiles only: points joined by a dashed line
            cdf_ax.plot(ms, q, "o--", label=r["strategy"] + " (percentiles)")
    cdf_ax.set_xscale("log")
    cdf_ax.set_xlabel("latency of one read (ms, log)")
    cdf_ax.set_ylabel("fraction of reads")
    cdf_ax.set_title("latency CDF")
    cdf_ax.grid(True, which="both", alpha=0.3)
    cdf_ax.legend(fontsize="small")

    names = [r["strategy"] for r in rows]
    rates = [r["reads_per_s"] for r in rows]
    bars = bar_ax.barh(range(len(rows)), rates)
    bar_ax.set_yticks(range(len(rows)), names)
    bar_ax.invert_yaxis()
    bar_ax.bar_label(bars, fmt="%.0f", fontsize="small")
    bar_ax.set_xlabel("reads/s")
    bar_ax.set_title("throughput")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None):
    p = argparse.ArgumentParser(prog="rangeio_plot.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("bench_json")
    p.add_argument("-o", "--output", required=True, help="the image (.png)")
    p.add_argument("--title", help="default: the JSON file's name")
    p.add_argument("--round", type=int,
                   help="rows of this round only (rangeio_bench.py --rounds); "
                        "default: the last round")
    args = p.parse_args(argv)
    with open(args.bench_json) as f:
        rows = find_rows(json.load(f))
    rounds = [r["round"] for r in rows if "round" in r]
    if rounds:
        pick = max(rounds) if args.round is None else args.round
        rows = [r for r in rows if r.get("round", pick) == pick]
    if not rows:
        print(f"{args.bench_json}: no rows with strategy and reads_per_s",
              file=sys.stderr)
        return 1
    plot(rows, args.output, args.title or args.bench_json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
