#!/usr/bin/env python3
"""Fixed costs (issue 36 item 1): what a user waits for on small inputs, each against its floor.

    python benchmarks/bench_fixed.py                 # three runs of each step, min/median/max
    python benchmarks/bench_fixed.py --runs 5 --markdown

Every step runs in a fresh process (``python -m tracetriage ...``, bytecode caches as a user's
install has them) after one warm-up run, and is shown with its floor, run the same way:

- ``--version`` against ``python -c pass`` (the interpreter's own start);
- ``compare`` of two saved analysis JSON files against a ``json.load`` of the same two files;
- ``trend`` over a 1,000-case batch archive (benchmarks/bench_trend.py writes it) against reading
  its three Parquet tables with pyarrow, as trend reads them (pandas until stop 50);
- ``analyze`` of the real 2xH100 300 ms export (JSON, and HTML) without the cache, against one
  sqlite3 scan of its kernel and runtime tables;
- the HTML report of the same export from the analysis cache (its second run), against the same scan;
- one batch case with its reports (``batch -j 1 --no-cache``: CPU seconds of the whole process tree,
  interpreter start and imports included), and the CPU a case costs inside a batch: the median of the
  records' ``cpu_seconds`` (the case's worker, its reports included) over 8 cases, with ``--reports all``
  against ``--reports none``.

Wall seconds and CPU seconds (user + system of the process tree), each min / median / max over the
runs, beside issue 36's target for the step and whether the median meets it (wall, and CPU: on a
shared machine the CPU seconds are the steadier figure). The load average is printed before and
after. Without the real export (``samples/real/nsys/`` or ``../shared/samples/real/nsys/``) the analyze rows use the
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
# the real exports: the repository's own copy, else the shared tree beside the checkout (or above a worktree)
REAL = next((folder for folder in (ROOT / "samples" / "real" / "nsys", ROOT.parent / "shared" / "samples" / "real" / "nsys",
                                   ROOT.parents[1] / "shared" / "samples" / "real" / "nsys")
             if (folder / "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite").exists()),
            ROOT / "samples" / "real" / "nsys")
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
    timed(cmd, env)  # warm-up: bytecode, compiled templates, the cache's entry, the OS page cache
    results = [timed(cmd, env) for _ in range(runs)]
    walls, cpus = sorted(wall for wall, _ in results), sorted(cpu for _, cpu in results)
    return {"wall": (walls[0], statistics.median(walls), walls[-1]), "cpu": (cpus[0], statistics.median(cpus), cpus[-1])}


def batch_case_cpu(work: Path, env: dict, runs: int) -> tuple[dict, dict]:
    """(with reports, without): min / median / max over ``runs`` batches of the median per-case CPU seconds
    (records' ``cpu_seconds``) of 8 copies of the eager_decode bundle, one local worker."""
    import glob
    import json
    import shutil

    nights = work / "nights"
    for k in range(8):
        shutil.copytree(ROOT / "samples" / "bundles" / "eager_decode", nights / f"night{k}", dirs_exist_ok=True)
    out = {}
    for mode in ("all", "none"):
        medians = []
        for _ in range(runs):
            outdir = work / f"batch-{mode}"
            subprocess.run([*TT, "batch", str(nights), "-o", str(outdir), "-j", "1", "--no-cache", "--no-progress", "--force",
                            "--reports", mode], capture_output=True, env=env, check=True)
            records = glob.glob(str(outdir / "cases" / "*" / "record.json"))
            cpus = [json.loads(Path(path).read_text())["cpu_seconds"] for path in records]
            medians.append(statistics.median(cpus))
        medians.sort()
        out[mode] = {"cpu": (medians[0], statistics.median(medians), medians[-1])}
    return out["all"], out["none"]


def steps(work: Path) -> list[tuple[str, list[str], str, list[str], float | None]]:
    """(step, its command, its floor, the floor's command, issue 36's target in seconds): each step beside
    what it cannot be faster than."""
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
        ("`tracetriage --version`", [*TT, "--version"], "`python -c pass`", [PY, "-c", "pass"], 0.1),
        ("`compare` of two saved analysis.json", [*TT, "compare", *saved, "--no-cache"],
         "`json.load` of the two files", [PY, "-c", "import json, sys; [json.load(open(p)) for p in sys.argv[1:]]", *saved],
         0.5),
        ("`trend` over 1,000 batch rows (-f json)", [*TT, "trend", str(archive), "-f", "json", "--no-cache"],
         "pyarrow reads the 3 Parquet tables",
         [PY, "-c", "import pyarrow.parquet as pq, sys; [pq.ParquetFile(p).read() for p in sys.argv[1:]]", *tables], 1.0),
        (f"`analyze` {export.name} -f json, no cache", [*TT, "analyze", str(export), "-f", "json", "--no-cache"],
         "sqlite3 scans KERNEL + RUNTIME", floor_scan, 1.0),
        (f"`analyze` {export.name} -o report.html, no cache", [*TT, "analyze", str(export), "-o", html, "--no-cache"],
         "sqlite3 scans KERNEL + RUNTIME", floor_scan, 1.5),
        ("HTML report of the cached analysis", [*TT, "analyze", str(export), "-o", html, "--cache-dir", str(cache)],
         "sqlite3 scans KERNEL + RUNTIME", floor_scan, 0.5),
        ("`batch` of one case with reports, -j 1, no cache",
         [*TT, "batch", str(ROOT / "samples" / "bundles" / "eager_decode"), "-o", str(work / "batch"), "-j", "1",
          "--no-cache", "--no-progress", "--force"],
         "`python -c pass`", [PY, "-c", "pass"], None),  # issue 36's 0.2 CPU-s is a case's: the row below
    ]


def _span(values: tuple[float, float, float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def _met(got: dict, target: float | None) -> str:
    if target is None:
        return "-"
    cpu = got["cpu"][1] <= target
    if "wall" not in got:  # a case inside a batch: its worker's CPU seconds only
        return "yes" if cpu else "no"
    wall = got["wall"][1] <= target
    return {(True, True): "yes", (False, True): "CPU yes, wall no", (True, False): "wall yes, CPU no"}.get((wall, cpu), "no")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--markdown", action="store_true", help="print the table as benchmarks/README.md has it")
    ap.add_argument("--only", metavar="TEXT", help="only the steps whose name holds TEXT (e.g. trend)")
    args = ap.parse_args(argv)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    print(f"load average at the start: {' '.join(f'{load:.1f}' for load in os.getloadavg())} on {os.cpu_count()} cores",
          flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for step, cmd, floor, floor_cmd, target in steps(Path(tmp)):
            if args.only and args.only not in step:
                continue
            got, base = measure(cmd, env, args.runs), measure(floor_cmd, env, args.runs)
            rows.append((step, got, floor, base, target))
            if not args.markdown:
                print(f"{step:<72} wall {_span(got['wall'])} s  cpu {_span(got['cpu'])} s  target {target} s: "
                      f"{_met(got, target)} | floor {floor}: wall {_span(base['wall'])} s cpu {_span(base['cpu'])} s",
                      flush=True)
        cases = "a case inside a batch, `--reports all` (median of 8 cases' cpu_seconds)"
        with_reports, without = batch_case_cpu(Path(tmp), env, args.runs) if not args.only or args.only in cases else ({}, {})
        if with_reports:
            rows.append((cases, with_reports, "the same, `--reports none`", without, 0.2))
        if with_reports and not args.markdown:
            print(f"{rows[-1][0]:<72} cpu {_span(with_reports['cpu'])} s  target 0.2 s: {_met(with_reports, 0.2)} | "
                  f"floor {rows[-1][2]}: cpu {_span(without['cpu'])} s", flush=True)
    if args.markdown:
        print("| step | wall s (min / median / max) | CPU s (min / median / max) | target | met | floor | floor wall s "
              "| floor CPU s |")
        print("|---|---:|---:|---:|---|---|---:|---:|")
        for step, got, floor, base, target in rows:
            wall = _span(got["wall"]) if "wall" in got else "-"
            base_wall = _span(base["wall"]) if "wall" in base else "-"
            print(f"| {step} | {wall} | {_span(got['cpu'])} | {target} s | {_met(got, target)} | {floor} | {base_wall} | "
                  f"{_span(base['cpu'])} |")
    print(f"load average at the end: {' '.join(f'{load:.1f}' for load in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
