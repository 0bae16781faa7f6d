"""The Python API: ``tracetriage.analyze(paths)`` and the result a notebook works with.

    import tracetriage
    a = tracetriage.analyze(["bundle/"], symptom="tail")
    a.headline              # the verdict, one line
    a.findings              # list of finding dicts (the JSON contract)
    a.findings_frame()      # pandas: one row per finding
    a.devices_frame()       # pandas: one row per device (busy %, idle by cause, collectives)
    a.to_json()             # the JSON contract as text
    a.to_html("report.html")
    a                       # in Jupyter: the verdict card (_repr_html_)
"""

from __future__ import annotations

from pathlib import Path

from tracetriage.analyzers.analysis import Analysis as _Analysis


class Analysis(_Analysis):
    """One case's analysis: the JSON contract in ``data``, with views for programs and notebooks."""

    def __repr__(self) -> str:
        n = len(self.findings)
        return f"<tracetriage Analysis: {n} finding{'s' if n != 1 else ''}; {self.headline[:120]}>"

    def to_json(self) -> str:
        from tracetriage.reports import render

        return render(self, "json")

    def to_markdown(self) -> str:
        from tracetriage.reports import render

        return render(self, "md")

    def to_html(self, path: str | Path | None = None) -> str | Path:
        """The self-contained HTML report as text; with ``path``, written there and the path
        returned (a notebook cell then shows the path, not 400 KB of HTML)."""
        from tracetriage.reports import render

        text = render(self, "html")
        if path is None:
            return text
        Path(path).write_text(text, encoding="utf-8")
        return Path(path)

    def findings_frame(self):
        import pandas as pd

        return pd.DataFrame([{"id": f["id"], "axis": f["axis"], "severity": f["severity"], "impact_pct": f["impact_pct"],
                              "impact_denominator": f["impact_denominator"], "title": f["title"]} for f in self.findings],
                            columns=["id", "axis", "severity", "impact_pct", "impact_denominator", "title"])

    def devices_frame(self):
        import pandas as pd

        rows = []
        for d in self.data.get("devices") or []:
            row = {"id": d["id"], "name": d["name"], "pid": d["pid"], "busy_pct": d["busy_pct"], "window_ns": d["window_ns"],
                   "collective_share_pct": d["collective_share_pct"], "gaps": d["gaps"]["count"]}
            row.update({f"idle_{c}_pct": round(100.0 * v / d["window_ns"], 3) if d["window_ns"] else None
                        for c, v in d["gaps"]["by_cause"].items()})
            row.update({f"claim_{k}_pct": v for k, v in (d.get("accounting") or {}).get("claims_pct", {}).items()})
            rows.append(row)
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        """The verdict card: headline, then each finding's title, axis, severity and impact (escaped)."""
        from tracetriage.reports.html import render_card

        return render_card(self)


def analyze(case_or_paths, **options) -> Analysis:
    """Analyze a case (from ``open_case``) or paths (files, bundle directories, archives).

    Options: ``symptom`` (an axis name), ``slo`` (budgets in ms, ``{"tpot_p95_ms": 50}`` or the
    CLI's ``"tpot_p95_ms=50"``), ``step_range`` (a regex naming the step ranges). They are checked
    as the CLI checks them: an unknown name is a :class:`tracetriage.errors.UsageError` (a
    ``ValueError``) with the CLI's message."""
    from tracetriage.analyzers.analysis import analyze as _analyze
    from tracetriage.case import Case, open_case
    from tracetriage.options import check_slo, check_symptom

    if "symptom" in options:
        options["symptom"] = check_symptom(options["symptom"])
    if "slo" in options:
        options["slo"] = check_slo(options["slo"])
    if options.get("step_range"):
        import re

        from tracetriage.errors import UsageError

        try:
            re.compile(options["step_range"])
        except re.error as exc:
            raise UsageError(None, f"--step-range is not a valid regular expression: {exc}") from None

    case = case_or_paths if isinstance(case_or_paths, Case) else open_case(
        [case_or_paths] if isinstance(case_or_paths, (str, Path)) else list(case_or_paths))
    a = _analyze(case, **options)
    return Analysis(data=a.data, series=a.series)
