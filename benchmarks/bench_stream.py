#!/usr/bin/env python3
"""The streamed timeline (issue 36 item 3, docs/large_captures.md) against its floor and the whole-table path.

    python benchmarks/bench_stream.py /work/big/decode_10000000.sqlite            # scan, whole, streamed
    python benchmarks/bench_stream.py --modes scan,stream FILE       # the window of an earlier whole-table run
    python benchmarks/bench_stream.py --modes scan,stream --window all FILE   # no whole-table run: the whole capture
    python benchmarks/bench_stream.py --kernels 30000000 --shape decode --out /work/big   # generate, then measure

Each run of each mode is a fresh process (its peak RSS is its own ``ru_maxrss``):
- ``scan``: bench.py's floor, sqlite3 reading count and sums of the kernel and runtime tables once;
- ``whole``: the whole-table model and what analyze_trace computes from it for the timelines: ``nsys.parse``,
  the steps and window (phases), every device's ``timeline.device_timeline`` with its process's sync ends and
  long steps, ``kernels.kernel_summary`` and ``kernel_duration_median``; it writes the window and long steps
  it found (the streamed path's input) and the numbers;
- ``stream``: ``stream_timeline.analyze_streamed`` on that window and those steps (from the whole-table run, kept
  beside the export; ``--window all``: the whole capture, no long steps);
- ``full``: ``analyze_streamed(path)``: the steps, the window and the long steps found from the stream too
  (analyzers/stream_steps.py), nothing from the whole-table model.
The numbers (the window, each process's long steps, the timelines, the kernel summary) of the first whole run and
of every streamed run are compared: equal, or the script fails.
Prints min / median / max of wall s, CPU s and peak RSS MB per mode, and the ratio to the scan.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import _user_env, measure  # noqa: E402  (the scan child: the existing floor)
from shapes import build  # noqa: E402

CHILD = r"""
import dataclasses, json, resource, sys, time
import numpy as np
from tracetriage.memory import tune_allocator
tune_allocator()  # as the CLI does
mode, path, side = sys.argv[1], sys.argv[2], sys.argv[3]
t = time.perf_counter()
if mode == "whole":
    from tracetriage.analyzers import kernels as kern, stream_timeline as stl
    from tracetriage.parsers import nsys
    trace = nsys.parse(path)
    parsed = time.perf_counter() - t
    lo, hi, spans = stl.whole_table_window(trace)
    stepped = time.perf_counter() - t
    found, min_gap = stl.whole_table_timelines(trace, lo, hi, spans)
    timelines = {f"{pid}:{ordinal}": dataclasses.asdict(v) for (pid, ordinal), v in found.items()}
    summary = [kern.kernel_summary(trace, lo, hi), kern.kernel_duration_median(trace, lo, hi)]
    split = {"parse_s": round(parsed, 2), "steps_window_s": round(stepped - parsed, 2)}
    np.savez(side + ".args.npz", lo=lo, hi=hi, min_gap=min_gap, pids=np.array(sorted(spans), np.int64),
             **{f"s{p}": spans[p][0] for p in spans}, **{f"e{p}": spans[p][1] for p in spans})
elif mode == "full":
    from tracetriage.analyzers import analysis, stream_timeline as stl
    from tracetriage.case import open_export
    with open_export(path) as db:
        got = stl.analyze_streamed(db, sync_slack_ns=analysis.SYNC_SLACK_NS)
    lo, hi, spans = got.window.start_ns, got.window.end_ns, got.window.spans
    timelines = {f"{p}:{o}": dataclasses.asdict(v) for (p, o), v in got.timelines.items()}
    summary = [got.kernels, got.kernel_median_ns]
    split = {"chunks": got.chunks, "kernels_in_window": got.kernels_in_window, "passes": "+".join(got.passes),
             "source": got.window.source}
else:
    from tracetriage.analyzers import analysis, stream_timeline as stl
    try:
        a = np.load(side + ".args.npz")
        lo, hi, min_gap = int(a["lo"]), int(a["hi"]), int(a["min_gap"])
        spans = {int(p): (a[f"s{p}"], a[f"e{p}"]) for p in a["pids"].tolist()}
    except FileNotFoundError:  # --window all: the whole capture, no long steps
        import sqlite3
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        lo, hi = con.execute("SELECT min(start), max(end) + 1 FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        min_gap, spans = 1, {}
    from tracetriage.case import open_export
    with open_export(path) as db:
        got = stl.analyze_streamed(db, lo, hi, spans, analysis.SYNC_SLACK_NS, min_gap)
    timelines = {f"{p}:{o}": dataclasses.asdict(v) for (p, o), v in got.timelines.items()}
    summary = [got.kernels, got.kernel_median_ns]
    split = {"chunks": got.chunks, "kernels_in_window": got.kernels_in_window}
elapsed = time.perf_counter() - t
use = resource.getrusage(resource.RUSAGE_SELF)
window = {"lo": int(lo), "hi": int(hi), "spans": {str(p): [np.asarray(v).tolist() for v in spans[p]] for p in sorted(spans)}}
with open(side + f".{mode}.json", "w") as fh:
    json.dump({"window": window, "timelines": timelines, "summary": summary}, fh,
              default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v))
print(json.dumps({"mode": mode, "seconds": round(elapsed, 2), "peak_rss_mb": round(use.ru_maxrss / 1024, 1),
                  "cpu_s": round(use.ru_utime + use.ru_stime, 2), **split}))
"""


SCAN = r"""
import json, resource, sqlite3, sys, time
t = time.perf_counter()
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"):
    con.execute(f"SELECT count(*), total(start), total(end), total(correlationId) FROM {table}").fetchall()
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"mode": "scan_total", "seconds": round(time.perf_counter() - t, 2),
                  "peak_rss_mb": round(use.ru_maxrss / 1024, 1),
                  "cpu_s": round(use.ru_utime + use.ru_stime, 2)}))
"""


def run_child(mode: str, path: Path, side: Path) -> dict:
    if mode == "scan":
        try:
            return measure("sqlite3", path)
        except subprocess.CalledProcessError:  # sum() overflows int64 past ~10^8 timestamps: the same scan with total()
            out = subprocess.run([sys.executable, "-c", SCAN, str(path)], capture_output=True, text=True, check=True)
            return json.loads(out.stdout.strip().splitlines()[-1])
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), str(side)], capture_output=True, text=True,
                         env=_user_env())
    if out.returncode:
        raise SystemExit(f"bench_stream: {mode} on {path} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="scan,whole,stream,full")
    ap.add_argument("--kernels", type=int, help="generate an export of this many kernels (benchmarks/shapes.py)")
    ap.add_argument("--shape", default="decode")
    ap.add_argument("--window", choices=["whole", "all"], default="whole",
                    help="the streamed run's window and long steps: from the whole-table run (kept beside the file), "
                         "or the whole capture without long steps")
    ap.add_argument("--out", type=Path, default=Path("/work/big"), help="where generated exports are kept")
    args = ap.parse_args(argv)
    files = list(args.files)
    if args.kernels:
        path = args.out / f"{args.shape}_{args.kernels}.sqlite"
        build(path, args.kernels, shape=args.shape)
        files.append(path)
    modes = args.modes.split(",")
    for path in files:
        results, reference = _measure(path, args.out / f".bench_stream_{path.stem}", modes, args.runs, args.window)
        _summary(path, results, reference, args.runs)
    return 0


def _measure(path: Path, side: Path, modes: list[str], runs: int, window: str) -> tuple[dict, dict | None]:
    """Each mode's runs on one export, every streamed run's numbers compared with the whole-table run's
    (this one's, else an earlier one's kept beside the export)."""
    if window == "all":
        Path(str(side) + ".args.npz").unlink(missing_ok=True)
    elif "stream" in modes and "whole" not in modes and not Path(str(side) + ".args.npz").exists():
        raise SystemExit(f"bench_stream: no window for {path}: run the whole mode once, or pass --window all")
    results: dict[str, list[dict]] = {m: [] for m in modes}
    kept = Path(f"{side}.whole.json")
    reference = json.loads(kept.read_text()) if "whole" not in modes and kept.exists() and window == "whole" else None
    for run in range(runs):
        for mode in modes:
            r = run_child(mode, path, side)
            print(f"{path.name} run {run + 1} {json.dumps(r)}", flush=True)
            results[mode].append(r)
            if mode == "scan":
                continue
            numbers = json.loads(Path(f"{side}.{mode}.json").read_text())
            if mode == "whole" and reference is None:
                reference = numbers
            elif reference is not None and numbers != reference:
                raise SystemExit(f"bench_stream: {mode} run {run + 1} on {path}: numbers differ from the whole-table path")
    return results, reference


def _summary(path: Path, results: dict, reference: dict | None, runs: int) -> None:
    scan = statistics.median(r["seconds"] for r in results["scan"]) if "scan" in results else None
    streamed = reference is not None and ("stream" in results or "full" in results)
    print(f"\n{path.name} ({path.stat().st_size / 1e9:.2f} GB), {runs} runs, min / median / max"
          + ("; streamed numbers equal to the whole-table path" if streamed else ""))
    for mode, rs in results.items():
        wall = [r["seconds"] for r in rs]
        ratio = f"  {spread([w / scan for w in wall])}x the scan's median" if scan and mode != "scan" else ""
        print(f"  {mode:<7} wall {spread(wall)} s  cpu {spread([r['cpu_s'] for r in rs])} s"
              f"  peak {spread([r['peak_rss_mb'] for r in rs])} MB{ratio}")


if __name__ == "__main__":
    raise SystemExit(main())
