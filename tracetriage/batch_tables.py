"""batch's tables: one row per case (``summary``), per finding (``findings``), per kernel
(``kernels``), and the index page that lists the cases from them.

They are written twice. As each case ends, its rows go into a Parquet part of its own,
``summary/part-<case>.parquet`` (likewise ``findings/`` and ``kernels/``), written to a hidden name
and renamed, so that a part is whole or absent: an interrupted batch leaves every finished case
readable as a dataset (``pyarrow.dataset.dataset(OUTDIR + "/summary")``, DuckDB
``read_parquet('OUTDIR/summary/*.parquet')``, Spark). At the end of the run the single
``summary.parquet``, ``findings.parquet`` and ``kernels.parquet`` are written from the same rows of
every case of the run (those analyzed and those reused), in discovery order, and the parts of cases
no longer among the inputs are removed. A part holds its case as it was last analyzed: its
``reused`` is false; the run's ``summary.parquet`` says which cases the run reused.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

from tracetriage import __version__
from tracetriage.analyzers.compare import SERIES_FIGURES
from tracetriage.batch_records import CaseFinding, CaseRecord

TABLES = ("summary", "findings", "kernels")
SUMMARY_COLUMNS = [
    "case_id", "path", "status", "error", "reused", "seconds", "headline", "top_finding", "top_impact_pct", "top_severity",
    "max_severity", "findings", "abstentions", "devices", "processes", "window_ns", "busy_pct", "busy_pct_min",
    "idle_launch_pct", "idle_sync_pct", "idle_memcpy_sync_pct", "idle_other_cuda_pct", "idle_host_pct", "idle_unknown_pct",
    "idle_dependency_pct",  # the GPU's own wait with its work queued (timeline.CAUSES), 0 where a case had none
    "launches_per_step", "graph_launches_per_step", "syncs_per_step", "step_p50_ns", "step_p99_ns", "steps",
    "collective_share_pct", "collective_exposed_pct", "report_html", "report_json",
    # what trend reads: when the capture started, its comparability signature, the per-step figures
    "capture_start_ns", "device_model", "device_count", "world_size", "program", "step_ranges",
]
# the per-step figures not already in the headline columns (busy %, launches/syncs per step)
TREND_FLOAT_COLUMNS = [f for f in SERIES_FIGURES if f not in SUMMARY_COLUMNS]
SUMMARY_COLUMNS += TREND_FLOAT_COLUMNS


FINDING_COLUMNS = ("case_id", "path", "rank", "id", "axis", "severity", "impact_pct", "impact_denominator", "ms_per_step",
                   "title")
KERNEL_COLUMNS = ("case_id", "path", "device_rank", "name", "kind", "ms_per_step", "ns_per_call")
# each table's numeric columns and their pandas types (the rest: Python objects, the summary's three strings)
SUMMARY_TYPES = {
    **dict.fromkeys(("top_impact_pct", "busy_pct", "busy_pct_min", "idle_launch_pct", "idle_sync_pct", "idle_memcpy_sync_pct",
                     "idle_other_cuda_pct", "idle_host_pct", "idle_unknown_pct", "idle_dependency_pct", "launches_per_step",
                     "graph_launches_per_step", "syncs_per_step", "step_p50_ns", "step_p99_ns", "collective_share_pct",
                     "collective_exposed_pct", "seconds", *TREND_FLOAT_COLUMNS), "float64"),
    **dict.fromkeys(("findings", "abstentions", "devices", "processes", "window_ns", "steps", "capture_start_ns",
                     "device_count", "world_size"), "Int64"),
}
SUMMARY_STRINGS = ("device_model", "program", "step_ranges")
FINDING_TYPES = {"impact_pct": "float64", "ms_per_step": "float64", "rank": "Int64"}
KERNEL_TYPES = {"device_rank": "Int64", "ms_per_step": "float64", "ns_per_call": "float64"}


@dataclass(frozen=True, slots=True)
class FindingRow:
    """One finding of one case, a row of findings.parquet (``rank``: its place in the case, from 1)."""

    case_id: str
    path: str
    rank: int
    finding: CaseFinding

    def to_contract(self) -> dict:
        return {"case_id": self.case_id, "path": self.path, "rank": self.rank, **self.finding.to_contract()}


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One case's line of index.html: its summary row's columns that the page shows, the headline
    without its leading ``[id]`` and the top finding's impact with its denominator."""

    case_id: str
    path: str
    status: str
    error: str | None
    reused: bool
    headline: str | None
    top_finding: str | None
    top_impact_pct: float | None
    top_severity: str | None
    busy_pct: float | None
    launches_per_step: float | None
    graph_launches_per_step: float | None
    syncs_per_step: float | None
    step_p50_ns: float | None
    collective_share_pct: float | None
    report_html: str | None
    report_json: str | None
    headline_text: str = ""
    impact_text: str = ""


_INDEX_COLUMNS = tuple(item.name for item in fields(IndexRow))[:-2]  # what it takes from the summary row


def summary_row(record: CaseRecord) -> dict:
    """A case's row of summary.parquet, by column (:data:`SUMMARY_COLUMNS`): its headline metrics, then
    what the record says of it, then trend's signature and per-step figures."""
    metrics = record.metrics or {}
    row = {column: metrics.get(column) for column in SUMMARY_COLUMNS}
    has_report = record.ok and record.report_html is not False  # a record of an earlier version: it had one
    row.update(case_id=record.case_id, path=record.path, status=record.status, error=record.error,
               reused=bool(record.reused), seconds=record.seconds,
               report_html=f"cases/{record.case_id}/report.html" if has_report else None,
               report_json=f"cases/{record.case_id}/analysis.json" if record.ok else None,
               capture_start_ns=record.capture_start_ns)
    trend = record.trend or {}
    row.update((key, value) for key, value in (trend.get("signature") or {}).items() if key in SUMMARY_COLUMNS)
    row.update((key, value) for key, value in (trend.get("figures") or {}).items() if key in TREND_FLOAT_COLUMNS)
    return row


def summary_rows(records: list[CaseRecord]) -> tuple[list[dict], list[dict], list[dict]]:
    """The rows of the three tables, from the cases' records, each by column."""
    rows, findings, kernels = [], [], []
    for record in records:
        rows.append(summary_row(record))
        findings += [FindingRow(record.case_id, record.path, rank, finding).to_contract()
                     for rank, finding in enumerate(record.findings, 1)]
        kernels += [{"case_id": record.case_id, "path": record.path, **kernel}
                    for kernel in (record.trend or {}).get("kernels") or []]
    return rows, findings, kernels


def index_rows(rows: list[dict], records: list[CaseRecord]) -> list[IndexRow]:
    """The rows of index.html: the headline without its leading ``[id]`` (the finding column
    names it), the impact with its denominator (a % of the window, of TTFT and of the run are
    not one scale), ordered failed first, then by the top finding's severity, then by path;
    never by impact across denominators."""
    from tracetriage.analyzers.summary import SEVERITY_ORDER

    top = {record.case_id: record.findings[0] if record.findings else None for record in records}
    out = []
    for columns in rows:
        row = IndexRow(**{name: columns[name] for name in _INDEX_COLUMNS})
        finding = top.get(row.case_id)
        headline = row.headline or ""
        if row.top_finding and headline.startswith(f"[{row.top_finding}]"):
            headline = headline[len(row.top_finding) + 2:].lstrip()
        impact = ""
        if finding and row.top_impact_pct is not None and finding.id != "healthy":
            impact = f"{row.top_impact_pct:.1f}% of the {finding.impact_denominator or 'window'}"
        out.append(replace(row, headline_text=headline, impact_text=impact))
    severity = {name: i for i, name in enumerate(SEVERITY_ORDER)}
    return sorted(out, key=lambda row: (row.status != "failed", -severity.get(row.top_severity, -1), str(row.path)))


def _typed(frame, types: dict):
    """``frame`` with each of ``types``' columns coerced to its pandas type (what is not a number: missing)."""
    import pandas as pd

    for column, dtype in types.items():
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(dtype)
    return frame


def frames(records: list[CaseRecord]):
    """The three tables of ``records`` as pandas frames, with their columns and types."""
    import pandas as pd

    rows, findings, kernels = summary_rows(records)
    summary = _typed(pd.DataFrame(rows, columns=SUMMARY_COLUMNS), SUMMARY_TYPES)
    for column in SUMMARY_STRINGS:
        summary[column] = summary[column].astype("string")
    tables = {"summary": summary, "findings": _typed(pd.DataFrame(findings, columns=list(FINDING_COLUMNS)), FINDING_TYPES),
              "kernels": _typed(pd.DataFrame(kernels, columns=list(KERNEL_COLUMNS)), KERNEL_TYPES)}
    return tables, rows


@functools.cache
def _part_schemas() -> dict:
    """Each table's Arrow schema in the parts: the single tables' column types (an empty typed
    frame's), a column of Python objects a string one (``reused`` a boolean), so that every part
    has the same schema, whichever of its values are missing."""
    import pyarrow as pa

    tables, _ = frames([])
    schemas = {}
    for name, frame in tables.items():
        fields = [pa.field(f.name, pa.bool_() if f.name == "reused" else pa.large_string()) if pa.types.is_null(f.type) else f
                  for f in pa.Schema.from_pandas(frame, preserve_index=False)]
        schemas[name] = pa.schema(fields)
    return schemas


def _number(value, integer: bool):
    """A value as :func:`frames` coerces it (``pd.to_numeric(errors="coerce")``): a number, or None."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not integer:
        return number
    return int(number) if math.isfinite(number) else None


def _part_table(rows: list[dict], schema):
    """Rows as the Arrow table of a part (built directly: a pandas frame per case was most of the
    client's time per case)."""
    import pyarrow as pa

    columns = {}
    for field in schema:
        values = [row.get(field.name) for row in rows]
        if pa.types.is_integer(field.type) or pa.types.is_floating(field.type):
            values = [_number(value, pa.types.is_integer(field.type)) for value in values]
        elif pa.types.is_boolean(field.type):
            values = [None if value is None else bool(value) for value in values]
        else:
            values = [None if value is None else str(value) for value in values]
        columns[field.name] = pa.array(values, type=field.type)
    return pa.Table.from_pydict(columns, schema=schema)


def write_case_parts(out: Path, record: CaseRecord) -> None:
    """One case's rows as ``<table>/part-<case>.parquet``, each whole or absent (written aside, renamed)."""
    import pyarrow.parquet as pq

    schemas = _part_schemas()
    for name, rows in zip(TABLES, summary_rows([record])):
        folder = out / name
        folder.mkdir(exist_ok=True)
        final = folder / f"part-{record.case_id}.parquet"
        aside = folder / f".part-{record.case_id}.parquet.{os.getpid()}"
        pq.write_table(_part_table(rows, schemas[name]), aside)
        os.replace(aside, final)


def has_parts(out: Path, case_id: str) -> bool:
    return all((out / name / f"part-{case_id}.parquet").exists() for name in TABLES)


def prune_parts(out: Path, case_ids: set[str]) -> None:
    """The parts of cases not among ``case_ids`` (cases no longer among the inputs) removed."""
    for name in TABLES:
        folder = out / name
        if not folder.is_dir():
            continue
        for part in folder.glob("part-*.parquet"):
            if part.name[len("part-"):-len(".parquet")] not in case_ids:
                part.unlink(missing_ok=True)


def write_outputs(records: list[CaseRecord], out: Path, result, store=None) -> None:
    """summary.parquet, findings.parquet, kernels.parquet and index.html (its compiled template
    kept in ``store``, the analysis cache), from ``records``; ``result``: the run's counts."""
    tables, rows = frames(records)
    for name in TABLES:
        tables[name].to_parquet(out / f"{name}.parquet", engine="pyarrow", index=False)
    from tracetriage.batch_records import SKIPPED_WHY
    from tracetriage.reports.html import environment

    html = environment(store).get_template("index.html.j2").render(rows=index_rows(rows, records), result=result,
                                                              skipped_why=SKIPPED_WHY, version=__version__)
    (out / "index.html").write_text(html, encoding="utf-8")
