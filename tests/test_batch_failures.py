"""batch's failure policy, with real processes: a case over its memory ceiling, a worker killed
mid-case (locally and on a Dask LocalCluster), a timeout on Dask, a run stopped by SIGTERM and
resumed, tables-only runs, the cheap reuse check, discovery's time on hostile lines."""

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import BUNDLES, samples_generate

from tracetriage.batches import discover, run_batch
from tracetriage.errors import EXIT_BATCH_FAILED
from tracetriage.runtime import Runtime

CEILING_MB = 50  # measured peaks over the idle worker: a bundle's case 0-17 MB, the large trace's ~115 MB


def _multiply(path: Path, copies: int) -> None:
    """The trace's kernels and runtime calls repeated ``copies`` times, one after the other in time
    (SQL inserts: a large capture in seconds instead of minutes of simulation)."""
    con = sqlite3.connect(path)
    tables = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")
    lo = min(con.execute(f"SELECT min(start) FROM {t}").fetchone()[0] for t in tables)
    hi = max(con.execute(f"SELECT max(end) FROM {t}").fetchone()[0] for t in tables)
    span = hi - lo + 1_000_000
    for table in tables:
        cols = [row[1] for row in con.execute(f"PRAGMA table_info({table})")]
        for k in range(1, copies):
            shifted = [f"{c} + {k * span}" if c in ("start", "end") else f"{c} + {k * 10_000_000}" if c == "correlationId"
                       else c for c in cols]
            con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(shifted)} FROM {table} WHERE start <= {hi}")
    con.commit()
    con.close()


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    """A folder holding one large generated capture (1.2M kernels: seconds of analysis, ~180 MB)."""
    generate = samples_generate()
    folder = tmp_path_factory.mktemp("large") / "a_large"
    folder.mkdir()
    ranks, _ = generate.scenario_microbench(random.Random(1), iterations=40_000)
    generate.write_nsys(folder / "trace.sqlite", ranks, "microbench")
    _multiply(folder / "trace.sqlite", 10)
    return folder


def _name(label: str) -> str:
    """A case's folder name from its label (a bundle folder, or the trace file in it)."""
    return Path(label).parent.name if label.endswith(".sqlite") else Path(label).name


def _summary(out: Path) -> dict:
    return {_name(row["path"]): row for _, row in pd.read_parquet(out / "summary.parquet").iterrows()}


def _workers(pid: int | None = None):
    """The batch worker processes under ``pid`` (default: this process)."""
    import psutil

    out = []
    for child in psutil.Process(pid or os.getpid()).children(recursive=True):
        try:
            if "tracetriage.batch_worker" in " ".join(child.cmdline()):
                out.append(child)
        except psutil.Error:
            continue
    return out


def _kill_when_started(out: Path, name: str, sig: int, under: int | None = None, timeout: float = 120,
                       parent: bool = False) -> threading.Thread:
    """A thread that waits for case ``name`` to start (its folder made) and sends ``sig`` to the
    case worker processes then, mid-case (``parent``: to the process that started them, a Dask worker)."""

    def watch():
        deadline = time.time() + timeout
        while time.time() < deadline:
            if list((out / "cases").glob(f"*{name}*")):
                time.sleep(0.5)
                for worker in _workers(under):
                    os.kill(worker.parent().pid if parent else worker.pid, sig)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_case_over_its_memory_ceiling_is_a_failed_row(large, tmp_path):
    out = tmp_path / "out"
    res = run_batch([str(large), str(BUNDLES / "healthy")], str(out), runtime=Runtime(jobs=1), progress=False,
                    case_memory=CEILING_MB)
    rows = _summary(out)
    assert rows["a_large"]["status"] == "failed"
    error = rows["a_large"]["error"]
    assert f"over the {CEILING_MB} MB per-case ceiling" in error and "--case-memory" in error
    grown = float(re.search(r"grew by ([0-9.]+) MB", error).group(1))
    assert grown > CEILING_MB  # the measured growth, not the ceiling repeated
    assert rows["healthy"]["status"] == "ok"  # the pool went on with a new worker
    assert (res.analyzed, res.failed) == (1, 1) and (out / "index.html").exists()
    assert not _workers()  # every worker ended with the batch


def test_a_worker_killed_mid_case_is_a_failed_row_and_the_batch_goes_on(large, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tracetriage", "batch", str(large), str(BUNDLES / "healthy"), "-o", str(out),
                             "--jobs", "1", "--no-progress", "--no-cache"], stderr=subprocess.PIPE, text=True)
    _kill_when_started(out, "a_large", signal.SIGKILL, under=proc.pid)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == EXIT_BATCH_FAILED, stderr
    rows = _summary(out)
    assert rows["a_large"]["status"] == "failed"
    assert "worker died while analyzing it: likely out of memory (killed by SIGKILL" in rows["a_large"]["error"]
    assert rows["healthy"]["status"] == "ok"
    assert "worker died" in stderr and "Traceback" not in stderr
    index = (out / "index.html").read_text()
    assert "a_large" in index and "healthy" in index


@pytest.fixture(scope="module")
def cluster():
    """A Dask LocalCluster of one worker process (the cases' own worker processes run under it)."""
    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] not installed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        yield local


def test_a_worker_crashing_mid_case_on_dask_is_a_failed_row(large, tmp_path, cluster):
    out = tmp_path / "out"
    killer = _kill_when_started(out, "a_large", signal.SIGSEGV)
    res = run_batch([str(large), str(BUNDLES / "healthy")], str(out), runtime=Runtime(dask_address=cluster.scheduler_address),
                    progress=False)
    killer.join(5)
    rows = _summary(out)
    assert rows["a_large"]["status"] == "failed"
    assert "worker died while analyzing it: it crashed (SIGSEGV" in rows["a_large"]["error"]
    assert rows["healthy"]["status"] == "ok" and res.failed == 1


def test_a_dask_worker_killed_mid_case_is_a_failed_row(large, tmp_path):
    """The Dask worker process itself killed (as the OOM killer or the nanny would): with no
    retries left the task is KilledWorker, a failed row, and the tables are written. (Alone:
    every task Dask had sent to that worker is lost with it.)"""
    import dask

    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] not installed")
    out = tmp_path / "out"
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        killer = _kill_when_started(out, "a_large", signal.SIGKILL, parent=True)
        res = run_batch([str(large)], str(out), runtime=Runtime(dask_address=local.scheduler_address), progress=False)
        killer.join(5)
    rows = _summary(out)
    assert rows["a_large"]["status"] == "failed" and res.failed == 1 and (out / "index.html").exists()
    assert "worker died while analyzing it: likely out of memory (Dask: KilledWorker" in rows["a_large"]["error"]


def test_case_timeout_holds_on_dask(large, tmp_path, cluster):
    out = tmp_path / "out"
    t0 = time.perf_counter()
    res = run_batch([str(large), str(BUNDLES / "healthy")], str(out), runtime=Runtime(dask_address=cluster.scheduler_address),
                    progress=False, case_timeout=0.5)
    rows = _summary(out)
    assert rows["a_large"]["status"] == "failed" and "timed out after 0.5 s (--case-timeout)" in rows["a_large"]["error"]
    assert res.failed >= 1 and time.perf_counter() - t0 < 120


def test_sigterm_keeps_the_finished_cases_and_a_rerun_resumes(large, tmp_path):
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    work = tmp_path / "w"
    for name in ("a_healthy", "b_graph_decode"):
        shutil.copytree(BUNDLES / name.split("_", 1)[1], work / name)
    shutil.copytree(large, work / "c_large")
    shutil.copytree(BUNDLES / "eager_decode", work / "d_eager_decode")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tracetriage", "batch", str(work), "-o", str(out), "--jobs", "1",
                             "--no-progress", "--no-cache"], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((out / "cases").glob("*c_large*")):
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    finished = ds.dataset(out / "summary", format="parquet").to_table().to_pandas()
    assert sorted(_name(p) for p in finished["path"]) == ["a_healthy", "b_graph_decode"]
    assert (finished["status"] == "ok").all()
    kernels = ds.dataset(out / "kernels", format="parquet").to_table()
    assert set(kernels.column("case_id").to_pylist()) <= set(finished["case_id"])
    summary = pd.read_parquet(out / "summary.parquet")
    assert sorted(summary["status"]) == ["not_run", "not_run", "ok", "ok"]
    assert (out / "index.html").exists()
    again = run_batch([str(work)], str(out), runtime=Runtime(jobs=1), progress=False)
    assert (again.reused, again.analyzed, again.failed) == (2, 2, 0)
    parts = ds.dataset(out / "summary", format="parquet").to_table().to_pandas()
    assert sorted(parts["case_id"]) == sorted(pd.read_parquet(out / "summary.parquet")["case_id"])
    for table in ("summary", "findings", "kernels"):  # one schema in every part, whichever values a case lacks
        assert len({pq.read_schema(part) for part in (out / table).glob("part-*.parquet")}) == 1
        single = pq.read_schema(out / f"{table}.parquet")
        assert [field.name for field in single] == [field.name for field in pq.read_schema(next((out / table).glob("*")))]


def test_reports_none_and_failed(tmp_path):
    inputs = [str(BUNDLES / "healthy"), str(BUNDLES / "graph_decode")]
    none = run_batch(inputs, str(tmp_path / "none"), runtime=Runtime(jobs=2), progress=False, reports="none")
    assert none.analyzed == 2 and not list((tmp_path / "none").rglob("report.html"))
    summary = pd.read_parquet(tmp_path / "none" / "summary.parquet")
    assert summary["report_html"].isna().all() and summary["report_json"].notna().all()
    index = (tmp_path / "none" / "index.html").read_text()
    assert all(Path(path).name in index for path in inputs)
    # no report.html, but each case's analysis.json is linked (trial 43 item 14: the column was blank)
    assert all(f'href="{path}"' in index for path in summary["report_json"]) and 'href="cases/' in index
    failed = run_batch(inputs, str(tmp_path / "failed"), runtime=Runtime(jobs=2), progress=False, reports="failed")
    with_report = {_name(r["path"]) for r in failed.records if r.get("report_html")}
    assert with_report == {"graph_decode"}  # healthy has no finding but healthy
    # asking for every report afterwards re-runs the cases that lack one
    full = run_batch(inputs, str(tmp_path / "none"), runtime=Runtime(jobs=2), progress=False)
    assert full.analyzed == 2 and len(list((tmp_path / "none").rglob("report.html"))) == 2


def test_the_command_line_options(tmp_path):
    from conftest import run_cli

    bad = run_cli("batch", BUNDLES / "healthy", "-o", tmp_path / "bad", "--case-memory", "0", "--no-progress")
    assert bad.returncode == 2 and "--case-memory must be a positive number of MB" in bad.stderr
    ok = run_cli("batch", BUNDLES / "healthy", "-o", tmp_path / "out", "--reports", "none", "--case-memory", "4000",
                 "--no-progress", "--no-cache")
    assert ok.returncode == 0, ok.stderr
    assert not list((tmp_path / "out").rglob("report.html")) and list((tmp_path / "out").rglob("analysis.json"))


def test_a_touched_file_is_reused_by_its_content_hash(tmp_path):
    work = tmp_path / "w"
    shutil.copytree(BUNDLES / "healthy", work / "healthy")
    out = tmp_path / "out"
    first = run_batch([str(work)], str(out), runtime=Runtime(jobs=1), progress=False)
    record = json.loads(next(out.glob("cases/*/record.json")).read_text())
    assert first.analyzed == 1 and len(record["inputs_hash"]) == 64 and record["inputs_identity"] != record["inputs_hash"]
    os.utime(work / "healthy" / "trace.sqlite", ns=(10**18, 10**18))  # the cheap identity changes, the content does not
    touched = run_batch([str(work)], str(out), runtime=Runtime(jobs=1), progress=False)
    assert (touched.analyzed, touched.reused) == (0, 1)
    again = json.loads(next(out.glob("cases/*/record.json")).read_text())
    assert again["inputs_hash"] == record["inputs_hash"] and again["inputs_identity"] != record["inputs_identity"]


def test_parallel_discovery_finds_what_a_serial_walk_finds(tmp_path, monkeypatch):
    import tracetriage.batches

    for top in ("a", "b", "c"):
        for sub in ("x", "y"):
            shutil.copytree(BUNDLES / ("healthy" if sub == "x" else "graph_decode"), tmp_path / "tree" / top / sub)
    (tmp_path / "tree" / "loose.sqlite").write_text("not a database")
    parallel = [(s.case_id, s.paths, s.identity) for s in discover([str(tmp_path / "tree")], tmp_path / "out")]
    monkeypatch.setattr(tracetriage.batches, "DISCOVERY_THREADS", 1)
    serial = [(s.case_id, s.paths, s.identity) for s in discover([str(tmp_path / "tree")], tmp_path / "out")]
    assert parallel == serial and len(parallel) == 7


@pytest.mark.parametrize("line", ["x" * 1_000_000, "1;" * 500_000, "main;" * 200_000 + "f"])
def test_detection_is_linear_on_a_long_line_without_spaces(tmp_path, line):
    from tracetriage.case import detect

    path = tmp_path / "long.log"
    path.write_text(line + "\n")
    t0 = time.perf_counter()
    kind = detect(path)
    assert time.perf_counter() - t0 < 1.0  # the backtracking pattern took 4 s on the first 64 KB of "1;1;..."
    assert kind.startswith("unknown:")
    (tmp_path / "stacks.txt").write_text("main;train;forward 12\nmain;train;backward 30\n")
    assert detect(tmp_path / "stacks.txt") == "pyspy"
