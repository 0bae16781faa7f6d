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
from pathlib import Path

from tracetriage import __version__
from tracetriage.analyzers.compare import SERIES_FIGURES

TABLES = ("summary", "findings", "kernels")
SUMMARY_COLUMNS = [
    "case_id", "path", "status", "error", "reused", "seconds", "headline", "top_finding", "top_impact_pct", "top_severity",
    "max_severity", "findings", "abstentions", "devices", "processes", "window_ns", "busy_pct", "busy_pct_min",
    "idle_launch_pct", "idle_sync_pct", "idle_memcpy_sync_pct", "idle_other_cuda_pct", "idle_host_pct", "idle_unknown_pct",
    "launches_per_step", "graph_launches_per_step", "syncs_per_step", "step_p50_ns", "step_p99_ns", "steps",
    "collective_share_pct", "collective_exposed_pct", "report_html", "report_json",
    # what trend reads: when the capture started, its comparability signature, the per-step figures
    "capture_start_ns", "device_model", "device_count", "world_size", "program", "step_ranges",
]
# the per-step figures not already in the headline columns (busy %, launches/syncs per step)
TREND_FLOAT_COLUMNS = [f for f in SERIES_FIGURES if f not in SUMMARY_COLUMNS]
SUMMARY_COLUMNS += TREND_FLOAT_COLUMNS


def summary_rows(records: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """The rows of the three tables, from the cases' records."""
    rows, findings, kernels = [], [], []
    for r in records:
        m = r.get("metrics") or {}
        row = {c: m.get(c) for c in SUMMARY_COLUMNS}
        has_report = r["status"] == "ok" and r.get("report_html", True)  # a record of an earlier version: it had one
        row.update({
            "case_id": r["case_id"], "path": r["path"], "status": r["status"], "error": r.get("error"),
            "reused": bool(r.get("reused")), "seconds": r.get("seconds"),
            "report_html": f"cases/{r['case_id']}/report.html" if has_report else None,
            "report_json": f"cases/{r['case_id']}/analysis.json" if r["status"] == "ok" else None,
            "capture_start_ns": r.get("capture_start_ns"),
        })
        trend = r.get("trend") or {}
        row.update({k: v for k, v in (trend.get("signature") or {}).items() if k in SUMMARY_COLUMNS})
        row.update({k: v for k, v in (trend.get("figures") or {}).items() if k in TREND_FLOAT_COLUMNS})
        rows.append(row)
        for rank, f in enumerate(r.get("findings") or [], 1):
            findings.append({"case_id": r["case_id"], "path": r["path"], "rank": rank, **f})
        for k in trend.get("kernels") or []:
            kernels.append({"case_id": r["case_id"], "path": r["path"], **k})
    return rows, findings, kernels


def index_rows(rows: list[dict], records: list[dict]) -> list[dict]:
    """The rows of index.html: the headline without its leading ``[id]`` (the finding column
    names it), the impact with its denominator (a % of the window, of TTFT and of the run are
    not one scale), ordered failed first, then by the top finding's severity, then by path;
    never by impact across denominators."""
    from tracetriage.analyzers.summary import SEVERITY_ORDER

    top = {r["case_id"]: (r.get("findings") or [None])[0] for r in records}
    out = []
    for r in rows:
        f = top.get(r["case_id"]) or {}
        headline = r.get("headline") or ""
        if r.get("top_finding") and headline.startswith(f"[{r['top_finding']}]"):
            headline = headline[len(r["top_finding"]) + 2:].lstrip()
        impact = ""
        if f and r.get("top_impact_pct") is not None and f.get("id") != "healthy":
            impact = f"{r['top_impact_pct']:.1f}% of the {f.get('impact_denominator') or 'window'}"
        out.append({**r, "headline_text": headline, "impact_text": impact})
    severity = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    return sorted(out, key=lambda r: (r["status"] != "failed", -severity.get(r.get("top_severity"), -1), str(r["path"])))


def frames(records: list[dict]):
    """The three tables of ``records`` as pandas frames, with their columns and types."""
    import pandas as pd

    rows, findings, kernels = summary_rows(records)
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    for col in ("top_impact_pct", "busy_pct", "busy_pct_min", "idle_launch_pct", "idle_sync_pct", "idle_memcpy_sync_pct",
                "idle_other_cuda_pct", "idle_host_pct", "idle_unknown_pct", "launches_per_step", "graph_launches_per_step",
                "syncs_per_step", "step_p50_ns", "step_p99_ns", "collective_share_pct", "collective_exposed_pct", "seconds"):
        summary[col] = pd.to_numeric(summary[col], errors="coerce").astype("float64")
    for col in TREND_FLOAT_COLUMNS:
        summary[col] = pd.to_numeric(summary[col], errors="coerce").astype("float64")
    for col in ("findings", "abstentions", "devices", "processes", "window_ns", "steps", "capture_start_ns", "device_count",
                "world_size"):
        summary[col] = pd.to_numeric(summary[col], errors="coerce").astype("Int64")
    for col in ("device_model", "program", "step_ranges"):
        summary[col] = summary[col].astype("string")
    fdf = pd.DataFrame(findings, columns=["case_id", "path", "rank", "id", "axis", "severity", "impact_pct",
                                          "impact_denominator", "ms_per_step", "title"])
    fdf["impact_pct"] = pd.to_numeric(fdf["impact_pct"], errors="coerce").astype("float64")
    fdf["ms_per_step"] = pd.to_numeric(fdf["ms_per_step"], errors="coerce").astype("float64")
    fdf["rank"] = pd.to_numeric(fdf["rank"], errors="coerce").astype("Int64")
    kdf = pd.DataFrame(kernels, columns=["case_id", "path", "device_rank", "name", "kind", "ms_per_step", "ns_per_call"])
    kdf["device_rank"] = pd.to_numeric(kdf["device_rank"], errors="coerce").astype("Int64")
    kdf["ms_per_step"] = pd.to_numeric(kdf["ms_per_step"], errors="coerce").astype("float64")
    kdf["ns_per_call"] = pd.to_numeric(kdf["ns_per_call"], errors="coerce").astype("float64")
    return {"summary": summary, "findings": fdf, "kernels": kdf}, rows


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


def write_case_parts(out: Path, record: dict) -> None:
    """One case's rows as ``<table>/part-<case>.parquet``, each whole or absent (written aside, renamed)."""
    import pyarrow.parquet as pq

    schemas = _part_schemas()
    for name, rows in zip(TABLES, summary_rows([record])):
        folder = out / name
        folder.mkdir(exist_ok=True)
        final = folder / f"part-{record['case_id']}.parquet"
        aside = folder / f".part-{record['case_id']}.parquet.{os.getpid()}"
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


def write_outputs(records: list[dict], out: Path, result, store=None) -> None:
    """summary.parquet, findings.parquet, kernels.parquet and index.html (its compiled template
    kept in ``store``, the analysis cache), from ``records``; ``result``: the run's counts."""
    tables, rows = frames(records)
    for name in TABLES:
        tables[name].to_parquet(out / f"{name}.parquet", engine="pyarrow", index=False)
    from tracetriage.reports.html import environment

    html = environment(store).get_template("index.html.j2").render(rows=index_rows(rows, records), result=result,
                                                              version=__version__)
    (out / "index.html").write_text(html, encoding="utf-8")
