"""What a new user met (issue 38, ../shared/trials/new-user-73cc2a3.md), the items of sections A-D
and issue 33's item 8: each test names the trial item it answers."""

from __future__ import annotations

import pytest
from conftest import BUNDLES, run_cli

from tracetriage.analyzers.rules.slo import slo_check
from tracetriage.api import analyze
from tracetriage.case import open_case


def _serving(client: dict | None = None, server: dict | None = None) -> dict:
    """A serving summary with one TPOT block: ``client`` quantiles (ms), ``server`` histogram buckets."""
    return {"latency": {"client": {"tpot": client or {}}, "server": {"tpot": server or {}}}}


@pytest.mark.parametrize(("client", "server", "status", "bounded_by"), [
    ({"p50": 27.0, "p99": 27.3}, None, "broken", "p50"),           # a p50 over a p95 budget: broken
    ({"p50": 12.0, "p99": 19.0}, None, "met", "p99"),              # a p99 within it: met
    ({"p50": 12.0, "p99": 27.3}, None, "not_measured", None),      # neither bound decides
    ({"p95": 21.0, "p50": 5.0}, None, "broken", None),             # the percentile itself
    ({}, {"p90": {"value_ms": 25.0, "lower_bound": True}}, "broken", "p90"),  # a histogram lower bound below p95
    ({}, {"p99": {"value_ms": 25.0, "lower_bound": True}}, "not_measured", None),  # above p95: decides nothing
])
def test_an_slo_is_decided_by_either_bound(client, server, status, bounded_by):
    """Items 3 and 28: quantiles are ordered, so a percentile at or below the budget's one measured
    over it shows it broken, and one at or above it measured within shows it met; only when neither
    decides is it unchecked."""
    check = slo_check(_serving(client, server), "tpot_p95_ms", 20.0)
    assert (check["status"], check["bounded_by"]) == (status, bounded_by)
    assert (check["measured_ms"] is None) == (status == "not_measured")


def test_past_knee_sample_breaks_its_own_tpot_budget_in_analyze_and_compare():
    """Item 28: serving_batch_past_knee measures TPOT p50 27.0 ms; its truth's budget tpot_p95_ms=20
    is broken (was 'unchecked: no p95 of TPOT measured'), in the JSON, the text and the headline, and
    compare reads the same check."""
    data = analyze(open_case([BUNDLES / "serving_batch_past_knee"]), slo={"tpot_p95_ms": 20.0}).data
    (check,) = data["serving"]["slo_checks"]
    tpot = data["serving"]["latency"]["client"]["tpot"]
    p50 = tpot.get("p50") or tpot["median"]
    assert p50 > 20 and check["status"] == "broken" and check["bounded_by"] == "p50"
    assert check["measured_ms"] == pytest.approx(p50, abs=1e-3)
    assert "not checked" not in data["headline"]
    assert not any(a["analysis"] == "slo" for a in data["abstentions"])
    text = run_cli("analyze", BUNDLES / "serving_batch_past_knee", "--slo", "tpot_p95_ms=20").stdout
    assert "so the p95 is over it: broken" in text and "unchecked" not in text
    healthy = run_cli("analyze", BUNDLES / "serving_healthy", "--slo", "tpot_p95_ms=50").stdout
    assert "so the p95 is within it: met" in healthy
    from tracetriage.analyzers.compare import slo_breaks

    broken, unmeasured = slo_breaks(_serving({"p50": 12.0, "p99": 19.0}), data["serving"], {"tpot_p95_ms": 20.0})
    assert unmeasured == [] and len(broken) == 1 and broken[0].startswith("tpot_p95_ms=20:")
