"""The verdict: one table of rules turning metrics into findings and abstentions.

Every rule reads the assembled metrics (never a file), returns a finding or None,
and its thresholds live in :data:`THRESHOLDS` with the reason for each. A finding's
``impact_pct`` is the share of the analysis window (or of step time, when it says
so) that the problem explains: findings are ranked by it, largest first (Amdahl).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

SEVERITIES = ["info", "low", "medium", "high"]

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
    "collective_high_pct": (35.0, "above 35% of the window communication is the dominant term"),
    "prefill_min_steps": (20, "a tail needs at least 20 steps to be more than noise"),
    "prefill_p99_ratio": (3.0, "p99 step at 3x the median is a stall users see as a frozen stream"),
    "prefill_max_ratio": (5.0, "a single step 5x the median is a visible freeze"),
    "prefill_long_busy_min_pct": (80.0, "a long step in which the GPU is busy is GPU work (prefill); an idle one is a host stall"),
    "pageable_min_count": (1, "any pageable async copy in steady state serializes with the host"),
    "healthy_busy_min_pct": (80.0, "every device busy at least 80% of the window"),
    "host_idle_pyspy_hint_pct": (10.0, "idle host-code time above 10% of the window deserves a py-spy capture"),
    "python_frame_min_pct": (15.0, "one user frame holding 15% of the host's non-idle samples is a hot spot worth moving off the step's critical path"),
    "python_min_samples": (100, "a share needs a sampling profile (py-spy record); one dump is a snapshot per thread, not a profile"),
    "python_host_idle_min_pct": (5.0, "the GPU must idle at least 5% of the window in host code for Python to matter"),
}


MINOR_HEADLINE_PCT = 5.0  # below this share a finding is reported, but not as the headline


def t(name):
    return THRESHOLDS[name][0]


@dataclass
class Context:
    case: object
    data: dict
    per_trace: list[dict]

    @property
    def devices(self) -> list[dict]:
        return [d for p in self.per_trace for d in p["devices"]]


def severity_for(impact: float) -> str:
    if impact >= 25:
        return "high"
    if impact >= 10:
        return "medium"
    if impact >= 2:
        return "low"
    return "info"


def us(ns) -> str:
    if ns is None:
        return "n/a"
    if ns >= 1_000_000:
        return f"{ns / 1e6:,.2f} ms"
    return f"{ns / 1e3:,.1f} µs"


def _median(values):
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def finding(id, impact, title, evidence, mechanism, fix, confirm, falsifier, severity=None, denominator="window"):
    impact = round(float(max(0.0, min(100.0, impact))), 2)
    return {
        "id": id,
        "severity": severity or severity_for(impact),
        "impact_pct": impact,
        "impact_denominator": denominator,
        "title": title,
        "evidence": evidence,
        "mechanism": mechanism,
        "fix": fix,
        "confirm": confirm,
        "falsifier": falsifier,
    }


def ev(name, value, unit="", denominator=None, text=None):
    item = {"name": name, "value": value, "unit": unit}
    if denominator:
        item["denominator"] = denominator
    shown = f"{value:,.1f}".rstrip("0").rstrip(".") if isinstance(value, float) else value
    item["text"] = text or f"{name.replace('_', ' ')}: {shown}{'%' if unit == '%' else (' ' + unit) if unit else ''}" + (
        f" (of {denominator})" if denominator else "")
    return item


# ---------------------------------------------------------------------------
# Rules


def rule_launch_bound(ctx: Context):
    best = None
    for p in ctx.per_trace:
        if p["graph_replays_in_window"] > 0:
            continue
        kmed = p["kernel_median_ns"]
        if kmed is None or kmed > t("launch_kernel_median_max_ns"):
            continue
        lps = _median([pr["launches_per_step"] for pr in p["processes"]])
        n_kernels = sum(k["count"] for k in p["kernels"])
        if lps is not None:
            if lps < t("launch_per_step_min"):
                continue
        elif n_kernels < t("launch_kernels_min_no_steps"):
            continue
        gpl = _median([pr["graph_launches_per_step"] for pr in p["processes"]])
        if gpl:
            continue
        for d in p["devices"]:
            if d["busy_pct"] > t("launch_busy_max_pct") or d["window_ns"] <= 0:
                continue
            idle = d["gaps"]["total_ns"]
            lh = d["gaps"]["by_cause"]["launch"] + d["gaps"]["by_cause"]["host"]
            if idle <= 0 or lh / idle < t("launch_host_idle_share_min"):
                continue
            impact = 100.0 * d["_short_launch_host_ns"] / d["window_ns"]
            if impact < t("launch_impact_min_pct"):
                continue
            if best is None or impact > best[0]:
                best = (impact, d, p, lps, kmed)
    if best is None:
        return None
    impact, d, p, lps, kmed = best
    lps_txt = f"{lps:,.0f} kernel launches per step" if lps is not None else f"{sum(k['count'] for k in p['kernels']):,} kernels in the window"
    by = d["gaps"]["by_cause"]
    eager = (ctx.data.get("serving") or {}).get("config", {}).get("enforce_eager")
    f = finding(
        "launch_bound",
        impact,
        f"Launch-bound: {lps_txt}, median kernel {us(kmed)}, GPU busy {d['busy_pct']:.1f}%",
        [
            ev("launches_per_step", lps, "calls", "one step", text=f"{lps:,.0f} kernel launches per step (median over steps)") if lps is not None else ev("kernels_in_window", sum(k["count"] for k in p["kernels"]), "kernels"),
            ev("kernel_median", kmed, "ns", text=f"median kernel duration {us(kmed)}"),
            ev("busy_pct", d["busy_pct"], "%", f"window of {us(d['window_ns'])} on {d['id']}",
               text=f"GPU busy {d['busy_pct']:.1f}% of the {us(d['window_ns'])} window on {d['id']}"),
            ev("idle_launch_pct", round(100 * by["launch"] / d["window_ns"], 2), "%", "window", text=f"idle while the host is inside launch calls: {100 * by['launch'] / d['window_ns']:.1f}% of the window"),
            ev("idle_host_pct", round(100 * by["host"] / d["window_ns"], 2), "%", "window", text=f"idle while the host runs code outside CUDA: {100 * by['host'] / d['window_ns']:.1f}% of the window"),
            ev("short_gaps", d["_short_gap_count"], "gaps", text=f"{d['_short_gap_count']:,} gaps under 1 ms between kernels, p50 {us(d['gaps']['p50_ns'])}"),
            ev("graph_replays", p["graph_replays_in_window"], "replays", text="no CUDA graph replays in the steady state"),
        ],
        mechanism=(
            f"Each step issues {lps_txt.split(' kernel')[0] if lps is not None else 'many'} small kernels one by one from Python; "
            f"each kernel runs for about {us(kmed)}, less than it takes the host to issue the next launch, so the GPU "
            f"drains and waits. {impact:.0f}% of the window is short idle gaps where the host was launching or between launches."
        ),
        fix=(
            "Capture the decode step in a CUDA/HIP graph so one launch replays the whole step (in vLLM remove "
            "--enforce-eager; in SGLang keep CUDA graphs on and raise --cuda-graph-max-bs to cover the batch sizes in use), "
            "and fuse small elementwise kernels (torch.compile)."
        ),
        confirm=(
            "Re-capture after the change: graph replays appear, launches per step fall to a handful, and GPU busy "
            f"rises from {d['busy_pct']:.0f}% toward the kernel-bound limit; tokens/s rises in proportion."
        ),
        falsifier=(
            "If with CUDA graphs on the GPU is still idle between steps, the launch overhead was not the bottleneck: "
            "look at the host between steps (sync, scheduler, sampling in Python) instead."
        ),
    )
    if eager is True:
        f["evidence"].append(ev("enforce_eager", True, text="the engine config has enforce_eager=True: CUDA graphs are off"))
        f["fix"] = ("Remove --enforce-eager from the engine configuration: it turns CUDA graphs off, so every kernel of "
                    "every step is launched from Python. With graphs on, one launch replays the whole decode step; "
                    "then fuse small elementwise kernels (torch.compile).")
    return f


def rule_host_sync_per_step(ctx: Context):
    best = None
    for p in ctx.per_trace:
        for d in p["devices"]:
            pr = next((x for x in p["processes"] if x["pid"] == d["pid"]), None)
            if pr is None or pr["syncs_per_step"] is None or pr["syncs_per_step"] < t("sync_per_step_min"):
                continue
            if d["window_ns"] <= 0:
                continue
            impact = 100.0 * d["_after_sync_ns"] / d["window_ns"]
            if impact < t("sync_impact_min_pct"):
                continue
            if best is None or impact > best[0]:
                best = (impact, d, pr)
    if best is None:
        return None
    impact, d, pr = best
    dtoh = pr.get("dtoh_copies_per_step") or 0
    dtoh_txt = f", with {dtoh:g} device-to-host copy per step ({pr.get('dtoh_bytes_per_step') or 0:,.0f} B)" if dtoh else ""
    steps = pr["steps"]
    per_step_idle = d["_after_sync_ns"] / max(1, steps["count"])
    return finding(
        "host_sync_per_step",
        impact,
        f"Blocking host sync every step: {pr['syncs_per_step']:g} per step{dtoh_txt}; the GPU then idles {impact:.1f}% of the window",
        [
            ev("syncs_per_step", pr["syncs_per_step"], "calls", "one step"),
            ev("dtoh_copies_per_step", dtoh, "copies", "one step"),
            ev("idle_after_sync_pct", round(impact, 2), "%", "window", text=f"idle gaps that begin as a sync returns: {d['_after_sync_count']:,} gaps, {us(d['_after_sync_ns'])} in all = {impact:.1f}% of the window"),
            ev("idle_after_sync_per_step", int(per_step_idle), "ns", "one step", text=f"about {us(per_step_idle)} of GPU idle per step after the sync"),
            ev("steps", steps["count"], "steps", text=f"{steps['count']:,} steps (source: {steps['source']}), p50 {us(steps['p50_ns'])}"),
        ],
        mechanism=(
            "The host waits for the GPU to finish every step (a .cpu(), .item() or .tolist() on a GPU tensor, or an explicit "
            "synchronize), so the queue of GPU work runs dry; only after the wait returns does the host start preparing the "
            f"next step, and the GPU sits idle meanwhile: about {us(per_step_idle)} per step."
        ),
        fix=(
            "Keep the per-step decision on the GPU (stopping criteria, logits processing, sampling) and read results back "
            "asynchronously (non_blocking copy into pinned memory plus an event checked one step later), so the next step "
            "is queued before the previous one is read."
        ),
        confirm="Re-capture: the blocking sync disappears from the steady-state step (syncs per step 0, or overlapped), and the idle gap after each step shrinks to launch latency.",
        falsifier="If the sync is removed and the gaps between steps stay, the idle time is host work (scheduler, Python) rather than the wait itself: a py-spy capture of the gap decides.",
    )


def rule_pageable_memcpy(ctx: Context):
    for p in ctx.per_trace:
        c = p["copies"]
        n = c["pageable_async"]["count"]
        if n < t("pageable_min_count"):
            continue
        window = p["window"]["duration_ns"]
        impact = 100.0 * c["pageable_async"]["time_ns"] / window if window else 0.0
        return finding(
            "pageable_memcpy",
            impact,
            f"{n:,} async copies from/to pageable host memory ({c['pageable_async']['bytes']:,} B) in the steady state",
            [
                ev("pageable_async_copies", n, "copies", "window"),
                ev("pageable_async_bytes", c["pageable_async"]["bytes"], "B"),
                ev("pageable_async_time_pct", round(impact, 3), "%", "window"),
            ],
            mechanism="cudaMemcpyAsync with pageable host memory is staged through a driver bounce buffer and does not overlap with the host: the 'async' copy blocks the calling thread and serializes the stream.",
            fix="Allocate the host side pinned (torch: pin_memory=True / tensor.pin_memory(); cudaHostAlloc) and copy with non_blocking=True.",
            confirm="Re-capture: the copies show pinned host memory and the API call returns in microseconds instead of the copy's duration.",
            falsifier="If the copies are pinned and the step time does not change, these copies were off the critical path.",
            severity="medium" if impact >= 5 else "low" if impact >= 1 else "info",
        )
    return None


def rule_collective_dominant(ctx: Context):
    devs = [d for d in ctx.devices if d.get("collective_count", 0) > 0]
    if not devs:
        return None
    shares = [d["collective_share_pct"] for d in devs]
    exposed = [d["collective_exposed_pct"] for d in devs]
    mean_share = float(np.mean(shares))
    if mean_share < t("collective_share_min_pct"):
        return None
    ops = {}
    for d in devs:
        for op, v in d["collectives_by_op"].items():
            ops[op] = ops.get(op, 0.0) + v / len(devs)
    top_op = max(ops, key=ops.get) if ops else "collectives"
    per_rank = ", ".join(f"{d['id']} {d['collective_share_pct']:.0f}%" for d in devs[:8])
    return finding(
        "collective_dominant",
        mean_share,
        f"{top_op} takes {mean_share:.0f}% of the window on {len(devs)} rank(s) ({float(np.mean(exposed)):.0f}% exposed)",
        [
            ev("collective_share_pct_mean", round(mean_share, 2), "%", "window, mean over ranks"),
            ev("collective_exposed_pct_mean", round(float(np.mean(exposed)), 2), "%", "window, mean over ranks", text=f"not overlapped by compute: {float(np.mean(exposed)):.1f}% of the window"),
            ev("per_rank", per_rank, text=f"per rank: {per_rank}"),
            ev("by_op", {k: round(v, 2) for k, v in ops.items()}, "%", "window", text="by op: " + ", ".join(f"{k} {v:.1f}%" for k, v in ops.items())),
        ],
        mechanism=(
            f"Every step waits for {top_op} across {len(devs)} rank(s); with tensor parallelism this happens twice per "
            "layer, so the interconnect's bandwidth and latency set the step time rather than the GPUs' compute."
        ),
        fix=(
            "Keep tensor-parallel groups inside one NVLink/XGMI island (check nvidia-smi topo -m); if the node has two "
            "islands, run two TP=N/2 instances (data parallel), one per island, each pinned to its NUMA node with numactl. "
            "Otherwise reduce TP degree or enable the engine's custom all-reduce."
        ),
        confirm="Re-capture after re-layout: the collective share per step falls (in the seed case 46% -> 5%) and throughput per GPU rises.",
        falsifier="If the ranks are already inside one NVLink island and the collective share stays high at a smaller TP, the cost is the message size (batch) rather than the link: compare busbw with nccl-tests on the same GPUs.",
        severity="high" if mean_share >= t("collective_high_pct") else "medium",
    )


def rule_cross_island_collective(ctx: Context):
    topo = ctx.data.get("topology")
    slow_paths = [p for log in (ctx.data.get("nccl") or []) for p in log["intra_node_slow_paths"]]
    if not topo:
        if slow_paths:
            return _cross_island_from_nccl(ctx, slow_paths)
        return None
    crossing = [g for g in topo["crossing_groups"] if g["islands_spanned"] > 1 or g["crosses_slow_link"]]
    if not crossing:
        return None
    g = crossing[0]
    devs = [d for d in ctx.devices if d.get("collective_count") and d["gpu_index"] in g["group"]]
    share = float(np.mean([d["collective_share_pct"] for d in devs])) if devs else 0.0
    exposed = float(np.mean([d["collective_exposed_pct"] for d in devs])) if devs else 0.0
    islands_txt = " and ".join(str(i) for i in topo["islands"])
    rec = topo.get("recommendation") or "keep each tensor-parallel group on GPUs joined by NVLink/XGMI"
    return finding(
        "cross_island_collective",
        exposed,
        f"The collective group {g['group']} spans {g['islands_spanned']} NVLink islands ({islands_txt}); worst link {g['worst_link']}",
        [
            ev("group", g["group"], text=f"GPUs running collectives together: {g['group']}"),
            ev("islands", topo["islands"], text=f"NVLink/fabric islands from the topology matrix: {islands_txt}"),
            ev("worst_link", g["worst_link"], text=f"slowest link inside the group: {g['worst_link']} (traffic crosses PCIe and the CPU interconnect)"),
            ev("collective_share_pct", round(share, 2), "%", "window, mean over the group's ranks"),
            ev("collective_exposed_pct", round(exposed, 2), "%", "window, mean over the group's ranks"),
        ],
        mechanism=(
            f"The node is {len(topo['islands'])} NVLink islands, not one fabric; a ring or tree over all {len(g['group'])} GPUs "
            f"must cross a {g['worst_link']} link, so every all-reduce runs at PCIe/CPU-interconnect speed instead of NVLink speed."
        ),
        fix=f"Do not stretch one tensor-parallel group over islands: {rec}.",
        confirm="After the re-layout, the NCCL log shows P2P/NVLink transports only inside each communicator and the collective share of the step drops to the single-island figure.",
        falsifier="If a TP group inside one island shows the same collective share, the link is not the cause: look at message size, NCCL algorithm/protocol choice, or rank skew.",
        severity="high" if exposed >= 25 else "medium",
    )


def _cross_island_from_nccl(ctx: Context, slow_paths: list[dict]):
    devs = [d for d in ctx.devices if d.get("collective_count")]
    exposed = float(np.mean([d["collective_exposed_pct"] for d in devs])) if devs else 0.0
    hops = ", ".join(f"{p['from_dev']}->{p['to_dev']} via {p['via']}" for p in slow_paths[:6])
    return finding(
        "cross_island_collective",
        exposed,
        f"NCCL routes {len(slow_paths)} intra-node hop(s) through SHM/network instead of P2P ({hops})",
        [
            ev("slow_hops", len(slow_paths), "hops", text=f"intra-node hops not using P2P: {hops}"),
            ev("collective_exposed_pct", round(exposed, 2), "%", "window, mean over ranks") if devs else ev("trace", "none", text="no GPU trace: time share not measured"),
        ],
        mechanism="Some GPUs of the communicator cannot reach each other by NVLink/P2P (different islands or sockets, or P2P disabled), so NCCL stages those hops through host shared memory or the NIC: every collective runs at the speed of that hop.",
        fix="Keep each tensor-parallel group inside one NVLink island (nvidia-smi topo -m shows them) and run one instance per island pinned with numactl; check that NCCL_P2P_DISABLE / NCCL_P2P_LEVEL are not set.",
        confirm="The NCCL INFO log shows P2P (or NVLS) on every intra-node hop after the change, and the collective share of the step drops.",
        falsifier="If P2P is impossible on this box anyway (PCIe-only, no peer access) and the share is unchanged with a smaller group, the cost is inherent to the hardware: reduce the TP degree instead.",
        severity="high" if exposed >= 25 else "medium",
    )


def rule_python_host_overhead(ctx: Context):
    prof = ctx.data.get("host_profile")
    if not prof or not prof["user_frames"]:
        return None
    top = prof["user_frames"][0]
    if top["share_pct"] < t("python_frame_min_pct") or prof["total_samples"] < t("python_min_samples"):
        return None
    devs = [d for d in ctx.devices if d["window_ns"]]
    if devs:
        d = max(devs, key=lambda x: x["gaps"]["by_cause"]["host"] / x["window_ns"])
        host_idle = 100.0 * d["gaps"]["by_cause"]["host"] / d["window_ns"]
        if host_idle < t("python_host_idle_min_pct"):
            return None
        impact = min(host_idle, top["share_pct"])
        denom = "window"
        link = f"the GPU ({d['id']}) idles {host_idle:.1f}% of the window while the host is in no CUDA call"
    else:
        impact = top["share_pct"]
        denom = "host samples (no GPU trace to weigh it against)"
        link = "no GPU trace in the case: the share is of the host's samples only"
    sync_txt = f"; {top['sync_pct']:.1f}% of samples are inside a host sync it calls (.cpu()/.item()/synchronize)" if top["calls_sync"] else ""
    return finding(
        "python_host_overhead",
        impact,
        f"Python on the critical path: {top['frame']} holds {top['share_pct']:.0f}% of host samples{sync_txt}",
        [
            ev("frame", top["frame"], text=f"hot user frame: {top['frame']}"),
            ev("share_pct", top["share_pct"], "%", f"{prof['total_samples']:,} non-idle py-spy samples", text=f"{top['share_pct']:.1f}% of {prof['total_samples']:,} non-idle py-spy samples are inside it ({top['self_pct']:.1f}% in its own code)"),
            ev("calls_sync", top["calls_sync"], text="it calls a host-syncing operation" if top["calls_sync"] else "no host sync below it"),
            ev("host_idle", link, text=link),
        ],
        mechanism=(
            f"Each step runs {top['frame'].split(' (')[0]} in Python on the host"
            + (", and it waits for the GPU inside it (a .cpu()/.item() read-back)" if top["sync_pct"] >= 1.0 else
               ", and it calls a host-syncing operation" if top["calls_sync"] else "")
            + "; while it runs nothing is queued, so the GPU idles for its whole duration."
        ),
        fix="Move the work onto the GPU (vectorize the logits processor / stopping check over the batch with torch ops, no .cpu()/.item()), or run it asynchronously one step behind so the next step is launched first.",
        confirm="py-spy record again under the same load: the frame's share drops, and the trace's idle time with no CUDA call (host cause) shrinks by about the same amount; tokens/s rises.",
        falsifier="If the frame is made cheap and the GPU idle time with no CUDA call does not change, the time is elsewhere (scheduler, tokenizer, another thread holding the GIL): compare py-spy with --idle and per-thread.",
        denominator=denom,
    )


def rule_nccl_errors(ctx: Context):
    logs = ctx.data.get("nccl") or []
    warns = [(log, w) for log in logs for w in log["warnings"]]
    if not warns:
        return None
    first_log, first = warns[0]
    kinds: dict[str, int] = {}
    for _, w in warns:
        key = w["message"].split(":")[0][:60]
        kinds[key] = kinds.get(key, 0) + 1
    ranks = sorted({f"{w['host']}:{w['pid']} [dev {w['cuda_dev']}]" for _, w in warns})
    net = any("NET/IB" in w["message"] or "socket" in w["message"].lower() for _, w in warns)
    return finding(
        "nccl_errors",
        100.0,
        f"{len(warns)} NCCL WARN line(s): {first['message'][:140]}",
        [
            ev("warn_count", len(warns), "lines", text=f"{len(warns)} WARN lines from {len(ranks)} process(es)"),
            ev("first", first["message"], text=f"first: [{first.get('time') or 'no timestamp'}] {first['host']}:{first['pid']} dev {first['cuda_dev']} {first.get('location') or ''}: {first['message']}"),
            ev("kinds", kinds, text="by message: " + "; ".join(f"{k} x{n}" for k, n in kinds.items())),
            ev("ranks", ranks[:8], text="from: " + ", ".join(ranks[:8]) + (" ..." if len(ranks) > 8 else "")),
        ],
        mechanism=(
            "A collective failed or could not connect: every rank of the communicator blocks in the same collective, so "
            "the whole server stalls or dies, whatever the other metrics say."
            + (" The messages point at the network path (IB completion errors / socket connects)." if net else "")
        ),
        fix=(
            "Fix the failing path first: for NET/IB completion errors check the HCA/port named (ibstat, link flaps, "
            "NCCL_IB_HCA / GID index for RoCE); for refused or timed-out socket connects check that every node reaches "
            "the master address/port and NCCL_SOCKET_IFNAME names the right interface."
            if net else "Read the first WARN's source location and message; re-run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the failing step."
        ),
        confirm="After the fix, all ranks log Init COMPLETE and no WARN lines; nccl-tests all_reduce_perf across the same nodes completes with the expected busbw.",
        falsifier="If nccl-tests between the same GPUs and nodes runs clean, the transport is healthy and the failure is the application's (a rank that exited first, mismatched collectives, a timeout set too low).",
        severity="high",
        denominator="run (a failed collective stops every step)",
    )


def rule_prefill_stall(ctx: Context):
    best = None
    for p in ctx.per_trace:
        for pr in p["processes"]:
            s = pr["steps"]
            if s["count"] < t("prefill_min_steps") or not s["p50_ns"]:
                continue
            r99 = s["p99_ns"] / s["p50_ns"]
            rmax = s["max_ns"] / s["p50_ns"]
            if r99 < t("prefill_p99_ratio") and rmax < t("prefill_max_ratio"):
                continue
            best_cand = (rmax, pr, p, r99)
            if best is None or rmax > best[0]:
                best = best_cand
    if best is None:
        return None
    rmax, pr, p, r99 = best
    info = pr.get("_long_steps") or {}
    if not info.get("count"):
        return None
    if not (info.get("prefill_labelled") or info.get("busy_pct", 0) >= t("prefill_long_busy_min_pct")):
        return None
    s = pr["steps"]
    impact = info["excess_pct"]
    chunked = (ctx.data.get("serving") or {}).get("config", {}).get("enable_chunked_prefill")
    label = "labelled prefill by NVTX" if info.get("prefill_labelled") else f"GPU busy {info['busy_pct']:.0f}% during them (GPU work, not a host stall)"
    f = finding(
        "prefill_stall",
        impact,
        f"Step tail: p99 {us(s['p99_ns'])} and max {us(s['max_ns'])} vs p50 {us(s['p50_ns'])}; {info['count']} long steps, {label}",
        [
            ev("step_p50", s["p50_ns"], "ns", text=f"step p50 {us(s['p50_ns'])}"),
            ev("step_p99_over_p50", round(r99, 2), "x"),
            ev("step_max_over_p50", round(rmax, 2), "x"),
            ev("long_steps", info["count"], "steps", f"{s['count']} steps", text=f"{info['count']} of {s['count']} steps longer than 3x p50"),
            ev("long_step_excess_pct", round(impact, 2), "%", "total step time", text=f"time above p50 in those steps: {impact:.1f}% of all step time"),
        ],
        mechanism=(
            "A new request's whole prompt is prefilled in one step; every sequence that is decoding waits for it, so the "
            "inter-token latency of everyone spikes for one step. Mean latency barely moves; p99 and max do."
        ),
        fix="Enable chunked prefill with a token budget (vLLM: --enable-chunked-prefill --max-num-batched-tokens 2048; SGLang: --chunked-prefill-size) so a prompt is split across decode steps.",
        confirm="Record every inter-token interval and correlate the spikes with long-prompt admissions; after chunking, max step time drops to about one chunk's work while the p50 rises slightly.",
        falsifier="If the long steps do not line up with prefills (or the GPU is idle during them), look for preemption/recompute, a periodic host stall (GC, metrics flush), or the network path: chunking will not help.",
        denominator="total step time",
    )
    if chunked is not None:
        f["evidence"].append(ev("chunked_prefill", chunked, text="engine config: chunked prefill " + (
            "enabled: lower the chunk (max_num_batched_tokens) to bound a step" if chunked else "disabled")))
    return f


def rule_healthy(ctx: Context, findings: list[dict], abstentions: list[dict]):
    devs = ctx.devices
    if not devs:
        return None
    if any(SEVERITIES.index(f["severity"]) >= SEVERITIES.index("medium") for f in findings):
        return None
    if any(a["analysis"] in ("gap_causes", "graph_replays") for a in abstentions):
        return None
    if min(d["busy_pct"] for d in devs) < t("healthy_busy_min_pct"):
        return None
    busy = min(d["busy_pct"] for d in devs)
    extra = []
    stats = (ctx.data.get("serving") or {}).get("stats")
    if stats:
        extra = [ev("queue", stats["waiting_share_pct"], "%", f"{stats['samples']} engine stats samples",
                    text=f"requests waiting in {stats['waiting_share_pct']:.0f}% of {stats['samples']} stats samples "
                         f"(mean {stats['waiting_mean']}, max {stats['waiting_max']}); running mean {stats['running_mean']}, "
                         f"KV cache usage p50 {stats['kv_usage_p50']}% max {stats['kv_usage_max']}%")]
    f = finding(
        "healthy",
        0.0,
        f"GPU-bound and steady: every device busy at least {busy:.1f}% of the window; no launch, sync, copy or communication problem found",
        [ev("min_busy_pct", busy, "%", "window")],
        mechanism="The GPUs are doing work most of the time; the host keeps the queue full. Faster kernels or more capacity are the remaining levers.",
        fix="Treat it as a capacity question: check with Little's law (requests in system = arrival rate x time in system) whether the load exceeds what this many replicas serve, and whether prefix caching or FP8 would remove work.",
        confirm="Throughput grows with batch until KV cache or compute saturates; queue wait, not step time, dominates the latency tail.",
        falsifier="If latency is high while the GPU is this busy and the queue is empty, the batch is too large for the latency target (TPOT rises with concurrency): cap max-num-seqs.",
        severity="info",
    )
    f["evidence"].extend(extra)
    return f


RULES: list[tuple[str, Callable]] = [
    ("launch_bound", rule_launch_bound),
    ("host_sync_per_step", rule_host_sync_per_step),
    ("pageable_memcpy", rule_pageable_memcpy),
    ("collective_dominant", rule_collective_dominant),
    ("cross_island_collective", rule_cross_island_collective),
    ("python_host_overhead", rule_python_host_overhead),
    ("nccl_errors", rule_nccl_errors),
    ("prefill_stall", rule_prefill_stall),
]


# ---------------------------------------------------------------------------
# Abstentions

AMD_FORMATS = ("rocpd", "rpd", "rocprof_csv")


def capture_cmd(fmt: str | None, what: str) -> str:
    """The capture command that would decide an abstention, for the vendor of the trace."""
    if fmt in AMD_FORMATS:
        return {
            "steps": "mark each engine step with roctxRangePush('step')/roctxRangePop() and capture with `rocprofv3 --runtime-trace --marker-trace --output-format rocpd -- <server command>`, or pass --step-range REGEX naming an existing range",
            "api": "capture with `rocprofv3 --runtime-trace --output-format rocpd -- <server command>` (HIP API tracing on)",
            "graphs": "capture with `rocprofv3 --runtime-trace --kernel-trace --output-format rocpd` so graph kernels are traced",
        }[what]
    return {
        "steps": "wrap each engine step in an NVTX range (torch.cuda.nvtx.range_push('step')) and capture with `nsys profile --trace=cuda,nvtx,osrt ...`, or pass --step-range REGEX naming an existing range",
        "api": "capture with `nsys profile --trace=cuda,nvtx,osrt ...` (CUDA API tracing on)",
        "graphs": "re-capture with `nsys profile --trace=cuda,nvtx --cuda-graph-trace=graph` (one interval per replay) or `--cuda-graph-trace=node` (every kernel)",
    }[what]


def abstentions_for(ctx: Context) -> list[dict]:
    out = []
    for p in ctx.per_trace:
        inferred = [pr for pr in p["processes"] if pr["steps"]["source"] in ("sync", "graph_launch")]
        if inferred:
            src = ", ".join(sorted({pr["steps"]["source"] for pr in inferred}))
            out.append(
                {
                    "analysis": "step_annotations",
                    "scope": ", ".join(f"pid {pr['pid']}" for pr in inferred[:8]),
                    "reason": f"no annotation ranges mark the steps: they were inferred from the periodic {src} pattern, "
                              "so prefill and decode steps cannot be told apart by name",
                    "capture_hint": capture_cmd(p["meta"].get("format"), "steps"),
                }
            )
        for pr in p["processes"]:
            if pr["steps"]["source"] == "none":
                out.append(
                    {
                        "analysis": "steps",
                        "scope": f"pid {pr['pid']}",
                        "reason": "no NVTX step ranges and no periodic sync or graph launch: per-step metrics (launches, syncs per step, step tail) not measured",
                        "capture_hint": capture_cmd(p["meta"].get("format"), "steps"),
                    }
                )
        if not p["has_api"]:
            out.append(
                {
                    "analysis": "gap_causes",
                    "scope": "trace",
                    "reason": "the trace holds no CUDA API calls: idle time cannot be attributed to launches, syncs or host code",
                    "capture_hint": capture_cmd(p["meta"].get("format"), "api"),
                }
            )
        if p["graph_launches_in_window"] and not p["graph_replays_in_window"]:
            mode = p["meta"].get("graph_trace_mode")
            kernels_in_graph = mode == "node"
            if not kernels_in_graph:
                out.append(
                    {
                        "analysis": "graph_replays",
                        "scope": "trace",
                        "reason": f"{p['graph_launches_in_window']} graph launches but no graph replay or graph-node records: GPU time inside graphs is missing and busy % is a lower bound",
                        "capture_hint": capture_cmd(p["meta"].get("format"), "graphs"),
                    }
                )
    coll_devs = [d for d in ctx.devices if d.get("collective_count", 0) > 0]
    if coll_devs and not getattr(ctx.case, "topologies", None):
        out.append(
            {
                "analysis": "topology",
                "scope": "case",
                "reason": "collectives run but no topology matrix was given: cannot tell whether the communicator crosses a slow (SYS/NODE/PHB) link",
                "capture_hint": "add `nvidia-smi topo -m > topo.txt` (AMD: `rocm-smi --showtopo > topo.txt`) and the NCCL_DEBUG=INFO log to the bundle",
            }
        )
    if not any(c.format in ("raw", "speedscope") for c in getattr(ctx.case, "pyspy", [])):
        hosty = [d for d in ctx.devices if d["window_ns"] and 100.0 * d["gaps"]["by_cause"]["host"] / d["window_ns"] >= t("host_idle_pyspy_hint_pct")]
        if hosty:
            d = max(hosty, key=lambda x: x["gaps"]["by_cause"]["host"])
            out.append(
                {
                    "analysis": "host_frames",
                    "scope": d["id"],
                    "reason": f"{100.0 * d['gaps']['by_cause']['host'] / d['window_ns']:.0f}% of the window the GPU idles while the host is in no CUDA call: which Python code runs then is not measured",
                    "capture_hint": f"py-spy record --format raw --rate 200 --duration 30 -o pyspy.txt --pid {d['pid']} (during the same load), and add it to the bundle",
                }
            )
    return out


def evaluate(ctx: Context) -> tuple[list[dict], list[dict]]:
    findings = [f for _, rule in RULES if (f := rule(ctx)) is not None]
    abstentions = abstentions_for(ctx)
    healthy = rule_healthy(ctx, findings, abstentions)
    if healthy:
        findings.append(healthy)
    # Ties: the root cause before its symptom (a crossing link explains the collective share).
    order = {"cross_island_collective": 0}
    findings.sort(key=lambda f: (-f["impact_pct"], -SEVERITIES.index(f["severity"]), order.get(f["id"], 1)))
    # Healthy only fires when nothing reaches medium: it is then the verdict, first.
    findings.sort(key=lambda f: f["id"] != "healthy")
    for p in ctx.per_trace:
        for pr in p["processes"]:
            pr.pop("_long_steps", None)
    return findings, abstentions


def headline(findings: list[dict], abstentions: list[dict], data: dict) -> str:
    if not data["devices"]:
        topo = data.get("topology")
        what = f"topology: {len(topo['gpus'])} GPUs in islands {topo['islands']}" if topo else "side artifacts only"
        if findings:
            top = findings[0]
            return f"[{top['id']}] {top['title']} (no GPU trace given; {what})"
        return f"No GPU trace given, so no timeline verdict; {what}"
    busy = [d["busy_pct"] for d in data["devices"]]
    if findings:
        top = findings[0]
        if top["id"] == "healthy":
            return f"Healthy: {top['title']}"
        if top["impact_pct"] < MINOR_HEADLINE_PCT and top["id"] != "nccl_errors" and busy and min(busy) < t("healthy_busy_min_pct"):
            # A minor finding must not pose as the verdict of a mostly idle capture.
            return (f"GPU busy {min(busy):.0f}% of the window and no measured cause explains the idle time "
                    f"(largest finding: {top['id']}, {top['impact_pct']:.1f}%)"
                    + ("; not measured: " + ", ".join(sorted({a['analysis'] for a in abstentions})) if abstentions else ""))
        return f"[{top['id']}] {top['title']} — explains {top['impact_pct']:.0f}% of the {top['impact_denominator']}"
    if abstentions:
        return "No problem found in what was measured, but the verdict is incomplete: " + "; ".join(
            a["analysis"] for a in abstentions
        ) + " not measured"
    if busy:
        return f"GPU busy {min(busy):.0f}% of the window; no measured cause explains the idle time (not healthy: not GPU-bound)"
    return "No problem found in what was measured"
