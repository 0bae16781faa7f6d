"""The --slo budgets against what the serving artifacts measured, and the serving figures in words:
one check (slo_check) for ``analyze --slo`` and ``compare --slo`` alike."""

from __future__ import annotations

import math

from tracetriage.wording import ms


def cap_of(serving: dict):
    """The engine's batch cap (max_num_seqs, SGLang's max_running_requests), or None."""
    config = serving.get("config") or {}
    cap = config.get("max_num_seqs") or config.get("max_running_requests")
    return cap if isinstance(cap, (int, float)) and cap > 0 else None


SLO_METRIC = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}  # --slo name -> the latency block it reads
QUANTILES = ["p50", "p90", "p95", "p99", "max"]


def _known_quantiles(client: dict, server: dict) -> dict[str, tuple[float, str]]:
    """quantile -> (ms, source) of one latency metric: the benchmark's (client) first, else the server
    histogram's value where it is not a lower bound."""
    known: dict[str, tuple[float, str]] = {}
    for quantile, value in (("p50", client.get("p50") or client.get("median")), ("p90", client.get("p90")),
                            ("p95", client.get("p95")), ("p99", client.get("p99")), ("max", client.get("max"))):
        if isinstance(value, (int, float)) and math.isfinite(value):
            known[quantile] = (float(value), "benchmark (client)")
    for quantile in ("p50", "p90", "p95", "p99"):
        bucket = server.get(quantile)
        if quantile not in known and bucket and not bucket.get("lower_bound") and bucket.get("value_ms") is not None:
            known[quantile] = (float(bucket["value_ms"]), "server histogram (/metrics)")
    return known


def slo_check(serving: dict | None, key: str, budget: float) -> dict:
    """One --slo budget (``key`` e.g. ttft_p95_ms, ``budget`` in ms) against what the serving
    artifacts measured: ``{budget, metric, percentile, limit_ms, measured_ms, source, status}``,
    status "met", "broken" or "not_measured", and ``bounded_by``: the other percentile that decided
    (None when the percentile itself was measured or nothing decided). Quantiles are ordered, so both bounds decide:

    - the percentile itself measured (the benchmark's (client) first, else the server's /metrics
      histogram value where it is not a lower bound): met when within budget, else broken;
    - else any percentile at or below it measured over the budget (a p50 over a p95 budget; a
      server histogram lower bound over the budget counts too): broken, that percentile named;
    - else a percentile above it (p99, max) measured within budget: met, that percentile named;
    - else not_measured: neither bound decides.

    One check for ``analyze --slo``, ``compare --slo`` and every rule that reads a budget."""
    name, quantile, _ = key.split("_")
    metric = SLO_METRIC.get(name, name)
    row = {"budget": key, "metric": metric, "percentile": quantile, "limit_ms": float(budget), "measured_ms": None,
           "source": None, "status": "not_measured", "bounded_by": None}
    if not serving:
        row["source"] = "no serving artifacts (engine log, /metrics scrape or benchmark result) were given"
        return row
    latency = serving.get("latency") or {}
    server = (latency.get("server") or {}).get(metric) or {}
    known = _known_quantiles((latency.get("client") or {}).get(metric) or {}, server)
    if quantile in known:
        value, source = known[quantile]
        row.update(measured_ms=round(value, 3), source=source, status="met" if value <= budget else "broken")
        return row
    rank = QUANTILES.index(quantile) if quantile in QUANTILES else len(QUANTILES)
    for lower in reversed(QUANTILES[:rank + 1]):
        bound = _lower_bound_over(known, server, lower, budget)
        if bound is not None:
            value, source = bound
            row.update(measured_ms=round(value, 3), status="broken", source=source,
                       bounded_by=None if lower == quantile else lower)
            return row
    for higher in QUANTILES[rank + 1:]:
        if higher in known and known[higher][0] <= budget:
            value, source = known[higher]
            row.update(measured_ms=round(value, 3), source=source, status="met", bounded_by=higher)
            return row
    row["source"] = f"no {quantile} of {metric.upper()} measured" + (
        f" (measured: {', '.join(name for name in QUANTILES if name in known)})" if known else "")
    return row


def _lower_bound_over(known: dict[str, tuple[float, str]], server: dict, quantile: str,
                      budget: float) -> tuple[float, str] | None:
    """(ms, source) when ``quantile`` is measured over ``budget`` (its value, or a server histogram's
    lower bound), else None: what proves every higher percentile over the budget too."""
    if quantile in known and known[quantile][0] > budget:
        return known[quantile]
    bucket = server.get(quantile) or {}
    if bucket.get("lower_bound") and bucket.get("value_ms") is not None and float(bucket["value_ms"]) > budget:
        return float(bucket["value_ms"]), "server histogram (/metrics): a lower bound"
    return None


def slo_checks(serving: dict | None, slo: dict) -> list[dict]:
    """Every --slo budget checked (slo_check), in the order given."""
    return [slo_check(serving, key, value) for key, value in (slo or {}).items()]


def budget_check(serving: dict, key: str, budget: float) -> bool | None:
    """True when the measurements show ``key`` (e.g. ttft_p95_ms) within budget, False when over,
    None when nothing measured decides (slo_check)."""
    return {"met": True, "broken": False}.get(slo_check(serving, key, budget)["status"])


def measured_serving(serving: dict) -> list[str]:
    """What the serving artifacts measured, in words (for the healthy finding and a finding-less headline)."""
    client = serving["latency"]["client"]
    stats = serving.get("stats")
    measured = []
    if stats:
        measured.append(f"queue non-empty in {stats['waiting_share_pct']:.0f}% of {stats['samples']} stats samples"
                        + (f", KV up to {stats['kv_usage_max']}%" if stats.get("kv_usage_max") is not None else ""))
    for metric in ("ttft", "tpot", "itl"):
        figures = client.get(metric) or {}
        value = figures.get("p99") or figures.get("mean")
        if value:
            measured.append(f"{metric.upper()} {'p99' if figures.get('p99') else 'mean'} {ms(value)}")
    for metric, histogram in serving["latency"]["server"].items():
        p50 = histogram.get("p50")
        if p50:
            measured.append(f"server {metric.upper()} p50 {'>' if p50['lower_bound'] else ''}{ms(p50['value_ms'])}"
                            + (f" (bucket resolution {p50['resolution_ms']:g} ms)" if p50.get("resolution_ms") else "")
                            + f" over {histogram['count']:,.0f} requests")
    return measured
