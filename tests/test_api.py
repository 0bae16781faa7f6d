"""The library API (tracetriage.compare / trend / batch beside analyze): called from Python on the
sample bundles, each gives what the CLI writes for the same inputs; the Options and the Runtime
are explicit values, and parsers and analyzers never reach for the cache."""

from __future__ import annotations

import io
import json
import pickle
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pandas as pd
import pytest
from conftest import BUNDLES, ROOT

import tracetriage
from tracetriage import Options, Runtime
from tracetriage.errors import TraceTriageError, UsageError


def cli(*argv) -> tuple[int, str]:
    """``tracetriage ARGV`` in process: its exit code and standard output."""
    from tracetriage.cli import main

    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = main([str(a) for a in argv])
    return code, out.getvalue()


def test_compare_is_what_the_cli_writes():
    before, after = BUNDLES / "eager_decode", BUNDLES / "graph_decode"
    comparison = tracetriage.compare(str(before), str(after))
    code, text = cli("compare", before, after, "-f", "json", "--no-cache", "--gate")
    assert comparison.to_json() == text
    assert comparison.gate_exit() == code
    assert comparison.verdict == json.loads(text)["verdict"]
    assert cli("compare", before, after, "--no-cache")[1] == comparison.render("text")


def test_compare_takes_analyses_and_options():
    before = tracetriage.analyze(BUNDLES / "eager_decode", symptom="tail")
    after = tracetriage.analyze(BUNDLES / "graph_decode", options=Options(symptom="tail"))
    comparison = tracetriage.compare(before, after, threshold_pct=10)
    assert comparison.data["before"]["label"] == "before" and comparison.data["threshold_pct"] == 10
    with pytest.raises(UsageError, match="--gate-threshold 100: give a percentage"):
        tracetriage.compare(before, after, threshold_pct=100)
    with pytest.raises(UsageError, match="--slo: unknown budget"):
        tracetriage.compare(before, after, slo="tpot=5")
    with pytest.raises(TraceTriageError, match="no such file"):
        tracetriage.compare(BUNDLES / "no-such-bundle", after)


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    root = tmp_path_factory.mktemp("captures")
    for name in ("eager_decode", "graph_decode", "healthy"):
        shutil.copytree(BUNDLES / name, root / name)
    return root


def _tables(outdir: Path) -> dict[str, pd.DataFrame]:
    tables = {name: pd.read_parquet(outdir / f"{name}.parquet") for name in ("summary", "findings", "kernels")}
    tables["summary"] = tables["summary"].drop(columns=["seconds", "reused"])
    return tables


def test_batch_is_what_the_cli_writes(captures, tmp_path):
    result = tracetriage.batch([captures], tmp_path / "api", runtime=Runtime(jobs=1), progress=False)
    code, _ = cli("batch", captures, "-o", tmp_path / "cli", "-j", "1", "--no-progress", "--no-cache")
    assert code == 0 and (result.analyzed, result.failed) == (3, 0)
    api_tables, cli_tables = _tables(tmp_path / "api"), _tables(tmp_path / "cli")
    for name, frame in api_tables.items():
        pd.testing.assert_frame_equal(frame, cli_tables[name])
    for record in result.records:
        case = Path("cases") / record["case_id"] / "analysis.json"
        assert (tmp_path / "api" / case).read_bytes() == (tmp_path / "cli" / case).read_bytes()
    with pytest.raises(UsageError, match="--jobs must be at least 1"):
        tracetriage.batch([captures], tmp_path / "never", runtime=Runtime(jobs=0))
    assert not (tmp_path / "never").exists()


def test_trend_is_what_the_cli_writes(captures, tmp_path):
    outdir = tmp_path / "batch"
    tracetriage.batch([captures], outdir, runtime=Runtime(jobs=1), progress=False)
    result = tracetriage.trend(outdir, gate=True)
    code, text = cli("trend", outdir, "-f", "json", "--gate", "--no-cache")
    assert result.to_json() == text and code == result.gate_exit()
    judged = [g for g in result.groups if len(g["cases"]) >= 4]  # a shorter group is "too few to tell": not judged
    assert result.gate_exit() == (8 if result.regressed else 0 if judged else 9)
    assert result.batch_dir == str(outdir)
    assert cli("trend", outdir, "--no-cache")[1] == tracetriage.trend(outdir).render("text")
    assert result.series_frame().equals(tracetriage.trend(str(outdir), gate=True).series_frame())
    with pytest.raises(UsageError, match="is the reference of --gate"):
        tracetriage.trend(outdir, baseline="eager_decode")


def test_trend_of_captures_runs_batch_first(captures, tmp_path):
    result = tracetriage.trend([captures], batch_dir=tmp_path / "b", runtime=Runtime(jobs=1))
    assert (tmp_path / "b" / "summary.parquet").is_file() and result.batch_dir == str(tmp_path / "b")
    assert {case["name"] for group in result.data["ungrouped"] + result.groups for case in group["cases"]} == {
        "eager_decode", "graph_decode", "healthy"}


def test_options_and_runtime_are_plain_values(tmp_path, monkeypatch):
    options = Options.checked("tail", "tpot_p95_ms=50", "decode")
    assert options == Options(symptom="tail", slo={"tpot_p95_ms": 50.0}, step_range="decode")
    with pytest.raises(UsageError, match="--step-range is not a valid regular expression"):
        Options.checked(step_range="(", slo="nonsense")  # the CLI's order: the step range is named first
    monkeypatch.setenv("NSYS", "/opt/nsys/bin")
    runtime = Runtime.create(tmp_path / "cache", nsys=None, jobs=2)
    settings = runtime.settings()
    assert settings == {"cache_dir": str(tmp_path / "cache"), "nsys": "/opt/nsys/bin", "nsys_timeout_s": 900.0}
    worker = Runtime.from_settings(pickle.loads(pickle.dumps(settings)))
    assert worker.cache.dir == runtime.cache.dir and worker.nsys == runtime.nsys
    assert not (tmp_path / "cache").exists()  # a Runtime creates nothing until something is kept
    assert Runtime.create(use_cache=False).cache is None


def test_parsers_and_analyzers_never_touch_the_cache():
    for package in ("parsers", "analyzers"):
        for source in (ROOT / package).rglob("*.py"):
            text = source.read_text(encoding="utf-8")
            assert "tracetriage.cache" not in text and "tracetriage import cache" not in text, source
    from tracetriage import cache

    assert not hasattr(cache, "active") and not hasattr(cache, "configure")
