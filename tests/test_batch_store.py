"""batch and trend on object storage: a real S3-compatible server (moto's server mode) on 127.0.0.1,
reached through s3fs as any S3 endpoint is; and file:// URIs; and the one-line errors of a bad URI,
an unreachable store and missing credentials."""

import io
import json
import os
import shutil
import socket

import pandas as pd
import pytest
from conftest import BUNDLES, run_cli

from tracetriage.errors import EXIT_INPUT, EXIT_OUTPUT, EXIT_USAGE

pytest.importorskip("s3fs", reason="s3fs not installed (the s3 extra)")
moto_server = pytest.importorskip("moto.server", reason="moto[server] not installed (the test extra)")

CASES = ("eager_decode", "healthy")
VERDICT_COLUMNS = ["status", "top_finding", "top_severity", "findings", "busy_pct", "steps"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint():
    """An S3 server of its own on a free port, as long as the module's tests run."""
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    """A fresh bucket holding the two bundles under in/, and the S3 file system the test reads it with.
    The credentials and endpoint are in the environment, where the batch's workers find them too."""
    import s3fs

    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_ENDPOINT_URL", s3_endpoint)):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    s3fs.S3FileSystem.clear_instance_cache()  # each test as a fresh process: fsspec keeps file systems by their arguments
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_endpoint}, skip_instance_cache=True)
    bucket = f"triage-{_free_port()}"
    fs.mkdir(bucket)
    for case in CASES:
        for file in sorted((BUNDLES / case).iterdir()):
            fs.put_file(str(file), f"{bucket}/in/{case}/{file.name}")
    yield fs, bucket
    s3fs.S3FileSystem.clear_instance_cache()


def _verdicts(summary: pd.DataFrame) -> list[dict]:
    """The verdict columns per case, by the case's folder name (a folder of one trace is named by its file)."""
    rows = summary.assign(name=summary["path"].str.removesuffix("/trace.sqlite").str.rsplit("/", n=1).str[-1])
    rows = rows.sort_values("name")
    return rows[["name", *VERDICT_COLUMNS]].astype(object).where(rows[["name", *VERDICT_COLUMNS]].notna(), None) \
        .to_dict("records")


def _table(fs, path: str) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(fs.cat_file(path)))


def test_batch_round_trip_through_s3_matches_a_local_batch_and_reuses(s3, tmp_path):
    fs, bucket = s3
    local_in = tmp_path / "in"
    for case in CASES:
        shutil.copytree(BUNDLES / case, local_in / case)
    local = run_cli("batch", local_in, "-o", tmp_path / "local", "--no-progress")
    assert local.returncode == 0, local.stderr

    first = run_cli("batch", f"s3://{bucket}/in", "-o", f"s3://{bucket}/out", "--no-progress")
    assert first.returncode == 0, first.stderr
    assert "2 cases: 2 analyzed, 0 unchanged, 0 failed" in first.stderr
    assert f"wrote s3://{bucket}/out/index.html" in first.stderr
    summary = _table(fs, f"{bucket}/out/summary.parquet")
    assert _verdicts(summary) == _verdicts(pd.read_parquet(tmp_path / "local" / "summary.parquet"))
    assert sorted(summary["path"]) == [f"s3://{bucket}/in/{case}/trace.sqlite" for case in CASES]
    local_findings = pd.read_parquet(tmp_path / "local" / "findings.parquet")
    assert sorted(_table(fs, f"{bucket}/out/findings.parquet")["id"]) == sorted(local_findings["id"])
    for case_id in summary["case_id"]:  # each case's files written back by its worker
        names = {path.rsplit("/", 1)[-1] for path in fs.find(f"{bucket}/out/cases/{case_id}")}
        assert names == {"record.json", "analysis.json", "report.html"}
        record = json.loads(fs.cat_file(f"{bucket}/out/cases/{case_id}/record.json"))
        assert all(path.startswith(f"s3://{bucket}/in/") for path in record["files"])  # the store's names, not a temp folder
        analysis = fs.cat_file(f"{bucket}/out/cases/{case_id}/analysis.json").decode()
        report = fs.cat_file(f"{bucket}/out/cases/{case_id}/report.html").decode()
        assert "tracetriage-case-" not in analysis + report and f"s3://{bucket}/in/" in analysis
        for table in ("summary", "findings", "kernels"):
            assert fs.isfile(f"{bucket}/out/{table}/part-{case_id}.parquet")
    assert fs.isfile(f"{bucket}/out/index.html") and fs.isfile(f"{bucket}/out/kernels.parquet")
    assert not [path for path in fs.find(bucket) if path.rsplit("/", 1)[-1].startswith(".")]  # nothing staged is left

    again = run_cli("batch", f"s3://{bucket}/in", "-o", f"s3://{bucket}/out", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert "2 cases: 0 analyzed, 2 unchanged, 0 failed" in again.stderr
    assert _table(fs, f"{bucket}/out/summary.parquet")["reused"].tolist() == [True, True]

    # a new version of one case's file (a new ETag): that case is analyzed again, the other reused
    fs.put_file(str(BUNDLES / "healthy" / "trace.sqlite"), f"{bucket}/in/eager_decode/trace.sqlite")
    changed = run_cli("batch", f"s3://{bucket}/in", "-o", f"s3://{bucket}/out", "--no-progress")
    assert "2 cases: 1 analyzed, 1 unchanged, 0 failed" in changed.stderr, changed.stderr

    trend = run_cli("trend", f"s3://{bucket}/out", "--format", "json")
    assert trend.returncode == 0, trend.stderr
    assert json.loads(trend.stdout)["batch_dir"] == f"s3://{bucket}/out"


def test_store_inputs_into_a_local_outdir_and_a_case_that_is_not_a_capture(s3, tmp_path):
    fs, bucket = s3
    fs.pipe_file(f"{bucket}/in/broken/trace.sqlite", b"this is not a database\n")
    result = run_cli("batch", f"s3://{bucket}/in", "-o", tmp_path / "out", "--no-progress")
    assert result.returncode == 6, result.stderr
    summary = pd.read_parquet(tmp_path / "out" / "summary.parquet").set_index("path")
    broken = f"s3://{bucket}/in/broken/trace.sqlite"
    assert summary.loc[broken, "status"] == "failed"
    assert summary.loc[broken, "error"].startswith(f"{broken}: ")  # named by the store, not the worker's temporary folder
    assert "tracetriage-case-" not in summary.loc[broken, "error"]
    assert (summary.loc[[f"s3://{bucket}/in/{case}/trace.sqlite" for case in CASES], "status"] == "ok").all()


def test_file_uris_work_as_a_store(tmp_path):
    for case in CASES:
        shutil.copytree(BUNDLES / case, tmp_path / "in" / case)
    result = run_cli("batch", (tmp_path / "in").as_uri(), "-o", (tmp_path / "out").as_uri(), "--no-progress")
    assert result.returncode == 0, result.stderr
    assert len(pd.read_parquet(tmp_path / "out" / "summary.parquet")) == 2
    again = run_cli("batch", (tmp_path / "in").as_uri(), "-o", (tmp_path / "out").as_uri(), "--no-progress")
    assert "0 analyzed, 2 unchanged" in again.stderr
    record_file = next((tmp_path / "out" / "cases").glob("*healthy*/record.json"))
    before = json.loads(record_file.read_text())
    touched = tmp_path / "in" / "healthy" / "trace.sqlite"  # a new modification time, the same bytes
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
    kept = run_cli("batch", (tmp_path / "in").as_uri(), "-o", (tmp_path / "out").as_uri(), "--no-progress")
    assert "0 analyzed, 2 unchanged" in kept.stderr, kept.stderr  # kept by its worker from the content hash
    after = json.loads(record_file.read_text())
    assert after["inputs_hash"] == before["inputs_hash"] and after["inputs_identity"] != before["inputs_identity"]
    assert sorted(path.name for path in record_file.parent.iterdir()) == ["analysis.json", "record.json", "report.html"]


def _one_line_error(result, code: int) -> str:
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracetriage: error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_a_bad_uri_an_unreachable_store_missing_credentials_and_a_missing_prefix(s3, tmp_path, monkeypatch):
    import s3fs

    fs, bucket = s3
    line = _one_line_error(run_cli("batch", "nosuchscheme://bucket/in", "-o", tmp_path / "out"), EXIT_USAGE)
    assert "nosuchscheme://bucket/in" in line
    line = _one_line_error(run_cli("batch", f"s3://{bucket}/nothing-here", "-o", tmp_path / "out"), EXIT_INPUT)
    assert "no such bucket, folder or object" in line
    line = _one_line_error(run_cli("batch", f"s3://{bucket}/in", "-o", "s3://no-such-bucket/out"), EXIT_OUTPUT)
    assert "no such bucket (no-such-bucket)" in line
    assert not fs.exists("no-such-bucket")

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")  # nothing listens there
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3fs.S3FileSystem.clear_instance_cache()  # as a fresh process: fsspec keeps file systems by their arguments
    line = _one_line_error(run_cli("batch", f"s3://{bucket}/in", "-o", tmp_path / "out"), EXIT_USAGE)
    assert "cannot reach the object store" in line

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    s3fs.S3FileSystem.clear_instance_cache()
    line = _one_line_error(run_cli("batch", f"s3://{bucket}/in", "-o", tmp_path / "out"), EXIT_USAGE)
    assert f"s3://{bucket}/in" in line and "no credentials for the store were found" in line
    line = _one_line_error(run_cli("batch", tmp_path / "nothing", "-o", f"s3://{bucket}/out"), EXIT_USAGE)
    assert f"s3://{bucket}/out" in line and "no credentials for the store were found" in line  # before any case runs


def test_batch_on_dask_reads_and_writes_the_store(s3, tmp_path):
    """On Dask, each case's worker (in a Dask worker's process) downloads its case and writes it back."""
    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] not installed")
    fs, bucket = s3
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        result = run_cli("batch", f"s3://{bucket}/in", "-o", f"s3://{bucket}/dask", "--dask", cluster.scheduler_address,
                         "--no-progress")
    assert result.returncode == 0, result.stderr
    summary = _table(fs, f"{bucket}/dask/summary.parquet")
    assert (summary["status"] == "ok").all() and len(summary) == 2
    for case_id in summary["case_id"]:
        assert fs.isfile(f"{bucket}/dask/cases/{case_id}/analysis.json")
