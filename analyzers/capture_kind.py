"""What kind of program a capture is of: the evidence the catalog's texts select a variant on.

Advice that does not fit the capture is advice a GPU engineer overturns: vLLM flags on a
training trace, ``nsys --cudabacktrace`` on a ROCm one, ``.item()`` on a C++ program. Three
axes, each decided from the capture or left unknown (then the default text, which names the
alternatives, stays):

* ``vendor``: ``rocm`` for rocprofv3 / rocpd / RPD captures, or a trace whose devices are AMD
  GPUs or whose runtime calls are HIP's (a Kineto trace from ROCm PyTorch); else ``cuda``.
* ``workload``: ``training`` when backward or optimizer kernels or ranges run (autograd's
  ``*backward*`` / ``*_bwd*`` kernels, ``Optimizer.step``, fused Adam/SGD) and no serving engine
  is seen; ``serving`` when an engine is (a vLLM/SGLang process or serving artifacts, or, in a trace that
  names no process, the engine's own ops: ``vllm::all_reduce``, ``vllm/v1/worker/...``); else unknown.
* ``language``: ``python`` for PyTorch profiler traces, a python process or a py-spy capture;
  ``native`` when every process that drives a GPU is named and none is Python; else unknown.

What the collectives are for (:func:`collective_workload`, the collective rules' text variant) is
decided from the op that takes most collective time and the names of what runs around it:

==================  ===========================================================================
``pipeline``        SendRecv kernels with point-to-point calls named (``nccl:send``/``nccl:recv``,
                    ``c10d::send``/``recv_``, ``batch_isend_irecv``, a pipeline schedule's ranges) and
                    no all-to-all: activations passed between pipeline stages, a wait is a bubble
``all_to_all``      AllToAll kernels, or SendRecv kernels under ``nccl:all_to_all`` /
                    ``c10d::alltoall*`` (NCCL runs an all-to-all as grouped sends and receives):
                    sharded embeddings (TorchRec), experts (MoE) or sequence parallelism (Ulysses)
``fsdp``            a training capture whose collective time is mostly AllGather / ReduceScatter, or
                    that names FSDP / ZeRO: parameters gathered, gradients scattered every layer
``data_parallel``   a training capture whose collective time is mostly AllReduce: the gradient
                    all-reduce of DDP (``nccl:all_reduce`` from DistributedDataParallel)
``tensor_parallel`` a serving capture whose collective time is AllReduce / AllGather / ReduceScatter:
                    the per-layer collectives of tensor-parallel inference
unknown             anything else (SendRecv whose call the trace does not name, a collective-heavy
                    capture whose workload is unknown): the default text names the alternatives
==================  ===========================================================================
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracetriage.analyzers.metrics import TraceMetrics
    from tracetriage.analyzers.serving_metrics import ServingSummary

AMD_FORMATS = ("rocpd", "rpd", "rocprof_csv", "rocprof_json")
_AMD_DEVICE = re.compile(r"\bAMD\b|Instinct|Radeon|\bMI\d{3}|gfx\d{3}", re.IGNORECASE)
# multi_tensor_apply is not here: torch's _foreach ops use it at inference too (an SGLang decode step)
_BACKWARD = re.compile(r"backward|Backward|_bwd|bwd_|wgrad|dgrad|autograd::engine|Optimizer\.step|optimizer_step"
                       r"|fused_adam|FusedAdam|[Aa]dam[W]?_|sgd_|zero_grad")
_SERVING = re.compile(r"vllm|sglang|tensorrt_llm|trtllm|text-generation|tgi|lmdeploy", re.IGNORECASE)
# an op or range of a serving engine's own code (a PyTorch profiler trace names no process: its ops do)
_SERVING_OP = re.compile(r"^(?:vllm|sglang|tensorrt_llm)(?:::|\.|/)")
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


def kind_of(case, per_trace: list[TraceMetrics], serving: ServingSummary | dict | None) -> dict:
    """{"vendor", "workload", "language"} (a value or None when unknown) for a case."""
    vendor = ("rocm" if any(is_rocm(trace) for trace in per_trace) else "cuda") if per_trace else None
    # the programs that drive the GPUs (a process that only queried the device is not the one advised)
    programs = [str(process.name or "") for trace in per_trace for process in trace.processes if process.gpu_ops]
    return {"vendor": vendor, "workload": _workload(case, programs, serving),
            "language": _language(case, per_trace, programs)}


def _workload(case, programs: list[str], serving: ServingSummary | dict | None) -> str | None:
    """``serving`` when an engine is seen, ``training`` when backward or optimizer work runs, else None."""
    if serving or any(_SERVING.search(name) for name in programs):
        return "serving"
    traces = getattr(case, "traces", [])
    names = [name for trace in traces for table in ("gpu", "ranges") for name in _trace_names(trace, table)]
    if any(_BACKWARD.search(name) for name in names):
        return "training"
    ops = [name for trace in traces for table in ("ranges", "ops") for name in _trace_names(trace, table)]
    ops += [str(row[4]) for trace in traces for row in (getattr(trace, "meta", {}) or {}).get("host_ops") or []]
    return "serving" if any(_SERVING_OP.search(name) for name in ops) else None


class _Words:
    """A case-blind search for literal words, each at a name's start (``prefixes``) or anywhere (``parts``);
    ``regex`` is the same search, spelled from the words. An ASCII name is looked up in its lower case (str
    methods, ~10x the regex's speed over the ~20,000 distinct range names of a capture); any other name
    by the regex, whose case folding beyond ASCII str.lower does not copy."""

    def __init__(self, prefixes: tuple[str, ...], parts: tuple[str, ...]):
        self.prefixes, self.parts = tuple(p.lower() for p in prefixes), tuple(p.lower() for p in parts)
        self.regex = re.compile("|".join([f"^{re.escape(p)}" for p in prefixes] + [re.escape(p) for p in parts]),
                                re.IGNORECASE)

    def search(self, name: str) -> bool:
        if not name.isascii():
            return self.regex.search(name) is not None
        lower = name.lower()
        return lower.startswith(self.prefixes) or any(part in lower for part in self.parts)

    def matching(self, names) -> list[str]:
        """The names the search finds, sorted. The ASCII names without a line break are searched at once,
        joined one a line in lower case: each word's occurrences (``str.find``, a prefix after a line
        break) name the lines that hold it, found by their starts; the other names one by one
        (:meth:`search`). 18,499 range names of a 2xH100 capture with 132 hits: 15 ms name by name, ~2 ms."""
        names = list(names)
        text = "\n".join(names)
        if text.isascii() and text.count("\n") == max(len(names) - 1, 0):  # all of them (the usual case)
            plain, found = names, []
        else:
            plain = [name for name in names if name.isascii() and "\n" not in name]
            found = [name for name in names if not (name.isascii() and "\n" not in name) and self.search(name)]
            text = "\n".join(plain)
        joined = "\n" + text.lower()
        if not any(f"\n{prefix}" in joined for prefix in self.prefixes) and not any(part in joined for part in self.parts):
            return sorted(found)  # most captures name no such call
        starts = list(itertools.accumulate((len(name) + 1 for name in plain[:-1]), initial=1))
        lines: set[int] = set()
        for word, offset in [*((f"\n{prefix}", 1) for prefix in self.prefixes), *((part, 0) for part in self.parts)]:
            lines |= _lines_holding(joined, starts, word, offset)
        return sorted(found + [plain[line] for line in lines])


def _lines_holding(joined: str, starts: list[int], word: str, offset: int) -> set[int]:
    """The lines of ``joined`` (each starting at ``starts``) where ``word`` occurs at ``offset`` before
    their start or later (a prefix, after its line break: offset 1), one look a line."""
    lines = set()
    hit = joined.find(word)
    while hit >= 0:
        line = bisect.bisect_right(starts, hit + offset) - 1
        lines.add(line)
        if line + 1 == len(starts):
            break
        hit = joined.find(word, starts[line + 1] - offset)  # the next line on (a prefix: from its break)
    return lines


# a range or op that names the call a SendRecv kernel runs for (PyTorch's record_param_comms
# annotations, c10d ops, torch.distributed.pipelining and Megatron/DeepSpeed pipeline schedules)
_POINT_TO_POINT = _Words(
    tuple(f"{lib}:{call}" for lib in ("nccl", "rccl", "gloo") for call in ("send", "recv", "batch_isend_irecv",
                                                                           "coalesced_p2p"))
    + ("c10d::send", "c10d::recv_", "c10d::recv_any_source"),
    ("batch_isend_irecv", "PipelineSchedule", "Schedule1F1B", "ScheduleInterleaved", "ScheduleGPipe", "pipeline_stage",
     "send_forward", "recv_forward", "send_backward", "recv_backward", "PipelineEngine", "_exec_send_activations"))
_ALL_TO_ALL = _Words(("nccl:all_to_all", "rccl:all_to_all", "c10d::alltoall"), ("all_to_all_single", "alltoall_base",
                                                                              "all2all"))
_FSDP = re.compile(r"FullyShardedDataParallel|FSDP::|fsdp::|FSDPParamGroup|ZeRO|zero_stage|reduce_scatter_tensor"
                   r"|_reduce_scatter_base|all_gather_into_tensor|_allgather_base")
_GATHER_SCATTER = ("AllGather", "ReduceScatter")


@dataclass(frozen=True, slots=True)
class CollectiveWorkload:
    """What the collectives of a case are for (module docstring): ``kind`` one of pipeline,
    all_to_all, fsdp, data_parallel, tensor_parallel, or None when unknown; ``why`` the names that
    decided it, in words for the evidence."""

    kind: str | None
    why: str


def collective_workload(case, by_op: dict[str, float], workload: str | None) -> CollectiveWorkload:
    """The workload kind of a case's collectives, from ``by_op`` (op -> share of the window, mean
    over the ranks), the capture's ``workload`` (kind_of) and the names of its ranges and ops."""
    if not by_op:
        return CollectiveWorkload(None, "no collective kernels")
    # a kernel of unknown op ("Collective": a generic NCCL/RCCL kernel whose call the trace does not name, e.g.
    # one launched before the capture began) is no evidence of another workload: the top named op decides
    named = {op: share for op, share in by_op.items() if op != "Collective"}
    top = max(named or by_op, key=(named or by_op).get)
    traces = getattr(case, "traces", [])
    if top in ("AllToAll", "SendRecv"):
        names = _range_and_op_names(traces)
        return _exchange_workload(top, _POINT_TO_POINT.matching(names), _ALL_TO_ALL.matching(names))
    if workload == "training":
        return _training_workload(top, sorted({name for name in _range_and_op_names(traces) if _FSDP.search(name)}))
    if workload == "serving" and top in ("AllReduce", *_GATHER_SCATTER):
        return CollectiveWorkload("tensor_parallel", f"a serving engine with {top} on top")
    return CollectiveWorkload(None, f"{top} on top; the workload (training or serving) is not known from the capture")


def _range_and_op_names(traces) -> set[str]:
    """The distinct names of every trace's ranges and ops: searched only by the workloads that read them
    (each name once, however many ranks share it)."""
    return {name for trace in traces for table in ("ranges", "ops") for name in _trace_names(trace, table, limit=1 << 20)}


_FSDP_MODULE = re.compile(r"FullyShardedDataParallel|FSDP::|fsdp::|FSDPParamGroup")  # FSDP's own calls, not its collectives


def fsdp_ranges(case) -> str | None:
    """A few of the case's range and op names that are FSDP's own calls (``FSDP::pre_forward`` ...), in words,
    or None when none is: a model wrapped in FSDP, whose parameters it may bring in from host memory."""
    names = sorted({re.sub(r",\s*(op_id|seq|sizes)\s*=.*$", "", name)  # nsys --pytorch appends the op's ids
                    for name in _range_and_op_names(getattr(case, "traces", [])) if _FSDP_MODULE.search(name)})
    return _few(names) if names else None


def _exchange_workload(top: str, p2p: list[str], a2a: list[str]) -> CollectiveWorkload:
    """AllToAll or SendRecv on top: an all-to-all (its kernels, or SendRecv under all-to-all calls only), pipeline
    stages (SendRecv under point-to-point calls only), or not known (neither call named, or both)."""
    if top == "AllToAll" or (a2a and not p2p):
        return CollectiveWorkload("all_to_all", f"{top} kernels" + (f" under {_few(a2a)}" if a2a else ""))
    if p2p and not a2a:
        return CollectiveWorkload("pipeline", f"SendRecv kernels with point-to-point calls: {_few(p2p)}")
    if not p2p:
        return CollectiveWorkload(None, "SendRecv kernels whose call the trace does not name (no nccl:send/recv or "
                                        "nccl:all_to_all annotation)")
    return CollectiveWorkload(None, f"SendRecv kernels under both point-to-point ({_few(p2p)}) and all-to-all "
                                    f"({_few(a2a)}) calls")


def _training_workload(top: str, fsdp: list[str]) -> CollectiveWorkload:
    """A training capture: sharded (gathers or scatters on top, or FSDP names), data-parallel (AllReduce on top),
    else not known."""
    if top in _GATHER_SCATTER or fsdp:
        return CollectiveWorkload("fsdp", f"training with {top} on top" + (f", {_few(fsdp)}" if fsdp else ""))
    if top == "AllReduce":
        return CollectiveWorkload("data_parallel", "training (backward or optimizer work runs) with AllReduce on top")
    return CollectiveWorkload(None, f"training with {top} on top")


def _few(names: list[str], count: int = 3) -> str:
    """Up to ``count`` names, for the evidence: the communication library's own annotations first."""
    names = sorted(names, key=lambda name: (not name.startswith(("nccl:", "rccl:", "c10d::")), name))
    return ", ".join(names[:count]) + (f" (+{len(names) - count})" if len(names) > count else "")


def _language(case, per_trace: list[TraceMetrics], programs: list[str]) -> str | None:
    """``python`` for a PyTorch profiler trace, a py-spy capture or a Python program; ``native`` when
    every program driving a GPU is named and none is Python; else None."""
    formats = {trace.meta.get("format") for trace in per_trace}
    if "kineto" in formats or getattr(case, "pyspy", None) or any(_PYTHON.search(name) for name in programs):
        return "python"
    if programs and all(name and not name.startswith("pid ") for name in programs):
        return "native"
    return None


def trace_vendor(trace) -> str:
    """``rocm`` or ``cuda`` for one trace of the model (as :func:`is_rocm` for its metrics): an AMD
    format, HIP runtime calls, or AMD device names."""
    if trace.format in AMD_FORMATS or trace.meta.get("runtime") == "hip" or runtime_of(trace) == "hip":
        return "rocm"
    names = trace.devices["name"].astype(str).tolist() if "name" in trace.devices else []
    return "rocm" if any(_AMD_DEVICE.search(name) for name in names) else "cuda"


def is_native_trace(trace) -> bool:
    """A trace (the model's) of a native program: not a PyTorch profiler trace, and every process
    that ran GPU work is named and none of them is Python (as ``language`` = native above)."""
    if trace.format == "kineto" or not len(trace.processes) or not len(trace.gpu):
        return False
    from tracetriage.model import distinct  # (the model's tables are loaded: pandas is)

    names = dict(zip(trace.processes["pid"].tolist(), trace.processes["name"].tolist()))
    # the distinct pids (model.distinct: a constant column, one process, is two reductions, no hash table)
    programs = [str(names.get(pid) or "") for pid in distinct(trace.gpu["pid"].to_numpy()).tolist()]
    return bool(programs) and all(name and not name.startswith("pid ") and not _PYTHON.search(name) for name in programs)


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
    return [str(category) for category in categories[:limit].tolist()]  # one conversion, not an arrow scalar each
