"""What the new-user trial of stop 45 (notes trial45.md) found, checked through the CLI and the HTML
helpers: --fail-on never counts the INFO healthy verdict and says so; a healthy capture of graph
replays is said to compute, not to "run kernels" it holds none of; a batch's error text does not wrap
inside a number; a batch's
index lists the inputs it skipped and counts graph launches; failed rows name relative inputs as
given; trend says "not ordered" with why; a rate of one is singular."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
from conftest import BUNDLES, ROOT, run_cli

from tracetriage import errors
from tracetriage.reports.html import breakable
from tracetriage.wording import with_unit


def test_fail_on_info_does_not_count_the_healthy_verdict_and_says_so(tmp_path):
    # a healthy verdict needs a measured efficiency: samples/gen_efficiency.py's fast GEMMs (the healthy bundle's
    # graph replays are traced whole, so its efficiency is not measured and it is not called healthy)
    sys.path.insert(0, str(ROOT / "samples"))
    import gen_efficiency

    (folder,) = gen_efficiency.write(tmp_path / "eff", only=["gemm_fast"])
    healthy = folder / "trace.pt.trace.json.gz"
    data = json.loads(run_cli("analyze", healthy, "-f", "json").stdout)
    assert [finding["id"] for finding in data["findings"]] == ["healthy"]
    proc = run_cli("analyze", healthy, "--fail-on", "info", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert run_cli("analyze", BUNDLES / "eager_decode", "--fail-on", "info", "-f", "json").returncode == errors.EXIT_FAIL_ON
    for command in ("analyze", "batch"):
        assert "'healthy' verdict" in " ".join(run_cli(command, "--help").stdout.split())


def test_a_busy_graph_replay_capture_computes_rather_than_runs_kernels():
    data = json.loads(run_cli("analyze", BUNDLES / "healthy", "-f", "json").stdout)
    counts = data["inputs"][0]["counts"]
    assert counts["kernels"] == 0 and counts["graph_replays"] > 0  # the GPU time is replays, no kernel row
    # not healthy (the replays' efficiency is not measured), and the verdict says the GPU computes
    assert ("GPU computing at least" in data["headline"] or "GPU computing all of the window" in data["headline"]) \
        and "runs kernels" not in data["headline"]


def test_an_error_text_wraps_at_its_parts_not_inside_a_number():
    html = str(breakable("/data/t.sqlite: its header counts 52 pages of 4,096 bytes (212,992 bytes), truncated"))
    assert "4,096" in html and "212,992" in html  # no <wbr> inside either number
    assert "t.sqlite: its header counts 52 pages of 4,096 bytes (212,992 bytes),<wbr>" in html
    assert html.startswith("/<wbr>data/<wbr>")


def test_batch_index_lists_the_inputs_it_skipped_and_why(tmp_path):
    (tmp_path / "empty.json").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a capture\n")
    out = tmp_path / "out"
    proc = run_cli("batch", BUNDLES / "healthy", tmp_path / "empty.json", tmp_path / "notes.txt", "-o", out, "--no-progress",
                   "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("skipped: ") == 2
    index = (out / "index.html").read_text()
    skipped = index[index.index('id="skipped"'):index.index('<table id="cases">')].replace("<wbr>", "")
    assert "2 inputs skipped, each with no capture batch reads" in skipped
    assert "empty.json" in skipped and "notes.txt" in skipped


def test_batch_failed_rows_name_relative_inputs_relatively(tmp_path):
    """Discovery's failures and the workers' (handed absolute paths) read alike: as the user gave them."""
    (tmp_path / "cut").mkdir()
    data = (BUNDLES / "healthy" / "trace.sqlite").read_bytes()
    (tmp_path / "cut" / "trace.sqlite").write_bytes(data[: len(data) // 4])  # refused at discovery
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "trace.json").write_text('{"traceEvents": [ {"ph": "X", ')  # refused by the worker's parser
    proc = run_cli("batch", "cut", "bad", "-o", "out", "--no-progress", "--no-cache", cwd=tmp_path)
    assert proc.returncode == errors.EXIT_BATCH_FAILED
    failed = [line for line in proc.stderr.splitlines() if line.startswith("tracetriage: failed: ")]
    assert len(failed) == 2 and not any(str(tmp_path) in line for line in failed), failed
    assert {line.split(": ")[2] for line in failed} == {"cut/trace.sqlite", "bad/trace.json"}


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """A batch of three bundles that name no capture time and no sequence: no series, one a graph capture."""
    out = tmp_path_factory.mktemp("three") / "out"
    proc = run_cli("batch", *(BUNDLES / name for name in ("healthy", "eager_decode", "graph_decode")), "-o", out,
                   "--no-progress")
    assert proc.returncode == 0, proc.stderr
    return out


def test_trend_says_not_ordered_with_why_rather_than_ordered_by_none(three):
    data = json.loads(run_cli("trend", three, "-f", "json").stdout)
    assert data["order"].startswith("none: ")  # the contract value as it was
    why = data["order"].removeprefix("none: ")
    text = run_cli("trend", three).stdout
    assert text.splitlines()[0] == f"tracetriage trend: 0 groups, not ordered: {why}"
    assert "ordered by none" not in text


def test_index_counts_graph_launches_beside_kernel_launches(three):
    index = (three / "index.html").read_text()
    summary = pd.read_parquet(three / "summary.parquet")
    graphs = summary[summary["graph_launches_per_step"].fillna(0) > 0]
    assert len(graphs) >= 1  # healthy and graph_decode replay graphs
    for value in graphs["graph_launches_per_step"]:
        assert f'+{value:g} {"graph" if value == 1 else "graphs"}</span>' in index


def test_a_rate_of_one_reads_singular():
    assert with_unit("1", "calls/step") == "1 call/step" and with_unit("2", "calls/step") == "2 calls/step"
    assert with_unit("1", "req/s") == "1 req/s"


def test_an_output_folder_under_a_parent_that_takes_none_says_so():
    proc = run_cli("batch", BUNDLES / "healthy", "-o", "/proc/tracetriage-x", "--no-progress")
    assert proc.returncode == errors.EXIT_OUTPUT
    assert "cannot make the output folder: /proc does not take new folders" in proc.stderr
