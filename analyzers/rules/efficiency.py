"""The efficiency rule: busy is not fast. below_roofline judges what analyzers/efficiency.py
measures (achieved FLOP/s and bytes/s against the device's roofline, the decode bandwidth floor),
and the efficiency abstention says which capture would measure it when it is unknown."""

from __future__ import annotations

from tracetriage.analyzers import catalog, efficiency
from tracetriage.analyzers.efficiency_rows import Judgement, Roofline
from tracetriage.analyzers.evidence import ev, severity_for
from tracetriage.analyzers.findings import Abstention
from tracetriage.analyzers.metrics import Efficiency
from tracetriage.analyzers.rules.context import Context, Rule, t
from tracetriage.wording import pct, us

THRESHOLDS = {
    **efficiency.THRESHOLDS,  # measuring reads those too: declared with the measurement
    "roofline_confirm_margin_pct": (10.0, ("a re-capture of the same kernels moves their achieved rate by a few points: the "
                                           "confirm target lies this far above the finding's line, so a fix that only "
                                           "reaches the line (where it stops firing) does not count as confirmed")),
}


def abstention(ctx: Context) -> list[Abstention]:
    """Busy GPUs whose dominant class's efficiency is unknown: the capture that would decide
    (:func:`missing_shapes`: what is actually missing, not a generic record_shapes hint)."""
    out = []
    for trace in ctx.judged():
        judged = efficiency.judgement(trace.efficiency)
        busy = [device for device in trace.devices if device.window_ns
                and 100.0 * device.slices["compute"] / device.window_ns >= t("roofline_busy_min_pct")]
        if not busy or (judged and judged.measured):
            continue
        why = efficiency.missing_shapes(trace.efficiency)
        dominant = judged.kind if judged else None
        words = efficiency.class_words(trace.efficiency, dominant) if dominant else "the dominant class"
        too_little = f"{words} hold most kernel time and too little of it carries shapes"
        if why is None:
            reason = too_little
        elif why.what == "operator shapes" or why.what.endswith("without dtype"):
            reason = why.reason
        elif dominant is None:  # no kernel recorded in the window: graph replays traced whole
            reason = f"{why.what}: {why.reason}"
        else:
            reason = f"{too_little}: {why.what}, {why.reason}"
        out.append(Abstention(analysis="efficiency", scope=trace.meta.get("path") or "trace",
                    reason=f"the GPU computes most of the window, but how fast is not measured: {reason}",
                    capture_hint=why.capture_hint if why else efficiency.capture_hint(trace.meta.get("format"),
                                                                                          ctx.kind.get("language") == "native")))
    return out


MECHANISMS = {
    ("gemm", "compute"): "gemm",
    ("gemm", "memory"): "gemm_memory",
    ("attention", "compute"): "attention",
    ("attention", "memory"): "attention",
    ("memory_bound", "compute"): "memory_bound",
    ("memory_bound", "memory"): "memory_bound",
}


def _roofline_wants(ctx: Context) -> tuple[dict, dict]:
    """What below_roofline claims on each busy device of a judged trace whose dominant class runs below its
    roofline (``wants`` for the ledger), and per device the (trace, judgement, device) it came from."""
    wants, judged_on = {}, {}
    for trace in ctx.judged():
        judged = efficiency.judgement(trace.efficiency)
        if not judged or not judged.measured or not judged.below:
            continue
        # the trace's time above the roofline, split over its devices by their compute time
        compute = sum(device.slices["compute"] for device in trace.devices) or 1
        for device in trace.devices:
            window_ns = device.window_ns
            if not window_ns or 100.0 * device.slices["compute"] / window_ns < t("roofline_busy_min_pct"):
                continue
            if judged.decode:
                floor = judged.decode
                ns = max(0.0, floor.measured_ns - floor.floor_ns) * floor.steps
            else:
                ns = trace.efficiency.wasted_ns.get("ns", 0.0)
            wants[device.id] = (["compute"], ns * device.slices["compute"] / compute)
            judged_on[device.id] = (trace, judged, device)
    return wants, judged_on


def _class_evidence(measured: Efficiency) -> list[dict]:
    """One evidence row per measured kernel class: its share of kernel time, rates, intensity and roofline."""
    total_kernel_ns = measured.kernel_ns or 1
    return [ev(f"{row.name}_pct_of_roofline", row.roofline.pct_of_roofline, "%", f"{row.name} roofline time",
               text=f"{efficiency.class_words(measured, row.name)}: "
                    f"{100.0 * row.rates.time_ns / total_kernel_ns:.0f}% of kernel time, "
                    f"{row.rates.achieved_tflops:.1f} TFLOP/s, {row.rates.achieved_gbps:.0f} GB/s, "
                    f"{row.rates.intensity if row.rates.intensity is not None else 'n/a'} FLOP/B, {row.roofline.bound}-bound, "
                    f"{_pct_of_roofline(row.roofline)}")
            for row in measured.classes]


def _pct_of_roofline(roof: Roofline) -> str:
    """'29% of roofline (against the 1,307 TFLOP/s datasheet dense BF16 peak, ...)': the peak named."""
    against = efficiency.peak_words(roof) if roof.bound == "compute" else "the datasheet memory bandwidth"
    return f"{roof.pct_of_roofline:.0f}% of roofline (against {against})"


def _decode_and_top_op_evidence(measured: Efficiency, judged: Judgement) -> list[dict]:
    """The decode step against its bandwidth floor (when judged on it) and the top op of the dominant class."""
    out = []
    peaks = measured.device
    if judged.decode:
        floor = judged.decode
        out.append(ev("pct_of_floor", floor.pct_of_floor, "%", "measured step p50",
                      text=f"a decode step reads {floor.bytes_per_step / 1e9:.2f} GB (weights + KV cache): "
                           f"{us(floor.floor_ns)} at {peaks['bandwidth_gbps']:,.0f} GB/s; the step takes "
                           f"{us(floor.measured_ns)} (p50 of {floor.steps} steps) = "
                           f"{floor.pct_of_floor:.0f}% of the floor"))
    top = next((op for op in measured.top_ops if op.kind == judged.kind), None)
    if top:
        out.append(ev("top_op", top.name, "", None,
                      text=f"top {judged.kind} op: {top.name} {top.input_dims} {top.dtype} x{top.count}, "
                           f"{top.rates.achieved_tflops:.1f} TFLOP/s, {_pct_of_roofline(top.roofline)}"
                           if top.roofline.pct_of_roofline is not None else f"top op: {top.name}"))
    return out


def _roofline_fields(judged: Judgement, peaks: dict, compute_pct: float, impact: float, stepped: bool,
                     measured: Efficiency | None = None) -> dict:
    """The catalog fields of below_roofline: what runs below which roofline, at what rates; the confirm target
    (roofline_confirm_margin_pct above the finding's line, or above the measured % where that is not below the
    line: a target never at or under what the class already reaches) and the unit of the kernel time (per step,
    or per call of the same ops when the capture has no steps); ``measured``: the efficiency whose class words
    say "GEMMs and convolutions" where convolution kernels ran."""
    row = judged.entry
    line = t("decode_floor_min_pct") if judged.decode else t("roofline_min_pct")
    shown_pct = (judged.decode.pct_of_floor if judged.decode else None) or (row.roofline.pct_of_roofline if row else None)
    target = max(line, shown_pct or 0.0) + t("roofline_confirm_margin_pct")
    return {"what": judged.text, "device": peaks["model"], "busy": pct(compute_pct), "claimed": pct(impact),
            "klass": efficiency.class_words(measured, judged.kind),
            "pct": f"{shown_pct or 0:.0f}%",
            "tflops": f"{row.rates.achieved_tflops:.1f} TFLOP/s" if row else "n/a",
            "gbps": f"{row.rates.achieved_gbps:.0f} GB/s" if row else "n/a",
            "threshold": f"{line:.0f}%", "target": f"{target:.0f}%",
            "per_unit": "per step" if stepped else "per call of the same ops"}


def rule_below_roofline(ctx: Context):
    """The GPU computes most of the window but the class holding most kernel time runs below
    ``roofline_min_pct`` of its roofline (or a decode step below ``decode_floor_min_pct`` of its
    bandwidth floor). It claims, from each such device's compute slice, the time above the
    roofline time: class time x (1 - pct/100), or (step - floor) x steps for decode."""
    wants, judged_on = _roofline_wants(ctx)
    if not wants:
        return None
    taken = ctx.ledger.take("below_roofline", wants)
    impact = ctx.ledger.impact_pct(taken)
    device_id = max(taken, key=lambda x: taken[x] / max(1, ctx.ledger.window[x]))
    trace, judged, device = judged_on[device_id]
    measured = trace.efficiency
    peaks = measured.device
    window_ns = device.window_ns
    compute_pct = 100.0 * device.slices["compute"] / window_ns
    count = len(ctx.devices)
    denominator = "window" if count == 1 else f"window, mean over {count} devices"
    evidence = [
        ev("device", peaks["model"], "", None, text=f"device: {peaks['model']} (peaks from {peaks['source']})"),
        ev("compute_pct", round(compute_pct, 2), "%", f"window on {device.id}",
           text=f"kernels run {pct(compute_pct)} of the {us(window_ns)} window on {device.id}: the GPU is busy"),
        *_class_evidence(measured),
        *_decode_and_top_op_evidence(measured, judged),
        ev("claimed_pct", round(impact, 2), "%", denominator,
           text=f"time above the roofline bound: {pct(impact)} of the window"),
    ]
    row = judged.entry
    variant = ("decode" if judged.decode
               else MECHANISMS.get((judged.kind, row.roofline.bound if row else "compute"), "gemm"))
    stepped = any(process.steps.count for process in trace.processes if process.pid == device.pid)
    fields = _roofline_fields(judged, peaks, compute_pct, impact, stepped, measured)
    return catalog.make("below_roofline", impact, fields, evidence,
                        severity=severity_for(impact), denominator=denominator, kind=ctx.kind, variant=variant)


RULE = Rule("below_roofline", "throughput", rule_below_roofline, reads=("efficiency", "devices"),
            thresholds=("roofline_min_pct", "roofline_busy_min_pct", "roofline_min_measured_share", "decode_floor_min_pct",
                        "roofline_confirm_margin_pct"))
