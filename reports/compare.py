"""Views of a comparison (``tracetriage.compare/2``): json, text, md, html.

Every view reads the same dict; the verdict comes first, then the step time per rank, the
findings with their status and the evidence it was decided on, the per-step metrics, then
the kernels that moved most.
"""

from __future__ import annotations

import json

from tracetriage.analyzers.compare import speed_words
from tracetriage.analyzers.compare_metrics import ms_decimals, ms_text
from tracetriage.reports.jsonout import _clean
from tracetriage.reports.markdown import md_escape

LABELS = {
    "step_p50_ms": "step p50", "step_p99_ms": "step p99", "compute_ms": "compute", "collective_ms": "exposed collective",
    "copy_ms": "copies only", "idle_ms": "GPU idle", "idle_sync_ms": "idle: host in blocking syncs",
    "idle_memcpy_sync_ms": "idle: host in synchronous copies", "idle_launch_ms": "idle: host in launch calls",
    "idle_other_cuda_ms": "idle: other CUDA/HIP calls", "idle_host_ms": "idle: host code, no CUDA call",
    "idle_unknown_ms": "idle: cause unknown", "busy_pct": "GPU busy (share of its window)",
    "launches_per_step": "kernel launches", "graph_launches_per_step": "graph launches", "syncs_per_step": "blocking syncs",
    "dtoh_copies_per_step": "device-to-host copies", "ttft_p50_ms": "TTFT p50", "ttft_p99_ms": "TTFT p99",
    "tpot_p50_ms": "TPOT p50", "tpot_p99_ms": "TPOT p99", "itl_p50_ms": "ITL p50", "itl_p99_ms": "ITL p99",
    "e2el_p50_ms": "end-to-end latency p50", "throughput_rps": "request throughput",
}
VERDICT_WORDS = {"improved": "Improved", "regressed": "Regressed", "unchanged": "Unchanged (within noise)",
                 "mixed": "Mixed", "inconclusive": "Inconclusive"}


SERVING_PREFIXES = ("ttft_", "tpot_", "itl_", "e2el_", "throughput_")


def is_serving(m: dict) -> bool:
    """A serving figure (client percentiles, request throughput): per request, never per step."""
    return m["name"].startswith(SERVING_PREFIXES)


def ms(v, decimals: int | None = None, sign: str = "") -> str:
    """Milliseconds by compare's one precision rule (analyzers/compare.py ms_decimals)."""
    return "n/a" if v is None else ms_text(v, decimals, sign)


def value(v, unit: str) -> str:
    if v is None:
        return "n/a"
    if unit in ("ms", "ms/step"):
        return ms(v)
    if unit == "%":
        return f"{v:.1f}%"
    if unit == "req/s":
        return f"{v:.2f} req/s"
    return f"{v:,.1f}".rstrip("0").rstrip(".")


def change(m: dict) -> str:
    c = m["change"]
    if c is None:
        return "n/a"
    if m["unit"] == "%":
        return f"{c:+.1f} pt"
    if m["unit"].startswith("ms"):  # as precise as the coarser of its two values, no finer
        return ms(c, ms_decimals(max(abs(m["before"] or 0.0), abs(m["after"] or 0.0))), sign="+")
    return f"{c:+,.2f}".rstrip("0").rstrip(".")


def metric_label(m: dict) -> str:
    label = LABELS.get(m["name"], m["name"])
    return f"{label} (per step)" if m["unit"] in ("ms/step", "calls/step", "copies/step") else label


def pct(v) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def side_steps(side: dict) -> str:
    if side["world_size"] > 1:
        return f"{side['steps_per_rank']} steps per rank x {side['world_size']} ranks"
    return f"{side['steps']} steps"


def detail(c: dict) -> str:
    """The summary without its leading verdict word (the views print the verdict themselves)."""
    text = c["summary"]
    for sep in (";", ":"):
        if text.startswith(c["verdict"] + sep):
            return text[len(c["verdict"]) + 1:].strip()
    return text


def code(text: str) -> str:
    """A Markdown code span: backslash escapes are literal inside backticks, so none are added."""
    return "`" + str(text).replace("`", "'").replace("\n", " ") + "`"


def step_line(s: dict) -> str:
    if s["ratio"] is None:
        return (f"rank{s['rank']} (pid {s['before_pid']} -> {s['after_pid']}): not measured "
                f"({s['before_count']} / {s['after_count']} steps)")
    how = speed_words(s)
    return (f"rank{s['rank']} (pid {s['before_pid']} -> {s['after_pid']}): p50 {ms(s['before_p50_ns'] / 1e6)} -> "
            f"{ms(s['after_p50_ns'] / 1e6)} ({how}; after/before {s['ratio']:.3f}, 95% CI "
            f"{s['ci95'][0]:.3f}-{s['ci95'][1]:.3f}, Mann-Whitney p={s['p_value']:.2g}: {s['status']}); p99 "
            f"{ms(s['before_p99_ns'] / 1e6)} -> {ms(s['after_p99_ns'] / 1e6)} ({s['p99_status']}); "
            f"{s['before_count']} / {s['after_count']} steps")


def render_compare(cmp: dict, fmt_name: str, store=None) -> str:
    """The comparison in ``fmt_name``; ``store`` (the analysis cache, or None) keeps the HTML's compiled template."""
    public = {k: v for k, v in cmp.items() if not k.startswith("_")}
    if fmt_name == "json":
        return json.dumps(_clean(public), indent=2, ensure_ascii=False) + "\n"
    if fmt_name == "html":
        from tracetriage.reports import charts
        from tracetriage.reports.html import environment

        series = cmp.get("_series") or {}
        chart = charts.step_distributions(series.get("before") or {}, series.get("after") or {},
                                          "before", "after") if cmp["comparable"]["ok"] else None
        return environment(store).get_template("compare.html.j2").render(
            c=public, chart=chart, detail=detail(public), side_steps=side_steps, step_line=step_line, value=value, change=change, metric_label=metric_label, ms=ms,
            pct=pct, verdict_words=VERDICT_WORDS, sections=metric_sections(public["metrics"]))
    if fmt_name == "md":
        return _markdown(public)
    return _text(public)


STEP_NOTE = ("idle by cause says what the host was doing, a finding claims idle by when it happens, e.g. after each "
             "sync, so the two cut the same time differently")
SERVING_NOTE = "client percentiles and throughput from the serving benchmark, per request"


def metric_sections(metrics: list[dict]) -> list[tuple[str, str | None, list[dict]]]:
    """The metrics table in two parts, each under a heading that applies to its rows: (title,
    note or None, rows) for the per-step figures, then the serving figures."""
    step = [m for m in metrics if not is_serving(m)]
    serving = [m for m in metrics if is_serving(m)]
    out = []
    if step:
        idle = any(m["name"].startswith("idle_") for m in step)
        out.append(("Per step, absolute", STEP_NOTE if idle else None, step))
    if serving:
        out.append(("Serving", SERVING_NOTE, serving))
    return out


def _text(c: dict) -> str:
    comp = c["comparable"]
    lines = [f"tracetriage compare: {c['summary']}", "",
             f"before: {c['before']['label']} ({c['before']['devices']}; {side_steps(c['before'])}): {c['before']['headline']}",
             f"after:  {c['after']['label']} ({c['after']['devices']}; {side_steps(c['after'])}): {c['after']['headline']}",
             "", f"comparable: {'yes' if comp['ok'] else 'NO'} (confidence {comp['confidence']:.2f})"]
    lines += [f"  - {r}" for r in comp["reasons"]]
    lines += [f"SLO broken after the change: {x}" for x in c["slo_broken"]]
    lines += [f"SLO not checked: {x}" for x in c["slo_not_measured"]]
    if c["step_time"]:
        lines += ["", f"step time per rank (noise: changes under {c['threshold_pct']:g}% of the step or inside the "
                      "95% interval are no change):"]
        lines += [f"  {step_line(s)}" for s in c["step_time"][:8]]
        if len(c["step_time"]) > 8:
            lines.append(f"  ... {len(c['step_time']) - 8} more ranks in the JSON")
    if c["findings"]:
        lines += ["", "findings of the before capture checked on the after capture (and those new after):"]
        for f in c["findings"]:
            lines.append(f"  {f['id']}: {(f['status'] or 'not judged').upper()} — {f['decided_by']}")
            lines += [f"      {e['text']}" for e in f["evidence"]]
    for title, note, rows in metric_sections(c["metrics"]):
        lines += ["", f"{title.lower()}" + (f" ({note})" if note else "") + ":"]
        lines += [f"  {metric_label(m):<44} {value(m['before'], m['unit']):>14} -> {value(m['after'], m['unit']):<14} "
                  f"{change(m):>12}  {m['direction']}" for m in rows]
    if c["kernels"]:
        lines += ["", "kernels that moved most, ms per step (share of that device's window):"]
        for k in c["kernels"][:12]:
            lines.append(f"  {ms(k['before_ms_per_step']):>12} ({pct(k['before_share_pct'])}) -> {ms(k['after_ms_per_step']):>12} "
                         f"({pct(k['after_share_pct'])})  {k['name'][:80]}  [{k['device']}]")
    return "\n".join(lines) + "\n"


def _markdown(c: dict) -> str:
    comp = c["comparable"]
    lines = ["# tracetriage compare", "", f"**{md_escape(VERDICT_WORDS[c['verdict']])}** — {md_escape(detail(c))}", "",
             f"- before: {code(c['before']['label'])} ({md_escape(c['before']['devices'])}, {side_steps(c['before'])}) — "
             f"{md_escape(c['before']['headline'] or '')}",
             f"- after: {code(c['after']['label'])} ({md_escape(c['after']['devices'])}, {side_steps(c['after'])}) — "
             f"{md_escape(c['after']['headline'] or '')}",
             f"- comparable: {'yes' if comp['ok'] else '**no**'} (confidence {comp['confidence']:.2f}): "
             + md_escape("; ".join(comp["reasons"])),
             *[f"- SLO broken after the change: {md_escape(x)}" for x in c["slo_broken"]],
             *[f"- SLO not checked: {md_escape(x)}" for x in c["slo_not_measured"]], ""]
    if c["step_time"]:
        lines += ["## Step time", "", "| rank | before p50 | after p50 | after/before (95% CI) | p | before p99 | after p99 | status |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        for s in c["step_time"]:
            ci = f"{s['ratio']:.3f} ({s['ci95'][0]:.3f}-{s['ci95'][1]:.3f})" if s["ratio"] is not None else "n/a"
            p = f"{s['p_value']:.2g}" if s["p_value"] is not None else "n/a"
            f = lambda v: "n/a" if v is None else ms(v / 1e6)  # noqa: E731
            lines.append(f"| {s['rank']} | {f(s['before_p50_ns'])} | {f(s['after_p50_ns'])} | {ci} | {p} | "
                         f"{f(s['before_p99_ns'])} | {f(s['after_p99_ns'])} | {s['status']} |")
        lines.append("")
    if c["findings"]:
        lines += ["## Findings", "", "| finding | status | ms/step before | after | decided by | evidence |", "|---|---|---:|---:|---|---|"]
        for f in c["findings"]:
            lines.append(f"| {f['id']} | {f['status'] or 'not judged'} | {ms(f['before_ms_per_step'])} | {ms(f['after_ms_per_step'])} | "
                         f"{md_escape(f['decided_by'])} | {md_escape('; '.join(e['text'] for e in f['evidence']))} |")
        lines.append("")
    for title, note, rows in metric_sections(c["metrics"]):
        lines += [f"## {title}", "", *([md_escape(note[0].upper() + note[1:]) + ".", ""] if note else []),
                  "| metric | before | after | change | |", "|---|---:|---:|---:|---|"]
        lines += [f"| {md_escape(metric_label(m))} | {value(m['before'], m['unit'])} | {value(m['after'], m['unit'])} | "
                  f"{change(m)} | {m['direction']} |" for m in rows]
        lines.append("")
    if c["kernels"]:
        lines += ["## Kernels (ms per step, share of the device's window)", "",
                  "| device | kernel | before | after |", "|---|---|---:|---:|"]
        lines += [f"| {md_escape(k['device'])} | {code(k['name'][:90])} | {ms(k['before_ms_per_step'])} ({pct(k['before_share_pct'])}) | "
                  f"{ms(k['after_ms_per_step'])} ({pct(k['after_share_pct'])}) |" for k in c["kernels"][:20]]
    return "\n".join(lines) + "\n"
