"""at_capacity from the engine's stats lines: "the queue does not drain" needs a trend, so at least
queue_trend_min_samples samples; fewer say what they show (a queue of N at that moment) and abstain
with the capture that decides. Its impact from queue lengths is the queue's share of the requests
in the system, L_q / L: by Little's law the share of the time in system, named so (not of TTFT).
The truth is read from the log with a regular expression (the real one) or written by
samples/serving_cases.py (the generated ones), not by the code under test."""

import re

import pytest
from conftest import real, run_cli, samples_generate

from tracetriage import analyze, open_case
from tracetriage.analyzers.rules.thresholds import THRESHOLDS

REAL_QUEUE = "sglang_log_decode_queue_issue938_excerpt.log"
DECODE = re.compile(r"#running-req: (\d+).*token usage: ([\d.]+).*#queue-req: (\d+)")
MIN_SAMPLES = THRESHOLDS["queue_trend_min_samples"][0]


def _ids(analysis):
    return [finding["id"] for finding in analysis.findings]


def test_real_single_decode_line_is_a_moment_not_a_queue_that_does_not_drain():
    """Auditor's reading: one Decode batch line was called "the queue does not drain" (first == last passed
    the growing test) and 12,279 / 13,289 = 92.4% was called the queue's share of TTFT."""
    path = real("serving", REAL_QUEUE)
    lines = [DECODE.search(line) for line in path.read_text().splitlines()]
    rows = [(int(m[1]), float(m[2]), int(m[3])) for m in lines if m]
    assert len(rows) == 1 < MIN_SAMPLES
    running, usage, queued = rows[0]
    analysis = analyze(open_case([path]))
    assert "at_capacity" not in _ids(analysis)
    abstention = next(a for a in analysis.data["abstentions"] if a["analysis"] == "queue_trend")
    share = 100.0 * queued / (queued + running)
    assert f"one stats sample: {queued:,} requests queued behind {running:,} running, KV cache {usage * 100:g}% full " \
           f"({share:.1f}% of the requests in the system waiting), at that moment" in abstention["reason"]
    assert f"at least {MIN_SAMPLES} samples" in abstention["reason"]
    assert "longer stretch" in abstention["capture_hint"]
    assert analysis.headline.startswith("Queue behind a full batch or KV pool, its trend not measured: one stats sample")
    assert "does not drain" not in analysis.headline and "time to first token" not in analysis.headline
    text = run_cli("analyze", path).stdout
    assert "queue_trend (serving): one stats sample" in text and "At capacity" not in text


@pytest.mark.parametrize("samples", [1, 2])
def test_generated_too_few_samples_abstain(tmp_path, samples):
    case, truth = samples_generate().generate_serving_case(tmp_path, f"sglang_queue_{samples}_grows")
    analysis = analyze(open_case([case]))
    assert "at_capacity" not in _ids(analysis)
    reason = next(a for a in analysis.data["abstentions"] if a["analysis"] == "queue_trend")["reason"]
    assert f"{truth['waiting_last']:,} requests queued" in reason
    if samples == 2:
        assert f"{truth['waiting_first']:,} then {truth['waiting_last']:,}" in reason


@pytest.mark.parametrize("trend", ["grows", "holds"])
def test_generated_queue_that_does_not_drain_is_at_capacity_of_the_time_in_system(tmp_path, trend):
    case, truth = samples_generate().generate_serving_case(tmp_path, f"sglang_queue_6_{trend}")
    analysis = analyze(open_case([case]))
    finding = next(f for f in analysis.findings if f["id"] == "at_capacity")
    assert finding["impact_denominator"] == "time in system (L_q / L)"
    assert abs(finding["impact_pct"] - truth["queue_share_of_time_in_system_pct"]) < 0.05
    share = next(e for e in finding["evidence"] if e["name"] == "queue_share_of_time_in_system")
    assert abs(share["value"] - truth["queue_share_of_time_in_system_pct"]) < 0.01
    assert analysis.headline.endswith("of the time in system (L_q / L) (no GPU trace given; serving artifacts)")
    assert not any(a["analysis"] == "queue_trend" for a in analysis.data["abstentions"])


def test_generated_draining_queue_is_not_at_capacity(tmp_path):
    case, truth = samples_generate().generate_serving_case(tmp_path, "sglang_queue_6_drains")
    assert truth["waiting_last"] < truth["waiting_first"]
    analysis = analyze(open_case([case]))
    assert "at_capacity" not in _ids(analysis)
    assert not any(a["analysis"] == "queue_trend" for a in analysis.data["abstentions"])
