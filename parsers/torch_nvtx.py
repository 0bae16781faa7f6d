"""PyTorch's operator ranges in NVTX -> the model's ``ops`` and ``op_kernels`` tables.

``torch.autograd.profiler.emit_nvtx`` (what ``nsys profile --pytorch=autograd-nvtx`` and
``--pytorch=autograd-shapes-nvtx`` turn on) pushes one NVTX range per operator call on the
calling thread. Its text (torch/csrc/profiler/util.cpp, ``getNvtxStr``) is::

    <op name>[, seq = <n>], op_id = <n>[, sizes = [[d, ...], [], ...]][, input_op_ids = [(op,out), ...]]

``seq`` is there when autograd records the op; ``sizes`` and ``input_op_ids`` only with
``record_shapes=True`` (``autograd-shapes-nvtx``). ``sizes`` has one entry per argument: a
tensor's dims, ``[]`` for anything else (a scalar, None, an undefined tensor), and a tensor
list flattened into one entry per tensor (``inputSizes(fn, /*flatten_list_enabled=*/true)``).
Neither data types nor scalar values are written.

Linking: a kernel's launch call (the runtime API row with its correlation id) runs on the
thread that pushed the ranges; the op that launched it is the innermost operator range
enclosing the call's start — the Kineto rule (a GPU event's External id is the innermost op on
the host stack). Graph launches are not linked: a replayed graph's kernels are not the work of
the op that happened to replay it.

Data types: where the ranges give none, an op's dtype is read from the names of the kernels it
launched, and only when they say one thing (``bf16``/``BFloat16``, ``half``/``f16``, ``float``
...; a conversion kernel naming two types says nothing). Ops whose arguments differ in type by
definition (an index, a mask, fp8 with fp32 scales) are never given one. An op without a dtype
keeps its shape with ``Input type`` null: its kernels' work is not measured, and the analysis
says so.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from tracetriage.model import empty_op_kernels, is_work_op
from tracetriage.parsers.graph_replays import object_categorical

# getNvtxStr's text; sizes: only integer lists, so json.loads reads them as written
OP_TEXT = re.compile(
    r"(?P<name>[^,]+), (?:seq = -?\d+, )?op_id = (?P<op_id>\d+)"
    r"(?:, sizes = (?P<sizes>\[(?:\[[\d, ]*\](?:, )?)*\]))?(?:, input_op_ids = \[.*\])?",
    re.S,
)
LAUNCHING = ("launch", "memcpy_async", "memcpy_sync", "memset")  # API categories that put work on the GPU

# the Kineto ``Input type`` written for a dtype read from kernel names (analyzers/opwork.py reads these)
KINETO_TYPE = {"bf16": "c10::BFloat16", "fp16": "c10::Half", "fp32": "float", "fp64": "double",
               "fp8": "c10::Float8_e4m3fn"}
# arguments of different types by definition: one dtype from the kernel names would be wrong
MIXED_TYPES = frozenset({"aten::index_select", "aten::embedding", "aten::gather", "aten::where",
                         "aten::masked_fill", "aten::masked_fill_", "aten::_scaled_mm"})

_FAMILIES = (
    ("fp8", re.compile(r"(?i)e4m3|e5m2|fp8|float8")),
    ("bf16", re.compile(r"(?i)bf16|bfloat16")),
    ("fp16", re.compile(r"(?i)(?<!b)fp16|(?<![bp])f16(?!\d)|(?<!b)float16|__half|half_t|\bhalf\b"
                        r"|(?<![a-z])h\d{3,5}gemm|hgemm")),
    ("fp32", re.compile(r"(?i)\bfloat\b|(?<!b)f32|fp32|tf32|sgemm")),
    ("fp64", re.compile(r"(?i)\bdouble\b|f64|fp64|dgemm")),
)
_REDUCED = ("fp8", "bf16", "fp16")
_CONVERTS = re.compile(r"(?i)copy|(?<!no)cast")  # a conversion (gpu_kernel_impl_nocast is not one)


def kernel_dtype(name: str) -> str | None:
    """The data type a kernel's name states, or None when it states none or more than one.

    A reduced-precision type beside ``float`` is the data with its fp32 accumulator
    (``BinaryFunctor<c10::BFloat16, ..., MulFunctor<float>>``, ``gemm_bf16bf16_bf16f32``),
    except in a copy or cast kernel, where two types mean a conversion."""
    found = {fam for fam, pat in _FAMILIES if pat.search(name)}
    reduced = found.intersection(_REDUCED)
    if len(reduced) > 1:
        return None
    if reduced:
        return None if len(found) > 1 and _CONVERTS.search(name) else reduced.pop()
    if len(found) == 1 and not re.search(r"(?i)(?<!no)cast", name):
        return found.pop()
    return None


def parse_texts(texts) -> pd.DataFrame:
    """One row per text: ``is_op`` (an emit_nvtx operator range), ``name``, ``op_id``, ``sizes``
    (the text of the sizes list, or None when the range carries none)."""
    rows = []
    for text in texts:
        m = OP_TEXT.fullmatch(text) if isinstance(text, str) and "op_id = " in text else None
        if m is None:
            rows.append((False, None, -1, None))
        else:
            rows.append((True, m.group("name"), int(m.group("op_id")), m.group("sizes")))
    return pd.DataFrame(rows, columns=["is_op", "name", "op_id", "sizes"])


def _parents(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Parent of each range among properly nested ranges sorted by (start, -end): the nearest
    earlier range that has not ended when this one ends (-1: none). One pass with a stack."""
    parent = np.full(start.size, -1, np.int64)
    stack: list[int] = []
    for i in range(start.size):  # per range (few next to kernels): no per-kernel Python loop
        s, e = start[i], end[i]
        while stack and end[stack[-1]] < e:
            stack.pop()
        if stack and start[stack[-1]] <= s:
            parent[i] = stack[-1]
        stack.append(i)
    return parent


def innermost(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the innermost range (sorted by (start, -end), properly nested) that encloses
    each time in ``t``; -1 where none does. The innermost enclosing range is the latest-started
    range before t or one of its ancestors: walk up from there, all calls at once."""
    if not start.size or not t.size:
        return np.full(t.size, -1, np.int64)
    parent = _parents(start, end)
    at = np.searchsorted(start, t, side="right") - 1
    for _ in range(start.size):
        out = (at >= 0) & (end[np.maximum(at, 0)] < t)
        if not out.any():
            break
        at[out] = parent[at[out]]
    return at


def link(ranges: pd.DataFrame, api: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(ops, op_kernels, counts) from the NVTX ranges and the runtime API calls of one trace.

    ``ops``: one row per shaped operator range of a kind with a work formula that launched GPU
    work (pid, start, end, name, shape ``[sizes, None, None]`` as compact JSON — the dtype is
    filled in by :func:`set_dtypes` — ext_id = the op_id); ``op_kernels``: pid, correlation and
    op row of each launch call inside one. ``counts``: operator ranges, and those with sizes."""
    empty = (pd.DataFrame({"pid": np.empty(0, np.int64), "start": np.empty(0, np.int64),
                           "end": np.empty(0, np.int64), "name": pd.Categorical([]), "shape": pd.Categorical([]),
                           "ext_id": np.empty(0, np.int64)}),
             empty_op_kernels())
    if ranges is None or not len(ranges):
        return (*empty, {"op_ranges": 0, "with_shapes": 0})
    cats = np.asarray(ranges["name"].cat.categories, dtype=object)
    parsed = parse_texts(cats)
    codes = np.asarray(ranges["name"].cat.codes)
    is_op = np.append(parsed["is_op"].to_numpy(), False)[codes]  # code -1 (no text) lands on False
    has_sizes = np.append(parsed["sizes"].notna().to_numpy(), False)[codes]
    counts = {"op_ranges": int(is_op.sum()), "with_shapes": int((is_op & has_sizes).sum())}
    if not counts["with_shapes"] or not len(api):
        return (*empty, counts)
    wanted = np.append(parsed["is_op"].to_numpy() & parsed["sizes"].notna().to_numpy()
                       & parsed["name"].map(lambda name: isinstance(name, str) and is_work_op(name)).to_numpy(bool), False)
    ops_r = ranges[is_op]
    calls = api[api["category"].isin(LAUNCHING).to_numpy() & (api["correlation"].to_numpy() >= 0)]
    r_pid, r_tid = ops_r["pid"].to_numpy(np.int64), ops_r["tid"].to_numpy(np.int64)
    a_pid, a_tid = calls["pid"].to_numpy(np.int64), calls["tid"].to_numpy(np.int64)
    hit_range, hit_call = [], []
    for pid, tid in set(zip(r_pid.tolist(), r_tid.tolist())):  # per thread: a handful
        rows = np.flatnonzero((r_pid == pid) & (r_tid == tid))
        s, e = ops_r["start"].to_numpy(np.int64)[rows], ops_r["end"].to_numpy(np.int64)[rows]
        order = np.lexsort((-e, s))
        rows, s, e = rows[order], s[order], e[order]
        on = np.flatnonzero((a_pid == pid) & (a_tid == tid))
        if not on.size:
            continue
        at = innermost(s, e, calls["start"].to_numpy(np.int64)[on])
        inside = at >= 0
        hit_range.append(rows[at[inside]])
        hit_call.append(on[inside])
    if not hit_range:
        return (*empty, counts)
    hit_range, hit_call = np.concatenate(hit_range), np.concatenate(hit_call)
    op_codes = np.asarray(ops_r["name"].cat.codes)[hit_range]
    keep = wanted[op_codes]
    hit_range, hit_call, op_codes = hit_range[keep], hit_call[keep], op_codes[keep]
    used, op = np.unique(hit_range, return_inverse=True)
    if not used.size:
        return (*empty, counts)
    used_codes = np.asarray(ops_r["name"].cat.codes)[used]
    names = parsed["name"].to_numpy()[used_codes]
    shape_of: dict[str, str] = {}  # per distinct sizes text (many calls share a shape)
    for c in np.unique(used_codes):
        text = parsed["sizes"].iat[c]
        if text not in shape_of:
            shape_of[text] = json.dumps([json.loads(text), None, None], separators=(",", ":"))
    shapes = [shape_of[parsed["sizes"].iat[c]] for c in used_codes]
    ops = pd.DataFrame({
        "pid": ops_r["pid"].to_numpy(np.int64)[used], "start": ops_r["start"].to_numpy(np.int64)[used],
        "end": ops_r["end"].to_numpy(np.int64)[used],
        "name": object_categorical(names), "shape": object_categorical(shapes),
        "ext_id": parsed["op_id"].to_numpy(np.int64)[used_codes],
    })
    op_kernels = pd.DataFrame({"pid": a_pid[hit_call], "correlation": calls["correlation"].to_numpy(np.int64)[hit_call],
                               "nth": np.full(hit_call.size, -1, np.int64), "op": op.astype(np.int64)})
    return ops, op_kernels, counts


def set_dtypes(ops: pd.DataFrame, op_kernels: pd.DataFrame, launched: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The ops with each one's ``Input type`` filled from the names of the kernels it launched
    where they state one dtype (see :func:`kernel_dtype`); (ops, how many got none).
    ``launched``: pid, correlation and name of the GPU events the ops' launch calls made."""
    if ops.empty:
        return ops, 0
    m = op_kernels.merge(launched, on=["pid", "correlation"], how="inner")
    names = pd.unique(m["name"].astype(object)) if len(m) else []
    dtype_of = {n: kernel_dtype(str(n)) for n in names}  # once per distinct kernel name
    m = m.assign(dtype=m["name"].astype(object).map(dtype_of))
    known = m.dropna(subset=["dtype"]).groupby("op")["dtype"].agg(lambda d: d.iat[0] if d.nunique() == 1 else None)
    per_op = np.full(len(ops), None, dtype=object)
    per_op[known.index.to_numpy()] = known.to_numpy()
    names_of = ops["name"].astype(object).to_numpy()
    shapes = ops["shape"].astype(object).to_numpy()
    out = []
    untyped = 0
    cache: dict = {}
    for name, shape, dt in zip(names_of, shapes, per_op):  # per op range (few), not per kernel
        if dt is None or name in MIXED_TYPES:
            untyped += 1
            out.append(shape)
            continue
        key = (shape, dt)
        if key not in cache:
            sizes = json.loads(shape)[0]
            types = [KINETO_TYPE[dt] if d else "" for d in sizes]
            cache[key] = json.dumps([sizes, types, None], separators=(",", ":"))
        out.append(cache[key])
    return ops.assign(shape=object_categorical(out)), untyped
