"""Reports of a comparison (``tracetriage.compare/2``): json (the contract), and text, md, html laid out
from its CompareView (reports/compare_view.py) by templates/compare.*.j2.

Every report reads the same view; the verdict comes first, then the step time per rank, the findings
with their status and the evidence it was decided on, the per-step metrics, then the kernels that
moved most.
"""

from __future__ import annotations

import json

from tracetriage.reports.compare_view import compare_view
from tracetriage.reports.jsonout import _clean


def code(text: str) -> str:
    """A Markdown code span: backslash escapes are literal inside backticks, so none are added."""
    return "`" + str(text).replace("`", "'").replace("\n", " ") + "`"


def render_compare(cmp: dict, fmt_name: str, store=None) -> str:
    """The comparison ``cmp`` (its contract, with the private ``_series`` the step chart is drawn from)
    in one format: json, html, md or text; ``store`` (the analysis cache, or None) keeps the HTML's
    compiled template."""
    public = {k: v for k, v in cmp.items() if not k.startswith("_")}
    if fmt_name == "json":
        return json.dumps(_clean(public), indent=2, ensure_ascii=False) + "\n"
    view = compare_view(public)
    if fmt_name == "html":
        from tracetriage.reports import charts
        from tracetriage.reports.html import environment

        series = cmp.get("_series") or {}
        chart = charts.step_distributions(series.get("before") or {}, series.get("after") or {},
                                          "before", "after") if view.comparable else None
        return environment(store).get_template("compare.html.j2").render(v=view, chart=chart)
    if fmt_name == "md":
        from tracetriage.reports.markdown import environment

        return environment().get_template("compare.md.j2").render(v=view, code=code)
    from tracetriage.reports.text import environment

    return environment().get_template("compare.txt.j2").render(v=view)
