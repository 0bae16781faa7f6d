"""Serving-engine artifacts: engine logs, Prometheus ``/metrics`` scrapes, benchmark results,
and the allocator's state at an OOM.

* vLLM log (V0 and V1, any prefix such as ``(APIServer pid=1)``): the version, which engine
  generation ran (``generation``: the start-up line ``Initializing a V1 LLM engine (v...)`` /
  ``Initializing a V0 LLM engine`` / ``Initializing an LLM engine``, a ``Falling back to V0``
  warning, else the stats lines' form: V1 ``Waiting:``, V0 ``Swapped:`` / ``Pending:``), the engine
  configuration (``non-default args: {...}``, ``Initializing ... engine ... with config:``,
  ``Chunked prefill is enabled ...``), KV-cache size lines, the periodic stats lines (V0
  ``metrics.py``: Running / Swapped / Pending; V1 ``loggers.py``: Running / Waiting, KV cache
  usage, prefix cache hit rate), preemption warnings and ``CUDA out of memory`` errors.
* SGLang log: ``Decode batch`` lines (old ``.`` and new ``,`` forms: #running-req, #token,
  token usage, gen throughput, #queue-req, cuda graph) and ``Prefill batch`` lines (#new-seq,
  #new-token, #cached-token, cache hit rate), KV-pool retractions, OOM errors.
* Prometheus text (``vllm:*`` of both metric generations, ``sglang:*``): gauges and counters
  per replica (an ``instance`` or ``engine`` label, else the file), and histograms with their
  cumulative buckets, so percentiles can be estimated with the bucket resolution stated.
* ``benchmark_serving.py`` / ``vllm bench serve`` ``--save-result`` JSON or JSONL (aggregate
  keys, with or without the per-request ``ttfts`` / ``itls`` / ``input_lens`` /
  ``output_lens`` arrays), several records being a load sweep; the printed "Serving
  Benchmark Result" table; SGLang ``bench_serving`` JSONL.
* ``torch.cuda.memory_summary()`` text and the ``Tried to allocate ... reserved by PyTorch
  but unallocated`` sentence of an OOM error: allocated, reserved, free, fragmentation.

Nothing here raises on a bad line: what cannot be read is skipped and counted into
``warnings`` (which name the problem; the input row names the file).
"""

from __future__ import annotations

import math
import re
import statistics
from datetime import datetime

from tracetriage.errors import TraceFormatError
from tracetriage.parsers import coerce
from tracetriage.parsers.common import json_document
from tracetriage.parsers.serving_capture import Histogram, ScrapedReplica, ServingCapture
from tracetriage.parsers.serving_config import bench_meta, config_from, finish_reason, info_labels, requests_from

MAX_LINE = 65_536  # longer lines are noise (binary junk, a pasted blob): skipped and counted

# --- vLLM log -------------------------------------------------------------------------
_STATS = re.compile(r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s")
_FIELD = {
    "running": re.compile(r"Running: (\d+) reqs"),
    "waiting": re.compile(r"(?:Waiting|Pending): (\d+) reqs"),
    "swapped": re.compile(r"Swapped: (\d+) reqs"),
    "kv_usage_pct": re.compile(r"GPU KV cache usage: ([\d.]+)%"),
    "prefix_hit_pct": re.compile(r"Prefix cache hit rate: (?:GPU: )?([\d.]+)%"),
}
_PREFIX_LINE = re.compile(r"Prefix cache hit rate: GPU: ([\d.]+)%")
_ENGINE_ID = re.compile(r"Engine (\d+):")
_VERSION = re.compile(r"(?:vLLM API server version|V1 LLM engine \(v|LLM engine \(v)\s*v?([\w.+\-]+)")
_NON_DEFAULT = re.compile(r"non-default args: (\{.*)$")
_CHUNKED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
# which engine generation ran (vllm/v1/engine/core.py, vllm/engine/llm_engine.py; arg_utils.py's fallback warning)
_GENERATION = ((re.compile(r"Initializing a V1 LLM engine \(v"), "V1", "the start-up line 'Initializing a V1 LLM engine'"),
               (re.compile(r"Initializing a V0 LLM engine \(v|Initializing an LLM engine \(v"), "V0",
                "the start-up line 'Initializing a V0 LLM engine' / 'Initializing an LLM engine'"),
               (re.compile(r"Falling back to V0"), "V0", "the warning 'Falling back to V0'"))
_KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
# the weights each worker loaded (vLLM: "Model loading took 14.99 GiB and 5.3 seconds"; SGLang: "Load weight
# end. ... mem usage=14.98 GB"): with tensor parallelism every rank logs its own shard, the bytes per device
_WEIGHTS = re.compile(r"Model loading took ([\d.]+) ?(GiB|GB|MiB|MB)\b|Load weight end\..*?mem usage=([\d.]+) ?(GiB|GB)\b")
_PREEMPT = re.compile(r"(?i)is preempted by PreemptionMode|preempted.*(?:KV cache|recompute)"
                      r"|total_num_cumulative_preemption=(\d+)")
# "MM-DD HH:MM:SS" (vLLM) or "[YYYY-MM-DD HH:MM:SS" / "[HH:MM:SS" (SGLang)
_TIME = re.compile(r"(?:(\d{4})-)?(?:(\d\d)-(\d\d) )?(\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")

# --- SGLang log -----------------------------------------------------------------------
_SGL_DECODE = re.compile(r"Decode batch[.,]")
_SGL_PREFILL = re.compile(r"Prefill batch[.,]")
_SGL_FIELDS = {
    "running": re.compile(r"#running-req: (\d+)"),
    "waiting": re.compile(r"#queue-req: (\d+)"),
    "tokens": re.compile(r"#token: (\d+)"),
    "token_usage": re.compile(r"token usage: ([\d.]+)"),
    "gen_tps": re.compile(r"gen throughput \(token/s\): ([\d.]+)"),
    "input_tps": re.compile(r"input throughput \(token/s\): ([\d.]+)"),
    "new_seq": re.compile(r"#new-seq: (\d+)"),
    "new_token": re.compile(r"#new-token: (\d+)"),
    "cached_token": re.compile(r"#cached-token: (\d+)"),
    "cache_hit_pct": re.compile(r"cache hit rate: ([\d.]+)%"),
}
_SGL_CUDA_GRAPH = re.compile(r"cuda graph: (True|False)")
_SGL_RETRACT = re.compile(r"(?i)retract(?:ed)? requests|#retracted_reqs: (\d+)")
_SGL_VERSION = re.compile(r"sglang(?:==|\s+version\s*:?\s*|/)v?(\d+\.\d+[\w.+\-]*)", re.I)

# --- errors ---------------------------------------------------------------------------
_SIZE = r"([\d.]+)\s*([KMGT]i?B|B|bytes)"
_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|HIP out of memory")
_OOM_TRIED = re.compile(r"Tried to allocate " + _SIZE)
_OOM_TOTAL = re.compile(r"total capacity of " + _SIZE)
_OOM_FREE = re.compile(r"of which " + _SIZE + r" is free")
_OOM_IN_USE = re.compile(r"this process has " + _SIZE + r" memory in use")
_OOM_ALLOC = re.compile(_SIZE + r" is allocated by PyTorch")
_OOM_RESERVED_FREE = re.compile(_SIZE + r" is reserved by PyTorch but unallocated")
_MEMSUM_ROW = re.compile(r"^\|?\s*(Allocated memory|GPU reserved memory|Reserved memory)"
                         r"\s*\|\s*([\d.]+)\s*([KMGT]i?B|B)\s*\|\s*([\d.]+)\s*([KMGT]i?B|B)")

# --- Prometheus -----------------------------------------------------------------------
_PROM = re.compile(r"^((?:vllm|sglang):[A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

# --- benchmark table ------------------------------------------------------------------
_TABLE = {
    "successful requests": "completed", "benchmark duration (s)": "duration", "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens", "request throughput (req/s)": "request_throughput",
    "output token throughput (tok/s)": "output_throughput", "total token throughput (tok/s)": "total_token_throughput",
    "request rate configured (rps)": "request_rate", "traffic request rate": "request_rate",
    "maximum request concurrency": "max_concurrency", "max request concurrency": "max_concurrency",
}
_TABLE_METRIC = re.compile(r"^(Mean|Median|P\d+(?:\.\d+)?)\s+(TTFT|TPOT|ITL|E2EL|E2E Latency)\s+\(ms\):\s*([\d.]+)", re.I)
_BENCH_KEYS = ("request_rate", "burstiness", "max_concurrency", "completed", "duration", "total_input_tokens",
               "total_output_tokens", "request_throughput", "output_throughput", "total_token_throughput")
_SYNONYMS = {"mean_e2e_latency_ms": "mean_e2el_ms", "median_e2e_latency_ms": "median_e2el_ms",
             "p99_e2e_latency_ms": "p99_e2el_ms", "total_input": "total_input_tokens", "total_output": "total_output_tokens"}

_UNITS = {"B": 1, "bytes": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3,
          "TiB": 1024 ** 4}


def _number(raw):
    """A finite float from text, else None (NaN, +Inf and junk are not values)."""
    try:
        x = float(raw)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _bytes(value: str, unit: str) -> float | None:
    x = _number(value)
    return None if x is None else x * _UNITS.get(unit, 1)


def _seconds(line: str) -> float | None:
    """Seconds (within a year) of the line's timestamp, to order and space samples."""
    m = _TIME.search(line[:64])
    if not m:
        return None
    year, month, day, hh, mm, ss, frac = m.groups()
    try:
        if month:
            base = datetime(int(year or 2000), int(month), int(day)).timestamp() - datetime(int(year or 2000), 1, 1).timestamp()
        else:
            base = 0.0
    except ValueError:
        return None
    return base + int(hh) * 3600 + int(mm) * 60 + int(ss) + (float("0." + frac) if frac else 0.0)


def _lines(cap: ServingCapture, text: str):
    long = 0
    for line in text.splitlines():
        if len(line) > MAX_LINE:
            long += 1
            continue
        yield line
    if long:
        cap.warnings.append(f"{long} over-long lines ({MAX_LINE:,}+ characters) skipped")


def parse(path: str, text: str | None = None) -> ServingCapture:
    if text is None:
        from tracetriage.parsers.common import read_text

        text = read_text(path)
    noise = text.count("\ufffd") + sum(1 for ch in text[:200_000] if ch < " " and ch not in "\t\n\r")
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")) and not _looks_like_log(stripped) and _BENCH_HINT.search(text[:200_000]):
        cap = _bench(path, text)
    elif re.search(r"^(?:vllm|sglang):", text, re.M) or re.search(r"^# (?:HELP|TYPE) (?:vllm|sglang):", text, re.M):
        cap = _prom(path, text)
    elif re.search(r"Serving Benchmark Result", text):
        cap = _bench_table(path, text)
    else:
        cap = _log(path, text)
    if noise:
        cap.warnings.append(f"{noise:,} undecodable or control characters (binary noise) ignored")
    return cap


_BENCH_HINT = re.compile(r'"(?:request_throughput|mean_ttft_ms|median_ttft_ms|mean_e2e_latency_ms)"')
_LOG_START = re.compile(r"^\[(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d[^\]]*\]")


def _looks_like_log(stripped: str) -> bool:
    """A line starting with a bracketed timestamp ("[2026-04-05 20:02:51] Decode batch") is a log, not JSON."""
    return bool(_LOG_START.match(stripped))


def looks_like_log(text: str) -> bool:
    return _looks_like_log(text.lstrip())


def _log(path: str, text: str) -> ServingCapture:
    cap = ServingCapture(path=str(path), kind="vllm_log", engine="vllm")
    sglang = bool(_SGL_DECODE.search(text) or _SGL_PREFILL.search(text) or re.search(r"(?i)sglang", text[:20_000]))
    if sglang and not _STATS.search(text):
        cap.kind, cap.engine = "sglang_log", "sglang"
    for line in _lines(cap, text):
        _log_version(cap, line)
        _log_generation(cap, line)
        if _log_config(cap, line) or _vllm_stats(cap, line) or _sglang_batch(cap, line) or _log_events(cap, line):
            continue
        _memory_summary_row(cap, line)
    if not cap.stats and not cap.config and cap.version is None and (cap.memory or cap.events.oom):
        cap.kind, cap.engine = "oom_report", None
    return cap


def _log_version(cap: ServingCapture, line: str) -> None:
    """The engine's version, from the first line of the engine's own form that states it."""
    if cap.engine == "vllm":
        v = _VERSION.search(line)
        if v and cap.version is None:
            cap.version = v.group(1).rstrip(")")
    else:
        v = _SGL_VERSION.search(line)
        if v and cap.version is None:
            cap.version = v.group(1)


def _log_generation(cap: ServingCapture, line: str) -> None:
    """The vLLM engine generation (V1 / V0) a line states: the start-up line or the fallback warning
    decide (the last one wins: a fallback comes after the V1 attempt); a stats line's form only
    when nothing stated it (V1's ``loggers.py`` prints ``Waiting:``, V0's ``metrics.py``
    ``Swapped:`` and ``Pending:``)."""
    if cap.engine != "vllm":
        return
    for pattern, generation, said_by in _GENERATION:
        if pattern.search(line):
            cap.generation, cap.generation_from = generation, said_by
            return
    if cap.generation is None and _STATS.search(line):
        if _FIELD["swapped"].search(line) or "Pending:" in line:
            cap.generation, cap.generation_from = "V0", "the stats lines' V0 form (Swapped / Pending)"
        elif "Waiting:" in line:
            cap.generation, cap.generation_from = "V1", "the stats lines' V1 form (Running / Waiting)"


def _log_config(cap: ServingCapture, line: str) -> bool:
    """The engine configuration a log line states (arguments, chunked prefill, weights size, KV-cache
    size) into ``cap``; True when the line is vLLM's ``non-default args`` (nothing else is read from it)."""
    nd = _NON_DEFAULT.search(line)
    if nd:
        config_from(nd.group(1), cap.config)
        return True
    if "with config:" in line or "server_args=ServerArgs(" in line or "args: Namespace(" in line:
        config_from(line.split("with config:", 1)[-1].split("ServerArgs(", 1)[-1].split("Namespace(", 1)[-1], cap.config)
        if "chunked_prefill_enabled" in cap.config:  # what the engine resolved, printed in its config line
            cap.config.setdefault("enable_chunked_prefill", cap.config["chunked_prefill_enabled"])
    ch = _CHUNKED.search(line)
    if ch:
        cap.config["enable_chunked_prefill"] = True
        cap.config.setdefault("max_num_batched_tokens", int(ch.group(1)))
    wl = _WEIGHTS.search(line)
    if wl:
        got = _bytes(wl.group(1) or wl.group(3), wl.group(2) or wl.group(4))
        if got:
            cap.config["model_weights_bytes"] = int(got)
    kv = _KV_TOKENS.search(line)
    if kv:
        cap.kv_tokens = int(kv.group(1).replace(",", ""))
    return False


def _vllm_stats(cap: ServingCapture, line: str) -> bool:
    """A vLLM periodic stats line as a row of ``cap.stats`` (True), or the prefix-cache hit rate
    V0 logs on its own line, filled into the last row (False, as for any other line)."""
    s = _STATS.search(line)
    if s:
        row = {"t": _seconds(line), "prompt_tps": float(s.group(1)), "gen_tps": float(s.group(2))}
        for key, rx in _FIELD.items():
            m = rx.search(line)
            row[key] = float(m.group(1)) if m else None
        e = _ENGINE_ID.search(line)
        row["replica"] = e.group(1) if e else ""
        cap.stats.append(row)
        return True
    p = _PREFIX_LINE.search(line)
    if p:
        # V0's metrics.py prints this line only when a hit rate is kept (>= 0), i.e. prefix caching is on
        cap.config.setdefault("enable_prefix_caching", True)
    if p and cap.stats and cap.stats[-1].get("prefix_hit_pct") is None:
        cap.stats[-1]["prefix_hit_pct"] = float(p.group(1))  # V0 logs it on its own line
    return False


def _sglang_batch(cap: ServingCapture, line: str) -> bool:
    """An SGLang ``Decode batch`` / ``Prefill batch`` line (True) as a row of ``cap.stats`` (prefill
    lines also of ``cap.prefills``); only tensor-parallel rank 0's lines are kept."""
    if not (_SGL_DECODE.search(line) or _SGL_PREFILL.search(line)):
        return False
    row = {"t": _seconds(line)}
    for key, rx in _SGL_FIELDS.items():
        m = rx.search(line)
        row[key] = float(m.group(1)) if m else None
    if row["token_usage"] is not None:
        row["kv_usage_pct"] = 100.0 * row.pop("token_usage")
    else:
        row.pop("token_usage")
        row["kv_usage_pct"] = None
    g = _SGL_CUDA_GRAPH.search(line)
    if g:
        cap.config.setdefault("cuda_graph", g.group(1) == "True")
    tp = re.search(r"\bTP(\d+)\]", line)
    row["replica"] = ""
    if tp and tp.group(1) != "0":
        return True  # every TP rank logs the same batch: rank 0 speaks for the group
    if _SGL_PREFILL.search(line):
        cap.prefills.append(row)
    cap.stats.append(row)  # decode and prefill lines both sample the scheduler's running / queue / KV state
    return True


def _log_events(cap: ServingCapture, line: str) -> bool:
    """Preemptions, KV-pool retractions and OOM errors into ``cap.events``; True when the line is an
    OOM error or its wrapped details (nothing else is read from it)."""
    if _PREEMPT.search(line):
        m = _PREEMPT.search(line)
        n = m.group(1) if m and m.lastindex else None
        cap.events.preemptions = max(cap.events.preemptions + 1, int(n) if n else 0)
    r = _SGL_RETRACT.search(line)
    if r:
        cap.events.retractions += int(r.group(1)) if r.lastindex and r.group(1) else 1
    if _OOM.search(line):
        cap.events.oom.append(_oom_event(line))
        return True
    if cap.events.oom and ("Tried to allocate" in line or "reserved by PyTorch" in line):
        for k, v in _oom_event(line).items():  # the details wrapped onto the next line
            cap.events.oom[-1].setdefault(k, v)
        return True
    return False


def _oom_event(text: str) -> dict:
    out = {}
    for key, rx in (("tried_bytes", _OOM_TRIED), ("total_bytes", _OOM_TOTAL), ("free_bytes", _OOM_FREE),
                    ("in_use_bytes", _OOM_IN_USE), ("allocated_bytes", _OOM_ALLOC),
                    ("reserved_unallocated_bytes", _OOM_RESERVED_FREE)):
        m = rx.search(text)
        if m:
            out[key] = _bytes(m.group(1), m.group(2))
    return out


def _memory_summary_row(cap: ServingCapture, line: str) -> None:
    m = _MEMSUM_ROW.search(line.strip())
    if not m:
        return
    key = "allocated" if m.group(1).startswith("Allocated") else "reserved"
    cap.memory[f"{key}_bytes"] = _bytes(m.group(2), m.group(3))
    cap.memory[f"peak_{key}_bytes"] = _bytes(m.group(4), m.group(5))


def _prom(path: str, text: str) -> ServingCapture:
    engine = "sglang" if re.search(r"^(?:# (?:HELP|TYPE) )?sglang:", text, re.M) else "vllm"
    cap = ServingCapture(path=str(path), kind=f"{engine}_metrics", engine=engine)
    bad = 0
    for line in _lines(cap, text):
        bad += _prom_sample(cap, line)
    for rep in cap.replicas.values():
        for name, histogram in rep.histograms.items():
            if math.inf not in histogram.buckets:
                cap.warnings.append(f"histogram {name} has no +Inf bucket: percentiles above its last bucket are not known")
    if bad:
        cap.warnings.append(f"{bad} metric samples with unreadable values skipped")
    if engine == "vllm" and any("vllm:kv_cache_usage_perc" in rep.gauges for rep in cap.replicas.values()):
        cap.generation, cap.generation_from = "V1", "the V1 metric vllm:kv_cache_usage_perc"
    return cap


def _prom_sample(cap: ServingCapture, line: str) -> int:
    """One line of Prometheus text into its replica of ``cap``: 1 when it is a sample that cannot be
    read (skipped), else 0 (comments and other lines included)."""
    m = _PROM.match(line.strip())
    if not m:
        return 1 if line.startswith(("vllm:", "sglang:")) else 0  # a sample line cut off or mangled
    value = _number(m.group(3))
    if value is None and m.group(3) not in ("+Inf", "Inf", "NaN", "-Inf"):
        return 1
    name = m.group(1)
    labels = dict(_LABEL.findall(m.group(2) or ""))
    replica = labels.get("instance") or labels.get("engine") or labels.get("dp_rank") or ""
    rep = cap.replicas.setdefault(replica, ScrapedReplica())
    if name.endswith("_bucket") and "le" in labels:
        return _prom_bucket(rep, name, labels, value)
    if value is None:
        return 0
    base, _, part = name.rpartition("_")
    if part in ("sum", "count") and base in rep.histograms:
        if part == "sum":
            rep.histograms[base].sum = value
        else:
            rep.histograms[base].count = value
        return 0
    if name.endswith("_created"):
        return 0
    info_labels(name, labels, cap.config)
    if name.endswith("_info"):
        rep.info.update(labels)
        return 0
    finish_reason(name, labels, value, cap.finish_reasons)
    return _prom_value(cap, rep, name, value)


def _prom_bucket(rep: ScrapedReplica, name: str, labels: dict, value: float | None) -> int:
    """A histogram bucket sample added to its cumulative bucket (samples differing in other labels,
    such as the model, are summed): 1 when its bound or value cannot be read or the sum overflows."""
    le = _number(labels["le"]) if labels["le"] not in ("+Inf", "Inf") else math.inf
    if le is None or value is None:
        return 1
    histogram = rep.histograms.setdefault(name[: -len("_bucket")], Histogram())
    total = histogram.buckets.get(le, 0.0) + value  # other labels (model) summed
    if not math.isfinite(total):  # 1e308 twice: no count of a real server
        return 1
    histogram.buckets[le] = total
    return 0


def _prom_value(cap: ServingCapture, rep: ScrapedReplica, name: str, value: float) -> int:
    """A counter (``*_total``: summed over samples) or gauge (the last sample) into the replica and
    into ``cap.metrics``: 1 when a counter's sum passes the float range."""
    if not name.endswith("_total"):
        rep.gauges[name] = cap.metrics[name] = value
        return 0
    if not (math.isfinite(rep.counters.get(name, 0.0) + value) and math.isfinite(cap.metrics.get(name, 0.0) + value)):
        return 1  # a sum past the float range: no count of a real server
    rep.counters[name] = rep.counters.get(name, 0.0) + value
    cap.metrics[name] = cap.metrics.get(name, 0.0) + value
    return 0


def _percentiles_from_list(values) -> dict:
    vals = sorted(v for v in values if isinstance(v, (int, float)) and math.isfinite(v))
    if not vals:
        return {}

    def q(p):
        return vals[min(len(vals) - 1, int(round(p / 100 * (len(vals) - 1))))]

    return {"p50": q(50), "p99": q(99), "max": vals[-1], "mean": statistics.fmean(vals), "n": len(vals)}


def _aggregate_numbers(d: dict) -> dict:
    """The aggregate keys of a benchmark record (synonyms already folded) and its latency statistics
    (``mean_ttft_ms``, ``p99_itl_ms``...). Numbers only (a number written as a string is read; other
    text, NaN or Infinity is no value), except request_rate's "inf" (an open-loop run), kept as infinity."""
    out = {}
    for k in _BENCH_KEYS:
        if k in d and not isinstance(d[k], bool):
            v = d[k]
            if k == "request_rate" and isinstance(v, (str, float)) and str(v).strip().lower() in ("inf", "infinity"):
                out[k] = math.inf
            else:
                out[k] = coerce.number(v)
    for k, v in d.items():
        if re.fullmatch(r"(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms", k) and isinstance(v, (int, float, str)):
            out[k] = coerce.number(v)
    return out


def _summarise_requests(d: dict, out: dict) -> None:
    """Percentile summaries of the per-request arrays (``ttfts`` and ``itls`` in ms, the lengths
    in tokens) into ``out`` as ``_ttfts``, ``_itls``, ``_input_lens``, ``_output_lens``."""
    for key in ("ttfts", "itls", "input_lens", "output_lens"):
        arr = d.get(key)
        if isinstance(arr, list) and arr:
            flat = [x for row in arr for x in (row if isinstance(row, list) else [row])]
            stats = _percentiles_from_list(flat)
            if stats:
                if key in ("ttfts", "itls"):  # seconds in the result file
                    stats = {k: (v * 1000.0 if k != "n" else v) for k, v in stats.items()}
                out[f"_{key}"] = stats


def _record(d: dict) -> dict | None:
    """A benchmark record: aggregate keys (synonyms folded), plus summaries of per-request arrays."""
    if not isinstance(d, dict):
        return None
    d = {_SYNONYMS.get(k.rstrip(":"), k.rstrip(":")): v for k, v in d.items() if isinstance(k, str)}
    out = _aggregate_numbers(d)
    _summarise_requests(d, out)
    out["_meta"] = bench_meta(d)
    requests = requests_from(d)
    if requests:
        out["_requests"] = requests
    group = [str(d[k]) for k in ("backend", "model_id", "model", "deployment", "gpu", "gateway", "label")
             if isinstance(d.get(k), str)]
    out["group"] = "|".join(group)
    return out if any(k in out for k in ("request_throughput", "mean_ttft_ms", "median_ttft_ms", "completed")) else None


def _bench(path: str, text: str) -> ServingCapture:
    cap = ServingCapture(path=str(path), kind="bench_result")
    docs = []
    try:
        doc = json_document(path, text, "benchmark result")
        docs = doc if isinstance(doc, list) else [doc]
    except TraceFormatError:
        bad = 0
        for line in _lines(cap, text):  # JSONL, possibly with a cut last line
            if not line.strip():
                continue
            try:
                docs.append(json_document(path, line, "benchmark result line"))
            except TraceFormatError:
                bad += 1
        if bad:
            cap.warnings.append(f"{bad} benchmark result lines that are not JSON skipped")
    missing = 0
    for d in docs:
        rec = _record(d)
        if rec is None:
            missing += 1
            continue
        cap.bench.append(rec)
        cap.config.update(rec["_meta"])
    if missing:
        cap.warnings.append(f"{missing} benchmark records without throughput or latency keys skipped")
    if any(isinstance(d, dict) and "sglang" in str(d.get("backend", "")) for d in docs):
        cap.engine = "sglang"
    return cap


def _bench_table(path: str, text: str) -> ServingCapture:
    """The table ``benchmark_serving.py`` prints; several tables in one file are a sweep."""
    cap = ServingCapture(path=str(path), kind="bench_result")
    rec: dict = {}
    for line in _lines(cap, text):
        if "Serving Benchmark Result" in line:
            if _record(rec):
                cap.bench.append(_record(rec))
            rec = {}
            continue
        m = _TABLE_METRIC.match(line.strip())
        if m:
            stat = m.group(1).lower()
            metric = {"e2e latency": "e2el"}.get(m.group(2).lower(), m.group(2).lower())
            rec[f"{stat}_{metric}_ms"] = _number(m.group(3))
            continue
        if ":" in line:
            k, _, v = line.partition(":")
            key = _TABLE.get(k.strip().lower())
            if key:
                x = v.strip()
                rec[key] = math.inf if x.lower() == "inf" else _number(x)
    if _record(rec):
        cap.bench.append(_record(rec))
    return cap
