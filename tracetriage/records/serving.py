"""Records of the ``serving`` block of the analysis contract: the engine's captures and settings, its
stats lines, the latency percentiles (client benchmark and server histograms), Little's law, the
TPOT fit, the benchmark sweep, the replicas, memory, the features the engine ran with, the --slo
checks, the traffic's shape per request and the figures that disagree. Latencies are ms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class ServingCapture:
    """One capture of the serving engine (a log, a /metrics scrape, a benchmark result): path, kind, version."""
    path: str = ""
    kind: str = ""
    version: str | None = None

    UNTYPED: ClassVar[dict[str, str]] = {
        "*": "the engine settings a capture printed: the serving block's ``config`` holds them pooled, as a map"}


@dataclass(frozen=True, slots=True)
class Stats:
    """The engine's periodic stats lines, summarized: running and waiting requests, KV cache usage (%),
    prompt and generation throughput (tokens/s), prefix cache hits."""
    samples: int | None = None
    running_mean: float | None = None
    running_max: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    waiting_first: float | None = None
    waiting_last: float | None = None
    waiting_share_pct: float | None = None
    kv_usage_p50: float | None = None
    kv_usage_max: float | None = None
    prompt_tps_mean: float | None = None
    gen_tps_mean: float | None = None
    prefix_hit_mean: float | None = None


@dataclass(frozen=True, slots=True)
class ClientMetric:
    """One latency's client-side statistics from the benchmark's result file (the ones it names)."""
    mean: float | None = None
    median: float | None = None
    std: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None


@dataclass(frozen=True, slots=True)
class Quantile:
    """A quantile of a /metrics histogram: its value, whether it is only a lower bound (the +Inf
    bucket), and the width of the bucket that holds it."""
    value_ms: float = 0.0
    lower_bound: bool = False
    resolution_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ServerHistogram:
    """One latency's /metrics histogram: its quantiles (None for an empty one), requests counted, mean."""
    p50: Quantile | None = None
    p90: Quantile | None = None
    p95: Quantile | None = None
    p99: Quantile | None = None
    count: float = 0
    mean_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Latency:
    """Latency percentiles per metric (ttft, tpot, itl, e2el; queue and prefill on the server side), in
    the order the contract lists them: the client benchmark's and the server's histograms."""
    client: dict[str, ClientMetric] = field(default_factory=dict)
    server: dict[str, ServerHistogram] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LittlesLaw:
    """Little's law on the serving figures: arrival rate and capacity (req/s), requests in the system,
    time in the system (s), where the figures come from; the completion rate of the run the arrival
    rate is of, the run the capacity was measured in and whether it saturated the server (else the
    capacity is a lower bound), a closed-loop run's max concurrency and Little's bound C / W (req/s)."""
    arrival_rate_rps: float | None = None
    capacity_rps: float | None = None
    in_system: float | None = None
    time_in_system_s: float | None = None
    source: str | None = None
    throughput_rps: float | None = None
    capacity_run: str | None = None
    capacity_saturated: bool | None = None
    concurrency: float | None = None
    concurrency_rps: float | None = None


@dataclass(frozen=True, slots=True)
class TpotFit:
    """TPOT against the running batch: the least-squares line (ms + ms per sequence), its r², the points
    (``series``: (running, TPOT ms) pairs), or why it is no model (``rejected``)."""
    a_ms: float = 0.0
    b_ms_per_seq: float = 0.0
    r2: float = 0.0
    points: int = 0
    x_min: float | None = None
    x_max: float | None = None
    source: str = ""
    series: tuple[tuple[float, ...], ...] = ()
    model: bool | None = True
    rejected: str | None = None


@dataclass(frozen=True, slots=True)
class BenchPoint:
    """One point of a benchmark sweep: its rate and concurrency cap, throughput, mean TTFT and TPOT, p99 ITL."""
    request_rate: float | None = None
    burstiness: float | None = None
    max_concurrency: float | None = None
    completed: float | None = None
    duration: float | None = None
    total_input_tokens: float | None = None
    total_output_tokens: float | None = None
    request_throughput: float | None = None
    output_throughput: float | None = None
    total_token_throughput: float | None = None
    group: str = ""
    # of the latency statistics the result file names (<stat>_<metric>_ms), the ones the sweep table shows
    mean_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    p99_itl_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Tokens:
    """Token counts of the traffic: prompt and output tokens, their ratio, prefix cache hits, preemptions."""
    prompt_tokens: float | None = None
    output_tokens: float | None = None
    prompt_per_output: float | None = None
    source: str | None = None
    prefix_hit_pct: float | None = None
    prefix_hit_source: str | None = None
    preemptions_counter: float | None = None


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica's scheduler state; a gauge the replica's row does not hold is ``""`` (printed empty),
    one it holds without a value None."""
    replica: str = ""
    source: str = ""
    running: float | str | None = ""
    waiting: float | str | None = ""
    kv_usage: float | str | None = ""
    kv_usage_pct: float | str | None = ""
    prefix_hit: float | str | None = ""


@dataclass(frozen=True, slots=True)
class Prompts:
    """Prompt lengths: the mean and longest input, the most new tokens one prefill took."""
    input_len_mean: float | None = None
    input_len_max: float | None = None
    prefill_new_token_max: float | None = None


@dataclass(frozen=True, slots=True)
class OomEvent:
    """One out-of-memory error of the engine: what it tried to allocate, and the memory then."""
    tried_bytes: float | None = None
    total_bytes: float | None = None
    free_bytes: float | None = None
    in_use_bytes: float | None = None
    allocated_bytes: float | None = None
    reserved_unallocated_bytes: float | None = None


@dataclass(frozen=True, slots=True)
class Allocator:
    """The PyTorch allocator's figures: allocated and reserved bytes, now and at peak."""
    allocated_bytes: float | None = None
    peak_allocated_bytes: float | None = None
    reserved_bytes: float | None = None
    peak_reserved_bytes: float | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    """The engine's memory events: OOM errors, preemptions, retractions, the allocator."""
    oom_events: tuple[OomEvent, ...] = ()
    preemptions: int | None = None
    retractions: int | None = None
    allocator: Allocator | None = None


@dataclass(frozen=True, slots=True)
class EngineFeature:
    """One feature the engine ran with: its value, printed or its default (``source``), where that comes from, in words."""
    feature: str = ""
    value: Any = None
    source: str = ""
    where: str = ""
    text: str = ""
    defined_in: str = ""


@dataclass(frozen=True, slots=True)
class EngineDefaults:
    """The features the engine ran with, per feature, for its engine and generation."""
    engine: str = ""
    generation: str | None = None
    basis: str | None = None
    features: dict[str, EngineFeature] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LengthStats:
    """A per-request length distribution (tokens): requests, mean, percentiles, longest, the lengths."""
    n: int = 0
    mean: float = 0.0
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: int | None = None
    lengths: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Requests:
    """The traffic's shape per request: input and output tokens, failures, finish reasons, rate and cap."""
    source: str | None = None
    input: LengthStats | None = None
    output: LengthStats | None = None
    failed: int | None = None
    sent: int | None = None
    finish_reasons: dict[str, int] = field(default_factory=dict)
    request_rate: float | None = None
    max_concurrency: float | None = None


@dataclass(frozen=True, slots=True)
class Serving:
    """What the serving artifacts showed. ``config`` is the engine's settings by name (a map: the reports
    print whichever it holds); ``metrics`` the /metrics series the rules read; ``slo_checks`` the
    --slo budgets checked, kept as the contract's dicts: ``wording.slo_text``, shared with the rules,
    writes them."""
    captures: tuple[ServingCapture, ...] = ()
    engine: str | None = None
    version: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    stats: Stats | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    bench: tuple[BenchPoint, ...] = ()
    warnings: tuple[str, ...] = ()
    latency: Latency = Latency()
    littles_law: LittlesLaw = LittlesLaw()
    tpot_fit: TpotFit | None = None
    tokens: Tokens | None = None
    replicas: tuple[Replica, ...] = ()
    prompts: Prompts | None = None
    memory: Memory | None = None
    engine_defaults: EngineDefaults | None = None
    slo_checks: tuple[dict[str, Any], ...] = ()
    requests: Requests | None = None
    cross_checks: tuple[str, ...] = ()
    queue: str | None = None
