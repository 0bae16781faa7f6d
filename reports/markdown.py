"""Markdown for pasting into a ticket: templates/report.md.j2 laid out from the ReportView. Untrusted
strings are escaped for Markdown (the ``md`` filter)."""

from __future__ import annotations

import functools
import re

from jinja2 import Environment, PackageLoader

from tracetriage.reports.compiled import compiled_templates

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]!|<>~$&])")


def md_escape(value) -> str:
    """Escape Markdown and inline-HTML syntax so trace text renders as text."""
    text = str(value).replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", text)


@functools.cache
def environment() -> Environment:
    """The Markdown templates' environment: no HTML escaping (the ``md`` filter escapes), no blank lines from block tags."""
    env = Environment(loader=PackageLoader("tracetriage.reports", "templates"), autoescape=False,
                      trim_blocks=True, lstrip_blocks=True, bytecode_cache=compiled_templates("markdown"))
    env.filters["md"] = md_escape
    return env


def render_markdown(analysis, view=None) -> str:
    """The Markdown report; ``view`` is the analysis's ReportView when the caller built it already."""
    from tracetriage.reports.view import report_view

    return environment().get_template("report.md.j2").render(v=view or report_view(analysis))
