"""python/bench/rangeio_bench.py and rangeio_plot.py end to end (no
timings): the benchmark and its plotter live beside the package, not in it.
"""

import json
import pathlib
import subprocess
import sys

import rangeio

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import rangeio_bench  # noqa: E402
import rangeio_plot  # noqa: E402


def test_the_package_holds_the_api_only():
    package = pathlib.Path(rangeio.__file__).parent
    names = sorted(p.name for p in package.iterdir()
                   if p.suffix == ".py" or p.name.startswith("_rangeio"))
    assert [n for n in names if n.endswith(".py")] == ["__init__.py",
                                                      "fsspec.py"]
    assert not hasattr(rangeio, "testing")


def test_bench_and_plot(pattern_file, tmp_path):
    path, _ = pattern_file
    out = tmp_path / "bench.json"
    assert rangeio_bench.main([path, "--reads", "200", "--block", "4KiB",
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
    subprocess.run([sys.executable, str(BENCH / "rangeio_plot.py"), str(out), "-o",
                    str(png)], check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_reads_cli_json(tmp_path):
    doc = {"rows": [{"strategy": "rangeio", "reads_per_s": 2000.0,
                     "p50_ms": 24.5, "p99_ms": 30.1, "p999_ms": 40.0},
                    {"strategy": "direct", "reads_per_s": 1500.0,
                     "p50_ms": 25.0, "p99_ms": 50.0}]}
    src = tmp_path / "cli.json"
    src.write_text(json.dumps(doc))
    assert rangeio_plot.find_rows(doc) == doc["rows"]
    assert rangeio_plot.main([str(src), "-o", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").stat().st_size > 0
