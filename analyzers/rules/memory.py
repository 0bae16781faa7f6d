"""The out-of-memory rule: ``memory_pressure`` from the serving artifacts' OOM errors, preemptions and
KV-cache usage, with the mechanism the evidence supports (long prompts without chunked prefill,
a fragmented pool, or memory that goes elsewhere). Its thresholds are declared with the other
serving rules' (rules/serving.py THRESHOLDS); registered there too, in the serving stage."""

from __future__ import annotations

from tracetriage.analyzers import catalog
from tracetriage.analyzers.evidence import ev
from tracetriage.analyzers.rules.context import Context, t
from tracetriage.analyzers.serving_metrics import ServingMemory, ServingSummary, StatsSummary
from tracetriage.wording import nbytes, pct, plural


def lone_preemption(serving: ServingSummary) -> bool:
    """Preemptions (and SGLang retractions) fewer than preemptions_recurring while every sampled
    KV usage stays under queue_kv_full_pct: the pool ran short once, between samples, but does not
    run out. False when none happened or KV usage was not measured."""
    count = (serving.memory.preemptions or 0) + (serving.memory.retractions or 0)
    kv = serving.stats.kv_usage_max if serving.stats else None
    return 0 < count < t("preemptions_recurring") and kv is not None and kv < t("queue_kv_full_pct")


def _fragmentation(memory: ServingMemory, ooms: list[dict], evidence: list[dict], parts: list[str]) -> float | None:
    """The share of PyTorch's reserved memory that is unallocated (the last OOM's and the allocator's, the
    larger), or None when neither says; the OOM and allocator evidence and the OOM in words are appended."""
    fragmentation = None
    if ooms:
        last = ooms[-1]
        parts.append(plural(len(ooms), "CUDA out-of-memory error"))
        text = "OOM: " + ", ".join(f"{name.replace('_bytes', '').replace('_', ' ')} {nbytes(size)}"
                                   for name, size in last.items() if size is not None)
        evidence.append(ev("oom_events", len(ooms), "errors", "the log", text=text))
        if last.get("reserved_unallocated_bytes") is not None and last.get("allocated_bytes"):
            unallocated = last["reserved_unallocated_bytes"]
            fragmentation = unallocated / (unallocated + last["allocated_bytes"])
    allocator = memory.allocator or {}
    if allocator.get("reserved_bytes") and allocator.get("allocated_bytes") is not None:
        reserved = allocator["reserved_bytes"]
        gap = reserved - allocator["allocated_bytes"]
        fragmentation = max(fragmentation or 0.0, gap / reserved)
        evidence.append(ev("allocator_reserved_minus_allocated", gap, "B", "reserved memory",
                           text=f"allocator: reserved {nbytes(reserved)}, allocated "
                                f"{nbytes(allocator['allocated_bytes'])} "
                                f"-> {nbytes(gap)} reserved but unused ({pct(100 * gap / reserved)} of reserved)"))
    if fragmentation is not None:
        evidence.append(ev("fragmentation_share", round(100 * fragmentation, 2), "%", "PyTorch reserved memory",
                           text=f"reserved but unallocated: {pct(100 * fragmentation)} of PyTorch's reserved memory"))
    return fragmentation


def _memory_mechanism(serving: ServingSummary, ooms: list[dict], fragmentation: float | None) -> tuple[str, str]:
    """(variant, mechanism in words) the memory evidence supports: an unchunked long prefill's peak,
    fragmentation, or the KV pool running out."""
    config, prompts = serving.config, serving.prompts
    longest = max((size for size in (prompts.input_len_max, prompts.prefill_new_token_max,
                                     config.get("max_model_len")) if size), default=0)
    tried = ooms[-1].get("tried_bytes") if ooms else None
    if ooms and config.get("enable_chunked_prefill") is not True and (longest >= 8192 or (tried or 0) >= 1024 ** 3):
        return "prefill", (
            f"An unchunked prefill of a long prompt (up to {longest:,} tokens) computes activations for the whole prompt "
            f"in one step{f'; the failing allocation asked for {nbytes(tried)}' if tried else ''}. The "
            "transient peak, not the "
            "steady KV cache, crosses the GPU's capacity, so the crash comes with long contexts only.")
    if fragmentation is not None and fragmentation >= t("fragmentation_share"):
        return "fragmentation", (
            f"{pct(100 * fragmentation)} of PyTorch's reserved memory is free but in pieces: the caching allocator cannot "
            "hand out one large contiguous block even though enough memory is free in total (external fragmentation).")
    return "kv", ("Sequences are admitted by request count while each holds KV blocks in proportion to its context; when "
                  "the pool runs out, the engine preempts (evicts and later recomputes) sequences or fails to allocate.")


def _pool_evidence(stats: StatsSummary | None, preempted: int, retracted: int, kv_full: bool, evidence: list[dict],
                   parts: list[str]) -> None:
    """The KV pool's evidence (preemptions and retractions, the KV usage), appended with its words."""
    if preempted or retracted:
        parts.append(f"{plural(preempted + retracted, 'preemption')}")
        evidence.append(ev("preemptions", preempted + retracted, "events", "the log or counters",
                           text=f"{plural(preempted, 'preemption')} and {plural(retracted, 'retraction')} (sequences "
                                "evicted for KV blocks, recomputed later)"))
    if stats and stats.kv_usage_max is not None:
        evidence.append(ev("kv_usage_max", stats.kv_usage_max, "%", "KV cache pool",
                           text=f"KV cache usage up to {stats.kv_usage_max}%"))
        if kv_full and not parts:
            parts.append(f"KV cache {stats.kv_usage_max}% full with requests waiting")


def rule_memory_pressure(ctx: Context):
    serving = ctx.serving
    memory, stats = serving.memory, serving.stats
    ooms = memory.oom_events or []
    preempted, retracted = memory.preemptions or 0, memory.retractions or 0
    kv_full = ((stats.kv_usage_max if stats else None) or 0) >= t("kv_full_pct")
    if (preempted or retracted) and not ooms and lone_preemption(serving):
        preempted = retracted = 0  # one preemption with the KV cache mostly free: not a pool that runs out
    if not (ooms or preempted or retracted or (kv_full and ((stats.waiting_max if stats else None) or 0) > 0)):
        return None
    evidence, parts = [], []
    fragmentation = _fragmentation(memory, ooms, evidence, parts)
    _pool_evidence(stats, preempted, retracted, kv_full, evidence, parts)
    variant, mechanism = _memory_mechanism(serving, ooms, fragmentation)
    evidence.append(ev("mechanism", variant, "", None, text=f"mechanism the evidence supports: {variant}"))
    chunked = serving.config.get("enable_chunked_prefill")
    if chunked is not None:
        evidence.append(ev("chunked_prefill", chunked, "", None,
                           text=f"chunked prefill {'on' if chunked else 'off'} in the config"))
    impact = 100.0 if ooms else min(100.0, 100.0 * (preempted + retracted) / max(1, (stats.samples if stats else None) or 1))
    return catalog.make("memory_pressure", impact, {"what": ", ".join(parts), "mechanism_text": mechanism}, evidence,
                        severity="high" if ooms else "medium",
                        denominator="run (an OOM kills every request in flight)" if ooms else "stats samples",
                        variant=variant, kind=ctx.kind)
