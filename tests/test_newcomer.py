"""What a newcomer meets outside the single report (issue 26): batch's index and summary,
the CLI's output paths and format detection, the Python API's validation."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest
from conftest import BUNDLES, run_cli

from tracetriage.batches import run_batch
from tracetriage.runtime import Runtime


@pytest.fixture(scope="module")
def batch_out(tmp_path_factory):
    root = tmp_path_factory.mktemp("newcomer")
    work = root / "work"
    for name in ("tp8_cross_island", "serving_at_capacity"):
        shutil.copytree(BUNDLES / name, work / name)
    (work / "broken.sqlite").write_text("this is not a database\n")
    out = root / "out"
    return run_batch([str(work)], str(out), runtime=Runtime(jobs=1), progress=False), out


def test_summary_counts_add_up_and_failed_is_not_analyzed(batch_out):
    result, out = batch_out
    assert len(result.records) == 3
    assert result.failed == 1 and result.analyzed == 2 and result.reused == 0
    assert result.analyzed + result.reused + result.failed + result.not_run == len(result.records)
    again = run_batch([str(out.parent / "work")], str(out), runtime=Runtime(jobs=1), progress=False)
    assert (again.analyzed, again.reused, again.failed) == (0, 2, 1)


def test_steps_is_one_rank_steps_not_the_sum(batch_out):
    _, out = batch_out
    s = pd.read_parquet(out / "summary.parquet")
    row = s[s["path"].str.contains("tp8_cross_island")].iloc[0]
    import json

    data = json.loads((out / row["report_json"]).read_text())
    counts = [p["steps"]["count"] for p in data["processes"] if p["steps"]["count"]]
    assert len(counts) == 8
    assert row["steps"] == sorted(counts)[len(counts) // 2] and row["steps"] < sum(counts)


def test_index_names_each_finding_once_and_never_sorts_on_mixed_impacts(batch_out):
    _, out = batch_out
    index = (out / "index.html").read_text()
    assert not re.search(r"(\w+)</span> \[\1\]", index)  # "gpu_starved [gpu_starved]"
    f = pd.read_parquet(out / "findings.parquet")
    tops = f[f["rank"] == 1]
    assert len(set(tops["impact_denominator"])) > 1  # a % of the window and a % of TTFT in one batch
    for _, t in tops.iterrows():
        if t["id"] != "healthy":
            assert f"{t['impact_pct']:.1f}% of the {t['impact_denominator']}" in index
    assert '<th data-type="num">impact %</th>' not in index
    # failed first, then by severity: never by a number whose denominators differ
    rows = re.findall(r'<tr class="(\w+)">', index)
    assert rows[0] == "failed"


# --- CLI: output paths, detection, messages ---------------------------------------------------

MARKDOWN_QUOTING_A_LOG = """# Why our SGLang server queues

We saw the queue grow during the load test. The scheduler printed lines like this one:

    Decode batch. #running-req: 1010, #token: 55006, token usage: 0.93, gen throughput (token/s): 1397.13, #queue-req: 12279

and NCCL said `host:12:34 [0] NCCL INFO comm 0x1 rank 0 nranks 8` once at start-up.

## What we think

The arrival rate is above capacity; see the dashboard. Next steps:

- capture /metrics for an hour
- rerun the benchmark at 10 req/s
"""


def test_a_markdown_document_quoting_log_lines_is_not_a_log(tmp_path):
    from pathlib import Path

    from tracetriage.case import detect

    doc = tmp_path / "notes.md"
    doc.write_text(MARKDOWN_QUOTING_A_LOG)
    assert detect(Path(doc)).startswith("unknown:")
    p = run_cli("analyze", doc)
    assert p.returncode == 3 and "notes.md" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    # the same line as a log file (one line of the grammar, nothing else) is still a log
    log = tmp_path / "server.log"
    log.write_text(MARKDOWN_QUOTING_A_LOG.splitlines()[4].strip() + "\n")
    assert detect(Path(log)) == "serving"


def test_nothing_to_analyze_in_a_folder_names_serving_artifacts(tmp_path):
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "notes.md").write_text(MARKDOWN_QUOTING_A_LOG)
    p = run_cli("analyze", tmp_path / "bundle")
    assert p.returncode == 4 and "serving artifact" in p.stderr and len(p.stderr.strip().splitlines()) == 1


# --- Python API: one validation with the CLI ------------------------------------------------

@pytest.mark.parametrize("options, flag", [
    ({"symptom": "latency"}, ["--symptom", "latency"]),
    ({"slo": {"tpot": 50}}, ["--slo", "tpot=50"]),
    ({"slo": {"tpot_p95_ms": -1}}, ["--slo", "tpot_p95_ms=-1"]),
    ({"slo": "ttft_p95_ms=fast"}, ["--slo", "ttft_p95_ms=fast"]),
])
def test_api_refuses_what_the_cli_refuses_with_the_same_message(options, flag):
    import tracetriage
    from tracetriage.errors import UsageError

    with pytest.raises(UsageError) as err:
        tracetriage.analyze(BUNDLES / "healthy", **options)
    assert isinstance(err.value, ValueError)
    p = run_cli("analyze", BUNDLES / "healthy", *flag)
    assert p.returncode == 2
    assert p.stderr.strip() == f"tracetriage: error: {err.value}"


def test_api_accepts_the_cli_budget_text():
    import tracetriage

    a = tracetriage.analyze(BUNDLES / "serving_batch_past_knee", slo="tpot_p95_ms=50")
    b = tracetriage.analyze(BUNDLES / "serving_batch_past_knee", slo={"tpot_p95_ms": 50})
    assert a.data["slo"] == b.data["slo"] == {"tpot_p95_ms": 50.0}
    assert [f["id"] for f in a.findings] == [f["id"] for f in b.findings]


# --- real captures in the repository ------------------------------------------------------------

def test_every_real_sample_in_the_repository_has_its_provenance():
    """Each file under samples/real/<format>/ is a row of that folder's SOURCES.md with its licence
    and the git blob id of these very bytes (so a changed or unlisted file fails)."""
    import hashlib

    from conftest import REAL_IN_REPO

    files = [p for p in REAL_IN_REPO.glob("*/*") if p.name != "SOURCES.md"]
    assert len(files) > 40
    for p in files:
        sources = (p.parent / "SOURCES.md").read_text()
        row = next((line for line in sources.splitlines() if line.startswith(f"| `{p.name}` |")), None)
        data = p.read_bytes()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        assert row is not None, p
        if row.count("|") >= 7:  # the rows with a git blob column (the compare pair's rows predate it)
            assert blob in row, p
        assert any(lic in row for lic in ("MIT", "BSD", "Apache-2.0", "CC BY-SA 4.0")), p


# --- the JSON contract: the keys the issue found undeclared ---------------------------------------

ISSUE_KEYS = [
    ("devices", "gaps", "top"), ("devices", "gaps", "by_cause_pct_of_window"), ("devices", "gaps", "histogram"),
    ("processes", "trace"), ("processes", "dtoh_copies_per_step"), ("processes", "dtoh_bytes_per_step"),
    ("processes", "steps", "warmup_dropped"), ("processes", "steps", "prefill_count"),
    ("hot_frames", "calls_sync"), ("hot_frames", "user_pct"), ("abstentions", "scope"),
    ("copies", "pageable_async"), ("copies", "sync_copy_calls"), ("copies", "dtoh"), ("copies", "migrations"),
    ("collective_skew", "matched"), ("collective_skew", "p50_ns"), ("host_profile", "total_samples"),
    ("host_profile", "user_frames"),
]


def _schema_node(schema, path):
    node = schema
    for key in path:
        if node.get("type") == "array" or "items" in node:
            node = node["items"]
        node = node["properties"][key]
    return node


def test_issue_keys_are_declared_with_what_they_measure():
    import json

    from conftest import ROOT

    schema = json.loads((ROOT / "reports" / "analysis.schema.json").read_text())
    for path in ISSUE_KEYS:
        node = _schema_node(schema, path)
        assert len(node.get("description", "")) > 20, path


def test_the_declared_keys_validate_on_bundles_and_real_captures(analyses):
    """Declared keys are checked for their types on every bundle (and a real py-spy + topology case)."""
    import json

    import jsonschema
    from conftest import ROOT, real

    from tracetriage.api import analyze
    from tracetriage.reports import render

    schema = json.loads((ROOT / "reports" / "analysis.schema.json").read_text())
    cases = list(analyses.values())
    cases.append(analyze([BUNDLES / "healthy" / "trace.sqlite", real("pyspy", "py-spy_dump_two_idle_threads_hex_tid.txt")]))
    for a in cases:
        jsonschema.validate(json.loads(render(a, "json")), schema)
