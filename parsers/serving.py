"""Serving-engine artifacts: vLLM logs, Prometheus ``/metrics`` scrapes, benchmark results.

* vLLM log — the engine configuration (``non-default args: {...}``, the ``Initializing
  ... engine ... with config:`` line, ``Chunked prefill is enabled ...``) and the
  periodic stats lines of V0 (``metrics.py``: Running / Swapped / Pending) and V1
  (``loggers.py``: Running / Waiting, KV cache usage, prefix cache hit rate).
* Prometheus text — ``vllm:*`` gauges and counters (last sample of each series;
  cut-off scrapes and missing ``_sum``/``_count`` are tolerated).
* ``benchmark_serving.py --save-result`` JSON / JSONL — request throughput, TTFT,
  TPOT, ITL percentiles.

Lines that do not parse are skipped; nothing here raises on a bad line.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from tracetriage.errors import TraceFormatError
from tracetriage.parsers.common import json_document

_STATS = re.compile(r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s")
_FIELD = {
    "running": re.compile(r"Running: (\d+) reqs"),
    "waiting": re.compile(r"(?:Waiting|Pending): (\d+) reqs"),
    "swapped": re.compile(r"Swapped: (\d+) reqs"),
    "kv_usage_pct": re.compile(r"GPU KV cache usage: ([\d.]+)%"),
    "prefix_hit_pct": re.compile(r"Prefix cache hit rate: (?:GPU: )?([\d.]+)%"),
}
_VERSION = re.compile(r"(?:vLLM API server version|V1 LLM engine \(v|LLM engine \(v)\s*v?([\w.+\-]+)")
_NON_DEFAULT = re.compile(r"non-default args: (\{.*)$")
_CONFIG_KEYS = ("enforce_eager", "enable_chunked_prefill", "max_num_seqs", "max_num_batched_tokens",
                "tensor_parallel_size", "pipeline_parallel_size", "enable_prefix_caching", "gpu_memory_utilization",
                "max_model_len", "kv_cache_dtype", "quantization")
_PROM = re.compile(r"^(vllm:[A-Za-z_:][\w:]*)(\{[^}]*\})?\s+([-+\d.eEinfNa]+)")
_CHUNKED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")


@dataclass
class ServingCapture:
    path: str
    kind: str  # vllm_log | vllm_metrics | bench_result
    version: str | None = None
    config: dict = field(default_factory=dict)
    stats: list = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    bench: list = field(default_factory=list)


def _value(raw: str):
    raw = raw.strip().strip("'\"")
    if raw in ("True", "true"):
        return True
    if raw in ("False", "false"):
        return False
    try:
        return int(raw)
    except ValueError:
        try:
            return float(raw)
        except ValueError:
            return raw


def _config_from(text: str, config: dict) -> None:
    """Known keys from a dict literal or ``key=value`` list, even when cut off."""
    try:
        data = ast.literal_eval(text)
        if isinstance(data, dict):
            for k in _CONFIG_KEYS:
                if k in data:
                    config[k] = data[k]
            return
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    for k in _CONFIG_KEYS:
        m = re.search(rf"['\"]?{k}['\"]?\s*[:=]\s*([^,}}]+)", text)
        if m:
            config[k] = _value(m.group(1))


def parse(path: str, text: str | None = None) -> ServingCapture:
    if text is None:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")) and ('"request_throughput"' in text or '"mean_ttft_ms"' in text):
        return _bench(path, text)
    if re.search(r"^vllm:", text, re.M) or re.search(r"^# (?:HELP|TYPE) vllm:", text, re.M):
        return _prom(path, text)
    cap = ServingCapture(path=str(path), kind="vllm_log")
    for line in text.splitlines():
        v = _VERSION.search(line)
        if v and cap.version is None:
            cap.version = v.group(1).rstrip(")")
        nd = _NON_DEFAULT.search(line)
        if nd:
            _config_from(nd.group(1), cap.config)
            continue
        if "with config:" in line:
            _config_from(line.split("with config:", 1)[1], cap.config)
        ch = _CHUNKED.search(line)
        if ch:
            cap.config["enable_chunked_prefill"] = True
            cap.config.setdefault("max_num_batched_tokens", int(ch.group(1)))
        s = _STATS.search(line)
        if s:
            row = {"prompt_tps": float(s.group(1)), "gen_tps": float(s.group(2))}
            for key, rx in _FIELD.items():
                m = rx.search(line)
                row[key] = float(m.group(1)) if m else None
            cap.stats.append(row)
    return cap


def _prom(path: str, text: str) -> ServingCapture:
    cap = ServingCapture(path=str(path), kind="vllm_metrics")
    for line in text.splitlines():
        m = _PROM.match(line.strip())
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        name = m.group(1)
        cap.metrics[name] = cap.metrics.get(name, 0.0) + value if name.endswith("_total") else value
    return cap


def _bench(path: str, text: str) -> ServingCapture:
    cap = ServingCapture(path=str(path), kind="bench_result")
    docs = []
    try:
        doc = json_document(path, text, "benchmark result")
        docs = doc if isinstance(doc, list) else [doc]
    except TraceFormatError:
        for line in text.splitlines():  # JSONL, possibly with a cut last line
            try:
                docs.append(json_document(path, line, "benchmark result line"))
            except TraceFormatError:
                continue
    keys = ("request_rate", "max_concurrency", "request_throughput", "output_throughput", "mean_ttft_ms", "p99_ttft_ms",
            "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "completed", "duration")
    for d in docs:
        if isinstance(d, dict):
            cap.bench.append({k: d.get(k) for k in keys if k in d})
    return cap
