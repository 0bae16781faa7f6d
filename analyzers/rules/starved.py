"""gpu_starved: the GPU idles most of the window (or a data loader, or host code after per-step syncs,
keeps it idle) and the other findings explain less than half of it. Registered after every other
throughput rule: it claims what nobody explained, and names the dominant cause, the runtime calls and
the host range the GPU idles in, and the capture that would name what the host did."""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.analyzers import catalog
from tracetriage.analyzers.catalog import capture_text
from tracetriage.analyzers.evidence import ev, severity_for
from tracetriage.analyzers.host_activity import is_data_loader
from tracetriage.analyzers.metrics import DeviceMetrics, IdleByHost
from tracetriage.analyzers.rules.context import CAUSE_WORDS, Context, Rule, best_device, process_name, t, window_denominator
from tracetriage.analyzers.rules.hints import capture_cmd, hint_format, host_profiler_hint, is_rocm_format
from tracetriage.analyzers.steps import MIN_STEPS
from tracetriage.model import api_category
from tracetriage.wording import cause_name, for_vendor, pct, plural, us

# name: (value, why)
THRESHOLDS = {
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
    "starved_dispatch_launch_share": (0.5, ("a covering range whose own launch calls end most of the gaps it covers is "
                                            "the code that feeds the GPU (a model's forward), not work beside it: the "
                                            "gaps are its per-op host cost, and moving it to another thread moves the "
                                            "launches with it")),
    "starved_dispatch_min_gaps": (10, ("per-op dispatch is a pattern over many operations: at least 10 gaps inside "
                                       "the range; a handful of gaps are single host tasks")),
    "starved_dispatch_max_gap_ns": (1_000_000, ("a mean idle gap under 1 ms is per-op host cost (Python, the framework's "
                                                "dispatch, the launch call: tens to hundreds of µs an op); longer gaps are "
                                                "host work of their own")),
}

# One severity for the whole about-half band: its impact moves with the idle share, so grading it by impact put a
# severity edge inside the band (one GPU of two at 49.9% idle was medium, at 50.1% high); the severity changes only
# where the class does: no finding under the band, medium in it, by impact (starved) above it.
BAND_SEVERITY = "medium"


@dataclass(frozen=True, slots=True)
class Unexplained:
    """The idle time of the device that lost most which no earlier finding claimed, by the host's cause.

    ``by_cause``: ns per cause (the timeline's host state during the idle); ``cause`` the largest;
    ``calls``: (runtime call, ns the GPU idles inside it), longest first; ``idle_pct``: all idle of the
    window; ``after_sync_host_ns``: the unclaimed host code right after a blocking sync; ``half``: idle
    within starved_band_pct of the starved_idle_min_pct line."""

    device: DeviceMetrics
    impact: float
    by_cause: dict[str, int]
    cause: str
    cause_ns: int
    cause_text: str
    calls: list[tuple[str, int]]
    idle_pct: float
    after_sync_host_ns: int
    half: bool

    def pct(self, ns: float) -> float:
        """``ns`` as a percentage of the device's window."""
        return 100.0 * ns / self.device.window_ns


def _wants_starved(ctx: Context, device: DeviceMetrics) -> bool:
    """A device idle most of the window (or within the band of it) with most of its idle unexplained, or
    idle in host code after the per-step syncs host_sync_per_step found and left (it claims only the wait),
    or kept idle by a data loader on the thread that feeds it, however busy the rest."""
    window_ns = device.window_ns
    idle = sum(ns for name, ns in device.slices.items() if name.startswith("idle:"))
    left = ctx.ledger.available(device.id, ["idle:*:*"])
    starved = (100.0 * idle / window_ns >= t("starved_idle_min_pct") - t("starved_band_pct")
               and left >= t("starved_unexplained_min_share") * idle)
    handed_back = "host_sync_per_step" in ctx.ledger.claims[device.id]
    after_sync_host = ctx.ledger.available(device.id, ["idle:after_sync:host"]) if handed_back else 0
    if starved or 100.0 * after_sync_host / window_ns >= t("starved_after_sync_min_pct"):
        return True
    loader = _loader_range(device)
    return loader is not None and left >= t("starved_unexplained_min_share") * loader["idle_ns"]


def _unexplained(ctx: Context, device: DeviceMetrics, unclaimed: dict[str, int], impact: float) -> Unexplained:
    """The device's unclaimed idle slices summed by cause, with the runtime calls it idles in."""
    by_cause: dict[str, int] = {}
    for name, ns in unclaimed.items():
        cause = name.rsplit(":", 1)[1]
        by_cause[cause] = by_cause.get(cause, 0) + ns
    cause, cause_ns = max(by_cause.items(), key=lambda x: x[1])
    cause_text = for_vendor(CAUSE_WORDS[cause], ctx.kind.get("vendor"))
    calls = sorted(device.idle_in_calls.items(), key=lambda item: -item[1])
    if cause == "other_cuda" and calls:
        # name what "other CUDA calls" were: cudaMalloc / cudaFree (the allocator), a module load...
        cause_text += f" ({calls[0][0]}: {pct(100.0 * calls[0][1] / device.window_ns)} of the window)"
    idle_pct = 100.0 - device.busy_pct
    return Unexplained(device, impact, by_cause, cause, cause_ns, cause_text, calls, idle_pct,
                       unclaimed.get("idle:after_sync:host", 0),
                       abs(idle_pct - t("starved_idle_min_pct")) < t("starved_band_pct"))


def _cause_evidence(ctx: Context, found: Unexplained) -> list[dict]:
    """Idle, unexplained share, dominant cause and the split by cause; the runtime calls, the host code after
    syncs and the gaps where they count."""
    device, by_cause = found.device, found.by_cause
    where = f"window on {device.id}"
    evidence = [
        ev("idle_pct", round(found.idle_pct, 2), "%", where,
           text=f"GPU idle {pct(found.idle_pct)} of the {us(device.window_ns)} window on {device.id}"),
        ev("unexplained_pct", round(found.impact, 2), "%", window_denominator(ctx),
           text=f"idle time no other finding claims: {pct(found.impact)} of the window"),
        ev("dominant_cause", found.cause, "", None,
           text=f"most of it ({pct(found.pct(found.cause_ns))} of the window) the host was {found.cause_text}"),
        ev("by_cause", {name: round(found.pct(ns), 2) for name, ns in by_cause.items()}, "%", where,
           text="unexplained idle by cause: " + ", ".join(
               f"{cause_name(name, ctx.kind.get('vendor'))} {pct(found.pct(ns))}"
               for name, ns in sorted(by_cause.items(), key=lambda x: -x[1]) if ns)),
    ]
    calls = found.calls
    if calls and (found.cause == "other_cuda"
                  or by_cause.get("other_cuda", 0) >= t("starved_calls_named_share") * device.window_ns):
        evidence.append(ev("idle_in_calls", {name: round(found.pct(ns), 2) for name, ns in calls}, "%", where,
                           text="the GPU idles inside these CUDA/HIP calls: " + ", ".join(
                               f"{name} {pct(found.pct(ns))}" for name, ns in calls)))
    if found.pct(found.after_sync_host_ns) >= t("sync_impact_min_pct"):
        # one quantity, one value: the whole slice is host_sync_per_step's host_after_sync_pct, printed as it prints it
        whole = found.pct(device.slices.get("idle:after_sync:host", 0))
        rest = f" ({pct(whole)} in all; the findings ranked before this one claim the rest)" \
            if pct(whole) != pct(found.pct(found.after_sync_host_ns)) else ""
        evidence.append(ev("after_sync_host_pct", round(found.pct(found.after_sync_host_ns), 2), "%", where,
                           text=f"of it, {pct(found.pct(found.after_sync_host_ns))} of the window is host code right after "
                                f"a blocking sync returns (the code that consumes the read-back), before the next launch{rest}"))
    gaps = device.gaps
    if gaps.count:
        evidence.append(ev("gaps", gaps.count, "gaps", "window",
                           text=f"{plural(gaps.count, 'idle gap')}, p50 {us(gaps.p50_ns)}, max {us(gaps.max_ns)}"))
    return evidence


def _fields(ctx: Context, found: Unexplained) -> dict:
    """The catalog fields of the finding: titles in or out of the about-half band, cause and call words."""
    idle, half, calls = pct(found.idle_pct), found.half, found.calls
    blocked_ns = found.by_cause.get("sync", 0) + found.by_cause.get("memcpy_sync", 0)
    return {"starved": f"GPU idle about half the window ({idle})" if half else f"GPU starved: idle {idle} of the window",
            "share_words": "about half the window" if half else "most of the window",
            "idle": idle, "cause_text": f"mostly {found.cause_text}", "claimed": pct(found.impact),
            "blocked": pct(found.pct(blocked_ns)),
            "top_call": f"{calls[0][0]}: {pct(found.pct(calls[0][1]))} of the window" if calls else "",
            "cause_where": f"while the host was {found.cause_text}",
            "capture": _starved_capture(ctx, found.device, found.cause),
            "loading": f"GPU idle about half the window ({idle}), by data loading" if half else "GPU starved by data loading",
            "idle_tail": "" if half else f"; GPU idle {idle} of the window"}


def _variant(found: Unexplained) -> str | None:
    """The text variant from the dominant cause: blocked in syncs, host code after them, the allocator, or
    a part of the window only."""
    cause, calls = found.cause, found.calls
    if cause in ("sync", "memcpy_sync"):
        return "blocked"
    if cause == "host" and found.after_sync_host_ns >= t("sync_host_after_share") * found.cause_ns:
        return "after_sync"
    if cause == "other_cuda" and calls and api_category(calls[0][0]) == "alloc":
        return "alloc"
    return "part" if found.idle_pct < t("starved_idle_min_pct") else None


def _host_range_words(ctx: Context, found: Unexplained, evidence: list[dict], fields: dict) -> str | None:
    """Adds the host ranges the GPU idles in to ``evidence``; when one covers most of the host code (for a host
    or unknown cause) names it in ``fields`` and returns its variant (data_loading or host_range), else None."""
    device = found.device
    by_host = device.idle_by_host
    if by_host is None or not by_host.ranges:
        return None
    evidence.append(ev("idle_by_host_range", {row["name"]: row["pct_of_window"] for row in by_host.ranges[:3]}, "%",
                       f"window on {device.id}", text="GPU idle inside host ranges: " + ", ".join(
                           f"{row['name']} {pct(row['pct_of_window'])}" for row in by_host.ranges[:3])))
    covering = _covering_range(by_host) if found.cause in ("host", "unknown") else None
    if covering is None:
        return None
    # one host range holds most of the host code: named, more telling than the cause; what it claims is the
    # host code inside it: idle inside it while the host sits in a runtime call is the call's
    inside = covering["host_code_ns"] if by_host.api_calls_recorded else covering["idle_ns"]
    share = per_step_share(ctx, device, inside)
    evidence.append(ev("host_range", covering["name"], "", None,
                       text=f"{share} the GPU idles while the host runs code inside {covering['name']} "
                            f"({covering['source']}), over {plural(covering['gaps'], 'gap')}"))
    fields.update({"range": covering["name"], "source": covering["source"], "share_text": share,
                   "range_pct": pct(found.pct(inside))})
    if is_data_loader(covering["name"]):
        return "data_loading"
    launched = by_host.launched_gaps[0] if by_host.launched_gaps else 0
    if not _dispatches(covering, launched):
        return "host_range"
    gap_mean = us(covering["idle_ns"] / covering["gaps"])
    evidence.append(ev("range_launches_pct", round(100.0 * launched / covering["gaps"], 1), "%",
                       f"gaps inside {covering['name']}",
                       text=f"{launched} of the {plural(covering['gaps'], 'gap')} inside {covering['name']} end with a "
                            f"GPU operation launched from inside it (mean idle gap {gap_mean}): "
                            "it is the code that feeds the GPU, and the gaps are its host cost per operation"))
    fields["gap_mean"] = gap_mean
    return "host_dispatch"


def _dispatches(covering: dict, launched: int) -> bool:
    """Whether the covering host range is the code that feeds the GPU, one operation at a time: its own launch
    calls end most of the gaps it covers (starved_dispatch_launch_share), over many gaps
    (starved_dispatch_min_gaps), each short (mean under starved_dispatch_max_gap_ns)."""
    gaps = covering["gaps"]
    return (gaps >= t("starved_dispatch_min_gaps") and launched >= t("starved_dispatch_launch_share") * gaps
            and covering["idle_ns"] / gaps < t("starved_dispatch_max_gap_ns"))


def rule_gpu_starved(ctx: Context):
    """Claims every idle slice no earlier finding took on each device that :func:`_wants_starved`, and words the
    device that lost most by its dominant unexplained cause."""
    wants = {device.id: (["idle:*:*"], None) for trace in ctx.judged() for device in trace.devices
             if device.window_ns and _wants_starved(ctx, device)}
    if not wants:
        return None
    unclaimed = {device_id: ctx.ledger.unclaimed(device_id, ["idle:*:*"]) for device_id in wants}
    taken = ctx.ledger.take("gpu_starved", wants)
    impact = ctx.ledger.impact_pct(taken)
    device = best_device(taken, ctx)
    found = _unexplained(ctx, device, unclaimed[device.id], impact)
    evidence = _cause_evidence(ctx, found)
    fields = _fields(ctx, found)
    variant = _host_range_words(ctx, found, evidence, fields) or _variant(found)
    if found.half:  # one rule for every title in the band: none calls the capture starved, and this row says why
        evidence.append(ev("about_half", round(found.idle_pct, 2), "%", f"window on {device.id}",
                           text=f"idle {pct(found.idle_pct)} is within {t('starved_band_pct'):g} points of the "
                                f"{t('starved_idle_min_pct'):g}% line: about half, not called starved (a re-capture of "
                                "the same program may fall on either side)"))
    severity = BAND_SEVERITY if found.half else severity_for(impact)
    return catalog.make("gpu_starved", impact, fields, evidence, severity=severity,
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


def per_step_share(ctx: Context, device: DeviceMetrics, idle_ns: int) -> str:
    """``~120 ms of each 240 ms step`` (the mean over the window's steps) when the device's process has steps that
    bound the window, ``~463 ms of the 474 ms window, which holds only 1 measured step`` when it has too few to bound
    it (the window then also holds the GPU work they queued: no step length is the window's share), else ``45.0% of
    the window``."""
    process = next((process for trace in ctx.judged() if device in trace.devices
                    for process in trace.processes if process.pid == device.pid), None)
    count = process.steps.count if process is not None else 0
    if 0 < count < MIN_STEPS:
        return (f"~{_rounded(idle_ns)} of the {_rounded(device.window_ns)} window, which holds only "
                f"{plural(count, 'measured step')}")
    if count:
        return f"~{_rounded(idle_ns / count)} of each {_rounded(device.window_ns / count)} step"
    return f"{pct(100.0 * idle_ns / device.window_ns)} of the window"


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


STARVED = Rule("gpu_starved", "throughput", rule_gpu_starved, reads=("devices", "processes"),
               thresholds=(*(name for name in THRESHOLDS if name.startswith("starved_")), "sync_host_after_share",
                           "sync_impact_min_pct"))
