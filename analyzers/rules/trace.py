"""The host-side trace rules: the GPU waits on what the host does between kernels (launch_bound,
python_host_overhead, host_sync_per_step). Each reads the per-trace and per-device metrics (never a
file) and returns a finding or None. The throughput rules claim disjoint slices of each device's window
through the :class:`~tracetriage.analyzers.accounting.Ledger`, in registry order (a root cause before the
symptom it explains; the copy rules in copies.py next, gpu_starved in starved.py last: it takes what nobody
explained), so their ``impact_pct`` values add up to at most 100%."""

from __future__ import annotations

import re

from tracetriage.analyzers import catalog
from tracetriage.analyzers.case_blocks import HotFrame
from tracetriage.analyzers.evidence import ev, severity_for
from tracetriage.analyzers.metrics import DeviceMetrics, TraceMetrics
from tracetriage.analyzers.rules.context import Context, Rule, best_device, cause_split, median, t, window_denominator
from tracetriage.analyzers.steps import MIN_STEPS
from tracetriage.wording import for_vendor, nbytes, pct, plural, source_text, us

# name: (value, why)
THRESHOLDS = {
    "launch_busy_max_pct": (75.0, "a GPU busier than 75% is not mainly waiting on launches"),
    "launch_kernel_median_max_ns": (50_000, ("kernels above ~50 us amortize a 5-10 us launch; below it "
                                             "launch cost competes with work")),
    "launch_per_step_min": (50, "a step with fewer than ~50 launches cannot lose much time to launch overhead"),
    "launch_kernels_min_no_steps": (1000, ("without steps, need at least this many kernels in the window to "
                                           "call it a launch pattern")),
    "launch_host_idle_share_min": (0.5, "at least half of the idle time must be the host launching or between launches"),
    "launch_impact_min_pct": (5.0, "below 5% of the window the launch overhead is not worth a finding"),
    "sync_per_step_min": (1.0, "the median step holds at least one blocking sync"),
    "sync_impact_min_pct": (2.0, "idle time after syncs must be at least 2% of the window"),
    "sync_launch_latency_ns": (10_000, ("after a sync returns, the next kernel reaches the GPU ~5-10 us after its launch "
                                        "call: what a gap holds beyond that in host code is the code, not the sync")),
    "sync_host_after_share": (0.5, ("when most of the idle after the syncs is host code, that code is the cost and the "
                                    "wait itself is minor")),
    "sync_claim_min_pct": (0.1, ("a sync whose wait and launch cost under 0.1% of the window causes nothing "
                                 "measurable: the gaps after it are the host code's, named by the host-bound findings")),
    "python_frame_min_pct": (15.0, ("one user frame holding 15% of the host's non-idle samples is a hot spot worth moving off "
                                    "the step's critical path")),
    "python_min_samples": (100, ("a share needs a sampling profile (py-spy record); one dump is a snapshot "
                                 "per thread, not a profile")),
    "python_host_idle_min_pct": (5.0, "the GPU must idle at least 5% of the window in host code for Python to matter"),
    "python_impact_min_pct": (1.0, "a frame whose converted share of the window is under 1% is not worth a finding"),
}


def _launch_pattern(trace: TraceMetrics) -> tuple[float | None, int, int] | None:
    """(launches per step, median kernel ns, kernels in the window) of a trace whose host side has the
    launch-bound pattern: no graph replays, short kernels, many launches per step (or, without steps,
    many kernels) and no graph launches per step; None otherwise."""
    if trace.graph_replays_in_window > 0:
        return None
    kernel_median = trace.kernel_median_ns
    if kernel_median is None or kernel_median > t("launch_kernel_median_max_ns"):
        return None
    launches_per_step = median([process.launches_per_step for process in trace.processes])
    kernels = trace.kernels_in_window
    if launches_per_step is not None:
        if launches_per_step < t("launch_per_step_min"):
            return None
    elif kernels < t("launch_kernels_min_no_steps"):
        return None
    if median([process.graph_launches_per_step for process in trace.processes]):
        return None
    return launches_per_step, kernel_median, kernels


def _waits_on_launches(device: DeviceMetrics) -> bool:
    """A device not too busy whose idle time is mostly the host launching or running code between launches."""
    if device.busy_pct > t("launch_busy_max_pct") or device.window_ns <= 0:
        return False
    idle = device.gaps.total_ns
    launch_or_host = device.gaps.by_cause["launch"] + device.gaps.by_cause["host"]
    return idle > 0 and launch_or_host / idle >= t("launch_host_idle_share_min")


def _launch_evidence(device: DeviceMetrics, trace: TraceMetrics, launches_per_step, kernel_median: int,
                     kernels: int, api: str = "CUDA") -> list[dict]:
    """The launch-bound evidence of the device that lost most: launches, kernel lengths, busy and idle shares
    (``api``: the runtime the capture's calls are, CUDA or HIP)."""
    by_cause = device.gaps.by_cause
    window_ns = device.window_ns
    return [
        ev("launches_per_step", launches_per_step, "calls", "one step",
           text=f"{launches_per_step:,.0f} kernel launches per step (median over steps)")
        if launches_per_step is not None else ev("kernels_in_window", kernels, "kernels", "window"),
        ev("kernel_median", kernel_median, "ns", "kernels in the window", text=f"median kernel duration {us(kernel_median)}"),
        ev("busy_pct", device.busy_pct, "%", f"window of {us(window_ns)} on {device.id}",
           text=f"GPU busy {pct(device.busy_pct)} of the {us(window_ns)} window on {device.id}"),
        ev("idle_launch_pct", round(100 * by_cause["launch"] / window_ns, 2), "%", "window",
           text=f"idle while the host is inside launch calls: {pct(100 * by_cause['launch'] / window_ns)} of the window"),
        ev("idle_host_pct", round(100 * by_cause["host"] / window_ns, 2), "%", "window",
           text=f"idle while the host runs code outside {api}: {pct(100 * by_cause['host'] / window_ns)} of the window"),
        ev("short_gaps", device.short_gap_count, "gaps", "window",
           text=f"{plural(device.short_gap_count, 'gap')} under 1 ms between kernels, p50 {us(device.gaps.p50_ns)}"),
        ev("graph_replays", trace.graph_replays_in_window, "replays", "window",
           text=f"no {api} graph replays in the steady state"),
    ]


def rule_launch_bound(ctx: Context):
    wants, pattern_of = {}, {}
    for trace in ctx.judged():
        pattern = _launch_pattern(trace)
        if pattern is None:
            continue
        for device in trace.devices:
            if _waits_on_launches(device):
                wants[device.id] = (["idle:short:launch", "idle:short:host"], None)
                pattern_of[device.id] = (trace, *pattern)
    if not wants:
        return None
    available = {device_id: ctx.ledger.available(device_id, *want) for device_id, want in wants.items()}
    if ctx.ledger.impact_pct(available) < t("launch_impact_min_pct"):
        return None
    taken = ctx.ledger.take("launch_bound", wants)
    impact = ctx.ledger.impact_pct(taken)
    device = best_device(taken, ctx)
    trace, launches_per_step, kernel_median, kernels = pattern_of[device.id]
    per_step = (f"{launches_per_step:,.0f} kernel launches per step" if launches_per_step is not None
                else f"{kernels:,} kernels in the window")
    eager = ctx.serving.config.get("enforce_eager") if ctx.serving else None
    api = "HIP" if ctx.kind.get("vendor") == "rocm" else "CUDA"
    evidence = _launch_evidence(device, trace, launches_per_step, kernel_median, kernels, api)
    launch_frame = _hot_frame(ctx, r"(?i)(cu|hip)(da)?LaunchKernel|LaunchKernel")
    if launch_frame:
        evidence.append(ev("launch_frame_self_pct", launch_frame.self_pct, "%", "non-idle host samples",
                           text=f"the host profile spends {pct(launch_frame.self_pct)} of its samples "
                                f"inside {launch_frame.frame}"))
    if eager is True:
        evidence.append(ev("enforce_eager", True, "", None,
                           text=f"the engine config has enforce_eager=True: {api} graphs are off"))
    return catalog.make(
        "launch_bound", impact,
        {"per_step": per_step, "per_step_short": f"{launches_per_step:,.0f}" if launches_per_step is not None else "many",
         "kernel_median": us(kernel_median), "busy": pct(device.busy_pct), "claimed": pct(impact)},
        evidence, severity=severity_for(impact), denominator=window_denominator(ctx),
        variant=("prefill" if _prefill_only(trace, device.pid) else ("eager_rocm" if api == "HIP" else "eager")
                 if eager is True else None), kind=ctx.kind)


def _prefill_only(trace, pid: int) -> bool:
    """Whether every measured step of the process is a prefill (its range names one: steps.is_prefill_name):
    the decode step's graph is not its fix."""
    steps = next((process.steps for process in trace.processes if process.pid == pid), None)
    return bool(steps is not None and steps.count and steps.prefill_count == steps.count)


def _hot_frame(ctx: Context, pattern: str) -> HotFrame | None:
    """The hottest frame of the host profile whose name matches ``pattern``, or None."""
    rx = re.compile(pattern)
    return next((frame for frame in ctx.data.get("hot_frames") or [] if rx.search(frame.frame)), None)


def rule_python_host_overhead(ctx: Context):
    """py-spy share -> window share: the frame holds ``share`` of the host's non-idle
    samples; samples are taken uniformly in time, so it runs during about ``share`` of the
    host-code idle time H (GPU idle, host in no CUDA call). It claims share x H of each
    device's host-code idle, from the slices no earlier finding took."""
    host_profile = ctx.data.get("host_profile")
    if not host_profile or not host_profile.user_frames:
        return None
    top = host_profile.user_frames[0]
    if top.share_pct < t("python_frame_min_pct") or host_profile.total_samples < t("python_min_samples"):
        return None
    sync_txt = f"; {top.sync_pct:.1f}% of samples are inside a host sync it calls" if top.calls_sync else ""
    fields = {"frame": top.frame, "share": pct(top.share_pct), "sync": sync_txt,
              "func": top.frame.split(" (")[0],
              "sync_clause": ", and it waits for the GPU inside it (a .cpu()/.item() read-back)" if top.sync_pct >= 1.0
              else ", and it calls a host-syncing operation" if top.calls_sync else ""}
    evidence = [
        ev("frame", top.frame, "", None, text=f"hot user frame: {top.frame}"),
        ev("share_pct", top.share_pct, "%", f"{host_profile.total_samples:,} non-idle py-spy samples",
           text=f"{pct(top.share_pct)} of {host_profile.total_samples:,} non-idle py-spy samples are inside it "
                f"({pct(top.self_pct)} in its own code)"),
        ev("calls_sync", top.calls_sync, "", None,
           text="it calls a host-syncing operation" if top.calls_sync else "no host sync below it"),
    ]
    devices = [device for device in ctx.devices if device.window_ns]
    if not devices:
        evidence.append(ev("host_idle", None, "", None, text="no GPU trace in the case: the share is of the host's samples only"))
        return catalog.make("python_host_overhead", top.share_pct,
                            {**fields, "host_idle": "not measured", "claimed": "not measured"},
                            evidence, severity=severity_for(top.share_pct),
                            denominator="host samples (no GPU trace to weigh it against)", kind=ctx.kind)
    wants, host_idle = {}, {}
    for device in devices:
        host_ns = sum(ns for name, ns in device.slices.items() if name.endswith(":host"))
        host_idle[device.id] = 100.0 * host_ns / device.window_ns
        if host_idle[device.id] >= t("python_host_idle_min_pct"):
            wants[device.id] = (["idle:after_sync:host", "idle:long:host", "idle:short:host"],
                                top.share_pct / 100.0 * host_ns)
    if not wants:
        return None
    taken = ctx.ledger.take("python_host_overhead", wants)
    impact = ctx.ledger.impact_pct(taken)
    if impact < t("python_impact_min_pct"):
        return None
    device = best_device(taken, ctx)
    evidence.append(ev("host_idle_pct", round(host_idle[device.id], 2), "%", f"window on {device.id}",
                       text=for_vendor(f"the GPU ({device.id}) idles {pct(host_idle[device.id])} of the window while "
                                       "the host is in no CUDA call", ctx.kind.get("vendor"))))
    evidence.append(ev("claimed_pct", round(impact, 2), "%", window_denominator(ctx),
                       text=f"{pct(top.share_pct)} of that host-code idle time = {pct(impact)} of the window"))
    return catalog.make("python_host_overhead", impact,
                        {**fields, "host_idle": pct(host_idle[device.id]), "claimed": pct(impact)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx), kind=ctx.kind)


# What a blocking sync causes: the idle while the host waits in it (or in the blocking copy that reads the
# result back) and while it launches the next kernel; plus, per gap, the launch latency in no call
# (sync_launch_latency_ns). The host code that runs after it is host-bound time, not the sync's.
SYNC_CAUSED = ("idle:after_sync:sync", "idle:after_sync:memcpy_sync", "idle:after_sync:launch")


def _sync_wants(ctx: Context) -> tuple[dict, dict, dict]:
    """Per device of a process that syncs in most steps: the slices the sync causes, the launch latency
    after each sync (claimed from the host code after it) and the process."""
    wants, latency, process_of = {}, {}, {}
    for trace in ctx.judged():
        for device in trace.devices:
            process = next((process for process in trace.processes if process.pid == device.pid), None)
            if (process is None or process.syncs_per_step is None or process.syncs_per_step < t("sync_per_step_min")
                    or not device.window_ns):
                continue
            wants[device.id] = (list(SYNC_CAUSED), None)
            latency[device.id] = (["idle:after_sync:host"], device.after_sync_count * t("sync_launch_latency_ns"))
            process_of[device.id] = process
    return wants, latency, process_of


def _format_of(ctx: Context, device: DeviceMetrics) -> str | None:
    """The format of the judged trace that holds ``device`` (its ranges' kind: wording.source_text)."""
    return next((trace.meta.get("format") for trace in ctx.judged() if device in trace.devices), None)


def _few_steps_words(count: int) -> str:
    """What per-step figures of fewer than MIN_STEPS measured steps speak for: those steps alone."""
    if count >= MIN_STEPS:
        return ""
    return f": only {plural(count, 'step')} measured, the per-step figures are {'its' if count == 1 else 'theirs'} alone"


def _sync_evidence(ctx: Context, device: DeviceMetrics, process, impact: float, per_step_idle: float,
                   after_all: int) -> list[dict]:
    """host_sync_per_step's evidence before the host code after the syncs: the syncs and copies per
    step, the idle after them, the claim, its size per step and the steps."""
    dtoh = process.dtoh_copies_per_step or 0
    steps = process.steps
    syncs = process.syncs_per_step
    in_calls = after_all - device.slices["idle:after_sync:host"]  # the after-sync idle spent inside CUDA calls
    window_ns = device.window_ns
    return [
        ev("syncs_per_step", syncs, "calls", "one step",
           text=f"{syncs:g} blocking {'sync' if syncs == 1 else 'syncs'} per step (median)"),
        ev("dtoh_copies_per_step", dtoh, "copies", "one step",
           text=f"{dtoh:g} device-to-host {'copy' if dtoh == 1 else 'copies'} per step (median)"),
        ev("idle_after_sync_pct", round(100.0 * after_all / window_ns, 2), "%", f"window on {device.id}",
           text=f"idle gaps that begin as a sync returns: {plural(device.after_sync_count, 'gap')}, {us(after_all)} in all = "
                f"{pct(100.0 * after_all / window_ns)} of the window ({pct(100.0 * in_calls / window_ns)} inside the sync "
                f"and the launch after it, {pct(100.0 * device.slices['idle:after_sync:host'] / window_ns)} host code after "
                "it); the host was then "
                f"{cause_split(device, 'idle:after_sync:', ctx.kind.get('vendor'))}"),
        ev("claimed_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"claimed: the GPU idle while the host waits in the sync and launches the next kernel, {pct(impact)} "
                "of the window (what the findings ranked before it left)"),
        ev("idle_after_sync_per_step", int(per_step_idle), "ns", "one step",
           text=f"about {us(per_step_idle)} of GPU idle per step caused by the sync (its wait and the launch after it)"),
        ev("steps", steps.count, "steps", "window", text=f"{plural(steps.count, 'step')} (source: "
                                                         f"{source_text(steps.source, _format_of(ctx, device))}), "
                                                         f"p50 {us(steps.p50_ns)}{_few_steps_words(steps.count)}"),
    ]


def rule_host_sync_per_step(ctx: Context):
    """A blocking sync in most steps, the GPU idle after it: claims what the sync causes (SYNC_CAUSED and
    the launch latency after each sync), not the host code that follows; when that code holds most of the
    idle after the syncs (sync_host_after_share) the text says the sync is minor and the code is the cost."""
    wants, latency, process_of = _sync_wants(ctx)
    if not wants:
        return None
    after_sync = {device_id: ctx.ledger.available(device_id, ["idle:after_sync:*"]) for device_id in wants}
    if ctx.ledger.impact_pct(after_sync) < t("sync_impact_min_pct"):
        return None
    caused = {device_id: ctx.ledger.available(device_id, *wants[device_id]) + ctx.ledger.available(device_id, *latency[device_id])
              for device_id in wants}
    if ctx.ledger.impact_pct(caused) < t("sync_claim_min_pct"):
        return None
    waited = ctx.ledger.take("host_sync_per_step", wants)
    launched = ctx.ledger.take("host_sync_per_step", latency)
    taken = {device_id: waited[device_id] + launched[device_id] for device_id in wants}
    impact = ctx.ledger.impact_pct(taken)
    device = best_device(taken if any(taken.values()) else after_sync, ctx)
    process = process_of[device.id]
    dtoh = process.dtoh_copies_per_step or 0
    dtoh_txt = (f", with {plural(round(dtoh), 'device-to-host copy', 'device-to-host copies')} per step "
                f"({nbytes(process.dtoh_bytes_per_step or 0)})") if dtoh else ""
    syncs = process.syncs_per_step
    per_step_idle = taken[device.id] / max(1, process.steps.count)
    after_all = sum(ns for name, ns in device.slices.items() if name.startswith("idle:after_sync:"))
    window_ns = device.window_ns
    evidence = _sync_evidence(ctx, device, process, impact, per_step_idle, after_all)
    host_after = device.slices["idle:after_sync:host"]
    host_after_pct = 100.0 * host_after / window_ns
    evidence.append(_host_after_evidence(ctx, device, launched[device.id]))
    host_bound = after_all and host_after >= t("sync_host_after_share") * after_all
    return catalog.make("host_sync_per_step", impact,
                        {"syncs": f"{syncs:g}", "dtoh": dtoh_txt, "claimed": pct(impact),
                         "per_step_idle": us(per_step_idle), "host_after": pct(host_after_pct)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx),
                        variant="host_after" if host_bound else None, kind=ctx.kind)


def _host_after_evidence(ctx: Context, device: DeviceMetrics, launched_ns: int) -> dict:
    """The host code after the syncs (the idle:after_sync:host slice) and the part of it this finding
    claims: the launch latency after each sync (``launched_ns``), the rest being host-bound time."""
    window_ns = device.window_ns
    host_after_pct = 100.0 * device.slices["idle:after_sync:host"] / window_ns
    latency = f"the launch latency after each sync ({pct(100.0 * launched_ns / window_ns)})" if launched_ns else "none of it"
    return ev("host_after_sync_pct", round(host_after_pct, 2), "%", f"window on {device.id}",
              text=for_vendor(f"host code after the syncs return (no CUDA call while the GPU idles): "
                              f"{pct(host_after_pct)} of the window; claimed here only {latency}: the rest is "
                              "host-bound time, not the wait", ctx.kind.get("vendor")))


RULES = [
    Rule("launch_bound", "throughput", rule_launch_bound, reads=("processes", "devices", "hot_frames", "serving.config"),
         thresholds=tuple(name for name in THRESHOLDS if name.startswith("launch_"))),
    Rule("python_host_overhead", "throughput", rule_python_host_overhead, reads=("host_profile", "devices"),
         thresholds=tuple(name for name in THRESHOLDS if name.startswith("python_"))),
    Rule("host_sync_per_step", "throughput", rule_host_sync_per_step, reads=("processes", "devices"),
         thresholds=tuple(name for name in THRESHOLDS if name.startswith("sync_"))),
]
