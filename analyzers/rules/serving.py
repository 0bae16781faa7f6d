"""Serving-level rules: findings from engine logs, /metrics scrapes and benchmark results.

Each rule reads ``ctx.serving`` as its typed summary (analyzers/serving_metrics.ServingSummary, the
figures analyzers/serving.py defines) and the user's ``--slo`` budgets, returns
a finding or None, and never opens a file. Impacts are shares of the axis's denominator
(DESIGN.md): TTFT for ``at_capacity`` and ``proxy_buffering`` (they claim disjoint parts of one
client TTFT: queue wait, then delivery), the TPOT at the largest batch for ``batch_past_knee``,
the ITL p99 for a serving ``prefill_stall``, the prompt share of processed tokens for
``prefix_cache_miss``, idle batch slots for the utilization rules. What the verdicts share (the TPOT
fit judged, the inter-token tail) lives in rules/serving_signals.py, re-exported here (``name as name``)
for the abstentions, the headline and the analysis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracetriage.analyzers import catalog
from tracetriage.analyzers.evidence import ev
from tracetriage.analyzers.rules.context import Context, Rule, t
from tracetriage.analyzers.rules.memory import lone_preemption, rule_memory_pressure
from tracetriage.analyzers.rules.serving_queue import queue_moment as queue_moment
from tracetriage.analyzers.rules.serving_queue import queue_trend as queue_trend
from tracetriage.analyzers.rules.serving_queue import queue_words as queue_words
from tracetriage.analyzers.rules.serving_queue import saturates, standing_queue
from tracetriage.analyzers.rules.serving_signals import InterTokenTail, inter_token_tail, tail_unexplained, tpot_needs_budget
from tracetriage.analyzers.rules.serving_signals import budgets_break_at as budgets_break_at
from tracetriage.analyzers.rules.serving_signals import tail_words as tail_words
from tracetriage.analyzers.rules.slo import budget_check, cap_of, measured_serving
from tracetriage.analyzers.serving_metrics import BenchRecord, ServingSummary, StatsSummary, Tokens, serving_summary
from tracetriage.analyzers.serving_series import series_names
from tracetriage.wording import ms, pct, plural, requests, rps

# name: (value, why)
THRESHOLDS = {
    "capacity_rate_excess": (1.1, "arrivals 10% above completions: beyond the drain-time slack of a finite benchmark run"),
    "capacity_ttft_growth": (3.0, "TTFT three times its low-load value: requests are waiting, not being prefilled"),
    "queue_share_min_pct": (50.0, "a non-empty queue in at least half of the stats samples is a standing queue, not a burst"),
    "queue_kv_full_pct": (90.0, "KV usage at 90% or more: admission is KV-bound"),
    "queue_cap_share": (0.95, "running within 5% of max_num_seqs: the batch is at its cap"),
    "queue_trend_min_samples": (3, ("whether a queue drains needs a first, a middle and a last sample: one sample is a "
                                    "moment (first == last), two cannot tell a trend from a burst")),
    "knee_r2_min": (0.8, "TPOT must be explained by the batch (r² >= 0.8) for the cap to be read off the fit"),
    "knee_min_points": (5, ("a line through fewer than 5 measured batch sizes is not a model of TPOT (any "
                            "2-4 points fit some line)")),
    "itl_tail_ratio": (3.0, "ITL p99 at 3x the median is a visible stall in a streamed answer"),
    "long_prompt_tokens": (1024, "prompts of 1k+ tokens take a step of their own when prefilled whole"),
    "fragmentation_share": (0.2, "20% of PyTorch's reserved memory unallocated is fragmentation worth a setting"),
    "preemptions_recurring": (2, ("preemptions recur (2 or more): the KV pool runs out again and again; a lone one with the "
                                  "sampled KV usage far from full is a moment's shortfall, not a pool that runs out")),
    "kv_full_pct": (98.0, "KV usage at 98%+ leaves no room for the next admission"),
    "prompt_per_output_min": (5.0, "5+ prompt tokens per output token: prefill dominates the work"),
    "prefix_hit_low_pct": (10.0, "a hit rate under 10% means the shared prefixes (if any) are recomputed"),
    "proxy_ttft_share": (0.8, "client TTFT at 80%+ of client E2E: the stream arrives nearly whole"),
    "proxy_server_share": (0.3, "server TTFT under 30% of client TTFT: the delay is on the path"),
    "replicas_min": (4, "over-replication is a fleet question: at least 4 replicas"),
    "replica_running_max": (8.0, "8 or fewer sequences per replica leaves the weight pass nearly unshared"),
    "replica_kv_max_pct": (30.0, "KV usage under 30%: the replicas hold far more cache than they use"),
    "admission_running_share": (0.5, "running at most half the cap while requests wait"),
    "admission_kv_max_pct": (50.0, "KV at most half used: blocks are free"),
    "stats_min_samples": (10, "token ratios from stats lines need a window of at least 10 samples, not a burst"),
    "healthy_min_samples": (5, "a serving verdict of healthy needs at least 5 stats samples ..."),
    "healthy_min_requests": (20, "... or a benchmark of at least 20 completed requests"),
}


DEFAULT_CAP = 256  # vLLM's default max_num_seqs, used only to size over-replication when the config is absent


def _budgets(slo: dict) -> str:
    return ", ".join(f"{name}={value:g}" for name, value in slo.items()) if slo else "no latency budgets (none given with --slo)"


def _finite_runs(serving: ServingSummary) -> list[BenchRecord]:
    """The benchmark records with a finite request rate and a completion rate (what a sweep is judged on)."""
    return [run for run in serving.bench if isinstance(run.request_rate, (int, float)) and math.isfinite(run.request_rate)
            and run.request_throughput]


@dataclass(frozen=True, slots=True)
class CapacityEvidence:
    """What at_capacity fired on: the arrival and completion rates (None from the stats lines), the
    share of TTFT it explains (%) and the TTFT in words."""

    arrival: float | None
    capacity: float | None
    impact: float
    ttft_text: str
    served: float | None = None  # the completion rate of the run the arrival rate is of (capacity: the highest)


def _capacity_from_sweep(bench: list[BenchRecord], queue_share, served: list[float]) -> tuple[CapacityEvidence, list] | None:
    """Arrivals above completions with TTFT growing with the rate, in one benchmark series (``bench``: its
    runs at a finite rate; ``served``: the completion rates of all its runs, a rate-inf run's included)."""
    base = min((run.mean_ttft_ms for run in bench if run.mean_ttft_ms), default=None)
    over = [run for run in bench if saturates(run.request_rate, run.request_throughput, run.max_concurrency,
                                              run.mean_ttft_ms, base, len(bench))]
    if not over:
        return None
    top = max(over, key=lambda run: run.request_rate)
    capacity = max(served)
    lowest = min((run for run in bench if run.mean_ttft_ms == base), key=lambda run: run.request_rate)
    if len(bench) > 1:
        impact = 100.0 * (top.mean_ttft_ms - base) / top.mean_ttft_ms
    else:
        impact = 100.0 * queue_share if queue_share is not None else 100.0 * (1 - capacity / top.request_rate)
    fired = CapacityEvidence(top.request_rate, capacity, impact,
                             f"mean TTFT {ms(top.mean_ttft_ms)} against {ms(base)} at low load" if len(bench) > 1
                             else f"mean TTFT {ms(top.mean_ttft_ms)}", top.request_throughput)
    evidence = [
        ev("arrival_rate_rps", top.request_rate, "req/s", None, text=f"arrival rate (configured): {rps(top.request_rate)}"),
        ev("completed_rps", round(top.request_throughput, 3), "req/s", f"the {top.request_rate:g} req/s run",
           text=f"completed in that run: {rps(top.request_throughput)} (completed / duration)"),
        ev("capacity_rps", round(capacity, 3), "req/s", None,
           text=f"capacity: {rps(capacity)}, the highest completion rate measured over "
                f"{plural(len(served), 'benchmark run')}"),
        ev("mean_ttft_ms", top.mean_ttft_ms, "ms", f"requests at {top.request_rate:g} req/s",
           text=f"mean TTFT {ms(top.mean_ttft_ms)} at {top.request_rate:g} req/s"
                + (f" vs {ms(base)} at {lowest.request_rate:g} req/s (the lowest mean TTFT of the series)"
                   if len(bench) > 1 else "")),
    ]
    return fired, evidence


def _queue_share(serving: ServingSummary) -> float | None:
    """The server's mean queue time over its mean TTFT (at most 1), or None when either is not measured."""
    queue, ttft = serving.latency.server.queue, serving.latency.server.ttft
    if queue and queue.mean_ms and ttft and ttft.mean_ms:
        return min(1.0, queue.mean_ms / ttft.mean_ms)
    return None


def _capacity_from_bench(serving: ServingSummary, queue_share) -> tuple[CapacityEvidence | None, list]:
    """at_capacity from the benchmark runs: the sweep whose overload explains most of its TTFT."""
    fired, evidence = None, []
    groups: dict[str, list] = {}
    for run in _finite_runs(serving):  # a file may hold several sweeps (deployments, models): each is judged on its own
        groups.setdefault(run.group or "", []).append(run)
    names = series_names(list(groups))
    for name, runs in groups.items():
        served = [run.request_throughput for run in serving.bench if (run.group or "") == name and run.request_throughput]
        got = _capacity_from_sweep(runs, queue_share, served)
        if got and (fired is None or got[0].impact > fired.impact):
            series = [ev("sweep", name, "", None, text=f"benchmark series: {names[name]}")] if len(groups) > 1 else []
            fired, evidence = got[0], got[1] + series
    return fired, evidence


def _capacity_from_queue(serving: ServingSummary, queue_share) -> tuple[CapacityEvidence | None, list]:
    """at_capacity from the engine's stats lines: a standing, growing queue behind a full batch or KV
    pool. Without the server's queue histogram, the share is the queue's of the requests in the
    system, L_q / L: by Little's law (one arrival rate) the queue's share of the time in system, a
    lower bound of its share of TTFT (TTFT <= the time in system)."""
    stats = serving.stats
    if not (stats and stats.waiting_mean is not None and stats.samples >= 1):
        return None, []
    cap = cap_of(serving)
    if not standing_queue(stats, cap):
        return None, []
    in_system = stats.waiting_mean + (stats.running_mean or 0)
    impact = 100.0 * queue_share if queue_share is not None else 100.0 * stats.waiting_mean / in_system
    fired = CapacityEvidence(None, None, impact,
                             f"{requests(stats.waiting_mean)} requests wait on average behind "
                             f"{requests(stats.running_mean)} running"
                             + (f", KV cache up to {stats.kv_usage_max:g}% full" if stats.kv_usage_max is not None else ""))
    law = serving.littles_law
    evidence = [
        ev("arrival_rate_rps", None, "req/s", None, text="arrival rate: not measured (no benchmark or request counters)"),
        ev("capacity_rps", None, "req/s", None, text="capacity: not measured; the queue grows at the load seen"),
        ev("waiting_mean", stats.waiting_mean, "requests", f"{stats.samples} stats samples",
           text=f"waiting queue non-empty in {pct(stats.waiting_share_pct)} of {stats.samples} samples, mean "
                f"{requests(stats.waiting_mean)}, max {requests(stats.waiting_max)} (first {requests(stats.waiting_first)}, "
                f"last {requests(stats.waiting_last)})"),
        ev("littles_law_in_system", law.in_system, "requests", None,
           text=f"requests in the system (running + waiting): {requests(law.in_system)}"),
        ev("kv_usage_max", stats.kv_usage_max, "%", "KV cache pool",
           text=f"KV cache usage up to {stats.kv_usage_max}%"
           + (f"; running up to {stats.running_max:g} of max {cap:g} sequences" if cap else "")),
    ]
    if queue_share is None:
        share = 100.0 * stats.waiting_mean / in_system
        evidence.append(ev("queue_share_of_time_in_system", round(share, 2), "%", "requests in the system (L_q / L)",
                           text=f"the queue holds {pct(share)} of the requests in the system ({requests(stats.waiting_mean)} of "
                                f"{requests(in_system)}): by Little's law the share of the time in system spent waiting, at "
                                "least that share of the time to first token"))
    return fired, evidence


def _capacity_fields(fired: CapacityEvidence, queue_share) -> dict:
    """The catalog fields of at_capacity: arrivals, capacity, replicas needed, the queue's share of TTFT."""
    arrival, capacity = fired.arrival, fired.capacity
    if arrival and capacity:
        need = math.ceil(arrival / capacity)
        replicas_needed = f"{plural(need, 'replica')} of the measured size ({arrival / capacity:.2f}x today's capacity)"
    else:
        replicas_needed = ("the arrival rate divided by the per-replica completion rate, rounded up (measure both with a "
                           "benchmark sweep)")
    served = fired.served if fired.served is not None else capacity
    return {"arrival": rps(arrival) if arrival else "more requests",
            "served": rps(served) if served else "fewer", "capacity": rps(capacity) if capacity else "fewer",
            "ttft_text": fired.ttft_text,
            "capacity_per_replica": rps(capacity) if capacity else "completion rate",
            "arrival_plain": rps(arrival) if arrival else "the arrival rate", "replicas_needed": replicas_needed,
            "queue_clause": f" ({pct(100 * queue_share)} of the server's TTFT is queue time)" if queue_share is not None
            else ""}


def rule_at_capacity(ctx: Context):
    serving, slo = serving_summary(ctx.serving), ctx.slo
    queue_share = _queue_share(serving)
    fired, evidence = _capacity_from_bench(serving, queue_share)
    if fired is None:
        fired, queue_evidence = _capacity_from_queue(serving, queue_share)
        evidence += queue_evidence
    if fired is None:
        return None
    if queue_share is not None:
        evidence.append(ev("queue_share_of_ttft", round(100 * queue_share, 2), "%", "server TTFT (mean)",
                           text=f"server-side queue time is {pct(100 * queue_share)} of the server's mean TTFT"))
    budget = slo.get("ttft_p95_ms")
    if budget:
        evidence.append(ev("ttft_p95_budget_ms", budget, "ms", None, text=f"TTFT p95 budget {budget:g} ms"))
    from_queue_lengths = fired.arrival is None and queue_share is None  # L_q / L, not a share of a measured TTFT
    return catalog.make(
        "at_capacity", fired.impact, _capacity_fields(fired, queue_share),
        evidence, severity="high" if fired.impact >= 50 else "medium",
        denominator="time in system (L_q / L)" if from_queue_lengths else "time to first token",
        variant=None if fired.arrival else "queue", kind=ctx.kind)


TPOT_BUDGET_KEYS = ("tpot_p95_ms", "tpot_p99_ms", "tpot_p90_ms")  # the TPOT budget batch_past_knee reads, first given


def rule_batch_past_knee(ctx: Context):
    fit, slo = serving_summary(ctx.serving).tpot_fit, ctx.slo
    key = next((key for key in TPOT_BUDGET_KEYS if slo.get(key)), None)
    budget = slo[key] if key else None
    if not fit or not budget or not fit.model:
        return None
    if budget_check(ctx.serving, key, budget) is True:  # the TPOT users saw is within the budget: the fit's
        return None  # prediction past it is not what they see (a fit of the engine's counters can be 5x off)
    a, b, x_max = fit.a_ms, fit.b_ms_per_seq, fit.x_max
    at_max = fit.at(x_max)
    if at_max <= budget or a >= budget:
        return None
    cap = max(1, int((budget - a) / b))

    def throughput(running: float) -> float:  # sequences x tokens/ms each
        return running / (a + b * running)

    loss = 100.0 * (1 - throughput(cap) / throughput(x_max))
    impact = 100.0 * (at_max - budget) / at_max
    fit_text = f"TPOT = {a:.2f} ms + {b:.3f} ms x running"
    evidence = [
        ev("tpot_fit", {"a_ms": a, "b_ms_per_seq": b, "r2": fit.r2}, "ms", f"{fit.points} points",
           text=f"{fit_text} (r² {fit.r2:.2f}, {fit.points} points from {fit.source})"),
        ev("tpot_at_max_batch_ms", round(at_max, 3), "ms", f"{x_max:g} running sequences",
           text=f"predicted TPOT {at_max:.1f} ms at {x_max:g} running sequences, budget {budget:g} ms"),
        ev("max_num_seqs_for_slo", cap, "sequences", None, text=f"largest batch within the budget: {cap} running sequences"),
        ev("throughput_given_up_pct", round(loss, 2), "%", f"throughput at {x_max:g} sequences",
           text=f"capping at {cap} gives up {pct(loss)} of the throughput at {x_max:g}"),
    ]
    return catalog.make(
        "batch_past_knee", impact,
        {"fit_text": fit_text, "budget": f"{budget:g} ms", "cap": cap, "source": fit.source, "r2": f"{fit.r2:.2f}",
         "x_max": f"{x_max:g}", "tpot_at_max": f"{at_max:.1f} ms", "loss": pct(loss)},
        evidence, severity="high" if impact >= 25 else "medium", denominator="TPOT at the largest batch measured", kind=ctx.kind)


def _default_words(serving: ServingSummary, key: str) -> str:
    """' (the vLLM V1 default, ...)' when the engine default, not the capture, gave ``key``'s value; else ''."""
    feature = serving.features().get(key)
    return f" ({feature.where})" if feature and feature.from_default else ""


def _chunking_words(chunked, budget_tokens) -> str:
    """Chunked prefill and its budget in words, as the evidence has them."""
    return ("off" if chunked is False else "not stated in the config" if chunked is None else
            f"on, max_num_batched_tokens {budget_tokens}" if budget_tokens
            else "on, chunk budget (max_num_batched_tokens) not stated")


def _stall_evidence(serving: ServingSummary, tail: InterTokenTail, ratio: float, longest: float, chunked,
                    budget_tokens) -> list:
    """prefill_stall's evidence: the ITL median, p99 and their ratio, the longest prompt, chunked prefill, the max gap."""
    evidence = [
        ev("itl_p50_ms", round(tail.p50, 3), "ms", tail.source, text=f"ITL median {ms(tail.p50)} ({tail.source})"),
        ev("itl_p99_ms", round(tail.p99, 3), "ms", tail.source, text=f"ITL p99 {ms(tail.p99)}: {ratio:.1f}x the median"),
        ev("itl_p99_over_p50", ratio, "x", "ITL median", text=f"ITL p99 over the median: {ratio:.1f}x"),
        ev("longest_prompt_tokens", longest, "tokens", None, text=f"prompts up to {longest:,.0f} tokens"),
        ev("chunked_prefill", chunked, "", None, text="chunked prefill: " + _chunking_words(chunked, budget_tokens)
           + _default_words(serving, "enable_chunked_prefill")),
    ]
    if tail.max:
        evidence.append(ev("itl_max_ms", round(tail.max, 3), "ms", tail.source, text="longest "
                                                                                     f"inter-token gap {ms(tail.max)}"))
    return evidence


def rule_prefill_stall_itl(ctx: Context):
    serving, slo = serving_summary(ctx.serving), ctx.slo
    tail = inter_token_tail(serving)
    if not tail:
        return None
    ratio = round(tail.p99 / tail.p50, 2)  # the one value every text of it formats
    if ratio < t("itl_tail_ratio"):
        return None
    chunked = serving.effective_config().get("enable_chunked_prefill")
    longest = serving.prompts.longest()
    if longest < t("long_prompt_tokens"):
        return None
    # With chunked prefill on the rule still fires on the tail: the catalog's falsifier decides (a chunk
    # budget of at most 2048 tokens rules the mechanism out; an unstated one leaves a large default chunk).
    budget_tokens = serving.config.get("max_num_batched_tokens")
    impact = 100.0 * (tail.p99 - tail.p50) / tail.p99
    budget = slo.get("itl_p99_ms")
    evidence = _stall_evidence(serving, tail, ratio, longest, chunked, budget_tokens)
    severity = "high" if (tail.max or tail.p99) >= 10 * tail.p50 else "medium"
    if budget is not None:
        over = tail.p99 > budget
        evidence.append(ev("itl_p99_budget_ms", budget, "ms", None,
                           text=f"ITL p99 {ms(tail.p99)} is {'over' if over else 'within'} the budget of {budget:g} ms"))
        if over:
            severity = "high"
    return catalog.make(
        "prefill_stall", impact,
        {"p99": ms(tail.p99), "p50": ms(tail.p50), "ratio": f"{ratio:.1f}x",
         "max_text": f", max {ms(tail.max)}" if tail.max else "",
         "prompt_text": f"prompts up to {longest:,.0f} tokens, chunked prefill " + (
             "off" if chunked is False else "not enabled in the config" if chunked is None else
             f"on with chunks of up to {budget_tokens:,} tokens" if budget_tokens else "on, chunk budget not stated")},
        evidence, severity=severity, denominator="ITL p99", entry="prefill_stall_itl",
        variant="chunked" if chunked is True else None, kind=ctx.kind)


PREFIX_CACHE_KEYS = ("enable_prefix_caching", "disable_radix_cache")  # vLLM's switch, SGLang's (inverted)


def prefix_caching(serving: ServingSummary | dict) -> tuple[bool | None, str]:
    """(whether prefix caching ran: True, False or None when not known; where that comes from, in
    words: printed, the engine default of the named or assumed generation, or why it is not known)."""
    summary = serving_summary(serving)
    features, config = summary.features(), summary.effective_config()
    for key in PREFIX_CACHE_KEYS:
        if config.get(key) is not None:
            on = bool(config[key]) if key == PREFIX_CACHE_KEYS[0] else not config[key]
            return on, features[key].where if key in features else f"{key}={config[key]}"
    where = next((features[key].where for key in PREFIX_CACHE_KEYS if key in features), None)
    return None, where or "no engine log or config in the case"


def _prefix_miss_judged(serving: ServingSummary, tokens: Tokens, off: bool) -> bool:
    """Whether prefix_cache_miss may judge the case: a prompt-heavy ratio (from enough stats samples when
    it is theirs) and a hit rate measured low, or prefix caching off."""
    ratio, hit = tokens.prompt_per_output, tokens.prefix_hit_pct
    if ratio is None or ratio < t("prompt_per_output_min"):
        return False
    if tokens.source.startswith("engine stats") and (serving.stats.samples if serving.stats else 0) < t("stats_min_samples"):
        return False
    if hit is None and not off:
        return False
    return hit is None or hit < t("prefix_hit_low_pct")


def rule_prefix_cache_miss(ctx: Context):
    serving = serving_summary(ctx.serving)
    tokens = serving.tokens or Tokens(None, None, None, None, None, None, None)
    ratio = tokens.prompt_per_output
    caching, caching_where = prefix_caching(serving)
    state = "on" if caching else "off" if caching is False else "not known"
    off = caching is False
    hit = tokens.prefix_hit_pct
    if not _prefix_miss_judged(serving, tokens, off):
        return None
    share = ratio / (ratio + 1)  # prompt tokens / all tokens processed
    impact = 100.0 * share * (1 - (hit or 0.0) / 100.0)
    measured = f"hit rate {pct(hit)} from {tokens.prefix_hit_source}" if hit is not None else "hit rate not measured"
    hit_text = f"prefix caching {state} ({caching_where}); {measured}"
    evidence = [
        ev("prompt_per_output", ratio, "tokens", "output token", text=f"{ratio:,.1f} prompt tokens per "
                                                                      f"output token ({tokens.source})"),
        ev("prefix_caching", f"{state} ({caching_where})", "", None, text=f"prefix caching {state} ({caching_where})"),
        ev("prefix_hit_pct", hit, "%", "prompt tokens looked up", text=measured),
        ev("uncached_prompt_share", round(impact, 2), "%", "tokens processed",
           text=f"prompt tokens computed without a cache hit: {pct(impact)} of all tokens processed"),
    ]
    return catalog.make("prefix_cache_miss", impact,
                        {"ratio": f"{ratio:,.1f}", "hit": "off" if off else pct(hit), "hit_text": hit_text},
                        evidence, severity="medium" if ratio >= 10 else "low", denominator="tokens processed",
                        variant="cached" if caching else None, kind=ctx.kind)


def rule_proxy_buffering(ctx: Context):
    serving = serving_summary(ctx.serving)
    before = (ctx.fired.get(rule_id) for rule_id in PROXY_AFTER)
    ttft_claimed = sum(finding.impact_pct for finding in before if finding and finding.axis == "ttft")
    client, server = serving.latency.client, serving.latency.server.ttft
    c_ttft = (client.ttft.mean or client.ttft.median) if client.ttft else None
    c_e2e = (client.e2el.mean or client.e2el.median) if client.e2el else None
    s_ttft = (server.mean_ms or (server.p50.value_ms if server.p50 else None)) if server else None
    if not (c_ttft and c_e2e and s_ttft):
        return None
    if c_ttft < t("proxy_ttft_share") * c_e2e or s_ttft > t("proxy_server_share") * c_ttft:
        return None
    impact = min(100.0 - ttft_claimed, 100.0 * (c_ttft - s_ttft) / c_ttft)
    evidence = [
        ev("client_ttft_ms", round(c_ttft, 3), "ms", "benchmark requests", text=f"client TTFT (mean) {ms(c_ttft)}"),
        ev("client_e2e_ms", round(c_e2e, 3), "ms", "benchmark requests", text=f"client end-to-end latency (mean) {ms(c_e2e)}"),
        ev("server_ttft_ms", round(s_ttft, 3), "ms", "server histogram", text=f"server TTFT {ms(s_ttft)} (/metrics histogram)"),
    ]
    return catalog.make("proxy_buffering", impact,
                        {"client_ttft": ms(c_ttft), "server_ttft": ms(s_ttft), "client_e2e": ms(c_e2e),
                         "ttft_share": pct(100.0 * c_ttft / c_e2e)},
                        evidence, severity="high" if impact >= 50 else "medium", denominator="time to first token", kind=ctx.kind)


def rule_over_replicated(ctx: Context):
    serving = serving_summary(ctx.serving)
    replicas = [replica for replica in serving.replicas if replica.running is not None]
    data_parallel = serving.config.get("data_parallel_size")
    if len(replicas) < t("replicas_min"):
        return None
    running = [replica.running for replica in replicas]
    waiting = [replica.waiting or 0 for replica in replicas]
    kv = [replica.kv_usage_pct for replica in replicas if replica.kv_usage_pct is not None]
    per = sum(running) / len(replicas)
    if per > t("replica_running_max") or max(waiting) > 0 or (kv and max(kv) >= t("replica_kv_max_pct")):
        return None
    cap = cap_of(serving) or DEFAULT_CAP
    target = max(t("replica_running_max") * 4, min(cap, 64))
    need = max(1, math.ceil(sum(running) / target))
    impact = 100.0 * (1 - per / cap)
    evidence = [
        ev("replicas", len(replicas), "replicas", None,
           text=f"{len(replicas)} replicas" + (f" (data parallel size {data_parallel})" if data_parallel else "")),
        ev("running_per_replica", round(per, 2), "sequences", "replica", text=f"{per:.1f} running "
                                                                              "sequences per replica on average"),
        ev("waiting_max", max(waiting), "requests", None, text="no request waiting on any replica"),
        ev("kv_usage_max", max(kv) if kv else None, "%", "KV cache pool",
           text=f"KV cache usage at most {max(kv):.1f}%" if kv else "KV cache usage not measured"),
        ev("idle_slots_pct", round(impact, 2), "%", f"batch slots ({cap} per "
                                                    f"replica{'' if cap_of(serving) else ', vLLM default'})"),
    ]
    return catalog.make("over_replicated", impact,
                        {"replicas": len(replicas), "per_replica": f"{per:.1f}", "kv": pct(max(kv)) if kv else "n/a",
                         "replicas_needed": plural(need, "replica"), "target": int(target)},
                        evidence, severity="medium", denominator="batch slots of all replicas", kind=ctx.kind)


def _admission_evidence(stats: StatsSummary, cap) -> list:
    """admission_blocked's evidence: the queue's share of samples, the running batch against its cap, the KV usage."""
    return [
        ev("waiting_share_pct", stats.waiting_share_pct, "%", f"{stats.samples} stats samples",
           text=f"requests waiting in {pct(stats.waiting_share_pct)} of {stats.samples} samples "
                f"(mean {requests(stats.waiting_mean)})"),
        ev("running_mean", stats.running_mean, "sequences", f"max_num_seqs {cap:g}",
           text=f"running {requests(stats.running_mean)} on average (max {requests(stats.running_max)}) of a cap of {cap:g}"),
        ev("kv_usage_max", stats.kv_usage_max, "%", "KV cache pool", text=f"KV cache at most {stats.kv_usage_max}% used"),
    ]


def rule_admission_blocked(ctx: Context):
    serving = serving_summary(ctx.serving)
    stats = serving.stats
    cap = cap_of(serving)
    if not stats or not cap or stats.running_mean is None:
        return None
    if stats.waiting_share_pct < t("queue_share_min_pct") or (stats.kv_usage_max or 0) >= t("admission_kv_max_pct"):
        return None
    if stats.running_mean > t("admission_running_share") * cap or stats.kv_usage_max is None:
        return None
    impact = 100.0 * (1 - stats.running_mean / cap)
    evidence = _admission_evidence(stats, cap)
    if lone_preemption(ctx.serving):
        count = (serving.memory.preemptions or 0) + (serving.memory.retractions or 0)
        evidence.append(ev("preemptions", count, "events", "the log or counters",
                           text=f"{plural(count, 'preemption')} with the KV cache at most {stats.kv_usage_max}% used: a lone "
                                "shortfall, not a pool that runs out"))
    return catalog.make("admission_blocked", impact,
                        {"waiting_share": pct(stats.waiting_share_pct), "running": requests(stats.running_mean),
                         "cap": f"{cap:g}",
                         "kv": pct(stats.kv_usage_max)},
                        evidence, severity="high" if impact >= 50 else "medium", denominator="batch slots (max_num_seqs)",
                        kind=ctx.kind)


def _enough_measured(serving: ServingSummary) -> bool:
    """Enough stats samples, or a benchmark of enough completed requests, to call serving healthy."""
    stats = serving.stats
    return bool((stats and stats.samples >= t("healthy_min_samples")) or any(
        (run.completed or 0) >= t("healthy_min_requests") for run in serving.bench))


def rule_healthy_serving(ctx: Context):
    serving, slo, findings = serving_summary(ctx.serving), ctx.slo, ctx.findings
    if ctx.devices or findings:
        return None  # a case with a GPU trace is judged by the trace's healthy rule
    if tail_unexplained(serving, findings):
        return None  # an inter-token tail of that size is a symptom with no cause found, not health
    if tpot_needs_budget(serving, slo):
        return None  # the page shows the knee: without a budget, "healthy" is not shown
    measured = measured_serving(serving)
    stats = serving.stats
    if not measured or not _enough_measured(serving) or (stats and stats.waiting_share_pct >= t("queue_share_min_pct")):
        return None
    if any(budget_check(serving, key, value) is not True for key, value in slo.items()):
        return None  # a budget exceeded, or one that nothing measured can show is met
    evidence = [ev("measured", "; ".join(measured), "", None, text="measured: " + "; ".join(measured)),
                ev("budgets", dict(slo), "ms", None, text="budgets checked: " + _budgets(slo))]
    fields = {"what": "; ".join(measured[:3]), "budgets": _budgets(slo), "load": _load_words(stats),
              "latencies": "the latencies measured are within the budgets given" if slo
              else "no latency budget was given (--slo), so the latencies are not held to one"}
    return catalog.make("healthy", 0.0, fields, evidence,
                        severity="info", denominator="serving artifacts", entry="healthy_serving", kind=ctx.kind)


def _load_words(stats) -> str:
    """What the healthy serving mechanism says of the engine's load: what its stats lines showed, or that none
    were given (a benchmark alone shows no queue, batch or KV cache)."""
    if not stats:
        return "No engine stats lines were given, so the queue, the batch and the KV cache were not measured;"
    kv = f", the KV cache at most {pct(stats.kv_usage_max)} used" if stats.kv_usage_max is not None else ""
    waited = (f"the waiting queue was non-empty in {pct(stats.waiting_share_pct)} of" if stats.waiting_share_pct
              else "no request was waiting in any of")
    return f"{waited[:1].upper()}{waited[1:]} {plural(stats.samples, 'stats sample')}{kv},"


PROXY_AFTER = ("at_capacity",)  # the TTFT rules before proxy_buffering: it claims what they left of the TTFT
SERVING = ("serving",)
RULES = [
    Rule("at_capacity", "serving", rule_at_capacity, reads=("serving.bench", "serving.stats", "serving.latency", "slo"),
         requires=SERVING, thresholds=("capacity_rate_excess", "capacity_ttft_growth", "queue_share_min_pct",
                                       "queue_kv_full_pct", "queue_cap_share", "queue_trend_min_samples")),
    Rule("batch_past_knee", "serving", rule_batch_past_knee, reads=("serving.tpot_fit", "slo"), requires=SERVING,
         thresholds=("knee_r2_min", "knee_min_points")),
    Rule("prefill_stall_itl", "serving", rule_prefill_stall_itl, reads=("serving.latency", "serving.prompts", "slo"),
         requires=SERVING, finding="prefill_stall", thresholds=("itl_tail_ratio", "long_prompt_tokens")),
    Rule("memory_pressure", "serving", rule_memory_pressure, reads=("serving.memory", "serving.stats", "serving.config"),
         requires=SERVING, thresholds=("kv_full_pct", "fragmentation_share", "preemptions_recurring", "queue_kv_full_pct")),
    Rule("prefix_cache_miss", "serving", rule_prefix_cache_miss, reads=("serving.tokens", "serving.config",
                                                                         "serving.engine_defaults"),
         requires=SERVING, thresholds=("prompt_per_output_min", "prefix_hit_low_pct", "stats_min_samples")),
    Rule("proxy_buffering", "serving", rule_proxy_buffering, reads=("serving.latency",), requires=SERVING,
         thresholds=("proxy_ttft_share", "proxy_server_share"), depends_on=PROXY_AFTER),
    Rule("over_replicated", "serving", rule_over_replicated, reads=("serving.replicas", "serving.config"), requires=SERVING,
         thresholds=("replicas_min", "replica_running_max", "replica_kv_max_pct")),
    Rule("admission_blocked", "serving", rule_admission_blocked, reads=("serving.stats", "serving.config"),
         requires=SERVING, thresholds=("queue_share_min_pct", "admission_kv_max_pct", "admission_running_share")),
]
HEALTHY = Rule("healthy_serving", "verdict", rule_healthy_serving, reads=("serving", "slo", "findings"), requires=SERVING,
               finding="healthy", thresholds=("itl_tail_ratio", "healthy_min_samples", "healthy_min_requests",
                                              "queue_share_min_pct"))
