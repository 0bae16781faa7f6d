"""The work of each ``tracetriage mcp`` tool: a request (the tool's arguments, checked against the
roots by the server) -> (the JSON contract, a short text summary). The four that analyze run in
the worker process (tracetriage/mcp_worker.py); explain and capture_advice without a capture
read only the catalog and run in the server."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from tracetriage.errors import OutputError, UsageError
from tracetriage.wording import counted

# The tables of capture_hints.toml by the profiler a client names (rules/hints.py capture_cmd's).
PROFILER_TABLES = {"nsys": "default", "rocprof": "rocm", "pytorch": "kineto"}
# How each abstention (its ``analysis`` name, analyzers/rules/abstain.py and efficiency.py) finds
# its capture hint: ("profiler", key) is a key of the profiler's table, ("abstention", key) a key of
# [abstention], ("host", None) the host profilers, ("efficiency", None) efficiency.capture_hint.
ABSTENTION_HINTS = {
    "steps": ("profiler", "steps"), "step_annotations": ("profiler", "steps"), "gap_causes": ("profiler", "api"),
    "graph_replays": ("profiler", "graphs"), "graph_capture_phase": ("profiler", "steady"),
    "too_few_gpu_ops": ("profiler", "steady"), "window_too_short": ("profiler", "steady"),
    "no_steady_phase": ("profiler", "steady"),
    "memset_only": ("profiler", "steady"), "topology": ("abstention", "topology"), "itl_tail": ("abstention", "itl_tail"),
    "slo": ("abstention", "slo"), "tpot_budget": ("abstention", "tpot_budget"), "tpot_fit": ("abstention", "tpot_fit"),
    "serving_load": ("abstention", "serving_load"), "host_frames": ("host", None), "step_tail": ("host", None),
    "efficiency": ("efficiency", None),
}
EFFICIENCY_FORMATS = {"nsys": "nsys", "rocprof": "rocpd", "pytorch": "kineto"}



@dataclass(frozen=True)
class AnalyzeRequest:
    """analyze's arguments, its paths resolved under the roots (``output`` only with ``format``)."""

    paths: list[str]
    symptom: str | None = None
    slo: str | None = None
    step_range: str | None = None
    format: str | None = None
    output: str | None = None


@dataclass(frozen=True)
class CompareRequest:
    """compare's arguments, its two sides resolved under the roots."""

    before: str
    after: str
    threshold: float = 5.0
    across_devices: bool = False
    symptom: str | None = None
    slo: str | None = None
    step_range: str | None = None
    format: str | None = None
    output: str | None = None


@dataclass(frozen=True)
class TrendRequest:
    """trend's arguments, ``batch_dir`` a batch output folder under the roots."""

    batch_dir: str
    order_by: str = "time"
    group_by: str | None = None
    threshold: float = 5.0
    baseline: str | None = None
    gate: bool = False
    format: str | None = None
    output: str | None = None


@dataclass(frozen=True)
class BatchRequest:
    """batch's arguments, its inputs (globs expanded) and outdir resolved under the roots. ``reports``:
    False (every case's report.html written; the records without their findings), True (the same, the
    records with their findings and report paths), or the CLI's all, failed or none (which cases get a
    report.html, as --reports; the records with their findings and report paths)."""

    inputs: list[str]
    outdir: str
    reports: bool | str = False
    force: bool = False
    symptom: str | None = None
    slo: str | None = None
    step_range: str | None = None


@dataclass(frozen=True)
class AdviceRequest:
    """capture_advice on a capture: its paths resolved under the roots, the abstention named (or None: all)."""

    paths: list[str]
    abstention: str | None = None
    step_range: str | None = None


def report_format(fmt: str | None, output: str | None) -> str | None:
    """The report asked for: ``format`` with ``output``, or the format ``output``'s extension names."""
    if fmt and not output:
        raise UsageError(None, f"format {fmt} writes a report: give output, a path under the roots")
    named = {".html": "html", ".htm": "html", ".md": "md"}.get(Path(output).suffix.lower()) if output else None
    if output and not fmt:
        fmt = named
        if fmt is None:
            raise UsageError(None, f"output {output}: give format html or md (or an .html or .md name)")
    if output and named and fmt != named:  # an html page in report.md: a file its name misdescribes
        raise UsageError(None, f"format {fmt} and output {output} disagree: name the file .{fmt} or give format {named}")
    if output and Path(output).is_dir():  # refused before the analysis, not after it
        raise OutputError(output, "cannot write the report: it is a directory; name a file in it")
    return fmt


def _write(path: str, text: str) -> None:
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(path, f"cannot write the report: {exc.strerror or exc}") from None


def _runtime(settings: dict):
    """The call's Runtime; it tells the server each stage of an analysis (``progress``, set by the worker)."""
    from tracetriage.runtime import Runtime

    return replace(Runtime.from_settings(settings), progress=settings.get("progress"))


def work_analyze(request: AnalyzeRequest, settings: dict) -> tuple[dict, str]:
    """As ``tracetriage analyze`` (:func:`tracetriage.api.analyze_paths`): several traces are one
    case only when they are one run, and the library's warnings are recorded in the contract."""
    from tracetriage.api import analyze_paths
    from tracetriage.runtime import Options

    runtime = _runtime(settings)
    _, analysis = analyze_paths(request.paths, Options.checked(request.symptom, request.slo, request.step_range), runtime)
    summary = analysis.headline
    if request.format:
        from tracetriage.reports import render

        _write(request.output, render(analysis, request.format, runtime.cache))
        summary += f"\nwrote {request.output}"
    return json.loads(analysis.to_json()), summary


def work_compare(request: CompareRequest, settings: dict) -> tuple[dict, str]:
    from tracetriage import compare

    runtime = _runtime(settings)
    result = compare(request.before, request.after, threshold_pct=request.threshold, runtime=runtime,
                     across_devices=request.across_devices, symptom=request.symptom, slo=request.slo,
                     step_range=request.step_range)
    summary = result.summary
    if request.format:
        _write(request.output, result.render(request.format, runtime.cache))
        summary += f"\nwrote {request.output}"
    return json.loads(result.to_json()), summary


def work_trend(request: TrendRequest, settings: dict) -> tuple[dict, str]:
    from tracetriage import trend

    runtime = _runtime(settings)
    result = trend(request.batch_dir, order_by=request.order_by, group_by=request.group_by,
                   threshold_pct=request.threshold, baseline=request.baseline, gate=request.gate, runtime=runtime)
    summary = result.summary
    if request.format:
        from tracetriage.cli_output import report_links

        links = report_links(result.batch_dir, request.output)  # as the CLI's
        _write(request.output, result.render(request.format, links, runtime.cache))
        summary += f"\nwrote {request.output}"
    return json.loads(result.to_json()), summary


BATCH_RECORD_KEYS = ("case_id", "path", "status", "error", "reused", "seconds")


def batch_record(record: dict, listed: bool) -> dict:
    """One case of the batch tool's answer: its status and error, ``top_finding`` its top finding's title
    and ``top_finding_id`` that finding's id (what summary.parquet's ``top_finding`` holds); ``listed``: with
    its findings and the paths of its report.html (None when none was written) and analysis.json."""
    row = {key: record.get(key) for key in BATCH_RECORD_KEYS}
    findings = record.get("findings") or []
    row["top_finding"] = findings[0]["title"] if findings else None
    row["top_finding_id"] = findings[0]["id"] if findings else None
    if listed:
        ok = record.get("status") == "ok"
        wrote_html = ok and record.get("report_html") is not False
        row.update(findings=findings, report_html=f"cases/{record['case_id']}/report.html" if wrote_html else None,
                   report_json=f"cases/{record['case_id']}/analysis.json" if ok else None)
    return row


def work_batch(request: BatchRequest, settings: dict) -> tuple[dict, str]:
    from tracetriage import batch

    modes = isinstance(request.reports, str)  # the CLI's --reports values; a boolean: every report, listed or not
    result = batch(request.inputs, request.outdir, runtime=_runtime(settings), force=request.force,
                   progress=settings.get("cases") or False, reports=request.reports if modes else "all",
                   symptom=request.symptom, slo=request.slo, step_range=request.step_range)
    records = [batch_record(record, modes or request.reports) for record in result.records]
    index_html = str(Path(result.outdir) / "index.html")
    structured = {"outdir": result.outdir, "analyzed": result.analyzed, "reused": result.reused, "failed": result.failed,
                  "not_run": result.not_run, "seconds": result.seconds, "index_html": index_html, "records": records}
    summary = (f"{counted(len(records), 'case')}: {result.analyzed} analyzed, {result.reused} unchanged, "
               f"{result.failed} failed; wrote {index_html} and summary.parquet")
    return structured, summary


def work_capture_advice(request: AdviceRequest, settings: dict) -> tuple[dict, str]:
    """The abstentions of the capture at ``paths`` (those named ``abstention``, when given), each
    with the capture hint the analysis gave for this capture's profiler, vendor and process."""
    from tracetriage import analyze

    analysis = analyze(request.paths, runtime=_runtime(settings), step_range=request.step_range)
    name = request.abstention
    abstentions = analysis.data.get("abstentions") or []
    found = [item for item in abstentions if name is None or item["analysis"] == name]
    structured = {"paths": request.paths, "abstention": name, "advice": found}
    if found:
        summary = "\n".join(f"{item['analysis']} ({item['scope']}): {item['capture_hint']}" for item in found)
    else:
        named = sorted({item["analysis"] for item in abstentions})
        summary = (f"this capture does not abstain on {name}" if name else "this capture abstains on nothing") + (
            f" (it abstains on: {', '.join(named)})" if named else "")
    return structured, summary


WORK = {AnalyzeRequest: work_analyze, CompareRequest: work_compare, TrendRequest: work_trend, BatchRequest: work_batch,
        AdviceRequest: work_capture_advice}


def work(request, settings: dict) -> tuple[dict, str]:
    """The work of the tool ``request`` is for."""
    return WORK[type(request)](request, settings)


def explain(finding_id: str) -> tuple[dict, str]:
    """A finding's catalog entry (title, mechanism, fix, confirm and falsifier, as the format
    strings a rule fills, with their variants; its falsifier condition and how compare judges it)
    and the rules that make it: their stage, what they read and require, and their thresholds."""
    from tracetriage.analyzers.catalog import CATALOG
    from tracetriage.analyzers.rules.registry import REGISTRY
    from tracetriage.analyzers.rules.thresholds import THRESHOLDS

    if finding_id not in CATALOG:
        raise UsageError(None, f"explain: unknown finding {finding_id!r}; valid ids: {', '.join(CATALOG)}")
    entry = CATALOG[finding_id]
    rules = [{"rule": rule.id, "finding": rule.finding_id, "stage": rule.stage, "reads": list(rule.reads),
              "requires": list(rule.requires), "suppressed_by": list(rule.suppressed_by), "depends_on": list(rule.depends_on),
              "thresholds": {name: {"value": THRESHOLDS[name][0], "why": THRESHOLDS[name][1]} for name in rule.thresholds}}
             for rule in REGISTRY if finding_id in (rule.id, rule.finding_id) or finding_id in rule.entries]
    structured = {"id": finding_id, "axis": entry.get("axis"), "answers": entry.get("answers") or [entry.get("axis")],
                  **{key: entry.get(key) for key in ("title", "mechanism", "fix", "confirm", "falsifier")},
                  "falsified_when": entry.get("falsified_when"), "falsified_why": entry.get("falsified_why"),
                  "compare": entry.get("compare"), "rules": rules}
    title = entry.get("title")
    title = title.get("default", next(iter(title.values()))) if isinstance(title, dict) else title
    reads = sorted({part for rule in rules for part in rule["reads"]})
    texts = [text for key in ("title", "mechanism", "fix", "confirm", "falsifier") for text in _texts(entry.get(key))]
    structured["placeholders"] = sorted({name for text in texts for name in PLACEHOLDER.findall(text)})
    # the texts are the templates a rule fills from a capture: their slots read as <slot>, not as a code's {slot}
    shown = PLACEHOLDER.sub(r"<\1>", " ".join(str(title).split()))
    summary = (f"{finding_id} ({entry.get('axis')}): {shown}; reads {', '.join(reads) or 'nothing'}"
               + ("; the <...> slots are filled from a capture's measurements" if structured["placeholders"] else ""))
    return structured, summary


PLACEHOLDER = re.compile(r"\{(\w+)\}")  # a slot of a catalog text, filled by the rule from a capture's figures


def _texts(value) -> list[str]:
    """The texts of a catalog field: one, or one per variant."""
    if isinstance(value, dict):
        return [str(text) for text in value.values()]
    return [str(value)] if value else []


def capture_hints(abstention: str, profiler: str | None) -> tuple[dict, str]:
    """What to capture next for an abstention, from capture_hints.toml (rules/hints.py reads the
    same texts): for the ``profiler`` named, else for nsys, rocprof and the PyTorch profiler."""
    from tracetriage.analyzers.catalog import capture_text
    from tracetriage.analyzers.efficiency import capture_hint

    if abstention not in ABSTENTION_HINTS:
        raise UsageError(None, f"capture_advice: unknown abstention {abstention!r}; valid names: {', '.join(ABSTENTION_HINTS)}")
    how, key = ABSTENTION_HINTS[abstention]
    hints = {}
    for name in [profiler] if profiler else list(PROFILER_TABLES):
        if how == "profiler":
            hints[name] = capture_text(PROFILER_TABLES[name], key)
        elif how == "abstention":
            hints[name] = capture_text("abstention", key)
        elif how == "efficiency":
            hints[name] = capture_hint(EFFICIENCY_FORMATS[name])
        else:
            native = capture_text("host_native", "rocm" if name == "rocprof" else "default")
            hints[name] = {"python": capture_text("host_python", "default").format(pid="<pid>"),
                           "native": native.format(pid="<pid>")}
    structured = {"abstention": abstention, "profiler": profiler, "capture": hints}
    return structured, "\n".join(f"{name}: {hint if isinstance(hint, str) else hint['python']}" for name, hint in hints.items())
