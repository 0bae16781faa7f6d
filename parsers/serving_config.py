"""What a serving capture says about the deployment: the engine settings and the requests' shapes.

* **Engine settings** (:data:`CONFIG_KEYS`), read where each engine prints them, as printed (the
  comparison maps each engine's names onto one setting: analyzers/compare_serving.py):

  - vLLM ``non-default args: {...}`` (a dict literal; ``utils.py`` / ``api_server.py``), the
    engine's start-up line ``Initializing a V1 LLM engine (v...) with config: model='...',
    speculative_config=..., revision=..., dtype=torch.bfloat16, ..., tensor_parallel_size=1,
    quantization=gptq, kv_cache_dtype=auto, ..., enable_prefix_caching=..., chunked_prefill_enabled=...``
    (``key=value`` pairs, nested values such as ``SpeculativeConfig(...)`` kept whole), and the
    older ``args: Namespace(...)`` line;
  - SGLang ``server_args=ServerArgs(model_path='...', dtype=..., quantization=..., tp_size=...)``;
  - ``/metrics``: the labels of an ``*_info`` series (``vllm:cache_config_info``: ``cache_dtype``,
    ``enable_prefix_caching``, ...) and the ``model_name`` label every vLLM/SGLang series carries;
  - a benchmark result's metadata: ``model_id``, ``tokenizer_id``, ``dataset_name``,
    ``num_prompts`` and any setting given with ``--metadata key=value`` (written as top-level keys).

* **Per-request shapes** (``benchmark_serving.py --save-result`` / ``vllm bench serve`` and SGLang
  ``bench_serving --output-details``): ``input_lens`` and ``output_lens`` (tokens, one per request)
  and ``errors`` (one string per request, empty when it succeeded): the lengths of the requests
  that succeeded, and the count that failed. From ``/metrics``: ``vllm:request_success_total``
  by its ``finished_reason`` label (``stop``, ``length``, ``abort``).

Values are untrusted: each passes parsers/coerce.setting; a line cut off keeps what it held.
"""

from __future__ import annotations

import ast
import re

from tracetriage.parsers import coerce

CONFIG_KEYS = (
    # scheduling and memory (read since the first serving rules)
    "enforce_eager", "enable_chunked_prefill", "max_num_seqs", "max_num_batched_tokens", "tensor_parallel_size",
    "pipeline_parallel_size", "data_parallel_size", "enable_prefix_caching", "gpu_memory_utilization", "max_model_len",
    "kv_cache_dtype", "quantization", "chunked_prefill_size", "max_running_requests", "disable_radix_cache",
    "mem_fraction_static",
    # what is served and at which precision (vLLM names, then SGLang's)
    "model", "served_model_name", "revision", "dtype", "load_format", "max_seq_len", "chunked_prefill_enabled",
    "speculative_config", "speculative_model", "num_speculative_tokens",
    "model_path", "tp_size", "pp_size", "dp_size", "max_total_tokens", "speculative_algorithm",
    "speculative_draft_model_path", "speculative_num_steps", "speculative_num_draft_tokens",
    # /metrics info labels
    "cache_dtype",
)
BENCH_META_KEYS = ("model_id", "tokenizer_id", "dataset_name", "num_prompts")
REQUESTS_KEPT = 20_000  # per-request lengths kept per record: a benchmark larger than this is a sweep, not one run
FINISH_COUNTER = "vllm:request_success_total"  # V0 and V1: finished requests by finished_reason (stop, length, abort)


def _scalar(raw: str):
    """A ``key=value`` value as printed: True/False/None, a number, a list literal, else the text
    without its quotes."""
    raw = raw.strip()
    if raw.startswith("["):  # a list literal (vLLM's served_model_name: ['m'])
        try:
            return ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            pass
    raw = raw.strip("'\"")
    if raw in ("True", "true"):
        return True
    if raw in ("False", "false"):
        return False
    if raw in ("None", "null"):
        return None
    try:
        return int(raw)
    except ValueError:
        value = coerce.number(raw)
        return raw if value is None else value


def _value_text(text: str, start: int) -> str:
    """The printed value starting at ``start``: up to the first comma, ``)`` or ``}`` outside quotes
    and brackets, so ``SpeculativeConfig(method='mtp', num_spec_tokens=3)`` stays whole."""
    depth, quote, index = 0, None, start
    while index < len(text):
        char = text[index]
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif char == "," and depth == 0:
            break
        index += 1
    return text[start:index]


_KEY = re.compile(r"(?<![\w.])['\"]?([A-Za-z_]\w*)['\"]?\s*[:=](?!=)\s*")


def _pairs(text: str) -> dict:
    """Every top-level ``key=value`` / ``'key': value`` of a printed config, first occurrence kept
    (a key inside a nested value, such as ``SpeculativeConfig(model=...)``, is that value's, skipped)."""
    out: dict = {}
    position = 0
    while (match := _KEY.search(text, position)) is not None:
        value = _value_text(text, match.end())
        if match.group(1) in CONFIG_KEYS and match.group(1) not in out:
            out[match.group(1)] = _scalar(value)
        position = match.end() + len(value) + 1
    return out


def config_from(text: str, config: dict) -> None:
    """The CONFIG_KEYS of a dict literal or ``key=value`` list into ``config``, even when cut off."""
    try:
        data = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        data = None
    found = data if isinstance(data, dict) else _pairs(text)
    for key in CONFIG_KEYS:
        if key in found:
            config[key] = coerce.setting(found[key])


def info_labels(name: str, labels: dict, config: dict) -> None:
    """The settings a ``/metrics`` sample's labels state: an ``*_info`` series' CONFIG_KEYS labels,
    and the ``model_name`` label of any series (the served name; the first one seen is kept)."""
    if name.endswith("_info"):
        for key in CONFIG_KEYS:
            if key in labels:
                config[key] = coerce.setting(_scalar(labels[key]))
    if "model_name" in labels:
        config.setdefault("model_name", coerce.setting(labels["model_name"]))


def finish_reason(name: str, labels: dict, value: float, reasons: dict) -> None:
    """A ``vllm:request_success_total{finished_reason=...}`` sample counted into ``reasons``."""
    if name == FINISH_COUNTER and labels.get("finished_reason"):
        reason = coerce.text(labels["finished_reason"])[:40]
        reasons[reason] = reasons.get(reason, 0.0) + value


def bench_meta(record: dict) -> dict:
    """A benchmark record's metadata: BENCH_META_KEYS and any CONFIG_KEYS written at its top level."""
    return {key: coerce.setting(record[key]) for key in (*BENCH_META_KEYS, *CONFIG_KEYS)
            if key in record and not isinstance(record[key], dict)}


def _lengths(values) -> list[int] | None:
    """A per-request length array as ints (each a token count >= 0), None when it is not one."""
    if not isinstance(values, list):
        return None
    out = [coerce.scalar_int(value) for value in values]
    return out if all(length is not None and length >= 0 for length in out) else None


def requests_from(record: dict) -> dict | None:
    """The per-request shapes of a benchmark record (module docstring): the input and output
    lengths of the requests that succeeded (an ``errors`` string that is not empty marks a failed
    one, when the arrays line up), the failures counted; None without ``output_lens``."""
    outputs, inputs = _lengths(record.get("output_lens")), _lengths(record.get("input_lens"))
    if not outputs:
        return None
    errors = record.get("errors")
    failed = [bool(error) for error in errors] if isinstance(errors, list) and len(errors) == len(outputs) else None
    if inputs is not None and len(inputs) != len(outputs):
        inputs = None
    keep = [index for index in range(len(outputs)) if not (failed and failed[index])][:REQUESTS_KEPT]
    return {"input_lens": [inputs[index] for index in keep] if inputs is not None else None,
            "output_lens": [outputs[index] for index in keep],
            "failed": sum(failed) if failed is not None else None, "sent": len(outputs)}
