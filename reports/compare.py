"""Views of a comparison (``tracetriage.compare/1``): json, text, md, html."""

from __future__ import annotations

import json

from tracetriage.reports.jsonout import _clean
from tracetriage.reports.markdown import md_escape
from tracetriage.reports.view import fmt_ns

LABELS = {
    "busy_pct": ("GPU busy (mean over devices)", "%"), "busy_pct_min": ("GPU busy (least busy device)", "%"),
    "idle_launch_pct": ("idle: host in launch calls", "%"), "idle_sync_pct": ("idle: host in blocking syncs", "%"),
    "idle_memcpy_sync_pct": ("idle: host in synchronous copies", "%"), "idle_other_cuda_pct": ("idle: other CUDA/HIP calls", "%"),
    "idle_host_pct": ("idle: host code, no CUDA call", "%"), "idle_unknown_pct": ("idle: cause unknown (no API trace)", "%"),
    "launches_per_step": ("kernel launches per step", ""), "graph_launches_per_step": ("graph launches per step", ""),
    "syncs_per_step": ("blocking syncs per step", ""), "step_p50_ns": ("step p50", "ns"), "step_p99_ns": ("step p99", "ns"),
    "collective_share_pct": ("collective share", "%"), "collective_exposed_pct": ("collective exposed", "%"),
}


def fmt(value, unit):
    if value is None:
        return "n/a"
    if unit == "ns":
        return fmt_ns(value)
    if unit == "%":
        return f"{value:.1f}%"
    return f"{value:,.1f}".rstrip("0").rstrip(".") if isinstance(value, float) else f"{value:,}"


def rows(cmp: dict) -> list[dict]:
    out = []
    for m, d in cmp["deltas"].items():
        label, unit = LABELS.get(m, (m, ""))
        change = d["change"]
        if change is None:
            ch = "n/a"
        elif unit == "ns":
            ch = ("+" if change >= 0 else "-") + fmt_ns(abs(change))
        elif unit == "%":
            ch = "0.0 pt" if abs(change) < 0.05 else f"{change:+.1f} pt"
        else:
            ch = f"{change:+,.1f}".rstrip("0").rstrip(".")
        out.append({"metric": m, "label": label, "before": fmt(d["before"], unit), "after": fmt(d["after"], unit),
                    "change": ch, "changed": change not in (None, 0, 0.0)})
    return out


def share(v) -> str:
    return "not in window" if v is None else f"{v:.2f}%"


def kchange(k: dict) -> str:
    return "n/a" if k["change_pts"] is None else f"{k['change_pts']:+.2f} pt"


def finding_line(cmp: dict) -> str:
    f = cmp["findings"]
    return "Findings — " + "; ".join(f"{k}: {', '.join(f[k]) or 'none'}" for k in ("resolved", "new", "improved", "worse", "unchanged")) + (
        f" (tolerance {cmp['impact_tolerance_pts']:g} points of impact)")


def render_compare(cmp: dict, fmt_name: str) -> str:
    if fmt_name == "json":
        return json.dumps(_clean(cmp), indent=2, ensure_ascii=False) + "\n"
    if fmt_name == "html":
        from tracetriage.reports.html import environment

        return environment().get_template("compare.html.j2").render(c=cmp, rows=rows(cmp), share=share, kchange=kchange)
    if fmt_name == "md":
        lines = ["# tracetriage compare", "", f"**{md_escape(cmp['summary'])}**", "",
                 f"- before: {md_escape(cmp['before']['label'])} — {md_escape(cmp['before']['headline'] or '')}",
                 f"- after: {md_escape(cmp['after']['label'])} — {md_escape(cmp['after']['headline'] or '')}", "",
                 "| metric | before | after | change |", "|---|---:|---:|---:|"]
        lines += [f"| {md_escape(r['label'])} | {md_escape(r['before'])} | {md_escape(r['after'])} | {md_escape(r['change'])} |" for r in rows(cmp)]
        lines += ["", finding_line(cmp), "", "| kernel | before (share of window) | after | change |", "|---|---:|---:|---:|"]
        lines += [f"| {md_escape(k['name'][:90])} | {share(k['before_share_pct'])} | {share(k['after_share_pct'])} | {kchange(k)} |"
                  for k in cmp["kernel_deltas"]]
        return "\n".join(lines) + "\n"
    lines = [f"tracetriage compare: {cmp['summary']}", "",
             f"before: {cmp['before']['label']}: {cmp['before']['headline']}",
             f"after:  {cmp['after']['label']}: {cmp['after']['headline']}", ""]
    lines += [f"  {r['label']:<38} {r['before']:>12} -> {r['after']:>12}   {r['change']}" for r in rows(cmp)]
    lines += ["", finding_line(cmp)]
    lines += [f"  {c['id']}: {c['before_pct']:.1f}% -> {c['after_pct']:.1f}% of the {c['denominator']} ({c['verdict']})"
              for c in cmp["finding_changes"]]
    if cmp["kernel_deltas"]:
        lines += ["", "kernel time as a share of each window (before -> after):"]
        lines += [f"  {share(k['before_share_pct']):>16} -> {share(k['after_share_pct']):<16} {kchange(k):>10}  {k['name'][:90]}"
                  for k in cmp["kernel_deltas"][:10]]
    return "\n".join(lines) + "\n"
