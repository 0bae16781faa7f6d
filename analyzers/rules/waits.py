"""dependency_wait: the GPU idles with its next work already queued (timeline cause ``dependency``).

The operation that ends each such gap had been launched: its launch call had returned before the gap began,
or more than the launch latency before the GPU started it. An idle GPU holding queued work waits on something
the capture does not show (an event another stream records, a graph's wait node, a peer device or process, in
a distributed job another rank), so the host is not what it waits for, and no host-side finding (a sync, a
pageable copy the host sits in meanwhile) may claim that time. What the capture does hold of the wait (the
stream-wait calls, the event records, another stream's or device's work ending where a wait ends) is checked
there (analyzers/wait_sources.py) and said, never assumed absent. Registered before gpu_starved, which would
otherwise take it as unexplained host time. Where the host and GPU clocks are offset (analyzers/queued.py) the
test cannot be made: :func:`clock_abstentions` says so instead."""

from __future__ import annotations

from tracetriage.analyzers import catalog
from tracetriage.analyzers.catalog import capture_text
from tracetriage.analyzers.evidence import ev, severity_for
from tracetriage.analyzers.findings import Abstention
from tracetriage.analyzers.rules.context import Context, Rule, best_device, t, window_denominator
from tracetriage.analyzers.rules.starved import per_step_share
from tracetriage.analyzers.timeline import DEPENDENCY_LATENCY_NS
from tracetriage.analyzers.wait_sources import WaitSources
from tracetriage.wording import pct, us

# name: (value, why)
THRESHOLDS = {
    "dependency_min_pct": (2.0, ("GPU idle with its next work queued for 2% of the window or more (the smallest impact "
                                 "graded above info) is a wait of its own: smaller is scheduling jitter between streams")),
}
SLICES = ["idle:*:dependency"]


def rule_dependency_wait(ctx: Context):
    """Claims each device's idle time with its next work queued (idle:*:dependency) when some device's reaches
    dependency_min_pct of its window; the text names what such a wait can be, a peer rank first when the
    device runs collectives (a distributed job)."""
    wants = {}
    for trace in ctx.judged():
        for device in trace.devices:
            ns = ctx.ledger.available(device.id, SLICES)
            if device.window_ns and 100.0 * ns / device.window_ns >= t("dependency_min_pct"):
                wants[device.id] = (SLICES, None)
    if not wants:
        return None
    taken = ctx.ledger.take("dependency_wait", wants)
    impact = ctx.ledger.impact_pct(taken)
    device = best_device(taken, ctx)
    ns = taken[device.id]
    share = 100.0 * ns / device.window_ns
    distributed, per_step = device.collective_count > 0, per_step_share(ctx, device, ns)
    evidence = [
        ev("dependency_pct", round(share, 2), "%", f"window on {device.id}",
           text=f"GPU idle with its next work already queued: {pct(share)} of the {us(device.window_ns)} window on "
                f"{device.id} ({per_step})"),
        ev("dependency_latency_ns", DEPENDENCY_LATENCY_NS, "ns", None,
           text=f"a gap counts from the later of its start and the return of the call that launched the operation "
                f"ending it, when the GPU held that operation idle longer than {us(DEPENDENCY_LATENCY_NS)} (the launch "
                "latency and the GPU's switch between queued operations take less)"),
        ev("idle_pct", round(100.0 - device.busy_pct, 2), "%", f"window on {device.id}",
           text=f"GPU idle {pct(100.0 - device.busy_pct)} of the window in all"),
    ]
    if distributed:
        evidence.append(ev("collective_share_pct", round(device.collective_share_pct, 2), "%", f"window on {device.id}",
                           text=f"the device runs collectives ({pct(device.collective_share_pct)} of the window): a "
                                "distributed job, whose queued work can wait on another rank"))
    sources = _sources(ctx, device)
    fields = {"dependency": pct(share), "device": device.id, "per_step": per_step,
              "latency": us(DEPENDENCY_LATENCY_NS), "shown": sources.words(ctx.kind.get("vendor")),
              "unseen": sources.title_words()}
    return catalog.make("dependency_wait", impact, fields, evidence, severity=severity_for(impact),
                        denominator=window_denominator(ctx), variant="distributed" if distributed else None,
                        kind=ctx.kind)


def _sources(ctx: Context, device) -> WaitSources:
    """What the device's trace holds of its dependency waits (wait_sources.measure), checked, not assumed."""
    for trace in ctx.per_trace:
        for index, candidate in enumerate(trace.devices):
            if candidate.id == device.id and index < len(trace.waits):
                return trace.waits[index]
    return WaitSources()


def clock_abstentions(ctx: Context) -> list[Abstention]:
    """dependency_wait abstains for each process whose host and GPU clocks are offset (queued.clock_check): whether
    a launch call returned before its gap began cannot be told there, so none of its idle is called a dependency
    wait (the timeline leaves it to the host's causes), and the abstention says which pairs showed the offset."""
    return [Abstention(analysis="dependency_wait", scope=f"pid {check.pid}",
                       reason=f"GPU idle with its next work queued is not judged: the host and GPU clocks are offset "
                              f"({check.words()}), so whether the work was queued before a gap began cannot be told; "
                              "the idle stays with the host's causes",
                       capture_hint=capture_text("abstention", "clock_offset"))
            for trace in ctx.per_trace for check in trace.clock_offsets]


RULES = [
    Rule("dependency_wait", "throughput", rule_dependency_wait, reads=("devices", "processes"),
         thresholds=("dependency_min_pct",)),
]
