"""What flows through a batch, typed: a case found by discovery (:class:`CaseSpec`), the request a
worker runs (:class:`CaseRequest`), and what it answers (:class:`CaseRecord`, with its
:class:`CaseFinding` rows). A record's :meth:`~CaseRecord.to_contract` is the case's
``record.json`` and its entry in :attr:`BatchResult.records <tracetriage.batches.BatchResult>`,
key for key as before; :meth:`~CaseRecord.from_contract` reads one back (the last run's).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, fields, replace

from tracetriage import __version__

NOT_RUN = "not_run"  # the status of a case a stopped batch did not reach


def _slug(text: str) -> str:
    """A readable folder name from the path's tail: its last components, whole words, never
    starting with a dot (hidden) and never cut mid-word."""
    parts = [re.sub(r"[^A-Za-z0-9._-]+", "_", p).strip("._") for p in re.split(r"[/\\!]+", text) if p.strip("./")]
    out = ""
    for part in reversed([p for p in parts if p]):
        candidate = f"{part}_{out}" if out else part
        if len(candidate) > 60:
            break
        out = candidate
    return out or (parts[-1][:60].strip("._") if parts else "") or "case"


def case_id_of(label: str) -> str:
    """A case's folder name under OUTDIR/cases: its label's readable tail and a hash of the whole label."""
    return f"{_slug(label)}-{hashlib.sha1(label.encode()).hexdigest()[:8]}"


SKIPPED_WHY = "no capture batch reads (trace, bundle or archive) in it"  # an input without a case: stderr and index.html


@dataclass(frozen=True, slots=True)
class CaseSpec:
    """One case as discovery found it: ``paths`` its files (local paths or store URIs), ``error``
    why it cannot be analyzed (then it is a failed row as it is)."""

    case_id: str
    label: str
    paths: list[str]
    error: str | None = None
    identity: str | None = None  # the cheap identity of its files (batch_case.cheap_identity): the reuse check
    reuse_hash: str | None = None  # the content hash of the last run's analysis, when only the identity changed
    size_bytes: int | None = None  # a case on object storage: its files' size, what its worker downloads


@dataclass(frozen=True, slots=True)
class CaseRequest:
    """One case as a worker runs it (:func:`tracetriage.batch_case.analyze_case`): ``outdir`` OUTDIR
    (absolute, or a store's URI), ``options`` analyze()'s keyword options (and ``perfetto_window``),
    ``settings`` the batch's :meth:`Runtime.settings <tracetriage.runtime.Runtime.settings>`,
    ``reports`` which cases get a report.html."""

    spec: CaseSpec
    outdir: str
    options: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    timeout_s: float | None = None
    reports: str = "all"


@dataclass(frozen=True, slots=True)
class CaseFinding:
    """One finding of a case as its record and findings.parquet hold it; ``ms_per_step`` what the
    finding costs per step (trend's figure), None where it has none."""

    id: str
    axis: str | None = None
    severity: str | None = None
    impact_pct: float | None = None
    impact_denominator: str | None = None
    title: str | None = None
    ms_per_step: float | None = None

    def with_ms(self, ms_per_step: float | None) -> CaseFinding:
        return replace(self, ms_per_step=ms_per_step)

    def to_contract(self) -> dict:
        return {item.name: getattr(self, item.name) for item in fields(self)}


FINDING_FIELDS = ("id", "axis", "severity", "impact_pct", "impact_denominator", "title")  # what a record keeps of a finding


_BASE_KEYS = ("case_id", "path", "files", "inputs_hash", "inputs_identity", "tool_version", "options", "status", "error")
_NOT_RUN_KEYS = ("case_id", "path", "files", "status", "error")
# after the base keys, in this order: the timeline when one was exported, what an analyzed case has
# (``report_html`` not in a record of a version that did not write it), a traceback when one was kept
_ANALYZED_KEYS = ("metrics", "trend", "capture_start_ns")


@dataclass(frozen=True, slots=True)
class CaseRecord:
    """What one case came to. ``status``: ok, failed or not_run; ``metrics`` the headline metrics
    (:func:`~tracetriage.analyzers.summary.headline_metrics`) and ``trend`` trend's record
    (:func:`~tracetriage.analyzers.compare.trend_record`) of an analyzed case; ``report_html``
    whether it has a report.html (None: a record of a version that did not say: it had one);
    ``seconds`` / ``cpu_seconds`` its wall and its worker's CPU time; ``reused`` (None in
    record.json) whether this run reused it; ``kept_by_content`` its worker found the content
    unchanged and kept the last run's record."""

    case_id: str
    path: str
    files: list[str]
    status: str = "failed"
    error: str | None = None
    inputs_hash: str | None = None
    inputs_identity: str | None = None
    tool_version: str = __version__
    options: dict = field(default_factory=dict)
    timeline: str | None = None
    metrics: dict | None = None
    trend: dict | None = None
    capture_start_ns: int | None = None
    report_html: bool | None = None
    findings: tuple[CaseFinding, ...] = ()
    traceback: str | None = None
    seconds: float | None = None
    cpu_seconds: float | None = None
    reused: bool | None = None
    kept_by_content: bool = False

    @classmethod
    def failed(cls, spec: CaseSpec, options: dict | None, error: str | None = None) -> CaseRecord:
        """A case's record before its analysis, or one that never had any: failed, with ``error`` or the spec's own."""
        return cls(spec.case_id, spec.label, spec.paths, inputs_identity=spec.identity, options=options or {},
                   error=error if error is not None else spec.error)

    @classmethod
    def not_run(cls, spec: CaseSpec, why: str) -> CaseRecord:
        return cls(spec.case_id, spec.label, spec.paths, status=NOT_RUN, error=why)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def with_(self, **changes) -> CaseRecord:
        return replace(self, **changes)

    def with_paths_as_given(self, given) -> CaseRecord:
        """This record with its error naming the case's files as the user gave them (``given``: pairs
        of the absolute path its worker was handed and the path given), relative ones relative."""
        error = self.error
        for absolute, path in given if error else ():
            error = error.replace(absolute, path)
        return self if error == self.error else replace(self, error=error)

    def to_contract(self) -> dict:
        """The record as record.json and BatchResult.records hold it (keys in today's order)."""
        if self.status == NOT_RUN:
            return {key: getattr(self, key) for key in _NOT_RUN_KEYS}
        keys = [*_BASE_KEYS, *(("timeline",) if self.timeline is not None else ())]
        if self.ok:
            keys += [*_ANALYZED_KEYS, *(("report_html",) if self.report_html is not None else ()), "findings"]
        keys += [*(("traceback",) if self.traceback is not None else ()), "seconds"]
        keys += [key for key in ("cpu_seconds", "reused") if getattr(self, key) is not None]  # a record made by the
        # watching process has no CPU time of its own; reused is the run's, not the record.json's
        out = {key: getattr(self, key) for key in keys}
        if self.ok:
            out.update(findings=[finding.to_contract() for finding in self.findings])
        return out

    @classmethod
    def from_contract(cls, data: dict) -> CaseRecord:
        """A record read back from its contract (a record.json): its fields by name; TypeError or
        ValueError when it is not one."""
        known = {item.name for item in fields(cls)} - {"kept_by_content"}
        values = {key: value for key, value in data.items() if key in known}
        names = {item.name for item in fields(CaseFinding)}
        values["findings"] = tuple(CaseFinding(**{key: value for key, value in finding.items() if key in names})
                                   for finding in values.get("findings") or ())
        values["options"] = values.get("options") or {}
        return cls(**values)
