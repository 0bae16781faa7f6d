"""One batch case, as a worker runs it: the analysis, its files, its record; and the two identities
of a case's inputs.

* :func:`cheap_identity` is what the client computes for every case at discovery, to decide
  "unchanged, reuse": the tool and code version, and per file its name, size, modification time
  (ns) and a digest of its first and last 64 KiB. Reading 128 KiB per file instead of all of it
  is what lets a re-run over a large archive start at once. What it cannot see: a file rewritten
  in place with the same size, the same modification time and the same head and tail (give
  ``--force`` after such an edit).
* :func:`content_hash` is the full content hash (every byte, plus the code version), computed by
  the worker at the start of the case, in parallel with the other cases, and kept in the record as
  ``inputs_hash``: what was analyzed, exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import traceback
from pathlib import Path

from tracetriage import __version__
from tracetriage.batch_records import FINDING_FIELDS, CaseFinding, CaseRecord, CaseRequest
from tracetriage.errors import TraceTriageError
from tracetriage.runtime import Runtime

REPORT_MODES = ("all", "failed", "none")
EDGE_BYTES = 64 * 1024  # what the cheap identity reads of each end of a file


def _code_version() -> str:
    from tracetriage.codeversion import code_version

    return code_version("tracetriage", "tracetriage.parsers", "tracetriage.analyzers", "tracetriage.reports")


def content_hash(paths: list[str]) -> str:
    """The inputs' whole content and the code that analyzes and renders them (sha256)."""
    digest = hashlib.sha256(__version__.encode())
    digest.update(_code_version().encode())
    for path in sorted(paths):
        digest.update(Path(path).name.encode())
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 22):
                digest.update(chunk)
    return digest.hexdigest()


def cheap_identity(paths: list[str]) -> str:
    """The inputs as the reuse check sees them (sha256): the code version, and per file its name,
    size, modification time in ns and its first and last :data:`EDGE_BYTES` bytes."""
    digest = hashlib.sha256(__version__.encode())
    digest.update(_code_version().encode())
    for path in sorted(paths):
        info = os.stat(path)
        digest.update(f"{Path(path).name}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
        with open(path, "rb") as fh:
            digest.update(fh.read(EDGE_BYTES))
            if info.st_size > 2 * EDGE_BYTES:
                fh.seek(info.st_size - EDGE_BYTES)
                digest.update(fh.read(EDGE_BYTES))
    return digest.hexdigest()


class CaseTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise CaseTimeout


def wants_report(reports: str, findings) -> bool:
    """Whether a case analyzed without error gets its report.html: ``all``: every one; ``failed``:
    those with a finding other than ``healthy`` (``findings``: its
    :class:`~tracetriage.batch_records.CaseFinding` rows; a failed case has no analysis to report: its
    error is in the index and the tables); ``none``: none."""
    if reports == "all":
        return True
    return reports == "failed" and any(finding.id != "healthy" for finding in findings)


def _arm(timeout_s: float | None) -> bool:
    """This process's alarm set to raise :class:`CaseTimeout` after ``timeout_s``; False when it
    cannot be (no SIGALRM, not the main thread: the process watching the worker enforces it)."""
    import signal

    if not timeout_s or not hasattr(signal, "SIGALRM"):
        return False
    try:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    except ValueError:
        return False
    return True


def _kept(case_dir: Path, inputs_hash: str, identity: str | None, reports: str) -> CaseRecord | None:
    """The last run's record of this case when its files' content is the same (only their cheap
    identity changed: a copy, a touched modification time) and its report is as ``reports`` asks:
    kept, with the new identity, and marked kept by content."""
    try:
        old = CaseRecord.from_contract(json.loads((case_dir / "record.json").read_text()))
    except (OSError, json.JSONDecodeError, TypeError, ValueError, AttributeError):
        return None
    if old.inputs_hash != inputs_hash or not old.ok:
        return None
    if (case_dir / "report.html").exists() != wants_report(reports, old.findings):
        return None
    old = old.with_(inputs_identity=identity)
    (case_dir / "record.json").write_text(json.dumps(old.to_contract(), indent=1), encoding="utf-8")
    return old.with_(kept_by_content=True)


def _shown_as(value, local: str, shown: str):
    """``value`` (an analysis's data or series) with ``local`` (the folder a case's files were read
    from) named ``shown`` (the store folder they came from) in every string, keys too."""
    if isinstance(value, str):
        return value.replace(local, shown)
    if isinstance(value, dict):
        return {_shown_as(key, local, shown): _shown_as(item, local, shown) for key, item in value.items()}
    if type(value) in (list, tuple):  # a named tuple or an array of the series is left as it is
        return type(value)(_shown_as(item, local, shown) for item in value)
    return value


def analyze_case(request: CaseRequest, read_paths: list[str] | None = None,
                 shown_folder: tuple[str, str] | None = None) -> CaseRecord:
    """Run one case (in a worker process) and write its files; return its record.
    ``read_paths``: the local copies of the case's files to read when ``request.spec.paths`` name
    them on a store (:mod:`tracetriage.batch_store`; the record names the store's), and
    ``shown_folder`` (the copies' folder, the store's) how the analysis and report name them."""
    import signal
    import warnings

    from tracetriage.memory import tune_allocator

    tune_allocator()
    spec = request.spec
    t0, cpu0 = time.perf_counter(), time.process_time()
    case_dir = Path(request.outdir) / "cases" / spec.case_id
    case_dir.mkdir(parents=True, exist_ok=True)
    record = CaseRecord.failed(spec, request.options)
    warnings.simplefilter("ignore")
    if not spec.error:
        armed = _arm(request.timeout_s)
        try:
            record = record.with_(inputs_hash=content_hash(read_paths or spec.paths))
            kept = _kept(case_dir, record.inputs_hash, spec.identity, request.reports) if spec.reuse_hash else None
            if kept is not None:
                return kept
            record = _analyzed(request, record, case_dir, read_paths or spec.paths, shown_folder)
        except TraceTriageError as exc:
            record = record.with_(error=str(exc))
        except OSError as exc:
            record = record.with_(error=f"{spec.label}: cannot be read ({exc.strerror or exc})")
        except CaseTimeout:
            record = record.with_(error=f"{spec.label}: timed out after {request.timeout_s:g} s (--case-timeout)")
        except MemoryError:
            record = record.with_(error=f"{spec.label}: out of memory while analyzing it")
        except Exception as exc:  # noqa: BLE001 - a bug must not take the batch down; it is recorded
            record = record.with_(error=f"{spec.label}: internal error: {type(exc).__name__}: {exc}",
                                  traceback=traceback.format_exc(limit=5))
        finally:
            if armed:  # disarmed before the worker takes its next case
                signal.setitimer(signal.ITIMER_REAL, 0)
    record = record.with_(seconds=round(time.perf_counter() - t0, 3),
                          cpu_seconds=round(time.process_time() - cpu0, 3))  # this process's CPU (its threads'), not the wall
    (case_dir / "record.json").write_text(json.dumps(record.to_contract(), indent=1), encoding="utf-8")
    return record


def _analyzed(request: CaseRequest, record: CaseRecord, case_dir: Path, paths: list[str],
              shown_folder: tuple[str, str] | None) -> CaseRecord:
    """The case analyzed and its files written (analysis.json, the report.html ``request.reports``
    asks for, the timeline that --perfetto asks for): ``record`` as an analyzed case's. An error
    raises, with ``record`` left as it was."""
    from tracetriage import analyze, open_case
    from tracetriage.analyzers.compare import trend_record
    from tracetriage.analyzers.summary import headline_metrics
    from tracetriage.captured import capture_start_ns
    from tracetriage.reports import render

    runtime = Runtime.from_settings(request.settings)
    options = dict(request.options)
    timeline = options.pop("perfetto_window", None)  # --perfetto: the case's timeline.pftrace beside its report
    case = open_case(paths, runtime=runtime)
    analysis = analyze(case, runtime=runtime, **options)
    if shown_folder:
        analysis.data, analysis.series = (_shown_as(part, *shown_folder) for part in (analysis.data, analysis.series))
    timeline_path = None
    if timeline and case.traces:
        from tracetriage.analyzers.tracks import build_tracks
        from tracetriage.reports.perfetto import export
        from tracetriage.reports.perfetto_view import left_out_text

        mode, n = timeline
        summary = export(build_tracks(case, analysis, mode=mode, worst_steps=n), analysis, case_dir / "timeline.pftrace")
        analysis.series.update(perfetto_export={"path": "timeline.pftrace", **summary, "left_out_text": left_out_text(summary)})
        timeline_path = f"cases/{request.spec.case_id}/timeline.pftrace"
    del case
    (case_dir / "analysis.json").write_text(render(analysis, "json"), encoding="utf-8")
    report = case_dir / "report.html"
    findings = [CaseFinding(**{name: finding.get(name) for name in FINDING_FIELDS}) for finding in analysis.findings]
    if wants_report(request.reports, findings):
        report.write_text(render(analysis, "html", runtime.cache), encoding="utf-8")
    else:
        report.unlink(missing_ok=True)  # a report of an earlier run with other inputs would not be this case's
    trend = trend_record(analysis.data)
    per_step = trend["findings_ms"]
    return record.with_(status="ok", error=None, timeline=timeline_path, metrics=headline_metrics(analysis.data), trend=trend,
                        capture_start_ns=capture_start_ns(analysis.data),  # trend's order
                        report_html=report.exists(),
                        findings=tuple(finding.with_ms(per_step.get(finding.id)) for finding in findings))
