"""What a serving capture holds once parsed (parsers/serving.py reads engine logs, /metrics scrapes
and benchmark results into it): the engine, its version and generation, the printed config, the
stats lines, the /metrics values per replica, the benchmark records, memory events and warnings."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Histogram:
    """One /metrics histogram of a replica: cumulative counts by upper bound ``le`` (``math.inf``
    for +Inf; samples differing only in other labels summed), its ``_sum`` and ``_count``."""

    buckets: dict = field(default_factory=dict)
    sum: float | None = None
    count: float | None = None


@dataclass
class ScrapedReplica:
    """One replica of a /metrics scrape (its instance / engine / dp_rank label): the last value of each
    gauge, each counter summed over its samples, its histograms and its ``*_info`` labels, by metric name."""

    gauges: dict = field(default_factory=dict)
    counters: dict = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    info: dict = field(default_factory=dict)


@dataclass
class ServingEvents:
    """Memory events of an engine log: OOM errors (one dict of figures each), preemptions, KV-pool retractions."""

    oom: list = field(default_factory=list)
    preemptions: int = 0
    retractions: int = 0


@dataclass
class ServingCapture:
    """One serving artifact parsed: its path and kind, the engine, version and generation (and what
    said so), and what it holds (the comments say each field's form)."""

    path: str
    kind: str  # vllm_log | sglang_log | vllm_metrics | sglang_metrics | bench_result | oom_report
    engine: str | None = None  # vllm | sglang
    version: str | None = None
    generation: str | None = None       # vLLM engine generation that ran: V1 | V0 (None: the capture does not say)
    generation_from: str | None = None  # what said so (a start-up line, a warning, the stats lines' form)
    config: dict = field(default_factory=dict)
    stats: list = field(default_factory=list)       # engine stats samples (one per stats / decode line)
    prefills: list = field(default_factory=list)    # SGLang prefill batch lines
    metrics: dict = field(default_factory=dict)     # last value of each series, summed over replicas (counters)
    replicas: dict[str, ScrapedReplica] = field(default_factory=dict)  # replica label -> its /metrics values
    bench: list = field(default_factory=list)
    events: ServingEvents = field(default_factory=ServingEvents)
    memory: dict = field(default_factory=dict)      # allocator state from memory_summary()
    kv_tokens: int | None = None
    finish_reasons: dict = field(default_factory=dict)  # finished requests by reason (/metrics), summed over replicas
    warnings: list = field(default_factory=list)
