"""``tracetriage analyze`` on an Nsight Systems export too large for the whole-table model in the memory
this machine has free (parsers/nsys._check_memory's MemoryNeededError, exit 10): the export is analyzed
streamed instead (analyzers/stream_timeline.analyze_streamed; docs/large_captures.md), and the report
gives what the stream computes (the window and its steps, each device's timeline and idle causes, the
kernel summary), each number equal to the whole-table path's, and says plainly what it did not measure.
Where the stream cannot be exact (NotStreamable) the refusal stands, with the stream's reason added."""

from __future__ import annotations

import dataclasses
import json

from tracetriage.errors import MemoryNeededError, UnsupportedInputError

NOT_MEASURED = ("collectives and their skew", "the copies analysis",
                "the dependency waits' lanes and the clock check's report (the idle a dependency held is in the causes)",
                "host activity per step and idle by host range", "efficiency (FLOP and byte rates)",
                "the phases' contents", "the set-up's cause",
                "the findings, the rules and the verdict (they need the whole tables)")
FORMATS = ("text", "md", "json")


def streamed_report(exc: MemoryNeededError, paths: list[str], step_range: str | None, fmt: str) -> tuple[str, str]:
    """(report, one-line summary) of the one export refused for its memory, analyzed streamed; raises
    ``exc`` again (with the stream's reason where it refused) where the stream does not apply."""
    from tracetriage.analyzers import stream_timeline as stl
    from tracetriage.case import open_export

    path = exc.path if len(paths) == 1 else None  # the export refused (a report's export, or the file in a folder)
    if path is None or fmt not in FORMATS:
        raise exc
    try:
        db = open_export(path)  # the one opening place: read-only, the same one-line errors as open_case's
    except UnsupportedInputError:
        raise exc from None  # not an nsys export after all: the memory refusal stands
    try:
        with db:
            got = stl.analyze_streamed(db, sync_slack_ns=_slack(), step_range=step_range)
    except stl.NotStreamable as refused:
        raise MemoryNeededError(path, f"{exc.problem}; streamed, it cannot be analyzed exactly either: {refused}") from None
    data = _data(path, got, exc.problem)
    text = json.dumps(data, indent=2) + "\n" if fmt == "json" else _text(data)
    window_ms = data["window"]["duration_ns"] / 1e6
    return text, f"streamed analysis of {path}: {len(data['devices'])} devices, window {window_ms:.1f} ms"


def _slack() -> int:
    from tracetriage.analyzers.analysis import SYNC_SLACK_NS

    return SYNC_SLACK_NS


def _data(path: str, got, why: str) -> dict:
    """The streamed numbers under the whole-table contract's names (window, devices' busy and gaps, kernels)."""
    w = got.window
    window = {"start_ns": w.start_ns, "end_ns": w.end_ns, "duration_ns": w.duration_ns, "source": w.source,
              "warmup_steps_excluded": w.warmup_steps_excluded, "setup_excluded_ns": w.setup_excluded_ns}
    devices = []
    for (pid, ordinal), t in sorted(got.timelines.items()):
        slices = _slices(t)
        devices.append({"pid": pid, "ordinal": ordinal, "busy_ns": t.busy_ns, "window_ns": t.window_ns,
                        "busy_pct": t.busy_pct, "gaps": dataclasses.asdict(t.gaps), "slices": slices,
                        "largest_slice": _largest(slices, t.window_ns)})
    steps = [{"pid": pid, "source": s.source, "count": s.count, "warmup_dropped": s.warmup_dropped}
             for pid, s in sorted(w.steps.items())]
    return {"analysis": "streamed", "input": str(path), "why_streamed": why, "window": window, "steps": steps,
            "devices": devices, "kernels": got.kernels, "kernel_median_ns": got.kernel_median_ns,
            "kernels_in_window": got.kernels_in_window, "not_measured": list(NOT_MEASURED)}


BUSY = "busy"  # compute + collective + copy: the streamed path does not tell them apart (no copy or collective pass)


def _slices(timeline) -> dict[str, int]:
    """The window's decomposition (analyzers/accounting.decomposition) as far as the stream measures it: the
    idle slices exactly (``idle:<class>:<cause>``, the timeline's idle by class and cause) and the busy time
    as one slice, ``busy``; they sum to the window."""
    from tracetriage.analyzers.timeline import CAUSES, GAP_CLASSES

    out = {BUSY: int(timeline.busy_ns)}
    for cls in GAP_CLASSES:
        for cause in CAUSES:
            out[f"idle:{cls}:{cause}"] = int(timeline.idle_by_class[cls][cause])
    return out


def _largest(slices: dict[str, int], window_ns: int) -> dict:
    """The slice holding the most of the window (the first of equals, in the decomposition's order): a
    measurement, not a verdict. ``busy`` cannot be split into compute, collectives and copies here."""
    name = max(slices, key=lambda k: slices[k])
    pct = round(100.0 * slices[name] / window_ns, 3) if window_ns else 0.0
    return {"slice": name, "ns": slices[name], "pct_of_window": pct}


def _text(data: dict) -> str:
    w = data["window"]
    lines = [f"tracetriage: streamed analysis of {data['input']}",
             f"  why: the whole-table model does not fit ({data['why_streamed']})",
             "  every number below equals the whole-table analysis's; NOT measured on the streamed path: "
             + "; ".join(data["not_measured"]) + ". No verdict is given.",
             "",
             f"window: {w['start_ns']} .. {w['end_ns']} ns ({w['duration_ns'] / 1e6:.3f} ms), from {w['source']}"
             + (f", {w['warmup_steps_excluded']} warm-up steps excluded" if w["warmup_steps_excluded"] else "")
             + (f", {w['setup_excluded_ns'] / 1e6:.3f} ms of set-up excluded" if w["setup_excluded_ns"] else "")]
    for s in data["steps"]:
        lines.append(f"  pid {s['pid']}: {s['count']} steps ({s['source']})")
    lines.append("")
    for d in data["devices"]:
        g = d["gaps"]
        causes = ", ".join(f"{cause} {pct:.1f}%" for cause, pct in g["by_cause_pct_of_window"].items() if pct)
        lines.append(f"GPU{d['ordinal']}/pid{d['pid']}: busy {d['busy_pct']:.1f}% of the window; {g['count']} gaps "
                     f"(p50 {g['p50_ns']} ns, p99 {g['p99_ns']} ns, max {g['max_ns']} ns); idle by cause: {causes or 'none'}")
        top = d["largest_slice"]
        what = (" (compute, collectives and copies are not told apart on the streamed path)" if top["slice"] == BUSY
                else " (idle: gap class, then what the host was doing)")
        lines.append(f"  largest slice of the window: {top['slice']} {top['pct_of_window']:.1f}%{what}")
    lines += ["", f"kernels in the window: {data['kernels_in_window']}, median {data['kernel_median_ns']} ns"]
    for k in data["kernels"]:
        lines.append(f"  {k['share_pct']:6.2f}%  {k['count']:>9}  median {k['median_ns']:>9} ns  {k['name']}")
    return "\n".join(lines) + "\n"
