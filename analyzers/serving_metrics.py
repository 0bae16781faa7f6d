"""The typed serving measurements (analyzers/serving.py defines every figure): what ``serving.summary``
returns, what the serving, SLO and quality rules and compare_serving read, and, through
``to_contract()``, the contract's ``serving`` block exactly as the JSON has it (keys, order, rounding).

Blocks whose keys depend on the capture keep that shape at the edge: a benchmark's latency figures
(``mean``, ``median``, ``p99`` ... as the benchmark states them, :class:`ClientFigures`), a replica
row (its gauges as the scrape or the stats lines have them, :class:`Replica`), a length summary
(per-request values or a histogram's, :class:`LengthStats`). ``from_contract`` reads a saved block
back by field names (a side of ``compare``, an ``analyze --json`` file): a key the block lacks is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from tracetriage.analyzers.metrics import Contract


def _by_fields(cls, data: dict | None, **convert):
    """``cls`` built from its contract dict by its field names (a missing key is None); ``convert``:
    by field name, what reads that field's value (a nested block's loader)."""
    if data is None:
        return None
    return cls(**{item.name: convert[item.name](data.get(item.name)) if item.name in convert else data.get(item.name)
                  for item in fields(cls)})


def _rows(load):
    """A loader of a list of blocks (None or missing: none), each read by ``load``."""
    return lambda rows: tuple(load(row) for row in rows or [])


def _mapping(value) -> dict:
    """A mapping the contract always has (config, metrics): empty where a saved block lacks it."""
    return value or {}


def _texts(value) -> list:
    """A list of sentences the contract always has (warnings, cross-checks): empty where a saved block lacks it."""
    return value or []


def _without_none(block: Contract) -> dict:
    """A block whose keys are only those measured (None fields left out), in declaration order."""
    return {name: value for name, value in Contract.to_contract(block).items() if value is not None}


@dataclass(frozen=True, slots=True)
class HistogramQuantile(Contract):
    """One quantile of a /metrics histogram (ms): interpolated inside its bucket; ``lower_bound``: it
    lies in the +Inf bucket (or above the last one), the value is that bucket's lower edge;
    ``resolution_ms``: the bucket's width (None for a lower bound)."""

    value_ms: float
    lower_bound: bool
    resolution_ms: float | None

    @classmethod
    def from_contract(cls, data: dict | None) -> HistogramQuantile | None:
        return _by_fields(cls, data)

    @property
    def value(self) -> float | None:
        """The quantile where it is a value, not a lower bound (None otherwise)."""
        return None if self.lower_bound or self.value_ms is None else float(self.value_ms)


@dataclass(frozen=True, slots=True)
class ServerHistogram(Contract):
    """One latency histogram of the server (every replica merged): p50 ... p99, the count of
    observations and the mean (sum / count, ms; None without a sum)."""

    p50: HistogramQuantile | None
    p90: HistogramQuantile | None
    p95: HistogramQuantile | None
    p99: HistogramQuantile | None
    count: float
    mean_ms: float | None

    @classmethod
    def from_contract(cls, data: dict | None) -> ServerHistogram | None:
        return _by_fields(cls, data, **dict.fromkeys(("p50", "p90", "p95", "p99"), HistogramQuantile.from_contract))

    def quantile(self, name: str) -> HistogramQuantile | None:
        """The quantile ``name`` (p50, p90, p95, p99); None for one a histogram does not give (max)."""
        return {"p50": self.p50, "p90": self.p90, "p95": self.p95, "p99": self.p99}.get(name)


SERVER_METRICS = ("ttft", "tpot", "itl", "e2el", "queue", "prefill")  # analyzers/serving.HISTOGRAMS' names


@dataclass(frozen=True, slots=True)
class ServerLatency(Contract):
    """``latency.server``: the histograms measured, by our name (None: not scraped)."""

    ttft: ServerHistogram | None = None
    tpot: ServerHistogram | None = None
    itl: ServerHistogram | None = None
    e2el: ServerHistogram | None = None
    queue: ServerHistogram | None = None
    prefill: ServerHistogram | None = None

    @classmethod
    def from_contract(cls, data: dict | None) -> ServerLatency:
        return _by_fields(cls, data or {}, **dict.fromkeys(SERVER_METRICS, ServerHistogram.from_contract))

    def to_contract(self) -> dict:
        return _without_none(self)

    def measured(self) -> list[tuple[str, ServerHistogram]]:
        """(name, histogram) of every histogram measured, in the contract's order."""
        return [(name, histogram) for name, histogram in zip(SERVER_METRICS, (self.ttft, self.tpot, self.itl, self.e2el,
                                                                              self.queue, self.prefill)) if histogram]

    def of(self, metric: str) -> ServerHistogram | None:
        """The histogram of a latency metric (ttft, tpot, itl, e2el, queue, prefill), None when not measured."""
        return dict(zip(SERVER_METRICS, (self.ttft, self.tpot, self.itl, self.e2el, self.queue, self.prefill))).get(metric)


CLIENT_FIGURES = ("mean", "median", "p50", "p90", "p95", "p99", "max")


@dataclass(frozen=True, slots=True)
class ClientFigures(Contract):
    """One latency metric as the benchmark (client) measured it, ms: the figures it states (mean,
    median, std, p-quantiles) and those its per-request arrays filled (p50, p99, max). ``stated``
    holds every figure in the benchmark's order (what the contract writes); the fields are the
    ones read (None: not stated)."""

    mean: float | None
    median: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None
    stated: dict = field(metadata={"private": True})

    @classmethod
    def from_contract(cls, data: dict | None) -> ClientFigures | None:
        if not data:
            return None
        return cls(stated=dict(data), **{name: data.get(name) for name in CLIENT_FIGURES})

    def to_contract(self) -> dict:
        return dict(self.stated)

    def quantile(self, name: str) -> float | None:
        """The percentile ``name`` (p50 is the median where only that is stated), or None."""
        return {"p50": self.p50 or self.median, "p90": self.p90, "p95": self.p95, "p99": self.p99, "max": self.max}.get(name)


@dataclass(frozen=True, slots=True)
class BenchLoad(Contract):
    """The load of the benchmark record the client latency reads: the configured request rate
    (``inf``: every request sent at once), max concurrency, completion rate and requests completed."""

    request_rate: float | None
    max_concurrency: float | None
    request_throughput: float | None
    completed: float | None

    @classmethod
    def from_contract(cls, data: dict | None) -> BenchLoad | None:
        return _by_fields(cls, data)


CLIENT_METRICS = ("ttft", "tpot", "itl", "e2el")


@dataclass(frozen=True, slots=True)
class ClientLatency(Contract):
    """``latency.client``: the record's load and each latency metric it states (None: not stated;
    ``record`` None without a benchmark)."""

    record: BenchLoad | None = None
    ttft: ClientFigures | None = None
    tpot: ClientFigures | None = None
    itl: ClientFigures | None = None
    e2el: ClientFigures | None = None

    @classmethod
    def from_contract(cls, data: dict | None) -> ClientLatency:
        return _by_fields(cls, data or {}, record=BenchLoad.from_contract,
                          **dict.fromkeys(CLIENT_METRICS, ClientFigures.from_contract))

    def to_contract(self) -> dict:
        return _without_none(self)

    def of(self, metric: str) -> ClientFigures | None:
        """The figures of a latency metric (ttft, tpot, itl, e2el), None when not stated."""
        return dict(zip(CLIENT_METRICS, (self.ttft, self.tpot, self.itl, self.e2el))).get(metric)


@dataclass(frozen=True, slots=True)
class Latency(Contract):
    """``latency``: the client's (benchmark) and the server's (/metrics histograms)."""

    client: ClientLatency
    server: ServerLatency

    @classmethod
    def from_contract(cls, data: dict | None) -> Latency:
        return _by_fields(cls, data or {}, client=ClientLatency.from_contract, server=ServerLatency.from_contract)


@dataclass(frozen=True, slots=True)
class StatsSummary(Contract):
    """``stats``: the engine stats lines summarised (analyzers/serving.py defines each figure)."""

    samples: int
    running_mean: float | None
    running_max: float | None
    waiting_mean: float | None
    waiting_max: float | None
    waiting_first: float | None
    waiting_last: float | None
    waiting_share_pct: float
    kv_usage_p50: float | None
    kv_usage_max: float | None
    prompt_tps_mean: float | None
    gen_tps_mean: float | None
    prefix_hit_mean: float | None

    @classmethod
    def from_contract(cls, data: dict | None) -> StatsSummary | None:
        return _by_fields(cls, data)


@dataclass(frozen=True, slots=True)
class LittlesLaw(Contract):
    """``littles_law``: requests in the system = arrival rate x time in system, and where from; each
    rate named with the run it comes from (analyzers/serving.py ``_littles_law`` defines them):
    ``throughput_rps`` the completion rate of the run L is computed for (the busiest finite-rate run),
    ``capacity_rps`` the highest completion rate measured (``capacity_run``: its run in words),
    ``capacity_saturated`` whether a run saturated the server (False: the capacity is a lower bound),
    ``concurrency`` and ``concurrency_rps``: a closed-loop run's max concurrency C and Little's bound C / W
    on its completion rate (W its mean time in system), beside the measured one."""

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

    @classmethod
    def from_contract(cls, data: dict | None) -> LittlesLaw:
        return _by_fields(cls, data or {})


@dataclass(frozen=True, slots=True)
class TpotFit(Contract):
    """``tpot_fit``: TPOT = a + b x running batch by least squares (r², points, the batch range),
    where the points come from and the points; once judged (analysis._serving, rules/serving_signals.fit_rejected) ``model``
    (shown as a model of the server or not) and ``rejected`` (why not). Unjudged, neither is written."""

    a_ms: float
    b_ms_per_seq: float
    r2: float
    points: int
    x_max: float
    x_min: float
    source: str
    series: list
    model: bool | None = None
    rejected: str | None = None

    @classmethod
    def from_contract(cls, data: dict | None) -> TpotFit | None:
        return _by_fields(cls, data)

    def to_contract(self) -> dict:
        out = Contract.to_contract(self)
        if self.model is None:
            del out["model"], out["rejected"]
        return out

    def judged(self, rejected: str | None) -> TpotFit:
        """This fit with its verdict: a model unless ``rejected`` says why not."""
        return replace(self, model=rejected is None, rejected=rejected)

    def at(self, running: float) -> float:
        """The TPOT the fit predicts at ``running`` sequences, ms."""
        return self.a_ms + self.b_ms_per_seq * running


@dataclass(frozen=True, slots=True)
class Tokens(Contract):
    """``tokens``: prompt and output tokens, prompt per output token and where from, the
    prefix-cache hit rate and where from, the preemptions counter."""

    prompt_tokens: float | None
    output_tokens: float | None
    prompt_per_output: float | None
    source: str | None
    prefix_hit_pct: float | None
    prefix_hit_source: str | None
    preemptions_counter: float | None

    @classmethod
    def from_contract(cls, data: dict | None) -> Tokens | None:
        return _by_fields(cls, data)


@dataclass(frozen=True, slots=True)
class Replica(Contract):
    """One replica row: its name, ``source`` (``metrics``: a scrape's gauges; ``stats lines``: an
    engine's means), running and waiting requests, KV usage (% of the pool) and, from a scrape, the
    prefix-cache hit gauge. A scrape row without KV usage keeps the gauge's ``kv_usage`` key (None)
    where a row with it has ``kv_usage_pct`` last, as the contract has them."""

    replica: str
    source: str
    running: float | None
    waiting: float | None
    kv_usage_pct: float | None = None
    prefix_hit: float | None = None

    @classmethod
    def from_contract(cls, data: dict) -> Replica:
        return _by_fields(cls, data)

    def to_contract(self) -> dict:
        head = {"replica": self.replica, "source": self.source, "running": self.running, "waiting": self.waiting}
        if self.source != "metrics":
            return {**head, "kv_usage_pct": self.kv_usage_pct}
        if self.kv_usage_pct is None:
            return {**head, "kv_usage": None, "prefix_hit": self.prefix_hit}
        return {**head, "prefix_hit": self.prefix_hit, "kv_usage_pct": self.kv_usage_pct}


@dataclass(frozen=True, slots=True)
class Prompts(Contract):
    """``prompts``: mean and max input length (benchmark), the largest prefill (SGLang), tokens."""

    input_len_mean: float | None = None
    input_len_max: float | None = None
    prefill_new_token_max: float | None = None

    @classmethod
    def from_contract(cls, data: dict | None) -> Prompts:
        return _by_fields(cls, data or {})

    def longest(self) -> float:
        """The longest prompt any figure shows (0 when none does)."""
        return max((tokens for tokens in (self.input_len_max, self.input_len_mean, self.prefill_new_token_max) if tokens),
                   default=0)


@dataclass(frozen=True, slots=True)
class ServingMemory(Contract):
    """``memory``: OOM events, preemptions (log lines or the counter, the larger), SGLang
    retractions, the allocator's figures (None without any)."""

    oom_events: list
    preemptions: int
    retractions: int
    allocator: dict | None

    @classmethod
    def from_contract(cls, data: dict | None) -> ServingMemory:
        return _by_fields(cls, data or {})


@dataclass(frozen=True, slots=True)
class EngineFeature(Contract):
    """One feature of ``engine_defaults``: its value (None: not known), source (printed, default,
    assumed, not known), where that comes from, both in words, and where the engine's code sets it."""

    feature: str
    value: object
    source: str
    where: str
    text: str
    defined_in: str

    @classmethod
    def from_contract(cls, data: dict) -> EngineFeature:
        return _by_fields(cls, data)

    @property
    def from_default(self) -> bool:
        """Whether the engine's default, not the capture, gave the value."""
        return self.source in ("default", "assumed")


@dataclass(frozen=True, slots=True)
class EngineDefaults(Contract):
    """``engine_defaults``: the engine, the vLLM generation whose defaults apply, how that is known,
    and each feature by its config key."""

    engine: str
    generation: str | None
    basis: str | None
    features: dict[str, EngineFeature]

    @classmethod
    def from_contract(cls, data: dict | None) -> EngineDefaults | None:
        return _by_fields(cls, data, features=lambda features: {key: EngineFeature.from_contract(feature)
                                                                for key, feature in (features or {}).items()})

    def to_contract(self) -> dict:
        return {**Contract.to_contract(self), "features": {key: feature.to_contract() for key, feature in self.features.items()}}


@dataclass(frozen=True, slots=True)
class LengthStats(Contract):
    """Token lengths per request: n, mean, p50, p90, p99 and max, and the sorted values (what a
    two-sample test needs). From a /metrics histogram (``lengths`` None) max is None, the quantiles
    are interpolated, and the contract writes n, mean, max, lengths before the quantiles."""

    n: int
    mean: float
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None
    lengths: list | None

    @classmethod
    def from_contract(cls, data: dict | None) -> LengthStats | None:
        return _by_fields(cls, data) if data else None

    def to_contract(self) -> dict:
        if self.lengths is not None:
            return Contract.to_contract(self)
        return {"n": self.n, "mean": self.mean, "max": self.max, "lengths": None, "p50": self.p50, "p90": self.p90,
                "p99": self.p99}


@dataclass(frozen=True, slots=True)
class Requests(Contract):
    """``requests`` (analyzers/serving_requests.py): where the lengths come from, the input and
    output lengths, failed of sent, finished requests per reason, and the record's load."""

    source: str | None
    input: LengthStats | None
    output: LengthStats | None
    failed: int | None
    sent: int | None
    finish_reasons: dict | None
    request_rate: float | None
    max_concurrency: float | None

    @classmethod
    def from_contract(cls, data: dict | None) -> Requests | None:
        return _by_fields(cls, data, input=LengthStats.from_contract, output=LengthStats.from_contract)

    def of(self, shape: str) -> LengthStats | None:
        """The lengths of ``input`` or ``output``."""
        return self.input if shape == "input" else self.output if shape == "output" else None

    def length_capped(self) -> tuple[int, int] | None:
        """(requests that finished on the length cap, requests finished), None without finish reasons."""
        reasons = self.finish_reasons or {}
        total = sum(reasons.values())
        return (int(reasons.get("length", 0)), int(total)) if total else None

    def failed_of_sent(self) -> tuple[int, int] | None:
        """(failed, sent) when the benchmark counted both."""
        return (self.failed, self.sent) if self.failed is not None and self.sent else None


@dataclass(frozen=True, slots=True)
class Capture(Contract):
    """One serving capture of the case: its path, kind (vllm_log, prom, bench ...) and engine version."""

    path: str
    kind: str
    version: str | None

    @classmethod
    def from_contract(cls, data: dict) -> Capture:
        return _by_fields(cls, data)


BENCH_FIELDS = ("request_rate", "request_throughput", "max_concurrency", "completed", "mean_ttft_ms", "mean_tpot_ms",
                "mean_e2el_ms", "group")


@dataclass(frozen=True, slots=True)
class BenchRecord(Contract):
    """One benchmark record: the figures the rules read (request rate, completion rate, max
    concurrency, requests completed, mean TTFT / TPOT / E2E latency ms, the sweep it belongs to) and
    ``record``, every figure the benchmark wrote, in its order (what the contract keeps)."""

    request_rate: float | None
    request_throughput: float | None
    max_concurrency: float | None
    completed: float | None
    mean_ttft_ms: float | None
    mean_tpot_ms: float | None
    mean_e2el_ms: float | None
    group: str | None
    record: dict = field(metadata={"private": True})

    @classmethod
    def from_contract(cls, data: dict) -> BenchRecord:
        return cls(record=dict(data), **{name: data.get(name) for name in BENCH_FIELDS})

    def to_contract(self) -> dict:
        return dict(self.record)


@dataclass(frozen=True, slots=True)
class ServingSummary(Contract):
    """The contract's ``serving`` block of a case's serving captures (analyzers/serving.py defines
    its figures): the captures, engine and version, the engine config (the arguments as printed),
    the stats lines' summary, the kept /metrics values, the benchmark records, warnings, latency
    (client and server), Little's law, the TPOT fit, tokens, replicas, prompts, memory events, the
    engine defaults, the requests' shapes, the cross-checks and the waiting queue in words."""

    captures: tuple[Capture, ...]
    engine: str | None
    version: str | None
    config: dict
    stats: StatsSummary | None
    metrics: dict
    bench: tuple[BenchRecord, ...]
    warnings: list[str]
    latency: Latency
    littles_law: LittlesLaw
    tpot_fit: TpotFit | None
    tokens: Tokens | None
    replicas: tuple[Replica, ...]
    prompts: Prompts
    memory: ServingMemory
    engine_defaults: EngineDefaults | None
    requests: Requests | None
    cross_checks: list[str]
    queue: str | None = None  # the waiting queue in words (rules/serving.queue_words), written once judged

    @classmethod
    def from_contract(cls, data: dict) -> ServingSummary:
        """A saved ``serving`` block read back (its ``slo_checks``, written by the analysis, are not read)."""
        return _by_fields(
            cls, data, captures=_rows(Capture.from_contract), config=_mapping, stats=StatsSummary.from_contract,
            metrics=_mapping, bench=_rows(BenchRecord.from_contract), warnings=_texts,
            latency=Latency.from_contract, littles_law=LittlesLaw.from_contract, tpot_fit=TpotFit.from_contract,
            tokens=Tokens.from_contract, replicas=_rows(Replica.from_contract), prompts=Prompts.from_contract,
            memory=ServingMemory.from_contract, engine_defaults=EngineDefaults.from_contract, requests=Requests.from_contract,
            cross_checks=_texts)

    def to_contract(self) -> dict:
        out = Contract.to_contract(self)
        out["captures"], out["bench"] = [row.to_contract() for row in self.captures], [row.to_contract() for row in self.bench]
        out["replicas"] = [row.to_contract() for row in self.replicas]
        return out

    def features(self) -> dict[str, EngineFeature]:
        """The engine defaults' features by config key (empty when the engine is not known)."""
        return self.engine_defaults.features if self.engine_defaults else {}

    def effective_config(self) -> dict:
        """The engine config the captures show the engine ran with: the printed ``config`` and each
        engine default whose value is known (``engine_defaults``)."""
        return {**self.config, **{key: feature.value for key, feature in self.features().items() if feature.value is not None}}


def serving_summary(serving: ServingSummary | dict | None) -> ServingSummary | None:
    """The typed summary of a serving block given either way (a saved contract dict is read back)."""
    if serving is None or isinstance(serving, ServingSummary):
        return serving
    return ServingSummary.from_contract(serving) if serving else None
