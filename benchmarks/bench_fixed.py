#!/usr/bin/env python3
"""Fixed costs (issue 36 item 1): what a user waits for on small inputs, each against its floor.

    python benchmarks/bench_fixed.py                 # three runs of each step, min/median/max
    python benchmarks/bench_fixed.py --runs 5 --markdown

Every step runs in a fresh process (``python -m tracetriage ...``, bytecode caches as a user's
install has them) after one warm-up run, and is shown with its floor, run the same way:

- ``--version`` against ``python -c pass`` (the interpreter's own start);
- ``compare`` of two saved analysis JSON files against a ``json.load`` of the same two files;
- ``trend`` over a 1,000-case batch archive (benchmarks/bench_trend.py writes it) against reading
  its three Parquet tables with pandas;
- ``analyze`` of the real 2xH100 300 ms export (JSON, and HTML) without the cache, against one
  sqlite3 scan of its kernel and runtime tables;
- the HTML report of the same export from the analysis cache (its second run), against the same scan;
- one batch case with its reports (``batch -j 1 --no-cache``: CPU seconds of the whole process tree).

Wall seconds (min / median / max) and the CPU seconds (user + system) of the median run's process
tree. Without the real export (``../shared/samples/real/nsys/``) the analyze rows use the
eager_decode bundle.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
REAL = ROOT.parent / "shared" / "samples" / "real" / "nsys"
EXPORT = REAL / "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite"
OTHER = REAL / "nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite"
PY = sys.executable
TT = [PY, "-m", "tracetriage"]


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 5, 8, 9):
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(cmd: list[str], env: dict, runs: int) -> dict:
    timed(cmd, env)  # warm-up: bytecode and the OS page cache
    results = sorted(timed(cmd, env) for _ in range(runs))
    walls = [wall for wall, _ in results]
    return {"min": walls[0], "median": statistics.median(walls), "max": walls[-1], "cpu": results[len(results) // 2][1]}


def steps(work: Path) -> list[tuple[str, list[str], str, list[str]]]:
    """(step, its command, its floor, the floor's command): each step beside what it cannot be faster than."""
    sys.path.insert(0, str(HERE))
    import bench_trend

    export = EXPORT if EXPORT.exists() else ROOT / "samples" / "bundles" / "eager_decode" / "trace.sqlite"
    other = OTHER if OTHER.exists() else ROOT / "samples" / "bundles" / "graph_decode" / "trace.sqlite"
    saved = []
    for name, source in (("before", export), ("after", other)):
        path = work / f"{name}.json"
        path.write_bytes(subprocess.run([*TT, "analyze", str(source), "-f", "json", "--no-cache"], capture_output=True,
                                        check=True).stdout)
        saved.append(str(path))
    archive = work / "trend"
    bench_trend.write_archive(archive, 1000)
    tables = [str(archive / f"{table}.parquet") for table in ("summary", "findings", "kernels")]
    cache = work / "cache"
    scan = ("import sqlite3, sys; con = sqlite3.connect(sys.argv[1]); "
            "[con.execute(f'SELECT count(*), sum(start), sum(end), sum(correlationId) FROM {t}').fetchall() "
            "for (t,) in con.execute(\"SELECT name FROM sqlite_master WHERE name IN "
            "('CUPTI_ACTIVITY_KIND_KERNEL', 'CUPTI_ACTIVITY_KIND_RUNTIME')\")]")
    floor_scan = [PY, "-c", scan, str(export)]
    html = str(work / "report.html")
    return [
        ("`tracetriage --version`", [*TT, "--version"], "`python -c pass`", [PY, "-c", "pass"]),
        ("`compare` of two saved analysis.json", [*TT, "compare", *saved, "--no-cache"],
         "`json.load` of the two files", [PY, "-c", "import json, sys; [json.load(open(p)) for p in sys.argv[1:]]", *saved]),
        ("`trend` over 1,000 batch rows (-f json)", [*TT, "trend", str(archive), "-f", "json", "--no-cache"],
         "pandas reads the 3 Parquet tables", [PY, "-c", "import pandas, sys; [pandas.read_parquet(p) for p in sys.argv[1:]]",
                                               *tables]),
        (f"`analyze` {export.name} -f json, no cache", [*TT, "analyze", str(export), "-f", "json", "--no-cache"],
         "sqlite3 scans KERNEL + RUNTIME", floor_scan),
        (f"`analyze` {export.name} -o report.html, no cache", [*TT, "analyze", str(export), "-o", html, "--no-cache"],
         "sqlite3 scans KERNEL + RUNTIME", floor_scan),
        ("HTML report of the cached analysis", [*TT, "analyze", str(export), "-o", html, "--cache-dir", str(cache)],
         "sqlite3 scans KERNEL + RUNTIME", floor_scan),
        ("`batch` of one case with reports, -j 1, no cache",
         [*TT, "batch", str(ROOT / "samples" / "bundles" / "eager_decode"), "-o", str(work / "batch"), "-j", "1",
          "--no-cache", "--no-progress", "--force"],
         "`python -c pass`", [PY, "-c", "pass"]),
    ]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--markdown", action="store_true", help="print the table as benchmarks/README.md has it")
    args = ap.parse_args(argv)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for step, cmd, floor, floor_cmd in steps(Path(tmp)):
            got, base = measure(cmd, env, args.runs), measure(floor_cmd, env, args.runs)
            rows.append((step, got, floor, base))
            if not args.markdown:
                print(f"{step:<72} {got['min']:.2f} / {got['median']:.2f} / {got['max']:.2f} s  cpu {got['cpu']:.2f} s | "
                      f"floor {floor}: {base['min']:.2f} / {base['median']:.2f} / {base['max']:.2f} s", flush=True)
    if args.markdown:
        print("| step | wall s (min / median / max) | CPU s | floor | floor wall s (min / median / max) |")
        print("|---|---:|---:|---|---:|")
        for step, got, floor, base in rows:
            print(f"| {step} | {got['min']:.2f} / {got['median']:.2f} / {got['max']:.2f} | {got['cpu']:.2f} | {floor} | "
                  f"{base['min']:.2f} / {base['median']:.2f} / {base['max']:.2f} |")
    print(f"load average at the end: {' '.join(f'{load:.1f}' for load in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
