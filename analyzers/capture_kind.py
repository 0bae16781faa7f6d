"""What kind of program a capture is of: the evidence the catalog's texts select a variant on.

Advice that does not fit the capture is advice a GPU engineer overturns: vLLM flags on a
training trace, ``nsys --cudabacktrace`` on a ROCm one, ``.item()`` on a C++ program. Three
axes, each decided from the capture or left unknown (then the default text, which names the
alternatives, stays):

* ``vendor``: ``rocm`` for rocprofv3 / rocpd / RPD captures, or a trace whose devices are AMD
  GPUs or whose runtime calls are HIP's (a Kineto trace from ROCm PyTorch); else ``cuda``.
* ``workload``: ``training`` when backward or optimizer kernels or ranges run (autograd's
  ``*backward*`` / ``*_bwd*`` kernels, ``Optimizer.step``, fused Adam/SGD) and no serving engine
  is seen; ``serving`` when an engine is (a vLLM/SGLang process or serving artifacts); else unknown.
* ``language``: ``python`` for PyTorch profiler traces, a python process or a py-spy capture;
  ``native`` when every process that drives a GPU is named and none is Python; else unknown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracetriage.analyzers.metrics import TraceMetrics

AMD_FORMATS = ("rocpd", "rpd", "rocprof_csv", "rocprof_json")
_AMD_DEVICE = re.compile(r"\bAMD\b|Instinct|Radeon|\bMI\d{3}|gfx\d{3}", re.IGNORECASE)
# multi_tensor_apply is not here: torch's _foreach ops use it at inference too (an SGLang decode step)
_BACKWARD = re.compile(r"backward|Backward|_bwd|bwd_|wgrad|dgrad|autograd::engine|Optimizer\.step|optimizer_step"
                       r"|fused_adam|FusedAdam|[Aa]dam[W]?_|sgd_|zero_grad")
_SERVING = re.compile(r"vllm|sglang|tensorrt_llm|trtllm|text-generation|tgi|lmdeploy", re.IGNORECASE)
_PYTHON = re.compile(r"python|\bpt_main_thread\b|torchrun|pytest|\.py\b", re.IGNORECASE)


def is_rocm(trace: TraceMetrics) -> bool:
    """The metrics of one trace (analysis.analyze_trace) of a ROCm capture."""
    if trace.meta.get("format") in AMD_FORMATS or trace.meta.get("runtime") == "hip":
        return True
    return any(_AMD_DEVICE.search(str(device.name or "")) for device in trace.devices)


def runtime_of(trace) -> str | None:
    """``hip`` or ``cuda`` when most of the trace's runtime calls are that API's (a Kineto trace
    from ROCm PyTorch may name its devices by no vendor: its calls are hipLaunchKernel ...)."""
    calls = [name for name in _trace_names(trace, "api") if name.startswith(("hip", "cuda", "cu"))]
    if not calls:
        return None
    return "hip" if sum(name.startswith("hip") for name in calls) * 2 > len(calls) else "cuda"


def kind_of(case, per_trace: list[TraceMetrics], serving: dict | None) -> dict:
    """{"vendor", "workload", "language"} (a value or None when unknown) for a case."""
    vendor = ("rocm" if any(is_rocm(trace) for trace in per_trace) else "cuda") if per_trace else None
    # the programs that drive the GPUs (a process that only queried the device is not the one advised)
    programs = [str(process.name or "") for trace in per_trace for process in trace.processes if process.gpu_ops]
    return {"vendor": vendor, "workload": _workload(case, programs, serving),
            "language": _language(case, per_trace, programs)}


def _workload(case, programs: list[str], serving: dict | None) -> str | None:
    """``serving`` when an engine is seen, ``training`` when backward or optimizer work runs, else None."""
    if serving or any(_SERVING.search(name) for name in programs):
        return "serving"
    traces = getattr(case, "traces", [])
    names = [name for trace in traces for table in ("gpu", "ranges") for name in _trace_names(trace, table)]
    return "training" if any(_BACKWARD.search(name) for name in names) else None


def _language(case, per_trace: list[TraceMetrics], programs: list[str]) -> str | None:
    """``python`` for a PyTorch profiler trace, a py-spy capture or a Python program; ``native`` when
    every program driving a GPU is named and none is Python; else None."""
    formats = {trace.meta.get("format") for trace in per_trace}
    if "kineto" in formats or getattr(case, "pyspy", None) or any(_PYTHON.search(name) for name in programs):
        return "python"
    if programs and all(name and not name.startswith("pid ") for name in programs):
        return "native"
    return None


def _trace_names(trace, table: str, limit: int = 5000) -> list[str]:
    """:func:`_names` of a trace's table; a trace from the cache answers from the table's stored
    dictionary, so a cached analysis still loads no table."""
    quick = getattr(trace, "distinct_names", None)
    names = quick(table) if quick is not None else None
    return names[:limit] if names is not None else _names(getattr(trace, table, None), limit)


def _names(table, limit: int = 5000) -> list[str]:
    """The distinct names of a model table (its categories: no pass over the rows)."""
    if table is None or not len(table) or "name" not in table:
        return []
    column = table["name"]
    categories = column.cat.categories if hasattr(column, "cat") else column.unique()[:limit]
    return [str(category) for category in list(categories)[:limit]]
