"""The view of one Analysis: every figure and phrase a report shows, formatted once.

:func:`report_view` builds a :class:`ReportView` from the Analysis (its JSON contract ``data``
and its ``series``) once; the text, Markdown and HTML reports and the notebook card are
templates that lay it out (reports/templates/) and compute nothing. A figure is formatted here,
in one place, whatever format shows it; a field a format leaves out is listed, with the reason,
in tests/test_view_parity.py. ``None`` is a figure that was not measured: each format prints its
own placeholder (``-`` in text, ``–`` in tables of the pages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracetriage.captured import capture_start_utc
from tracetriage.reports.palette import cause_label, finding_color
from tracetriage.reports.palette import claim_columns as palette_claim_columns
from tracetriage.reports.side_views import (
    HostProfileView,
    HotFrameView,
    NcclLogView,
    NotMeasuredView,
    ServingView,
    TopologyView,
    host_profile_view,
    nccl_view,
    not_measured_views,
    serving_view,
    topology_view,
)
from tracetriage.wording import as_text, cause_name, count, fixed, fmt_bytes, fmt_ns, fmt_num, pct, plural, short_middle


@dataclass(frozen=True, slots=True)
class HeaderView:
    """What the page is about: the inputs by name, the device(s), the capture's date in words
    ('captured 2026-05-26 07:58:50 UTC', or 'capture time not recorded')."""
    inputs: str
    devices: str
    captured: str


@dataclass(frozen=True, slots=True)
class WindowView:
    """The analysis window: its length, how it was chosen, what was excluded before it."""
    duration: str
    source: str
    warmup: str
    setup: str


@dataclass(frozen=True, slots=True)
class PhaseView:
    """One phase of the capture (set-up, steady, tear-down, or that there is no steady one) and what fills it."""
    name: str
    text: str


@dataclass(frozen=True, slots=True)
class PerfettoView:
    """The Perfetto export written in this run (None when none was)."""
    file: str
    mode: str
    left_out: str


@dataclass(frozen=True, slots=True)
class DeviceView:
    """One device's row: busy, compute and copy-only shares of its window (%), idle gaps, collectives,
    its window accounting (each finding's claim, % of the window)."""
    id: str
    name: str
    busy_pct: str
    compute_pct: str
    copy_only_pct: str
    gaps: str
    gap_p50: str
    gap_p99: str
    gap_max: str
    collective_pct: str
    exposed_pct: str
    idle_by_cause: str
    accounting: str
    claim_cells: tuple[str | None, ...]
    unclaimed_pct: str


@dataclass(frozen=True, slots=True)
class ClaimColumn:
    """A finding that claims a slice of some device's window, with its colour on the charts."""
    id: str
    color: str


@dataclass(frozen=True, slots=True)
class GapView:
    """One of the longest idle gaps: where it starts from the window start, its length, the host's state."""
    device: str
    start: str
    length: str
    host: str


@dataclass(frozen=True, slots=True)
class HostIdleView:
    """One row of "GPU idle by host activity": a host range (name, what recorded it) and the device idle
    time it covers — ns, % of the window, gaps touched — with the part outside every runtime call."""
    device: str
    name: str
    source: str
    idle: str
    pct_of_window: str
    gaps: str
    host_code: str


@dataclass(frozen=True, slots=True)
class ProcessView:
    """One process's step times and host calls per step (medians over steady-state steps)."""
    pid: str
    name: str
    steps: str
    step_source: str
    step_range: str | None
    step_p50: str
    step_p99: str
    step_max: str
    launches: str
    graph_launches: str
    syncs: str


@dataclass(frozen=True, slots=True)
class ClassView:
    """One kernel class against the roofline."""
    name: str
    time: str
    tflops: str | None
    gbps: str | None
    intensity: str | None
    bound: str | None
    pct_of_roofline: str | None
    measured_pct: str | None
    peak: str | None
    pct_of_achievable: str | None


@dataclass(frozen=True, slots=True)
class OpView:
    """One operator (shapes measured) against the roofline."""
    name: str
    input_dims: str
    dtype: str
    calls: str
    time: str
    tflops: str | None
    gbps: str | None
    pct_of_roofline: str | None
    pct_of_achievable: str | None


@dataclass(frozen=True, slots=True)
class CoverageView:
    """How much of one kernel class's time the efficiency figures speak for."""
    name: str
    time: str
    measured: str
    measured_pct: str


@dataclass(frozen=True, slots=True)
class DecodeFloorView:
    """The bytes a decode step reads, the time they take at the datasheet bandwidth, the measured step."""
    gb_per_step: str
    floor: str
    measured: str
    pct_of_floor: str
    source: str


@dataclass(frozen=True, slots=True)
class EfficiencyView:
    """Efficiency against the roofline: the device (``model`` None when it is not in the device table)."""
    model: str | None
    peaks_source: str | None
    device_name: str | None
    dominant_class: str | None
    classes: tuple[ClassView, ...]
    top_ops: tuple[OpView, ...]
    decode_floor: DecodeFloorView | None
    not_measured: tuple[NotMeasuredView, ...]
    coverage: tuple[CoverageView, ...]
    achievable_source: str | None
    roofs: str | None


@dataclass(frozen=True, slots=True)
class FindingView:
    """One finding, numbered in rank order; ``timeline`` says where the Perfetto export shows it."""
    number: str
    id: str
    severity: str
    axis: str
    title: str
    falsified: bool
    impact_pct: str
    impact_denominator: str
    evidence: tuple[str, ...]
    timeline: str | None
    mechanism: str
    fix: str
    confirm: str
    falsifier: str
    color: str


@dataclass(frozen=True, slots=True)
class AbstentionView:
    """An analysis that did not have the data it needed, and how to capture it."""
    analysis: str
    scope: str
    reason: str
    capture_hint: str


@dataclass(frozen=True, slots=True)
class KernelView:
    """One kernel name: count, total, mean and median time, share of the window's kernel time (%)."""
    name: str
    short_name: str
    count: str
    total: str
    mean: str
    median: str
    share_pct: str


@dataclass(frozen=True, slots=True)
class InputView:
    """One input file: its kind and version, what was read from it, its warnings and notes (what it
    was read for, e.g. a graph capture phase profiled apart)."""
    path: str
    kind: str
    version: str | None
    counts: str
    warnings: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SkippedView:
    """A file of the case that was not read, and why."""
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class ReportView:
    """Everything a report of one Analysis shows, in the order the text report shows it."""
    tool_version: str
    schema: str
    header: HeaderView
    headline: str
    headline_by_axis: tuple[tuple[str, str], ...]
    symptom: str | None
    perfetto: PerfettoView | None
    window: WindowView | None
    phases: tuple[PhaseView, ...]
    inputs: tuple[InputView, ...]
    skipped: tuple[SkippedView, ...]
    devices: tuple[DeviceView, ...]
    claim_columns: tuple[ClaimColumn, ...]
    longest_gaps: tuple[GapView, ...]
    longest_gaps_scope: str
    idle_by_host: tuple[HostIdleView, ...]
    idle_by_host_scope: str
    gap_histogram: str | None
    copies: str | None
    collective_skew: str | None
    processes: tuple[ProcessView, ...]
    efficiency: EfficiencyView | None
    findings: tuple[FindingView, ...]
    topology: TopologyView | None
    nccl: tuple[NcclLogView, ...]
    serving: ServingView | None
    host_profile: HostProfileView | None
    hot_frames: tuple[HotFrameView, ...]
    abstentions: tuple[AbstentionView, ...]
    kernels: tuple[KernelView, ...]
    rocm: bool = False  # an AMD capture: the templates' own capture advice names rocprofv3, not nsys


def report_view(analysis) -> ReportView:
    """The view of one Analysis, built once for every format."""
    from tracetriage.reports import perfetto_view

    data = analysis.data
    exported = (analysis.series or {}).get("perfetto_export")
    devices = data.get("devices") or []
    claim_columns = palette_claim_columns(devices)  # the accounting bar chart's order too
    vendor = (data.get("capture_kind") or {}).get("vendor")
    hints = perfetto_view.view(analysis)["hints"]
    return ReportView(
        tool_version=as_text(data.get("tool_version")), schema=as_text(data.get("schema")), header=_header(data),
        headline=data["headline"], headline_by_axis=tuple((data.get("headline_by_axis") or {}).items()),
        symptom=data.get("symptom") or None,
        perfetto=PerfettoView(exported["path"], exported["mode"], exported["left_out_text"]) if exported else None,
        window=_window(data.get("window"), data.get("phases")),
        phases=_phases(data.get("phases")),
        inputs=tuple(_input(i) for i in data.get("inputs") or []),
        skipped=tuple(SkippedView(s["path"], s["reason"]) for s in data.get("skipped") or []),
        devices=tuple(_device(device, list(claim_columns), vendor) for device in devices),
        claim_columns=tuple(ClaimColumn(k, color) for k, color in claim_columns.items()),
        longest_gaps=_longest_gaps(devices, data.get("window"), vendor),
        longest_gaps_scope=f" (first two devices of {len(devices)})" if len(devices) > 2 else "",
        idle_by_host=_idle_by_host(devices),
        idle_by_host_scope=_idle_by_host_scope(devices),
        gap_histogram=(f"Gap lengths on {devices[0]['id']}: "
                       + ", ".join(f"{k} {count(n)}" for k, n in devices[0]["gaps"]["histogram"].items())) if devices else None,
        copies=copies_text(data.get("copies"), devices),
        collective_skew=_skew(data.get("collective_skew")),
        processes=tuple(_process(process) for process in data.get("processes") or []),
        efficiency=_efficiency(data.get("efficiency")),
        findings=tuple(_finding(n, finding, hints.get(finding["id"])) for n, finding in enumerate(data.get("findings") or [], 1)),
        topology=topology_view(data.get("topology")),
        nccl=tuple(nccl_view(log) for log in data.get("nccl") or []),
        serving=serving_view(data.get("serving")),
        host_profile=host_profile_view(data.get("host_profile")),
        hot_frames=tuple(HotFrameView(as_text(f["frame"]), fixed(f["share_pct"], 1), fixed(f["self_pct"], 1),
                                      bool(f["calls_sync"]))
                         for f in data.get("hot_frames") or []),
        abstentions=tuple(AbstentionView(a["analysis"], a["scope"], a["reason"], a["capture_hint"])
                          for a in data.get("abstentions") or []),
        kernels=tuple(KernelView(k["name"], short_middle(k["name"]), count(k["count"]), fmt_ns(k["total_ns"]),
                                 fmt_ns(k["mean_ns"]), fmt_ns(k["median_ns"]), fixed(k["share_pct"], 1))
                      for k in data.get("kernels") or []),
        rocm=vendor == "rocm",
    )


def _header(data: dict) -> HeaderView:
    """What the page is about, before any number: the inputs by name, the capture's date when
    the capture records one, and the device(s)."""
    paths = [str(i.get("path") or "") for i in data.get("inputs") or []]
    parents = {p.rsplit("/", 1)[0] if "/" in p else "" for p in paths}
    if len(parents) == 1 and len(paths) > 1 and next(iter(parents)):  # one bundle: its folder, then the files
        names = [f"{next(iter(parents))}/ ({', '.join(p.rsplit('/', 1)[-1] for p in paths)})"]
    else:
        names = paths
    eff = data.get("efficiency") or {}
    known = (eff.get("device") or {}).get("model")  # matched by its properties when the name is blank
    devices: dict[str, int] = {}
    for device in data.get("devices") or []:
        key = device.get("name") or "unknown GPU"
        if key == "unknown GPU" and known and device.get("trace") == eff.get("trace"):
            key = f"{known} (by its properties: the capture names no device)"
        devices[key] = devices.get(key, 0) + 1
    return HeaderView(inputs=", ".join(names), devices=", ".join(f"{n} x {k}" if n > 1 else k for k, n in devices.items()),
                      captured=f"captured {capture_start_utc(data)}" if capture_start_utc(data) else "capture time not recorded")


def _window(window: dict | None, phases: dict | None = None) -> WindowView | None:
    if not window:
        return None
    setup = window.get("setup_excluded_ns") or 0
    # past the first kernel when the phase rule moved the window beyond start-up work (phases.py)
    before = ("the first kernel" if not (phases or {}).get("setup") else
              "the steady work" if phases.get("steady") else "the window")
    setup_text = f"; {fmt_ns(setup)} of set-up before {before} excluded" if setup else ""
    cause = window.get("setup_cause")
    if setup and cause:
        setup_text = (f"; {fmt_ns(setup)} of set-up before the work excluded: the host was in {cause['call']}"
                      + (f" ({cause['caller']})" if cause.get("caller") else ""))
    return WindowView(duration=fmt_ns(window["duration_ns"]), source=window["source"],
                      warmup=plural(window.get("warmup_steps_excluded") or 0, "warm-up step"), setup=setup_text)


def _phases(phases: dict | None) -> tuple[PhaseView, ...]:
    """The capture's phases, one line each (empty when it holds only a steady phase): the set-up and
    tear-down with their length and what fills them, the steady phase judged, or why there is none."""
    if not phases:
        return ()
    by_steps = phases["source"] == "steps"
    out = []
    if phases["setup"]:
        setup = phases["setup"]
        before = "first step" if by_steps else ("steady work" if phases["steady"] else "window")
        out.append(PhaseView("set-up", f"{fmt_ns(setup['duration_ns'])} before the {before}: {_phase_contents(setup)}"))
    if phases["steady"]:
        steady = phases["steady"]
        repeat = f"; {pct(phases['repeat_pct'])} of its kernel launches repeat an earlier kernel" \
            if phases.get("repeat_pct") is not None else ""
        out.append(PhaseView("steady", f"{fmt_ns(steady['duration_ns'])}: the window{repeat}"))
    else:
        no_steady = phases["no_steady"]
        why = (f"{_a(fmt_ns(no_steady['stall_ns']))} stall with a handful of GPU operations either side"
               if no_steady["why"] == "stall" else
               f"{no_steady['repeated']:,} of {plural(no_steady['kernels'], 'kernel launch', 'kernel launches')} "
               "repeat a kernel that ran before (first launches)")
        out.append(PhaseView("steady", f"none: {why}: start-up only, not judged"))
    if phases["teardown"]:
        teardown = phases["teardown"]
        out.append(PhaseView("tear-down", f"{fmt_ns(teardown['duration_ns'])} after the "
                                          f"{'last step' if by_steps else 'last kernel'}: {_phase_contents(teardown)}"))
    return tuple(out)


def _a(figure: str) -> str:
    """The figure with its article, as it is read aloud: "an 80.01 ms copy", "an 11.2 s stretch", "a 2.14 s"."""
    whole = re.match(r"[\d,]+", figure)
    digits = whole.group(0).replace(",", "") if whole else ""
    spoken_an = digits.startswith("8") or (digits[:2] in ("11", "18") and len(digits) in (2, 5, 8))
    return ("an " if spoken_an else "a ") + figure


def _phase_contents(phase: dict) -> str:
    """What fills a set-up or tear-down: host-only stretches, stretches inside runtime calls (the driver's time;
    phases.py) with their call, synchronous copies, bytes copied, graph captures, allocator calls, warm-up, kernels."""
    parts = []
    stretches = [fmt_ns(stretch["length_ns"]) for stretch in phase["host_only"] if stretch.get("in_calls_pct", 0) < 50]
    inside = [f"{fmt_ns(stretch['length_ns'])} in {stretch.get('call') or 'runtime calls'}"
              for stretch in phase["host_only"] if stretch.get("in_calls_pct", 0) >= 50]
    if stretches:
        parts.append(f"{_a(stretches[0])} host-only stretch" if len(stretches) == 1 else
                     "host-only stretches " + ", ".join(stretches[:-1]) + " and " + stretches[-1])
    if inside:
        parts.append("GPU idle inside runtime calls " + ", ".join(inside[:-1]) + (" and " if inside[1:] else "") + inside[-1])
    sync = phase["sync_copies"]
    if sync["count"] == 1:
        parts.append(f"{_a(fmt_ns(sync['longest_ns']))} synchronous copy")
    elif sync["count"]:
        parts.append(f"{sync['count']:,} synchronous copies (longest {fmt_ns(sync['longest_ns'])})")
    if phase["copy_bytes"]:
        parts.append(f"{fmt_bytes(phase['copy_bytes'])} copied")
    if phase["graph_capture_calls"]:
        parts.append(plural(phase["graph_capture_calls"], "graph capture/instantiate call"))
    if phase["alloc_calls"]:
        parts.append(plural(phase["alloc_calls"], "allocator call"))
    if phase["warmup_steps"]:
        parts.append(plural(phase["warmup_steps"], "warm-up step"))
    if phase.get("warmup_range"):
        parts.append(f"a warm-up pass to the end of {phase['warmup_range']} (first launches of what the steady work repeats)")
    parts.append(f"{plural(phase['kernels'], 'kernel')}, GPU busy {pct(phase['busy_pct'])}")
    return ", ".join(parts)


def _input(entry: dict) -> InputView:
    version = as_text(entry["version"]) if entry.get("version") else None
    if version and version.startswith(f"{entry['kind']} "):  # "rocpd schema 3" beside the kind rocpd: said once
        version = version[len(entry["kind"]) + 1:]
    return InputView(path=entry["path"], kind=entry["kind"], version=version,
                     counts=", ".join(f"{k} {count(n)}" for k, n in (entry.get("counts") or {}).items()),
                     warnings=tuple(entry.get("warnings") or ()), notes=tuple(entry.get("notes") or ()))


def _claims(device: dict) -> list[tuple[str, float]]:
    """The findings' claims on a device's window (% of it), largest first."""
    accounting = device.get("accounting") or {"claims_pct": {}}
    return sorted(accounting["claims_pct"].items(), key=lambda x: -x[1])


def _device(device: dict, claim_columns: list[str], vendor: str | None) -> DeviceView:
    window = device["window_ns"] or 1
    causes = [(c, n) for c, n in device["gaps"]["by_cause"].items() if n]
    slices = (device.get("accounting") or {}).get("slices_pct") or {}
    claims = _claims(device)
    busy = {k: slices.get(k, 0.0) for k in ("compute", "collective", "copy")}
    compute = busy["compute"] + busy["collective"]  # kernels, collectives included: one definition
    unclaimed = max(0.0, 100.0 - sum(x for _, x in claims))
    kinds = (device.get("copies") or {}).get("by_direction") or {}  # a memset sets memory, it moves none
    copies = "memsets" if set(kinds) == {"memset"} else "copies and memsets" if "memset" in kinds else "copies"
    accounting = ", ".join(
        [f"{k} {pct(x)}" for k, x in claims]
        + [f"unclaimed {pct(unclaimed)} (compute {pct(compute)}"
           + (f" of which collectives {pct(busy['collective'])}" if busy["collective"] else "")
           + f", {copies} {pct(busy['copy'])} of the window in all)"])
    mine = dict(claims)
    return DeviceView(
        id=device["id"], name=as_text(device["name"]), busy_pct=fixed(device["busy_pct"], 1), compute_pct=fixed(compute, 1),
        copy_only_pct=fixed(busy["copy"], 1), gaps=count(device["gaps"]["count"]), gap_p50=fmt_ns(device["gaps"]["p50_ns"]),
        gap_p99=fmt_ns(device["gaps"]["p99_ns"]), gap_max=fmt_ns(device["gaps"]["max_ns"]),
        collective_pct=fixed(device["collective_share_pct"], 1), exposed_pct=fixed(device.get("collective_exposed_pct"), 1),
        idle_by_cause=", ".join(f"{cause_name(c, vendor)} {100 * n / window:.1f}%"
                                for c, n in sorted(causes, key=lambda x: -x[1])) or "-",
        accounting=accounting, claim_cells=tuple(fixed(mine.get(k), 1) for k in claim_columns), unclaimed_pct=fixed(unclaimed, 1))


def _idle_by_host(devices: list[dict]) -> tuple[HostIdleView, ...]:
    """The top host ranges by the idle time they cover, on each of the first two devices that recorded any."""
    shown = [device for device in devices if (device.get("idle_by_host") or {}).get("ranges")][:2]
    return tuple(HostIdleView(device["id"], short_middle(as_text(row["name"])), as_text(row["source"]), fmt_ns(row["idle_ns"]),
                              fixed(row["pct_of_window"], 1), count(row["gaps"]), fmt_ns(row["host_code_ns"]))
                 for device in shown for row in device["idle_by_host"]["ranges"])


def _idle_by_host_scope(devices: list[dict]) -> str:
    """What the host-activity table covers: each shown device's idle time inside some host range."""
    shown = [device for device in devices if (device.get("idle_by_host") or {}).get("ranges")][:2]
    return "; ".join(f"{device['id']}: {pct(100.0 * block['attributed_ns'] / block['idle_ns'])} of its idle time "
                     f"inside a host range ({', '.join(block['sources'])})"
                     for device in shown for block in [device["idle_by_host"]] if block["idle_ns"])


def _longest_gaps(devices: list[dict], window: dict | None, vendor: str | None) -> tuple[GapView, ...]:
    """The five longest idle gaps of each of the first two devices (their causes in the vendor's words)."""
    start = (window or {}).get("start_ns") or 0
    return tuple(GapView(device["id"], fmt_ns(gap["start_ns"] - start), fmt_ns(gap["length_ns"]),
                         cause_label(gap["cause"], vendor))
                 for device in devices[:2] for gap in (device["gaps"].get("top") or [])[:5])


def _skew(skew: dict | None) -> str | None:
    """How far apart the ranks start the same collective."""
    if not skew:
        return None
    if skew.get("matched"):
        words = (f"{skew['matched']} collectives matched, start spread p50 {fmt_ns(skew['p50_ns'])}, "
                 f"max {fmt_ns(skew['max_ns'])}")
        late = skew.get("late_rank")
        if skew.get("wait_share_pct") is not None and late:
            rank = f"rank {late['rank']} ({late['device']})" if late.get("rank") is not None else late["device"]
            words += (f"; {skew['wait_share_pct']:.1f}% of their time is ranks waiting for the last to start, "
                      f"{late['waited_share_pct']:.0f}% of that for {rank}")
        if skew.get("end_spread_p50_ns") is not None:
            words += f"; ends within {fmt_ns(skew['end_spread_p50_ns'])} (p50)" + (
                ", each rank on its own trace's clock" if skew.get("clock") == "files" else "")
        return words
    return f"not measured ({skew.get('reason')})"


def _process(process: dict) -> ProcessView:
    steps = process["steps"]
    return ProcessView(pid=as_text(process["pid"]), name=as_text(process["name"]), steps=as_text(steps["count"]),
                       step_source=as_text(steps["source"]), step_range=steps.get("range_name") or None,
                       step_p50=fmt_ns(steps["p50_ns"]), step_p99=fmt_ns(steps["p99_ns"]), step_max=fmt_ns(steps["max_ns"]),
                       launches=fmt_num(process["launches_per_step"]), graph_launches=fmt_num(process["graph_launches_per_step"]),
                       syncs=fmt_num(process["syncs_per_step"]))


def _peak(row: dict, device: dict | None) -> str | None:
    """The roof a class is held against: a compute-bound one's 'BF16 1,307 TFLOP/s' (datasheet
    dense), '/ 708 achievable' where the vendor publishes a measured max-achievable peak; a
    memory-bound one's datasheet bandwidth."""
    if row.get("bound") == "memory" and device:
        return f"{device['bandwidth_gbps']:,.0f} GB/s"
    if not row.get("peak_dtype") or not row.get("peak_tflops"):
        return None
    words = f"{row['peak_dtype'].upper()} {row['peak_tflops']:,.0f} TFLOP/s"
    return words + (f" / {row['achievable_tflops']:,.0f} achievable" if row.get("achievable_tflops") else "")


ROOF_ORDER = ("fp8", "int8", "bf16", "fp16", "tf32", "fp32", "fp64")


def _roofs(device: dict | None) -> str | None:
    """The device's roofs, named: 'datasheet dense FP8 2,615, BF16 1,307 ... TFLOP/s; 5,300 GB/s; measured
    max-achievable FP8 1,273, BF16 708, FP16 654 TFLOP/s'."""
    if not device:
        return None

    def listed(table: dict) -> str:
        return ", ".join(f"{dtype.upper()} {table[dtype]:,.0f}" for dtype in ROOF_ORDER if dtype in table)

    words = f"datasheet dense {listed(device['peak_tflops'])} TFLOP/s; {device['bandwidth_gbps']:,.0f} GB/s"
    if device.get("achievable_tflops"):
        words += f"; measured max-achievable {listed(device['achievable_tflops'])} TFLOP/s"
    return words


def _efficiency(eff: dict | None) -> EfficiencyView | None:
    if not eff:
        return None
    floor = eff.get("decode_floor")
    return EfficiencyView(
        model=as_text(eff["device"]["model"]) if eff.get("device") else None,
        peaks_source=as_text(eff["device"].get("source")) if eff.get("device") else None,
        device_name=eff.get("device_name") or None, dominant_class=eff.get("dominant_class") or None,
        classes=tuple(ClassView(c["class"], fmt_ns(c["time_ns"]), fixed(c["achieved_tflops"], 1), fixed(c["achieved_gbps"], 0),
                                fixed(c["intensity"], 2), c["bound"] or None, fixed(c["pct_of_roofline"], 0),
                                fixed(c.get("measured_share_pct"), 0), _peak(c, eff.get("device")),
                                fixed(c.get("pct_of_achievable"), 0))
                      for c in eff.get("classes") or []),
        top_ops=tuple(OpView(as_text(o["name"]), str([x for x in o["input_dims"] if x]), as_text(o["dtype"]), count(o["count"]),
                             fmt_ns(o["time_ns"]), fixed(o["achieved_tflops"], 1), fixed(o["achieved_gbps"], 0),
                             fixed(o["pct_of_roofline"], 0), fixed(o.get("pct_of_achievable"), 0))
                      for o in eff.get("top_ops") or []),
        coverage=tuple(CoverageView(c["class"], fmt_ns(c["time_ns"]), fmt_ns(c["measured_ns"]), fixed(c["measured_share_pct"], 0))
                       for c in eff.get("coverage") or []),
        achievable_source=as_text(eff["device"]["achievable_source"])
        if eff.get("device") and eff["device"].get("achievable_source") else None,
        roofs=_roofs(eff.get("device")),
        decode_floor=DecodeFloorView(fixed(floor["bytes_per_step"] / 1e9, 2), fmt_ns(floor["floor_ns"]),
                                     fmt_ns(floor["measured_ns"]), fixed(floor["pct_of_floor"], 0),
                                     as_text(floor.get("source"))) if floor else None,
        not_measured=not_measured_views(eff.get("not_measured") or []))



def _finding(number: int, finding: dict, timeline: str | None) -> FindingView:
    return FindingView(
        number=str(number), id=finding["id"], severity=finding["severity"], axis=finding["axis"], title=finding["title"],
        falsified=bool(finding.get("falsified")), impact_pct=fixed(finding["impact_pct"], 1),
        impact_denominator=as_text(finding["impact_denominator"]), evidence=tuple(e["text"] for e in finding["evidence"]),
        timeline=timeline, mechanism=finding["mechanism"], fix=finding["fix"], confirm=finding["confirm"],
        falsifier=finding["falsifier"], color=finding_color(finding["id"]))


_DIRECTIONS = {"HtoD": "host-to-device", "DtoH": "device-to-host", "DtoD": "device-to-device", "PtoP": "peer-to-peer",
               "HtoH": "host-to-host"}


def _copies_words(direction: str, count: int) -> str:
    """'3 device-to-host copies', '151 memsets'."""
    if direction == "memset":
        return plural(count, "memset")
    return plural(count, _DIRECTIONS.get(direction, direction) + " copy", _DIRECTIONS.get(direction, direction) + " copies")


def _copy_bytes(totals: dict) -> str:
    """The bytes of a direction's operations, 'size not recorded' for those whose format records
    none (rocprofv3 blit memsets: by_direction's bytes_unrecorded), never '0 B' for them."""
    missing = totals.get("bytes_unrecorded") or 0
    if missing >= totals["count"]:
        return "size not recorded"
    return fmt_bytes(totals["bytes"]) + (f"; {missing:,} of them of unrecorded size" if missing else "")


def copies_text(c: dict | None, devices: list[dict] | None = None) -> str | None:
    """The window's copies in one line: each direction's count and bytes (all devices', said so), pageable, sync, UVM."""
    if not c:
        return None
    m = c.get("migrations") or {"count": 0, "bytes": 0}
    dirs: dict[str, dict] = {}
    for d in devices or []:
        for k, x in ((d.get("copies") or {}).get("by_direction") or {}).items():
            t = dirs.setdefault(k, {"count": 0, "bytes": 0, "bytes_unrecorded": 0})
            t["count"] += x.get("count") or 0
            t["bytes"] += x.get("bytes") or 0
            t["bytes_unrecorded"] += x.get("bytes_unrecorded") or 0
    if not dirs and c["dtoh"]["count"]:
        dirs["DtoH"] = dict(c["dtoh"])
    moved = ", ".join(f"{_copies_words(k, x['count'])} ({_copy_bytes(x)})"
                      for k, x in sorted(dirs.items(), key=lambda kv: -kv[1]["bytes"]))
    together = f" ({len(devices)} devices together)" if devices and len(devices) > 1 else ""  # not one device's figures
    return (f"copies in the window{together}: {moved or 'none'}; "
            f"{plural(c['pageable_async']['count'], 'async copy', 'async copies')} "
            f"from/to pageable memory, {plural(c['sync_copy_calls']['count'], 'synchronous copy call')}; "
            f"unified-memory migrations (page moves, not copies): {m['count']:,} ({fmt_bytes(m['bytes'])})")


