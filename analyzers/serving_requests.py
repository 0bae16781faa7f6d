"""The ``serving.requests`` block: the shape of the traffic a serving capture saw, per request.

* ``source``: where the lengths come from: a benchmark's per-request arrays (``input_lens`` /
  ``output_lens`` of the record the client latency uses: the highest finite request rate, else
  the last), else the ``/metrics`` histograms of tokens per request (``vllm:request_prompt_tokens``,
  ``vllm:request_generation_tokens``: mean = sum / count, quantiles by interpolation in the bucket,
  no per-request values), else none.
* ``input`` / ``output``: the token lengths of the requests that succeeded: ``n``, ``mean``,
  ``p50``, ``p90``, ``p99`` (nearest rank on the sorted values), ``max``; ``lengths``: the values
  themselves, sorted (what a two-sample test across a deploy needs; None from histograms).
* ``failed`` / ``sent``: requests the benchmark counted as failed (an ``errors`` string) of those
  it sent; ``finish_reasons``: finished requests per reason (``stop``, ``length``, ``abort``) from
  ``vllm:request_success_total``; ``request_rate`` / ``max_concurrency``: the record's load.
"""

from __future__ import annotations

import math

from tracetriage.analyzers.serving_inputs import BenchInput
from tracetriage.analyzers.serving_metrics import LengthStats, Requests

PROMPT_HISTOGRAM = "vllm:request_prompt_tokens"
OUTPUT_HISTOGRAM = "vllm:request_generation_tokens"


def _nearest_rank(values: list[int], q: float) -> int:
    """The q-th percentile (0-100) of sorted values by nearest rank."""
    return values[min(len(values) - 1, max(0, math.ceil(q / 100.0 * len(values)) - 1))]


def length_stats(lengths: list[int] | None) -> LengthStats | None:
    """n, mean, p50, p90, p99, max and the sorted lengths of per-request token counts."""
    if not lengths:
        return None
    ordered = sorted(lengths)
    return LengthStats(len(ordered), round(sum(ordered) / len(ordered), 3), _nearest_rank(ordered, 50),
                       _nearest_rank(ordered, 90), _nearest_rank(ordered, 99), ordered[-1], ordered)


def _histogram_stats(caps, name: str) -> LengthStats | None:
    """n, mean and quantiles of a tokens-per-request histogram merged over every scrape's replicas."""
    buckets: dict[float, float] = {}
    total = count = 0.0
    for capture in caps:
        for replica in capture.replicas.values():
            histogram = replica.histograms.get(name)
            if not histogram:
                continue
            for le, cumulative in histogram.buckets.items():
                buckets[le] = buckets.get(le, 0.0) + cumulative
            total += histogram.sum or 0.0
            count += histogram.count or 0.0
    if not count:
        return None
    p50, p90, p99 = (_bucket_quantile(buckets, q / 100.0 * count) for q in (50, 90, 99))
    return LengthStats(int(count), round(total / count, 3), p50, p90, p99, None, None)


def _bucket_quantile(buckets: dict[float, float], target: float) -> float | None:
    """The value at cumulative count ``target``, linear inside its bucket (None in the +Inf bucket)."""
    previous_le, previous_count = 0.0, 0.0
    for le in sorted(buckets):
        if buckets[le] >= target:
            if math.isinf(le):
                return None
            share = (target - previous_count) / (buckets[le] - previous_count) if buckets[le] > previous_count else 1.0
            return round(previous_le + share * (le - previous_le), 1)
        previous_le, previous_count = le, buckets[le]
    return None


def _finite(value):
    """A request rate when it is a finite number (an open-loop run's ``inf`` is none)."""
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def requests_block(caps, record: BenchInput | None) -> Requests | None:
    """The ``requests`` block (module docstring) of the benchmark record the client latency reads
    (analyzers/serving_series.chosen_record); None when no capture carries request shapes."""
    finish: dict[str, float] = {}
    for capture in caps:
        for reason, count in capture.finish_reasons.items():
            finish[reason] = finish.get(reason, 0.0) + count
    shapes = record.requests if record else None
    if shapes:
        return Requests("benchmark per-request arrays (input_lens, output_lens)", length_stats(shapes["input_lens"]),
                        length_stats(shapes["output_lens"]), shapes["failed"], shapes["sent"], _finish(finish),
                        _finite(record.request_rate), record.max_concurrency)
    inputs, outputs = _histogram_stats(caps, PROMPT_HISTOGRAM), _histogram_stats(caps, OUTPUT_HISTOGRAM)
    source = f"/metrics histograms ({PROMPT_HISTOGRAM}, {OUTPUT_HISTOGRAM})" if inputs or outputs else None
    if source is None and not finish:
        return None
    return Requests(source, inputs, outputs, None, None, _finish(finish), None, None)


def _finish(finish: dict[str, float]) -> dict[str, int] | None:
    """Finished requests per reason, by reason (None without any)."""
    return {reason: int(count) for reason, count in sorted(finish.items())} or None
