"""The trace rules: each reads the per-trace and per-device metrics (never a file) and returns a
finding or None. The throughput rules claim disjoint slices of each device's window through the
:class:`~tracetriage.analyzers.accounting.Ledger`, in registry order (a root cause before the
symptom it explains, gpu_starved last: it takes what nobody explained), so their ``impact_pct``
values add up to at most 100%; prefill_stall is on the tail axis, its severity from the tail itself."""

from __future__ import annotations

import re

from tracetriage.analyzers import catalog
from tracetriage.analyzers.catalog import capture_text
from tracetriage.analyzers.evidence import ev, severity_for
from tracetriage.analyzers.host_activity import is_data_loader
from tracetriage.analyzers.metrics import DeviceMetrics, IdleByHost, ProcessMetrics, TraceMetrics
from tracetriage.analyzers.rules.context import (
    CAUSE_WORDS,
    Context,
    Rule,
    best_device,
    cause_split,
    median,
    process_name,
    t,
    window_denominator,
)
from tracetriage.analyzers.rules.hints import capture_cmd, hint_format, host_profiler_hint, is_rocm_format
from tracetriage.model import api_category
from tracetriage.wording import cause_name, for_vendor, nbytes, pct, plural, us

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
    "prefill_min_steps": (20, "a tail needs at least 20 steps to be more than noise"),
    "prefill_p99_ratio": (3.0, "p99 step at 3x the median is a stall users see as a frozen stream"),
    "prefill_max_ratio": (5.0, "a single step 5x the median is a visible freeze"),
    "prefill_long_busy_min_pct": (80.0, ("a long step in which the GPU is busy is GPU work (prefill); an idle one is a "
                                         "host stall")),
    "tail_high_ratio": (10.0, "a step 10x the median is an order-of-magnitude freeze every streaming user notices"),
    "tail_high_freeze_ns": (200_000_000, ("a freeze of 200 ms or more is visible as a stalled stream, "
                                          "whatever its share of the time")),
    "pageable_min_count": (1, "any pageable async copy in steady state serializes with the host"),
    "pageable_min_time_pct": (0.1, ("pageable copies whose own GPU time and host time blocked in them stay under 0.1% "
                                    "of the window (scalar uploads of a few bytes) cost nothing measurable")),
    "copy_bound_min_pct": (30.0, "copies alone filling 30% of the window (and more than kernels) set the step time"),
    "starved_idle_min_pct": (50.0, "a GPU idle for most of the window is starved, whatever the cause"),
    "starved_band_pct": (5.0, ("a class needs a margin: identical captures differ by a few points of idle (where the "
                               "capture starts and stops), so idle within 5 points of the 50% line is 'about half', "
                               "named as such and never called starved")),
    "starved_unexplained_min_share": (0.5, "the other findings explain less than half of the idle time"),
    "starved_after_sync_min_pct": (20.0, ("a fifth of the window idle in host code right after per-step syncs (which "
                                          "host_sync_per_step does not claim) is host-bound time of its own, however "
                                          "busy the rest and whatever the other findings explain")),
    "starved_calls_named_share": (0.1, ("the long runtime calls the GPU idles in are named when they hold a tenth of the "
                                         "window, even when host code holds more")),
    "starved_loader_min_pct": (10.0, ("a DataLoader range on the thread that feeds the GPU that keeps it idle a tenth of "
                                      "the window adds that much to every step: starved, even when the GPU is busy the rest")),
    "starved_range_min_share": (0.5, ("one host range covering most of the GPU's idle host-code time is what the host "
                                      "does while the GPU waits: the finding names it")),
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
                     kernels: int) -> list[dict]:
    """The launch-bound evidence of the device that lost most: launches, kernel lengths, busy and idle shares."""
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
           text=f"idle while the host runs code outside CUDA: {pct(100 * by_cause['host'] / window_ns)} of the window"),
        ev("short_gaps", device.short_gap_count, "gaps", "window",
           text=f"{plural(device.short_gap_count, 'gap')} under 1 ms between kernels, p50 {us(device.gaps.p50_ns)}"),
        ev("graph_replays", trace.graph_replays_in_window, "replays", "window",
           text="no CUDA graph replays in the steady state"),
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
    eager = (ctx.data.get("serving") or {}).get("config", {}).get("enforce_eager")
    evidence = _launch_evidence(device, trace, launches_per_step, kernel_median, kernels)
    launch_frame = _hot_frame(ctx, r"(?i)(cu|hip)(da)?LaunchKernel|LaunchKernel")
    if launch_frame:
        evidence.append(ev("launch_frame_self_pct", launch_frame["self_pct"], "%", "non-idle host samples",
                           text=f"the host profile spends {pct(launch_frame['self_pct'])} of its samples "
                                f"inside {launch_frame['frame']}"))
    if eager is True:
        evidence.append(ev("enforce_eager", True, "", None, text="the engine config has enforce_eager=True: CUDA graphs are off"))
    return catalog.make(
        "launch_bound", impact,
        {"per_step": per_step, "per_step_short": f"{launches_per_step:,.0f}" if launches_per_step is not None else "many",
         "kernel_median": us(kernel_median), "busy": pct(device.busy_pct), "claimed": pct(impact)},
        evidence, severity=severity_for(impact), denominator=window_denominator(ctx),
        variant="eager" if eager is True else None, kind=ctx.kind)


def _hot_frame(ctx: Context, pattern: str) -> dict | None:
    rx = re.compile(pattern)
    return next((frame for frame in ctx.data.get("hot_frames") or [] if rx.search(frame["frame"])), None)


def rule_python_host_overhead(ctx: Context):
    """py-spy share -> window share: the frame holds ``share`` of the host's non-idle
    samples; samples are taken uniformly in time, so it runs during about ``share`` of the
    host-code idle time H (GPU idle, host in no CUDA call). It claims share x H of each
    device's host-code idle, from the slices no earlier finding took."""
    host_profile = ctx.data.get("host_profile")
    if not host_profile or not host_profile["user_frames"]:
        return None
    top = host_profile["user_frames"][0]
    if top["share_pct"] < t("python_frame_min_pct") or host_profile["total_samples"] < t("python_min_samples"):
        return None
    sync_txt = f"; {top['sync_pct']:.1f}% of samples are inside a host sync it calls" if top["calls_sync"] else ""
    fields = {"frame": top["frame"], "share": pct(top["share_pct"]), "sync": sync_txt,
              "func": top["frame"].split(" (")[0],
              "sync_clause": ", and it waits for the GPU inside it (a .cpu()/.item() read-back)" if top["sync_pct"] >= 1.0
              else ", and it calls a host-syncing operation" if top["calls_sync"] else ""}
    evidence = [
        ev("frame", top["frame"], "", None, text=f"hot user frame: {top['frame']}"),
        ev("share_pct", top["share_pct"], "%", f"{host_profile['total_samples']:,} non-idle py-spy samples",
           text=f"{pct(top['share_pct'])} of {host_profile['total_samples']:,} non-idle py-spy samples are inside it "
                f"({pct(top['self_pct'])} in its own code)"),
        ev("calls_sync", top["calls_sync"], "", None,
           text="it calls a host-syncing operation" if top["calls_sync"] else "no host sync below it"),
    ]
    devices = [device for device in ctx.devices if device.window_ns]
    if not devices:
        evidence.append(ev("host_idle", None, "", None, text="no GPU trace in the case: the share is of the host's samples only"))
        return catalog.make("python_host_overhead", top["share_pct"],
                            {**fields, "host_idle": "not measured", "claimed": "not measured"},
                            evidence, severity=severity_for(top["share_pct"]),
                            denominator="host samples (no GPU trace to weigh it against)", kind=ctx.kind)
    wants, host_idle = {}, {}
    for device in devices:
        host_ns = sum(ns for name, ns in device.slices.items() if name.endswith(":host"))
        host_idle[device.id] = 100.0 * host_ns / device.window_ns
        if host_idle[device.id] >= t("python_host_idle_min_pct"):
            wants[device.id] = (["idle:after_sync:host", "idle:long:host", "idle:short:host"],
                                top["share_pct"] / 100.0 * host_ns)
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
                       text=f"{pct(top['share_pct'])} of that host-code idle time = {pct(impact)} of the window"))
    return catalog.make("python_host_overhead", impact,
                        {**fields, "host_idle": pct(host_idle[device.id]), "claimed": pct(impact)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx), kind=ctx.kind)


# What a blocking sync causes: the idle while the host waits in it (or in the blocking copy that reads the
# result back) and while it launches the next kernel; plus, per gap, the launch latency in no call
# (sync_launch_latency_ns). The host code that runs after it is host-bound time, not the sync's.
SYNC_CAUSED = ("idle:after_sync:sync", "idle:after_sync:memcpy_sync", "idle:after_sync:launch")


def rule_host_sync_per_step(ctx: Context):
    """A blocking sync in most steps, the GPU idle after it: claims what the sync causes (SYNC_CAUSED and
    the launch latency after each sync), not the host code that follows; when that code holds most of the
    idle after the syncs (sync_host_after_share) the text says the sync is minor and the code is the cost."""
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
    steps = process.steps
    syncs = process.syncs_per_step
    per_step_idle = taken[device.id] / max(1, steps.count)
    after_all = sum(ns for name, ns in device.slices.items() if name.startswith("idle:after_sync:"))
    window_ns = device.window_ns
    evidence = [
        ev("syncs_per_step", syncs, "calls", "one step",
           text=f"{syncs:g} blocking {'sync' if syncs == 1 else 'syncs'} per step (median)"),
        ev("dtoh_copies_per_step", dtoh, "copies", "one step",
           text=f"{dtoh:g} device-to-host {'copy' if dtoh == 1 else 'copies'} per step (median)"),
        ev("idle_after_sync_pct", round(100.0 * after_all / window_ns, 2), "%", f"window on {device.id}",
           text=f"idle gaps that begin as a sync returns: {plural(device.after_sync_count, 'gap')}, {us(after_all)} in all = "
                f"{pct(100.0 * after_all / window_ns)} of the window; the host was then "
                f"{cause_split(device, 'idle:after_sync:', ctx.kind.get('vendor'))}"),
        ev("claimed_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"claimed: the GPU idle while the host waits in the sync and launches the next kernel, {pct(impact)} "
                "of the window (what the findings ranked before it left)"),
        ev("idle_after_sync_per_step", int(per_step_idle), "ns", "one step",
           text=f"about {us(per_step_idle)} of GPU idle per step caused by the sync (its wait and the launch after it)"),
        ev("steps", steps.count, "steps", "window", text=f"{steps.count:,} steps (source: {steps.source}), "
                                                         f"p50 {us(steps.p50_ns)}"),
    ]
    host_after = device.slices["idle:after_sync:host"]
    host_after_pct = 100.0 * host_after / window_ns
    evidence.append(ev("host_after_sync_pct", round(host_after_pct, 2), "%", f"window on {device.id}",
                       text=for_vendor(f"host code after the syncs return (no CUDA call while the GPU idles): "
                                       f"{pct(host_after_pct)} of the window, not claimed here: it is host-bound time, "
                                       "not the wait", ctx.kind.get("vendor"))))
    host_bound = after_all and host_after >= t("sync_host_after_share") * after_all
    return catalog.make("host_sync_per_step", impact,
                        {"syncs": f"{syncs:g}", "dtoh": dtoh_txt, "claimed": pct(impact),
                         "per_step_idle": us(per_step_idle), "host_after": pct(host_after_pct)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx),
                        variant="host_after" if host_bound else None, kind=ctx.kind)


def rule_pageable_memcpy(ctx: Context):
    """Async copies from or to pageable host memory: the driver stages them, so the call blocks the host
    (a hidden sync). Claims the copies' own copy-only time (up to their GPU time) and the idle time the
    host spends inside those calls (timeline: memcpy_sync). Copies whose GPU time and blocked host time
    are both negligible (pageable_min_time_pct: scalar uploads) are no finding."""
    copying, blocked, count, size, time_ns, hidden_ns = {}, {}, 0, 0, 0, 0
    cost_pct = 0.0
    for trace in ctx.judged():
        pageable = trace.copies["pageable_async"]
        count += pageable["count"]
        size += pageable["bytes"]
        time_ns += pageable["time_ns"]
        hidden_ns += pageable.get("hidden_ns", 0)
        for device in trace.devices:
            ns = pageable["by_device"].get(device.id, 0)
            if ns:
                copying[device.id] = (["copy"], ns)
            if device.idle_in_pageable_copies_ns:
                blocked[device.id] = (["idle:*:memcpy_sync"], device.idle_in_pageable_copies_ns)
            if device.window_ns:
                cost_pct = max(cost_pct, 100.0 * (ns + device.idle_in_pageable_copies_ns) / device.window_ns)
    if count < t("pageable_min_count") or cost_pct < t("pageable_min_time_pct"):
        return None
    copied = ctx.ledger.take("pageable_memcpy", copying)
    waited = ctx.ledger.take("pageable_memcpy", blocked)
    taken = {device_id: copied.get(device_id, 0) + waited.get(device_id, 0) for device_id in {*copied, *waited}}
    impact = ctx.ledger.impact_pct(taken)
    blocked_pct = ctx.ledger.impact_pct(waited)
    evidence = [
        ev("pageable_async_copies", count, "copies", "window"),
        ev("pageable_async_bytes", size, "B", None, text=f"{nbytes(size)} moved through pageable memory"),
        ev("pageable_claimed_pct", round(impact, 3), "%", window_denominator(ctx),
           text=f"copy or blocked time of those copies not hidden by kernels: {pct(impact)} of the window"),
        ev("pageable_blocked_pct", round(blocked_pct, 3), "%", window_denominator(ctx),
           text=f"of it, the GPU idle while the host is blocked inside those copy calls (a hidden sync): "
                f"{pct(blocked_pct)} of the window"),
    ]
    if time_ns:
        hidden = round(100.0 * hidden_ns / time_ns, 2)
        evidence.append(ev("pageable_hidden_pct", hidden, "%", "time of those copies",
                           text=f"a kernel of the same GPU runs during {pct(hidden)} of those copies' time"))
    return catalog.make("pageable_memcpy", impact,
                        {"count": f"{count:,}", "copies": "copy" if count == 1 else "copies", "bytes": nbytes(size)},
                        evidence, severity="medium" if impact >= 5 else "low" if impact >= 1 else "info",
                        denominator=window_denominator(ctx), kind=ctx.kind)


def rule_copy_bound(ctx: Context):
    wants = {}
    for trace in ctx.judged():
        for device in trace.devices:
            window_ns, slices = device.window_ns, device.slices
            if (not window_ns or 100.0 * slices["copy"] / window_ns < t("copy_bound_min_pct")
                    or slices["copy"] <= slices["compute"] + slices["collective"]):
                continue
            wants[device.id] = (["copy"], None)
    if not wants:
        return None
    taken = ctx.ledger.take("copy_bound", wants)
    impact = ctx.ledger.impact_pct(taken)
    device = best_device(taken, ctx)
    copies = device.copies
    window_ns = device.window_ns
    copy_pct = 100.0 * device.slices["copy"] / window_ns
    kernels_pct = 100.0 * (device.slices["compute"] + device.slices["collective"]) / window_ns
    dirs = sorted(copies.by_direction.items(), key=lambda x: -x[1]["time_ns"])
    direction, top = dirs[0]
    sized = not top.get("bytes_unrecorded")  # a rate needs the sizes: rocprofv3 blit memsets record none
    gbps = top["bytes"] / top["time_ns"] if top["time_ns"] and sized else None  # bytes per ns = GB/s
    dir_words = {"HtoD": "host to device", "DtoH": "device to host", "DtoD": "device to device", "PtoP": "peer to peer",
                 "HtoH": "host to host", "memset": "memsets"}
    pinned = copies.count - copies.pageable
    copies_words = plural(copies.count, "copy", "copies")
    evidence = [
        ev("copy_only_pct", round(copy_pct, 2), "%", f"window on {device.id}",
           text=f"only copies run during {pct(copy_pct)} of the window on {device.id}"),
        ev("compute_pct", round(kernels_pct, 2), "%", f"window on {device.id}",
           text=f"kernels run {pct(kernels_pct)} of the window on {device.id}"),
        ev("bytes", copies.bytes, "B", f"{copies_words} in the window",
           text=f"on {device.id}: {nbytes(copies.bytes)} in {copies_words}: " + ", ".join(
               f"{dir_words.get(name, name)} {copy_size(row)} in {us(row['time_ns'])}" for name, row in dirs)),
        ev("throughput", round(gbps, 2) if gbps is not None else None, "GB/s",
           f"time {dir_words.get(direction, direction)} copies run",
           text=(f"{gbps:.1f} GB/s" if gbps is not None else
                 f"rate not measured (the format records no size for {top['bytes_unrecorded']:,} of them)")
                + f" {dir_words.get(direction, direction)} on {device.id}, the direction that takes the most copy time"),
        ev("pinned", pinned, "copies", f"{copies.count} copies",
           text=f"{pinned:,} of {copies.count:,} copies use pinned host memory, {copies.pageable:,} pageable"),
        ev("overlap_with_kernels_pct", copies.overlap_pct, "%", "copy time",
           text=f"{pct(copies.overlap_pct)} of the copy time overlaps kernels"),
    ]
    return catalog.make("copy_bound", impact,
                        {"copy_share": pct(copy_pct),
                         "compute_share": pct(kernels_pct),
                         "gbps": f"{gbps:.1f} GB/s" if gbps is not None else "unknown GB/s",
                         "direction": dir_words.get(direction, direction), "bytes": copy_size(top)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx), kind=ctx.kind)


def copy_size(row: dict) -> str:
    """The bytes of a by_direction row in words: 'size not recorded' when the format records none of
    its sizes, the recorded bytes and how many are not recorded when some are missing."""
    missing = row.get("bytes_unrecorded") or 0
    if missing >= row["count"]:
        return "size not recorded"
    return nbytes(row["bytes"]) + (f" (+{missing:,} of unrecorded size)" if missing else "")


def rule_gpu_starved(ctx: Context):
    wants = {}
    for trace in ctx.judged():
        for device in trace.devices:
            window_ns = device.window_ns
            if not window_ns:
                continue
            idle = sum(ns for name, ns in device.slices.items() if name.startswith("idle:"))
            left = ctx.ledger.available(device.id, ["idle:*:*"])
            starved = (100.0 * idle / window_ns >= t("starved_idle_min_pct") - t("starved_band_pct")
                       and left >= t("starved_unexplained_min_share") * idle)
            # the host code after per-step syncs that host_sync_per_step found and left (it claims only the wait)
            handed_back = "host_sync_per_step" in ctx.ledger.claims[device.id]
            after_sync_host = ctx.ledger.available(device.id, ["idle:after_sync:host"]) if handed_back else 0
            if starved or 100.0 * after_sync_host / window_ns >= t("starved_after_sync_min_pct"):
                wants[device.id] = (["idle:*:*"], None)
                continue
            loader = _loader_range(device)  # data loading on the feeding thread: starved, however busy the rest
            if loader is not None and left >= t("starved_unexplained_min_share") * loader["idle_ns"]:
                wants[device.id] = (["idle:*:*"], None)
    if not wants:
        return None
    unclaimed = {device_id: ctx.ledger.unclaimed(device_id, ["idle:*:*"]) for device_id in wants}
    taken = ctx.ledger.take("gpu_starved", wants)
    impact = ctx.ledger.impact_pct(taken)
    device = best_device(taken, ctx)
    window_ns = device.window_ns
    by_cause: dict[str, int] = {}
    for name, ns in unclaimed[device.id].items():
        cause = name.rsplit(":", 1)[1]
        by_cause[cause] = by_cause.get(cause, 0) + ns
    cause, cause_ns = max(by_cause.items(), key=lambda x: x[1])
    cause_text = for_vendor(CAUSE_WORDS[cause], ctx.kind.get("vendor"))
    calls = sorted(device.idle_in_calls.items(), key=lambda item: -item[1])
    if cause == "other_cuda" and calls:
        # name what "other CUDA calls" were: cudaMalloc / cudaFree (the allocator), a module load...
        cause_text += f" ({calls[0][0]}: {pct(100.0 * calls[0][1] / window_ns)} of the window)"
    idle_pct = 100.0 - device.busy_pct
    capture = _starved_capture(ctx, device, cause)
    evidence = [
        ev("idle_pct", round(idle_pct, 2), "%", f"window on {device.id}",
           text=f"GPU idle {pct(idle_pct)} of the {us(window_ns)} window on {device.id}"),
        ev("unexplained_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"idle time no other finding claims: {pct(impact)} of the window"),
        ev("dominant_cause", cause, "", None,
           text=f"most of it ({pct(100.0 * cause_ns / window_ns)} of the window) the host was {cause_text}"),
        ev("by_cause", {name: round(100.0 * ns / window_ns, 2) for name, ns in by_cause.items()}, "%",
           f"window on {device.id}",
           text="unexplained idle by cause: " + ", ".join(
               f"{cause_name(name, ctx.kind.get('vendor'))} {pct(100.0 * ns / window_ns)}"
               for name, ns in sorted(by_cause.items(), key=lambda x: -x[1]) if ns)),
    ]
    if calls and (cause == "other_cuda" or by_cause.get("other_cuda", 0) >= t("starved_calls_named_share") * window_ns):
        evidence.append(ev("idle_in_calls", {name: round(100.0 * ns / window_ns, 2) for name, ns in calls}, "%",
                           f"window on {device.id}",
                           text="the GPU idles inside these CUDA/HIP calls: " + ", ".join(
                               f"{name} {pct(100.0 * ns / window_ns)}" for name, ns in calls)))
    after_sync_host = unclaimed[device.id].get("idle:after_sync:host", 0)
    if 100.0 * after_sync_host / window_ns >= t("sync_impact_min_pct"):
        evidence.append(ev("after_sync_host_pct", round(100.0 * after_sync_host / window_ns, 2), "%",
                           f"window on {device.id}",
                           text=f"of it, {pct(100.0 * after_sync_host / window_ns)} of the window is host code right after "
                                "a blocking sync returns (the code that consumes the read-back), before the next launch"))
    gaps = device.gaps
    if gaps.count:
        evidence.append(ev("gaps", gaps.count, "gaps", "window",
                           text=f"{plural(gaps.count, 'idle gap')}, p50 {us(gaps.p50_ns)}, max {us(gaps.max_ns)}"))
    half = abs(idle_pct - t("starved_idle_min_pct")) < t("starved_band_pct")
    blocked_ns = by_cause.get("sync", 0) + by_cause.get("memcpy_sync", 0)
    blocked = cause in ("sync", "memcpy_sync")
    in_allocator = cause == "other_cuda" and bool(calls) and api_category(calls[0][0]) == "alloc"
    after_sync = cause == "host" and after_sync_host >= t("sync_host_after_share") * cause_ns
    fields = {"starved": (f"GPU idle about half the window ({pct(idle_pct)})" if half
                          else f"GPU starved: idle {pct(idle_pct)} of the window"),
              "share_words": "about half the window" if half else "most of the window",
              "idle": pct(idle_pct), "cause_text": f"mostly {cause_text}", "claimed": pct(impact),
              "blocked": pct(100.0 * blocked_ns / window_ns),
              "top_call": f"{calls[0][0]}: {pct(100.0 * calls[0][1] / window_ns)} of the window" if calls else "",
              "cause_where": f"while the host was {cause_text}", "capture": capture,
              "loading": f"GPU idle about half the window ({pct(idle_pct)}), by data loading" if half
              else "GPU starved by data loading",
              "idle_tail": "" if half else f"; GPU idle {pct(idle_pct)} of the window"}
    variant = ("blocked" if blocked else "after_sync" if after_sync else "alloc" if in_allocator else
               "part" if idle_pct < t("starved_idle_min_pct") else None)
    by_host = device.idle_by_host
    if by_host is not None and by_host.ranges:
        evidence.append(ev("idle_by_host_range", {row["name"]: row["pct_of_window"] for row in by_host.ranges[:3]}, "%",
                           f"window on {device.id}", text="GPU idle inside host ranges: " + ", ".join(
                               f"{row['name']} {pct(row['pct_of_window'])}" for row in by_host.ranges[:3])))
        covering = _covering_range(by_host) if cause in ("host", "unknown") else None
        if covering is not None:  # one host range holds most of the host code: named, more telling than the cause
            # what it claims is the host code inside it: idle inside it while the host sits in a runtime call is the call's
            inside = covering["host_code_ns"] if by_host.api_calls_recorded else covering["idle_ns"]
            share = _per_step_share(ctx, device, inside)
            evidence.append(ev("host_range", covering["name"], "", None,
                               text=f"{share} the GPU idles while the host runs code inside {covering['name']} "
                                    f"({covering['source']}), over {plural(covering['gaps'], 'gap')}"))
            fields.update({"range": covering["name"], "source": covering["source"], "share_text": share,
                           "range_pct": pct(100.0 * inside / device.window_ns)})
            variant = "data_loading" if is_data_loader(covering["name"]) else "host_range"
    if half:  # one rule for every title in the band: none calls the capture starved, and this row says why
        evidence.append(ev("about_half", round(idle_pct, 2), "%", f"window on {device.id}",
                           text=f"idle {pct(idle_pct)} is within {t('starved_band_pct'):g} points of the "
                                f"{t('starved_idle_min_pct'):g}% line: about half, not called starved (a re-capture of "
                                "the same program may fall on either side)"))
    return catalog.make("gpu_starved", impact, fields, evidence, severity=severity_for(impact),
                        denominator=window_denominator(ctx), variant=variant, kind=ctx.kind)


def _covering_range(by_host: IdleByHost) -> dict | None:
    """The top host range of a device when it covers most (starved_range_min_share) of the idle host-code
    time (of all idle time when the capture has no runtime calls to tell host code from calls), else None."""
    top = by_host.ranges[0]
    if by_host.api_calls_recorded and by_host.host_code_idle_ns:
        covered, base = top["host_code_ns"], by_host.host_code_idle_ns
    else:
        covered, base = top["idle_ns"], by_host.idle_ns
    return top if base and covered >= t("starved_range_min_share") * base else None


def _loader_range(device: DeviceMetrics) -> dict | None:
    """The device's covering host range (:func:`_covering_range`) when it is a data loader's and keeps the GPU
    idle starved_loader_min_pct of the window or more, else None."""
    by_host = device.idle_by_host
    if by_host is None or not by_host.ranges:
        return None
    top = _covering_range(by_host)
    if top is None or not is_data_loader(top["name"]) or top["pct_of_window"] < t("starved_loader_min_pct"):
        return None
    return top


def _rounded(ns: float) -> str:
    """A per-step time in round words: ``120 ms`` from 1 ms on, else :func:`us`."""
    return f"{round(ns / 1e6):,} ms" if ns >= 1_000_000 else us(ns)


def _per_step_share(ctx: Context, device: DeviceMetrics, idle_ns: int) -> str:
    """``~120 ms of each 240 ms step`` (the mean over the window's steps) when the device's process has steps,
    else ``45.0% of the window``."""
    process = next((process for trace in ctx.judged() if device in trace.devices
                    for process in trace.processes if process.pid == device.pid), None)
    count = process.steps.count if process is not None else 0
    if count:
        return f"~{_rounded(idle_ns / count)} of each {_rounded(device.window_ns / count)} step"
    return f"{pct(100.0 * idle_ns / device.window_ns)} of the window"


def _longest_tail(ctx: Context) -> tuple[float, ProcessMetrics, float] | None:
    """(max / p50, the process, p99 / p50) of the judged process whose longest step is furthest above its
    median, among those with enough steps and a tail over prefill_p99_ratio or prefill_max_ratio; or None."""
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
                best = (ratio_max, process, ratio_p99)
    return best


def _starved_capture(ctx: Context, device: DeviceMetrics, cause: str) -> str:
    """The capture that names what the host did in the device's idle time, for its dominant ``cause``."""
    fmt = next((hint_format(trace) for trace in ctx.per_trace if device in trace.devices), None)
    if cause == "host":
        return host_profiler_hint(process_name(ctx, device.pid), device.pid, ctx.kind)
    if cause == "unknown":
        return capture_cmd(fmt, "api")
    rocm = is_rocm_format(fmt) or ctx.kind.get("vendor") == "rocm"  # a ROCm PyTorch profiler trace too
    variant = f"{cause}_rocm" if rocm and cause in ("sync", "memcpy_sync", "other_cuda") else cause
    if cause == "other_cuda" and fmt == "kineto":  # the trace holds the runtime calls: no other profiler names them
        variant = "other_cuda_kineto"
    return capture_text("gpu_starved", variant).format(api=capture_cmd(fmt, "api"))


def rule_prefill_stall(ctx: Context):
    best = _longest_tail(ctx)
    if best is None:
        return None
    ratio_max, process, ratio_p99 = best
    long_steps = process.long_steps
    if not long_steps.count:
        return None
    if not (long_steps.prefill_labelled or long_steps.busy_pct >= t("prefill_long_busy_min_pct")):
        return None
    steps = process.steps
    severity = "high" if ratio_max >= t("tail_high_ratio") and steps.max_ns >= t("tail_high_freeze_ns") else "medium"
    budget = ctx.slo.get("itl_p99_ms")
    label = ("labelled prefill by NVTX" if long_steps.prefill_labelled
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
    chunked = (ctx.data.get("serving") or {}).get("config", {}).get("enable_chunked_prefill")
    if chunked is not None:
        evidence.append(ev("chunked_prefill", chunked, "", None, text="engine config: chunked prefill " + (
            "enabled: lower the chunk (max_num_batched_tokens) to bound a step" if chunked else "disabled")))
    return catalog.make(
        "prefill_stall", long_steps.excess_pct,
        {"max": us(steps.max_ns), "p50": us(steps.p50_ns), "p99": us(steps.p99_ns), "ratio_max": f"{ratio_max:.0f}x",
         "long": long_steps.count, "step_word": "step" if long_steps.count == 1 else "steps", "label": label},
        evidence, severity=severity, denominator="total step time", kind=ctx.kind)


RULES = [
    Rule("launch_bound", "throughput", rule_launch_bound, reads=("processes", "devices", "hot_frames", "serving.config"),
         thresholds=tuple(name for name in THRESHOLDS if name.startswith("launch_"))),
    Rule("python_host_overhead", "throughput", rule_python_host_overhead, reads=("host_profile", "devices"),
         thresholds=tuple(name for name in THRESHOLDS if name.startswith("python_"))),
    Rule("host_sync_per_step", "throughput", rule_host_sync_per_step, reads=("processes", "devices"),
         thresholds=tuple(name for name in THRESHOLDS if name.startswith("sync_"))),
    Rule("pageable_memcpy", "throughput", rule_pageable_memcpy, reads=("copies", "devices"),
         thresholds=("pageable_min_count", "pageable_min_time_pct")),
    Rule("copy_bound", "throughput", rule_copy_bound, reads=("devices",), thresholds=("copy_bound_min_pct",)),
]
STARVED = Rule("gpu_starved", "throughput", rule_gpu_starved, reads=("devices", "processes"),
               thresholds=(*(name for name in THRESHOLDS if name.startswith("starved_")), "sync_host_after_share",
                           "sync_impact_min_pct"))
PREFILL_STALL = Rule("prefill_stall", "trace", rule_prefill_stall, reads=("processes", "slo", "serving.config"),
                     thresholds=tuple(name for name in THRESHOLDS if name.startswith(("prefill_", "tail_"))))
