"""Serving across a deploy: what changed in the engine's settings and in the traffic's shape.

Read from both sides' saved ``serving`` blocks (analyzers/serving.py, serving_requests.py):

* **Settings** (:data:`SETTINGS`): each engine's names mapped onto one setting (vLLM
  ``tensor_parallel_size`` and SGLang ``tp_size`` are one), its value per side with where it
  came from: ``printed`` (a capture states it), ``default`` (the engine's default, filled in only
  when that side's engine log printed its arguments and this one is not among them: vLLM's
  ``non-default args`` lists what differs from the defaults; :data:`DEPLOY_DEFAULTS` and the
  engine-generation defaults of analyzers/serving.ENGINE_DEFAULTS), or ``not known``. A setting
  known on both sides with other values is a change; one of kind ``model``, ``precision`` or
  ``engine`` names the pair as serving a different model (still comparable for latency).
* **Shapes**: the input and output token lengths per request (n, mean, p50, p90, p99) and the
  two-sample Kolmogorov-Smirnov test on them (``scipy.stats.ks_2samp``: statistic D, the largest
  gap between the two empirical CDFs, and its two-sided p-value). A shape has ``shifted`` when
  p < ``shape_alpha`` and the mean moved by ``shape_mean_change_pct`` or D reached
  ``shape_ks_min`` (analyzers/rules/quality.py declares them), with at least
  ``shape_min_requests`` on each side; from /metrics histograms only the means are known: no
  test, ``shifted`` None. A shifted *input* makes the latencies not comparable as is (the load
  changed).
* **Shares**: requests that finished on the length cap (``finish_reasons.length`` of all
  finished) and failed requests (of those sent), each side, with Fisher's exact test on the 2x2
  counts; ``shifted`` when p < ``shape_alpha`` and the share moved by ``share_min_points``.
* **Latency**: the end-to-end p50 that moved while the per-token latency (TPOT p50) stayed within
  the threshold and the outputs got longer is said to be the outputs' doing, not a latency
  regression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracetriage.analyzers.metrics import Contract
from tracetriage.analyzers.serving_metrics import LengthStats, Requests, ServingSummary, serving_summary

IDENTITY_KINDS = ("model", "precision", "engine")


@dataclass(frozen=True, slots=True)
class SettingSpec:
    """One setting of the diff: its name, the config keys that state it (vLLM's, SGLang's, the
    /metrics labels' and the benchmark's, in that order of trust) and its kind (``model``,
    ``precision``, ``engine`` or ``serving``: a changed kind other than ``serving`` means a
    different model is served)."""

    name: str
    keys: tuple[str, ...]
    kind: str = "serving"


SETTINGS = (
    SettingSpec("model", ("model", "model_path", "model_id", "served_model_name", "model_name"), "model"),
    SettingSpec("revision", ("revision",), "model"),
    SettingSpec("dtype", ("dtype",), "precision"),
    SettingSpec("quantization", ("quantization",), "precision"),
    SettingSpec("kv_cache_dtype", ("kv_cache_dtype", "cache_dtype"), "precision"),
    SettingSpec("tensor_parallel_size", ("tensor_parallel_size", "tp_size")),
    SettingSpec("pipeline_parallel_size", ("pipeline_parallel_size", "pp_size")),
    SettingSpec("data_parallel_size", ("data_parallel_size", "dp_size")),
    SettingSpec("max_num_seqs", ("max_num_seqs", "max_running_requests")),
    SettingSpec("max_num_batched_tokens", ("max_num_batched_tokens",)),
    SettingSpec("enable_chunked_prefill", ("enable_chunked_prefill", "chunked_prefill_enabled")),
    SettingSpec("chunked_prefill_size", ("chunked_prefill_size",)),
    SettingSpec("enable_prefix_caching", ("enable_prefix_caching",)),
    SettingSpec("disable_radix_cache", ("disable_radix_cache",)),
    SettingSpec("speculative_decoding", ("speculative_config", "speculative_model", "speculative_algorithm")),
    SettingSpec("num_speculative_tokens", ("num_speculative_tokens", "speculative_num_draft_tokens")),
    SettingSpec("max_model_len", ("max_model_len", "max_seq_len")),
    SettingSpec("gpu_memory_utilization", ("gpu_memory_utilization", "mem_fraction_static")),
    SettingSpec("enforce_eager", ("enforce_eager",)),
)
# engine -> setting -> the default the engine runs with when the flag is not given (docs/analysis.md
# "Serving across a deploy" cites each: vllm/engine/arg_utils.py EngineArgs, sglang srt/server_args.py ServerArgs)
DEPLOY_DEFAULTS = {
    "vllm": {"revision": None, "dtype": "auto", "quantization": None, "kv_cache_dtype": "auto", "tensor_parallel_size": 1,
             "pipeline_parallel_size": 1, "data_parallel_size": 1, "speculative_decoding": None, "enforce_eager": False,
             "gpu_memory_utilization": 0.9},
    "sglang": {"revision": None, "dtype": "auto", "quantization": None, "kv_cache_dtype": "auto", "tensor_parallel_size": 1,
               "pipeline_parallel_size": 1, "data_parallel_size": 1, "speculative_decoding": None},
}
# a quantization method -> what it stores at which precision (what a reader needs to judge the change)
PRECISION_WORDS = {
    "gptq": "weight-only integer, W4A16 or W8A16", "gptq_marlin": "weight-only integer, W4A16 or W8A16",
    "awq": "weight-only INT4, W4A16", "awq_marlin": "weight-only INT4, W4A16", "marlin": "weight-only INT4, W4A16",
    "auto_round": "weight-only integer (AutoRound)", "bitsandbytes": "weight-only 4/8-bit (bitsandbytes)",
    "gguf": "weight-only (GGUF)", "fp8": "FP8 weights and activations, W8A8", "modelopt": "FP8/FP4 (ModelOpt)",
    "compressed-tensors": "as the checkpoint's compression config says",
}
_BITS_IN_NAME = re.compile(r"(?i)(?:^|[-_/.])(int(4|8)|w(4|8)a(16|8)|(4|8)-?bit)(?:$|[-_/.])")


@dataclass(frozen=True, slots=True)
class SettingChange(Contract):
    """One setting on both sides: the values, where each comes from (printed, default, not known),
    whether it changed (known on both sides, other values), its kind, and the line of text."""

    name: str
    kind: str
    before: object
    after: object
    before_source: str
    after_source: str
    changed: bool
    text: str



@dataclass(frozen=True, slots=True)
class Shape(Contract):
    """One per-request length distribution on both sides (tokens): the summaries (n, mean, p50, p90,
    p99), the mean's change in % of before, the KS statistic and p-value (None without per-request
    values), whether it shifted (None: not tested), the test's name and the line of text."""

    name: str
    before: dict | None
    after: dict | None
    mean_change_pct: float | None
    ks_statistic: float | None
    p_value: float | None
    shifted: bool | None
    test: str
    text: str



@dataclass(frozen=True, slots=True)
class Share(Contract):
    """A share of requests on both sides (count of total), Fisher's exact p-value, whether it moved."""

    name: str
    before_count: int
    before_total: int
    after_count: int
    after_total: int
    p_value: float | None
    shifted: bool
    text: str

    @property
    def change_points(self) -> float:
        return 100.0 * (self.after_count / self.after_total - self.before_count / self.before_total)



@dataclass(frozen=True, slots=True)
class ServingComparison(Contract):
    """The serving side of a comparison (module docstring): the engines, every setting known on
    either side (changed ones first), the identity changes in words (model, precision, engine),
    the shapes (input, output), the shares (length-capped, failed), the load (request rate and
    concurrency per side), whether the inputs and the outputs shifted (None: not tested), whether
    the latencies compare as is, the latency note, and ``quality``: the quality_regression finding's
    contract when it fired (analyzers/rules/quality.py), else None."""

    engines: str
    settings: tuple[SettingChange, ...]
    identity: tuple[str, ...]
    shapes: tuple[Shape, ...]
    shares: tuple[Share, ...]
    load: dict
    inputs_shifted: bool | None
    outputs_shifted: bool | None
    latency_comparable: bool
    latency: str | None
    quality: dict | None = None

    def to_contract(self) -> dict:
        out = Contract.to_contract(self)
        out["settings"], out["identity"] = [row.to_contract() for row in self.settings], list(self.identity)
        out["shapes"], out["shares"] = [row.to_contract() for row in self.shapes], [row.to_contract() for row in self.shares]
        return out

    def shape(self, name: str) -> Shape | None:
        return next((shape for shape in self.shapes if shape.name == name), None)

    def share(self, name: str) -> Share | None:
        return next((share for share in self.shares if share.name == name), None)

    @property
    def identity_changed(self) -> bool:
        """Whether the model, its weights or their precision changed (an engine change alone is not)."""
        return any(setting.changed and setting.kind in ("model", "precision") for setting in self.settings)

    def input_shift_reason(self) -> str | None:
        """Why the latencies are not comparable as is (the inputs shifted), or None."""
        shape = self.shape("input")
        return (f"the traffic changed: {shape.text}; latency is not comparable as is (the load changed: compare on "
                "the same prompts)") if self.inputs_shifted and shape else None

    def identity_reason(self) -> str | None:
        """The comparability section's words for a changed model, precision or engine, or None."""
        if not self.identity:
            return None
        if not self.identity_changed:  # the engine alone: the same weights, served by other code
            return (f"another engine serves the model ({'; '.join(self.identity)}): still comparable for latency; its "
                    "sampling and kernels may change the answers")
        return (f"a different model is served ({'; '.join(self.identity)}): still comparable for latency, but its answers "
                "are another model's")


def _normal(value):
    """A setting's value for comparing: 'torch.bfloat16' is 'bfloat16', 'None' / '' / 'none' is None."""
    if isinstance(value, str):
        text = value.strip().strip("'\"")
        if text.lower() in ("none", "null", ""):
            return None
        return text[len("torch."):] if text.startswith("torch.") else text
    return value


AUTO_RESOLVES = ("bfloat16", "float16", "half", "float32", "float", "bf16", "fp16")  # what dtype 'auto' may be


def _auto_resolves_to(first, second) -> bool:
    """Whether one value is ``auto`` (the checkpoint's dtype, resolved at load) and the other a plain
    float dtype it may resolve to: not known to differ (the engine line prints the resolved one)."""
    values = {str(first).lower(), str(second).lower()}
    return "auto" in values and bool(values & set(AUTO_RESOLVES))


def _printed_args(serving: ServingSummary) -> bool:
    """Whether an engine log of this side printed its arguments (a missing flag is then the default)."""
    return any(str(capture.kind).endswith("_log") for capture in serving.captures) and bool(serving.config)


def _value(serving: ServingSummary, spec: SettingSpec) -> tuple[object, str]:
    """(value, source) of one setting on one side (module docstring)."""
    config, effective = serving.config, serving.effective_config()
    key = next((key for key in spec.keys if key in config), None)
    if key is not None:
        return _normal(config[key]), f"printed ({key})"
    key = next((key for key in spec.keys if key in effective), None)
    if key is not None:
        return effective[key], "default (engine generation)"
    defaults = DEPLOY_DEFAULTS.get(serving.engine or "", {})
    if spec.name in defaults and _printed_args(serving):
        return defaults[spec.name], f"default ({serving.engine}: not among the printed arguments)"
    return None, "not known"


def _words(spec: SettingSpec, value, model: str | None) -> str:
    """A setting's value in words: quantization with what it stores, none for None."""
    if spec.name == "quantization":
        if value is None:
            return "none"
        precision = PRECISION_WORDS.get(str(value).lower())
        bits = _BITS_IN_NAME.search(model or "")
        if bits:
            precision = (precision + "; " if precision else "") + f"{bits.group(1)} per the model name"
        return f"{value} ({precision})" if precision else str(value)
    return "none" if value is None else str(value)


NOT_KNOWN = "not known"


def _model(serving: ServingSummary):
    """The served model as the config names it (the first of the model setting's keys present), or None."""
    return _normal(next((serving.config[key] for key in SETTINGS[0].keys if key in serving.config), None))


def _setting_text(spec: SettingSpec, before: tuple[object, str], after: tuple[object, str], changed: bool,
                  models: tuple) -> str:
    """One setting's line: before -> after when it changed, else its value (and on which side only)."""
    (value_before, source_before), (value_after, _) = before, after
    if changed:
        return f"{spec.name}: {_words(spec, value_before, models[0])} -> {_words(spec, value_after, models[1])}"
    if _auto_resolves_to(value_before, value_after) and value_before != value_after:
        return f"{spec.name}: {value_before} -> {value_after} (auto is the checkpoint's dtype, resolved at load)"
    known, known_on = (value_after, "after") if source_before == NOT_KNOWN else (value_before, "before")
    one_side = "" if NOT_KNOWN not in (source_before, after[1]) else f" ({known_on} only)"
    return f"{spec.name}: {_words(spec, known, models[0])}{one_side}"


def _setting_row(spec: SettingSpec, before: ServingSummary, after: ServingSummary, models: tuple) -> SettingChange | None:
    """One setting on both sides (module docstring), None when neither side knows it."""
    side_before, side_after = _value(before, spec), _value(after, spec)
    (value_before, source_before), (value_after, source_after) = side_before, side_after
    if source_before == NOT_KNOWN and source_after == NOT_KNOWN:
        return None
    changed = (source_before != NOT_KNOWN and source_after != NOT_KNOWN and value_before != value_after
               and not _auto_resolves_to(value_before, value_after))
    text = _setting_text(spec, side_before, side_after, changed, models)
    return SettingChange(spec.name, spec.kind, value_before, value_after, source_before, source_after, changed, text)


def _engine_row(before: ServingSummary, after: ServingSummary) -> SettingChange | None:
    """The engine (and version) on both sides, None unless both name their engine."""
    engine_before = " ".join(str(part) for part in (before.engine, before.version) if part)
    engine_after = " ".join(str(part) for part in (after.engine, after.version) if part)
    if not (engine_before and engine_after):
        return None
    # a version one side does not print (a /metrics scrape alone) is not known there, not changed
    versions = (before.version, after.version)
    changed = before.engine != after.engine or (all(versions) and versions[0] != versions[1])
    sources = tuple("printed" if version else NOT_KNOWN for version in versions)
    text = (f"engine: {engine_before} -> {engine_after}" if changed else f"engine: {engine_before}" if all(versions)
            else f"engine: {engine_before if versions[0] else engine_after} (version not known on one side)")
    return SettingChange("engine", "engine", engine_before, engine_after, *sources, changed, text)


def setting_changes(before: ServingSummary | dict, after: ServingSummary | dict) -> tuple[SettingChange, ...]:
    """Every setting known on either side, the changed ones first, then the engine (and version)."""
    before, after = serving_summary(before), serving_summary(after)
    models = (_model(before), _model(after))
    rows = [_setting_row(spec, before, after, models) for spec in SETTINGS] + [_engine_row(before, after)]
    return tuple(sorted((row for row in rows if row is not None), key=lambda row: not row.changed))


def _summary(lengths: LengthStats | None) -> dict | None:
    """A side's lengths as a shape shows them: n, mean, p50, p90, p99."""
    return None if not lengths else {"n": lengths.n, "mean": lengths.mean, "p50": lengths.p50, "p90": lengths.p90,
                                     "p99": lengths.p99}


def _figure(value) -> str:
    return "n/a" if value is None else f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.1f}"


def length_shape(name: str, before: LengthStats | None, after: LengthStats | None) -> Shape | None:
    """One shape (module docstring), tested when both sides carry per-request lengths."""
    from tracetriage.analyzers.rules.context import t

    if not before or not after:
        return None
    change = 100.0 * (after.mean - before.mean) / before.mean if before.mean else None
    words = (f"{name} length mean {_figure(before.mean)} -> {_figure(after.mean)} tokens"
             + (f" ({change:+.0f}%)" if change is not None else "")
             + f", p90 {_figure(before.p90)} -> {_figure(after.p90)}")
    if not (before.lengths and after.lengths):
        return Shape(name, _summary(before), _summary(after), _round(change), None, None, None,
                     "means of the /metrics histograms (no per-request values: no test)", words + "; not tested")
    from scipy import stats

    result = stats.ks_2samp(before.lengths, after.lengths)
    statistic, p_value = float(result.statistic), float(result.pvalue)
    enough = min(len(before.lengths), len(after.lengths)) >= t("shape_min_requests")
    shifted = bool(enough and p_value < t("shape_alpha")
                   and (abs(change or 0.0) >= t("shape_mean_change_pct") or statistic >= t("shape_ks_min")))
    words += (f"; KS D={statistic:.3f}, p={p_value:.2g} over {before.n:,} and {after.n:,} requests: "
              + ("shifted" if shifted else "within noise" if enough else "too few requests to tell"))
    return Shape(name, _summary(before), _summary(after), _round(change), round(statistic, 4), p_value, shifted,
                 "two-sample Kolmogorov-Smirnov on the per-request lengths (scipy.stats.ks_2samp)", words)


def _round(value):
    return None if value is None else round(value, 2)


def share_of(name: str, words: str, before: tuple[int, int] | None, after: tuple[int, int] | None) -> Share | None:
    """A share (count of total) on both sides with Fisher's exact test; None unless both are known."""
    from tracetriage.analyzers.rules.context import t

    if not before or not after or not before[1] or not after[1]:
        return None
    from scipy import stats

    p_value = float(stats.fisher_exact([[before[0], before[1] - before[0]], [after[0], after[1] - after[0]]])[1])
    moved = 100.0 * (after[0] / after[1] - before[0] / before[1])
    shifted = p_value < t("shape_alpha") and abs(moved) >= t("share_min_points")
    text = (f"{words}: {before[0]:,} of {before[1]:,} ({100.0 * before[0] / before[1]:.1f}%) -> {after[0]:,} of "
            f"{after[1]:,} ({100.0 * after[0] / after[1]:.1f}%), Fisher p={p_value:.2g}" + (": moved" if shifted else ""))
    return Share(name, before[0], before[1], after[0], after[1], p_value, shifted, text)


def _load(serving: ServingSummary) -> dict:
    """The benchmark's load on one side: the request rate and max concurrency of the record the
    client latency reads (an open-loop run's rate is None)."""
    record = serving.latency.client.record
    rate = record.request_rate if record else None
    return {"request_rate": rate if isinstance(rate, (int, float)) and rate != float("inf") else None,
            "max_concurrency": record.max_concurrency if record else None}


@dataclass(frozen=True, slots=True)
class ServingFigures:
    """The figures of one side the latency note reads (compare_side.serving_figures): end-to-end and
    TPOT p50, ms (None: not measured)."""

    e2el_p50_ms: float | None
    tpot_p50_ms: float | None

    @classmethod
    def of(cls, figures: dict) -> ServingFigures:
        return cls(**{name: figures.get(name) for name in ("e2el_p50_ms", "tpot_p50_ms")})


def _latency_note(before: ServingFigures, after: ServingFigures, output: Shape | None, threshold_pct: float) -> str | None:
    """The end-to-end latency that moved only because the outputs got longer (module docstring)."""
    e2e_before, e2e_after, tpot_before, tpot_after = before.e2el_p50_ms, after.e2el_p50_ms, before.tpot_p50_ms, after.tpot_p50_ms
    if None in (e2e_before, e2e_after, tpot_before, tpot_after) or not (e2e_before and tpot_before) or output is None:
        return None
    e2e_change, tpot_change = 100.0 * (e2e_after / e2e_before - 1), 100.0 * (tpot_after / tpot_before - 1)
    if abs(e2e_change) < threshold_pct or abs(tpot_change) >= threshold_pct or not output.mean_change_pct:
        return None
    if (output.mean_change_pct > 0) != (e2e_change > 0) or abs(output.mean_change_pct) < threshold_pct:
        return None
    return (f"end-to-end p50 {e2e_before:,.0f} -> {e2e_after:,.0f} ms ({e2e_change:+.0f}%) moved with the output length "
            f"(mean {output.mean_change_pct:+.0f}%) while the per-token latency held (TPOT p50 {tpot_before:.1f} -> "
            f"{tpot_after:.1f} ms, {tpot_change:+.1f}%): the answers got longer, the server did not get slower")


NO_REQUESTS = Requests(None, None, None, None, None, None, None, None)


def compare_serving(before: ServingSummary | dict, after: ServingSummary | dict, figures_before: dict, figures_after: dict,
                    threshold_pct: float) -> ServingComparison | None:
    """The serving comparison of two sides' ``serving`` blocks (None unless both have one);
    ``figures_*``: compare_side.serving_figures of each side."""
    before, after = serving_summary(before), serving_summary(after)
    if not before or not after:
        return None
    requests_before, requests_after = before.requests or NO_REQUESTS, after.requests or NO_REQUESTS
    shapes = tuple(shape for shape in (length_shape(name, requests_before.of(name), requests_after.of(name))
                                       for name in ("input", "output")) if shape is not None)
    shares = tuple(share for share in (
        share_of("length_capped", "finished on the length cap (finish_reason length, of finished requests)",
                 requests_before.length_capped(), requests_after.length_capped()),
        share_of("failed", "failed requests (of those sent)", requests_before.failed_of_sent(), requests_after.failed_of_sent()))
        if share is not None)
    settings = setting_changes(before, after)
    by_name = {shape.name: shape for shape in shapes}
    inputs_shifted = by_name["input"].shifted if "input" in by_name else None
    outputs_shifted = by_name["output"].shifted if "output" in by_name else None
    return ServingComparison(
        engines=" -> ".join(str(serving.engine or "unknown engine") for serving in (before, after)), settings=settings,
        identity=tuple(setting.text for setting in settings if setting.changed and setting.kind in IDENTITY_KINDS),
        shapes=shapes, shares=shares, load={"before": _load(before), "after": _load(after)}, inputs_shifted=inputs_shifted,
        outputs_shifted=outputs_shifted, latency_comparable=not inputs_shifted,
        latency=_latency_note(ServingFigures.of(figures_before), ServingFigures.of(figures_after), by_name.get("output"),
                              threshold_pct))
