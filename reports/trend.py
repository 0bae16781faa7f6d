"""Reports of a trend (``tracetriage.trend/1``): json (the contract), the series as a table, and text,
md, html laid out from its TrendView (reports/trend_view.py) by templates/trend.*.j2."""

from __future__ import annotations

import json

from tracetriage.reports.jsonout import _clean
from tracetriage.reports.trend_view import gate_line, series_title, trend_view

__all__ = ["CHART_SERIES", "gate_line", "render_trend", "series_frame"]  # gate_line: the CLI's note on stderr

CHART_SERIES = ("step_p50_ms", "step_p99_ms", "busy_pct", "idle_ms", "launches_per_step", "syncs_per_step",
                "ttft_p50_ms", "tpot_p50_ms", "throughput_rps")


def series_frame(result: dict):
    """One row per group, case and series: the long table ``--format parquet`` writes."""
    import pandas as pd

    rows = []
    for group in result["groups"]:
        for name, series in group["series"].items():
            for case, value in zip(group["cases"], series["values"]):
                rows.append({"group": group["key"], "case": case["name"], "time": case["time"], "label": case["label"],
                             "metric": name, "unit": series["unit"], "value": value})
    return pd.DataFrame(rows, columns=["group", "case", "time", "label", "metric", "unit", "value"])


def render_trend(result: dict, fmt: str, links: str | None = None, gate: bool = False, store=None) -> str:
    """The trend in one format: json, html, md or text. ``links``: the batch folder relative to the
    report (the captures link to their reports); ``gate``: --gate was given, so the reports print the
    gate's result line; ``store`` (the analysis cache, or None) keeps the HTML's compiled template."""
    if fmt == "json":
        return json.dumps(_clean(result), indent=2, ensure_ascii=False) + "\n"
    view = trend_view(result, links, gate)
    if fmt == "html":
        from tracetriage.reports.charts import trend_charts
        from tracetriage.reports.html import environment

        charts = {group.key: trend_charts(contract, [c for c in result["changes"] if c["group"] == group.key], CHART_SERIES,
                                          [case.href for case in group.cases], title=series_title)
                  for contract, group in zip(result["groups"], view.groups)}
        return environment(store).get_template("trend.html.j2").render(v=view, charts=charts)
    if fmt == "md":
        from tracetriage.reports.markdown import environment

        return environment().get_template("trend.md.j2").render(v=view)
    from tracetriage.reports.text import environment

    return environment().get_template("trend.txt.j2").render(v=view)
