"""Serving figures that measure one thing two ways, checked against each other: where they
disagree the serving block says so (``serving.cross_checks``), so a reader is never left to
trust one figure and distrust the other unwarned.

- **Client and server latency.** The benchmark's (client) p50 of TTFT, TPOT or ITL against the
  same percentile of the server's /metrics histogram (its value, not a lower bound): apart by at
  least :data:`APART_RATIO` x and by more than the histogram's bucket resolution.
- **The TPOT fit and the measured TPOT.** A fit from the engine's stats lines (decode time per
  token from its counters: running / generation throughput) evaluated at the mean running batch,
  against the benchmark's mean TPOT: apart by at least :data:`APART_RATIO` x.
"""

from __future__ import annotations

from tracetriage.analyzers.serving_metrics import Latency, StatsSummary, TpotFit
from tracetriage.wording import ms

APART_RATIO = 2.0  # two measures of one latency this far apart are not rounding or bucket noise


def cross_checks(latency: Latency, fit: TpotFit | None, stats: StatsSummary | None) -> list[str]:
    """The disagreements between serving figures, one sentence each (empty when they agree or
    when only one side was measured)."""
    sentences = []
    for metric in ("ttft", "tpot", "itl"):
        figures, server = latency.client.of(metric), latency.server.of(metric)
        measured = figures.p50 if figures else None
        bucket = server.p50 if server else None
        if not measured or not bucket or bucket.lower_bound or not bucket.value_ms:
            continue
        histogram = float(bucket.value_ms)
        ratio = max(measured, histogram) / min(measured, histogram)
        if ratio >= APART_RATIO and abs(measured - histogram) > (bucket.resolution_ms or 0.0):
            sentences.append(
                f"{metric.upper()} p50 disagrees: the benchmark (client) measured {ms(measured)}, the server's /metrics "
                f"histogram {ms(histogram)} ({ratio:.1f}x apart, beyond its buckets): "
                + ("the client counts time the server's histogram does not (a queue in front of the engine, a proxy, "
                   "the network), or the two cover different requests" if measured > histogram else
                   "the server's histogram holds requests the benchmark did not send (other clients, another period)"))
    mean_tpot = latency.client.tpot.mean if latency.client.tpot else None
    if fit and str(fit.source).startswith("engine stats") and mean_tpot and stats and stats.running_mean:
        predicted = fit.at(stats.running_mean)
        ratio = max(predicted, mean_tpot) / min(predicted, mean_tpot) if predicted > 0 else None
        if ratio is not None and ratio >= APART_RATIO:
            sentences.append(
                f"TPOT model and measured TPOT disagree: the fit predicts {ms(predicted)} at the mean batch of "
                f"{stats.running_mean:,.1f} running, the benchmark measured a mean TPOT of {ms(mean_tpot)} "
                f"({ratio:.1f}x apart): the fit is time per token from the engine's counters, "
                + ("the client counts every gap between tokens (prefill steps that stall decoding, preemptions, the "
                   "streaming path)" if mean_tpot > predicted else
                   "which count tokens the benchmark did not stream (prefill, other clients), or the stats lines and "
                   "the benchmark cover different periods")
                + "; the client's figure is what users see")
    return sentences
