"""Serving-level measurements: what the engine logs, /metrics scrapes and benchmark results show.

Definitions (every share names its denominator):

* ``stats`` (engine stats lines, one sample every few seconds): running / waiting mean and
  max, ``waiting_share_pct`` = samples with a non-empty queue / all samples x 100, KV cache
  usage p50 and max (% of the KV pool), mean prompt / generation throughput.
* The benchmark figures (``latency.client``, ``littles_law``, the ``tokens`` totals, the sweep's
  ``tpot_fit``, ``prompts``) are read from one series of records (analyzers/serving_series.py: a
  file may hold several deployments' sweeps); the sources name the series and those left out.
* ``latency.client`` (benchmark): TTFT, TPOT, ITL, E2E percentiles as the client measured them
  (the record with the highest finite request rate; per-request arrays when present).
* ``latency.server`` (/metrics histograms): percentiles estimated from cumulative buckets by
  linear interpolation inside the bucket that holds the quantile; ``resolution_ms`` is that
  bucket's width, and a quantile in the ``+Inf`` bucket is reported as a lower bound.
* ``littles_law``: requests in the system L = arrival rate x time in system W. From a benchmark:
  arrival = the configured request rate, capacity = the highest completion rate measured in the
  same series (completed / duration); from stats lines: L = running + waiting.
* ``tpot_fit``: TPOT = a + b x running batch, by least squares, from benchmark records at
  different concurrencies (TPOT measured) or from stats lines (TPOT ~ running / generation
  throughput: each running sequence gets gen_tps / running tokens per second).
* ``tokens``: prompt tokens per output token (benchmark totals, else token counters, else the
  stats lines' throughputs) and the prefix-cache hit rate (stats lines, SGLang prefill lines,
  or hits / queries counters).
* ``engine_defaults``: what the engine ran, not only what it printed. ``config`` holds the
  arguments the captures state; each feature of ENGINE_DEFAULTS gets its value and where it
  comes from: ``printed`` (the captures state it), ``default`` (the default of the engine
  generation the capture names: a start-up line, a fallback warning, the stats lines' form),
  ``assumed`` (the generation assumed from the version: vLLM >= 0.8 runs V1 unless told
  otherwise) or ``not known`` (value None). docs/analysis.md "Engine defaults" cites the
  engines' source for each default.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from tracetriage.analyzers.serving_checks import cross_checks
from tracetriage.analyzers.serving_inputs import BenchInput, PrefillSample, StatsSample, TokenCounters, gather
from tracetriage.analyzers.serving_metrics import (
    BenchLoad,
    BenchRecord,
    Capture,
    ClientFigures,
    ClientLatency,
    EngineDefaults,
    EngineFeature,
    HistogramQuantile,
    Latency,
    LittlesLaw,
    Prompts,
    Replica,
    ServerHistogram,
    ServerLatency,
    ServingMemory,
    ServingSummary,
    StatsSummary,
    Tokens,
    TpotFit,
    serving_summary,
)
from tracetriage.analyzers.serving_requests import requests_block
from tracetriage.analyzers.serving_series import BenchSeries, chosen_record, measured_series
from tracetriage.analyzers.serving_series import finite_rate as _finite_rate

QUANTILES = (50, 90, 95, 99)
HISTOGRAMS = {  # our name -> metric base names, both generations and engines
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "tpot": ("vllm:time_per_output_token_seconds", "vllm:request_time_per_output_token_seconds"),
    "itl": ("vllm:inter_token_latency_seconds", "sglang:inter_token_latency_seconds"),
    "e2el": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"),
    "queue": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds"),
    "prefill": ("vllm:request_prefill_time_seconds",),
}
GAUGES = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "prefix_hit": ("sglang:cache_hit_rate",),
}


V1_DEFAULT_SINCE = (0, 8)  # vLLM 0.8.0 made the V1 engine the default (vllm/envs.py VLLM_USE_V1)


@dataclass(frozen=True, slots=True)
class EngineDefault:
    """One engine default: the engine (and vLLM generation, None for every SGLang version), the
    config key and feature it sets, its default value (None: no single default, ``note`` says
    what decides it), the flag that changes it, and where the engine's source sets it."""

    engine: str
    generation: str | None
    key: str
    feature: str
    value: bool | None
    flag: str
    source: str
    note: str = ""


ENGINE_DEFAULTS = (
    EngineDefault("vllm", "V1", "enable_prefix_caching", "prefix caching", True, "--no-enable-prefix-caching",
                  "vllm/engine/arg_utils.py EngineArgs._set_default_args_v1"),
    EngineDefault("vllm", "V1", "enable_chunked_prefill", "chunked prefill", True, "--no-enable-chunked-prefill",
                  "vllm/engine/arg_utils.py EngineArgs._set_default_args_v1"),
    EngineDefault("vllm", "V0", "enable_prefix_caching", "prefix caching", False, "--enable-prefix-caching",
                  "vllm/engine/arg_utils.py EngineArgs (enable_prefix_caching unset: off on V0)"),
    EngineDefault("vllm", "V0", "enable_chunked_prefill", "chunked prefill", False, "--enable-chunked-prefill",
                  "vllm/engine/arg_utils.py EngineArgs.create_engine_config",
                  "V0 turns it on by itself only for max_model_len > 32K"),
    EngineDefault("sglang", None, "disable_radix_cache", "radix (prefix) cache", False, "--disable-radix-cache",
                  "python/sglang/srt/server_args.py ServerArgs.disable_radix_cache"),
    EngineDefault("sglang", None, "chunked_prefill_size", "chunked prefill size", None, "--chunked-prefill-size",
                  "python/sglang/srt/server_args.py ServerArgs (chunked_prefill_size unset: set by GPU memory)",
                  "set by GPU memory when unset: 2048 tokens on small GPUs, 8192 up to 160 GB, 16384 above, "
                  "4096 when the memory is not known; -1 turns chunking off"),
)
_ON_WORDS = {"disable_radix_cache": ("off", "on")}  # a disable_* key reads inverted


def _version_tuple(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a version string such as '0.9.2.dev140+g8b6e1d639', None when unreadable."""
    parts = (version or "").lstrip("v").split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _generation(engine: str, version: str | None, stated: str | None, stated_by: str | None) -> tuple[str | None, str, str]:
    """(vLLM generation, source words, how it is known): stated by the capture, else assumed from
    the version (V1 from V1_DEFAULT_SINCE), else not known. SGLang has one set of defaults."""
    if engine == "sglang":
        return None, "default", "SGLang default (every version)"
    if stated:
        return stated, "default", f"vLLM {stated} default, {stated} named by {stated_by}"
    parsed = _version_tuple(version)
    if parsed is None:
        return None, "not known", ""
    assumed = "V1" if parsed >= V1_DEFAULT_SINCE else "V0"
    return assumed, "assumed", (f"vLLM {assumed} default, {assumed} assumed from version {version}: V1 is the default "
                                f"engine from 0.8{'' if assumed == 'V1' else ', V0 before it'}")


def _feature_words(rule: EngineDefault, value) -> str:
    """'prefix caching on', 'radix (prefix) cache on', 'chunked prefill size 8192' for a value."""
    if isinstance(value, bool):
        off, on = _ON_WORDS.get(rule.key, ("on", "off"))
        return f"{rule.feature} {off if value else on}"
    return f"{rule.feature} {value}"


def _feature(rule: EngineDefault, value, source: str, where: str) -> EngineFeature:
    """One feature of ``engine_defaults``: its value, source, where that comes from, both in words, and
    where the engine's code sets the default."""
    words = _feature_words(rule, value) if value is not None else f"{rule.feature}: not known"
    return EngineFeature(rule.feature, value, source, where, f"{words} ({where})", rule.source)


def engine_defaults(engine: str | None, version: str | None, stated: str | None, stated_by: str | None,
                    config: dict) -> EngineDefaults | None:
    """The ``engine_defaults`` block (module docstring): the engine generation whose defaults apply
    and, per ENGINE_DEFAULTS feature of the engine, its value, source and words. None for a case
    whose engine is not known (a benchmark result alone) or mixes engines."""
    if engine not in ("vllm", "sglang"):
        return None
    generation, source, basis = _generation(engine, version, stated, stated_by)
    features = {}
    for rule in ENGINE_DEFAULTS:
        if rule.engine != engine or (engine == "vllm" and generation not in (None, rule.generation)):
            continue
        if rule.key in features:
            continue
        if rule.key in config and config[rule.key] is not None:
            value = config[rule.key]
            features[rule.key] = _feature(rule, value, "printed", f"stated in the capture: {rule.key}={value}")
            continue
        value = rule.value
        if rule.key == "enable_chunked_prefill" and generation == "V0" and (config.get("max_model_len") or 0) > 32768:
            value = None  # V0 turns chunked prefill on by itself for a long context
        if source == "not known" or value is None:
            known = "; ".join(f"{other.generation}: {'on' if other.value else 'off'}" for other in ENGINE_DEFAULTS
                              if other.engine == engine and other.key == rule.key and other.value is not None)
            why = rule.note or (f"the capture names no {engine} version or engine generation; by default {known}"
                                if engine == "vllm" else "")
            features[rule.key] = _feature(rule, None, "not known", f"not stated; {why}; {rule.flag} sets it")
            continue
        features[rule.key] = _feature(rule, value, source, f"the {basis}; {rule.flag} not in the capture")
    return EngineDefaults(engine, generation, basis or None, features)


def effective_config(serving: ServingSummary | dict | None) -> dict:
    """The engine config the serving block shows the engine ran with (ServingSummary.effective_config);
    empty without serving artifacts."""
    summary = serving_summary(serving)
    return summary.effective_config() if summary else {}


def _stat(values: list, reduce):
    """``reduce`` (mean, max, median) of a stats-line field over the rows that have it (not None), rounded;
    None without any."""
    values = [value for value in values if value is not None]
    return round(float(reduce(values)), 3) if values else None


def histogram_quantile(buckets: dict, q: float) -> HistogramQuantile | None:
    """Quantile q (0-100) from cumulative buckets {le: count}; linear inside the bucket."""
    edges = sorted(buckets)
    if not edges:
        return None
    total = buckets[edges[-1]] if math.isinf(edges[-1]) else max(buckets.values())
    if not total:
        return None
    target = q / 100.0 * total
    prev_le, prev_count = 0.0, 0.0
    for le in edges:
        count = buckets[le]
        if count >= target:
            if math.isinf(le):
                return HistogramQuantile(prev_le * 1000.0, True, None)
            frac = (target - prev_count) / (count - prev_count) if count > prev_count else 1.0
            return HistogramQuantile(round((prev_le + frac * (le - prev_le)) * 1000.0, 3), False,
                                     round((le - prev_le) * 1000.0, 3))
        prev_le, prev_count = le, count
    # the histogram has no +Inf bucket and the quantile lies above its last bucket
    return HistogramQuantile(prev_le * 1000.0, True, None)


def _merged_histogram(caps, names: tuple[str, ...]) -> ServerHistogram | None:
    """One server histogram of the /metrics scrapes: every replica's histograms of ``names`` merged
    bucket by bucket; None when no replica has one."""
    merged: dict = defaultdict(float)
    total_s = total_count = 0.0
    for capture in caps:
        for replica in capture.replicas.values():
            for name in names:
                histogram = replica.histograms.get(name)
                if not histogram:
                    continue
                for le, count in histogram.buckets.items():
                    merged[le] += count
                if histogram.sum is not None and histogram.count:
                    total_s += histogram.sum
                    total_count += histogram.count
    if not merged:
        return None
    quantiles = {f"p{q}": histogram_quantile(dict(merged), q) for q in QUANTILES}
    return ServerHistogram(**quantiles, count=merged[math.inf] if math.inf in merged else max(merged.values()),
                           mean_ms=round(1000.0 * total_s / total_count, 3) if total_count else None)


def _server_latency(caps) -> ServerLatency:
    """``latency.server``: per HISTOGRAMS name, the quantiles, count and mean of the /metrics histograms
    of every replica merged bucket by bucket."""
    return ServerLatency(**{ours: _merged_histogram(caps, names) for ours, names in HISTOGRAMS.items()})


def _client_figures(chosen: BenchInput, metric: str) -> ClientFigures | None:
    """One metric's figures of the chosen record (:func:`_client_latency`), None when it states none."""
    stated = chosen.record
    entry = {key.split("_")[0]: stated[key] for key in stated if key.endswith(f"_{metric}_ms") and stated[key] is not None}
    if "median" in entry:
        entry["p50"] = entry["median"]
    per_request = chosen.per_request(metric)
    for quantile in ("p50", "p99", "max") if per_request else ():
        entry.setdefault(quantile, per_request[quantile])
    return ClientFigures.from_contract({quantile: round(value, 3) for quantile, value in entry.items()})


def _client_latency(bench: list[BenchInput]) -> ClientLatency:
    """``latency.client``: the percentiles of the record with the highest finite request rate (else the
    last). A percentile the benchmark states (``p99_itl_ms``, ``median_itl_ms``) is the value; its
    per-request arrays fill only what it does not state (the max, a missing percentile), so the bench
    row and the latency table never show two values of one percentile. Each figure is rounded once
    here (ms, 3 decimals): every text and check downstream formats that value."""
    chosen = chosen_record(bench)
    if chosen is None:
        return ClientLatency()
    record = BenchLoad(chosen.request_rate, chosen.max_concurrency, chosen.request_throughput, chosen.completed)
    return ClientLatency(record, *(_client_figures(chosen, metric) for metric in ("ttft", "tpot", "itl", "e2el")))


@dataclass(frozen=True, slots=True)
class LineFit:
    """A least-squares line y = a + b x: intercept, slope, r², points and the x range."""

    a_ms: float
    b_ms_per_seq: float
    r2: float
    points: int
    x_max: float
    x_min: float


def fit_line(points: list[tuple[float, float]]) -> LineFit | None:
    """Least-squares y = a + b x with r^2; None with fewer than 4 distinct x."""
    if len({x for x, _ in points}) < 4:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    syy = sum((y - my) ** 2 for _, y in points)
    if sxx == 0:
        return None
    b = sxy / sxx
    a = my - b * mx
    r2 = (sxy * sxy) / (sxx * syy) if syy else 1.0
    return LineFit(round(a, 4), round(b, 5), round(r2, 4), n, max(x for x, _ in points), min(x for x, _ in points))


def _fitted(points: list[tuple[float, float]], source: str) -> TpotFit | None:
    """The TPOT fit of ``points`` from ``source``, None when they do not make a line."""
    line = fit_line(points)
    if line is None:
        return None
    return TpotFit(line.a_ms, line.b_ms_per_seq, line.r2, line.points, line.x_max, line.x_min, source, sorted(points))


def _tpot_fit(bench: list[BenchInput], stats: list[StatsSample]) -> TpotFit | None:
    """``tpot_fit`` (module docstring): from the benchmark sweep, else from the stats lines."""
    points = [(float(record.max_concurrency), float(record.mean_tpot_ms)) for record in bench
              if isinstance(record.max_concurrency, (int, float)) and record.mean_tpot_ms]
    if len({x for x, _ in points}) >= 4:
        fit = _fitted(points, "benchmark sweep (mean TPOT at each max concurrency)")
        if fit:
            return fit
    points = [(row.running, 1000.0 * row.running / row.gen_tps) for row in stats
              if row.running and row.gen_tps and row.gen_tps > 0]
    return _fitted(points, "engine stats lines (TPOT = running / generation throughput)")


def _run_words(record: BenchInput) -> str:
    """A benchmark run in words: 'the 18 req/s run', 'the rate-inf run at max concurrency 256'."""
    concurrency = f" at max concurrency {record.max_concurrency:g}" if isinstance(record.max_concurrency, (int, float)) else ""
    if _finite_rate(record):
        return f"the {record.request_rate:g} req/s run{concurrency}"
    return f"the rate-inf run{concurrency}" if concurrency else "the rate-inf run, all requests sent at once"


def _saturated(bench: list[BenchInput]) -> bool:
    """Whether a run of one series saturated the server (rules/serving.saturates), so that the highest
    completion rate measured is its capacity and not a lower bound of it."""
    from tracetriage.analyzers.rules.serving_queue import saturates

    finite = [record for record in bench if _finite_rate(record)]
    lowest = min((record.record.get("mean_ttft_ms") for record in finite if record.record.get("mean_ttft_ms")), default=None)
    return any(saturates(record.request_rate, record.request_throughput, record.max_concurrency,
                         record.record.get("mean_ttft_ms"), lowest, len(finite)) for record in bench)


def _closed_loop(best: BenchInput) -> tuple[float | None, float | None]:
    """(max concurrency C, Little's bound C / W on the completion rate, req/s) of the run of the highest
    completion rate when it ran closed-loop (a max concurrency and a mean E2E latency W); (None, None) else."""
    concurrency, e2el = best.max_concurrency, best.mean_e2el_ms
    if not (isinstance(concurrency, (int, float)) and concurrency > 0 and e2el):
        return None, None
    return float(concurrency), round(concurrency / (e2el / 1000.0), 3)


def _littles_law(series: BenchSeries, stats: StatsSummary | None) -> LittlesLaw:
    """``littles_law`` (module docstring): from the benchmark records of one series (serving_series), else
    from the stats summary. Arrival and capacity come from the same series: a deployment's rate is
    never set against another deployment's completion rate. Each rate is named with its run: the arrival
    rate and the completion rate L is computed from (the busiest finite-rate run), the capacity (the highest
    completion rate measured, a lower bound unless a run saturated the server) and, for a closed-loop run,
    Little's bound C / W beside its measured completion rate."""
    arrival = capacity = in_system = time_in_system = source = throughput = None
    capacity_run = saturated = concurrency = concurrency_rps = None
    bench = [record for record in series.records if record.request_throughput]
    if bench:
        best = max(bench, key=lambda record: record.request_throughput)
        capacity, capacity_run = round(best.request_throughput, 3), _run_words(best)
        saturated = _saturated(series.records)
        concurrency, concurrency_rps = _closed_loop(best)
        source = "benchmark: completed / duration of each run" + series.words()
    finite = [record for record in bench if _finite_rate(record)]
    if finite:
        top = max(finite, key=lambda record: record.request_rate)
        arrival, throughput = top.request_rate, round(top.request_throughput, 3)
        source = "benchmark: configured request rate vs measured completion rate" + series.words()
        if top.mean_e2el_ms:
            time_in_system = round(top.mean_e2el_ms / 1000.0, 3)
            in_system = round(top.request_throughput * time_in_system, 2)
    if stats and stats.running_mean is not None and in_system is None:
        in_system = round((stats.running_mean or 0) + (stats.waiting_mean or 0), 2)
        source = (f"{source}; requests in the system from the engine stats: running + waiting" if source
                  else "engine stats: requests in system = running + waiting")
    return LittlesLaw(arrival, capacity, in_system, time_in_system, source, throughput, capacity_run, saturated,
                      concurrency, concurrency_rps)


def _token_totals(series: BenchSeries, counters: TokenCounters, stats_rows: list[StatsSample]) -> tuple[float, float, str]:
    """(prompt tokens, output tokens, where from): the benchmark totals of one series (serving_series),
    else the token counters, else the stats lines' throughputs (a zero total when none has both)."""
    prompt = sum(record.total_input_tokens or 0 for record in series.records)
    output = sum(record.total_output_tokens or 0 for record in series.records)
    if prompt and output:
        return prompt, output, "benchmark totals" + series.words()
    if counters.prompt_tokens and counters.generation_tokens:
        return counters.prompt_tokens, counters.generation_tokens, "token counters (/metrics)"
    prompt_tps = [row.prompt_tps for row in stats_rows if row.prompt_tps is not None]
    gen_tps = [row.gen_tps for row in stats_rows if row.gen_tps is not None]
    if prompt_tps and gen_tps and sum(gen_tps) > 0:
        return sum(prompt_tps), sum(gen_tps), "engine stats lines (prompt vs generation throughput)"
    return prompt, output, "benchmark totals"


def _prefix_hit(caps, stats_rows: list[StatsSample], prefills: list[PrefillSample],
                counters: TokenCounters) -> tuple[float | None, str | None]:
    """(prefix-cache hit %, where from): stats lines, else SGLang prefill lines, else hits / queries
    counters, else the sglang:cache_hit_rate gauge."""
    stats_hits = [row.prefix_hit_pct for row in stats_rows if row.prefix_hit_pct is not None]
    if stats_hits:
        return statistics.fmean(stats_hits), "engine stats lines"
    if prefills and any(row.new_token for row in prefills):
        new = sum(row.new_token or 0 for row in prefills)
        cached = sum(row.cached_token or 0 for row in prefills)
        return 100.0 * cached / (new + cached) if new + cached else None, "SGLang prefill lines (cached / (new + cached) tokens)"
    if counters.prefix_queries:
        return 100.0 * counters.prefix_hits / counters.prefix_queries, "prefix cache hits / queries counters"
    gauges = [replica.gauges[name] for capture in caps for replica in capture.replicas.values()
              for name in PREFIX_HIT_GAUGES if name in replica.gauges]
    if gauges:
        return 100.0 * statistics.fmean(gauges), "sglang:cache_hit_rate"
    return None, None


def _tokens(caps, series: BenchSeries, stats_rows: list[StatsSample], prefills: list[PrefillSample]) -> Tokens:
    """The ``tokens`` block: prompt per output token and the prefix-cache hit rate (module docstring)."""
    counters = TokenCounters.of(caps)
    prompt, output, source = _token_totals(series, counters, stats_rows)
    hit, hit_source = _prefix_hit(caps, stats_rows, prefills, counters)
    both = bool(prompt and output)
    return Tokens(prompt or None, output or None, round(prompt / output, 3) if both else None, source if both else None,
                  round(hit, 3) if hit is not None else None, hit_source, counters.preemptions or None)


def _gauge(gauges: dict, ours: str):
    """A replica's gauge by our name (GAUGES: the first of its metric names the scrape has), or None."""
    return next((gauges[name] for name in GAUGES[ours] if name in gauges), None)


PREFIX_HIT_GAUGES = GAUGES["prefix_hit"]


def _scraped_replicas(caps) -> list[Replica]:
    """One row per /metrics replica (a scrape's instance/engine label, or its file) that shows any load."""
    out = []
    for capture in caps:
        for label, replica in capture.replicas.items():
            kv_usage = _gauge(replica.gauges, "kv_usage")
            row = Replica(f"{capture.path}" + (f" [{label}]" if label else ""), "metrics", _gauge(replica.gauges, "running"),
                          _gauge(replica.gauges, "waiting"), round(100.0 * kv_usage, 3) if kv_usage is not None else None,
                          _gauge(replica.gauges, "prefix_hit"))
            if any(value is not None for value in (row.running, row.waiting, row.kv_usage_pct)):
                out.append(row)
    return out


def _replicas(caps, stats_rows: list[StatsSample]) -> list[Replica]:
    """One row per replica: a scrape's instance/engine label (or its file); without scrapes, an engine
    id of the stats lines (one replica is not counted twice from both)."""
    out = _scraped_replicas(caps)
    by_engine = defaultdict(list)
    for stats_row in stats_rows:
        by_engine[(stats_row.file, stats_row.replica)].append(stats_row)
    if len(by_engine) > 1 and not out:  # scrapes name the replicas when there are any; else the engines of the stats lines
        for (path, engine), rows in by_engine.items():
            out.append(Replica(f"{path}" + (f" [engine {engine}]" if engine else ""), "stats lines",
                               _stat([row.running for row in rows], statistics.fmean),
                               _stat([row.waiting for row in rows], statistics.fmean),
                               _stat([row.kv_usage_pct for row in rows], statistics.fmean)))
    return out


METRIC_WORDS = ("num_requests", "kv_cache_usage", "gpu_cache_usage", "prefix_cache", "num_preemptions", "token_usage",
                "num_running", "num_queue", "cache_hit")  # the /metrics values the summary keeps


def _stats_block(stats: list[StatsSample]) -> StatsSummary | None:
    """The ``stats`` block (module docstring) of the engine stats lines, None without any."""
    if not stats:
        return None
    running, kv_usage = [row.running for row in stats], [row.kv_usage_pct for row in stats]
    waiting = [row.waiting for row in stats if row.waiting is not None]
    return StatsSummary(
        samples=len(stats),
        running_mean=_stat(running, statistics.fmean),
        running_max=_stat(running, max),
        waiting_mean=_stat(waiting, statistics.fmean),
        waiting_max=_stat(waiting, max),
        waiting_first=waiting[0] if waiting else None,
        waiting_last=waiting[-1] if waiting else None,
        waiting_share_pct=round(100.0 * sum(1 for row in stats if (row.waiting or 0) > 0) / len(stats), 1),
        kv_usage_p50=_stat(kv_usage, statistics.median),
        kv_usage_max=_stat(kv_usage, max),
        prompt_tps_mean=_stat([row.prompt_tps for row in stats], statistics.fmean),
        gen_tps_mean=_stat([row.gen_tps for row in stats], statistics.fmean),
        prefix_hit_mean=_stat([row.prefix_hit_pct for row in stats], statistics.fmean),
    )


def _prompts(bench: list[BenchInput], prefills: list[PrefillSample]) -> Prompts:
    """The ``prompts`` block: mean and max input length (benchmark), the largest prefill (SGLang)."""
    lens = [record.input_lens for record in bench if record.input_lens]
    per_request_input = [record.total_input_tokens / record.completed for record in bench
                         if record.total_input_tokens and record.completed]
    if lens:
        input_len_mean = round(statistics.fmean([record_lens["mean"] for record_lens in lens]), 1)
    else:
        input_len_mean = round(statistics.fmean(per_request_input), 1) if per_request_input else None
    return Prompts(input_len_mean, max(record_lens["max"] for record_lens in lens) if lens else None,
                   max((row.new_token or 0 for row in prefills), default=None) or None)


def summary(caps) -> ServingSummary:
    """The serving summary of a case's serving captures."""
    pooled = gather(caps)
    series = measured_series(pooled.bench)  # one server's records: a file may hold several deployments' sweeps
    stats = _stats_block(pooled.stats)
    tokens = _tokens(caps, series, pooled.stats, pooled.prefills)
    latency = Latency(_client_latency(series.records), _server_latency(caps))
    fit = _tpot_fit(series.records, pooled.stats)
    return ServingSummary(
        captures=tuple(Capture(capture.path, capture.kind, capture.version) for capture in caps),
        engine="/".join(sorted(pooled.engines)) or None,
        version=pooled.versions[0] if pooled.versions else None,
        config=pooled.config,
        stats=stats,
        metrics={name: value for name, value in pooled.metrics.items() if any(word in name for word in METRIC_WORDS)},
        bench=tuple(BenchRecord.from_contract(record.contract()) for record in pooled.bench),
        warnings=pooled.warnings,
        latency=latency,
        littles_law=_littles_law(series, stats),
        tpot_fit=fit,
        tokens=tokens,
        replicas=tuple(_replicas(caps, pooled.stats)),
        prompts=_prompts(series.records, pooled.prefills),
        memory=ServingMemory(pooled.oom, max(pooled.preemptions, int(tokens.preemptions_counter or 0)), pooled.retractions,
                             pooled.memory or None),
        engine_defaults=engine_defaults(next(iter(pooled.engines)) if len(pooled.engines) == 1 else None,
                                        pooled.versions[0] if pooled.versions else None, pooled.generation,
                                        pooled.generation_from, pooled.config),
        requests=requests_block(caps, chosen_record(series.records)),
        cross_checks=cross_checks(latency, fit, stats),
    )


def series(caps) -> dict:
    """Arrays for the charts only (kept out of the JSON): stats over time, TPOT against batch."""
    rows = [StatsSample.of(row, capture.path) for capture in caps for row in capture.stats]
    t0 = next((row.t for row in rows if row.t is not None), None)
    return {
        "stats": [{"t": (row.t - t0) if row.t is not None and t0 is not None else index,
                   "running": row.running, "waiting": row.waiting, "kv_usage_pct": row.kv_usage_pct}
                  for index, row in enumerate(rows[:5000])],
    }
