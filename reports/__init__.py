"""Renderers of one Analysis: json (the contract), text, md, html."""

from __future__ import annotations

FORMATS = ("text", "json", "md", "html")


def render(analysis, fmt: str) -> str:
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

        return render_html(analysis)
    raise ValueError(f"unknown format {fmt}")
