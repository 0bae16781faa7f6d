"""Abstentions: what the capture does not measure that a verdict needs, each with the capture
that would decide it; and the oddities that make a trace too small or too odd to judge."""

from __future__ import annotations

import re

from tracetriage.analyzers.catalog import capture_text
from tracetriage.analyzers.findings import UNMATCHED_STEP_RANGE, Abstention, Finding
from tracetriage.analyzers.metrics import TraceMetrics
from tracetriage.analyzers.rules.context import Context, process_name, t
from tracetriage.analyzers.rules.hints import capture_cmd, hint_format, host_profiler_hint
from tracetriage.analyzers.rules.serving import budgets_break_at, queue_moment, tail_words, tpot_needs_budget
from tracetriage.analyzers.rules.serving_signals import tail_unexplained
from tracetriage.analyzers.rules.slo import slo_checks
from tracetriage.analyzers.serving_metrics import ServingSummary
from tracetriage.analyzers.steps import MIN_STEPS, PROFILER_STEP
from tracetriage.wording import fmt_ns, for_vendor, pct, plural, slo_text, us

# name: (value, why)
THRESHOLDS = {
    "host_idle_pyspy_hint_pct": (10.0, "idle host-code time above 10% of the window deserves a host profile"),
    "judge_min_gpu_ops": (20, "fewer GPU operations than this in the window are a handful, not a workload"),
    "judge_min_window_ns": (1_000_000, "a window shorter than 1 ms is shorter than one decode step"),
    "capture_launch_ratio": (4.0, "launch calls at 4x the kernels that ran: work was recorded into a graph, not executed"),
}

CAPTURE_CALLS = re.compile(r"(?i)(Stream|Thread)?BeginCapture|EndCapture|GraphInstantiate")
# Abstentions that mean the capture cannot be judged healthy (too little, or the wrong phase).
ODD = ("too_few_gpu_ops", "window_too_short", "memset_only", "graph_capture_phase", "no_steady_phase")
BLOCKS_HEALTHY = ODD + ("gap_causes", "graph_replays")


def oddities(trace: TraceMetrics) -> list[Abstention]:
    """Why one trace is too small or too odd to judge (empty when it can be judged):
    a handful of GPU operations, a window shorter than a step, memsets only, or a
    CUDA/HIP-graph capture phase (stream capture or graph instantiation calls, and
    launch calls far exceeding the kernels that ran)."""
    fmt = hint_format(trace)
    window_ns = trace.window.duration_ns
    ops = trace.gpu_ops_in_window
    out = []

    def add(analysis, reason, what="steady"):
        out.append(Abstention(analysis=analysis, scope=trace.meta.get("path") or "trace", reason=reason,
                    capture_hint=capture_cmd(fmt, what)))

    executed = trace.executed_total  # over the whole capture: graph capture often lies outside the GPU window
    capture_calls, launches = trace.capture_calls, trace.launches_total
    if capture_calls and launches >= t("capture_launch_ratio") * max(1, executed):
        add("graph_capture_phase", f"{plural(capture_calls, 'stream-capture or graph-instantiate call')} and "
            f"{launches:,} launch calls for {executed:,} kernels executed: this is a CUDA/HIP-graph capture "
            "phase, not steady-state serving")
    elif (capture_calls and any(process.steps.source == "sync" for process in trace.processes)
          and executed < launches):
        add("graph_capture_phase", "steps were inferred from syncs in a window with "
                                   f"{plural(capture_calls, 'graph-capture call')}: "
            "the syncs belong to graph capture, not to serving steps")
    if ops["kernel"] + ops["graph"] == 0 and ops["memset"] and not ops["memcpy"]:
        add("memset_only", f"the window holds only {plural(ops['memset'], 'memset')} and no kernel: nothing "
                           "to judge the GPU's work by")
    elif sum(ops.values()) < t("judge_min_gpu_ops"):
        add("too_few_gpu_ops", f"only {plural(sum(ops.values()), 'GPU operation')} in the window "
            f"({', '.join(f'{kind} {count}' for kind, count in ops.items() if count)}): a handful, not a workload")
    no_steady = trace.phases.no_steady if trace.phases else None
    if no_steady:
        add("no_steady_phase", _no_steady_words(no_steady, window_ns))
    if window_ns < t("judge_min_window_ns"):
        add("window_too_short", f"the window is {us(window_ns)} long, shorter than one decode step")
    return out


def _no_steady_words(no_steady: dict, window_ns: int) -> str:
    """Why the window of a capture without steps is start-up, not a steady state (analyzers/phases.py)."""
    if no_steady["why"] == "stall":
        where = f"stall inside {no_steady['stall_call']}" if no_steady.get("stall_call") else "host-only stall"
        return (f"no steady phase: one {fmt_ns(no_steady['stall_ns'])} {where} fills "
                f"{pct(100.0 * no_steady['stall_ns'] / max(1, window_ns))} of the window, with a handful of GPU "
                "operations on either side: this is start-up (compilation, loading), not a steady state")
    launches = plural(no_steady["kernels"], "kernel launch", "kernel launches")
    return (f"no steady phase: only {no_steady['repeated']:,} of the window's {launches} "
            "run a kernel that ran before in the capture: these are first launches (compilation, module loading, a "
            "one-shot run), start-up, not a steady state")


STEP_RANGE_CANDIDATES = 5  # the most frequent range names offered as --step-range candidates


def _range_candidates(trace) -> str:
    """', though the capture holds N annotation ranges; the most frequent: ...' naming the range
    names a --step-range could select (empty without ranges): a name that repeats once per step
    marks the steps."""
    ranges = getattr(trace, "ranges", None)
    if ranges is None or not len(ranges) or "name" not in ranges:
        return ""
    counts = ranges["name"].value_counts()
    counts = counts[counts > 1].head(STEP_RANGE_CANDIDATES)
    if counts.empty:
        return ""
    names = ", ".join(f"'{str(name)[:60]}' ({int(count):,})" for name, count in counts.items())
    return (f"; of the capture's {len(ranges):,} annotation ranges the most frequent are {names}: pass the one that "
            "marks a step as --step-range REGEX")


def _step_annotations(trace: TraceMetrics, fmt: str | None, candidates: str, language: str | None = None) -> list[Abstention]:
    """Steps inferred from a periodic sync or graph launch: prefill and decode cannot be told apart."""
    inferred = [process for process in trace.processes if process.steps.source in ("sync", "graph_launch")]
    if not inferred:
        return []
    sources = ", ".join(sorted({process.steps.source for process in inferred}))
    return [Abstention(analysis="step_annotations", scope=", ".join(f"pid {process.pid}" for process in inferred[:8]),
             reason=(f"no annotation ranges mark the steps: they were inferred from the periodic {sources} pattern, "
                        "so prefill and decode steps cannot be told apart by name") if not candidates else (
                 f"no known step range marks the steps: they were inferred from the periodic {sources} pattern, "
                 f"so prefill and decode steps cannot be told apart by name{candidates}"),
             capture_hint=capture_cmd(fmt, "steps", language))]


def _no_ranges_words(fmt: str | None, vendor: str | None) -> str:
    """"No step ranges" in the words of the capture: a PyTorch profiler trace's annotations (on either
    vendor), else NVTX or roctx ranges."""
    return "no step annotation ranges (ProfilerStep#N, record_function)" if fmt == "kineto" else for_vendor(
        "no NVTX step ranges", vendor)


def _too_few_steps(process) -> Abstention:
    """A process with one or two annotated steps (steps.py: an engine's iteration, ProfilerStep#N, a
    --step-range match): read as steps, too few for the step tail and steadiness; the capture that records
    more is torch.profiler's schedule for ProfilerStep ranges, the engine's or profiler's step count else."""
    steps = process.steps
    profiler = bool(steps.range_name and PROFILER_STEP.match(steps.range_name))
    what = plural(steps.count, "ProfilerStep range" if profiler else "step")
    return Abstention(analysis="steps", scope=f"pid {process.pid}",
                      reason=f"only {what} measured ({steps.range_name}), at least {MIN_STEPS} needed"
                             + (" (raise the schedule's active= steps)" if profiler else "")
                             + ": the window covers them and the GPU work they queued; the step tail and whether "
                               "the steps are steady are not measured",
                      capture_hint=capture_text("abstention", "profiler_steps" if profiler else "few_steps"))


def _no_steps(trace: TraceMetrics, fmt: str | None, candidates: str, vendor: str | None = None,
              language: str | None = None) -> list[Abstention]:
    """Each process with GPU work and no steps found: per-step metrics not measured (``vendor``: the
    capture's, so an AMD capture reads roctx, not NVTX)."""
    out = []
    asked = trace.meta.get("step_range")
    for process in trace.processes:
        if 0 < process.steps.count < MIN_STEPS:  # an engine's iteration, ProfilerStep#N, a --step-range: read, too few
            out.append(_too_few_steps(process))
            continue
        if process.steps.source != "none" or not process.gpu_ops:  # a process with no GPU work has no steps to find
            continue
        if asked:  # the user's regex replaced the search: say so, not that the capture has no steps
            out.append(Abstention(analysis="steps", scope=f"pid {process.pid}",
                        reason=f"--step-range {asked!r} {UNMATCHED_STEP_RANGE}: per-step "
                                  f"metrics (launches and syncs per step, the step tail) not measured{candidates}",
                        capture_hint=capture_text("abstention", "step_range")))
            continue
        out.append(Abstention(analysis="steps", scope=f"pid {process.pid}",
                    reason=(_no_ranges_words(fmt, vendor) if not candidates else "no known step range")
                    + " and no periodic sync or graph launch: per-step metrics "
                      f"(launches and syncs per step, the step tail) not measured{candidates}",
                    capture_hint=capture_cmd(fmt, "steps", language)))
    return out


def _api_and_graphs(trace: TraceMetrics, fmt: str | None) -> list[Abstention]:
    """No API calls (gap causes unknown); graph launches without replay records (busy % a lower bound)."""
    out = []
    if not trace.has_api:
        out.append(Abstention(analysis="gap_causes", scope="trace",
                    reason="the trace holds no CUDA/HIP API calls: idle time cannot be attributed to "
                              "launches, syncs or host code",
                    capture_hint=capture_cmd(fmt, "api")))
    if (trace.graph_launches_in_window and not trace.graph_replays_in_window
            and trace.meta.get("graph_trace_mode") != "node"):
        out.append(Abstention(analysis="graph_replays", scope="trace",
                    reason=f"{trace.graph_launches_in_window} graph launches but no graph replay or graph-node records: "
                              "GPU time inside graphs is missing and busy % is a lower bound",
                    capture_hint=capture_cmd(fmt, "graphs")))
    return out


def _host_stall_tail(ctx: Context, trace: TraceMetrics) -> list[Abstention]:
    """Long steps in which the GPU is mostly idle and not labelled prefill: a host stall nobody measured."""
    out = []
    for process in trace.processes:
        steps, long_steps = process.steps, process.long_steps
        if (long_steps.count and steps.p50_ns and steps.max_ns / steps.p50_ns >= t("prefill_max_ratio")
                and not long_steps.prefill_labelled and long_steps.busy_pct < t("prefill_long_busy_min_pct")):
            out.append(Abstention(analysis="step_tail", scope=f"pid {process.pid}",
                        reason=f"{plural(long_steps.count, 'step')} up to {us(steps.max_ns)} against a "
                                  f"p50 of {us(steps.p50_ns)}, "
                                  f"but the GPU is busy only {long_steps.busy_pct:.0f}% during them: a host stall "
                                  "(garbage collection, scheduler, I/O), not prefill; what the host did is not measured",
                        capture_hint=host_profiler_hint(process.name, process.pid, ctx.kind)))
    return out


def _case_abstentions(ctx: Context) -> list[Abstention]:
    """Across the case: collectives without a topology matrix, host-code idle without a host profile."""
    out = []
    if any(device.collective_count > 0 for device in ctx.devices) and not getattr(ctx.case, "topologies", None):
        out.append(Abstention(analysis="topology", scope="case",
                    reason="collectives run but no topology matrix was given: cannot tell whether the communicator "
                              "crosses a slow (SYS/NODE/PHB) link",
                    capture_hint=capture_text("abstention",
                                                 "topology_rocm" if ctx.kind.get("vendor") == "rocm" else "topology")))
    if not any(capture.format in ("raw", "speedscope") for capture in getattr(ctx.case, "pyspy", [])):
        hosty = [device for device in ctx.devices if device.window_ns
                 and 100.0 * device.gaps.by_cause["host"] / device.window_ns >= t("host_idle_pyspy_hint_pct")]
        if hosty:
            device = max(hosty, key=lambda x: x.gaps.by_cause["host"])
            out.append(Abstention(analysis="host_frames", scope=device.id,
                        reason=f"{100.0 * device.gaps.by_cause['host'] / device.window_ns:.0f}% of the window the GPU "
                                  + for_vendor("idles while the host is in no CUDA call: which host code runs then is not "
                                               "measured", ctx.kind.get("vendor")),
                        capture_hint=host_profiler_hint(process_name(ctx, device.pid), device.pid, ctx.kind)))
    return out


def trace_abstentions(ctx: Context) -> list[Abstention]:
    """What the traces do not measure that a verdict needs: the oddities, step annotations, steps,
    API calls, graph replays, a host stall in the step tail, the topology, the host's frames."""
    out = []
    traces = list(getattr(ctx.case, "traces", []) or [])
    for index, trace in enumerate(ctx.per_trace):
        out.extend(trace.odd)
        fmt = hint_format(trace)
        candidates = _range_candidates(traces[index]) if len(traces) == len(ctx.per_trace) else ""
        out += _step_annotations(trace, fmt, candidates, ctx.kind.get("language"))
        out += _no_steps(trace, fmt, candidates, ctx.kind.get("vendor"), ctx.kind.get("language"))
        out += _api_and_graphs(trace, fmt)
        out += _host_stall_tail(ctx, trace)
    return out + _case_abstentions(ctx)


def tail_abstention(serving: ServingSummary | None, findings: list[Finding]) -> list[Abstention]:
    """An abstention for an unexplained inter-token tail (tail_unexplained): what stands, which
    mechanism is ruled out, and the capture that would tell the others apart."""
    tail = tail_unexplained(serving, findings)
    if not tail:
        return []
    return [Abstention(analysis="itl_tail", scope="serving",
                       reason=f"{tail_words(tail)} and no finding explains it"
                       + (f" ({', '.join(tail.ruled_out)} ruled out by its own falsifier: not the prefill-chunk mechanism)"
                          if tail.ruled_out else ""),
                       capture_hint=capture_text("abstention", "itl_tail"))]


def queue_abstention(serving: ServingSummary | None, findings: list[Finding]) -> list[Abstention]:
    """An abstention for a queue behind a full batch or KV pool seen in too few stats samples to tell
    whether it drains (rules/serving.queue_moment), unless at_capacity stands on other evidence (a
    benchmark sweep)."""
    moment = queue_moment(serving)
    if not moment or any(finding.id == "at_capacity" for finding in findings):
        return []
    return [Abstention(analysis="queue_trend", scope="serving", reason=moment,
                       capture_hint=capture_text("abstention", "queue_trend"))]


def serving_abstentions(serving: ServingSummary | None, slo: dict) -> list[Abstention]:
    """What the serving artifacts leave unjudged: --slo budgets not checked, a TPOT knee without a
    budget, a TPOT fit that is no model, artifacts holding configuration only."""
    out = []
    unchecked = [check for check in slo_checks(serving, slo) if check["status"] == "not_measured"]
    if unchecked:
        out.append(Abstention(analysis="slo", scope="serving",
                              reason="--slo budgets not checked: " + "; ".join(slo_text(check) for check in unchecked),
                              capture_hint=capture_text("abstention", "slo")))
    if not serving:
        return out
    fit = serving.tpot_fit
    if tpot_needs_budget(serving, slo):
        breaks = "; ".join(f"{budget:g} ms breaks at {running:.0f} running"
                           + (" (beyond the largest batch measured)" if running > fit.x_max else "")
                           for budget, running in budgets_break_at(fit))
        out.append(Abstention(analysis="tpot_budget", scope="serving",
                              reason=f"TPOT follows the batch (TPOT = {fit.a_ms:.2f} + {fit.b_ms_per_seq:.3f} ms x "
                                     f"running, r² {fit.r2:.2f}, "
                                     f"{fit.points} points) but no TPOT budget was given, so whether the batch "
                                     "is past its knee is not "
                                     f"judged; common budgets: {breaks or 'all below the intercept'}",
                              capture_hint=capture_text("abstention", "tpot_budget")))
    elif fit and not fit.model:
        out.append(Abstention(analysis="tpot_fit", scope="serving",
                              reason=f"TPOT against the running batch is not a model ({fit.rejected}): "
                                     f"TPOT = {fit.a_ms:.2f} + {fit.b_ms_per_seq:.3f} ms x running from "
                                     f"{fit.source} is not used",
                              capture_hint=capture_text("abstention", "tpot_fit")))
    if not (serving.stats or serving.bench or serving.latency.server.measured() or serving.memory.oom_events
            or serving.replicas):
        out.append(Abstention(analysis="serving_load", scope="serving",
                              reason="the serving artifacts hold configuration only: no stats lines, /metrics "
                                     "values or benchmark results",
                              capture_hint=capture_text("abstention", "serving_load")))
    return out
