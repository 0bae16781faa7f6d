"""Benchmark of ``tracetriage trend`` over a large batch archive: time and peak memory.

    python benchmarks/bench_trend.py --cases 1000

Writes the three batch tables (``summary.parquet``, ``findings.parquet``, ``kernels.parquet``)
of N synthetic cases in three workloads (1-GPU decode, 8-GPU TP, 4-GPU TP), each series noisy
with two level shifts and a few outliers, and two real ``analysis.json`` files (the eager and
graph decode bundles) that the cases' rows point to, so each change point runs a real
``compare``. Then times ``tracetriage trend DIR -f json`` in a fresh process (best and worst of
--repeat runs) and reads its peak RSS; the table write is not counted. No capture is read:
that is the point of trend working from batch's tables.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = [("NVIDIA H100 80GB HBM3", 1, "python vllm.worker", 1.5), ("NVIDIA H100 80GB HBM3", 8, "python vllm.worker", 8.1),
             ("NVIDIA H200", 4, "python sglang.launch_server", 6.0)]
KERNELS = ["gemv_kernel", "rms_norm_kernel", "paged_attention_v1_kernel", "silu_and_mul_kernel", "ncclDevKernel_AllReduce"]


def write_archive(out: Path, n: int, seed: int = 0) -> None:
    from tracetriage.batches import SUMMARY_COLUMNS

    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    for name, bundle in (("good", "graph_decode"), ("bad", "eager_decode")):
        text = subprocess.run([sys.executable, "-m", "tracetriage", "analyze", str(ROOT / "samples" / "bundles" / bundle),
                               "-f", "json"], capture_output=True, text=True, check=True).stdout
        (out / f"{name}.json").write_text(text)
    rows, findings, kernels = [], [], []
    per = n // len(WORKLOADS)
    for w, (model, count, program, step) in enumerate(WORKLOADS):
        m = per if w < len(WORKLOADS) - 1 else n - per * (len(WORKLOADS) - 1)
        level = np.full(m, step)
        level[m // 3:] *= 1.2  # a regression a third of the way
        level[2 * m // 3:] /= 1.2  # and its fix
        values = level * rng.normal(1.0, 0.01, m)
        for k in rng.choice(m, size=max(1, m // 100), replace=False):
            values[k] *= 1.5  # one-off bad nights
        for i in range(m):
            cid = f"w{w}-case{i:05d}"
            bad = m // 3 <= i < 2 * m // 3
            row = dict.fromkeys(SUMMARY_COLUMNS)
            row.update(case_id=cid, path=f"/archive/{program.split()[1]}-{count}gpu/nightly-{i:05d}/trace.sqlite", status="ok",
                       capture_start_ns=1_790_000_000 * 10**9 + i * 86_400 * 10**9, device_model=model, device_count=count,
                       world_size=count, program=program, step_p50_ms=values[i], step_p99_ms=values[i] * 1.05,
                       busy_pct=80.0 - 20 * bad, idle_ms=values[i] * (0.2 + 0.2 * bad), launches_per_step=200.0 * bad,
                       syncs_per_step=1.0, report_json="bad.json" if bad else "good.json", report_html=f"cases/{cid}/report.html")
            rows.append(row)
            findings.append({"case_id": cid, "path": row["path"], "rank": 1, "id": "host_sync_per_step", "axis": "throughput",
                             "severity": "medium", "impact_pct": 15.0, "impact_denominator": "window",
                             "ms_per_step": values[i] * 0.15, "title": "sync"})
            if bad:
                findings.append({"case_id": cid, "path": row["path"], "rank": 2, "id": "launch_bound", "axis": "throughput",
                                 "severity": "high", "impact_pct": 40.0, "impact_denominator": "window",
                                 "ms_per_step": values[i] * 0.4, "title": "launch"})
            for d in range(count):
                for kname in KERNELS:
                    kernels.append({"case_id": cid, "path": row["path"], "device_rank": d, "name": kname, "kind": "kernel",
                                    "ms_per_step": float(values[i] / len(KERNELS) * rng.normal(1, 0.01))})
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    for col in summary.columns:
        if summary[col].dtype == object and col not in ("case_id", "path", "status", "error", "device_model", "program",
                                                         "report_json", "report_html", "headline", "top_finding",
                                                         "top_severity", "max_severity", "step_ranges"):
            summary[col] = pd.to_numeric(summary[col], errors="coerce")
    summary.to_parquet(out / "summary.parquet", index=False)
    pd.DataFrame(findings).to_parquet(out / "findings.parquet", index=False)
    pd.DataFrame(kernels).to_parquet(out / "kernels.parquet", index=False)


def measure(folder: Path, repeat: int) -> tuple[list[float], float]:
    times = []
    peak = 0.0
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "tracetriage", "trend", str(folder), "-f", "json"],
                              capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr)
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0, before / 1024.0)
    return times, peak


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "batch"
        write_archive(folder, args.cases)
        kernels = len(pd.read_parquet(folder / "kernels.parquet"))
        times, peak = measure(folder, args.repeat)
        import json

        out = subprocess.run([sys.executable, "-m", "tracetriage", "trend", str(folder), "-f", "json"], capture_output=True,
                             text=True, check=True).stdout
        data = json.loads(out)
    print(f"trend over {args.cases:,} cases ({kernels:,} kernel rows, {len(data['groups'])} groups, "
          f"{len(data['changes'])} changes found): {min(times):.2f}-{max(times):.2f} s over {args.repeat} runs, "
          f"peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
