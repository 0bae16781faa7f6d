"""The trace model: what every parser produces and every analyzer reads.

Columnar, one row per event, integer nanoseconds (int64) on the capture's own clock,
names interned as pandas categoricals. There is no Python object per event, so a
10M-kernel trace costs roughly 60 bytes a row. A column whose rows all hold one value (``pid`` of
a one-process capture, the kernels' ``bytes`` and ``pageable``) may be a read-only zero-stride
view of that value (:func:`one_value_view`): the same dtype and values, no memory per row.

Tables of a :class:`Trace` (column: dtype — meaning):

``gpu`` — one row per GPU-side interval
    device: int32 — row index into ``devices`` (devices are keyed by process *and*
        ordinal, so two processes that both call their GPU "0" stay two devices)
    stream: integer (int32 or int64) — stream id as the profiler reports it (-1 unknown)
    start, end: int64 — ns
    kind: category — ``kernel``, ``memcpy``, ``memset``, ``graph`` (a whole CUDA/HIP
        graph replay recorded as one interval when node-level tracing was off)
    name: category — kernel short name; ``memcpy HtoD`` etc.; ``graph <id>``
    correlation: int64 — id linking the row to its launching ``api`` row; unique only
        per process: always join on (pid, correlation). -1 when absent.
    pid: int64 — owning process
    collective: category — AllReduce, AllGather, ReduceScatter, Broadcast, Reduce,
        SendRecv, AllToAll, Collective (op unknown), or missing for compute
    bytes: int64 — bytes moved by a copy or set, 0 for kernels, -1 when the format does not record
        the size (parsers/common.py UNRECORDED_BYTES: rocprofv3 blit-kernel copies and memsets, RPD
        FillBuffer memsets)
    copy_kind: category — HtoD, DtoH, DtoD, HtoH, PtoP, other, and UVM_HtoD / UVM_DtoH /
        UVM_DtoD for unified-memory migrations (copies only)
    pageable: bool — a copy whose host side is pageable (not pinned) memory
    in_graph: bool — a kernel/copy executed as a node of a CUDA/HIP graph

``api`` — one row per host runtime/driver call
    pid: int64; tid: integer (int32 or int64); start, end: int64 ns
    name: category — the API name with its version suffix removed
        (``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``)
    category: category — launch, graph_launch, sync, memcpy_sync, memcpy_async,
        memset, alloc, other (see :func:`api_category`)
    correlation: int64 (-1 when absent)

``ranges`` — one row per NVTX / roctx range or mark (marks have end == start)
    pid, tid, start, end: int64; name: category; domain: category

``syncs`` — one row per synchronization record from the profiler's sync activity
    pid, start, end: int64; sync_type: category (event_sync, stream_wait_event,
    stream_sync, context_sync, unknown); correlation: int64

``devices`` — one row per GPU seen (index = the ``device`` key used in ``gpu``)
    pid: int64 (-1 if the device is not tied to a process); ordinal: int64 (the
    runtime's device number in that process); gpu_index: int64 (physical GPU number
    when the trace maps it, else the ordinal); name, uuid: str; sm_count,
    memory_bytes: int64 (-1 unknown)

``processes`` — pid: int64, name: str

``ops`` — one row per CPU operator whose input shapes the capture recorded (PyTorch profiler
``record_shapes=True``; nsys ``--pytorch=autograd-shapes-nvtx`` operator ranges, Input type null
where no kernel name told the dtype) and that launched at least one GPU event, for the op kinds
with a work formula (:data:`WORK_OPS`)
    pid: int64; start, end: int64 ns (host side); name: category (``aten::mm`` ...);
    shape: category — the recorded ``[Input Dims, Input type, Concrete Inputs]`` as compact JSON
    (interned: one string per distinct shape); ext_id: int64 (the profiler's External id)

``op_kernels`` — one row per GPU event launched by a row of ``ops``
    pid, correlation: int64 (join with ``gpu`` on both); nth: int64 (-1: every GPU event of that
    launch; n >= 0: only the n-th kernel, in start order, of a graph replay, whose kernels all carry
    the graph launch's correlation: parsers/graph_replays.py); op: int64 (row of ``ops``)

``meta`` — dict: ``format``, ``version``, ``graph_trace_mode`` (graph, node, none,
unknown), ``warnings`` (list of str), ``tables`` (what was captured) and anything
else a parser knows about the capture: ``nvtx_ops`` (nsys: PyTorch operator ranges, with shapes,
without a dtype), ``graph_captures`` / ``graph_ties`` (CUDA/HIP graph captures recorded, and which
replays were tied to one: parsers/graph_replays.py), ``clocks_unrelated`` (rocprofv3 CSV files of different runs:
their times cannot be laid side by side), ``collective_messages`` (Kineto: the message bytes and group size of
each collective kernel that records them, keyed by pid, correlation and start: parsers/kineto.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracetriage.codes import FEW_CODES, lookup  # noqa: F401 (FEW_CODES re-exported)


class _Pandas:
    """pandas, imported on first use: code that only needs this module's names and name rules
    (compare and trend of saved analyses, the CLI's start) does not pay pandas' import (~0.3 s)."""

    def __getattr__(self, name: str):
        import pandas

        return getattr(pandas, name)


pd = _Pandas()

GPU_KINDS = ["kernel", "memcpy", "memset", "graph"]
API_CATEGORIES = [
    "launch",
    "graph_launch",
    "sync",
    "memcpy_sync",
    "memcpy_async",
    "memset",
    "alloc",
    "other",
]
COLLECTIVE_OPS = [
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "Broadcast",
    "Reduce",
    "SendRecv",
    "AllToAll",
    "Collective",
]
COPY_KINDS = ["HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "other", "UVM_HtoD", "UVM_DtoH", "UVM_DtoD"]
# Unified-memory page migrations (nsys copyKind 11-13): the driver moving pages, not a copy the program issued.
UVM_KINDS = ["UVM_HtoD", "UVM_DtoH", "UVM_DtoD"]
SYNC_TYPES = ["event_sync", "stream_wait_event", "stream_sync", "context_sync", "unknown"]

GPU_COLUMNS = {
    "device": "int32",
    "stream": "int64",
    "start": "int64",
    "end": "int64",
    "correlation": "int64",
    "pid": "int64",
    "bytes": "int64",
    "pageable": "bool",
    "in_graph": "bool",
}
API_COLUMNS = {"pid": "int64", "tid": "int64", "start": "int64", "end": "int64", "correlation": "int64"}
RANGE_COLUMNS = {"pid": "int64", "tid": "int64", "start": "int64", "end": "int64"}
SYNC_COLUMNS = {"pid": "int64", "start": "int64", "end": "int64", "correlation": "int64"}


def categorical(values, categories=None) -> pd.Categorical:
    """Intern a column of strings (None stays missing)."""
    if categories is None:
        return pd.Categorical(values)
    return pd.Categorical(values, categories=categories)


def empty_gpu() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in GPU_COLUMNS.items()})
    df["kind"] = categorical([], GPU_KINDS)
    df["name"] = categorical([])
    df["collective"] = categorical([], COLLECTIVE_OPS)
    df["copy_kind"] = categorical([], COPY_KINDS)
    return df[gpu_column_order()]


def gpu_column_order() -> list[str]:
    return [
        "device", "stream", "start", "end", "kind", "name", "correlation", "pid",
        "collective", "bytes", "copy_kind", "pageable", "in_graph",
    ]


def empty_api() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in API_COLUMNS.items()})
    df["name"] = categorical([])
    df["category"] = categorical([], API_CATEGORIES)
    return df[["pid", "tid", "start", "end", "name", "category", "correlation"]]


def empty_ranges() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in RANGE_COLUMNS.items()})
    df["name"] = categorical([])
    df["domain"] = categorical([])
    return df[["pid", "tid", "start", "end", "name", "domain"]]


def empty_syncs() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in SYNC_COLUMNS.items()})
    df["sync_type"] = categorical([], SYNC_TYPES)
    return df[["pid", "start", "end", "sync_type", "correlation"]]


def empty_devices() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pid": pd.Series([], dtype="int64"),
            "ordinal": pd.Series([], dtype="int64"),
            "gpu_index": pd.Series([], dtype="int64"),
            "name": pd.Series([], dtype=object),
            "uuid": pd.Series([], dtype=object),
            "sm_count": pd.Series([], dtype="int64"),
            "memory_bytes": pd.Series([], dtype="int64"),
        }
    )


# CPU ops whose recorded shapes the parsers keep: the kinds analyzers/opwork.py has a work
# formula for (GEMMs, attention, memory-bound ops); views, allocations and wrapper ops carry no
# work of their own and are not kept, so memory follows the ops that launched kernels.
# The memory-bound op kinds by how their bytes are counted (analyzers/opwork.py imports them).
ELEMENTWISE_OPS = frozenset({
    "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_", "aten::div", "aten::div_",
    "aten::neg", "aten::rsqrt", "aten::sqrt", "aten::pow", "aten::exp", "aten::log", "aten::tanh", "aten::sigmoid",
    "aten::silu", "aten::silu_", "aten::gelu", "aten::relu", "aten::relu_", "aten::where", "aten::clamp",
    "aten::clamp_", "aten::masked_fill", "aten::masked_fill_", "aten::reciprocal", "aten::cos", "aten::sin",
    "aten::eq", "aten::ne", "aten::lt", "aten::gt", "aten::ge", "aten::le", "aten::maximum", "aten::minimum",
    "aten::fill_", "aten::zero_", "aten::index_select", "aten::embedding", "aten::gather",
})
COPY_OPS = frozenset({"aten::copy_"})
CONCAT_OPS = frozenset({"aten::cat"})
SOFTMAX_OPS = frozenset({"aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax"})
REDUCTION_OPS = frozenset({"aten::sum", "aten::mean", "aten::amax", "aten::max", "aten::min", "aten::argmax",
                           "aten::all", "aten::any", "aten::norm", "aten::topk"})
SCAN_OPS = frozenset({"aten::cumsum"})  # an output as large as the input
NORM_OPS = frozenset({"aten::native_layer_norm", "aten::layer_norm", "aten::rms_norm", "aten::_fused_rms_norm",
                      "aten::native_group_norm", "aten::native_batch_norm", "vllm::rms_norm", "_C::rms_norm",
                      "_C::fused_add_rms_norm"})
WORK_OPS = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul", "aten::_scaled_mm",
    "vllm::rocm_unquantized_gemm",
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention", "aten::_flash_attention_forward", "aten::_efficient_attention_forward",
    "flash_attn::_flash_attn_forward",
    "vllm::unified_attention_with_output", "vllm::unified_attention", "aiter::paged_attention_ragged",
    "vllm::moe_forward", "_C_cache_ops::reshape_and_cache_flash", "_C_cache_ops::reshape_and_cache",
    "vllm::inplace_fused_experts", "vllm::outplace_fused_experts", "vllm::rocm_aiter_fused_moe",
    "sglang::inplace_fused_experts", "sglang::outplace_fused_experts", "_C::cutlass_scaled_mm", "_C::gptq_marlin_gemm",
    "flash_attn::_flash_attn_varlen_forward", "vllm::flash_attn_varlen_func", "vllm::flash_attn_with_kvcache",
    "_C::awq_gemm", "_C::cutlass_scaled_fp4_mm", "sgl_kernel::cutlass_scaled_fp4_mm", "_C::cutlass_moe_mm",
    "aiter::mha_fwd", "aiter::mha_varlen_fwd", "aiter::fmha_v3_varlen_fwd", "aiter::pa_fwd_asm",
    "vllm::fp8_gemm_nt_op", "sglang::deep_gemm_fp8_fp8_bf16_nt", "vllm::w8a8_block_fp8_matmul_deepgemm",
    "vllm::flashinfer_fused_moe_blockscale_fp8", "vllm::flashinfer_fused_moe_bf16",
}) | ELEMENTWISE_OPS | COPY_OPS | CONCAT_OPS | SOFTMAX_OPS | REDUCTION_OPS | SCAN_OPS | NORM_OPS


# op names that carry a per-layer suffix (SGLang's profiler names its attention calls
# ``sglang_profiler::attention_paged_attention_ragged_<layer>``) or a JIT module's uri (FlashInfer 0.2.0's
# ``flashinfer::batch_prefill_with_kv_cache_dtype_q_bf16_..._paged_run``): kept like WORK_OPS
WORK_OP_PREFIXES = ("sglang_profiler::attention_paged_attention_ragged_", "flashinfer::batch_prefill_with_kv_cache_",
                    "flashinfer::batch_decode_with_kv_cache_", "flashinfer::single_prefill_with_kv_cache_",
                    "flashinfer::single_decode_with_kv_cache_")

# ops whose work needs what their child ops recorded (analyzers/serving_work.py): a fused MoE's
# top-k and expert weights are not its arguments, but its TopK child op and the views of the
# expert weights inside it record them. CONTEXT_CHILD_OPS are the child ops kept for them.
CONTEXT_OPS = frozenset({"vllm::moe_forward"})
CONTEXT_CHILD_OPS = frozenset({"TopK", "aten::view"})


def is_work_op(name: str) -> bool:
    """Whether the parsers keep an op of this name (a work formula may apply)."""
    return name in WORK_OPS or name.startswith(WORK_OP_PREFIXES)


def empty_ops() -> pd.DataFrame:
    return pd.DataFrame({"pid": pd.Series([], dtype="int64"), "start": pd.Series([], dtype="int64"),
                         "end": pd.Series([], dtype="int64"), "name": categorical([]), "shape": categorical([]),
                         "ext_id": pd.Series([], dtype="int64")})


def empty_op_kernels() -> pd.DataFrame:
    return pd.DataFrame({"pid": pd.Series([], dtype="int64"), "correlation": pd.Series([], dtype="int64"),
                         "nth": pd.Series([], dtype="int64"), "op": pd.Series([], dtype="int64")})


def empty_processes() -> pd.DataFrame:
    return pd.DataFrame({"pid": pd.Series([], dtype="int64"), "name": pd.Series([], dtype=object)})


@dataclass
class Trace:
    """One profiler capture (one file, or one merged set of per-rank files)."""

    path: str
    format: str
    gpu: pd.DataFrame = field(default_factory=empty_gpu)
    api: pd.DataFrame = field(default_factory=empty_api)
    ranges: pd.DataFrame = field(default_factory=empty_ranges)
    syncs: pd.DataFrame = field(default_factory=empty_syncs)
    devices: pd.DataFrame = field(default_factory=empty_devices)
    processes: pd.DataFrame = field(default_factory=empty_processes)
    ops: pd.DataFrame = field(default_factory=empty_ops)
    op_kernels: pd.DataFrame = field(default_factory=empty_op_kernels)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        return self.meta.setdefault("warnings", [])

    def counts(self) -> dict[str, int]:
        """Event counts by table and kind, as reported in the JSON ``inputs[]``."""
        kinds = self.gpu["kind"].value_counts()
        replays = int(kinds.get("graph", 0))
        if not replays and "in_graph" in self.gpu and len(self.gpu) and bool(self.gpu["in_graph"].any()):
            # no replay records (Kineto, node-level traces): a replay is one graph launch whose kernels
            # ran, and they share its correlation id (25 hipGraphLaunch calls ran 361 of 413 kernels)
            corr = self.gpu["correlation"].to_numpy()[self.gpu["in_graph"].to_numpy(bool)]
            corr = corr[corr >= 0]
            # a replay's kernels come in a run of its id: every distinct id is a run's head (a unique of those)
            heads = np.empty(corr.size, bool)
            heads[:1] = True
            np.not_equal(corr[1:], corr[:-1], out=heads[1:])
            replays = int(np.unique(corr[heads]).size)
        return {
            "kernels": int(kinds.get("kernel", 0)),
            "memcpy": int(kinds.get("memcpy", 0)),
            "memset": int(kinds.get("memset", 0)),
            "graph_replays": replays,
            "api_calls": int(len(self.api)),
            "ranges": int(len(self.ranges)),
        }

    def device_label(self, device: int) -> str:
        row = self.devices.iloc[device]
        if row["pid"] >= 0:
            return f"GPU{int(row['gpu_index'])}/pid{int(row['pid'])}"
        return f"GPU{int(row['gpu_index'])}"


# ---------------------------------------------------------------------------
# Classification shared by every parser (NVIDIA and AMD names side by side).

_VERSION_SUFFIX = re.compile(r"_v\d+$")
_RUNTIME_SUFFIX = re.compile(r"_v\d{4,}$")
_STREAM_SUFFIX = re.compile(r"_(ptsz|ptds|spt)$")

_LAUNCH = re.compile(
    r"^(cuda|cu|hip)(Ext)?(Module)?Launch(Cooperative)?Kernel(Ex|ExC|MultiDevice)?$"
    r"|^cudaLaunch$|^cuLaunchGrid(Async)?$|^hipExtLaunchKernelGGL$|^hipLaunchKernelGGL$"
)
_GRAPH_LAUNCH = re.compile(r"^(cuda|cu|hip)GraphLaunch$")
_SYNC = re.compile(
    r"^(cuda|hip)(Stream|Device|Event|Thread)Synchronize$|^cu(Stream|Ctx|Event)Synchronize$"
)
# hipMemcpyWithStream blocks the host until the copy is done (HIP documents it as the
# synchronous copy on a given stream): it is a synchronous copy, not an async one.
_MEMCPY_ASYNC = re.compile(r"^(cuda|cu|hip)Memcpy\w*Async$")
_MEMCPY_SYNC = re.compile(r"^(cuda|cu|hip)Memcpy\w*$")
_MEMSET = re.compile(r"^(cuda|cu|hip)Memset\w*$")
_ALLOC = re.compile(
    r"^(cuda|cu|hip)(Ext)?(Malloc|Free|HostAlloc|HostFree|MemAlloc|MemFree|MemCreate|MemRelease|MemMap|MemUnmap)\w*$"
)


def strip_api_version(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``; driver ``_v2`` names keep theirs."""
    # Runtime suffixes are 4-5 digit CUDA versions (_v3020, _v11030); a driver API's
    # own _v2/_v3 is part of its name (cuMemcpyDtoH_v2) and stays.
    return _RUNTIME_SUFFIX.sub("", name)


def api_category(name: str) -> str:
    """The model category of an API name (version suffix already removed)."""
    base = _VERSION_SUFFIX.sub("", _STREAM_SUFFIX.sub("", _VERSION_SUFFIX.sub("", name)))
    base = _STREAM_SUFFIX.sub("", base)
    if _LAUNCH.match(base):
        return "launch"
    if _GRAPH_LAUNCH.match(base):
        return "graph_launch"
    if _SYNC.match(base):
        return "sync"
    if _MEMCPY_ASYNC.match(base):
        return "memcpy_async"
    if _MEMCPY_SYNC.match(base):
        return "memcpy_sync"
    if _MEMSET.match(base):
        return "memset"
    if _ALLOC.match(base):
        return "alloc"
    return "other"


_NCCL_OP = re.compile(
    r"(?i)(?:nccl|rccl)\w*?(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll|AlltoAll)"
)
_CUSTOM_ALLREDUCE = re.compile(
    r"(?i)cross_device_reduce|custom_?all_?reduce|one_?shot_?all_?reduce|two_?shot_?all_?reduce"
    r"|allreduce_fusion|lamport.*allreduce|quick_?all_?reduce|deep_?ep|all_?to_?all_?(kernel|dispatch|combine)"
    r"|multimem_\w*?all_?reduce"
)
_GENERIC_NCCL = re.compile(r"(?i)^(nccl|rccl)(Dev)?Kernel")


def collective_op(kernel_name: str) -> str | None:
    """The collective a kernel implements, from its name; None for compute kernels.

    NCCL/RCCL: ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``ncclKernel_AllGather_RING_LL_Sum_int8_t``,
    ``ncclDevKernel_SendRecv``. vLLM/SGLang/TRT-LLM custom all-reduce kernels
    (``cross_device_reduce_1stage``, ``allreduce_fusion_kernel_oneshot``, ...) and PyTorch's symmetric-memory
    ones (``multimem_all_reduce_kernel``, ``one_shot_all_reduce_kernel``).
    A generically named NCCL/RCCL kernel (``ncclDevKernel_Generic``) is a collective
    of unknown op.
    """
    m = _NCCL_OP.search(kernel_name)
    if m:
        op = m.group(1)
        low = op.lower()
        if low in ("send", "recv", "sendrecv"):
            return "SendRecv"
        if low == "alltoall":
            return "AllToAll"
        return op
    if _CUSTOM_ALLREDUCE.search(kernel_name):
        if re.search(r"(?i)all_?to_?all|deep_?ep", kernel_name):
            return "AllToAll"
        return "AllReduce"
    if _GENERIC_NCCL.search(kernel_name):
        return "Collective"
    return None


_C10D_CALLS = (  # the c10d call names PyTorch's profiler writes (ParamCommsUtils' "Collective name") -> op
    (re.compile(r"(?i)all_?reduce"), "AllReduce"),
    (re.compile(r"(?i)all_?gather"), "AllGather"),
    (re.compile(r"(?i)reduce_?scatter"), "ReduceScatter"),
    (re.compile(r"(?i)all_?to_?all"), "AllToAll"),
    (re.compile(r"(?i)broadcast"), "Broadcast"),
    (re.compile(r"(?i)^_?(send|recv)"), "SendRecv"),
    (re.compile(r"(?i)^_?reduce(_|$)"), "Reduce"),
)


def collective_of_call(call_name: str) -> str | None:
    """The collective a c10d call performs, from the call's name as the PyTorch profiler records it on the
    kernel (``args["Collective name"]``: ``allreduce``, ``_allgather_base``, ``reduce_scatter_tensor_coalesced``,
    ``all_to_allv``, ``broadcast``, ``send``); None for a name that is none of them (``barrier``, ``gather``)."""
    for pattern, op in _C10D_CALLS:
        if pattern.search(call_name):
            return op
    return None


def is_sorted(values: np.ndarray) -> bool:
    """Whether the values ascend (ties allowed): tables are kept in start order, so this
    one pass usually saves a sort."""
    return values.size < 2 or bool((values[1:] >= values[:-1]).all())


def one_value_view(values: np.ndarray) -> np.ndarray:
    """``values`` as a read-only zero-stride view of its one value when every row holds the same
    one (the pid of a one-process capture, the bytes of kernels: 8 bytes instead of 8 a row, 80 MB
    at 10M rows), else as they are. Same dtype, same values: a reader sees no difference, but a
    writer must not write into a model column (pandas hands them out read-only as it is)."""
    values = np.asarray(values)
    if values.ndim != 1 or values.size < 2 or values.strides[0] == 0 or values.min() != values.max():
        return values
    return np.broadcast_to(values[:1].copy()[0], values.shape)


def is_one_value_view(values) -> bool:
    """Whether a column is a zero-stride view of one value (:func:`one_value_view`)."""
    return isinstance(values, np.ndarray) and values.ndim == 1 and values.size > 1 and values.strides[0] == 0


def distinct(*arrays: np.ndarray) -> np.ndarray:
    """Sorted distinct values of several large integer arrays with few distinct values (pids):
    hashed per array, sorted only at the end (np.unique sorts every row)."""
    # a constant column (one process: the usual case) needs no hash table, two reductions do
    parts = [np.asarray(a)[:1] if np.min(a) == np.max(a) else pd.unique(np.asarray(a)) for a in arrays if len(a)]
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)


def cat_codes(col: pd.Series) -> tuple[np.ndarray, list]:
    """(codes, categories) of a column: its categorical codes, or factorized when it is not
    categorical; code -1 is missing."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(), list(col.cat.categories)
    codes, uniq = pd.factorize(col.to_numpy())
    return codes, list(uniq)


def cat_lut(col: pd.Series, values) -> tuple[np.ndarray, np.ndarray]:
    """(codes, lut): the column's category codes (:func:`cat_codes`) and a boolean table over
    them marking ``values``; its last slot is code -1 (missing)."""
    values = (values,) if isinstance(values, str) else tuple(values)
    codes, cats = cat_codes(col)
    lut = np.zeros(len(cats) + 1, dtype=bool)
    lut[[cats.index(v) for v in values if v in cats]] = True
    return codes, lut


def cat_mask(df: pd.DataFrame, column: str, values) -> np.ndarray:
    """Rows whose categorical column is one of ``values``, compared on codes (no strings,
    no copy of the frame)."""
    codes, lut = cat_lut(df[column], values)
    return lookup(lut, codes)  # a compare per wanted category: no sort, no hash, no gather


def is_kind(gpu: pd.DataFrame, kind: str, rows: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask of gpu rows of one kind, on the categorical codes (no string compare); over
    ``rows`` only (row numbers, tracetriage.partition.device_rows) when given."""
    col = gpu["kind"]
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = list(col.cat.categories)
        if kind not in cats:
            return np.zeros(len(gpu) if rows is None else rows.size, dtype=bool)
        codes = col.cat.codes.to_numpy()
        return (codes if rows is None else codes[rows]) == cats.index(kind)
    values = col.to_numpy()
    return (values if rows is None else values[rows]) == kind


def merge_frames(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate frames of one table, keeping categoricals categorical, in start order."""
    from pandas.api.types import union_categoricals

    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    for col in frames[0].columns:
        if isinstance(frames[0][col].dtype, pd.CategoricalDtype) and not isinstance(df[col].dtype, pd.CategoricalDtype):
            parts = [pd.Categorical.from_codes(f[col].cat.codes.to_numpy(),
                                               categories=pd.Index(np.asarray(f[col].cat.categories, dtype=object), dtype=object))
                     for f in frames]
            df[col] = union_categoricals(parts)
    return df.sort_values("start", kind="stable", ignore_index=True) if "start" in df else df


def merge_traces(traces: list["Trace"], path: str) -> "Trace":
    """One trace from per-process captures on one clock (e.g. a directory of rocpd
    ``<pid>_results.db``): tables concatenated, device keys renumbered. Correlations
    stay per process, and every join is on (pid, correlation), so they cannot mix."""
    out = Trace(path=path, format=traces[0].format)
    gpus, devices, offset = [], [], 0
    for t in traces:
        g = t.gpu.copy()
        g["device"] = (g["device"].astype(np.int64) + offset).astype(np.int32)
        gpus.append(g)
        devices.append(t.devices)
        offset += len(t.devices)

    def cat(frames):
        frames = [f for f in frames if len(f)]
        return merge_frames(frames) if frames else None

    gpu = cat(gpus)
    if gpu is not None:
        for col, cats in (("kind", GPU_KINDS), ("collective", COLLECTIVE_OPS), ("copy_kind", COPY_KINDS)):
            gpu[col] = pd.Categorical(gpu[col].astype(object), categories=cats)
        out.gpu = gpu
    api = cat([t.api for t in traces])
    if api is not None:
        api["category"] = pd.Categorical(api["category"].astype(object), categories=API_CATEGORIES)
        out.api = api
    ranges = cat([t.ranges for t in traces])
    if ranges is not None:
        out.ranges = ranges
    out.devices = pd.concat(devices, ignore_index=True)
    out.processes = pd.concat([t.processes for t in traces], ignore_index=True).drop_duplicates("pid")
    out.meta = dict(traces[0].meta)
    out.meta.pop("cache_identity", None)  # the merge is not the first file: its metrics are not that file's
    out.meta["merged_files"] = [t.path for t in traces]
    out.meta["warnings"] = [w for t in traces for w in t.warnings]
    return out


def _fixed_categorical(col: pd.Series, categories) -> pd.Categorical:
    """A column as a categorical of the model's fixed categories (kept as is when it already is one)."""
    if isinstance(col.dtype, pd.CategoricalDtype) and list(col.cat.categories) == list(categories):
        return col.array
    return pd.Categorical(col.astype(object), categories=categories)


def finish_trace(trace: "Trace", gpu: pd.DataFrame, device_info=None, process_names: dict | None = None) -> None:
    """Shared last step of the parsers that build ``gpu`` as a plain frame with ``pid``
    and ``ordinal`` columns: devices keyed by (pid, ordinal), categoricals interned,
    rows in start order, processes listed.

    ``device_info(ordinal)`` returns the name/uuid/sm_count/memory_bytes it knows.
    """
    key = gpu["pid"].to_numpy(np.int64) * 65536 + gpu["ordinal"].to_numpy(np.int64)
    codes, uniq = pd.factorize(key, sort=True)
    rows = []
    for k in uniq:
        info = {"name": "unknown GPU", "uuid": "", "sm_count": -1, "memory_bytes": -1}
        info.update((device_info or (lambda o: {}))(int(k % 65536)) or {})
        rows.append({"pid": int(k // 65536), "ordinal": int(k % 65536), "gpu_index": int(k % 65536), **info})
    trace.devices = pd.DataFrame(rows) if rows else empty_devices()
    gpu = gpu.drop(columns="ordinal")
    gpu.insert(0, "device", codes.astype(np.int32))
    gpu["kind"] = _fixed_categorical(gpu["kind"], GPU_KINDS)
    if not isinstance(gpu["name"].dtype, pd.CategoricalDtype):
        gpu["name"] = gpu["name"].astype("category")
    gpu["collective"] = _fixed_categorical(gpu["collective"], COLLECTIVE_OPS)
    gpu["copy_kind"] = _fixed_categorical(gpu["copy_kind"], COPY_KINDS)
    trace.gpu = gpu[gpu_column_order()].sort_values("start", kind="stable", ignore_index=True)
    pids = distinct(trace.gpu["pid"].to_numpy(), trace.api["pid"].to_numpy())
    names = process_names or {}
    trace.processes = pd.DataFrame({"pid": pids.astype(np.int64),
                                    "name": [str(names.get(int(p), f"pid {int(p)}")) for p in pids]})
