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


def load(case, path: Path, kind: str) -> None:
    """Parse one file of a known kind into the case."""
    if kind == "nsys_rep":
        _load_nsys_report(case, Path(path))
        return
    if kind in ("perfetto", "otf2"):
        from tracetriage.parsers.reports import recapture_message

        raise NotReadableYet(path, recapture_message(kind))
    if kind in _TRACES:
        from tracetriage.cache import active

        cache = active()
        ident = cache.identity(path) if cache else None
        trace = cache.get_model(ident) if ident else None
        if trace is None:
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
            if ident:
                cache.put_model(ident, trace)
        trace.path = str(path)
        trace.meta["cache_identity"] = ident
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


def _load_nsys_report(case, report: Path) -> None:
    """Export the report with the real nsys (into the cache, or a temporary directory
    removed after parsing), parse the export, and record both versions in the input row."""
    import shutil
    import tempfile

    from tracetriage.cache import active
    from tracetriage.case import _read_head
    from tracetriage.parsers.reports import export_nsys_report

    cache = active()
    workdir = cache.exports_dir() if cache else None
    tmp = None
    if workdir is None:
        tmp = Path(tempfile.mkdtemp(prefix="tracetriage-export-"))
        workdir = tmp
    try:
        export, info = export_nsys_report(report, _read_head(report), workdir)
        load(case, export, "nsys")
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
