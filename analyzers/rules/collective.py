"""Collective rules: communication that no compute hides, its cause in the topology, and NCCL's
own warnings. Each claims (or, for NCCL warnings, states) what the collective kernels cost.

The advice depends on what the collectives are for (capture_kind.collective_workload: tensor-parallel
inference, data-parallel or FSDP training, pipeline stages, all-to-all) and on whether their time
is data moving or ranks waiting: when ranks spend at least ``skew_wait_share_min_pct`` of the matched
calls' time waiting for the last rank to start (collectives.rank_skew), the late rank and what it
did before are named, not the link. Below the dominant line the same reading stands on its own
(the ``collective_dominant_late_rank`` texts) when that waiting claims at least ``skew_wait_window_min_pct``
of the window: a capture whose ranks idle in collectives for a late one is not called healthy. Vendor
words (the topology command, the bandwidth test, the fabric, the library) follow the capture's vendor."""

from __future__ import annotations

import re

import numpy as np

from tracetriage.analyzers import catalog
from tracetriage.analyzers.capture_kind import collective_workload
from tracetriage.analyzers.evidence import ev, severity_for
from tracetriage.analyzers.metrics import CollectiveSkew
from tracetriage.analyzers.nccl import SlowPath
from tracetriage.analyzers.rules.collective_bus import bus_reading
from tracetriage.analyzers.rules.context import Context, Rule, t, window_denominator
from tracetriage.analyzers.topology import CrossingGroup, RingModel, TopologySummary, ring_model
from tracetriage.wording import fmt_ns, pct, plural, short_middle

# name: (value, why)
THRESHOLDS = {
    "collective_share_min_pct": (20.0, ("the TensorBoard/TraceLens rule of thumb flags communication above 10-20% of step time; "
                                        "20% is where re-layout pays")),
    "skew_wait_share_min_pct": (50.0, ("at least half of the matched collectives' time is ranks waiting for the last one to "
                                       "start: the wait, not the transfer, is what the collectives cost")),
    "skew_wait_window_min_pct": (2.0, ("ranks waiting for a late rank in at least 2% of the window (mean over the ranks) "
                                       "is named even when the collectives are under the dominant line: 2% is the "
                                       "smallest impact graded above info (evidence.severity_for), the least that "
                                       "keeps a capture from being called healthy")),
    "collective_op_named_min_pct": (10.0, ("the headline's share is the sum over every collective op: an op holding at "
                                           "least a tenth of the collective time is named beside the top one (FSDP's "
                                           "ReduceScatter beside its AllGather), so the share is not read as one op's")),
}

# the words that name a vendor's tools: the fields every collective text is filled with
VENDOR_WORDS = {
    "cuda": {"topo_cmd": "nvidia-smi topo -m", "bench": "nccl-tests", "fabric": "NVLink", "lib": "NCCL",
             "profiler": "nsys profile --trace=cuda,nvtx,osrt", "call_trace": ""},
    # a rocprofv3 capture of generic RCCL kernels names no call: its RCCL API trace does
    "rocm": {"topo_cmd": "rocm-smi --showtopo", "bench": "rccl-tests", "fabric": "XGMI", "lib": "RCCL",
             "profiler": "rocprofv3 --runtime-trace --marker-trace",
             "call_trace": "; rocprofv3 --rccl-trace records each RCCL call by name"},
}
WORKLOAD_WORDS = {
    "tensor_parallel": "tensor-parallel inference", "data_parallel": "data-parallel training (DDP)",
    "fsdp": "sharded data-parallel training (FSDP/ZeRO)", "pipeline": "pipeline-parallel stages",
    "all_to_all": "an all-to-all (sharded embeddings, experts or sequence parallelism)",
}


def vendor_words(ctx: Context) -> dict[str, str]:
    """The vendor's tool names for the capture (VENDOR_WORDS): ROCm's for a ROCm trace or an RCCL
    log, else CUDA's (also when the vendor is unknown)."""
    rccl = any(log.library == "RCCL" for log in (ctx.data.get("nccl") or []))
    return VENDOR_WORDS["rocm" if ctx.kind.get("vendor") == "rocm" or rccl else "cuda"]


def rule_cross_island_collective(ctx: Context):
    """A collective group over more than one island (or over a slow link): claims, of each rank's collective
    time no compute hides, the excess over what the same collectives take at the island's link speed
    (topology.ring_model; all of it when the links' bandwidths are not known), so ``impact_pct`` is what the
    re-layout removes and ``explains_pct`` the measured collective share."""
    topo = ctx.data.get("topology")
    slow_paths = [path for log in (ctx.data.get("nccl") or []) for path in log.intra_node_slow_paths]
    if not topo:
        return _cross_island_from_nccl(ctx, slow_paths) if slow_paths else None
    group = next((group for group in topo.crossing_groups if group.islands_spanned > 1 or group.crosses_slow_link), None)
    if group is None:
        return None
    model = ring_model(topo.links, topo.islands, group.group)
    if model is not None and model.island_fraction >= 1.0:
        return None  # a ring over the group's fastest links runs at the island's speed: the layout costs nothing
    devices = [device for device in ctx.devices if device.collective_count and device.gpu_index in group.group]
    taken = ctx.ledger.take("cross_island_collective", _excess_wants(devices, model))
    impact = ctx.ledger.impact_pct(taken)
    share = float(np.mean([device.collective_share_pct for device in devices])) if devices else 0.0
    evidence = _island_evidence(ctx, topo, group, devices, impact, share, model) + _nccl_hop_evidence(slow_paths)
    evidence += collective_op_evidence(ctx)
    skew = ctx.data.get("collective_skew")
    if isinstance(skew, CollectiveSkew) and skew.matched:
        evidence += _skew_evidence(skew)  # a late rank, not the link, when the ranks mostly wait (falsified_when)
    return catalog.make("cross_island_collective", impact, _island_fields(ctx, topo, group, impact, share, model), evidence,
                        severity="high" if impact >= 25 else "medium", denominator=window_denominator(ctx), kind=ctx.kind,
                        variant="modelled" if model else None, explains=share if model and devices else None)


def _excess_wants(devices: list, model: RingModel | None) -> dict[str, tuple]:
    """Each rank's claim on its exposed collective time: its collective time x (1 - the island fraction) when
    modelled, all of it otherwise."""
    if model is None:
        return {device.id: (["collective"], None) for device in devices}
    return {device.id: (["collective"], (1.0 - model.island_fraction) * device.collective_ns) for device in devices}


def _island_evidence(ctx: Context, topo: TopologySummary, group: CrossingGroup, devices: list, impact: float, share: float,
                     model: RingModel | None) -> list[dict]:
    """The group, the islands, its worst link, the collective share, the claim and what the re-layout removes."""
    exposed = float(np.mean([100.0 * device.slices["collective"] / device.window_ns for device in devices
                             if device.window_ns] or [0.0]))
    islands_txt = " and ".join(str(i) for i in topo.islands)
    return [
        ev("group", group.group, text=f"GPUs running collectives together: {group.group}"),
        ev("islands", topo.islands, text=f"{vendor_words(ctx)['fabric']}/fabric islands from the topology matrix: "
                                         f"{islands_txt}"),
        ev("worst_link", group.worst_link, text=f"slowest link inside the group: {group.worst_link} (traffic crosses "
                                                "PCIe and the CPU interconnect)"),
        ev("collective_share_pct", round(share, 2), "%", "window, mean over the group's ranks",
           text=f"collectives run {pct(share)} of the window (mean over the group's ranks)"),
        _claimed(ctx, impact, exposed, model),
        _recoverable(ctx, impact, share, model),
    ]


def _island_fields(ctx: Context, topo: TopologySummary, group: CrossingGroup, impact: float, share: float,
                   model: RingModel | None) -> dict:
    """The catalog fields of cross_island_collective; the ring model's links and island figure when modelled."""
    fields = {"group": group.group, "spanned": group.islands_spanned, "islands": " and ".join(str(i) for i in topo.islands),
              "worst": group.worst_link, "n_islands": len(topo.islands), "group_size": len(group.group),
              "recommendation": topo.recommendation or "keep each tensor-parallel group on GPUs joined by NVLink/XGMI",
              "claimed": pct(impact), "share": pct(share), **vendor_words(ctx)}
    if model is not None:
        fields.update({"ring_link": model.ring_link, "island_link": model.island_link,
                       "island_share": pct(share * model.island_fraction)})
    return fields


def _nccl_hop_evidence(slow_paths: list[SlowPath]) -> list[dict]:
    if not slow_paths:
        return []
    hops = ", ".join(f"GPU {path.from_dev} → GPU {path.to_dev} via {path.via}" for path in slow_paths[:6])
    return [ev("slow_hops", len(slow_paths), "hops", None,
               text=f"the NCCL log routes {plural(len(slow_paths), 'intra-node hop')} without P2P: {hops}")]


def collective_op_evidence(ctx: Context) -> list[dict]:
    devices = [device for device in ctx.devices if device.collective_count > 0]
    if not devices:
        return []
    ops: dict[str, float] = {}
    for device in devices:
        for op, share in device.collectives_by_op.items():
            ops[op] = ops.get(op, 0.0) + share / len(devices)
    per_rank = ", ".join(f"{device.id} {device.collective_share_pct:.0f}%" for device in devices[:8])
    return [
        ev("per_rank", per_rank, "%", "window of each rank", text=f"collective share per rank: {per_rank}"),
        ev("by_op", {op: round(share, 2) for op, share in ops.items()}, "%", "window, mean over ranks",
           text="by op: " + ", ".join(f"{op} {pct(share)}" for op, share in ops.items())),
    ]


def _claimed(ctx: Context, impact: float, exposed: float, model: RingModel | None) -> dict:
    """What the finding claims: the exposed collective time, or (modelled) the part of it the re-layout removes."""
    if model is None:
        return ev("collective_claimed_pct", round(impact, 2), "%", window_denominator(ctx),
                  text=f"communication no compute hides: {pct(impact)} of the window")
    return ev("collective_claimed_pct", round(impact, 2), "%", window_denominator(ctx),
              text=f"claimed: the part of the collective time the re-layout removes, {pct(impact)} of the window "
                   f"(communication no compute hides: {pct(exposed)})")


def _recoverable(ctx: Context, impact: float | None = None, share: float = 0.0, model: RingModel | None = None) -> dict:
    """What the re-layout removes. With the link classes' bandwidths known (topology.ring_model): the collective
    time above what the same collectives take at the island's link speed (a bus-bandwidth model of the ring),
    bounded by the time no compute hides; without them an upper bound the capture cannot narrow."""
    if model is None or impact is None:
        return ev("recoverable_pct", None, "%", window_denominator(ctx),
                  text="an upper bound: the re-layout removes only the time above what a group inside one island spends "
                       "on its collectives, which this capture does not measure (a capture of one group on one island does)")
    return ev("recoverable_pct", round(impact, 2), "%", window_denominator(ctx),
              text=f"removable by the re-layout: about {pct(impact)} of the window. Model: a ring collective moves "
                   f"2(n-1)/n of its bytes through every hop, so its time is set by the ring's slowest hop; this ring "
                   f"must cross {model.ring_link} (about {model.ring_gbps:,.0f} GB/s each way), a ring inside an island "
                   f"runs on {model.island_link} (about {model.island_gbps:,.0f} GB/s), so the same collectives would "
                   f"take {pct(100.0 * model.island_fraction)} of their time there: {pct(share * model.island_fraction)} "
                   f"of the window instead of {pct(share)}; the excess, no more "
                   "than the time no compute hides, is what the re-layout removes (bandwidth-bound: latency left out, "
                   "so an upper estimate)")


def _cross_island_from_nccl(ctx: Context, slow_paths: list[SlowPath]):
    devices = [device for device in ctx.devices if device.collective_count]
    taken = ctx.ledger.take("cross_island_collective", {device.id: (["collective"], None) for device in devices})
    impact = ctx.ledger.impact_pct(taken)
    hops = ", ".join(f"{path.from_dev}->{path.to_dev} via {path.via}" for path in slow_paths[:6])
    evidence = _nccl_hop_evidence(slow_paths)
    if devices:
        evidence.append(ev("collective_claimed_pct", round(impact, 2), "%", window_denominator(ctx),
                           text=f"communication no compute hides: {pct(impact)} of the window"))
        evidence.append(_recoverable(ctx))
    else:
        evidence.append(ev("trace", None, "", None, text="no GPU trace: the time share is not measured"))
    return catalog.make(
        "cross_island_collective", impact,
        {"hops_count": len(slow_paths), "hop_word": "hop" if len(slow_paths) == 1 else "hops", "hops": hops,
         **vendor_words(ctx)},
        evidence, severity="high" if impact >= 25 else "medium",
        denominator=window_denominator(ctx) if devices else "window (not measured: no GPU trace)",
        entry="cross_island_collective_nccl", kind=ctx.kind)


def rule_collective_dominant(ctx: Context):
    devices = [device for device in ctx.devices if device.collective_count > 0]
    if not devices:
        return None
    mean_share = float(np.mean([device.collective_share_pct for device in devices]))
    if mean_share < t("collective_share_min_pct"):
        return _late_rank_wait(ctx, devices, mean_share)
    taken = ctx.ledger.take("collective_dominant", {device.id: (["collective"], None) for device in devices})
    impact = ctx.ledger.impact_pct(taken)
    ops, top_op, ranks, workload = _collectives_read(ctx, devices)
    evidence = [
        ev("collective_share_pct_mean", round(mean_share, 2), "%", "window, mean over ranks",
           text=f"collective kernels run {pct(mean_share)} of the window (mean over {ranks})"),
        ev("collective_claimed_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"not hidden by compute: {pct(impact)} of the window"),
        *ops,
        ev("collective_workload", workload.kind, text=f"what the collectives are for: "
                                                      f"{WORKLOAD_WORDS.get(workload.kind, 'not known')} ({workload.why})"),
    ]
    skew = ctx.data.get("collective_skew")
    fields = {"op": top_op, **_ops_words(ops[1].value), "share": pct(mean_share), "ranks": ranks,
              "claimed": pct(impact), **vendor_words(ctx)}
    variant = workload.kind
    if isinstance(skew, CollectiveSkew) and skew.matched:
        evidence += _skew_evidence(skew)
        if (skew.wait_share_pct or 0.0) >= t("skew_wait_share_min_pct") and (skew.late_rank or skew.partial):
            variant = "skew" if skew.late_rank else "skew_partial"
            fields.update(_skew_fields(skew) if skew.late_rank else _partial_fields(skew))
    bus = bus_reading(devices, skew if isinstance(skew, CollectiveSkew) else None, fields)
    evidence += bus.evidence
    if bus.waiting and not (variant or "").startswith("skew"):  # the kernels wait for a peer, not for the link
        variant = "waiting"
        fields.update(bus.fields)
    return catalog.make("collective_dominant", impact, fields, evidence, severity=severity_for(impact),
                        denominator=window_denominator(ctx), kind=ctx.kind, variant=variant)


def _collectives_read(ctx: Context, devices: list):
    """What both readings of the collectives say first: the per-op evidence, the op with most time,
    the ranks counted, and the workload the ops are for."""
    ops = collective_op_evidence(ctx)
    by_op = ops[1].value
    top_op = max(by_op, key=by_op.get) if by_op else "collectives"
    return ops, top_op, plural(len(devices), "rank"), collective_workload(ctx.case, by_op, ctx.kind.get("workload"))


def _ops_words(by_op: dict[str, float]) -> dict:
    """The collective ops that make up the share a headline states, in words (``ops``), with the verb that agrees
    (``takes``): the op with most time and every other holding at least ``collective_op_named_min_pct`` of the
    collective time, most first; the generic kernels whose call the trace does not record ("Collective") last, as
    such, when a named op is there too. One op reads as before ("AllReduce takes")."""
    total = sum(by_op.values())
    if not total:
        return {"ops": "collectives", "takes": "take"}
    top = max(by_op, key=by_op.get)
    kept = [op for op in sorted(by_op, key=by_op.get, reverse=True)
            if op == top or 100.0 * by_op[op] / total >= t("collective_op_named_min_pct")]
    named = [op for op in kept if op != "Collective"]
    words = named + (["collectives whose call the trace does not record"] if named and "Collective" in kept else [])
    words = words or kept
    text = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return {"ops": text, "takes": "takes" if len(words) == 1 else "take"}


def _late_rank_wait(ctx: Context, devices: list, mean_share: float):
    """Collectives under the dominant line whose time is mostly ranks waiting for a late one
    (skew_wait_share_min_pct): claims, of each rank's collective time no compute hides, its waiting in the
    matched calls (CollectiveSkew.wait_ns), and fires when that is at least skew_wait_window_min_pct of the
    window (mean over the case's devices, the finding's impact); else None."""
    skew = ctx.data.get("collective_skew")
    if not (isinstance(skew, CollectiveSkew) and skew.matched and skew.late_rank
            and (skew.wait_share_pct or 0.0) >= t("skew_wait_share_min_pct")):
        return None
    waits = {device.id: ctx.ledger.available(device.id, ["collective"], skew.wait_ns.get(device.id, 0)) for device in devices}
    if ctx.ledger.impact_pct(waits) < t("skew_wait_window_min_pct"):
        return None
    taken = ctx.ledger.take("collective_dominant", {device_id: (["collective"], ns) for device_id, ns in waits.items() if ns})
    impact = ctx.ledger.impact_pct(taken)
    ops, top_op, ranks, workload = _collectives_read(ctx, devices)
    evidence = [
        ev("collective_share_pct_mean", round(mean_share, 2), "%", "window, mean over ranks",
           text=f"collective kernels run {pct(mean_share)} of the window (mean over {ranks}), under the "
                f"{t('collective_share_min_pct'):g}% line of a dominant collective"),
        ev("collective_claimed_pct", round(impact, 2), "%", window_denominator(ctx),
           text=f"ranks waiting for the last one to start, in collective time no compute hides: {pct(impact)} of the window"),
        *ops,
        ev("collective_workload", workload.kind, text=f"what the collectives are for: "
                                                      f"{WORKLOAD_WORDS.get(workload.kind, 'not known')} ({workload.why})"),
        *_skew_evidence(skew),
    ]
    fields = {"op": top_op, **_ops_words(ops[1].value), "share": pct(mean_share), "ranks": ranks,
              "claimed": pct(impact), **vendor_words(ctx), **_skew_fields(skew)}
    return catalog.make("collective_dominant", impact, fields, evidence, severity=severity_for(impact),
                        denominator=window_denominator(ctx), kind=ctx.kind, entry="collective_dominant_late_rank")


def _late_name(skew: CollectiveSkew) -> str:
    """The late rank in words: its distributed rank when known, with its device."""
    late = skew.late_rank
    return f"rank {late.rank} ({late.device})" if late.rank is not None else late.device


def _before_words(skew: CollectiveSkew) -> str:
    """What the late rank did while the others waited, in words."""
    late = skew.late_rank
    if not late.before:
        return "the trace shows neither a kernel nor a host range on it in that time"
    name = short_middle(late.before, 90)
    if late.before_where == "gpu":
        return f"its GPU was still running {name} ({fmt_ns(late.before_ns)} over those calls)"
    return f"its GPU idled while its host was in {name} ({fmt_ns(late.before_ns)} of GPU idle under it in the window)"


def _clock_words(skew: CollectiveSkew) -> str:
    """The clock caveat of the skew: one trace's clock, or each rank's file on its own clock."""
    if skew.clock == "files":
        return (f"each rank is its own trace on its own host clock; the matched calls end within "
                f"{fmt_ns(skew.end_spread_p50_ns)} of each other (median), which bounds the clocks' offset")
    return f"every rank on one trace's clock; the matched calls end within {fmt_ns(skew.end_spread_p50_ns)} (median)"


def _skew_fields(skew: CollectiveSkew) -> dict:
    """The fields of the "skew" texts of collective_dominant."""
    return {"wait_share": pct(skew.wait_share_pct), "late": _late_name(skew), "late_calls": skew.late_rank.late_calls,
            "matched": skew.matched, "skew_p50": fmt_ns(skew.p50_ns), "transfer_p50": fmt_ns(skew.duration_p50_ns),
            "before": _before_words(skew), "clock": _clock_words(skew)}


def _partial_fields(skew: CollectiveSkew) -> dict:
    """The fields of the "skew_partial" texts: the skew between the captured ranks, how many of how many."""
    return {"wait_share": pct(skew.wait_share_pct), "matched": skew.matched, "skew_p50": fmt_ns(skew.p50_ns),
            "call_p50": fmt_ns(skew.call_p50_ns), "captured": skew.ranks_captured, "world": skew.world_size,
            "missing": skew.world_size - skew.ranks_captured, "clock": _clock_words(skew)}


def _skew_evidence(skew: CollectiveSkew) -> list:
    """The skew's evidence rows: spread, waiting share, the clocks, the late rank and what it did. Of fewer ranks
    than the job's world size (CollectiveSkew.partial), how many of how many, no late rank named, and the rest of
    the collective time left as waiting on the ranks not captured."""
    if skew.partial:
        return _partial_skew_evidence(skew)
    evidence = [
        ev("skew_p50_ns", skew.p50_ns, "ns", None,
           text=f"start skew across ranks: p50 {fmt_ns(skew.p50_ns)}, max {fmt_ns(skew.max_ns)} over "
                f"{plural(skew.matched, 'matched call')}; the late rank's own call takes {fmt_ns(skew.duration_p50_ns)} (p50)"),
        ev("skew_wait_share_pct", skew.wait_share_pct, "%", "matched collective time, all ranks",
           text=f"ranks waiting for the last one to start: {pct(skew.wait_share_pct)} of the matched collectives' time"),
        ev("skew_clock", skew.clock, text=f"clocks: {_clock_words(skew)}"),
    ]
    if skew.late_rank:
        late = skew.late_rank
        evidence.append(ev("late_rank", late.device, text=f"waited for most: {_late_name(skew)}, last to start "
                                                          f"{plural(late.late_calls, 'call')} ({pct(late.waited_share_pct)} "
                                                          f"of the waiting); meanwhile {_before_words(skew)}"))
    return evidence


def _partial_skew_evidence(skew: CollectiveSkew) -> list:
    """The skew's rows when the ranks compared are fewer than the world: measured between them only."""
    captured, world = skew.ranks_captured, skew.world_size
    return [
        ev("ranks_captured", captured, "ranks", f"the job's {world} ranks",
           text=f"{captured} of {world} ranks captured: the late rank is not named (in a {world}-way job it is most "
                f"likely one of the {world - captured} not captured); capture every rank over the same steps to name it"),
        ev("skew_p50_ns", skew.p50_ns, "ns", None,
           text=f"start skew between the {captured} captured ranks: p50 {fmt_ns(skew.p50_ns)}, max {fmt_ns(skew.max_ns)} "
                f"over {plural(skew.matched, 'matched call')}; the calls take {fmt_ns(skew.call_p50_ns)} (p50)"),
        ev("skew_wait_share_pct", skew.wait_share_pct, "%", "matched collective time, captured ranks",
           text=f"captured ranks waiting for the last captured one to start: {pct(skew.wait_share_pct)} of the matched "
                f"collectives' time; the rest of it may be waiting on the {world - captured} ranks not captured"),
        ev("skew_clock", skew.clock, text=f"clocks: {_clock_words(skew)}"),
    ]


def rule_nccl_errors(ctx: Context):
    logs = ctx.data.get("nccl") or []
    warns = [warning for log in logs for warning in log.warnings]
    if not warns:
        return None
    first = warns[0]
    kinds: dict[str, int] = {}
    for warning in warns:
        key = warning.message.split(":")[0][:60]
        kinds[key] = kinds.get(key, 0) + 1
    ranks = sorted({f"{warning.host}:{warning.pid} [dev {warning.cuda_dev}]" for warning in warns})
    net = any("NET/IB" in warning.message or "socket" in warning.message.lower() for warning in warns)
    evidence = [
        ev("warn_count", len(warns), "lines", "log lines", text=f"{plural(len(warns), 'WARN line')} from "
                                                                f"{plural(len(ranks), 'process', 'processes')}"),
        ev("first", first.message, "", None,
           text=f"first: [{first.time or 'no timestamp'}] {first.host}:{first.pid} dev {first.cuda_dev} "
                f"{first.location or ''}: {first.message}"),
        ev("kinds", kinds, "lines", None,
           text="by message: " + "; ".join(f"{message} x{count}" for message, count in kinds.items())),
        ev("ranks", ranks[:8], "", None, text="from: " + ", ".join(ranks[:8]) + (" ..." if len(ranks) > 8 else "")),
    ]
    at_init = _never_initialized(logs, warns)
    return catalog.make(
        "nccl_errors", 100.0,
        {"count": len(warns), "line_word": "line" if len(warns) == 1 else "lines", "first": first.message[:140],
         "what": INIT_FAILED if at_init else COLLECTIVE_FAILED,
         "net_clause": " The messages point at the network path (IB completion errors / socket connects)." if net else "",
         **vendor_words(ctx)},
        evidence, severity="high",
        denominator=("run (the communicator never came up: no collective, and no step, ran)" if at_init
                     else "run (a failed collective stops every step)"),
        variant="net" if net else None, kind=ctx.kind)


COLLECTIVE_FAILED = ("A collective failed or could not connect: every rank of the communicator blocks in the same "
                     "collective, so the whole server stalls or dies, whatever the other metrics say.")
INIT_FAILED = ("The communicator could not be set up: its ranks failed to connect while initializing and none logged "
               "Init COMPLETE, so no collective ran and the server never started serving.")
_CONNECT = re.compile(r"(?i)connect|bootstrap|refused|timed? ?out")


def _never_initialized(logs, warns) -> bool:
    """Whether the WARN lines are connection failures of a communicator that never finished its init: every
    warning a connect/bootstrap one, and no rank of the logs logged Init COMPLETE."""
    connects = all(_CONNECT.search(warning.message) for warning in warns)
    return connects and not any(comm.init_complete for log in logs for comm in log.communicators)


RULES = [
    Rule("cross_island_collective", "throughput", rule_cross_island_collective,
         reads=("topology", "nccl", "devices", "collective_skew", "kind"), thresholds=("skew_wait_share_min_pct",),
         entries=("cross_island_collective_nccl",)),
    Rule("collective_dominant", "throughput", rule_collective_dominant, reads=("devices", "collective_skew", "kind"),
         thresholds=("collective_share_min_pct", "skew_wait_share_min_pct", "skew_wait_window_min_pct",
                     "collective_op_named_min_pct", "busbw_waiting_max_pct", "busbw_min_coverage_pct"),
         entries=("collective_dominant_late_rank",),
         # the cause is named; its finding carries the collective evidence
         suppressed_by=("nccl_socket_transport", "cross_island_collective")),
    Rule("nccl_errors", "trace", rule_nccl_errors, reads=("nccl",)),
]
