"""The trace rules: each reads the per-trace and per-device metrics (never a file) and returns a
finding or None. The throughput rules claim disjoint slices of each device's window through the
:class:`~tracetriage.analyzers.accounting.Ledger`, in registry order (a root cause before the
symptom it explains, gpu_starved last: it takes what nobody explained), so their ``impact_pct``
values add up to at most 100%; prefill_stall is on the tail axis, its severity from the tail itself."""

from __future__ import annotations

import re

from tracetriage.analyzers import catalog
from tracetriage.analyzers.catalog import capture_text
from tracetriage.analyzers.evidence import ev, nbytes, pct, plural, severity_for, us
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
    "prefill_min_steps": (20, "a tail needs at least 20 steps to be more than noise"),
    "prefill_p99_ratio": (3.0, "p99 step at 3x the median is a stall users see as a frozen stream"),
    "prefill_max_ratio": (5.0, "a single step 5x the median is a visible freeze"),
    "prefill_long_busy_min_pct": (80.0, ("a long step in which the GPU is busy is GPU work (prefill); an idle one is a "
                                         "host stall")),
    "tail_high_ratio": (10.0, "a step 10x the median is an order-of-magnitude freeze every streaming user notices"),
    "tail_high_freeze_ns": (200_000_000, ("a freeze of 200 ms or more is visible as a stalled stream, "
                                          "whatever its share of the time")),
    "pageable_min_count": (1, "any pageable async copy in steady state serializes with the host"),
    "copy_bound_min_pct": (30.0, "copies alone filling 30% of the window (and more than kernels) set the step time"),
    "starved_idle_min_pct": (50.0, "a GPU idle for most of the window is starved, whatever the cause"),
    "starved_unexplained_min_share": (0.5, "the other findings explain less than half of the idle time"),
    "python_frame_min_pct": (15.0, ("one user frame holding 15% of the host's non-idle samples is a hot spot worth moving off "
                                    "the step's critical path")),
    "python_min_samples": (100, ("a share needs a sampling profile (py-spy record); one dump is a snapshot "
                                 "per thread, not a profile")),
    "python_host_idle_min_pct": (5.0, "the GPU must idle at least 5% of the window in host code for Python to matter"),
    "python_impact_min_pct": (1.0, "a frame whose converted share of the window is under 1% is not worth a finding"),
}


def rule_launch_bound(ctx: Context):
    wants, info = {}, {}
    for p in ctx.judged():
        if p["graph_replays_in_window"] > 0:
            continue
        kmed = p["kernel_median_ns"]
        if kmed is None or kmed > t("launch_kernel_median_max_ns"):
            continue
        lps = median([pr["launches_per_step"] for pr in p["processes"]])
        n_kernels = p["kernels_in_window"]
        if lps is not None:
            if lps < t("launch_per_step_min"):
                continue
        elif n_kernels < t("launch_kernels_min_no_steps"):
            continue
        if median([pr["graph_launches_per_step"] for pr in p["processes"]]):
            continue
        for d in p["devices"]:
            if d["busy_pct"] > t("launch_busy_max_pct") or d["window_ns"] <= 0:
                continue
            idle = d["gaps"]["total_ns"]
            lh = d["gaps"]["by_cause"]["launch"] + d["gaps"]["by_cause"]["host"]
            if idle <= 0 or lh / idle < t("launch_host_idle_share_min"):
                continue
            wants[d["id"]] = (["idle:short:launch", "idle:short:host"], None)
            info[d["id"]] = (p, lps, kmed, n_kernels)
    if not wants:
        return None
    avail = {k: ctx.ledger.available(k, *v) for k, v in wants.items()}
    if ctx.ledger.impact_pct(avail) < t("launch_impact_min_pct"):
        return None
    taken = ctx.ledger.take("launch_bound", wants)
    impact = ctx.ledger.impact_pct(taken)
    d = best_device(taken, ctx)
    p, lps, kmed, n_kernels = info[d["id"]]
    per_step = f"{lps:,.0f} kernel launches per step" if lps is not None else f"{n_kernels:,} kernels in the window"
    by = d["gaps"]["by_cause"]
    w = d["window_ns"]
    eager = (ctx.data.get("serving") or {}).get("config", {}).get("enforce_eager")
    evidence = [
        ev("launches_per_step", lps, "calls", "one step", text=f"{lps:,.0f} kernel launches per step (median over steps)")
        if lps is not None else ev("kernels_in_window", n_kernels, "kernels", "window"),
        ev("kernel_median", kmed, "ns", "kernels in the window", text=f"median kernel duration {us(kmed)}"),
        ev("busy_pct", d["busy_pct"], "%", f"window of {us(w)} on {d['id']}",
           text=f"GPU busy {pct(d['busy_pct'])} of the {us(w)} window on {d['id']}"),
        ev("idle_launch_pct", round(100 * by["launch"] / w, 2), "%", "window",
           text=f"idle while the host is inside launch calls: {pct(100 * by['launch'] / w)} of the window"),
        ev("idle_host_pct", round(100 * by["host"] / w, 2), "%", "window",
           text=f"idle while the host runs code outside CUDA: {pct(100 * by['host'] / w)} of the window"),
        ev("short_gaps", d["_short_gap_count"], "gaps", "window",
           text=f"{plural(d['_short_gap_count'], 'gap')} under 1 ms between kernels, p50 {us(d['gaps']['p50_ns'])}"),
        ev("graph_replays", p["graph_replays_in_window"], "replays", "window", text="no CUDA graph replays in the steady state"),
    ]
    launch_frame = _hot_frame(ctx, r"(?i)(cu|hip)(da)?LaunchKernel|LaunchKernel")
    if launch_frame:
        evidence.append(ev("launch_frame_self_pct", launch_frame["self_pct"], "%", "non-idle host samples",
                           text=f"the host profile spends {pct(launch_frame['self_pct'])} of its samples "
                                f"inside {launch_frame['frame']}"))
    if eager is True:
        evidence.append(ev("enforce_eager", True, "", None, text="the engine config has enforce_eager=True: CUDA graphs are off"))
    return catalog.make(
        "launch_bound", impact,
        {"per_step": per_step, "per_step_short": f"{lps:,.0f}" if lps is not None else "many",
         "kernel_median": us(kmed), "busy": pct(d["busy_pct"]), "claimed": pct(impact)},
        evidence, severity=severity_for(impact), denominator=window_denominator(ctx),
        variant="eager" if eager is True else None, kind=ctx.kind)


def _hot_frame(ctx: Context, pattern: str) -> dict | None:
    rx = re.compile(pattern)
    return next((f for f in ctx.data.get("hot_frames") or [] if rx.search(f["frame"])), None)


def rule_python_host_overhead(ctx: Context):
    """py-spy share -> window share: the frame holds ``share`` of the host's non-idle
    samples; samples are taken uniformly in time, so it runs during about ``share`` of the
    host-code idle time H (GPU idle, host in no CUDA call). It claims share x H of each
    device's host-code idle, from the slices no earlier finding took."""
    prof = ctx.data.get("host_profile")
    if not prof or not prof["user_frames"]:
        return None
    top = prof["user_frames"][0]
    if top["share_pct"] < t("python_frame_min_pct") or prof["total_samples"] < t("python_min_samples"):
        return None
    sync_txt = f"; {top['sync_pct']:.1f}% of samples are inside a host sync it calls" if top["calls_sync"] else ""
    fields = {"frame": top["frame"], "share": pct(top["share_pct"]), "sync": sync_txt,
              "func": top["frame"].split(" (")[0],
              "sync_clause": ", and it waits for the GPU inside it (a .cpu()/.item() read-back)" if top["sync_pct"] >= 1.0
              else ", and it calls a host-syncing operation" if top["calls_sync"] else ""}
    evidence = [
        ev("frame", top["frame"], "", None, text=f"hot user frame: {top['frame']}"),
        ev("share_pct", top["share_pct"], "%", f"{prof['total_samples']:,} non-idle py-spy samples",
           text=f"{pct(top['share_pct'])} of {prof['total_samples']:,} non-idle py-spy samples are inside it "
                f"({pct(top['self_pct'])} in its own code)"),
        ev("calls_sync", top["calls_sync"], "", None,
           text="it calls a host-syncing operation" if top["calls_sync"] else "no host sync below it"),
    ]
    devs = [d for d in ctx.devices if d["window_ns"]]
    if not devs:
        evidence.append(ev("host_idle", None, "", None, text="no GPU trace in the case: the share is of the host's samples only"))
        return catalog.make("python_host_overhead", top["share_pct"],
                            {**fields, "host_idle": "not measured", "claimed": "not measured"},
                            evidence, severity=severity_for(top["share_pct"]),
                            denominator="host samples (no GPU trace to weigh it against)", kind=ctx.kind)
    wants, host_idle = {}, {}
    for d in devs:
        h = sum(v for k, v in d["_slices"].items() if k.endswith(":host"))
        host_idle[d["id"]] = 100.0 * h / d["window_ns"]
        if host_idle[d["id"]] >= t("python_host_idle_min_pct"):
            wants[d["id"]] = (["idle:after_sync:host", "idle:long:host", "idle:short:host"], top["share_pct"] / 100.0 * h)
    if not wants:
        return None
    taken = ctx.ledger.take("python_host_overhead", wants)
    impact = ctx.ledger.impact_pct(taken)
    if impact < t("python_impact_min_pct"):
        return None
    d = best_device(taken, ctx)
    evidence.append(ev("host_idle_pct", round(host_idle[d["id"]], 2), "%", f"window on {d['id']}",
                       text=f"the GPU ({d['id']}) idles {pct(host_idle[d['id']])} of the window while "
                            "the host is in no CUDA call"))
    evidence.append(ev("claimed_pct", round(impact, 2), "%", window_denominator(ctx),
                       text=f"{pct(top['share_pct'])} of that host-code idle time = {pct(impact)} of the window"))
    return catalog.make("python_host_overhead", impact,
                        {**fields, "host_idle": pct(host_idle[d["id"]]), "claimed": pct(impact)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx), kind=ctx.kind)


def rule_host_sync_per_step(ctx: Context):
    wants, procs = {}, {}
    for p in ctx.judged():
        for d in p["devices"]:
            pr = next((x for x in p["processes"] if x["pid"] == d["pid"]), None)
            if pr is None or pr["syncs_per_step"] is None or pr["syncs_per_step"] < t("sync_per_step_min") or not d["window_ns"]:
                continue
            wants[d["id"]] = (["idle:after_sync:*"], None)
            procs[d["id"]] = pr
    if not wants:
        return None
    avail = {k: ctx.ledger.available(k, *v) for k, v in wants.items()}
    if ctx.ledger.impact_pct(avail) < t("sync_impact_min_pct"):
        return None
    before = {k: dict(d["_slices"]) for k, d in ((d["id"], d) for d in ctx.devices) if k in wants}
    taken = ctx.ledger.take("host_sync_per_step", wants)
    impact = ctx.ledger.impact_pct(taken)
    d = best_device(taken, ctx)
    pr = procs[d["id"]]
    dtoh = pr.get("dtoh_copies_per_step") or 0
    dtoh_txt = (f", with {plural(round(dtoh), 'device-to-host copy', 'device-to-host copies')} per step "
                f"({nbytes(pr.get('dtoh_bytes_per_step') or 0)})") if dtoh else ""
    steps = pr["steps"]
    per_step_idle = taken[d["id"]] / max(1, steps["count"])
    after_all = sum(v for k, v in before[d["id"]].items() if k.startswith("idle:after_sync:"))
    evidence = [
        ev("syncs_per_step", pr["syncs_per_step"], "calls", "one step",
           text=f"{pr['syncs_per_step']:g} blocking {'sync' if pr['syncs_per_step'] == 1 else 'syncs'} per step (median)"),
        ev("dtoh_copies_per_step", dtoh, "copies", "one step",
           text=f"{dtoh:g} device-to-host {'copy' if dtoh == 1 else 'copies'} per step (median)"),
        ev("idle_after_sync_pct", round(100.0 * after_all / d["window_ns"], 2), "%", f"window on {d['id']}",
           text=f"idle gaps that begin as a sync returns: {plural(d['_after_sync_count'], 'gap')}, {us(after_all)} in all = "
                f"{pct(100.0 * after_all / d['window_ns'])} of the window; the host was then "
                f"{cause_split(d, 'idle:after_sync:')}"),
        ev("claimed_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"left to this finding after the findings ranked before it: {pct(impact)} of the window"),
        ev("idle_after_sync_per_step", int(per_step_idle), "ns", "one step", text=f"about {us(per_step_idle)} of GPU "
                                                                                  "idle per step after the sync"),
        ev("steps", steps["count"], "steps", "window", text=f"{steps['count']:,} steps (source: {steps['source']}), "
                                                            f"p50 {us(steps['p50_ns'])}"),
    ]
    return catalog.make("host_sync_per_step", impact,
                        {"syncs": f"{pr['syncs_per_step']:g}", "dtoh": dtoh_txt, "claimed": pct(impact),
                         "per_step_idle": us(per_step_idle)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx), kind=ctx.kind)


def rule_pageable_memcpy(ctx: Context):
    wants, count, size, time_ns, hidden_ns = {}, 0, 0, 0, 0
    for p in ctx.judged():
        c = p["copies"]["pageable_async"]
        count += c["count"]
        size += c["bytes"]
        time_ns += c["time_ns"]
        hidden_ns += c.get("hidden_ns", 0)
        for d in p["devices"]:
            ns = c["by_device"].get(d["id"], 0)
            if ns:
                wants[d["id"]] = (["copy", "idle:*:other_cuda", "idle:*:memcpy_sync"], ns)
    if count < t("pageable_min_count"):
        return None
    taken = ctx.ledger.take("pageable_memcpy", wants)
    impact = ctx.ledger.impact_pct(taken)
    evidence = [
        ev("pageable_async_copies", count, "copies", "window"),
        ev("pageable_async_bytes", size, "B", None, text=f"{nbytes(size)} moved through pageable memory"),
        ev("pageable_claimed_pct", round(impact, 3), "%", window_denominator(ctx),
           text=f"copy or blocked time of those copies not hidden by kernels: {pct(impact)} of the window"),
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
    for p in ctx.judged():
        for d in p["devices"]:
            w = d["window_ns"]
            s = d["_slices"]
            if not w or 100.0 * s["copy"] / w < t("copy_bound_min_pct") or s["copy"] <= s["compute"] + s["collective"]:
                continue
            wants[d["id"]] = (["copy"], None)
    if not wants:
        return None
    taken = ctx.ledger.take("copy_bound", wants)
    impact = ctx.ledger.impact_pct(taken)
    d = best_device(taken, ctx)
    c = d["copies"]
    w = d["window_ns"]
    dirs = sorted(c["by_direction"].items(), key=lambda x: -x[1]["time_ns"])
    direction, top = dirs[0]
    gbps = top["bytes"] / top["time_ns"] if top["time_ns"] else 0.0  # bytes per ns = GB/s
    dir_words = {"HtoD": "host to device", "DtoH": "device to host", "DtoD": "device to device", "PtoP": "peer to peer",
                 "HtoH": "host to host", "memset": "memsets"}
    pinned = c["count"] - c["pageable"]
    evidence = [
        ev("copy_only_pct", round(100.0 * d["_slices"]["copy"] / w, 2), "%", f"window on {d['id']}",
           text=f"only copies run during {pct(100.0 * d['_slices']['copy'] / w)} of the window on {d['id']}"),
        ev("compute_pct", round(100.0 * (d["_slices"]["compute"] + d["_slices"]["collective"]) / w, 2), "%",
           f"window on {d['id']}",
           text=f"kernels run {pct(100.0 * (d['_slices']['compute'] + d['_slices']['collective']) / w)} of the window"),
        ev("bytes", c["bytes"], "B", f"{plural(c['count'], 'copy', 'copies')} in the window",
           text=f"{nbytes(c['bytes'])} in {plural(c['count'], 'copy', 'copies')}: " + ", ".join(
               f"{dir_words.get(k, k)} {nbytes(v['bytes'])} in {us(v['time_ns'])}" for k, v in dirs)),
        ev("throughput", round(gbps, 2), "GB/s", f"time {dir_words.get(direction, direction)} copies run",
           text=f"{gbps:.1f} GB/s {dir_words.get(direction, direction)}, the direction that takes the most copy time"),
        ev("pinned", pinned, "copies", f"{c['count']} copies",
           text=f"{pinned:,} of {c['count']:,} copies use pinned host memory, {c['pageable']:,} pageable"),
        ev("overlap_with_kernels_pct", c["overlap_pct"], "%", "copy time", text=f"{pct(c['overlap_pct'])} of the "
                                                                                "copy time overlaps kernels"),
    ]
    return catalog.make("copy_bound", impact,
                        {"copy_share": pct(100.0 * d["_slices"]["copy"] / w),
                         "compute_share": pct(100.0 * (d["_slices"]["compute"] + d["_slices"]["collective"]) / w),
                         "gbps": f"{gbps:.1f} GB/s", "direction": dir_words.get(direction, direction),
                         "bytes": nbytes(top["bytes"])},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx), kind=ctx.kind)


def rule_gpu_starved(ctx: Context):
    wants = {}
    for p in ctx.judged():
        for d in p["devices"]:
            w = d["window_ns"]
            if not w:
                continue
            idle = sum(v for k, v in d["_slices"].items() if k.startswith("idle:"))
            left = ctx.ledger.available(d["id"], ["idle:*:*"])
            if 100.0 * idle / w >= t("starved_idle_min_pct") and left >= t("starved_unexplained_min_share") * idle:
                wants[d["id"]] = (["idle:*:*"], None)
    if not wants:
        return None
    unclaimed = {k: ctx.ledger.unclaimed(k, ["idle:*:*"]) for k in wants}
    taken = ctx.ledger.take("gpu_starved", wants)
    impact = ctx.ledger.impact_pct(taken)
    d = best_device(taken, ctx)
    w = d["window_ns"]
    by_cause: dict[str, int] = {}
    for k, v in unclaimed[d["id"]].items():
        cause = k.rsplit(":", 1)[1]
        by_cause[cause] = by_cause.get(cause, 0) + v
    cause, cause_ns = max(by_cause.items(), key=lambda x: x[1])
    idle_pct = 100.0 - d["busy_pct"]
    pname = process_name(ctx, d["pid"])
    fmt = next((hint_format(p) for p in ctx.per_trace if d in p["devices"]), None)
    if cause == "host":
        capture = host_profiler_hint(pname, d["pid"], ctx.kind)
    elif cause == "unknown":
        capture = capture_cmd(fmt, "api")
    else:
        variant = f"{cause}_rocm" if is_rocm_format(fmt) and cause in ("sync", "memcpy_sync") else cause
        capture = capture_text("gpu_starved", variant).format(api=capture_cmd(fmt, "api"))
    evidence = [
        ev("idle_pct", round(idle_pct, 2), "%", f"window on {d['id']}", text=f"GPU idle {pct(idle_pct)} of the "
                                                                             f"{us(w)} window on {d['id']}"),
        ev("unexplained_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"idle time no other finding claims: {pct(impact)} of the window"),
        ev("dominant_cause", cause, "", None,
           text=f"most of it ({pct(100.0 * cause_ns / w)} of the window) the host was {CAUSE_WORDS[cause]}"),
        ev("by_cause", {c: round(100.0 * v / w, 2) for c, v in by_cause.items()}, "%", f"window on {d['id']}",
           text="unexplained idle by cause: " + ", ".join(f"{c} {pct(100.0 * v / w)}"
                                                          for c, v in sorted(by_cause.items(), key=lambda x: -x[1]) if v)),
    ]
    if d["gaps"]["count"]:
        evidence.append(ev("gaps", d["gaps"]["count"], "gaps", "window",
                           text=f"{plural(d['gaps']['count'], 'idle gap')}, p50 {us(d['gaps']['p50_ns'])}, max "
                                f"{us(d['gaps']['max_ns'])}"))
    return catalog.make("gpu_starved", impact,
                        {"idle": pct(idle_pct), "cause_text": f"mostly {CAUSE_WORDS[cause]}", "claimed": pct(impact),
                         "cause_where": f"while the host was {CAUSE_WORDS[cause]}", "capture": capture},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx),
                        variant="blocked" if cause in ("sync", "memcpy_sync") else None, kind=ctx.kind)


def rule_prefill_stall(ctx: Context):
    best = None
    for p in ctx.judged():
        for pr in p["processes"]:
            s = pr["steps"]
            if s["count"] < t("prefill_min_steps") or not s["p50_ns"]:
                continue
            r99, rmax = s["p99_ns"] / s["p50_ns"], s["max_ns"] / s["p50_ns"]
            if r99 < t("prefill_p99_ratio") and rmax < t("prefill_max_ratio"):
                continue
            if best is None or rmax > best[0]:
                best = (rmax, pr, r99)
    if best is None:
        return None
    rmax, pr, r99 = best
    info = pr.get("_long_steps") or {}
    if not info.get("count"):
        return None
    if not (info.get("prefill_labelled") or info.get("busy_pct", 0) >= t("prefill_long_busy_min_pct")):
        return None
    s = pr["steps"]
    severity = "high" if rmax >= t("tail_high_ratio") and s["max_ns"] >= t("tail_high_freeze_ns") else "medium"
    budget = ctx.slo.get("itl_p99_ms")
    label = ("labelled prefill by NVTX" if info.get("prefill_labelled")
             else f"GPU busy {info['busy_pct']:.0f}% during them (GPU work, not a host stall)")
    evidence = [
        ev("step_p50", s["p50_ns"], "ns", f"{s['count']} steps", text=f"step p50 {us(s['p50_ns'])} over {s['count']:,} steps"),
        ev("step_max", s["max_ns"], "ns", f"{s['count']} steps", text=f"longest step {us(s['max_ns'])}: a "
                                                                      f"{us(s['max_ns'] - s['p50_ns'])} freeze"),
        ev("step_p99_over_p50", round(r99, 2), "x", "step p50"),
        ev("step_max_over_p50", round(rmax, 2), "x", "step p50"),
        ev("long_steps", info["count"], "steps", f"{s['count']} steps", text=f"{info['count']} of {s['count']} "
                                                                             "steps longer than 3x p50"),
        ev("long_step_excess_pct", round(info["excess_pct"], 2), "%", "total step time",
           text=f"time above p50 in those steps: {pct(info['excess_pct'])} of all step time"),
    ]
    if budget is not None:
        over = s["p99_ns"] / 1e6 > budget
        evidence.append(ev("itl_p99_budget_ms", budget, "ms", None,
                           text=f"step p99 {us(s['p99_ns'])} is {'over' if over else 'within'} the inter-token "
                                f"p99 budget of {budget:g} ms"))
        if over and severity != "high":
            severity = "high"
    chunked = (ctx.data.get("serving") or {}).get("config", {}).get("enable_chunked_prefill")
    if chunked is not None:
        evidence.append(ev("chunked_prefill", chunked, "", None, text="engine config: chunked prefill " + (
            "enabled: lower the chunk (max_num_batched_tokens) to bound a step" if chunked else "disabled")))
    return catalog.make(
        "prefill_stall", info["excess_pct"],
        {"max": us(s["max_ns"]), "p50": us(s["p50_ns"]), "p99": us(s["p99_ns"]), "ratio_max": f"{rmax:.0f}x",
         "long": info["count"], "step_word": "step" if info["count"] == 1 else "steps", "label": label},
        evidence, severity=severity, denominator="total step time", kind=ctx.kind)


RULES = [
    Rule("launch_bound", "throughput", rule_launch_bound, reads=("processes", "devices", "hot_frames", "serving.config"),
         thresholds=tuple(n for n in THRESHOLDS if n.startswith("launch_"))),
    Rule("python_host_overhead", "throughput", rule_python_host_overhead, reads=("host_profile", "devices"),
         thresholds=tuple(n for n in THRESHOLDS if n.startswith("python_"))),
    Rule("host_sync_per_step", "throughput", rule_host_sync_per_step, reads=("processes", "devices"),
         thresholds=("sync_per_step_min", "sync_impact_min_pct")),
    Rule("pageable_memcpy", "throughput", rule_pageable_memcpy, reads=("copies", "devices"), thresholds=("pageable_min_count",)),
    Rule("copy_bound", "throughput", rule_copy_bound, reads=("devices",), thresholds=("copy_bound_min_pct",)),
]
STARVED = Rule("gpu_starved", "throughput", rule_gpu_starved, reads=("devices", "processes"),
               thresholds=("starved_idle_min_pct", "starved_unexplained_min_share"))
PREFILL_STALL = Rule("prefill_stall", "trace", rule_prefill_stall, reads=("processes", "slo", "serving.config"),
                     thresholds=tuple(n for n in THRESHOLDS if n.startswith(("prefill_", "tail_"))))
