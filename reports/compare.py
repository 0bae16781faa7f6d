"""Reports of a comparison (``tracetriage.compare/2``): json (the contract), and text, md, html laid out
from its CompareView (reports/compare_view.py) by templates/compare.*.j2.

Every report reads the same view; the verdict comes first, then the step time per rank, the findings
with their status and the evidence it was decided on, the per-step metrics, then the kernels that
moved most.
"""

from __future__ import annotations

import json

from tracetriage.records.compare import StepSeries, read
from tracetriage.reports.compare_view import compare_view
from tracetriage.reports.jsonout import _clean


def code(text: str) -> str:
    """A Markdown code span: backslash escapes are literal inside backticks, so none are added."""
    return "`" + str(text).replace("`", "'").replace("\n", " ") + "`"


def render_compare(cmp: dict, fmt_name: str, store=None) -> str:
    """The comparison ``cmp`` (its contract, with the private ``_series`` the step chart is drawn from)
    in one format: json, html, md or text; ``store`` (the analysis cache, or None) keeps the HTML's
    compiled template."""
    if fmt_name == "json":
        public = {k: v for k, v in cmp.items() if not k.startswith("_")}
        return json.dumps(_clean(public), indent=2, ensure_ascii=False) + "\n"
    comparison = read(cmp)
    view = compare_view(comparison)
    if fmt_name == "html":
        from tracetriage.reports import charts
        from tracetriage.reports.html import environment

        steps = comparison.step_series or StepSeries()
        chart = charts.step_distributions(steps.before, steps.after, "before", "after") if view.comparable else None
        return environment(store).get_template("compare.html.j2").render(v=view, chart=chart)
    if fmt_name == "md":
        from tracetriage.reports.markdown import environment

        return environment().get_template("compare.md.j2").render(v=view, code=code)
    from tracetriage.reports.text import environment

    return environment().get_template("compare.txt.j2").render(v=view)
