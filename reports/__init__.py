"""Renderers of one Analysis: json (the contract), text, md, html."""

from __future__ import annotations

FORMATS = ("text", "json", "md", "html")


def render(analysis, fmt: str, store=None) -> str:
    """The report in ``fmt``; ``store`` (the analysis cache, or None) keeps the HTML's charts and compiled template."""
    if fmt == "json":
        from tracetriage.reports.jsonout import render_json

        return render_json(analysis)
    if fmt == "text":
        from tracetriage.reports.text import render_text

        return render_text(analysis)
    if fmt == "md":
        from tracetriage.reports.markdown import render_markdown

        return render_markdown(analysis)
    if fmt == "html":
        from tracetriage.reports.html import render_html

        return render_html(analysis, store)
    raise ValueError(f"unknown format {fmt}")
