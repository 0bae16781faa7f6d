"""The verdict: rules turning metrics into findings and abstentions, symptom first.

Every rule reads the assembled metrics (never a file) and returns a finding or None;
its thresholds live in :data:`THRESHOLDS` with the reason for each, and its words in
the findings catalog (``findings.toml``, see catalog.py).

Axes (DESIGN.md): each finding belongs to one axis — the symptom the user suffers.
Throughput findings claim disjoint slices of each device's window through the
:class:`~tracetriage.analyzers.accounting.Ledger`, in :data:`THROUGHPUT_ORDER` (a root
cause before the symptom it explains), so their ``impact_pct`` values add up to at
most 100%. Severity comes from the size of the claim on the throughput axis, and from
the tail itself (max and p99 over p50, the freeze in ms) on the tail axis, so a
450 ms freeze that is 5% of the time is not ranked as a minor throughput problem.

Findings are ranked: the ``--symptom`` axis first when one is given, then by severity,
then by impact. Without a symptom the headline names the top finding of each axis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tracetriage.analyzers import catalog, efficiency, serving_rules
from tracetriage.analyzers.accounting import Ledger
from tracetriage.analyzers.catalog import AXES, SEVERITIES
from tracetriage.analyzers.evidence import ev, ms, nbytes, pct, plural, severity_for, us

# name: (value, why)
THRESHOLDS = {
    "launch_busy_max_pct": (75.0, "a GPU busier than 75% is not mainly waiting on launches"),
    "launch_kernel_median_max_ns": (50_000, "kernels above ~50 us amortize a 5-10 us launch; below it launch cost competes with work"),
    "launch_per_step_min": (50, "a step with fewer than ~50 launches cannot lose much time to launch overhead"),
    "launch_kernels_min_no_steps": (1000, "without steps, need at least this many kernels in the window to call it a launch pattern"),
    "launch_host_idle_share_min": (0.5, "at least half of the idle time must be the host launching or between launches"),
    "launch_impact_min_pct": (5.0, "below 5% of the window the launch overhead is not worth a finding"),
    "sync_per_step_min": (1.0, "the median step holds at least one blocking sync"),
    "sync_impact_min_pct": (2.0, "idle time after syncs must be at least 2% of the window"),
    "collective_share_min_pct": (20.0, "the TensorBoard/TraceLens rule of thumb flags communication above 10-20% of step time; 20% is where re-layout pays"),
    "prefill_min_steps": (20, "a tail needs at least 20 steps to be more than noise"),
    "prefill_p99_ratio": (3.0, "p99 step at 3x the median is a stall users see as a frozen stream"),
    "prefill_max_ratio": (5.0, "a single step 5x the median is a visible freeze"),
    "prefill_long_busy_min_pct": (80.0, "a long step in which the GPU is busy is GPU work (prefill); an idle one is a host stall"),
    "tail_high_ratio": (10.0, "a step 10x the median is an order-of-magnitude freeze every streaming user notices"),
    "tail_high_freeze_ns": (200_000_000, "a freeze of 200 ms or more is visible as a stalled stream, whatever its share of the time"),
    "pageable_min_count": (1, "any pageable async copy in steady state serializes with the host"),
    "copy_bound_min_pct": (30.0, "copies alone filling 30% of the window (and more than kernels) set the step time"),
    "healthy_compute_min_pct": (80.0, "every device computing (kernels, not copies) at least 80% of the window"),
    "severity_min_steps": (5, "a window holding 5+ measured steps shows a repeating pattern: its severity is not capped"),
    "severity_toy_window_ns": (10_000_000, "without 5 steps, a window under 10 ms (a toy program, one step) shows too little for more than low"),
    "severity_short_window_ns": (100_000_000, "without 5 steps, a window under 100 ms may be start-up or a single step: at most medium"),
    "healthy_min_steps": (3, "'steady' is a claim about repeated steps: each process driving a GPU needs at least 3 measured steps"),
    "starved_idle_min_pct": (50.0, "a GPU idle for most of the window is starved, whatever the cause"),
    "starved_unexplained_min_share": (0.5, "the other findings explain less than half of the idle time"),
    "host_idle_pyspy_hint_pct": (10.0, "idle host-code time above 10% of the window deserves a host profile"),
    "python_frame_min_pct": (15.0, "one user frame holding 15% of the host's non-idle samples is a hot spot worth moving off the step's critical path"),
    "python_min_samples": (100, "a share needs a sampling profile (py-spy record); one dump is a snapshot per thread, not a profile"),
    "python_host_idle_min_pct": (5.0, "the GPU must idle at least 5% of the window in host code for Python to matter"),
    "python_impact_min_pct": (1.0, "a frame whose converted share of the window is under 1% is not worth a finding"),
    "judge_min_gpu_ops": (20, "fewer GPU operations than this in the window are a handful, not a workload"),
    "judge_min_window_ns": (1_000_000, "a window shorter than 1 ms is shorter than one decode step"),
    "capture_launch_ratio": (4.0, "launch calls at 4x the kernels that ran: work was recorded into a graph, not executed"),
}

THRESHOLDS.update(serving_rules.THRESHOLDS)  # one table of thresholds, each with its reason
THRESHOLDS.update(efficiency.THRESHOLDS)

MINOR_HEADLINE_PCT = 5.0  # below this share a throughput finding is reported, but not as the verdict of an idle GPU
CAPTURE_CALLS = re.compile(r"(?i)(Stream|Thread)?BeginCapture|EndCapture|GraphInstantiate")


def t(name):
    return THRESHOLDS[name][0]


@dataclass
class Context:
    case: object
    data: dict
    per_trace: list[dict]
    symptom: str | None = None
    slo: dict = field(default_factory=dict)
    ledger: Ledger | None = None

    def __post_init__(self):
        if self.ledger is None:
            self.ledger = Ledger(self.devices)

    @property
    def devices(self) -> list[dict]:
        return [d for p in self.per_trace for d in p["devices"]]

    def judged(self) -> list[dict]:
        """Traces large and steady enough to judge (see :func:`oddities`)."""
        return [p for p in self.per_trace if not p["_odd"]]


def _median(values):
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def window_denominator(ctx: Context) -> str:
    n = len(ctx.devices)
    return "window" if n == 1 else f"window, mean over {n} devices"


def _best(taken: dict[str, int], ctx: Context) -> dict:
    dev_id = max(taken, key=lambda k: taken[k] / max(1, ctx.ledger.window[k]))
    return next(d for d in ctx.devices if d["id"] == dev_id)


def _cause_split(d: dict, prefix: str) -> str:
    parts = [(k.rsplit(":", 1)[1], v) for k, v in d["_slices"].items() if k.startswith(prefix) and v]
    tot = sum(v for _, v in parts) or 1
    return ", ".join(f"{CAUSE_WORDS[c]} {100.0 * v / tot:.0f}%" for c, v in sorted(parts, key=lambda x: -x[1]))


CAUSE_WORDS = {
    "sync": "inside a blocking sync",
    "memcpy_sync": "inside a synchronous copy",
    "launch": "inside launch calls",
    "other_cuda": "inside other CUDA/HIP calls",
    "host": "in host code outside any CUDA call",
    "unknown": "with no host activity recorded",
}


def is_python(process_name: str) -> bool | None:
    """True for a Python process, False for a native one, None when the name says nothing."""
    name = (process_name or "").strip()
    if not name or re.fullmatch(r"pid \d+", name):
        return None
    return bool(re.search(r"(?i)python|\.py\b|vllm|sglang|torchrun|uvicorn|ray::", name))


def host_profiler_hint(process_name: str, pid: int) -> str:
    """The host profiler that names the code running in the GPU's idle time, for this process."""
    py = is_python(process_name)
    if py is False:
        rocm = catalog.CAPTURE_KIND.get().get("vendor") == "rocm"  # no nsys on an AMD machine
        return (f"perf record -g --call-graph dwarf -p {pid} -- sleep 30 (a native process: perf samples its "
                "C/C++ frames)" + ("" if rocm else ", or nsys profile --sample=process-tree --cpuctxsw=process-tree"))
    return (f"py-spy record --format raw --rate 200 --duration 30 -o pyspy.txt --pid {pid} --native "
            "(during the same load), added to the bundle")


def _process_name(ctx: Context, pid: int) -> str:
    return next((p["name"] for p in ctx.data["processes"] if p["pid"] == pid), "")


# ---------------------------------------------------------------------------
# Throughput rules: each claims its slices through the ledger


def rule_cross_island_collective(ctx: Context):
    topo = ctx.data.get("topology")
    slow_paths = [p for log in (ctx.data.get("nccl") or []) for p in log["intra_node_slow_paths"]]
    if not topo:
        return _cross_island_from_nccl(ctx, slow_paths) if slow_paths else None
    crossing = [g for g in topo["crossing_groups"] if g["islands_spanned"] > 1 or g["crosses_slow_link"]]
    if not crossing:
        return None
    g = crossing[0]
    devs = [d for d in ctx.devices if d.get("collective_count") and d["gpu_index"] in g["group"]]
    taken = ctx.ledger.take("cross_island_collective", {d["id"]: (["collective"], None) for d in devs})
    impact = ctx.ledger.impact_pct(taken)
    share = float(np.mean([d["collective_share_pct"] for d in devs])) if devs else 0.0
    islands_txt = " and ".join(str(i) for i in topo["islands"])
    evidence = [
        ev("group", g["group"], text=f"GPUs running collectives together: {g['group']}"),
        ev("islands", topo["islands"], text=f"NVLink/fabric islands from the topology matrix: {islands_txt}"),
        ev("worst_link", g["worst_link"], text=f"slowest link inside the group: {g['worst_link']} (traffic crosses PCIe and the CPU interconnect)"),
        ev("collective_share_pct", round(share, 2), "%", "window, mean over the group's ranks",
           text=f"collectives run {pct(share)} of the window (mean over the group's ranks)"),
        ev("collective_claimed_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"communication no compute hides: {pct(impact)} of the window"),
    ]
    evidence += _nccl_hop_evidence(slow_paths) + _collective_op_evidence(ctx)
    return catalog.make(
        "cross_island_collective", impact,
        {"group": g["group"], "spanned": g["islands_spanned"], "islands": islands_txt, "worst": g["worst_link"],
         "n_islands": len(topo["islands"]), "group_size": len(g["group"]),
         "recommendation": topo.get("recommendation") or "keep each tensor-parallel group on GPUs joined by NVLink/XGMI"},
        evidence, severity="high" if impact >= 25 else "medium", denominator=window_denominator(ctx))


def _nccl_hop_evidence(slow_paths: list[dict]) -> list[dict]:
    if not slow_paths:
        return []
    hops = ", ".join(f"GPU {p['from_dev']} → GPU {p['to_dev']} via {p['via']}" for p in slow_paths[:6])
    return [ev("slow_hops", len(slow_paths), "hops", None,
               text=f"the NCCL log routes {plural(len(slow_paths), 'intra-node hop')} without P2P: {hops}")]


def _collective_op_evidence(ctx: Context) -> list[dict]:
    devs = [d for d in ctx.devices if d.get("collective_count", 0) > 0]
    if not devs:
        return []
    ops: dict[str, float] = {}
    for d in devs:
        for op, v in d["collectives_by_op"].items():
            ops[op] = ops.get(op, 0.0) + v / len(devs)
    per_rank = ", ".join(f"{d['id']} {d['collective_share_pct']:.0f}%" for d in devs[:8])
    return [
        ev("per_rank", per_rank, "%", "window of each rank", text=f"collective share per rank: {per_rank}"),
        ev("by_op", {k: round(v, 2) for k, v in ops.items()}, "%", "window, mean over ranks",
           text="by op: " + ", ".join(f"{k} {pct(v)}" for k, v in ops.items())),
    ]


def _cross_island_from_nccl(ctx: Context, slow_paths: list[dict]):
    devs = [d for d in ctx.devices if d.get("collective_count")]
    taken = ctx.ledger.take("cross_island_collective", {d["id"]: (["collective"], None) for d in devs})
    impact = ctx.ledger.impact_pct(taken)
    hops = ", ".join(f"{p['from_dev']}->{p['to_dev']} via {p['via']}" for p in slow_paths[:6])
    evidence = _nccl_hop_evidence(slow_paths)
    if devs:
        evidence.append(ev("collective_claimed_pct", round(impact, 2), "%", window_denominator(ctx),
                           text=f"communication no compute hides: {pct(impact)} of the window"))
    else:
        evidence.append(ev("trace", None, "", None, text="no GPU trace: the time share is not measured"))
    return catalog.make(
        "cross_island_collective", impact,
        {"hops_count": len(slow_paths), "hop_word": "hop" if len(slow_paths) == 1 else "hops", "hops": hops},
        evidence, severity="high" if impact >= 25 else "medium",
        denominator=window_denominator(ctx) if devs else "window (not measured: no GPU trace)",
        entry="cross_island_collective_nccl")


def rule_collective_dominant(ctx: Context, already: set[str]):
    if "cross_island_collective" in already:
        return None  # the cause is named; its finding carries the collective evidence
    devs = [d for d in ctx.devices if d.get("collective_count", 0) > 0]
    if not devs:
        return None
    mean_share = float(np.mean([d["collective_share_pct"] for d in devs]))
    if mean_share < t("collective_share_min_pct"):
        return None
    taken = ctx.ledger.take("collective_dominant", {d["id"]: (["collective"], None) for d in devs})
    impact = ctx.ledger.impact_pct(taken)
    ops = _collective_op_evidence(ctx)
    top_op = max(ops[1]["value"], key=ops[1]["value"].get) if ops[1]["value"] else "collectives"
    ranks = plural(len(devs), "rank")
    evidence = [
        ev("collective_share_pct_mean", round(mean_share, 2), "%", "window, mean over ranks",
           text=f"collective kernels run {pct(mean_share)} of the window (mean over {ranks})"),
        ev("collective_claimed_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"not hidden by compute: {pct(impact)} of the window"),
        *ops,
    ]
    return catalog.make("collective_dominant", impact,
                        {"op": top_op, "share": pct(mean_share), "ranks": ranks, "claimed": pct(impact)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx))


def rule_launch_bound(ctx: Context):
    wants, info = {}, {}
    for p in ctx.judged():
        if p["graph_replays_in_window"] > 0:
            continue
        kmed = p["kernel_median_ns"]
        if kmed is None or kmed > t("launch_kernel_median_max_ns"):
            continue
        lps = _median([pr["launches_per_step"] for pr in p["processes"]])
        n_kernels = p["kernels_in_window"]
        if lps is not None:
            if lps < t("launch_per_step_min"):
                continue
        elif n_kernels < t("launch_kernels_min_no_steps"):
            continue
        if _median([pr["graph_launches_per_step"] for pr in p["processes"]]):
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
    d = _best(taken, ctx)
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
                           text=f"the host profile spends {pct(launch_frame['self_pct'])} of its samples inside {launch_frame['frame']}"))
    if eager is True:
        evidence.append(ev("enforce_eager", True, "", None, text="the engine config has enforce_eager=True: CUDA graphs are off"))
    return catalog.make(
        "launch_bound", impact,
        {"per_step": per_step, "per_step_short": f"{lps:,.0f}" if lps is not None else "many",
         "kernel_median": us(kmed), "busy": pct(d["busy_pct"]), "claimed": pct(impact)},
        evidence, severity=severity_for(impact), denominator=window_denominator(ctx),
        variant="eager" if eager is True else None)


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
           text=f"{pct(top['share_pct'])} of {prof['total_samples']:,} non-idle py-spy samples are inside it ({pct(top['self_pct'])} in its own code)"),
        ev("calls_sync", top["calls_sync"], "", None, text="it calls a host-syncing operation" if top["calls_sync"] else "no host sync below it"),
    ]
    devs = [d for d in ctx.devices if d["window_ns"]]
    if not devs:
        evidence.append(ev("host_idle", None, "", None, text="no GPU trace in the case: the share is of the host's samples only"))
        return catalog.make("python_host_overhead", top["share_pct"], {**fields, "host_idle": "not measured", "claimed": "not measured"},
                            evidence, severity=severity_for(top["share_pct"]),
                            denominator="host samples (no GPU trace to weigh it against)")
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
    d = _best(taken, ctx)
    evidence.append(ev("host_idle_pct", round(host_idle[d["id"]], 2), "%", f"window on {d['id']}",
                       text=f"the GPU ({d['id']}) idles {pct(host_idle[d['id']])} of the window while the host is in no CUDA call"))
    evidence.append(ev("claimed_pct", round(impact, 2), "%", window_denominator(ctx),
                       text=f"{pct(top['share_pct'])} of that host-code idle time = {pct(impact)} of the window"))
    return catalog.make("python_host_overhead", impact,
                        {**fields, "host_idle": pct(host_idle[d["id"]]), "claimed": pct(impact)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx))


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
    d = _best(taken, ctx)
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
                f"{pct(100.0 * after_all / d['window_ns'])} of the window; the host was then {_cause_split(d, 'idle:after_sync:')}"),
        ev("claimed_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"left to this finding after the findings ranked before it: {pct(impact)} of the window"),
        ev("idle_after_sync_per_step", int(per_step_idle), "ns", "one step", text=f"about {us(per_step_idle)} of GPU idle per step after the sync"),
        ev("steps", steps["count"], "steps", "window", text=f"{steps['count']:,} steps (source: {steps['source']}), p50 {us(steps['p50_ns'])}"),
    ]
    return catalog.make("host_sync_per_step", impact,
                        {"syncs": f"{pr['syncs_per_step']:g}", "dtoh": dtoh_txt, "claimed": pct(impact),
                         "per_step_idle": us(per_step_idle)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx))


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
                        denominator=window_denominator(ctx))


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
    d = _best(taken, ctx)
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
        ev("compute_pct", round(100.0 * (d["_slices"]["compute"] + d["_slices"]["collective"]) / w, 2), "%", f"window on {d['id']}",
           text=f"kernels run {pct(100.0 * (d['_slices']['compute'] + d['_slices']['collective']) / w)} of the window"),
        ev("bytes", c["bytes"], "B", f"{plural(c['count'], 'copy', 'copies')} in the window",
           text=f"{nbytes(c['bytes'])} in {plural(c['count'], 'copy', 'copies')}: " + ", ".join(
               f"{dir_words.get(k, k)} {nbytes(v['bytes'])} in {us(v['time_ns'])}" for k, v in dirs)),
        ev("throughput", round(gbps, 2), "GB/s", f"time {dir_words.get(direction, direction)} copies run",
           text=f"{gbps:.1f} GB/s {dir_words.get(direction, direction)}, the direction that takes the most copy time"),
        ev("pinned", pinned, "copies", f"{c['count']} copies",
           text=f"{pinned:,} of {c['count']:,} copies use pinned host memory, {c['pageable']:,} pageable"),
        ev("overlap_with_kernels_pct", c["overlap_pct"], "%", "copy time", text=f"{pct(c['overlap_pct'])} of the copy time overlaps kernels"),
    ]
    return catalog.make("copy_bound", impact,
                        {"copy_share": pct(100.0 * d["_slices"]["copy"] / w),
                         "compute_share": pct(100.0 * (d["_slices"]["compute"] + d["_slices"]["collective"]) / w),
                         "gbps": f"{gbps:.1f} GB/s", "direction": dir_words.get(direction, direction), "bytes": nbytes(top["bytes"])},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx))


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
    d = _best(taken, ctx)
    w = d["window_ns"]
    by_cause: dict[str, int] = {}
    for k, v in unclaimed[d["id"]].items():
        cause = k.rsplit(":", 1)[1]
        by_cause[cause] = by_cause.get(cause, 0) + v
    cause, cause_ns = max(by_cause.items(), key=lambda x: x[1])
    idle_pct = 100.0 - d["busy_pct"]
    pname = _process_name(ctx, d["pid"])
    fmt = next((_hint_format(p) for p in ctx.per_trace if d in p["devices"]), None)
    rocm = fmt == "rocm" or fmt in AMD_FORMATS
    capture = {
        "host": host_profiler_hint(pname, d["pid"]),
        "unknown": capture_cmd(fmt, "api"),
        "sync": "find the waits: " + capture_cmd(fmt, "api") + (
            " with roctx ranges around the suspected waits (roctxRangePush/Pop), or torch.profiler with with_stack=True"
            if rocm else " with backtraces on the sync calls (nsys --cudabacktrace=sync)"),
        "memcpy_sync": ("find the synchronous copies' callers: torch.profiler with with_stack=True (the Python stack of "
                        "each hipMemcpy), or roctx ranges around the suspected copies with rocprofv3 --hip-trace --marker-trace"
                        if rocm else "find the synchronous copies' callers: nsys --cudabacktrace=memory"),
        "launch": "a host profile of the launching thread (launch calls this long mean a contended driver lock or a full launch queue)",
        "other_cuda": "the CUDA calls in the gaps (nsys stats --report cuda_api_sum over the same window)",
    }[cause]
    evidence = [
        ev("idle_pct", round(idle_pct, 2), "%", f"window on {d['id']}", text=f"GPU idle {pct(idle_pct)} of the {us(w)} window on {d['id']}"),
        ev("unexplained_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"idle time no other finding claims: {pct(impact)} of the window"),
        ev("dominant_cause", cause, "", None,
           text=f"most of it ({pct(100.0 * cause_ns / w)} of the window) the host was {CAUSE_WORDS[cause]}"),
        ev("by_cause", {c: round(100.0 * v / w, 2) for c, v in by_cause.items()}, "%", f"window on {d['id']}",
           text="unexplained idle by cause: " + ", ".join(f"{c} {pct(100.0 * v / w)}" for c, v in sorted(by_cause.items(), key=lambda x: -x[1]) if v)),
    ]
    if d["gaps"]["count"]:
        evidence.append(ev("gaps", d["gaps"]["count"], "gaps", "window",
                           text=f"{plural(d['gaps']['count'], 'idle gap')}, p50 {us(d['gaps']['p50_ns'])}, max {us(d['gaps']['max_ns'])}"))
    return catalog.make("gpu_starved", impact,
                        {"idle": pct(idle_pct), "cause_text": f"mostly {CAUSE_WORDS[cause]}", "claimed": pct(impact),
                         "cause_where": f"while the host was {CAUSE_WORDS[cause]}", "capture": capture},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx),
                        variant="blocked" if cause in ("sync", "memcpy_sync") else None)


# ---------------------------------------------------------------------------
# Other axes


def rule_nccl_errors(ctx: Context):
    logs = ctx.data.get("nccl") or []
    warns = [w for log in logs for w in log["warnings"]]
    if not warns:
        return None
    first = warns[0]
    kinds: dict[str, int] = {}
    for w in warns:
        key = w["message"].split(":")[0][:60]
        kinds[key] = kinds.get(key, 0) + 1
    ranks = sorted({f"{w['host']}:{w['pid']} [dev {w['cuda_dev']}]" for w in warns})
    net = any("NET/IB" in w["message"] or "socket" in w["message"].lower() for w in warns)
    evidence = [
        ev("warn_count", len(warns), "lines", "log lines", text=f"{plural(len(warns), 'WARN line')} from {plural(len(ranks), 'process', 'processes')}"),
        ev("first", first["message"], "", None,
           text=f"first: [{first.get('time') or 'no timestamp'}] {first['host']}:{first['pid']} dev {first['cuda_dev']} {first.get('location') or ''}: {first['message']}"),
        ev("kinds", kinds, "lines", None, text="by message: " + "; ".join(f"{k} x{n}" for k, n in kinds.items())),
        ev("ranks", ranks[:8], "", None, text="from: " + ", ".join(ranks[:8]) + (" ..." if len(ranks) > 8 else "")),
    ]
    return catalog.make(
        "nccl_errors", 100.0,
        {"count": len(warns), "line_word": "line" if len(warns) == 1 else "lines", "first": first["message"][:140],
         "net_clause": " The messages point at the network path (IB completion errors / socket connects)." if net else ""},
        evidence, severity="high", denominator="run (a failed collective stops every step)", variant="net" if net else None)


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
    label = "labelled prefill by NVTX" if info.get("prefill_labelled") else f"GPU busy {info['busy_pct']:.0f}% during them (GPU work, not a host stall)"
    evidence = [
        ev("step_p50", s["p50_ns"], "ns", f"{s['count']} steps", text=f"step p50 {us(s['p50_ns'])} over {s['count']:,} steps"),
        ev("step_max", s["max_ns"], "ns", f"{s['count']} steps", text=f"longest step {us(s['max_ns'])}: a {us(s['max_ns'] - s['p50_ns'])} freeze"),
        ev("step_p99_over_p50", round(r99, 2), "x", "step p50"),
        ev("step_max_over_p50", round(rmax, 2), "x", "step p50"),
        ev("long_steps", info["count"], "steps", f"{s['count']} steps", text=f"{info['count']} of {s['count']} steps longer than 3x p50"),
        ev("long_step_excess_pct", round(info["excess_pct"], 2), "%", "total step time",
           text=f"time above p50 in those steps: {pct(info['excess_pct'])} of all step time"),
    ]
    if budget is not None:
        over = s["p99_ns"] / 1e6 > budget
        evidence.append(ev("itl_p99_budget_ms", budget, "ms", None,
                           text=f"step p99 {us(s['p99_ns'])} is {'over' if over else 'within'} the inter-token p99 budget of {budget:g} ms"))
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
        evidence, severity=severity, denominator="total step time")


def _facts(ctx: Context) -> dict:
    """What the capture shows that a finding's falsifier can be checked against (catalog.falsified):
    ``config`` (the engine's), ``trace`` (graph replays and launches; the collective share and its
    exposed part, means over the devices that ran collectives), ``serving`` (serving_rules.facts),
    ``threshold`` (THRESHOLDS' values by name) and ``kind``. A figure not measured is None."""
    serving = ctx.data.get("serving") or {}
    coll = [d for d in ctx.devices if d.get("collective_count")]
    return {
        "config": dict(serving.get("config") or {}),
        "trace": {"graph_replays": sum(int(p.get("graph_replays_in_window") or 0) for p in ctx.per_trace) if ctx.per_trace else None,
                  "graph_launches_per_step": max((pr["graph_launches_per_step"] for p in ctx.per_trace for pr in p["processes"]
                                                  if pr.get("graph_launches_per_step") is not None), default=None),
                  "collective_share_pct": float(np.mean([d["collective_share_pct"] for d in coll])) if coll else None,
                  "collective_exposed_pct": float(np.mean([d["collective_exposed_pct"] for d in coll])) if coll else None},
        "serving": serving_rules.facts(serving, ctx.slo) if serving else {},
        "threshold": {name: value for name, (value, _why) in THRESHOLDS.items()},
        "kind": dict(ctx.data.get("capture_kind") or {}),
    }


def _apply_falsifiers(ctx: Context, findings: list[dict]) -> None:
    """No finding whose own falsifier the capture already meets: it is kept (its slice stays
    claimed, the accounting adds up) but downgraded to info, marked ``falsified`` with the reason,
    ranked last and never named in a headline. (A memory_pressure finding with a CUDA OOM is the
    exception: the OOM happened, so it stands at its severity and only its cause changes.) It
    claims no impact (0: it explains nothing), its fix is the reason it is ruled out, and the
    mechanism its evidence pointed to is said to be ruled out."""
    facts = _facts(ctx)
    for f in findings:
        why = catalog.falsified(f, facts)
        if why and f["id"] == "memory_pressure" and any(e["name"] == "oom_events" and e["value"] for e in f["evidence"]):
            serving_rules.oom_cause_ruled_out(f, why)  # the crash is a fact: only its cause is ruled out
        elif why:
            _falsify(f, why)


def _falsify(f: dict, why: str) -> None:
    for e in f["evidence"]:
        if e["name"] == "mechanism":
            e["text"] = f"mechanism the evidence pointed to ({e['value']}): ruled out by the falsifier below"
    f["evidence"].append(ev("falsifier_met", True, "", None, text=f"not the problem as stated: {why}"))
    f["severity"], f["falsified"], f["impact_pct"] = "info", why, 0.0
    f["fix"] = why  # no fix to give: what rules the finding out stands in its place


def _cap_severity_by_window(ctx: Context, findings: list[dict]) -> None:
    """Severity scales with what the window can show: without severity_min_steps measured steps,
    a window under severity_toy_window_ns caps the throughput findings at low, one under
    severity_short_window_ns at medium (a 1.5 ms Game-of-Life export is not a HIGH problem).
    The finding says so in its evidence."""
    if not ctx.devices:
        return
    steps = max((int(pr["steps"]["count"] or 0) for p in ctx.per_trace for pr in p["processes"]), default=0)
    window = max(d["window_ns"] for d in ctx.devices)
    if steps >= t("severity_min_steps") or window >= t("severity_short_window_ns"):
        return
    cap = "low" if window < t("severity_toy_window_ns") else "medium"
    for f in findings:
        if f["axis"] == "throughput" and SEVERITIES.index(f["severity"]) > SEVERITIES.index(cap):
            f["evidence"].append(ev("severity_capped", cap, "", None,
                                    text=f"severity capped at {cap} (was {f['severity']}): a {us(window)} window with "
                                         f"{plural(steps, 'measured step')} shows too little to rank it higher"))
            f["severity"] = cap


def _fewest_steps(ctx: Context) -> int:
    """The fewest measured steps of a process that drives a device (0 when one has none)."""
    counts = []
    for p in ctx.per_trace:
        pids = {int(d["pid"]) for d in p["devices"] if d.get("pid") is not None}
        counts += [int(pr["steps"]["count"] or 0) for pr in p["processes"] if int(pr["pid"]) in pids]
    return min(counts) if counts else 0


def rule_healthy(ctx: Context, findings: list[dict], abstentions: list[dict]):
    devs = ctx.devices
    if not devs:
        return None
    if any(SEVERITIES.index(f["severity"]) >= SEVERITIES.index("low") or f["id"] == "below_roofline" or f.get("falsified")
           for f in findings):
        return None  # a falsified finding still measured a symptom, with a cause not yet known  # busy is not fast: never healthy while the dominant class runs below its roofline
    if any(a["analysis"] in BLOCKS_HEALTHY for a in abstentions):
        return None
    if any(c["status"] == "broken" for c in serving_rules.slo_checks(ctx.data.get("serving"), ctx.slo)):
        return None  # a --slo budget the serving artifacts show broken: never under a healthy verdict
    compute = [100.0 * (d["_slices"]["compute"] + d["_slices"]["collective"]) / d["window_ns"] if d["window_ns"] else 0.0
               for d in devs]
    if min(compute) < t("healthy_compute_min_pct"):
        return None
    if _fewest_steps(ctx) < t("healthy_min_steps"):
        return None  # busy, but steadiness is not measured: the headline says what is missing instead
    evidence = [ev("min_compute_pct", round(min(compute), 2), "%", "window",
                   text=f"the least busy device runs kernels {pct(min(compute))} of the window")]
    eff_words = efficiency.healthy_words(ctx.per_trace)
    evidence.append(ev("efficiency", eff_words.lstrip("; "), "", None, text=f"efficiency: {eff_words.lstrip('; ')}"))
    stats = (ctx.data.get("serving") or {}).get("stats")
    if stats:
        evidence.append(ev("queue", stats["waiting_share_pct"], "%", f"{stats['samples']} engine stats samples",
                           text=f"requests waiting in {stats['waiting_share_pct']:.0f}% of {stats['samples']} stats samples "
                                f"(mean {stats['waiting_mean']}, max {stats['waiting_max']}); running mean {stats['running_mean']}, "
                                f"KV cache usage p50 {stats['kv_usage_p50']}% max {stats['kv_usage_max']}%"))
    return catalog.make("healthy", 0.0, {"busy": pct(min(compute)), "efficiency": eff_words}, evidence, severity="info",
                        denominator="window")


# Throughput rules in claim order: a root cause before the symptom it explains, the
# specific before the generic, and gpu_starved last (it takes what nobody explained).
THROUGHPUT_ORDER = ["cross_island_collective", "collective_dominant", "launch_bound", "python_host_overhead",
                    "host_sync_per_step", "pageable_memcpy", "copy_bound", "below_roofline", "gpu_starved"]
RULES = {
    "cross_island_collective": rule_cross_island_collective,
    "collective_dominant": rule_collective_dominant,
    "launch_bound": rule_launch_bound,
    "python_host_overhead": rule_python_host_overhead,
    "host_sync_per_step": rule_host_sync_per_step,
    "pageable_memcpy": rule_pageable_memcpy,
    "copy_bound": rule_copy_bound,
    "below_roofline": efficiency.rule_below_roofline,
    "gpu_starved": rule_gpu_starved,
    "nccl_errors": rule_nccl_errors,
    "prefill_stall": rule_prefill_stall,
}


# ---------------------------------------------------------------------------
# Abstentions

from tracetriage.analyzers.capture_kind import AMD_FORMATS  # noqa: E402 - one list of the ROCm capture formats
# Abstentions that mean the capture cannot be judged healthy (too little, or the wrong phase).
ODD = ("too_few_gpu_ops", "window_too_short", "memset_only", "graph_capture_phase")
BLOCKS_HEALTHY = ODD + ("gap_causes", "graph_replays")


def _hint_format(p: dict) -> str | None:
    """The trace's format for capture hints: a PyTorch profiler trace is re-captured with the
    PyTorch profiler (on either vendor); "rocm" for another ROCm capture in a vendor-neutral
    format, so its hints name rocprofv3 and roctx, not nsys."""
    from tracetriage.analyzers.capture_kind import is_rocm

    fmt = p["meta"].get("format")
    if fmt == "kineto":
        return fmt
    return "rocm" if fmt not in AMD_FORMATS and is_rocm(p) else fmt


def capture_cmd(fmt: str | None, what: str) -> str:
    """The capture command that would decide an abstention, for the profiler and vendor of the trace."""
    if fmt == "kineto":
        return {
            "steps": "call prof.step() once per engine step inside torch.profiler.profile(...) (each step becomes a "
                     "ProfilerStep#N range), or wrap each step in torch.profiler.record_function('step'), or pass "
                     "--step-range REGEX naming an existing range",
            "api": "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (ROCm builds use the same "
                   "names): the runtime calls are recorded beside the GPU activity",
            "graphs": "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] so the kernels a graph "
                      "replays are recorded, and profile the graph capture phase too for their shapes",
            "steady": "capture a steady-state window under load: torch.profiler.profile(schedule=torch.profiler."
                      "schedule(wait=50, warmup=5, active=20)) with prof.step() per engine step, started after "
                      "warm-up and graph capture (vLLM: the /start_profile endpoint with VLLM_TORCH_PROFILER_DIR set)",
        }[what]
    if fmt in AMD_FORMATS or fmt == "rocm":
        return {
            "steps": "mark each engine step with roctxRangePush('step') / roctxRangePop() and capture with "
                     "rocprofv3 --runtime-trace --marker-trace --output-format rocpd -- <server command>, "
                     "or pass --step-range REGEX naming an existing range",
            "api": "capture with rocprofv3 --runtime-trace --output-format rocpd -- <server command> (HIP API tracing on)",
            "graphs": "capture with rocprofv3 --runtime-trace --kernel-trace --output-format rocpd so graph kernels are traced",
            "steady": "capture a steady-state window under load: rocprofv3 --runtime-trace --marker-trace --output-format rocpd "
                      "-- <server command>, started after warm-up (or limited with --collection-period)",
        }[what]
    return {
        "steps": "wrap each engine step in an NVTX range (torch.cuda.nvtx.range_push('step')) and capture with "
                 "nsys profile --trace=cuda,nvtx,osrt <server command>, or pass --step-range REGEX naming an existing range",
        "api": "capture with nsys profile --trace=cuda,nvtx,osrt <server command> (CUDA API tracing on)",
        "graphs": "re-capture with nsys profile --trace=cuda,nvtx --cuda-graph-trace=graph (one interval per replay) "
                  "or --cuda-graph-trace=node (every kernel)",
        "steady": "capture a steady-state window under load, after warm-up and graph capture: nsys profile "
                  "--trace=cuda,nvtx,osrt --delay 60 --duration 20 <server command>",
    }[what]


def oddities(p: dict) -> list[dict]:
    """Why one trace is too small or too odd to judge (empty when it can be judged):
    a handful of GPU operations, a window shorter than a step, memsets only, or a
    CUDA/HIP-graph capture phase (stream capture or graph instantiation calls, and
    launch calls far exceeding the kernels that ran)."""
    fmt = _hint_format(p)
    w = p["window"]["duration_ns"]
    ops = p["gpu_ops_in_window"]
    out = []

    def add(analysis, reason, what="steady"):
        out.append({"analysis": analysis, "scope": p["meta"].get("path") or "trace", "reason": reason,
                    "capture_hint": capture_cmd(fmt, what)})

    executed = p["executed_total"]  # over the whole capture: graph capture often lies outside the GPU window
    if p["capture_calls"] and p["launches_total"] >= t("capture_launch_ratio") * max(1, executed):
        add("graph_capture_phase", f"{plural(p['capture_calls'], 'stream-capture or graph-instantiate call')} and "
            f"{p['launches_total']:,} launch calls for {executed:,} kernels executed: this is a CUDA/HIP-graph capture "
            "phase, not steady-state serving")
    elif p["capture_calls"] and any(pr["steps"]["source"] == "sync" for pr in p["processes"]) and executed < p["launches_total"]:
        add("graph_capture_phase", f"steps were inferred from syncs in a window with {plural(p['capture_calls'], 'graph-capture call')}: "
            "the syncs belong to graph capture, not to serving steps")
    if ops["kernel"] + ops["graph"] == 0 and ops["memset"] and not ops["memcpy"]:
        add("memset_only", f"the window holds only {plural(ops['memset'], 'memset')} and no kernel: nothing to judge the GPU's work by")
    elif sum(ops.values()) < t("judge_min_gpu_ops"):
        add("too_few_gpu_ops", f"only {plural(sum(ops.values()), 'GPU operation')} in the window "
            f"({', '.join(f'{k} {v}' for k, v in ops.items() if v)}): a handful, not a workload")
    if w < t("judge_min_window_ns"):
        add("window_too_short", f"the window is {us(w)} long, shorter than one decode step")
    return out


STEP_RANGE_CANDIDATES = 5  # the most frequent range names offered as --step-range candidates


def _range_candidates(trace) -> str:
    """', though the capture holds N annotation ranges; the most frequent: ...' naming the range
    names a --step-range could select (empty without ranges): a name that repeats once per step
    marks the steps."""
    r = getattr(trace, "ranges", None)
    if r is None or not len(r) or "name" not in r:
        return ""
    counts = r["name"].value_counts()
    counts = counts[counts > 1].head(STEP_RANGE_CANDIDATES)
    if counts.empty:
        return ""
    names = ", ".join(f"'{str(n)[:60]}' ({int(c):,})" for n, c in counts.items())
    return (f"; of the capture's {len(r):,} annotation ranges the most frequent are {names}: pass the one that "
            "marks a step as --step-range REGEX")


def abstentions_for(ctx: Context) -> list[dict]:
    out = []
    traces = list(getattr(ctx.case, "traces", []) or [])
    for i, p in enumerate(ctx.per_trace):
        out.extend(p["_odd"])
        fmt = _hint_format(p)
        candidates = _range_candidates(traces[i]) if len(traces) == len(ctx.per_trace) else ""
        inferred = [pr for pr in p["processes"] if pr["steps"]["source"] in ("sync", "graph_launch")]
        if inferred:
            src = ", ".join(sorted({pr["steps"]["source"] for pr in inferred}))
            out.append({"analysis": "step_annotations", "scope": ", ".join(f"pid {pr['pid']}" for pr in inferred[:8]),
                        "reason": (f"no annotation ranges mark the steps: they were inferred from the periodic {src} pattern, "
                                   "so prefill and decode steps cannot be told apart by name") if not candidates else (
                            f"no known step range marks the steps: they were inferred from the periodic {src} pattern, "
                            f"so prefill and decode steps cannot be told apart by name{candidates}"),
                        "capture_hint": capture_cmd(fmt, "steps")})
        for pr in p["processes"]:
            if pr["steps"]["source"] == "none" and pr.get("gpu_ops", 1):  # a process with no GPU work has no steps to find
                asked = p["meta"].get("step_range")
                if asked:  # the user's regex replaced the search: say so, not that the capture has no steps
                    out.append({"analysis": "steps", "scope": f"pid {pr['pid']}",
                                "reason": f"--step-range {asked!r} matched no annotation range of this process: per-step "
                                          f"metrics (launches and syncs per step, the step tail) not measured{candidates}",
                                "capture_hint": "pass a --step-range REGEX naming a range the capture holds, or leave it "
                                                "out: the steps are then found from known range names or the periodic sync"})
                    continue
                out.append({"analysis": "steps", "scope": f"pid {pr['pid']}",
                            "reason": ("no NVTX step ranges" if not candidates else "no known step range")
                            + " and no periodic sync or graph launch: per-step metrics "
                              f"(launches and syncs per step, the step tail) not measured{candidates}",
                            "capture_hint": capture_cmd(fmt, "steps")})
        if not p["has_api"]:
            out.append({"analysis": "gap_causes", "scope": "trace",
                        "reason": "the trace holds no CUDA/HIP API calls: idle time cannot be attributed to launches, syncs or host code",
                        "capture_hint": capture_cmd(fmt, "api")})
        if p["graph_launches_in_window"] and not p["graph_replays_in_window"] and p["meta"].get("graph_trace_mode") != "node":
            out.append({"analysis": "graph_replays", "scope": "trace",
                        "reason": f"{p['graph_launches_in_window']} graph launches but no graph replay or graph-node records: "
                                  "GPU time inside graphs is missing and busy % is a lower bound",
                        "capture_hint": capture_cmd(fmt, "graphs")})
        for pr in p["processes"]:
            s, info = pr["steps"], pr.get("_long_steps") or {}
            if (info.get("count") and s["p50_ns"] and s["max_ns"] / s["p50_ns"] >= t("prefill_max_ratio")
                    and not info.get("prefill_labelled") and info.get("busy_pct", 0) < t("prefill_long_busy_min_pct")):
                out.append({"analysis": "step_tail", "scope": f"pid {pr['pid']}",
                            "reason": f"{plural(info['count'], 'step')} up to {us(s['max_ns'])} against a p50 of {us(s['p50_ns'])}, "
                                      f"but the GPU is busy only {info.get('busy_pct', 0):.0f}% during them: a host stall "
                                      "(garbage collection, scheduler, I/O), not prefill; what the host did is not measured",
                            "capture_hint": host_profiler_hint(pr["name"], pr["pid"])})
    coll_devs = [d for d in ctx.devices if d.get("collective_count", 0) > 0]
    if coll_devs and not getattr(ctx.case, "topologies", None):
        out.append({"analysis": "topology", "scope": "case",
                    "reason": "collectives run but no topology matrix was given: cannot tell whether the communicator "
                              "crosses a slow (SYS/NODE/PHB) link",
                    "capture_hint": "add the output of nvidia-smi topo -m (AMD: rocm-smi --showtopo) as topo.txt and the "
                                    "NCCL_DEBUG=INFO log to the bundle"})
    if not any(c.format in ("raw", "speedscope") for c in getattr(ctx.case, "pyspy", [])):
        hosty = [d for d in ctx.devices if d["window_ns"]
                 and 100.0 * d["gaps"]["by_cause"]["host"] / d["window_ns"] >= t("host_idle_pyspy_hint_pct")]
        if hosty:
            d = max(hosty, key=lambda x: x["gaps"]["by_cause"]["host"])
            out.append({"analysis": "host_frames", "scope": d["id"],
                        "reason": f"{100.0 * d['gaps']['by_cause']['host'] / d['window_ns']:.0f}% of the window the GPU idles "
                                  "while the host is in no CUDA call: which host code runs then is not measured",
                        "capture_hint": host_profiler_hint(_process_name(ctx, d["pid"]), d["pid"])})
    return out


# ---------------------------------------------------------------------------
# The verdict


def rank(findings: list[dict], symptom: str | None) -> list[dict]:
    """Healthy first (it fires only when nothing reaches medium); then the findings that answer
    the symptom (its axis, or a further symptom they explain: launch-bound kernels answer
    "GPU at 30% utilization"); then severity, impact, the symptom's own axis before an answer
    from another, and a root cause before its symptom on ties."""
    order = {"cross_island_collective": 0}
    return sorted(findings, key=lambda f: (f["id"] != "healthy", bool(f.get("falsified")),
                                           bool(symptom) and not catalog.answers(f, symptom),
                                           -SEVERITIES.index(f["severity"]), -f["impact_pct"],
                                           bool(symptom) and f["axis"] != symptom, order.get(f["id"], 1)))


def evaluate(ctx: Context) -> tuple[list[dict], list[dict]]:
    from tracetriage.analyzers.capture_kind import kind_of

    kind = kind_of(ctx.case, ctx.per_trace, ctx.data.get("serving"))
    ctx.data["capture_kind"] = kind  # the evidence the catalog's texts select their variant on
    token = catalog.CAPTURE_KIND.set(kind)
    try:
        return _evaluate(ctx)
    finally:
        catalog.CAPTURE_KIND.reset(token)


def _evaluate(ctx: Context) -> tuple[list[dict], list[dict]]:
    findings: list[dict] = []
    fired: set[str] = set()
    for rid in THROUGHPUT_ORDER:
        rule = RULES[rid]
        f = rule(ctx, fired) if rid == "collective_dominant" else rule(ctx)
        if f is not None:
            findings.append(f)
            fired.add(rid)
    _cap_severity_by_window(ctx, findings)
    for rid in ("nccl_errors", "prefill_stall"):
        if (f := RULES[rid](ctx)) is not None:
            findings.append(f)
    serving = ctx.data.get("serving")
    for f in serving_rules.evaluate(serving, ctx.slo):
        same = next((x for x in findings if x["id"] == f["id"]), None)
        if same is not None:  # one problem seen in the trace's steps and in the ITL tail: one finding, both evidences
            same["evidence"].extend({**e, "text": "serving: " + e["text"]} for e in f["evidence"])
            continue
        findings.append(f)
    _apply_falsifiers(ctx, findings)
    abstentions = abstentions_for(ctx) + efficiency.abstention(ctx) + serving_rules.abstentions(serving, ctx.slo)
    abstentions += serving_rules.tail_abstention(serving, findings) if serving and not ctx.devices else []
    healthy = rule_healthy(ctx, findings, abstentions) if ctx.devices else (
        serving_rules.rule_healthy_serving(serving, ctx.slo, findings) if serving else None)
    if healthy:
        findings.append(healthy)
    return rank(findings, ctx.symptom), abstentions


def _says(f: dict) -> str:
    return f"[{f['id']}] {f['title']} — explains {f['impact_pct']:.0f}% of the {f['impact_denominator']}"


def headline_by_axis(findings: list[dict]) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in findings:  # already ranked: the first of each axis is its top finding
        if f["axis"] in AXES and f["axis"] not in out and not f.get("falsified"):
            out[f["axis"]] = _says(f)
    return out


SLO_AXES = {"ttft": {"ttft"}, "tpot": {"tpot"}, "itl": {"tail"},
            "e2el": {"ttft", "tpot", "tail", "utilization", "oom"}}  # the axes whose findings can explain a broken budget


def slo_unexplained(findings: list[dict], data: dict) -> tuple[list[dict], list[dict]]:
    """The --slo budgets broken with no standing finding on an axis that explains them
    (SLO_AXES), and those that could not be checked (serving_rules.slo_check)."""
    checks = serving_rules.slo_checks(data.get("serving"), data.get("slo") or {})
    standing = {f["axis"] for f in findings if not f.get("falsified") and f["id"] != "healthy"}
    broken = [c for c in checks if c["status"] == "broken" and not (SLO_AXES.get(c["metric"], set()) & standing)]
    return broken, [c for c in checks if c["status"] == "not_measured"]


def _slo_words(checks: list[dict]) -> str:
    return "; ".join(f"{c['metric'].upper()} {c['percentile']} {ms(c['measured_ms'])} over the {c['limit_ms']:g} ms budget"
                     for c in checks)


def headline(findings: list[dict], abstentions: list[dict], data: dict, symptom: str | None = None) -> str:
    """The verdict in one line (_headline), then the --slo budgets it leaves out: a broken budget no
    standing finding explains is named (it leads when nothing else stands), one not checked is said so."""
    broken, unchecked = slo_unexplained(findings, data)
    text = _headline(findings, abstentions, data, symptom, broken)
    if broken and not text.startswith("SLO broken"):
        text += f"; SLO broken, no finding on its axis: {_slo_words(broken)}"
    if unchecked:
        text += "; --slo not checked: " + ", ".join(f"{c['budget']} ({c['source']})" for c in unchecked)
    return text


def _headline(findings: list[dict], abstentions: list[dict], data: dict, symptom: str | None, broken: list[dict]) -> str:
    devices = data["devices"]
    if not devices:
        topo = data.get("topology")
        what = ((f"topology: {plural(len(topo['gpus']), 'GPU')} in islands {topo['islands']}" if len(topo["gpus"]) > 1
                 else "topology: one GPU, so no interconnect between GPUs to judge") if topo
                else "serving artifacts" if data.get("serving") else "side artifacts only")
        if findings and findings[0]["id"] == "healthy":
            return f"Healthy: {findings[0]['title']} (no GPU trace given)"
        if symptom:
            return _symptom_headline(findings, abstentions, symptom, f" (no GPU trace given; {what})")
        tops = _axis_tops(findings)
        if tops:
            body = (_says(next(iter(tops.values()))) if len(tops) == 1
                    else " | ".join(f"{axis}: {_says(f)}" for axis, f in tops.items()))
            return f"{body} (no GPU trace given; {what})"
        if data.get("serving"):
            measured = serving_rules.measured_serving(data["serving"])
            if broken:
                return (f"SLO broken: {_slo_words(broken)}; no serving finding explains it (measured: " + "; ".join(measured[:3])
                        + f"){_ruled_out(findings)}; no GPU trace given"
                        + _not_measured(abstentions))
            tail = serving_rules.unexplained_tail(data["serving"], findings)
            if tail:
                return (f"Inter-token tail not explained: {serving_rules.tail_words(tail)}"
                        + (f"; not the prefill-chunk mechanism ({', '.join(tail['ruled_out'])} ruled out by its own falsifier)"
                           if tail["ruled_out"] else "")
                        + f"{_ruled_out([f for f in findings if f['id'] not in tail['ruled_out']])}; not called healthy; "
                        "no GPU trace given" + _not_measured(abstentions))
            if measured:
                knee = next((a for a in abstentions if a["analysis"] == "tpot_budget"), None)
                why = ("not called healthy: TPOT rises with the batch and no TPOT budget was given (give --slo tpot_p95_ms=<budget>)"
                       if knee else "not enough to call it healthy")
                return ("No serving finding in what was measured (" + "; ".join(measured[:3]) + f"){_ruled_out(findings)}, {why}; "
                        "no GPU trace given"
                        + _not_measured(abstentions))
        return f"No GPU trace given, so no timeline verdict; {what}" + _not_measured(abstentions)
    compute = min(d["accounting"]["slices_pct"].get("compute", 0.0) + d["accounting"]["slices_pct"].get("collective", 0.0)
                  for d in devices)
    odd = [a for a in abstentions if a["analysis"] in ODD]
    if findings and findings[0]["id"] == "healthy":
        return f"Healthy: {findings[0]['title']}"
    if symptom:
        return _symptom_headline(findings, abstentions, symptom, "",
                                 f"; the capture is too odd to judge: {odd[0]['reason']}" if odd else "")
    tops = _axis_tops(findings)
    if odd and not any(f["axis"] != "throughput" for f in findings):
        return f"Not enough to judge: {odd[0]['reason']}. Capture: {odd[0]['capture_hint']}"
    if tops:
        thr = tops.get("throughput")
        if (thr is not None and len(tops) == 1 and thr["impact_pct"] < MINOR_HEADLINE_PCT
                and SEVERITIES.index(thr["severity"]) < SEVERITIES.index("medium") and compute < t("healthy_compute_min_pct")):
            # A minor finding must not pose as the verdict of a mostly idle capture.
            return (f"GPU computing {pct(compute)} of the window and no measured cause explains the rest "
                    f"(largest finding: {thr['id']}, {thr['impact_pct']:.1f}%)"
                    + _not_measured(abstentions))
        if len(tops) == 1:
            return _says(next(iter(tops.values())))
        return " | ".join(f"{axis}: {_says(f)}" for axis, f in tops.items())
    if compute >= t("healthy_compute_min_pct") and abstentions:
        return (f"No problem found in what was measured (GPU computing at least {pct(compute)} of the window)"
                f"{_ruled_out(findings)}, but the verdict is incomplete: " + "; ".join(sorted({a["analysis"] for a in abstentions})) + " not measured")
    return (f"GPU computing {pct(compute)} of the window; no measured cause explains the rest (not healthy: not GPU-bound)"
            + _ruled_out(findings)
            + _not_measured(abstentions))


def _not_measured(abstentions: list[dict]) -> str:
    """'; not measured: a, b' for the abstentions' analyses (empty when none)."""
    return "; not measured: " + ", ".join(sorted({a["analysis"] for a in abstentions})) if abstentions else ""


def _ruled_out(findings: list[dict]) -> str:
    """'; ruled out by its own falsifier: a, b' for the falsified findings (empty when none): a
    headline with no standing finding still says what was measured and set aside."""
    out = [f["id"] for f in findings if f.get("falsified")]
    return f"; ruled out by its own falsifier: {', '.join(out)}" if out else ""


def _symptom_headline(findings: list[dict], abstentions: list[dict], symptom: str, where: str, tail: str = "") -> str:
    """The verdict for the symptom the user named: its top finding, or why there is none."""
    mine = [f for f in findings if catalog.answers(f, symptom) and not f.get("falsified")]
    if mine:
        return f"{symptom}: {_says(mine[0])}{where}"
    others = "; ".join(f"{a}: [{f['id']}]" for a, f in _axis_tops(findings).items())
    undecided = [a for a in abstentions if symptom == "tail" and a["analysis"] in ("steps", "step_tail", "step_annotations")]
    why = f"; not measured: {undecided[0]['reason']}" if undecided else ""
    return (f"{symptom}: no finding on this axis in what was measured{why}{where}"
            + (f" (other axes: {others})" if others else "") + tail)


def _axis_tops(findings: list[dict]) -> dict[str, dict]:
    tops: dict[str, dict] = {}
    for f in findings:
        if f["axis"] in AXES and f["axis"] not in tops and not f.get("falsified"):
            tops[f["axis"]] = f
    return tops
