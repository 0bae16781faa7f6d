"""Markdown for pasting into a ticket. Untrusted strings are escaped for Markdown."""

from __future__ import annotations

import re

from jinja2 import Environment, PackageLoader

from tracetriage.reports.view import build_view, fmt_ns

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]!|<>~$&])")


def md_escape(value) -> str:
    """Escape Markdown and inline-HTML syntax so trace text renders as text."""
    text = str(value).replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", text)


def render_markdown(analysis) -> str:
    env = Environment(loader=PackageLoader("tracetriage.reports", "templates"), autoescape=False,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["md"] = md_escape
    env.filters["ns"] = fmt_ns
    from tracetriage.reports import perfetto_view

    return env.get_template("report.md.j2").render(v=build_view(analysis.data), px=perfetto_view.view(analysis))
