"""The efficiency rule: busy is not fast. below_roofline judges what analyzers/efficiency.py
measures (achieved FLOP/s and bytes/s against the device's roofline, the decode bandwidth floor),
and the efficiency abstention says which capture would measure it when it is unknown."""

from __future__ import annotations

from tracetriage.analyzers import catalog, efficiency
from tracetriage.analyzers.evidence import ev, pct, severity_for, us
from tracetriage.analyzers.rules.context import Context, Rule, t

THRESHOLDS = efficiency.THRESHOLDS  # measuring reads them too: declared with the measurement


def abstention(ctx: Context) -> list[dict]:
    """Busy GPUs whose dominant class's efficiency is unknown: the capture that would decide
    (:func:`missing_shapes`: what is actually missing, not a generic record_shapes hint)."""
    out = []
    for p in ctx.judged():
        j = efficiency.judgement(p.get("_efficiency"))
        busy = [d for d in p["devices"] if d["window_ns"]
                and 100.0 * d["_slices"]["compute"] / d["window_ns"] >= t("roofline_busy_min_pct")]
        if not busy or (j and j["measured"]):
            continue
        eff = p.get("_efficiency") or {}
        why = efficiency.missing_shapes(eff)
        dom = (j or {}).get("class")
        too_little = (f"{efficiency.CLASS_WORDS.get(dom, 'the dominant class')} hold most kernel time and too little of it "
                      "carries shapes")
        if why is None:
            reason = too_little
        elif why["what"] == "operator shapes" or why["what"].endswith("without dtype"):
            reason = why["reason"]
        elif dom is None:  # no kernel recorded in the window: graph replays traced whole
            reason = f"{why['what']}: {why['reason']}"
        else:
            reason = f"{too_little}: {why['what']}, {why['reason']}"
        out.append({"analysis": "efficiency", "scope": p["meta"].get("path") or "trace",
                    "reason": f"the GPU computes most of the window, but how fast is not measured: {reason}",
                    "capture_hint": why["capture_hint"] if why else efficiency.capture_hint(p["meta"].get("format"))})
    return out


MECHANISMS = {
    ("gemm", "compute"): "gemm",
    ("gemm", "memory"): "gemm_memory",
    ("attention", "compute"): "attention",
    ("attention", "memory"): "attention",
    ("memory_bound", "compute"): "memory_bound",
    ("memory_bound", "memory"): "memory_bound",
}


def rule_below_roofline(ctx: Context):
    """The GPU computes most of the window but the class holding most kernel time runs below
    ``roofline_min_pct`` of its roofline (or a decode step below ``decode_floor_min_pct`` of its
    bandwidth floor). It claims, from each such device's compute slice, the time above the
    roofline time: class time x (1 - pct/100), or (step - floor) x steps for decode."""
    wants, info = {}, {}
    for p in ctx.judged():
        eff = p.get("_efficiency")
        j = efficiency.judgement(eff)
        if not j or not j["measured"] or not j["below"]:
            continue
        # the trace's time above the roofline, split over its devices by their compute time
        compute = sum(d["_slices"]["compute"] for d in p["devices"]) or 1
        for d in p["devices"]:
            w = d["window_ns"]
            if not w or 100.0 * d["_slices"]["compute"] / w < t("roofline_busy_min_pct"):
                continue
            if j.get("decode"):
                df = j["decode"]
                ns = max(0.0, df["measured_ns"] - df["floor_ns"]) * df["steps"]
            else:
                ns = eff["_wasted_ns"].get("ns", 0.0)
            wants[d["id"]] = (["compute"], ns * d["_slices"]["compute"] / compute)
            info[d["id"]] = (p, eff, j, d)
    if not wants:
        return None
    taken = ctx.ledger.take("below_roofline", wants)
    impact = ctx.ledger.impact_pct(taken)
    dev_id = max(taken, key=lambda x: taken[x] / max(1, ctx.ledger.window[x]))
    p, eff, j, d = info[dev_id]
    cls = j["entry"]
    dev = eff["device"]
    w = d["window_ns"]
    compute_pct = 100.0 * d["_slices"]["compute"] / w
    n = len(ctx.devices)
    denominator = "window" if n == 1 else f"window, mean over {n} devices"
    evidence = [
        ev("device", dev["model"], "", None, text=f"device: {dev['model']} (peaks from {dev['source']})"),
        ev("compute_pct", round(compute_pct, 2), "%", f"window on {d['id']}",
           text=f"kernels run {pct(compute_pct)} of the {us(w)} window on {d['id']}: the GPU is busy"),
    ]
    total_k = eff["_kernel_ns"] or 1
    for c in eff["classes"]:
        evidence.append(ev(f"{c['class']}_pct_of_roofline", c["pct_of_roofline"], "%", f"{c['class']} roofline time",
                           text=f"{efficiency.CLASS_WORDS[c['class']]}: {100.0 * c['time_ns'] / total_k:.0f}% of kernel time, "
                                f"{c['achieved_tflops']:.1f} TFLOP/s, {c['achieved_gbps']:.0f} GB/s, "
                                f"{c['intensity'] if c['intensity'] is not None else 'n/a'} FLOP/B, {c['bound']}-bound, "
                                f"{c['pct_of_roofline']:.0f}% of roofline"))
    if j.get("decode"):
        df = j["decode"]
        evidence.append(ev("pct_of_floor", df["pct_of_floor"], "%", "measured step p50",
                           text=f"a decode step reads {df['bytes_per_step'] / 1e9:.2f} GB (weights + KV cache): "
                                f"{us(df['floor_ns'])} at {dev['bandwidth_gbps']:,.0f} GB/s; the step takes "
                                f"{us(df['measured_ns'])} (p50 of {df['steps']} steps) = {df['pct_of_floor']:.0f}% of the floor"))
    top = next((o for o in eff["top_ops"] if o["class"] == j["class"]), None)
    if top:
        evidence.append(ev("top_op", top["name"], "", None,
                           text=f"top {j['class']} op: {top['name']} {top['input_dims']} {top['dtype']} x{top['count']}, "
                                f"{top['achieved_tflops']:.1f} TFLOP/s, {top['pct_of_roofline']:.0f}% of roofline"
                                if top.get("pct_of_roofline") is not None else f"top op: {top['name']}"))
    evidence.append(ev("claimed_pct", round(impact, 2), "%", denominator,
                       text=f"time above the roofline bound: {pct(impact)} of the window"))
    variant = "decode" if j.get("decode") else MECHANISMS.get((j["class"], cls["bound"] if cls else "compute"), "gemm")
    fields = {"what": j["text"], "device": dev["model"], "busy": pct(compute_pct), "claimed": pct(impact),
              "klass": efficiency.CLASS_WORDS[j["class"]],
              "pct": f"{(j['decode'] or {}).get('pct_of_floor') or (cls or {}).get('pct_of_roofline') or 0:.0f}%",
              "tflops": f"{cls['achieved_tflops']:.1f} TFLOP/s" if cls else "n/a",
              "gbps": f"{cls['achieved_gbps']:.0f} GB/s" if cls else "n/a",
              "threshold": f"{t('decode_floor_min_pct') if j.get('decode') else t('roofline_min_pct'):.0f}%"}
    return catalog.make("below_roofline", impact, fields, evidence, severity=severity_for(impact),
                        denominator=denominator, kind=ctx.kind, variant=variant)


RULE = Rule("below_roofline", "throughput", rule_below_roofline, reads=("efficiency", "devices"),
            thresholds=("roofline_min_pct", "roofline_busy_min_pct", "roofline_min_measured_share", "decode_floor_min_pct"))
