"""The --slo budgets against what the serving artifacts measured, and the serving figures in words:
one check (slo_check) for ``analyze --slo`` and ``compare --slo`` alike."""

from __future__ import annotations

import math

from tracetriage.analyzers.serving_metrics import ClientFigures, ServerHistogram, ServingSummary, serving_summary
from tracetriage.wording import ms, pct

BATCH_CAP_KEYS = ("max_num_seqs", "max_running_requests")  # vLLM's batch cap, SGLang's


def cap_of(serving: ServingSummary | dict | None):
    """The engine's batch cap (max_num_seqs, SGLang's max_running_requests), or None."""
    summary = serving_summary(serving)
    config = summary.config if summary else {}
    cap = next((config[key] for key in BATCH_CAP_KEYS if config.get(key)), None)
    return cap if isinstance(cap, (int, float)) and cap > 0 else None


SLO_METRIC = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}  # --slo name -> the latency block it reads
QUANTILES = ["p50", "p90", "p95", "p99", "max"]


def _known_quantiles(client: ClientFigures | None, server: ServerHistogram | None) -> dict[str, tuple[float, str]]:
    """quantile -> (ms, source) of one latency metric: the benchmark's (client) first, else the server
    histogram's value where it is not a lower bound."""
    known: dict[str, tuple[float, str]] = {}
    for quantile in QUANTILES:
        value = client.quantile(quantile) if client else None
        if isinstance(value, (int, float)) and math.isfinite(value):
            known[quantile] = (float(value), "benchmark (client)")
    for quantile in QUANTILES[:-1]:
        bucket = server.quantile(quantile) if server else None
        if quantile not in known and bucket and bucket.value is not None:
            known[quantile] = (bucket.value, "server histogram (/metrics)")
    return known


def slo_check(serving: ServingSummary | dict | None, key: str, budget: float) -> dict:
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
    summary = serving_summary(serving)
    if not summary:
        return {**row, "source": "no serving artifacts (engine log, /metrics scrape or benchmark result) were given"}
    server = summary.latency.server.of(metric)
    known = _known_quantiles(summary.latency.client.of(metric), server)
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
    return {**row, "source": f"no {quantile} of {metric.upper()} measured" + (
        f" (measured: {', '.join(name for name in QUANTILES if name in known)})" if known else "")}


def _lower_bound_over(known: dict[str, tuple[float, str]], server: ServerHistogram | None, quantile: str,
                      budget: float) -> tuple[float, str] | None:
    """(ms, source) when ``quantile`` is measured over ``budget`` (its value, or a server histogram's
    lower bound), else None: what proves every higher percentile over the budget too."""
    if quantile in known and known[quantile][0] > budget:
        return known[quantile]
    bucket = server.quantile(quantile) if server else None
    if bucket and bucket.lower_bound and bucket.value_ms is not None and float(bucket.value_ms) > budget:
        return float(bucket.value_ms), "server histogram (/metrics): a lower bound"
    return None


def slo_checks(serving: ServingSummary | dict | None, slo: dict) -> list[dict]:
    """Every --slo budget checked (slo_check), in the order given."""
    summary = serving_summary(serving)
    return [slo_check(summary, key, value) for key, value in (slo or {}).items()]


STATUS_MET = {"met": True, "broken": False}  # a check's status as the rules read it (None: not measured)


def budget_check(serving: ServingSummary | dict, key: str, budget: float) -> bool | None:
    """True when the measurements show ``key`` (e.g. ttft_p95_ms) within budget, False when over,
    None when nothing measured decides (slo_check)."""
    return STATUS_MET.get(slo_check(serving, key, budget)["status"])


def measured_serving(serving: ServingSummary | dict) -> list[str]:
    """What the serving artifacts measured, in words (for the healthy finding and a finding-less headline)."""
    summary = serving_summary(serving)
    stats, client = summary.stats, summary.latency.client
    measured = []
    if stats:
        from tracetriage.analyzers.rules.serving_queue import queue_trend

        trend = queue_trend(stats) if stats.waiting_max else None
        moves = (f" ({trend}: {stats.waiting_first:,.0f} to {stats.waiting_last:,.0f})" if trend in ("grows", "drains")
                 else f" (holds at {stats.waiting_last:,.0f})" if trend == "holds" else "")
        queue = (f"queue non-empty in {pct(stats.waiting_share_pct)} of {stats.samples} stats samples{moves}"
                 if stats.waiting_max else "no request waiting in " + (
                     "the one stats sample" if stats.samples == 1 else f"any of {stats.samples} stats samples"))
        measured.append(queue + (f", KV up to {stats.kv_usage_max}%" if stats.kv_usage_max is not None else ""))
    for metric in ("ttft", "tpot", "itl"):
        figures = client.of(metric)
        value = figures and (figures.p99 or figures.mean)
        if value:
            measured.append(f"{metric.upper()} {'p99' if figures.p99 else 'mean'} {ms(value)}")
    for metric, histogram in summary.latency.server.measured():
        p50 = histogram.p50
        if p50:
            measured.append(f"server {metric.upper()} p50 {'>' if p50.lower_bound else ''}{ms(p50.value_ms)}"
                            + (f" (bucket resolution {p50.resolution_ms:g} ms)" if p50.resolution_ms else "")
                            + f" over {histogram.count:,.0f} requests")
    return measured
