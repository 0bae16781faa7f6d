"""Plain-text terminal summary (the default ``--format text``): templates/report.txt.j2 laid out from
the ReportView. Text is not markup: autoescaping is off for this template only."""

from __future__ import annotations

import functools

from jinja2 import Environment, PackageLoader

from tracetriage.reports.compiled import compiled_templates


@functools.cache
def environment() -> Environment:
    """The text templates' environment: no escaping, block tags leave no blank lines, the final newline kept."""
    return Environment(loader=PackageLoader("tracetriage.reports", "templates"), autoescape=False,
                       trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                       bytecode_cache=compiled_templates("text"))


def render_text(analysis, view=None) -> str:
    """The text report; ``view`` is the analysis's ReportView when the caller built it already."""
    from tracetriage.reports.view import report_view

    return environment().get_template("report.txt.j2").render(v=view or report_view(analysis))
