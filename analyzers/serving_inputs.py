"""The serving captures of a case pooled into typed rows (what analyzers/serving.py measures from):
the engine stats lines (:class:`StatsSample`), SGLang's prefill lines (:class:`PrefillSample`), the
benchmark records (:class:`BenchInput`, with the summaries of their per-request arrays), and the
/metrics token counters summed over every replica (:class:`TokenCounters`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

STATS_FIELDS = ("t", "running", "waiting", "kv_usage_pct", "prompt_tps", "gen_tps", "prefix_hit_pct")


@dataclass(frozen=True, slots=True)
class StatsSample:
    """One engine stats line (vLLM's periodic line, an SGLang batch line): the file it is in, its time
    (s, None when the line has none), running and waiting requests, KV usage (% of the pool), prompt
    and generation throughput (tokens/s; SGLang states no prompt throughput), the prefix-cache hit
    rate (%), and the engine it came from (vLLM's ``Engine 000``; empty for one engine)."""

    file: str
    t: float | None
    running: float | None
    waiting: float | None
    kv_usage_pct: float | None
    prompt_tps: float | None
    gen_tps: float | None
    prefix_hit_pct: float | None
    replica: str

    @classmethod
    def of(cls, row: dict, file: str) -> StatsSample:
        """A parsed stats row (parsers/serving.py) of ``file``, by its field names."""
        return cls(file=file, replica=row.get("replica") or "", **{name: row.get(name) for name in STATS_FIELDS})


@dataclass(frozen=True, slots=True)
class PrefillSample:
    """One SGLang prefill line: the tokens it prefilled anew and those it found in the radix cache."""

    new_token: float | None
    cached_token: float | None

    @classmethod
    def of(cls, row: dict) -> PrefillSample:
        return cls(**{item.name: row.get(item.name) for item in fields(cls)})


BENCH_FIGURES = ("request_rate", "request_throughput", "max_concurrency", "completed", "mean_tpot_ms", "mean_e2el_ms",
                 "total_input_tokens", "total_output_tokens")
PER_REQUEST = ("ttfts", "itls", "input_lens", "requests")  # the parser's ``_<name>`` summaries of per-request arrays


@dataclass(frozen=True, slots=True)
class BenchInput:
    """One benchmark record as parsed: the figures measured from (request rate, completion rate, max
    concurrency, completed, mean TPOT and E2E latency ms, input and output token totals), the
    summaries of its per-request arrays (TTFTs and ITLs ms, input lengths: p50, p99, max, mean, n;
    the request shapes of parsers/serving_config.requests_from), and every figure as written."""

    request_rate: float | None
    request_throughput: float | None
    max_concurrency: float | None
    completed: float | None
    mean_tpot_ms: float | None
    mean_e2el_ms: float | None
    total_input_tokens: float | None
    total_output_tokens: float | None
    ttfts: dict | None
    itls: dict | None
    input_lens: dict | None
    requests: dict | None
    record: dict = field(repr=False)

    @classmethod
    def of(cls, record: dict) -> BenchInput:
        """A parsed benchmark record (its per-request summaries under ``_<name>``), by field names."""
        return cls(record=record, **{name: record.get(name) for name in BENCH_FIGURES},
                   **{name: record.get(f"_{name}") for name in PER_REQUEST})

    def per_request(self, metric: str) -> dict | None:
        """The per-request summary of a latency metric (TTFT, ITL), None for the others."""
        return self.ttfts if metric == "ttft" else self.itls if metric == "itl" else None

    def contract(self) -> dict:
        """The figures the contract keeps (the per-request ``_`` summaries left out)."""
        return {key: value for key, value in self.record.items() if not key.startswith("_")}


COUNTERS = {
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "generation_tokens": ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
    "preemptions": ("vllm:num_preemptions_total",),
}


@dataclass(frozen=True, slots=True)
class TokenCounters:
    """The COUNTERS summed over every scrape's replicas (the first of each counter's names a replica has)."""

    prefix_hits: float = 0.0
    prefix_queries: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    preemptions: float = 0.0

    @classmethod
    def of(cls, caps) -> TokenCounters:
        sums = dict.fromkeys(COUNTERS, 0.0)
        for capture in caps:
            for replica in capture.replicas.values():
                for ours, names in COUNTERS.items():
                    name = next((name for name in names if name in replica.counters), None)
                    if name is not None:
                        sums[ours] += replica.counters[name]
        return cls(**sums)


@dataclass
class Gathered:
    """What every serving capture of a case holds, pooled: config, stats lines (each with its file),
    SGLang prefill lines, /metrics values, benchmark records, versions, engines, warnings, and the
    memory events (OOMs, preemptions, retractions) and allocator figures."""

    config: dict = field(default_factory=dict)
    stats: list[StatsSample] = field(default_factory=list)
    prefills: list[PrefillSample] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    bench: list[BenchInput] = field(default_factory=list)
    versions: list = field(default_factory=list)
    engines: set = field(default_factory=set)
    generation: str | None = None
    generation_from: str | None = None
    warnings: list = field(default_factory=list)
    oom: list = field(default_factory=list)
    preemptions: int = 0
    retractions: int = 0
    memory: dict = field(default_factory=dict)


def gather(caps) -> Gathered:
    """The captures' contents pooled, in capture order."""
    pooled = Gathered()
    for capture in caps:
        pooled.config.update(capture.config)
        pooled.stats.extend(StatsSample.of(row, capture.path) for row in capture.stats)
        pooled.prefills.extend(PrefillSample.of(row) for row in capture.prefills)
        pooled.metrics.update(capture.metrics)
        pooled.bench.extend(BenchInput.of(record) for record in capture.bench)
        if capture.version:
            pooled.versions.append(capture.version)
        if capture.engine:
            pooled.engines.add(capture.engine)
        if capture.generation and pooled.generation is None:
            pooled.generation, pooled.generation_from = capture.generation, capture.generation_from
        pooled.oom.extend(capture.events.oom)
        pooled.preemptions += capture.events.preemptions
        pooled.retractions += capture.events.retractions
        pooled.memory.update(capture.memory)
        pooled.warnings.extend(f"{capture.path}: {warning}" for warning in capture.warnings)
    return pooled
