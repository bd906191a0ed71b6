"""python3 -m rangeio.bench and rangeio.plot end to end (no timings)."""

import json
import subprocess
import sys

import rangeio.bench
import rangeio.plot


def test_bench_and_plot(pattern_file, tmp_path):
    path, _ = pattern_file
    out = tmp_path / "bench.json"
    assert rangeio.bench.main([path, "--reads", "200", "--block", "4KiB",
                               "--concurrency", "8", "--threads", "4",
                               "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    names = [r["strategy"] for r in doc["rows"]]
    assert names == ["rangeio", "rangeio-batched-4threads",
                     "rangeio-batched-futures-4threads"]
    for r in doc["rows"]:
        assert r["reads"] == 200 and r["reads_per_s"] > 0
        assert r["cpu_s_per_1000_reads"] >= 0 and r["latency_cdf"]
    png = tmp_path / "bench.png"
    subprocess.run([sys.executable, "-m", "rangeio.plot", str(out), "-o",
                    str(png)], check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_reads_cli_json(tmp_path):
    doc = {"rows": [{"strategy": "rangeio", "reads_per_s": 2000.0,
                     "p50_ms": 24.5, "p99_ms": 30.1, "p999_ms": 40.0},
                    {"strategy": "direct", "reads_per_s": 1500.0,
                     "p50_ms": 25.0, "p99_ms": 50.0}]}
    src = tmp_path / "cli.json"
    src.write_text(json.dumps(doc))
    assert rangeio.plot.find_rows(doc) == doc["rows"]
    assert rangeio.plot.main([str(src), "-o", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").stat().st_size > 0
