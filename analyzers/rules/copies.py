"""The copy rules: pageable_memcpy (async copies through pageable host memory, a hidden sync) and
copy_bound (copies alone set the step time). They claim the copy-only time (and the host's blocked time)
of each device's window through the ledger, after the host-side rules of trace.py."""

from __future__ import annotations

from tracetriage.analyzers import catalog
from tracetriage.analyzers.capture_kind import fsdp_ranges
from tracetriage.analyzers.evidence import ev, severity_for
from tracetriage.analyzers.rules.context import Context, Rule, best_device, t, window_denominator
from tracetriage.wording import nbytes, pct, plural, us

# name: (value, why)
THRESHOLDS = {
    "pageable_min_count": (1, "any pageable async copy in steady state serializes with the host"),
    "pageable_min_time_pct": (0.1, ("pageable copies whose own GPU time and host time blocked in them stay under 0.1% "
                                    "of the window (scalar uploads of a few bytes) cost nothing measurable")),
    "copy_bound_min_pct": (30.0, "copies alone filling 30% of the window (and more than kernels) set the step time"),
}


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
    fsdp = fsdp_ranges(ctx.case) if direction == "HtoD" else None
    if fsdp:  # FSDP's calls issue the copies in: its parameters come from host memory (cpu offload)
        evidence.append(ev("fsdp_ranges", fsdp, "", None, text=f"the host runs FSDP's own calls: {fsdp}"))
    return catalog.make("copy_bound", impact,
                        {"copy_share": pct(copy_pct),
                         "compute_share": pct(kernels_pct),
                         "gbps": f"{gbps:.1f} GB/s" if gbps is not None else "unknown GB/s",
                         "direction": dir_words.get(direction, direction), "bytes": copy_size(top)},
                        evidence, severity=severity_for(impact), denominator=window_denominator(ctx), kind=ctx.kind,
                        variant="fsdp_offload" if fsdp else None)


def copy_size(row: dict) -> str:
    """The bytes of a by_direction row in words: 'size not recorded' when the format records none of
    its sizes, the recorded bytes and how many are not recorded when some are missing."""
    missing = row.get("bytes_unrecorded") or 0
    if missing >= row["count"]:
        return "size not recorded"
    return nbytes(row["bytes"]) + (f" (+{missing:,} of unrecorded size)" if missing else "")


RULES = [
    Rule("pageable_memcpy", "throughput", rule_pageable_memcpy, reads=("copies", "devices"),
         thresholds=("pageable_min_count", "pageable_min_time_pct")),
    Rule("copy_bound", "throughput", rule_copy_bound, reads=("devices",), thresholds=("copy_bound_min_pct",)),
]
