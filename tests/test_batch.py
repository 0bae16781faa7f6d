"""Batch over archives of captures, archive safety, incremental re-runs, Dask (compare: test_compare.py)."""

import gzip
import io
import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import BUNDLES, REAL, ROOT, run_cli, run_cli_process
from conftest import add_nsys_session as _session

from tracetriage.archive import extract
from tracetriage.batches import run_batch
from tracetriage.errors import EXIT_BATCH_FAILED, ArchiveError
from tracetriage.runtime import Runtime


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Bundles, real nsys exports (when present), a .tar.gz of two bundles, three broken files."""
    root = tmp_path_factory.mktemp("corpus")
    shutil.copytree(BUNDLES, root / "bundles")
    real_nsys = REAL / "nsys"
    n_real = 0
    if real_nsys.exists():
        (root / "real").mkdir()
        for f in sorted(real_nsys.glob("*.sqlite")):
            shutil.copyfile(f, root / "real" / f.name)
            n_real += 1
    with tarfile.open(root / "two_bundles.tar.gz", "w:gz") as tf:
        tf.add(BUNDLES / "healthy", arcname="nightly/healthy")
        tf.add(BUNDLES / "graph_decode", arcname="nightly/graph_decode")
    broken = root / "broken"
    broken.mkdir()
    (broken / "empty.sqlite").write_bytes(b"")
    (broken / "notes.sqlite").write_text("this is not a database\n")
    (broken / "truncated.sqlite").write_bytes((BUNDLES / "tp4_island" / "trace.sqlite").read_bytes()[:40_000])
    return root, n_real


def expected_cases(n_real):
    bundles = len([p for p in BUNDLES.iterdir() if p.is_dir()])
    return bundles + n_real + 2 + 3


@pytest.fixture(params=["processes", "dask"])
def executor(request):
    """The same batch test on local worker processes and on a Dask LocalCluster."""
    if request.param == "processes":
        yield []
        return
    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] not installed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield ["--dask", cluster.scheduler_address]


def test_batch_reports_every_case(corpus, tmp_path, executor):
    root, n_real = corpus
    out = tmp_path / "out"
    proc = run_cli("batch", root, "-o", out, "--jobs", "2", "--no-progress", *executor)
    assert proc.returncode == EXIT_BATCH_FAILED, proc.stderr
    assert "Traceback" not in proc.stderr
    summary = pd.read_parquet(out / "summary.parquet")
    assert len(summary) == expected_cases(n_real)
    assert summary["case_id"].is_unique
    failed = summary[summary["status"] == "failed"]
    assert sorted(Path(p).name for p in failed["path"]) == ["empty.sqlite", "notes.sqlite", "truncated.sqlite"]
    assert all(isinstance(e, str) and e for e in failed["error"])
    ok = summary[summary["status"] == "ok"]
    assert any("two_bundles.tar.gz!" in p for p in ok["path"])
    # the summary holds the same numbers as each case's JSON
    for _, row in ok.iterrows():
        data = json.loads((out / row["report_json"]).read_text())
        busy = sum(d["busy_pct"] for d in data["devices"]) / len(data["devices"]) if data["devices"] else None
        if busy is not None:
            assert row["busy_pct"] == pytest.approx(busy, abs=1e-3)
        assert row["top_finding"] == (data["findings"][0]["id"] if data["findings"] else None) or pd.isna(row["top_finding"])
        assert (out / row["report_html"]).exists()
    findings = pd.read_parquet(out / "findings.parquet")
    assert set(findings["case_id"]) <= set(ok["case_id"])
    index = (out / "index.html").read_text()
    assert "notes.sqlite" in index and "launch_bound" in index
    # nothing escaped the output directory
    assert not any(p.name.startswith("nightly") for p in root.iterdir())


def test_rerun_reanalyzes_nothing_then_only_the_changed_case(corpus, tmp_path):
    root, _ = corpus
    work = tmp_path / "work"
    shutil.copytree(BUNDLES / "healthy", work / "healthy")
    shutil.copytree(BUNDLES / "graph_decode", work / "graph_decode")
    out = tmp_path / "out"
    first = run_batch([str(work)], str(out), runtime=Runtime(jobs=1), progress=False)
    assert (first.analyzed, first.reused) == (2, 0)
    again = run_batch([str(work)], str(out), runtime=Runtime(jobs=1), progress=False)
    assert (again.analyzed, again.reused) == (0, 2)
    with open(work / "healthy" / "trace.sqlite", "ab") as fh:  # touch the content, not just the mtime
        fh.write(b"\0")
    third = run_batch([str(work)], str(out), runtime=Runtime(jobs=1), progress=False)
    assert (third.analyzed, third.reused) == (1, 1)
    assert [r["path"].split("/")[-2] for r in third.records if not r["reused"]] == ["healthy"]
    forced = run_batch([str(work)], str(out), runtime=Runtime(jobs=1), force=True, progress=False)
    assert forced.analyzed == 2


def test_on_error_fail_stops(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "a_bad.sqlite").write_bytes(b"")
    shutil.copyfile(BUNDLES / "healthy" / "trace.sqlite", work / "b_good.sqlite")
    res = run_batch([str(work)], str(tmp_path / "o"), runtime=Runtime(jobs=1), on_error="fail", progress=False)
    assert res.failed >= 1
    assert {r["status"] for r in res.records} <= {"failed", "ok", "not_run"}


def _tar_with(path: Path, members):
    with tarfile.open(path, "w:gz") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)


def _file(name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "bomb"])
def test_unsafe_archives_are_refused(kind, tmp_path, monkeypatch):
    import tracetriage.archive

    monkeypatch.setattr(tracetriage.archive, "MAX_MEMBERS", 50)
    arc = tmp_path / f"{kind}.tar.gz"
    if kind == "dotdot":
        _tar_with(arc, [_file("ok.txt"), _file("../escaped.txt")])
    elif kind == "absolute":
        _tar_with(arc, [_file("/tmp/tracetriage-absolute.txt")])
    elif kind == "symlink":
        link = tarfile.TarInfo("link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        _tar_with(arc, [(link, None)])
    else:
        _tar_with(arc, [_file(f"f{i}.txt") for i in range(60)])
    dest = tmp_path / "out" / "x"
    with pytest.raises(ArchiveError) as err:
        extract(arc, dest, max_members=50)
    assert "refused" in str(err.value)
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/tracetriage-absolute.txt").exists()
    assert not dest.exists() or not any(dest.iterdir())
    # through the batch: the archive is a failed case with the reason, nothing written outside OUTDIR
    res = run_batch([str(arc)], str(tmp_path / "batch"), runtime=Runtime(jobs=1), progress=False)
    assert res.records[0]["status"] == "failed" and "refused" in res.records[0]["error"]
    assert {p.name for p in tmp_path.iterdir()} <= {arc.name, "out", "batch"}


def test_zip_with_dotdot_refused(tmp_path):
    arc = tmp_path / "bad.zip"
    with zipfile.ZipFile(arc, "w") as zf:
        zf.writestr("../evil.txt", "x")
    with pytest.raises(ArchiveError):
        extract(arc, tmp_path / "d")
    assert not (tmp_path / "evil.txt").exists()


def test_batch_on_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] not installed")
    work = tmp_path / "w"
    for name in ("healthy", "graph_decode", "tp4_island"):
        shutil.copytree(BUNDLES / name, work / name)
    (work / "broken.sqlite").write_text("not sqlite")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        res = run_batch([str(work)], str(tmp_path / "out"), runtime=Runtime(dask_address=cluster.scheduler_address),
                        progress=False)
    summary = pd.read_parquet(tmp_path / "out" / "summary.parquet")
    assert len(summary) == 4 and (summary["status"] == "ok").sum() == 3
    local = run_batch([str(work)], str(tmp_path / "out_local"), runtime=Runtime(jobs=1), progress=False)
    by_path = {r["path"].replace(str(tmp_path / "out_local"), ""): r for r in local.records}
    for r in res.records:
        if r["status"] == "ok":
            assert r["metrics"] == by_path[r["path"]]["metrics"]


def test_batch_glob_and_fail_on(tmp_path):
    out = tmp_path / "o"
    pattern = str(BUNDLES / "eager_*" / "trace.sqlite")
    # subprocesses: the exit status of the batch process itself (run() ends batch with SystemExit, after the pools' exit hooks)
    proc = run_cli_process("batch", pattern, "-o", out, "--jobs", "1", "--no-progress", "--fail-on", "high")
    assert proc.returncode == 5, proc.stderr  # launch_bound is high severity
    summary = pd.read_parquet(out / "summary.parquet")
    assert len(summary) == 3 and set(summary["top_finding"]) == {"launch_bound"}  # the three eager bundles
    proc = run_cli_process("batch", str(BUNDLES / "healthy"), "-o", tmp_path / "o2", "--no-progress", "--fail-on", "medium")
    assert proc.returncode == 0, proc.stderr


def test_batch_on_a_separate_dask_scheduler_and_worker(tmp_path):
    """`batch --dask tcp://127.0.0.1:PORT` against a real `dask scheduler` and `dask worker`
    started as their own processes (not a LocalCluster), stopped afterwards."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    pytest.importorskip("dask.distributed", reason="dask[distributed] not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = []
    try:
        procs.append(subprocess.Popen([os.path.join(bindir, "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                       "--no-dashboard"], stdout=open(logs / "scheduler.log", "w"), stderr=subprocess.STDOUT,
                                      env=env, start_new_session=True))
        deadline = time.time() + 60
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.3)
        elsewhere = tmp_path / "worker-cwd"  # a cluster's worker does not share the client's working directory
        elsewhere.mkdir()
        procs.append(subprocess.Popen([os.path.join(bindir, "dask"), "worker", address, "--nworkers", "1", "--nthreads", "1",
                                       "--no-dashboard"], stdout=open(logs / "worker.log", "w"), stderr=subprocess.STDOUT,
                                      env=env, start_new_session=True, cwd=elsewhere))
        work = tmp_path / "w"
        for name in ("healthy", "graph_decode"):
            shutil.copytree(BUNDLES / name, work / name)
        # relative inputs and -o, from the client's folder (trial 73cc2a3 items 12-13): resolved on the client
        p = run_cli("batch", "w", "-o", "out", "--dask", address, "--no-progress", cwd=tmp_path)
        assert p.returncode == 0, p.stderr + (logs / "worker.log").read_text()[-2000:]
        summary = pd.read_parquet(tmp_path / "out" / "summary.parquet")
        assert len(summary) == 2 and (summary["status"] == "ok").all()
        assert len(list((tmp_path / "out" / "cases").glob("*/report.html"))) == 2
        assert not any(elsewhere.iterdir())  # nothing scattered into the worker's folder
    finally:
        for proc in reversed(procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)


def test_loose_files_are_grouped_by_run_not_by_folder(tmp_path):
    """One folder, three runs: two per-rank nsys exports whose sessions overlap in wall-clock
    time (one run), a third export captured an hour later, and two Kineto ranks of a 2-rank
    job. Each run's NCCL log goes with it by name; the topology matrix goes with every run;
    a log no run claims is a case of its own."""
    from tracetriage.batches import discover

    folder = tmp_path / "incident"
    folder.mkdir()
    src = BUNDLES / "eager_decode" / "trace.sqlite"
    t0 = 1_780_000_000 * 10**9
    for name, start in (("jobA_rank0.sqlite", t0), ("jobA_rank1.sqlite", t0 + 10**8), ("jobB.sqlite", t0 + 3600 * 10**9)):
        shutil.copyfile(src, folder / name)
        _session(folder / name, start, 5 * 10**9)
    base = json.loads(gzip.open(ROOT / "samples" / "h200" / "eager_decode.json.gz").read())
    for rank in (0, 1):  # rank 0 as PyTorch writes it (before the events), rank 1 after them
        info = {"backend": "nccl", "rank": rank, "world_size": 2}
        doc = {"distributedInfo": info, **base} if rank == 0 else dict(base, distributedInfo=info)
        (folder / f"kin_rank{rank}.json").write_text(json.dumps(doc))
    nccl = (BUNDLES / "tp8_cross_island" / "nccl.log").read_bytes()
    (folder / "jobA_nccl.log").write_bytes(nccl)
    (folder / "jobB_nccl.log").write_bytes(nccl)
    (folder / "zz_other.log").write_bytes(nccl)
    shutil.copyfile(BUNDLES / "tp8_cross_island" / "topo.txt", folder / "topo.txt")

    specs = discover([str(folder)], tmp_path / "out")
    cases = {tuple(sorted(Path(p).name for p in s.paths)) for s in specs}
    assert cases == {
        ("jobA_nccl.log", "jobA_rank0.sqlite", "jobA_rank1.sqlite", "topo.txt"),
        ("jobB.sqlite", "jobB_nccl.log", "topo.txt"),
        ("kin_rank0.json", "kin_rank1.json", "topo.txt"),
        ("topo.txt", "zz_other.log"),
    }
    assert len({s.case_id for s in specs}) == 4 and not any(s.case_id.startswith(".") for s in specs)
    # analyze agrees: the whole folder is not one run
    p = run_cli("analyze", folder, "--no-cache")
    assert p.returncode == 2 and "not one run" in p.stderr


def test_exports_without_session_tables_stay_apart(tmp_path):
    from tracetriage.batches import discover

    folder = tmp_path / "f"
    folder.mkdir()
    for name in ("a.sqlite", "b.sqlite"):
        shutil.copyfile(BUNDLES / "eager_decode" / "trace.sqlite", folder / name)
    specs = discover([str(folder)], tmp_path / "out")
    assert sorted(len(s.paths) for s in specs) == [1, 1]


def test_an_input_without_a_case_is_told_from_one_with_a_similar_name(tmp_path):
    """batch's "skipped" inputs: a case's label names its input as the path itself, a folder above
    it or an archive it came from (``!``); ``run-1`` is not above ``run-10``'s case."""
    from tracetriage.batch_records import CaseSpec
    from tracetriage.batches import _without_case

    folders, files = ("run-1", "run-10", "run-1.5", "notes"), ("night.tar", "alone.sqlite")
    for name in folders:
        (tmp_path / name).mkdir()
    for name in files:
        (tmp_path / name).write_text("")
    names = folders + files
    labels = [f"{tmp_path}/run-10/trace.sqlite", f"{tmp_path}/run-1.5/trace.sqlite", f"{tmp_path}/night.tar!n1/trace.sqlite",
              f"{tmp_path}/alone.sqlite", f"{tmp_path}/notes.tar!x/trace.sqlite"]
    specs = [CaseSpec(f"case-{i}", label, [label]) for i, label in enumerate(labels)]
    assert _without_case([str(tmp_path / name) for name in names], specs) == [str(tmp_path / "run-1"), str(tmp_path / "notes")]
