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


def load(case, path: Path, kind: str) -> None:
    if kind == "nsys":
        from tracetriage.parsers import nsys

        trace = nsys.parse(str(path))
        case.traces.append(trace)
        case.inputs.append(_trace_input(trace))
        return
    if kind == "rocpd":
        from tracetriage.parsers import rocpd

        trace = rocpd.parse(str(path))
        case.traces.append(trace)
        case.inputs.append(_trace_input(trace))
        return
    if kind == "kineto":
        from tracetriage.parsers import kineto

        trace = kineto.parse(str(path))
        case.traces.append(trace)
        case.inputs.append(_trace_input(trace))
        return
    if kind == "serving":
        from tracetriage.parsers import serving

        cap = serving.parse(str(path))
        case.serving.append(cap)
        case.inputs.append({"path": str(path), "kind": cap.kind, "version": cap.version, "warnings": [], "counts": None})
        return
    if kind in ("rpd", "gzip_sqlite"):
        from tracetriage.parsers import rpd

        trace = rpd.parse(str(path)) if kind == "rpd" else rpd.parse_gzip(str(path))
        case.traces.append(trace)
        case.inputs.append(_trace_input(trace))
        return
    if kind in ("topology", "rocm_topology"):
        from tracetriage.parsers import topology

        topo = topology.parse(str(path)) if kind == "topology" else topology.parse_rocm(str(path))
        case.topologies.append(topo)
        case.inputs.append({"path": str(path), "kind": "topology", "version": None, "warnings": list(topo.warnings),
                            "counts": None})
        return
    if kind == "nccl":
        from tracetriage.parsers import nccl

        log = nccl.parse(str(path))
        case.nccl_logs.append(log)
        case.inputs.append({"path": str(path), "kind": "nccl", "version": log.version, "warnings": [], "counts": None})
        return
    if kind == "pyspy":
        from tracetriage.parsers import pyspy

        cap = pyspy.parse(str(path))
        case.pyspy.append(cap)
        case.inputs.append({"path": str(path), "kind": f"pyspy-{cap.format}", "version": None, "warnings": [], "counts": None})
        return
    raise NotReadableYet(path, f"recognised as {READERS.get(kind, kind)}, which this version cannot read yet")


def load_csv_group(case, paths: list[Path]) -> None:
    """The CSV files of one rocprofv3 run (one directory) as one trace."""
    from tracetriage.parsers import rocprof_csv

    trace = rocprof_csv.parse_files(sorted(paths))
    case.traces.append(trace)
    case.inputs.append(_trace_input(trace))
