"""Self-contained HTML report: inline CSS, inline SVG charts, no script, no network.

Rendered by Jinja2 with autoescaping on: every string from a trace (kernel names,
NVTX texts, process names, log lines) is escaped. Charts are the only markup
inserted unescaped, and they come from matplotlib, which escapes its text.
"""

from __future__ import annotations

import functools
import html

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from tracetriage.reports.charts import all_charts, serving_charts
from tracetriage.reports.roofline import roofline_chart
from tracetriage.reports.view import report_view
from tracetriage.wording import fmt_ns


def environment(store=None) -> Environment:
    """The templates' environment, one per process and cache folder (a batch worker renders many
    reports: its templates are loaded and compiled once); with ``store`` (the analysis cache),
    compiled templates are also kept there, for the next process."""
    templates = store.templates_dir() if store is not None else None
    return _environment(str(templates) if templates is not None else None)


@functools.lru_cache(maxsize=8)
def _environment(templates_dir: str | None) -> Environment:
    env = Environment(
        loader=PackageLoader("tracetriage.reports", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_compiled_templates(templates_dir),
    )
    env.filters["ns"] = fmt_ns
    return env


def _compiled_templates(templates_dir: str | None):
    """Compiled templates kept in the analysis cache's ``templates/`` (Jinja keys them by
    the template's source and the Python version): compiling the report's template was most of
    a report made again from the cache. None without a cache."""
    if templates_dir is None:
        return None
    from jinja2 import FileSystemBytecodeCache

    return FileSystemBytecodeCache(templates_dir)


def render_html(analysis, store=None, view=None) -> str:
    """The HTML report: the ReportView (``view`` when the caller built it already) and the charts, drawn
    from the analysis's series; charts and the compiled template kept in ``store`` (the analysis cache)
    when given."""
    charts = [(name, Markup(svg)) for name, svg in all_charts(analysis, store)]
    extra = [(name, Markup(svg)) for name, svg in serving_charts(analysis, store)]
    roof = roofline_chart(analysis.data.get("efficiency"), store=store)
    return environment(store).get_template("report.html.j2").render(v=view or report_view(analysis), charts=charts,
                                                                     serving_charts=extra,
                                                                     roofline=Markup(roof) if roof else None)


def _escape_as_html_escape(value):
    """Every value of the card escaped as :func:`html.escape` escapes (``&#x27;`` for a quote): the
    entities the card has always written. Markup (already safe) passes as it is."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value)))


@functools.cache
def _card_environment() -> Environment:
    return Environment(loader=PackageLoader("tracetriage.reports", "templates"), autoescape=True,
                       finalize=_escape_as_html_escape)


def render_card(analysis, view=None) -> str:
    """The notebook card (``Analysis._repr_html_``): headline, then each finding's title, axis, severity
    and impact, the capture's phases, then what was not measured; every string escaped."""
    from tracetriage.reports.view import report_view

    return _card_environment().get_template("card.html.j2").render(v=view or report_view(analysis))
