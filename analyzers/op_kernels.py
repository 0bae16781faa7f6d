"""Which shaped op launched each kernel, and the work of each op (the inputs of efficiency.measure).

* **work per op**: FLOPs and bytes from the op's recorded shapes (:mod:`opwork`), each distinct
  (name, shape) evaluated once (:func:`op_works`).
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

from tracetriage.analyzers import opwork
from tracetriage.model import Trace, cat_codes, is_kind

_GEMM_NAME = re.compile(r"(?i)gemm|cijk_|matmul|cutlass|xmma|cublas|hipblaslt|nvjet|wgmma|_mm_|splitk")
_ATTN_NAME = re.compile(r"(?i)flash|fmha|attn|attention|paged|mla_|_mla")
KERNEL_SLICE = 1 << 18  # rows per slice: temporaries under the 4 MiB mmap threshold (tracetriage/memory.py)
CLASS_COUNT = len(opwork.CLASSES)


def kernel_class(name: str) -> str:
    """A kernel's class from its name alone (for kernels no shaped op launched)."""
    if _ATTN_NAME.search(name):
        return "attention"
    if _GEMM_NAME.search(name):
        return "gemm"
    return "memory_bound"


@dataclass(frozen=True, slots=True)
class OpWork:
    """Per op row of ``trace.ops``: its class code (index in opwork.CLASSES, -1: no formula), FLOPs,
    bytes, weight bytes, tokens (GEMM rows, -1 unknown), dtype, and whether its shape came without
    data types (NVTX operator ranges record none: an op whose kernels' names did not tell it)."""

    kind: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    weight_bytes: np.ndarray
    tokens: np.ndarray
    dtype: np.ndarray
    untyped: np.ndarray


def _no_work(count: int) -> OpWork:
    """The work of ``count`` ops not evaluated yet: no formula, nothing counted."""
    return OpWork(kind=np.full(count, -1, np.int8), flops=np.zeros(count), bytes=np.zeros(count),
                  weight_bytes=np.zeros(count), tokens=np.full(count, -1, np.int64), dtype=np.empty(count, dtype=object),
                  untyped=np.zeros(count, bool))


def op_works(ops: pd.DataFrame) -> OpWork:
    """The :class:`OpWork` of every op row: each distinct (name, shape) evaluated once, then spread
    to its rows by one gather."""
    if not len(ops):
        return _no_work(0)
    key = ops["name"].cat.codes.to_numpy().astype(np.int64) * (len(ops["shape"].cat.categories) + 1) \
        + ops["shape"].cat.codes.to_numpy()
    unique_keys, first_rows, row_of = np.unique(key, return_index=True, return_inverse=True)
    work = _no_work(len(unique_keys))
    names, shapes = ops["name"].to_numpy(), ops["shape"].to_numpy()
    for j, row in enumerate(first_rows):
        try:
            dims, types, concrete = json.loads(shapes[row])
        except (ValueError, TypeError):
            continue
        if types is None:
            work.untyped[j] = opwork.has_formula(str(names[row]))
            continue
        counted = opwork.work(str(names[row]), dims, types, concrete)
        if counted is None or not np.isfinite(counted.flops) or not np.isfinite(counted.bytes):
            continue
        work.kind[j] = opwork.CLASSES.index(counted.kind)
        work.flops[j], work.bytes[j], work.weight_bytes[j] = counted.flops, counted.bytes, counted.weight_bytes
        work.tokens[j] = -1 if counted.tokens is None else counted.tokens
        work.dtype[j] = counted.dtype
    return OpWork(kind=work.kind[row_of], flops=work.flops[row_of], bytes=work.bytes[row_of],
                  weight_bytes=work.weight_bytes[row_of], tokens=work.tokens[row_of], dtype=work.dtype[row_of],
                  untyped=work.untyped[row_of])


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
    shaped op launched (``unmeasured_by_class``, collectives apart) and the part of it launched by
    ops whose shapes came without data types (``untyped_by_class``); the non-collective kernel ns;
    and the shaped op (row of ``trace.ops``) and ns of each kernel one launched."""

    ns_by_device: np.ndarray
    unmeasured_by_class: np.ndarray
    untyped_by_class: np.ndarray
    kernel_ns: float
    op_of_kernel: np.ndarray
    kernel_dur: np.ndarray


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
    kernel_ns = 0.0
    ops, durations = [np.empty(0, np.int64)], [np.empty(0)]
    for first in range(0, len(gpu), KERNEL_SLICE):
        slice_start = start[first:first + KERNEL_SLICE]
        rows = first + np.flatnonzero(is_kernel[first:first + KERNEL_SLICE] & (slice_start >= lo) & (slice_start < hi))
        if not rows.size:
            continue
        dur = (end[rows] - start[rows]).astype(np.float64)
        per_device = np.bincount(device[rows], weights=dur, minlength=len(ns_by_device))
        if per_device.size > ns_by_device.size:
            ns_by_device = np.append(ns_by_device, np.zeros(per_device.size - ns_by_device.size))
        ns_by_device[:per_device.size] += per_device
        op = np.full(rows.size, -1, np.int64)  # kernels -> the shaped op that launched them
        if len(launches):
            merged = pd.DataFrame({"pid": pid[rows], "correlation": correlation[rows]}).merge(
                launches, how="left", on=["pid", "correlation"])
            op = merged["op"].fillna(-1).to_numpy().astype(np.int64)
        if tied_rows.size:
            at = np.clip(np.searchsorted(tied_rows, rows), 0, tied_rows.size - 1)
            hit = tied_rows[at] == rows
            op[hit] = tied_ops[at[hit]]
        shaped = op >= 0
        shaped[shaped] = work.kind[op[shaped]] >= 0
        collective = is_collective[rows]
        rest = ~shaped & ~collective
        unmeasured_by_class += np.bincount(class_of[codes[rows[rest]]], weights=dur[rest], minlength=CLASS_COUNT)
        no_type = rest & (op >= 0)
        no_type[no_type] = work.untyped[op[no_type]]
        if no_type.any():
            untyped_by_class += np.bincount(class_of[codes[rows[no_type]]], weights=dur[no_type], minlength=CLASS_COUNT)
        kernel_ns += float(dur[~collective].sum())
        if shaped.any():
            ops.append(op[shaped])
            durations.append(dur[shaped])
    return KernelTime(ns_by_device=ns_by_device, unmeasured_by_class=unmeasured_by_class, untyped_by_class=untyped_by_class,
                      kernel_ns=kernel_ns, op_of_kernel=np.concatenate(ops), kernel_dur=np.concatenate(durations))
