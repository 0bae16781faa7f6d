"""One module per input format; each turns a file into the model (tracetriage.model).

``load(case, path, kind)`` dispatches on the kind that ``tracetriage.case.detect``
found in the file's content, and records the input in ``case.inputs``.
"""

from __future__ import annotations

from pathlib import Path

from tracetriage.errors import UnsupportedInputError

READERS = {
    "nsys": "Nsight Systems SQLite export",
    "rocpd": "rocprofv3 rocpd SQLite database",
    "rpd": "legacy rocmProfileData (RPD) database",
    "gzip_sqlite": "gzip-compressed SQLite database",
    "rocprof_csv": "rocprofv3 CSV trace",
    "kineto": "PyTorch profiler (Kineto) JSON trace",
    "topology": "nvidia-smi topo -m matrix",
    "rocm_topology": "rocm-smi --showtopo output",
    "nccl": "NCCL/RCCL log",
    "pyspy": "py-spy capture",
    "serving": "serving engine log, /metrics scrape or benchmark result",
    "nsys_rep": "Nsight Systems report (.nsys-rep / .qdrep)",
    "perfetto": "Perfetto protobuf trace",
    "otf2": "OTF2 trace archive",
    "rocprof_json": "rocprofv3 JSON output",
    "rocprof_v1": "rocprof v1 (rocprofiler v1) results database",
}


class NotReadableYet(UnsupportedInputError):
    """A recognised format that this version cannot parse."""


def _trace_input(trace) -> dict:
    return {
        "path": trace.path,
        "kind": trace.format,
        "version": trace.meta.get("version"),
        "warnings": list(trace.warnings),
        "counts": trace.counts(),
    }


# kind -> (module, function). Traces go to case.traces.
_TRACES = {
    "nsys": ("nsys", "parse"),
    "rocpd": ("rocpd", "parse"),
    "rpd": ("rpd", "parse"),
    "gzip_sqlite": ("rpd", "parse_gzip"),
    "kineto": ("kineto", "parse"),
    "rocprof_json": ("rocprof_json", "parse"),
}
# kind -> (module, function, Case list, the input's kind in the report, its warnings).
_SIDE_ARTIFACTS = {
    "topology": ("topology", "parse", "topologies", lambda o: "topology", lambda o: list(o.warnings)),
    "rocm_topology": ("topology", "parse_rocm", "topologies", lambda o: "topology", lambda o: list(o.warnings)),
    "nccl": ("nccl", "parse", "nccl_logs", lambda o: "nccl", lambda o: []),
    "pyspy": ("pyspy", "parse", "pyspy", lambda o: f"pyspy-{o.format}", lambda o: list(o.warnings)),
    "serving": ("serving", "parse", "serving", lambda o: o.kind, lambda o: list(o.warnings)),
}


def _parser(module: str, function: str):
    import importlib

    return getattr(importlib.import_module(f"tracetriage.parsers.{module}"), function)


def read_trace(path: Path, kind: str):
    """The trace model of one trace file of a known kind, its impossible records removed; a
    :class:`MissingDataError` when none of its GPU records is left."""
    from tracetriage.memory import release_freed
    from tracetriage.parsers.coerce import sanitize_trace

    trace = _parser(*_TRACES[kind])(str(path))
    release_freed()
    before = len(trace.gpu)
    sanitize_trace(trace)
    if before and not len(trace.gpu):
        from tracetriage.errors import MissingDataError

        raise MissingDataError(path, f"nothing to analyze: all {before:,} GPU records have impossible times "
                                     "(missing, negative, or ending before they start)")
    return trace


def load(case, path: Path, kind: str, read=read_trace, exporter=None) -> None:
    """Parse one file of a known kind into the case. ``read(path, kind)`` gives a trace file's
    model (:func:`read_trace`, or the caller's memoised version of it); ``exporter()`` says how
    a .nsys-rep report is exported (:class:`~tracetriage.parsers.reports.Exporter`; default: nsys
    on PATH, into a temporary folder)."""
    from tracetriage.memory import collect_again

    collect_again()  # the CLI's collector, off while it imported, is on for every input it reads (a serving log too)
    if kind == "nsys_rep":
        from tracetriage.parsers.reports import Exporter

        _load_nsys_report(case, Path(path), read, (exporter or Exporter)())
        return
    if kind in ("perfetto", "otf2"):
        from tracetriage.parsers.reports import recapture_message

        raise NotReadableYet(path, recapture_message(kind))
    if kind == "rocprof_v1":
        from tracetriage.parsers.reports import recapture_message
        from tracetriage.parsers.rocpd import rocprof_v1_tables
        from tracetriage.parsers.sqlite import Database

        with Database(path) as db:
            tables = rocprof_v1_tables(db)
        raise NotReadableYet(path, recapture_message(kind, tables))
    if kind in _TRACES:
        trace = read(path, kind)
        trace.path = str(path)
        case.traces.append(trace)
        case.inputs.append(_trace_input(trace))
        return
    if kind in _SIDE_ARTIFACTS:
        module, function, attr, input_kind, warnings = _SIDE_ARTIFACTS[kind]
        artifact = _parser(module, function)(str(path))
        getattr(case, attr).append(artifact)
        case.inputs.append({"path": str(path), "kind": input_kind(artifact), "version": getattr(artifact, "version", None),
                            "warnings": warnings(artifact), "counts": None})
        return
    raise NotReadableYet(path, f"recognised as {READERS.get(kind, kind)}, which this version cannot read")


def _load_nsys_report(case, report: Path, read, exporter) -> None:
    """Export the report with the real nsys (into ``exporter.workdir``, or a temporary directory
    removed after parsing), parse the export, and record both versions in the input row."""
    import shutil
    import tempfile

    from tracetriage.parsers.head import read_head
    from tracetriage.parsers.reports import export_nsys_report

    workdir = exporter.workdir
    tmp = None
    if workdir is None:
        tmp = Path(tempfile.mkdtemp(prefix="tracetriage-export-"))
        workdir = tmp
    try:
        export, info = export_nsys_report(report, read_head(report), workdir, exporter)
        load(case, export, "nsys", read)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    trace = case.traces[-1]
    trace.path = str(report)
    row = case.inputs[-1]
    row.update(path=str(report), kind="nsys", report_version=info["report_version"],
               exporter_version=info["exporter_version"], export_reused=info["reused"])
    row["version"] = row.get("version") or info["exporter_version"]


def load_csv_group(case, paths: list[Path]) -> None:
    """The CSV files of one rocprofv3 run (one directory) as one trace."""
    from tracetriage.parsers import rocprof_csv
    from tracetriage.parsers.coerce import sanitize_trace

    trace = rocprof_csv.parse_files(sorted(paths))
    sanitize_trace(trace)
    case.traces.append(trace)
    case.inputs.append(_trace_input(trace))
