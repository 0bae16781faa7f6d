#!/usr/bin/env python3
"""Parse + analyze time and peak memory on a large trace in the real nsys schema.

    python benchmarks/bench.py --kernels 1000000

Generates (once, cached under benchmarks/out/) an eager-decode-like export with N
kernels, N launch calls, NVTX step ranges and one sync per step, then runs, each in
a fresh process: (1) the baseline — sqlite3 scanning the kernel and runtime tables
once (what any reader must at least pay); (2) tracetriage's parser; (3) parser +
all analyzers. Reports wall time and peak RSS (ru_maxrss) of each.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "samples"))


def build(path: Path, n_kernels: int, per_step: int = 500) -> None:
    import generate

    if path.exists():
        return
    tmp = path.with_suffix(".tmp")
    if tmp.exists():
        tmp.unlink()
    db = sqlite3.connect(tmp)
    db.executescript(generate.SCHEMA.read_text())
    names = ["gemv_kernel", "rms_norm_kernel", "rotary_embedding_kernel", "paged_attention_v1_kernel",
             "silu_and_mul_kernel", "vectorized_elementwise_kernel", "reduce_kernel"]
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i + 1, n) for i, n in enumerate(names)] +
                   [(100, "cudaLaunchKernel_v7000"), (101, "cudaStreamSynchronize_v3020")])
    pid = 4242
    gpid, gtid = pid << 24, (pid << 24) | pid
    rng = random.Random(1)

    def rows():
        t = gpu = 1_000_000_000
        corr = 0
        for i in range(n_kernels):
            corr += 1
            t += 1500
            s = t
            t += 5000
            ks = max(t + 2000, gpu)
            gpu = ks + rng.randint(1500, 3000)
            yield ("K", (ks, gpu, 0, 1, None, 7, corr, gpid, 1 + i % 7, 1 + i % 7, None, 0, 0, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, corr, 0) + (None,) * 13)
            yield ("R", (s, t, 0, gtid, corr, 100, 0, None))
            if (i + 1) % per_step == 0:
                corr += 1
                s = t
                t = max(t + 2000, gpu + 3000)
                yield ("R", (s, t, 0, gtid, corr, 101, 0, None))
                yield ("N", (s - per_step * 6500, t, 59, "decode_step", gtid, 0))
                t += 400_000

    batch = {"K": [], "R": [], "N": []}
    sql = {
        "K": f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * 39)})",
        "R": "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        "N": "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, ?, ?, ?, ?)",
    }
    for kind, row in rows():
        batch[kind].append(row)
        if len(batch[kind]) >= 100_000:
            db.executemany(sql[kind], batch[kind])
            batch[kind].clear()
    for kind, b in batch.items():
        if b:
            db.executemany(sql[kind], b)
    db.execute("INSERT INTO PROCESSES VALUES (?, ?, 'python3')", (gpid, pid))
    db.commit()
    db.close()
    tmp.rename(path)


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
elif mode == "parse":
    from tracetriage.parsers import nsys
    nsys.parse(path)
else:
    from tracetriage import analyze, open_case
    analyze(open_case([path]))
elapsed = time.perf_counter() - t
print(json.dumps({"mode": mode, "seconds": round(elapsed, 2), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def measure(mode: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_batch(jobs: int) -> None:
    """Cases per minute: `tracetriage batch` over the sample bundles (and the real nsys
    exports when ../shared is present), every case re-analyzed (--force)."""
    import shutil
    import tempfile

    from tracetriage.batch import run_batch

    inputs = [str(ROOT / "samples" / "bundles")]
    real = ROOT.parent / "shared" / "samples" / "real" / "nsys"
    if real.exists():
        inputs.append(str(real))
    out = Path(tempfile.mkdtemp(prefix="tt-bench-"))
    try:
        t = time.perf_counter()
        res = run_batch(inputs, str(out), jobs=jobs, force=True, progress=False)
        dt = time.perf_counter() - t
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"batch    {len(res.records)} cases ({res.failed} failed) with {jobs} workers in {dt:.1f} s "
          f"= {60 * len(res.records) / dt:.0f} cases/minute")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--batch", action="store_true", help="measure batch throughput (cases/minute) instead")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    if args.batch:
        bench_batch(args.jobs)
        return
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    path = out / f"decode_{args.kernels}.sqlite"
    t = time.perf_counter()
    build(path, args.kernels)
    print(f"trace: {path} ({path.stat().st_size / 1e6:,.0f} MB, {args.kernels:,} kernels; built/cached in {time.perf_counter() - t:.1f} s)")
    for mode in ("sqlite3", "parse", "analyze"):
        r = measure(mode, path)
        print(f"{mode:<8} {r['seconds']:>7.2f} s   peak RSS {r['peak_rss_mb']:>7.1f} MB")


if __name__ == "__main__":
    main()
