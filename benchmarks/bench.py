#!/usr/bin/env python3
"""Parse + analyze time and peak memory on large traces in the real nsys schema.

    python benchmarks/bench.py                      # every shape, 1M kernels
    python benchmarks/bench.py --kernels 10000000 --shape late39
    python benchmarks/bench.py --devices 4 --streams 2 --sync-every 100 --late-rows 500   # a shape of your own
    python benchmarks/bench.py --startup
    python benchmarks/bench.py --batch --jobs 1 --jobs 2
    python benchmarks/bench.py --kineto --kernels 1000000
    python benchmarks/bench.py --profile --kernels 10000000 --shape decode
    python benchmarks/bench.py --profile-html --kernels 10000000 --shape late39

Generates (once, cached under benchmarks/out/; the generator is benchmarks/shapes.py) exports
in the nsys schema with N kernels and a stream sync every ~500 kernels, in five shapes
(``Shape``, whose fields are also options): ``decode`` (one device, one stream, NVTX step
ranges, a launch call per kernel), ``sync2dev`` (two devices alternating, four streams, no
NVTX: steps inferred from the syncs), ``late39`` (sync2dev with ~39 runtime rows in 10M
written out of start order, as multi-threaded exports have them), ``graph`` (decode's device
in piecewise CUDA graphs: one ``cudaGraphLaunch`` per 100 kernels, graph-node kernel rows,
steps from the syncs) and ``tp8`` (8 devices x 2 streams, NVTX steps, an all-reduce every 16th
kernel of a device). For each it runs, each in a fresh process:
(1) the baseline — sqlite3 scanning the kernel and runtime tables once (what any reader
must at least pay); (2) tracetriage's parser; (3) parser + all analyzers (no cache);
(4) the CLI's second analysis of the same file from the analysis cache, as JSON and as
HTML. Reports wall time, peak RSS (ru_maxrss), the ratio to the scan, and the cache's
size on disk.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from shapes import SHAPES, Shape, build  # noqa: E402  (the generated exports; bench.build as before)

__all__ = ["SHAPES", "Shape", "build"]


CHILD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
if mode != "sqlite3":
    from tracetriage.memory import tune_allocator
    tune_allocator()  # as the CLI does
t = time.perf_counter()
if mode == "sqlite3":
    import sqlite3
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"):
        con.execute(f"SELECT count(*), sum(start), sum(end), sum(correlationId) FROM {table}").fetchall()
elif mode == "json":  # what a plain JSON reader pays: the whole document in memory
    import json
    with open(path, "rb") as fh:
        len(json.load(fh)["traceEvents"])
elif mode == "kparse":
    from tracetriage.parsers import kineto
    kineto.parse(path)
elif mode == "parse":
    from tracetriage.parsers import nsys
    nsys.parse(path)
elif mode == "profile":  # where the first read's time goes (main thread; reader and timeline threads show as waits)
    import cProfile, pstats
    from tracetriage import analyze, open_case
    prof = cProfile.Profile()
    prof.enable()
    analyze(open_case([path]))
    prof.disable()
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
elif mode == "memory":  # where the first read's peak is: RSS sampled every 20 ms with each thread's frames
    import os, threading
    from tracetriage import analyze, open_case
    samples, done = [], threading.Event()

    def frames():
        here = threading.get_ident()
        for ident, frame in sys._current_frames().items():
            names = []
            while frame is not None and ident != here and len(names) < 2:
                if any(part in frame.f_code.co_filename for part in ("/analyzers/", "/parsers/", "/tracetriage/")):
                    names.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}")
                frame = frame.f_back
            if names:
                yield " < ".join(names)

    def sample():
        while not done.wait(0.02):
            with open("/proc/self/statm") as fh:
                samples.append((int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"), list(frames())))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    analyze(open_case([path]))
    done.set()
    sampler.join()
    top = {}
    for rss, where in samples:
        for name in where:
            top[name] = max(top.get(name, 0), rss)
    for name, rss in sorted(top.items(), key=lambda item: -item[1])[:15]:
        print(f"{rss / 1e6:8.0f} MB  {name}", file=sys.stderr)
elif mode == "cached":
    import os
    t = time.perf_counter()  # what the CLI runs, end to end, its imports included
    from tracetriage import Runtime, analyze
    from tracetriage.reports import render
    runtime = Runtime.create(sys.argv[3])
    with open(os.devnull, "w", encoding="utf-8") as sink:
        sink.write(render(analyze(path, runtime=runtime), sys.argv[4], runtime.cache))
    hits = dict(runtime.cache.hits, drew_charts="matplotlib" in sys.modules)
elif mode == "profile_cached":  # where the cached HTML's time goes (imports included)
    import cProfile, os, pstats
    prof = cProfile.Profile()
    prof.enable()
    from tracetriage.cli import main
    main(["analyze", path, "-f", "html", "-o", os.devnull, "--cache-dir", sys.argv[3]])
    prof.disable()
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
else:
    from tracetriage import analyze, open_case
    analyze(open_case([path]))
elapsed = time.perf_counter() - t
use = resource.getrusage(resource.RUSAGE_SELF)  # CPU seconds: what the wall time would be on an idle machine, single-threaded
print(json.dumps({"mode": mode, "seconds": round(elapsed, 2), "peak_rss_mb": round(use.ru_maxrss / 1024, 1),
                  "cpu_s": round(use.ru_utime + use.ru_stime, 2), "hits": globals().get("hits")}))
"""


def _user_env() -> dict:
    """The environment with modules loaded from bytecode caches, as a user's install has them
    (a session that sets PYTHONDONTWRITEBYTECODE compiles every changed module on every start)."""
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(mode: str, path: Path, *extra: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), *extra], capture_output=True, text=True,
                         check=True, env=_user_env())
    return json.loads(out.stdout.strip().splitlines()[-1])


def build_kineto(path: Path, n_kernels: int) -> None:
    """A PyTorch-profiler-shaped trace: per kernel one aten op (with input dims), its
    cudaLaunchKernel and the kernel, one ProfilerStep range per 500 kernels."""
    if path.exists():
        return
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], '
                '"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [\n')
        t, sep = 1000, ""
        for i in range(n_kernels):
            if i % 500 == 0:
                f.write(sep + json.dumps({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i // 500}",
                                          "pid": 1, "tid": 1, "ts": t, "dur": 500 * 10}))
                sep = ",\n"
            f.write(sep + json.dumps({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t,
                                      "dur": 3, "args": {"Input Dims": [[64, 64], [64, 64]], "External id": i}}))
            f.write(",\n" + json.dumps({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                                         "tid": 1, "ts": t + 1, "dur": 2, "args": {"correlation": i, "External id": i}}))
            f.write(",\n" + json.dumps({"ph": "X", "cat": "kernel", "name": f"sm90_gemm_{i % 13}", "pid": 0, "tid": 7,
                                         "ts": t + 5, "dur": 4.5, "args": {"device": 0, "stream": 7, "correlation": i,
                                                                            "grid": [132, 1, 1], "block": [384, 1, 1]}}))
            t += 10
        f.write("]}\n")
    tmp.rename(path)


def bench_kineto(n_kernels: int) -> None:
    """Kineto JSON: a plain json.load of the file (baseline) vs tracetriage's parser and analysis."""
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    path = out / f"kineto_{n_kernels}.json"
    build_kineto(path, n_kernels)
    print(f"trace: {path.name} ({path.stat().st_size / 1e6:,.0f} MB, {n_kernels:,} kernels, 3 events each)")
    res = {mode: measure(mode, path) for mode in ("json", "kparse", "analyze")}
    base = res["json"]
    for mode, r in res.items():
        ratio = f"{r['seconds'] / base['seconds']:5.1f}x json.load" if mode != "json" else "      baseline"
        print(f"  {mode:<8} {r['seconds']:>7.2f} s  {ratio}   peak RSS {r['peak_rss_mb']:>7.1f} MB")


def bench_startup() -> None:
    """Start-up: ``tracetriage --version`` and a ~1 MB real export analyzed to JSON (best of 5)."""
    real = ROOT.parent / "shared" / "samples" / "real" / "nsys" / "nsys2024.6_1xH200_nvfuser_matmul.sqlite"
    small = real if real.exists() else ROOT / "samples" / "bundles" / "healthy" / "trace.sqlite"
    import os

    # As installed for a user: modules load from their bytecode caches (a session that sets
    # PYTHONDONTWRITEBYTECODE would recompile every module of the package on every start).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for label, cmd in (("--version", ["--version"]),
                       (f"analyze {small.name} -f json", ["analyze", str(small), "-f", "json", "--no-cache"])):
        _timed([sys.executable, "-m", "tracetriage", *cmd], env)  # writes the caches once
        best = min(_timed([sys.executable, "-m", "tracetriage", *cmd], env) for _ in range(5))
        print(f"startup  {label:<58} {best:.2f} s")


def _timed(cmd, env=None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=False, env=env)
    return time.perf_counter() - t


def bench_batch(jobs: int) -> float:
    """Cases per minute: `tracetriage batch` over the sample bundles (and the real nsys
    exports when ../shared is present), every case re-analyzed (--force)."""
    import shutil
    import tempfile

    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    inputs = [str(ROOT / "samples" / "bundles")]
    real = ROOT.parent / "shared" / "samples" / "real" / "nsys"
    if real.exists():
        inputs.append(str(real))
    out = Path(tempfile.mkdtemp(prefix="tt-bench-"))
    try:
        t = time.perf_counter()
        res = run_batch(inputs, str(out), runtime=Runtime(jobs=jobs), force=True, progress=False)
        dt = time.perf_counter() - t
    finally:
        shutil.rmtree(out, ignore_errors=True)
    rate = 60 * len(res.records) / dt
    print(f"batch    {len(res.records)} cases ({res.failed} failed) with {jobs} workers in {dt:.1f} s = {rate:.0f} cases/minute")
    return rate


PERFETTO_CHILD = r"""
import json, os, resource, sys, time
from tracetriage.memory import tune_allocator
tune_allocator()  # as the CLI does
path, out, window = sys.argv[1:4]
t0 = time.perf_counter()
from tracetriage import analyze, open_case
from tracetriage.cli import parse_perfetto_window
from tracetriage.analyzers.tracks import build_tracks
from tracetriage.reports.perfetto import export
case = open_case([path])
analysis = analyze(case)
t1 = time.perf_counter()
peak_analysis = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
u0 = resource.getrusage(resource.RUSAGE_SELF)
mode, n = parse_perfetto_window(window)
summary = export(build_tracks(case, analysis, mode=mode, worst_steps=n), analysis, out)
t2 = time.perf_counter()
u1 = resource.getrusage(resource.RUSAGE_SELF)
t = summary["traces"][0]
print(json.dumps({"window": window, "analyze_s": round(t1 - t0, 2), "export_s": round(t2 - t1, 2),
                  "export_cpu_s": round(u1.ru_utime + u1.ru_stime - u0.ru_utime - u0.ru_stime, 2),
                  "peak_analysis_mb": round(peak_analysis, 1),
                  "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "file_mb": round(os.path.getsize(out) / 1e6, 1), "gpu_ops": t["gpu_ops"], "api_calls": t["api_calls"],
                  "left_out_gpu_ops": t["left_out"]["gpu_ops"]}))
"""


def bench_perfetto(n_kernels: int, shape: str, windows: list[str]) -> None:
    """``--format perfetto``: the export's own time and the process's peak RSS, per window mode, in
    fresh processes (no cache: the analysis before it is the first read's), next to the analysis."""
    import os
    import tempfile

    out = HERE / "out"
    out.mkdir(exist_ok=True)
    path = out / f"{shape}_{n_kernels}.sqlite"
    build(path, n_kernels, shape=SHAPES[shape])
    print(f"trace: {path.name} ({path.stat().st_size / 1e6:,.0f} MB, {n_kernels:,} kernels + launches)")
    for window in windows:
        fd, target = tempfile.mkstemp(suffix=".pftrace", prefix="tt-bench-", dir=out)
        os.close(fd)
        try:
            proc = subprocess.run([sys.executable, "-c", PERFETTO_CHILD, str(path), target, window],
                                  capture_output=True, text=True, check=True)
        finally:
            os.unlink(target)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"  perfetto {r['window']:<14} export {r['export_s']:>7.2f} s, {r['export_cpu_s']:.2f} s CPU "
              f"(analysis before it {r['analyze_s']:.2f} s)  "
              f"peak RSS {r['peak_mb']:>7.1f} MB (analysis alone {r['peak_analysis_mb']:.1f} MB)  file {r['file_mb']:,.0f} MB, "
              f"{r['gpu_ops']:,} GPU ops + {r['api_calls']:,} calls exported, {r['left_out_gpu_ops']:,} GPU ops left out")


def _cached_runs(path: Path, cache_dir: str, tries: int = 3) -> tuple[dict, dict]:
    """The CLI's JSON and HTML reports of a file whose analysis is in the cache. The first run
    fills the cache (and the bytecode caches); a measured run that was not served by the cache
    (code changed under the run: keys follow the source) is measured again after a re-fill."""
    for attempt in range(tries):
        measure("cached", path, cache_dir, "html")
        runs = measure("cached", path, cache_dir, "json"), measure("cached", path, cache_dir, "html")
        if all((r.get("hits") or {}).get("metrics") for r in runs) and not runs[1]["hits"]["drew_charts"]:
            return runs
        print(f"  (attempt {attempt + 1}: a measured run missed the cache (metrics or charts): the source changed "
              "under it; again)")
    return runs


def _chosen_shapes(args) -> dict:
    """The shapes to measure, by name: --shape's, or one of your own from the shape options."""
    custom = {f: getattr(args, f) for f in ("devices", "streams", "sync_every", "nvtx", "late_rows", "late_by",
                                            "graph_kernels", "collective_every")
              if getattr(args, f) is not None}
    if custom:
        spec = replace(SHAPES["sync2dev" if args.shape in ("all", "both") else args.shape], **custom)
        return {spec.label(): spec}
    names = {"all": list(SHAPES), "both": ["decode", "sync2dev"]}.get(args.shape, [args.shape])
    return {name: SHAPES[name] for name in names}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--batch", action="store_true", help="measure batch throughput (cases/minute) instead")
    ap.add_argument("--jobs", type=int, action="append", help="batch workers (repeat to compare, e.g. --jobs 1 --jobs 2)")
    ap.add_argument("--startup", action="store_true", help="measure start-up and a small real export instead")
    ap.add_argument("--kineto", action="store_true", help="measure a generated Kineto JSON trace instead")
    ap.add_argument("--shape", choices=[*SHAPES, "all", "both"], default="all",
                    help="a generated shape, or all of them (both: decode and sync2dev)")
    g = ap.add_argument_group("a shape of your own (starts from --shape, sync2dev when it is all)")
    g.add_argument("--devices", type=int)
    g.add_argument("--streams", type=int, help="streams per device")
    g.add_argument("--sync-every", type=int, help="kernels between two stream syncs")
    g.add_argument("--nvtx", action=argparse.BooleanOptionalAction, default=None, help="an NVTX range per sync period")
    g.add_argument("--late-rows", type=int, help="runtime rows per 10M written out of start order")
    g.add_argument("--late-by", type=int, help="how many runtime rows after its place such a row is written, at most")
    g.add_argument("--graph-kernels", type=int, help="kernels per CUDA-graph replay (0: a launch call per kernel)")
    g.add_argument("--collective-every", type=int, help="every n-th round of kernels (one per device) an all-reduce")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the first read (analyze) of each shape instead")
    ap.add_argument("--perfetto", action="append", metavar="WINDOW", nargs="?", const="steady",
                    help="time the Perfetto export (--format perfetto) of the --shape (decode when all) instead, with this "
                         "--perfetto-window (repeat: --perfetto steady --perfetto worst-steps=3)")
    ap.add_argument("--profile-memory", action="store_true",
                    help="print where the first read's resident memory peaks (the top frames, by the RSS seen in them)")
    ap.add_argument("--profile-html", action="store_true",
                    help="print a cProfile of the cached HTML report of each shape instead")
    args = ap.parse_args(argv)
    if args.startup:
        bench_startup()
        return
    if args.perfetto:
        bench_perfetto(args.kernels, args.shape if args.shape in SHAPES else "decode", args.perfetto)
        return
    if args.kineto:
        bench_kineto(args.kernels)
        return
    if args.batch:
        rates = {j: bench_batch(j) for j in (args.jobs or [2])}
        if len(rates) > 1:
            lo, hi = min(rates), max(rates)
            print(f"batch    {hi} workers / {lo} worker: {rates[hi] / rates[lo]:.2f}x")
        return
    import shutil
    import tempfile

    out = HERE / "out"
    out.mkdir(exist_ok=True)
    summary = []
    for name, spec in _chosen_shapes(args).items():
        path = out / f"{name}_{args.kernels}.sqlite"
        t = time.perf_counter()
        build(path, args.kernels, shape=spec)
        print(f"trace: {path.name} ({path.stat().st_size / 1e6:,.0f} MB, {args.kernels:,} kernels + launches; "
              f"built/cached in {time.perf_counter() - t:.1f} s)")
        cache_dir = tempfile.mkdtemp(prefix="tt-bench-cache-")
        try:
            if args.profile or args.profile_html or args.profile_memory:
                if args.profile_html:
                    measure("cached", path, cache_dir, "html")  # fills the cache, charts included
                mode = "profile_cached" if args.profile_html else "memory" if args.profile_memory else "profile"
                proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), cache_dir],
                                      capture_output=True, text=True, check=True, env=_user_env())
                print(proc.stderr, end="")
                continue
            res = {mode: measure(mode, path, cache_dir) for mode in ("sqlite3", "parse", "analyze")}
            res["cached"], res["html"] = _cached_runs(path, cache_dir)
            size = sum(f.stat().st_size for f in Path(cache_dir).rglob("*") if f.is_file())
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
        scan = res["sqlite3"]["seconds"]
        labels = {"cached": "cached json", "html": "cached html"}
        for mode, r in res.items():
            ratio = f"{r['seconds'] / scan:5.1f}x scan" if mode != "sqlite3" else "    baseline"
            print(f"  {labels.get(mode, mode):<11} {r['seconds']:>7.2f} s  {ratio}   peak RSS {r['peak_rss_mb']:>7.1f} MB"
                  f"   CPU {r['cpu_s']:>6.2f} s")
        print(f"  cache on disk {size / 1e6:,.0f} MB ({size / (2 * args.kernels):.0f} bytes per kernel + launch)")
        summary.append((name, res))
    if len(summary) > 1:
        print(f"\n{'shape':<10} {'scan':>7} {'first read':>11} {'ratio':>6} {'peak RSS':>9} {'cached json':>12}"
              f" {'cached html':>12} {'(CPU json / html)':>18}")
        for name, res in summary:
            scan, first = res["sqlite3"]["seconds"], res["analyze"]
            print(f"{name:<10} {scan:>6.2f}s {first['seconds']:>10.2f}s {first['seconds'] / scan:>5.1f}x "
                  f"{first['peak_rss_mb']:>6.0f} MB {res['cached']['seconds']:>11.2f}s {res['html']['seconds']:>11.2f}s"
                  f" {res['cached']['cpu_s']:>9.2f}s / {res['html']['cpu_s']:.2f}s")


if __name__ == "__main__":
    main()
