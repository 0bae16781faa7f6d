"""The capture commands a rule or an abstention gives: which profiler, for which vendor and
process. The words are data (``analyzers/capture_hints.toml``, read by catalog.capture_text)."""

from __future__ import annotations

import re

from tracetriage.analyzers.capture_kind import AMD_FORMATS, is_rocm
from tracetriage.analyzers.catalog import capture_text
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
    (``kind``: the capture's, capture_kind.kind_of; there is no nsys on an AMD machine)."""
    if is_python(process_name) is False:
        variant = "rocm" if kind.get("vendor") == "rocm" else "default"
        return capture_text("host_native", variant).format(pid=pid)
    return capture_text("host_python", "default").format(pid=pid)


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


def capture_cmd(fmt: str | None, what: str) -> str:
    """The capture command that would decide an abstention (``what``: steps, api, graphs, steady),
    for the profiler and vendor of the trace (``fmt``: hint_format)."""
    table = "kineto" if fmt == "kineto" else "rocm" if is_rocm_format(fmt) else "default"
    return capture_text(table, what)
