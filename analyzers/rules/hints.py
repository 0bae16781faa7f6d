"""The capture commands a rule or an abstention gives: which profiler, for which vendor and
process. The words are data (``analyzers/capture_hints.toml``, read by catalog.capture_text)."""

from __future__ import annotations

import re

from tracetriage.analyzers.capture_kind import AMD_FORMATS, is_rocm
from tracetriage.analyzers.catalog import CAPTURE_HINTS, capture_text
from tracetriage.analyzers.metrics import TraceMetrics


def is_python(process_name: str) -> bool | None:
    """True for a Python process, False for a native one, None when the name says nothing."""
    name = (process_name or "").strip()
    if not name or re.fullmatch(r"pid \d+", name):
        return None
    # the interpreter, a script, or an entry point that is a Python program (a test runner, a notebook, a launcher)
    return bool(re.search(r"(?i)python|\.py\b|vllm|sglang|torchrun|uvicorn|gunicorn|ray::|\bpytest\b|\bipython\b"
                          r"|jupyter|ipykernel|\baccelerate\b|\bdeepspeed\b|\bcelery\b", name))


def host_profiler_hint(process_name: str, pid: int, kind: dict) -> str:
    """The host profiler that names the code running in the GPU's idle time, for this process
    (``kind``: the capture's, capture_kind.kind_of; there is no nsys on an AMD machine); both, each for its
    case, where neither the process's name nor the capture says which it is."""
    python = is_python(process_name)
    if python is None and kind.get("language") in ("python", "native"):  # the name says nothing: the capture may
        python = kind["language"] == "python"
    native = capture_text("host_native", "rocm" if kind.get("vendor") == "rocm" else "default").format(pid=pid)
    if python is False:
        return native
    py_spy = capture_text("host_python", "default").format(pid=pid)
    return py_spy if python else f"{py_spy} if it is a Python process; if it is a native one: {native}"


def hint_format(trace: TraceMetrics) -> str | None:
    """The trace's format for capture hints: a PyTorch profiler trace is re-captured with the
    PyTorch profiler (on either vendor); "rocm" for another ROCm capture in a vendor-neutral
    format, so its hints name rocprofv3 and roctx, not nsys."""
    fmt = trace.meta.get("format")
    if fmt == "kineto":
        return fmt
    return "rocm" if fmt not in AMD_FORMATS and is_rocm(trace) else fmt


def is_rocm_format(fmt: str | None) -> bool:
    """A hint_format that is a ROCm capture's."""
    return fmt == "rocm" or fmt in AMD_FORMATS


def capture_cmd(fmt: str | None, what: str, language: str | None = None) -> str:
    """The capture command that would decide an abstention (``what``: steps, api, graphs, steady),
    for the profiler and vendor of the trace (``fmt``: hint_format) and, where the table has one, the
    program's language (``language``: the capture kind's; ``steps_native``: a C/C++ program's NVTX call)."""
    table = "kineto" if fmt == "kineto" else "rocm" if is_rocm_format(fmt) else "default"
    return capture_text(table, f"{what}_{language}" if f"{what}_{language}" in CAPTURE_HINTS[table] else what)
