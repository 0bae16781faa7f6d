"""Benchmark of ``tracetriage batch`` over a simulated fleet archive on a local Dask cluster, and of
``tracetriage trend`` over its tables: wall time, CPU per case, peak memory of each process.

    python benchmarks/bench_batch.py --cases 100 1000 [--workers 2] [--reports-cpu 20]

The archive is ``samples/generate.py``'s nightly decode benchmark (one small nsys export per
night, 6,400 kernels each, CUDA graphs lost from 65% of the nights on: :func:`archive`), made
once into ``--root`` (default /tmp/tracetriage-bench-batch) and kept there. For each size a ``dask scheduler``
and a ``dask worker --nworkers W --nthreads 1`` are started as processes of their own, then
``tracetriage batch NIGHTS -o OUT --dask ADDRESS --reports none --no-cache --force`` runs, sampled
every 0.25 s (resident memory of the client, the scheduler, and the workers with the case worker
processes under them), then ``tracetriage trend OUT`` (wall and peak from the kernel's rusage).
CPU per case: the case worker's own CPU time as its record states it (``cpu_seconds``), and all
CPU spent by the client, scheduler and workers together, divided by the cases.

``--reports-cpu K``: the first K nights also analyzed on local workers with ``--reports all`` and
with ``--reports none``: the mean CPU per case of each (what a tables-only run saves).

``--futures-check N``: only :func:`futures_check` (what a Dask worker keeps while the client holds futures).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACETRIAGE = [sys.executable, "-m", "tracetriage"]


TEMPLATES = 10  # distinct simulated nights of each kind (graphs, eager); the archive's nights are copies of them


def archive(root: Path, n: int) -> Path:
    """``n`` nights of the nightly benchmark under ``root``/nightly-N (made once): copies of
    :data:`TEMPLATES` simulated graph nights and as many eager ones (eager from 65% of the nights
    on), each with its own capture time in its session table. Simulating a night costs ~1 s;
    copying one ~10 ms."""
    import datetime
    import shutil
    import sqlite3

    out = root / f"nightly-{n}"
    if (out / "complete").exists():
        return out
    sys.path.insert(0, str(ROOT / "samples"))
    import generate

    t0 = time.perf_counter()
    templates = root / "templates"
    if not (templates / "series_truth.json").exists():
        generate.generate_nightly(templates, nights=2 * TEMPLATES, switch_at=TEMPLATES + 1, outlier_at=None)
    made = sorted(p / "trace.sqlite" for p in templates.iterdir() if p.is_dir())
    switch = int(n * 0.65)
    for night in range(n):
        start = generate.NIGHT0_NS + night * generate.DAY_NS + 3 * 3600 * 10**9
        source = made[night % TEMPLATES + (TEMPLATES if night >= switch else 0)]
        target = out / f"night-{night:05d}" / "trace.sqlite"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        with sqlite3.connect(target) as con:
            when = datetime.datetime.fromtimestamp(start / 1e9, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
            con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = ?, utcTime = ?, localTime = ?",
                        (start, when, when))
    (out / "complete").write_text(f"{n} nights, eager from night {switch}\n")
    print(f"made {n} nights in {time.perf_counter() - t0:.0f} s into {out}", file=sys.stderr)
    return out


PROGRESS_S = 60  # seconds between the progress lines a run prints to stderr


def _progress(out: Path, elapsed: float, rss_mb: dict, load: float) -> None:
    """One stderr line while a batch runs: cases finished so far (their summary parts, staged or pushed),
    each process's resident memory now, and the 1-minute load average: how memory grows with the cases
    within one run."""
    done = sum(1 for _ in (out / "summary").glob("part-*.parquet")) if (out / "summary").is_dir() else 0
    memory = " / ".join(f"{rss_mb[name]:.0f}" for name in ("client", "scheduler", "workers"))
    print(f"  {elapsed:7.0f} s  {done:6d} cases  RSS client / scheduler / workers {memory} MB  load {load:.1f}",
          file=sys.stderr, flush=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tree(process) -> list:
    import psutil

    try:
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return []


def _rss_mb(processes) -> float:
    import psutil

    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def _cpu_s(processes) -> float:
    import psutil

    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            continue
    return total


def _wait_for(port: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"no scheduler on port {port}")


def run_dask(nights: Path, out: Path, workers: int) -> dict:
    import psutil

    port = _free_port()
    bindir = Path(sys.executable).parent
    logs = open(out.parent / f"{out.name}-dask.log", "w")
    scheduler = subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--no-dashboard"], stdout=logs, stderr=subprocess.STDOUT, start_new_session=True)
    worker = None
    try:
        _wait_for(port)
        worker = subprocess.Popen([str(bindir / "dask"), "worker", f"tcp://127.0.0.1:{port}", "--nworkers", str(workers),
                                   "--nthreads", "1", "--no-dashboard"], stdout=logs, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        time.sleep(5)  # the workers registered
        sched, work = psutil.Process(scheduler.pid), psutil.Process(worker.pid)
        cpu_before = _cpu_s(_tree(sched) + _tree(work))
        t0 = time.perf_counter()
        errors = open(out.parent / f"{out.name}-batch.log", "w")
        client = subprocess.Popen([*TRACETRIAGE, "batch", str(nights), "-o", str(out), "--dask", f"tcp://127.0.0.1:{port}",
                                   "--reports", "none", "--no-cache", "--force", "--no-progress"],
                                  stdout=subprocess.DEVNULL, stderr=errors)
        peak = {"client": 0.0, "scheduler": 0.0, "workers": 0.0}
        handle = psutil.Process(client.pid)
        loads, next_progress = [os.getloadavg()[0]], t0 + PROGRESS_S
        while True:
            pid, status, usage = os.wait4(client.pid, os.WNOHANG)  # the client's own rusage once it ends
            if pid:
                break
            now = {"client": _rss_mb(_tree(handle)), "scheduler": _rss_mb(_tree(sched)), "workers": _rss_mb(_tree(work))}
            peak = {name: max(peak[name], now[name]) for name in peak}
            if time.perf_counter() >= next_progress:
                next_progress += PROGRESS_S
                loads.append(os.getloadavg()[0])
                _progress(out, time.perf_counter() - t0, now, loads[-1])
            time.sleep(0.25)
        wall = time.perf_counter() - t0
        client.returncode = os.waitstatus_to_exitcode(status)
        errors.close()
        stderr = (out.parent / f"{out.name}-batch.log").read_text()
        cpu_end = _cpu_s(_tree(sched) + _tree(work))  # the case workers live on under the Dask workers
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                try:
                    os.killpg(proc.pid, 15)
                    proc.wait(timeout=30)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(proc.pid, 9)
        logs.close()
    records = [json.loads(path.read_text()) for path in (out / "cases").glob("*/record.json")]
    cases = len(records)
    client_cpu = usage.ru_utime + usage.ru_stime
    return {"cases": cases, "ok": sum(r["status"] == "ok" for r in records), "wall_s": round(wall, 1),
            "case_cpu_s": round(sum(r.get("cpu_seconds") or 0 for r in records) / max(1, cases), 3),
            "all_cpu_per_case_s": round((client_cpu + cpu_end - cpu_before) / max(1, cases), 3),
            "client_cpu_s": round(client_cpu, 1), "peak_mb": {k: round(v) for k, v in peak.items()},
            "exit": client.returncode, "batch_note": stderr.strip().splitlines()[:1],
            "load_average_1min": {"min": min(loads), "mean": round(sum(loads) / len(loads), 1), "max": max(loads)}}


def run_trend(batch_dir: Path) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen([*TRACETRIAGE, "trend", str(batch_dir), "-f", "json"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    return {"wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_mb": round(usage.ru_maxrss / 1024), "exit": os.waitstatus_to_exitcode(status)}


def reports_cpu(nights: Path, k: int, work: Path) -> dict:
    """Mean CPU per case with --reports all and none, the first ``k`` nights, one local worker."""
    out = {}
    chosen = sorted(p for p in nights.iterdir() if p.is_dir())[:k]
    for mode in ("all", "none"):
        target = work / f"reports-{mode}"
        subprocess.run([*TRACETRIAGE, "batch", *map(str, chosen), "-o", str(target), "--jobs", "1", "--reports", mode,
                        "--no-cache", "--force", "--no-progress"], check=False, capture_output=True)
        records = [json.loads(path.read_text()) for path in (target / "cases").glob("*/record.json")]
        out[mode] = round(sum(r["cpu_seconds"] for r in records) / len(records), 3)
    out["ratio_none_to_all"] = round(out["none"] / out["all"], 2)
    return out


def _record_like(i: int) -> dict:
    """A result the size of a case's record (its 120 trend kernels)."""
    return {"case_id": f"c{i}", "kernels": [{"name": f"kernel_{i}_{k}", "ms_per_step": k * 0.1} for k in range(120)]}


def futures_check(tasks: int) -> dict:
    """What a Dask worker keeps of results whose futures the client still holds: ``tasks`` tasks on
    one local Dask worker, their futures held to the end and released as they are read (as
    ``batch_pool.run_dask`` does): the worker's RSS growth each way."""
    import psutil
    from dask.distributed import Client, LocalCluster, as_completed

    out = {}
    for mode in ("held", "released"):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.submit(_record_like, -1).result()
            before = sum(client.run(lambda: psutil.Process().memory_info().rss).values())
            futures = {future.key: future for future in (client.submit(_record_like, i, pure=False) for i in range(tasks))}
            for future in as_completed(list(futures.values())):
                future.result()
                if mode == "released":
                    futures.pop(future.key).release()
            after = sum(client.run(lambda: psutil.Process().memory_info().rss).values())
            out[mode] = f"{before / 2**20:.0f} -> {after / 2**20:.0f} MB"
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--root", type=Path, default=Path("/tmp/tracetriage-bench-batch"))
    parser.add_argument("--reports-cpu", type=int, default=0, metavar="K")
    parser.add_argument("--futures-check", type=int, default=0, metavar="N", help="only the held/released futures check")
    args = parser.parse_args(argv)
    if args.futures_check:
        print(json.dumps({"dask_worker_rss_after_tasks": futures_check(args.futures_check)}), flush=True)
        return 0
    results = {}
    for n in args.cases:
        nights = archive(args.root, n)
        out = args.root / f"out-{n}"
        results[n] = {"batch": run_dask(nights, out, args.workers), "trend": run_trend(out)}
        print(json.dumps({n: results[n]}), flush=True)
    if args.reports_cpu:
        nights = archive(args.root, max(args.reports_cpu, min(args.cases)))
        print(json.dumps({"reports_cpu_per_case_s": reports_cpu(nights, args.reports_cpu, args.root)}), flush=True)
    print(f"maxrss of this driver: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
