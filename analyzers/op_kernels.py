"""Which shaped op launched each kernel, and the work of each op (the inputs of efficiency.measure).

* **work per op**: FLOPs and bytes from the op's recorded shapes (:mod:`opwork`; the serving
  kernels' in :mod:`serving_work`), each distinct (name, shape, step) evaluated once (:func:`op_works`).
* **step of an op**: the annotated engine step (its sequence-length aggregates) an attention op ran
  in: the innermost step range of its process around the op, or, for an op tied to a graph
  replay, around the replay's launch call (:func:`op_steps`).
* **op of a kernel**: the op whose launch shares the kernel's (pid, correlation) (External id, or
  the launch calls inside its NVTX range), or, for a kernel replayed from a CUDA/HIP graph, the op
  that launched the n-th kernel of that replay at capture (:func:`replayed_ops`).
* **kernel class** from the name alone, for the kernels no shaped op launched (:func:`kernel_class`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracetriage.analyzers import opwork, serving_work
from tracetriage.analyzers.serving_work import StepLengths
from tracetriage.model import Trace, cat_codes, is_kind

_GEMM_NAME = re.compile(r"(?i)gemm|cijk_|matmul|cutlass|xmma|cublas|hipblaslt|nvjet|wgmma|_mm_|splitk")
_ATTN_NAME = re.compile(r"(?i)flash|fmha|attn|attention|paged|mla_|_mla")
# Convolution engines: math kernels like GEMMs (implicit GEMM, Winograd, FFT or direct), held against the compute
# roof. cuDNN: its cudnn::cnn:: and cudnn::detail:: engines (implicit / explicit / precomputed_convolve_sgemm,
# wgrad_alg*_engine, dgrad*_engine), the scudnn / h1688cudnn families, xmma and CUTLASS fprop / dgrad / wgrad,
# its FFT (fft2d_r2c_32x32 ...) and Winograd kernels; MIOpen: MIOpenConv*, miopenSp3AsmConv*, igemm_fwd/bwd/wrw_gtc*,
# naive_conv_*, gridwise_convolution*; CK: kernel_grouped_conv_*, DeviceConvNd*, GroupedConvolution*. A "conv" is
# followed by an upper-case letter, a digit, an underscore or the name's end (conv2d, ConvUni, conv_fwd), so
# convert / converter kernels stay out; cuDNN's batch-norm, activation and layout kernels (cudnn::bn_*,
# cudnn::ops::nchwToNhwc) name none of these and stay memory-bound.
_CONV_NAME = re.compile(r"cudnn::cnn::|(?i:convolve|convolution|scudnn|[hsi]\d{3,5}cudnn|[dw]grad|fprop|winograd"
                        r"|fft[123]d_[rc]2[rc]|igemm_(?:fwd|bwd|wrw))|(?i:conv)(?!ERT|ERS)(?=[A-Z0-9_]|$)")
CLASS_WORDS = {"gemm": "GEMMs", "attention": "attention", "memory_bound": "memory-bound kernels"}
KERNEL_SLICE = 1 << 18  # rows per slice: temporaries under the 4 MiB mmap threshold (tracetriage/memory.py)
CLASS_COUNT = len(opwork.CLASSES)


def is_convolution(name: str) -> bool:
    """Whether a kernel's name is a convolution engine's (``_CONV_NAME``)."""
    return bool(_CONV_NAME.search(name))


def kernel_class(name: str) -> str:
    """A kernel's class from its name alone (for kernels no shaped op launched): a convolution is a math
    kernel, classed with the GEMMs (the compute roof), not with the memory-bound kernels."""
    if _ATTN_NAME.search(name):
        return "attention"
    if _GEMM_NAME.search(name) or _CONV_NAME.search(name):
        return "gemm"
    return "memory_bound"


def class_words(kind: str, conv_ns: float = 0.0) -> str:
    """A class in words: the gemm class is "GEMMs and convolutions" where convolution kernels hold some of
    its time (``conv_ns``, KernelTime.conv_ns), so a ResNet's abstention does not call its convolutions GEMMs."""
    if kind == "gemm" and conv_ns > 0:
        return "GEMMs and convolutions"
    return CLASS_WORDS.get(kind, kind)


@dataclass(frozen=True, slots=True)
class OpWork:
    """Per op row of ``trace.ops``: its class code (index in opwork.CLASSES, -1: no formula), FLOPs,
    bytes, weight bytes, tokens (GEMM rows, -1 unknown), dtype, whether its shape came without
    data types (NVTX operator ranges record none: an op whose kernels' names did not tell it), and
    whether its formula needs the step's sequence lengths and no annotated step gave them."""

    kind: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    weight_bytes: np.ndarray
    tokens: np.ndarray
    dtype: np.ndarray
    untyped: np.ndarray
    no_lengths: np.ndarray


def _no_work(count: int) -> OpWork:
    """The work of ``count`` ops not evaluated yet: no formula, nothing counted."""
    return OpWork(kind=np.full(count, -1, np.int8), flops=np.zeros(count), bytes=np.zeros(count),
                  weight_bytes=np.zeros(count), tokens=np.full(count, -1, np.int64), dtype=np.empty(count, dtype=object),
                  untyped=np.zeros(count, bool), no_lengths=np.zeros(count, bool))


def has_formula(name: str) -> bool:
    """Whether an op of this name may get a work formula (:mod:`opwork` or :mod:`serving_work`)."""
    return opwork.has_formula(name) or serving_work.handles(name)


def op_works(ops: pd.DataFrame, steps: tuple[np.ndarray, list[StepLengths]] | None = None) -> OpWork:
    """The :class:`OpWork` of every op row: each distinct (name, shape, step) evaluated once, then
    spread to its rows by one gather. ``steps``: :func:`op_steps` (None: no step known)."""
    if not len(ops):
        return _no_work(0)
    step_of, step_list = steps if steps is not None else (np.full(len(ops), -1, np.int64), [])
    key = (ops["name"].cat.codes.to_numpy().astype(np.int64) * (len(ops["shape"].cat.categories) + 1)
           + ops["shape"].cat.codes.to_numpy()) * (len(step_list) + 1) + step_of + 1
    unique_keys, first_rows, row_of = np.unique(key, return_index=True, return_inverse=True)
    work = _no_work(len(unique_keys))
    names, shapes = ops["name"].to_numpy(), ops["shape"].to_numpy()
    for j, row in enumerate(first_rows):
        try:
            record = json.loads(shapes[row])
            dims, types, concrete = record[:3]
        except (ValueError, TypeError):
            continue
        name = str(names[row])
        if types is None:
            work.untyped[j] = has_formula(name)
            continue
        if serving_work.handles(name):
            step = step_list[step_of[row]] if step_of[row] >= 0 else None
            counted = serving_work.work(name, record, step)
            work.no_lengths[j] = counted is None and step is None and serving_work.needs_step(name)
        else:
            counted = opwork.work(name, dims, types, concrete)
        if counted is None or not np.isfinite(counted.flops) or not np.isfinite(counted.bytes):
            continue
        work.kind[j] = opwork.CLASSES.index(counted.kind)
        work.flops[j], work.bytes[j], work.weight_bytes[j] = counted.flops, counted.bytes, counted.weight_bytes
        work.tokens[j] = -1 if counted.tokens is None else counted.tokens
        work.dtype[j] = counted.dtype
    return OpWork(kind=work.kind[row_of], flops=work.flops[row_of], bytes=work.bytes[row_of],
                  weight_bytes=work.weight_bytes[row_of], tokens=work.tokens[row_of], dtype=work.dtype[row_of],
                  untyped=work.untyped[row_of], no_lengths=work.no_lengths[row_of])


def op_steps(trace: Trace) -> tuple[np.ndarray, list[StepLengths]]:
    """(per op row the index into the list of the annotated step it ran in, -1 none; the steps'
    :class:`StepLengths`), for the ops whose work needs them (:func:`serving_work.needs_step`). An
    eager op ran in the innermost step range of its process around its start; an op tied to a graph
    replay, in the one around the replay's launch call (its own times are the capture's)."""
    ops, ranges = trace.ops, trace.ranges
    step_of = np.full(len(ops), -1, np.int64)
    if not len(ops) or not len(ranges):
        return step_of, []
    needs = np.append([serving_work.needs_step(str(name)) for name in ops["name"].cat.categories.tolist()], False)
    wanted = np.flatnonzero(needs[ops["name"].cat.codes.to_numpy()])
    if not wanted.size:
        return step_of, []
    parsed = [serving_work.step_lengths(str(name)) for name in ranges["name"].cat.categories.tolist()]
    steps = [lengths for lengths in parsed if lengths is not None]
    if not steps:
        return step_of, []
    index_of = np.append(np.cumsum([lengths is not None for lengths in parsed]) - 1, -1)
    index_of[:-1][[lengths is None for lengths in parsed]] = -1
    code = index_of[ranges["name"].cat.codes.to_numpy()]
    kept = np.flatnonzero(code >= 0)
    when = ops["start"].to_numpy(np.int64).copy()
    tied = trace.op_kernels[trace.op_kernels["nth"].to_numpy() >= 0].drop_duplicates("op")
    if len(tied) and len(trace.api):
        calls = trace.api.drop_duplicates(["pid", "correlation"])
        launched = tied.merge(calls[["pid", "correlation", "start"]], on=["pid", "correlation"], how="inner")
        when[launched["op"].to_numpy(np.int64)] = launched["start"].to_numpy(np.int64)
    pid = ops["pid"].to_numpy(np.int64)
    r_pid, r_start, r_end = (ranges[column].to_numpy(np.int64)[kept] for column in ("pid", "start", "end"))
    for process in np.unique(pid[wanted]):
        mine = np.flatnonzero(r_pid == process)
        if not mine.size:
            continue
        order = mine[np.argsort(r_start[mine], kind="stable")]
        rows = wanted[pid[wanted] == process]
        at = np.searchsorted(r_start[order], when[rows], side="right") - 1
        inside = (at >= 0) & (r_end[order][np.clip(at, 0, None)] > when[rows])
        step_of[rows[inside]] = code[kept][order][at[inside]]
    return step_of, steps


def replayed_ops(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(gpu rows, op rows) of the graph-replayed kernels tied to a captured op: ``op_kernels`` rows
    with ``nth`` >= 0 name the n-th kernel, in start order, of the replay with that correlation."""
    op_kernels = trace.op_kernels
    empty = (np.empty(0, np.int64), np.empty(0, np.int64))
    if not (op_kernels["nth"].to_numpy() >= 0).any():
        return empty
    op_kernels = op_kernels[op_kernels["nth"].to_numpy() >= 0]
    gpu = trace.gpu
    key = op_kernels["pid"].to_numpy(np.int64) * (1 << 32) + op_kernels["correlation"].to_numpy(np.int64)
    rows = np.flatnonzero(is_kind(gpu, "kernel") & gpu["in_graph"].to_numpy(bool))
    gpu_key = gpu["pid"].to_numpy(np.int64)[rows] * (1 << 32) + gpu["correlation"].to_numpy(np.int64)[rows]
    keep = np.isin(gpu_key, key)
    rows, gpu_key = rows[keep], gpu_key[keep]
    if not rows.size:
        return empty
    order = np.argsort(gpu_key, kind="stable")  # rows are in start order: stable keeps it within a replay
    rows, gpu_key = rows[order], gpu_key[order]
    first = np.r_[0, np.flatnonzero(np.diff(gpu_key)) + 1]
    nth = np.arange(rows.size) - np.repeat(first, np.diff(np.r_[first, rows.size]))
    matched = pd.DataFrame({"key": gpu_key, "nth": nth, "row": rows}).merge(
        pd.DataFrame({"key": key, "nth": op_kernels["nth"].to_numpy(np.int64), "op": op_kernels["op"].to_numpy(np.int64)}),
        on=["key", "nth"], how="inner")
    order = np.argsort(matched["row"].to_numpy())
    return matched["row"].to_numpy()[order], matched["op"].to_numpy()[order]


@dataclass(frozen=True, slots=True)
class KernelTime:
    """:func:`kernel_time` of one trace's window: kernel ns per device; per class, the ns of kernels no
    shaped op launched (``unmeasured_by_class``, collectives apart), the part of it launched by
    ops whose shapes came without data types (``untyped_by_class``) and the part launched by ops
    whose formula needs the step's sequence lengths that no annotated step gave (``no_lengths_by_class``);
    the non-collective kernel ns; the ns of convolution kernels (by name: :func:`is_convolution`, all in the gemm
    class) and the shaped op (row of ``trace.ops``) and ns of each kernel one launched."""

    ns_by_device: np.ndarray
    unmeasured_by_class: np.ndarray
    untyped_by_class: np.ndarray
    no_lengths_by_class: np.ndarray
    kernel_ns: float
    op_of_kernel: np.ndarray
    kernel_dur: np.ndarray
    conv_ns: float = 0.0


def kernel_time(trace: Trace, lo: int, hi: int, work: OpWork, tied: tuple[np.ndarray, np.ndarray]) -> KernelTime:
    """One pass over the kernels starting in [lo, hi), a slice of rows at a time (a column-sized
    temporary per step was the first read's peak at 10M kernels). ``tied``: :func:`replayed_ops`."""
    gpu = trace.gpu
    start, end, device = gpu["start"].to_numpy(), gpu["end"].to_numpy(), gpu["device"].to_numpy()
    is_kernel = is_kind(gpu, "kernel")
    is_collective = gpu["collective"].notna().to_numpy()
    # classed once per distinct name (a regex per kernel row was 7 s at 2M kernels); code -1 (no name) last
    codes, categories = cat_codes(gpu["name"])
    class_of = np.array([opwork.CLASSES.index(kernel_class(str(c))) for c in [*categories, "nan"]], dtype=np.int8)
    conv_of = np.array([is_convolution(str(c)) for c in categories] + [False], bool)
    any_conv = bool(conv_of.any())
    launches = trace.op_kernels
    tied_rows, tied_ops = tied  # graph-replayed kernels tied to their captured ops
    if len(launches):
        launches = launches[launches["nth"].to_numpy() < 0]
        # one op per launch: one row per kernel
        launches = launches.drop_duplicates(["pid", "correlation"])[["pid", "correlation", "op"]]
        pid, correlation = gpu["pid"].to_numpy(), gpu["correlation"].to_numpy()
    ns_by_device = np.zeros(len(trace.devices))
    unmeasured_by_class = np.zeros(CLASS_COUNT)
    untyped_by_class = np.zeros(CLASS_COUNT)
    no_lengths_by_class = np.zeros(CLASS_COUNT)
    kernel_ns = conv_ns = 0.0
    ops, durations = [np.empty(0, np.int64)], [np.empty(0)]
    for first in range(0, len(gpu), KERNEL_SLICE):
        slice_start = start[first:first + KERNEL_SLICE]
        wanted = is_kernel[first:first + KERNEL_SLICE] & (slice_start >= lo) & (slice_start < hi)
        whole = bool(wanted.all())  # every row of the slice (the usual case): its columns as views, not gathers
        rows = np.arange(first, first + wanted.size) if whole else first + np.flatnonzero(wanted)
        if not rows.size:
            continue

        def at_rows(values: np.ndarray, whole=whole, rows=rows, first=first) -> np.ndarray:
            return values[first:first + rows.size] if whole else values[rows]

        dur = (at_rows(end) - at_rows(start)).astype(np.float64)
        per_device = np.bincount(at_rows(device), weights=dur, minlength=len(ns_by_device))
        if per_device.size > ns_by_device.size:
            ns_by_device = np.append(ns_by_device, np.zeros(per_device.size - ns_by_device.size))
        ns_by_device[:per_device.size] += per_device
        op = np.full(rows.size, -1, np.int64)  # kernels -> the shaped op that launched them
        if len(launches):
            merged = pd.DataFrame({"pid": at_rows(pid), "correlation": at_rows(correlation)}).merge(
                launches, how="left", on=["pid", "correlation"])
            op = merged["op"].fillna(-1).to_numpy().astype(np.int64)
        if tied_rows.size:
            at = np.clip(np.searchsorted(tied_rows, rows), 0, tied_rows.size - 1)
            hit = tied_rows[at] == rows
            op[hit] = tied_ops[at[hit]]
        shaped = op >= 0
        shaped[shaped] = work.kind[op[shaped]] >= 0
        collective = at_rows(is_collective)
        rest = ~shaped & ~collective
        row_codes = at_rows(codes)
        unmeasured_by_class += np.bincount(class_of[row_codes[rest]], weights=dur[rest], minlength=CLASS_COUNT)
        no_type = rest & (op >= 0)
        no_type[no_type] = work.untyped[op[no_type]]
        if no_type.any():
            untyped_by_class += np.bincount(class_of[row_codes[no_type]], weights=dur[no_type], minlength=CLASS_COUNT)
        no_lengths = rest & (op >= 0)
        no_lengths[no_lengths] = work.no_lengths[op[no_lengths]]
        if no_lengths.any():
            no_lengths_by_class += np.bincount(class_of[row_codes[no_lengths]], weights=dur[no_lengths],
                                               minlength=CLASS_COUNT)
        kernel_ns += float(dur[~collective].sum())
        if any_conv:
            conv_ns += float(dur[conv_of[row_codes] & ~collective].sum())
        if shaped.any():
            ops.append(op[shaped])
            durations.append(dur[shaped])
    return KernelTime(ns_by_device=ns_by_device, unmeasured_by_class=unmeasured_by_class, untyped_by_class=untyped_by_class,
                      no_lengths_by_class=no_lengths_by_class, kernel_ns=kernel_ns, op_of_kernel=np.concatenate(ops),
                      kernel_dur=np.concatenate(durations), conv_ns=conv_ns)
