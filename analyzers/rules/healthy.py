"""The healthy verdict of a GPU trace: every device computing most of the window in repeated
steps, and nothing found, abstained on or over budget that says otherwise. (A case of serving
artifacts alone is judged by serving.rule_healthy_serving.)"""

from __future__ import annotations

from tracetriage.analyzers import catalog, efficiency
from tracetriage.analyzers.catalog import SEVERITIES
from tracetriage.analyzers.evidence import ev
from tracetriage.analyzers.rules.abstain import BLOCKS_HEALTHY
from tracetriage.analyzers.rules.context import Context, Rule, t
from tracetriage.analyzers.rules.precision import precision_advice, quantize_advice
from tracetriage.analyzers.rules.serving_queue import queue_words
from tracetriage.analyzers.rules.slo import slo_checks
from tracetriage.wording import pct, requests

# name: (value, why)
THRESHOLDS = {
    "healthy_compute_min_pct": (80.0, "every device computing (kernels, not copies) at least 80% of the window"),
    "healthy_min_steps": (3, ("'steady' is a claim about repeated steps: each process driving a GPU needs "
                              "at least 3 measured steps")),
}


def _fewest_steps(ctx: Context) -> int:
    """The fewest measured steps of a process that drives a device (0 when one has none)."""
    counts = []
    for trace in ctx.per_trace:
        pids = {int(device.pid) for device in trace.devices if device.pid is not None}
        counts += [int(process.steps.count or 0) for process in trace.processes if int(process.pid) in pids]
    return min(counts) if counts else 0


def _efficiency_measured(ctx: Context) -> bool:
    """Whether every trace's dominant kernel class has a measured efficiency (efficiency.judgement)."""
    return bool(ctx.per_trace) and all((judged := efficiency.judgement(trace.efficiency)) is not None and judged.measured
                                       for trace in ctx.per_trace)


def rule_healthy(ctx: Context):
    devices, findings, abstentions = ctx.devices, ctx.findings, ctx.abstentions
    if not devices:
        return None
    if any(SEVERITIES.index(finding.severity) >= SEVERITIES.index("low") or finding.id == "below_roofline"
           or finding.falsified for finding in findings):
        # a falsified finding still measured a symptom, with a cause not yet known; busy is not fast:
        # never healthy while the dominant class runs below its roofline
        return None
    if any(abstention.analysis in BLOCKS_HEALTHY for abstention in abstentions):
        return None
    if any(check["status"] == "broken" for check in slo_checks(ctx.serving, ctx.slo)):
        return None  # a --slo budget the serving artifacts show broken: never under a healthy verdict
    compute = [100.0 * (device.slices["compute"] + device.slices["collective"]) / device.window_ns if device.window_ns
               else 0.0 for device in devices]
    if min(compute) < t("healthy_compute_min_pct"):
        return None
    if _fewest_steps(ctx) < t("healthy_min_steps"):
        return None  # busy, but steadiness is not measured: the headline says what is missing instead
    if not _efficiency_measured(ctx):
        # busy is not fast: healthy means computing at a measured efficiency (DESIGN.md); without it the headline
        # is "No problem found in what was measured ... incomplete", with the efficiency abstention's capture
        return None
    evidence = [ev("min_compute_pct", round(min(compute), 2), "%", "window",
                   text=f"the least busy device computes {pct(min(compute))} of the window (kernels, graph replays "
                        "and collectives)")]
    eff_words = efficiency.healthy_words(ctx.per_trace)
    evidence.append(ev("efficiency", eff_words.lstrip("; "), "", None, text=f"efficiency: {eff_words.lstrip('; ')}"))
    stats = ctx.serving.stats if ctx.serving else None
    if stats:
        evidence.append(ev("queue", stats.waiting_share_pct, "%", f"{stats.samples} engine stats samples",
                           text=f"{queue_words(ctx.serving)}; running mean {requests(stats.running_mean)}, "
                                f"KV cache usage p50 {stats.kv_usage_p50}% max {stats.kv_usage_max}%"))
    busy = "all" if min(compute) >= 100.0 else f"at least {pct(min(compute))}"
    device = next((trace.efficiency.device for trace in ctx.per_trace if trace.efficiency.device), None)
    fields = {"busy": busy, "efficiency": eff_words, "precision": precision_advice(device),
              "quantize": quantize_advice(device)}
    return catalog.make("healthy", 0.0, fields, evidence, severity="info", denominator="window", kind=ctx.kind)


HEALTHY = Rule("healthy", "verdict", rule_healthy, reads=("devices", "processes", "findings", "abstentions", "serving"),
               thresholds=("healthy_compute_min_pct", "healthy_min_steps"))
