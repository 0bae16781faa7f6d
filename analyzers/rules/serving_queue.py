"""The engine's waiting queue and saturation, as the serving rules and every page read them: whether a
benchmark run saturated the server (its completion rate is then the capacity, not a lower bound of it),
whether a queue stands behind a full batch or KV pool, its trend over the stats samples, and the queue in
words (the serving block's ``queue``: shown whichever finding fires). Thresholds: rules/serving.py."""

from __future__ import annotations

import math

from tracetriage.analyzers.rules.context import t
from tracetriage.analyzers.rules.slo import cap_of
from tracetriage.analyzers.serving_metrics import ServingSummary, StatsSummary
from tracetriage.wording import pct, plural, requests


def saturates(rate, throughput, max_concurrency, mean_ttft_ms, lowest_ttft_ms, finite_runs: int) -> bool:
    """Whether one benchmark run saturated the server, so that its completion rate is the server's capacity,
    not a lower bound of it: all requests sent at once with no concurrency cap (rate inf), or arrivals above
    its completions by capacity_rate_excess with its mean TTFT at capacity_ttft_growth x the lowest of the
    series' finite-rate runs (a queue that grows). A series of one finite-rate run cannot show TTFT growth:
    its arrivals must be 1.5x its completions. A closed-loop run (a max concurrency) is paced by the client."""
    if not (throughput and isinstance(rate, (int, float))):
        return False
    if not math.isfinite(rate):
        return max_concurrency is None
    if finite_runs == 1:  # one record: TTFT growth cannot be measured, the rate gap must be clear
        return bool(rate > 1.5 * throughput and mean_ttft_ms)
    return bool(rate > t("capacity_rate_excess") * throughput and mean_ttft_ms and lowest_ttft_ms
                and mean_ttft_ms >= t("capacity_ttft_growth") * lowest_ttft_ms)


def queue_behind_full(stats: StatsSummary, cap) -> bool:
    """A queue in most samples, behind a full batch or KV pool, at least half the batch deep."""
    full = (stats.kv_usage_max or 0) >= t("queue_kv_full_pct") or (cap and (stats.running_max or 0) >= t("queue_cap_share") * cap)
    deep = (stats.waiting_mean or 0) >= max(1.0, 0.5 * (stats.running_mean or 0))
    return bool(stats.waiting_share_pct >= t("queue_share_min_pct") and full and deep)


def standing_queue(stats: StatsSummary, cap) -> bool:
    """:func:`queue_behind_full` over at least queue_trend_min_samples samples, and not shrinking
    (the last sample's queue at least the first's): a queue that does not drain."""
    growing = (stats.waiting_last or 0) >= (stats.waiting_first or 0)
    return stats.samples >= t("queue_trend_min_samples") and growing and queue_behind_full(stats, cap)


def queue_trend(stats: StatsSummary) -> str | None:
    """The waiting queue's trend over the stats samples, first sample against last: ``grows``, ``holds``
    (non-empty and level) or ``drains``; ``empty`` when no sample shows a queue; None with fewer than
    queue_trend_min_samples samples (one sample is a moment, two cannot tell a trend from a burst)."""
    if stats.waiting_first is None or stats.waiting_last is None or stats.samples < t("queue_trend_min_samples"):
        return None
    if not stats.waiting_max:
        return "empty"
    first, last = stats.waiting_first, stats.waiting_last
    return "grows" if last > first else "drains" if last < first else "holds"


def queue_words(serving: ServingSummary | None) -> str | None:
    """The waiting queue as measured, in words, for every page whichever finding fires (the serving block's
    ``queue``): from the engine's stats lines its share of samples, mean, max, first and last sample and
    their trend (:func:`queue_trend`); without stats lines, the /metrics scrapes' waiting gauges (a moment,
    no trend). None when nothing measured a queue."""
    stats = serving.stats if serving else None
    if stats and stats.waiting_mean is not None:
        samples = plural(stats.samples, "stats sample")
        if not stats.waiting_max:
            return "no request waiting in " + ("the one stats sample" if stats.samples == 1 else f"any of {samples}")
        trend = queue_trend(stats)
        if stats.samples == 1:
            moves = f" (one sample: a moment; a trend needs at least {t('queue_trend_min_samples')} samples)"
        else:
            moves = (f"; first sample {requests(stats.waiting_first)}, last {requests(stats.waiting_last)}"
                     + {"grows": ": the queue grows", "drains": ": the queue drains", "holds": ": the queue holds level"}.get(
                         trend, f" (a trend needs at least {t('queue_trend_min_samples')} samples)"))
        return (f"waiting queue non-empty in {pct(stats.waiting_share_pct)} of {samples}, mean {requests(stats.waiting_mean)}, "
                f"max {requests(stats.waiting_max)} requests{moves}")
    scraped = [replica.waiting for replica in (serving.replicas if serving else ()) if replica.source == "metrics"
               and isinstance(replica.waiting, (int, float))]
    if scraped:
        where = f" summed over {len(scraped)} replicas" if len(scraped) > 1 else ""
        if not sum(scraped):
            return f"no request waiting at the /metrics scrape{where.replace('summed', 'of any of')} (one moment)"
        return (f"waiting queue at the /metrics scrape: {requests(sum(scraped))} requests{where} (one moment: its trend "
                "needs the engine's stats lines)")
    return None


def queue_moment(serving: ServingSummary | None) -> str | None:
    """What too few stats samples show of a queue that looks like at_capacity's (behind a full batch
    or KV pool, deep) but whose trend they cannot show, in words; None otherwise (no such queue, or
    enough samples for at_capacity to judge it)."""
    stats = serving.stats if serving else None
    if not (stats and stats.waiting_mean is not None and 0 < stats.samples < t("queue_trend_min_samples")):
        return None
    cap = cap_of(serving)
    if not queue_behind_full(stats, cap):
        return None
    kv = f", KV cache {stats.kv_usage_max:g}% full" if stats.kv_usage_max is not None else ""
    need = f"at least {t('queue_trend_min_samples')} samples"
    if stats.samples == 1:
        share = 100.0 * stats.waiting_last / (stats.waiting_last + (stats.running_max or 0))
        return (f"one stats sample: {stats.waiting_last:,.0f} requests queued behind {stats.running_max:,.0f} running{kv} "
                f"({pct(share)} of the requests in the system waiting), at that moment; whether the queue drains or "
                f"keeps growing (at_capacity) is not shown by one sample: it needs {need}")
    return (f"{plural(stats.samples, 'stats sample')}: {stats.waiting_first:,.0f} then {stats.waiting_last:,.0f} requests "
            f"queued behind up to {stats.running_max:,.0f} running{kv}; whether the queue drains or keeps growing "
            f"(at_capacity) is not shown by {stats.samples} samples: it needs {need}")
