"""The --slo budgets against what the serving artifacts measured, and the serving figures in words:
one check (slo_check) for ``analyze --slo`` and ``compare --slo`` alike."""

from __future__ import annotations

import math

from tracetriage.analyzers.evidence import ms


def cap_of(serving: dict):
    """The engine's batch cap (max_num_seqs, SGLang's max_running_requests), or None."""
    c = serving.get("config") or {}
    v = c.get("max_num_seqs") or c.get("max_running_requests")
    return v if isinstance(v, (int, float)) and v > 0 else None


SLO_METRIC = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}  # --slo name -> the latency block it reads
QUANTILES = ["p50", "p90", "p95", "p99", "max"]


def slo_check(serving: dict | None, key: str, budget: float) -> dict:
    """One --slo budget (``key`` e.g. ttft_p95_ms, ``budget`` in ms) against what the serving
    artifacts measured: ``{budget, metric, percentile, limit_ms, measured_ms, source, status}``,
    status "met", "broken" or "not_measured". The percentile is read from the benchmark (client)
    first, else the server's /metrics histogram (its value, not a lower bound; a lower bound above
    the budget still shows it broken). Without the percentile itself, a higher quantile (p99, max)
    within budget bounds it: met, with that quantile as the measured value. One check for
    ``analyze --slo`` and ``compare --slo`` alike."""
    name, q, _ = key.split("_")
    metric = SLO_METRIC.get(name, name)
    row = {"budget": key, "metric": metric, "percentile": q, "limit_ms": float(budget), "measured_ms": None,
           "source": None, "status": "not_measured"}
    if not serving:
        row["source"] = "no serving artifacts (engine log, /metrics scrape or benchmark result) were given"
        return row
    latency = serving.get("latency") or {}
    c = (latency.get("client") or {}).get(metric) or {}
    s = (latency.get("server") or {}).get(metric) or {}
    known: dict[str, tuple[float, str]] = {}
    for k, v in (("p50", c.get("p50") or c.get("median")), ("p90", c.get("p90")), ("p95", c.get("p95")),
                 ("p99", c.get("p99")), ("max", c.get("max"))):
        if isinstance(v, (int, float)) and math.isfinite(v):
            known[k] = (float(v), "benchmark (client)")
    for k in ("p50", "p90", "p95", "p99"):
        h = s.get(k)
        if k not in known and h and not h.get("lower_bound") and h.get("value_ms") is not None:
            known[k] = (float(h["value_ms"]), "server histogram (/metrics)")
    if q in known:
        value, src = known[q]
        row.update(measured_ms=round(value, 3), source=src, status="met" if value <= budget else "broken")
        return row
    h = s.get(q)
    if h and h.get("lower_bound") and h.get("value_ms") is not None and h["value_ms"] > budget:
        row.update(measured_ms=round(float(h["value_ms"]), 3), source="server histogram (/metrics): a lower bound",
                   status="broken")
        return row
    for higher in QUANTILES[QUANTILES.index(q) + 1:]:
        if higher in known and known[higher][0] <= budget:
            value, src = known[higher]
            row.update(measured_ms=round(value, 3), source=f"{src}: its {higher} bounds the {q}", status="met")
            return row
    row["source"] = f"no {q} of {metric.upper()} measured" + (
        f" (measured: {', '.join(k for k in QUANTILES if k in known)})" if known else "")
    return row


def slo_checks(serving: dict | None, slo: dict) -> list[dict]:
    """Every --slo budget checked (slo_check), in the order given."""
    return [slo_check(serving, key, value) for key, value in (slo or {}).items()]


def budget_check(serving: dict, key: str, budget: float) -> bool | None:
    """True when the measurements show ``key`` (e.g. ttft_p95_ms) within budget, False when over,
    None when nothing measured decides (slo_check)."""
    return {"met": True, "broken": False}.get(slo_check(serving, key, budget)["status"])


def slo_text(check: dict) -> str:
    """One budget in words: 'TTFT p95 249.3 ms > budget 100 ms: broken (benchmark (client))'."""
    what = f"{check['metric'].upper()} {check['percentile']}"
    if check["status"] == "not_measured":
        return f"{check['budget']}={check['limit_ms']:g}: unchecked ({check['source']})"
    sign = ">" if check["status"] == "broken" else "<="
    return f"{what} {ms(check['measured_ms'])} {sign} budget {check['limit_ms']:g} ms: {check['status']} ({check['source']})"


def measured_serving(serving: dict) -> list[str]:
    """What the serving artifacts measured, in words (for the healthy finding and a finding-less headline)."""
    client = serving["latency"]["client"]
    st = serving.get("stats")
    measured = []
    if st:
        measured.append(f"queue non-empty in {st['waiting_share_pct']:.0f}% of {st['samples']} stats samples"
                        + (f", KV up to {st['kv_usage_max']}%" if st.get("kv_usage_max") is not None else ""))
    for metric in ("ttft", "tpot", "itl"):
        c = client.get(metric) or {}
        v = c.get("p99") or c.get("mean")
        if v:
            measured.append(f"{metric.upper()} {'p99' if c.get('p99') else 'mean'} {ms(v)}")
    for metric, h in serving["latency"]["server"].items():
        p50 = h.get("p50")
        if p50:
            measured.append(f"server {metric.upper()} p50 {'>' if p50['lower_bound'] else ''}{ms(p50['value_ms'])}"
                            + (f" (bucket resolution {p50['resolution_ms']:g} ms)" if p50.get("resolution_ms") else "")
                            + f" over {h['count']:,.0f} requests")
    return measured
