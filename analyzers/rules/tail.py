"""prefill_stall, on the tail axis: a few steps far above the median that are GPU work (labelled prefill,
or the GPU busy during them), each a freeze of the token stream. Its severity comes from the tail itself
(max and p99 over p50, the freeze in ms), not from a share of the window."""

from __future__ import annotations

from tracetriage.analyzers import catalog
from tracetriage.analyzers.evidence import ev
from tracetriage.analyzers.metrics import ProcessMetrics
from tracetriage.analyzers.rules.context import Context, Rule, t
from tracetriage.wording import pct, range_kind, us

# name: (value, why)
THRESHOLDS = {
    "prefill_min_steps": (20, "a tail needs at least 20 steps to be more than noise"),
    "prefill_p99_ratio": (3.0, "p99 step at 3x the median is a stall users see as a frozen stream"),
    "prefill_max_ratio": (5.0, "a single step 5x the median is a visible freeze"),
    "prefill_long_busy_min_pct": (80.0, ("a long step in which the GPU is busy is GPU work (prefill); an idle one is a "
                                         "host stall")),
    "tail_high_ratio": (10.0, "a step 10x the median is an order-of-magnitude freeze every streaming user notices"),
    "tail_high_freeze_ns": (200_000_000, ("a freeze of 200 ms or more is visible as a stalled stream, "
                                          "whatever its share of the time")),
}


def _longest_tail(ctx: Context) -> tuple[float, ProcessMetrics, float, str | None] | None:
    """(max / p50, the process, p99 / p50, its trace's format) of the judged process whose longest step is furthest
    above its median, among those with enough steps and a tail over prefill_p99_ratio or prefill_max_ratio; or None."""
    best = None
    for trace in ctx.judged():
        for process in trace.processes:
            steps = process.steps
            if steps.count < t("prefill_min_steps") or not steps.p50_ns:
                continue
            ratio_p99, ratio_max = steps.p99_ns / steps.p50_ns, steps.max_ns / steps.p50_ns
            if ratio_p99 < t("prefill_p99_ratio") and ratio_max < t("prefill_max_ratio"):
                continue
            if best is None or ratio_max > best[0]:
                best = (ratio_max, process, ratio_p99, trace.meta.get("format"))
    return best


def rule_prefill_stall(ctx: Context):
    best = _longest_tail(ctx)
    if best is None:
        return None
    ratio_max, process, ratio_p99, fmt = best
    long_steps = process.long_steps
    if not long_steps.count:
        return None
    if not (long_steps.prefill_labelled or long_steps.busy_pct >= t("prefill_long_busy_min_pct")):
        return None
    steps = process.steps
    severity = "high" if ratio_max >= t("tail_high_ratio") and steps.max_ns >= t("tail_high_freeze_ns") else "medium"
    budget = ctx.slo.get("itl_p99_ms")
    ranges = range_kind(fmt)  # the ranges that named them prefill: NVTX, roctx or the profiler's annotations
    label = (f"labelled prefill by {'their profiler annotations' if ranges == 'profiler annotation' else ranges}"
             if long_steps.prefill_labelled
             else f"GPU busy {long_steps.busy_pct:.0f}% during them (GPU work, not a host stall)")
    counted = f"{steps.count} steps"
    evidence = [
        ev("step_p50", steps.p50_ns, "ns", counted, text=f"step p50 {us(steps.p50_ns)} over {steps.count:,} steps"),
        ev("step_max", steps.max_ns, "ns", counted,
           text=f"longest step {us(steps.max_ns)}: a {us(steps.max_ns - steps.p50_ns)} freeze"),
        ev("step_p99_over_p50", round(ratio_p99, 2), "x", "step p50"),
        ev("step_max_over_p50", round(ratio_max, 2), "x", "step p50"),
        ev("long_steps", long_steps.count, "steps", counted,
           text=f"{long_steps.count} of {steps.count} steps longer than 3x p50"),
        ev("long_step_excess_pct", round(long_steps.excess_pct, 2), "%", "total step time",
           text=f"time above p50 in those steps: {pct(long_steps.excess_pct)} of all step time"),
    ]
    if budget is not None:
        over = steps.p99_ns / 1e6 > budget
        evidence.append(ev("itl_p99_budget_ms", budget, "ms", None,
                           text=f"step p99 {us(steps.p99_ns)} is {'over' if over else 'within'} the inter-token "
                                f"p99 budget of {budget:g} ms"))
        if over and severity != "high":
            severity = "high"
    chunked = ctx.serving.config.get("enable_chunked_prefill") if ctx.serving else None
    if chunked is not None:
        evidence.append(ev("chunked_prefill", chunked, "", None, text="engine config: chunked prefill " + (
            "enabled: lower the chunk (max_num_batched_tokens) to bound a step" if chunked else "disabled")))
    return catalog.make(
        "prefill_stall", long_steps.excess_pct,
        {"max": us(steps.max_ns), "p50": us(steps.p50_ns), "p99": us(steps.p99_ns), "ratio_max": f"{ratio_max:.0f}x",
         "long": long_steps.count, "step_word": "step" if long_steps.count == 1 else "steps", "label": label},
        evidence, severity=severity, denominator="total step time", kind=ctx.kind)


PREFILL_STALL = Rule("prefill_stall", "trace", rule_prefill_stall, reads=("processes", "slo", "serving.config"),
                     thresholds=tuple(name for name in THRESHOLDS if name.startswith(("prefill_", "tail_"))))
