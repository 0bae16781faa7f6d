"""Views of a trend (``tracetriage.trend/1``): json, text, md, html, and the series as a table."""

from __future__ import annotations

import json

from tracetriage.reports.compare import LABELS
from tracetriage.reports.jsonout import _clean
from tracetriage.reports.markdown import md_escape

CHART_SERIES = ("step_p50_ms", "step_p99_ms", "busy_pct", "idle_ms", "launches_per_step", "syncs_per_step",
                "ttft_p50_ms", "tpot_p50_ms", "throughput_rps")


def series_frame(result: dict):
    """One row per group, case and series: the long table ``--format parquet`` writes."""
    import pandas as pd

    rows = []
    for g in result["groups"]:
        for name, s in g["series"].items():
            for case, value in zip(g["cases"], s["values"]):
                rows.append({"group": g["key"], "case": case["name"], "time": case["time"], "label": case["label"],
                             "metric": name, "unit": s["unit"], "value": value})
    return pd.DataFrame(rows, columns=["group", "case", "time", "label", "metric", "unit", "value"])


def level(v, unit) -> str:
    if v is None:
        return "n/a"
    if unit in ("ms", "ms/step"):
        return f"{v:.3f} ms"
    if unit == "%":
        return f"{v:.1f}%"
    return f"{v:,.2f}".rstrip("0").rstrip(".")


def pct(v) -> str:
    return "" if v is None else f"{v:+.1f}%"


def label(metric: str) -> str:
    """A series as a reader names it: compare's labels; finding:<id> and kernel:<name> as such."""
    if metric.startswith("finding:"):
        return f"{metric[8:]} (ms per step it claims)"
    if metric.startswith("kernel:"):
        return f"kernel {metric[7:]} (ms per step)"
    return LABELS.get(metric, metric.replace("_", " "))


def series_title(metric: str, unit: str) -> str:
    """A chart's title: the table's label, with the unit where the label does not say it."""
    text = label(metric)
    return text if metric.startswith(("finding:", "kernel:")) else f"{text} ({unit})"


def change_text(c: dict) -> str:
    """The change: points for a share (busy %), else relative to the level before."""
    b, a = c["before"]["level"], c["after"]["level"]
    if c["unit"] == "%" and b is not None and a is not None:
        return f"{a - b:+.1f} pt"
    return pct(c["change_pct"]) or "n/a"


def change_line(c: dict) -> str:
    what = "alone (outlier)" if c["kind"] == "outlier" else "on (level shift)"
    text = (f"{label(c['metric'])}: {c['direction']} from {c['first_bad']} {what}: {level(c['before']['level'], c['unit'])} -> "
            f"{level(c['after']['level'], c['unit'])} ({change_text(c)}); last good {c['last_good'] or 'none (first capture)'}")
    if c["findings"]:
        text += "; findings: " + ", ".join(f"{f['id']} {f['status']}" for f in c["findings"])
    if c["kernels"]:
        k = c["kernels"][0]
        text += f"; kernel moved most: {k['name'][:60]}"
    return text


def gate_line(result: dict, gate: bool) -> str | None:
    """The gate's result with --gate (passed or failed, against which baseline); without it a
    latest capture in a regressed segment is a finding of the trend, not a gate."""
    from tracetriage.analyzers.trend import matches_baseline

    g = result["gate"]
    budgets = "step time, serving percentiles"
    if not gate:
        return (f"the latest capture is in a regressed segment in: {', '.join(g['groups'])}" if g["regressed"] else None)
    base = g.get("baseline")
    if base is None:
        if g["regressed"]:
            return (f"gate: failed: the latest capture is in a regressed segment (a budget series shifted worse and did not "
                    f"come back) in: {', '.join(g['groups'])}")
        return f"gate: passed: no group's latest capture is in a regressed segment of a budget series ({budgets})"
    judged = [grp["key"] for grp in result["groups"] if any(matches_baseline(c["name"], base) for c in grp["cases"])]
    others = len(result["groups"]) - len(judged)
    rest = f"; {others} group(s) without {base} not judged" if others else ""
    if g["regressed"]:
        return (f"gate: failed against baseline {base}: the latest capture of {', '.join(g['groups'])} is worse than "
                f"{base} beyond the noise and the practical minimum on a budget series ({budgets}){rest}")
    return (f"gate: passed against baseline {base}: the latest capture of {', '.join(judged)} is within the noise or "
            f"the practical minimum of {base} on every budget series ({budgets}){rest}")


def md_link(name: str | None, group: dict, links: str | None) -> str:
    """A case name, linked to its report when the output knows where the batch folder is."""
    if not name:
        return ""
    case = next((c for c in group["cases"] if c["name"] == name), None)
    text = md_escape(name)
    if links is None or not case or not case.get("report"):
        return text
    return f"[{text}]({links.rstrip('/')}/{case['report']})"


def render_trend(result: dict, fmt: str, links: str | None = None, gate: bool = False, store=None) -> str:
    """``gate``: --gate was given, so the views print the gate's result line; ``store`` (the analysis
    cache, or None) keeps the HTML's compiled template."""
    gate_text = gate_line(result, gate)
    if fmt == "json":
        return json.dumps(_clean(result), indent=2, ensure_ascii=False) + "\n"
    if fmt == "html":
        from tracetriage.reports.charts import trend_charts
        from tracetriage.reports.html import environment

        def href(case):
            if links is None or not case.get("report"):
                return None
            return f"{links.rstrip('/')}/{case['report']}"

        charts = {g["key"]: trend_charts(g, [c for c in result["changes"] if c["group"] == g["key"]], CHART_SERIES,
                                         [href(c) for c in g["cases"]], title=series_title) for g in result["groups"]}
        return environment(store).get_template("trend.html.j2").render(t=result, charts=charts, href=href, change_line=change_line,
                                                                  level=level, label=label, change_text=change_text,
                                                                  gate_text=gate_text, gate=gate)
    if fmt == "md":
        lines = ["# tracetriage trend", "", f"Ordered by {md_escape(result['order'])}; practical minimum {result['threshold_pct']:g}% "
                 "of the step.", ""]
        if gate_text:
            lines += [f"**{md_escape(gate_text)}**", ""]
        for g in result["groups"]:
            lines += [f"## {md_escape(g['key'])}", "", f"**{md_escape(g['verdict'])}**", "",
                      f"{len(g['cases'])} captures: {md_escape(g['cases'][0]['name'])} … {md_escape(g['cases'][-1]['name'])}", ""]
            mine = [c for c in result["changes"] if c["group"] == g["key"]]
            if mine:
                lines += ["| series | kind | direction | last good | first bad | before | after | change | findings |",
                          "|---|---|---|---|---|---:|---:|---:|---|"]
                for c in mine:
                    lines.append(f"| {md_escape(label(c['metric']))} | {c['kind']} | {c['direction']} | {md_link(c['last_good'], g, links)} | "
                                 f"{md_link(c['first_bad'], g, links)} | {level(c['before']['level'], c['unit'])} | "
                                 f"{level(c['after']['level'], c['unit'])} | "
                                 f"{change_text(c)} | "
                                 f"{md_escape(', '.join(f['id'] + ' ' + f['status'] for f in c['findings']))} |")
                lines.append("")
        for u in result["ungrouped"]:
            lines.append(f"- not in a series: {md_escape(', '.join(c['name'] for c in u['cases']))} ({md_escape(u['reason'])})")
        for f in result["failed"]:
            lines.append(f"- failed: {md_escape(f['name'])}: {md_escape(str(f['error']))}")
        return "\n".join(lines) + "\n"
    lines = [f"tracetriage trend: {len(result['groups'])} group(s), ordered by {result['order']}", ""]
    for g in result["groups"]:
        lines += [g["verdict"], f"  {len(g['cases'])} captures: {g['cases'][0]['name']} ... {g['cases'][-1]['name']}"]
        for c in result["changes"]:
            if c["group"] == g["key"]:
                lines.append(f"  - {change_line(c)}")
        lines.append("")
    for u in result["ungrouped"]:
        lines.append(f"not in a series: {', '.join(c['name'] for c in u['cases'])} ({u['reason']})")
    for f in result["failed"]:
        lines.append(f"failed: {f['name']}: {f['error']}")
    if gate_text:
        lines.append(gate_text)
    return "\n".join(lines) + "\n"
