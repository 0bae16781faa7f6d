"""What the new-user trial of stop 45 (notes trial45.md) found, checked through the CLI and the HTML
helpers: --fail-on never counts the INFO healthy verdict and says so; a healthy capture of graph
replays is said to compute, not to "run kernels" it holds none of; a batch's error text does not wrap
inside a number."""

from __future__ import annotations

import json

from conftest import BUNDLES, run_cli

from tracetriage import errors
from tracetriage.reports.html import breakable


def test_fail_on_info_does_not_count_the_healthy_verdict_and_says_so():
    data = json.loads(run_cli("analyze", BUNDLES / "healthy", "-f", "json").stdout)
    assert [finding["id"] for finding in data["findings"]] == ["healthy"]
    proc = run_cli("analyze", BUNDLES / "healthy", "--fail-on", "info", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert run_cli("analyze", BUNDLES / "eager_decode", "--fail-on", "info", "-f", "json").returncode == errors.EXIT_FAIL_ON
    for command in ("analyze", "batch"):
        assert "'healthy' verdict" in " ".join(run_cli(command, "--help").stdout.split())


def test_a_healthy_graph_replay_capture_computes_rather_than_runs_kernels():
    data = json.loads(run_cli("analyze", BUNDLES / "healthy", "-f", "json").stdout)
    counts = data["inputs"][0]["counts"]
    assert counts["kernels"] == 0 and counts["graph_replays"] > 0  # the GPU time is replays, no kernel row
    evidence = next(e for e in data["findings"][0]["evidence"] if e["name"] == "min_compute_pct")
    assert evidence["text"].startswith("the least busy device computes ") and "runs kernels" not in evidence["text"]


def test_an_error_text_wraps_at_its_parts_not_inside_a_number():
    html = str(breakable("/data/t.sqlite: its header counts 52 pages of 4,096 bytes (212,992 bytes), truncated"))
    assert "4,096" in html and "212,992" in html  # no <wbr> inside either number
    assert "t.sqlite: its header counts 52 pages of 4,096 bytes (212,992 bytes),<wbr>" in html
    assert html.startswith("/<wbr>data/<wbr>")
