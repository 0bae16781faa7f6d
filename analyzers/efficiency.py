"""Busy is not fast: achieved FLOP/s and bytes/s against the device's roofline.

Definitions (every rate is work over the GPU time of the kernels that did it):

* **device**: the capture's device name (Kineto ``deviceProperties``, nsys ``TARGET_INFO_GPU``,
  rocpd agents) matched against ``devices.toml`` (peak dense FLOP/s per data type, memory
  bandwidth, each with its datasheet). An unknown device is reported as such: achieved rates are
  still given, the % of roofline is not.
* **work per op**: FLOPs and bytes from the op's recorded shapes (:mod:`opwork`: Kineto's
  ``Input Dims``/``Input type``, or the ``sizes`` of nsys's PyTorch operator NVTX ranges with the
  dtype read from the kernel names, parsers/torch_nvtx.py); the op's time is the summed duration of
  the kernels it launched (External id, or the launch calls inside its NVTX range -> correlation)
  that start in the window. Kernels without such an op (graph replays, custom ops, kernels of ops
  outside the profiled CPU window) are *not measured*, counted by class from their names; so are
  those of ops whose dtype is unknown, apart ("without dtype"). Kernels replayed from a CUDA/HIP
  graph are tied to the ops that launched them at capture where the trace (or another trace of the
  case, of the same process) recorded that capture (parsers/graph_replays.py); the replayed kernel
  time left untied is reported per trace with the reason.
* **class**: gemm, attention, memory_bound (elementwise, norms, copies, reductions).
  achieved_tflops = FLOPs / time; achieved_gbps = bytes / time; intensity = FLOPs / bytes.
  The roofline time of an op is max(FLOPs / peak(dtype), bytes / bandwidth); a class's
  ``pct_of_roofline`` = sum of its ops' roofline times / their measured time x 100 (100% = at
  the datasheet bound; the TraceLens "Pct Roofline" definition). ``bound`` is compute when the
  ops' compute times outweigh their memory times, else memory.
* **decode bandwidth floor**: when the GEMMs are decode-shaped (time-weighted median rows at
  most ``DECODE_MAX_TOKENS``) and steps are known, the bytes a step must read are the weights
  (each GEMM's B operand) plus the KV cache read by attention, per step; floor = bytes /
  bandwidth; ``pct_of_floor`` = floor / measured step p50 x 100. Only given when the GEMM time
  is (almost) all measured: weights read inside unmeasured kernels would lower the floor.

Caveats: kernel times are summed, not unioned (overlapping kernels of one class on two streams
count twice, lowering the rate); datasheet peaks are boost-clock numbers no kernel sustains, so
80-90% is excellent; a trace with several devices is pooled (Kineto writes one per rank).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

from tracetriage.analyzers import opwork
from tracetriage.analyzers.evidence import plural
from tracetriage.analyzers.metrics import Efficiency, TraceMetrics
from tracetriage.model import Trace, cat_codes, is_kind

DEVICES: dict[str, dict] = tomllib.loads(Path(__file__).with_name("devices.toml").read_text(encoding="utf-8"))

# name: (value, why) — merged into the rules' THRESHOLDS table
THRESHOLDS = {
    "roofline_min_pct": (50.0, "a class below half of its roofline bound leaves 2x on the table; tuned GEMMs reach "
                               "60-80% of the dense datasheet peak and streaming kernels 70-90% of the bandwidth"),
    "roofline_busy_min_pct": (50.0, "efficiency is the lever only when the GPU computes most of the window; "
                                    "below half busy the idle time is the larger one"),
    "roofline_min_measured_share": (0.5, "shapes must cover at least half of the dominant class's kernel time to "
                                         "judge its efficiency"),
    "decode_floor_min_pct": (50.0, "a decode step slower than twice the time needed to stream its weights and KV "
                                   "cache once is not bandwidth-bound: launch gaps, small kernels or unfused ops dominate"),
    "decode_max_tokens": (64, "decode-shaped: one new token per sequence, so a GEMM's rows are the batch's sequences, a "
                              "handful to a few dozen per GPU; at most 64 rows keeps its intensity (~M FLOP/byte in "
                              "bf16) under a quarter of the H100/MI300X ridge point (~300 FLOP/byte): it streams its "
                              "weights. A pass of 100+ tokens (BERT's 141-token GEMMs, a prefill chunk) is not decode"),
    "decode_min_measured_share": (0.9, "the weights read per step come from the GEMM shapes: 90% of GEMM time must "
                                       "be measured, else the floor is too low"),
}

DECODE_MAX_TOKENS = THRESHOLDS["decode_max_tokens"][0]
CLASS_WORDS = {"gemm": "GEMMs", "attention": "attention", "memory_bound": "memory-bound kernels"}
DTYPE_WORDS = {"bf16": "BF16", "fp16": "FP16", "fp32": "FP32", "tf32": "TF32", "fp8": "FP8", "int8": "INT8", "fp64": "FP64"}
# the peak an op is held against when the device lacks its own dtype's (fp8 on an A100 runs as bf16)
DTYPE_FALLBACK = {"fp8": "bf16", "int8": "bf16", "bf16": "fp16", "fp16": "bf16", "tf32": "fp32", "fp64": "fp32",
                  "uint8": "int8", "int16": "fp32", "int32": "fp32", "int64": "fp32", "bool": "fp32"}

_GEMM_NAME = re.compile(r"(?i)gemm|cijk_|matmul|cutlass|xmma|cublas|hipblaslt|nvjet|wgmma|_mm_|splitk")
_ATTN_NAME = re.compile(r"(?i)flash|fmha|attn|attention|paged|mla_|_mla")


def kernel_class(name: str) -> str:
    """A kernel's class from its name alone (for kernels no shaped op launched)."""
    if _ATTN_NAME.search(name):
        return "attention"
    if _GEMM_NAME.search(name):
        return "gemm"
    return "memory_bound"


def match_device(name: str, memory_bytes: int = -1, sm_count: int = -1) -> tuple[str, dict] | None:
    """(key, entry) of devices.toml for a capture's device, or None when the table does not know it."""
    gib = memory_bytes / 2**30 if memory_bytes and memory_bytes > 0 else None
    name = (name or "").strip()
    generic = not name or name.lower() in ("unknown gpu", "amd radeon graphics")
    for key, entry in DEVICES.items():
        if not generic and any(re.search(p, name, re.I) for p in entry["names"]):
            lo, hi = entry.get("memory_gib", [None, None])
            if lo is None or (gib is not None and lo <= gib <= hi):
                return key, entry
        props = entry.get("props")
        if generic and props and sm_count == props["sm_count"] and gib is not None \
                and props["memory_gib"][0] <= gib <= props["memory_gib"][1]:
            return key, entry
    return None


def peak_tflops(entry: dict, dtype: str) -> tuple[str, float] | None:
    """(dtype whose peak applies, TFLOP/s) on a device."""
    peaks, seen = entry["peak_tflops"], set()
    while dtype and dtype not in seen:
        if dtype in peaks:
            return dtype, float(peaks[dtype])
        seen.add(dtype)
        dtype = DTYPE_FALLBACK.get(dtype)
    return None


# tracetriage reads one profiler's captures as one run (tracetriage/runs.py refuses a mix), so a
# hint never asks to analyze a PyTorch profiler trace "with" an nsys or rocprof one: on its own.
KINETO_ALONE = ("profile the run with the PyTorch profiler (torch.profiler, record_shapes=True) and analyze that trace "
                "on its own")


def capture_hint(fmt: str | None) -> str:
    """The capture that records operator shapes, for the format at hand."""
    if fmt == "kineto":
        return ("profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], "
                "record_shapes=True) so each op's input shapes are written and linked to its kernels")
    if fmt in ("rocpd", "rpd", "rocprof_csv", "rocprof_json"):
        return f"rocprof records no operator shapes: {KINETO_ALONE}"
    if fmt == "nsys":
        return ("profile with nsys profile --pytorch=autograd-shapes-nvtx (PyTorch's emit_nvtx(record_shapes=True): each "
                "operator's NVTX range carries its input shapes, tied to its kernels by the launch calls inside it); or "
                f"{KINETO_ALONE} (it also records the data types)")
    return KINETO_ALONE


def _works(ops: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """Per op row: kind code (-1: no formula), flops, bytes, weight bytes, tokens, dtype, and
    whether the shape came without data types (NVTX operator ranges record none: an op whose
    kernels' names did not tell it) — each distinct (name, shape) evaluated once, then spread to
    its rows by one gather."""
    n = len(ops)
    if not n:
        return (np.full(0, -1, np.int8), np.zeros(0), np.zeros(0), np.zeros(0), np.full(0, -1, np.int64),
                np.empty(0, dtype=object), np.zeros(0, bool))
    key = ops["name"].cat.codes.to_numpy().astype(np.int64) * (len(ops["shape"].cat.categories) + 1) \
        + ops["shape"].cat.codes.to_numpy()
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    m = len(uniq)
    kind = np.full(m, -1, np.int8)
    flops, nbytes, wbytes, tokens = np.zeros(m), np.zeros(m), np.zeros(m), np.full(m, -1, np.int64)
    dtype = np.empty(m, dtype=object)
    untyped = np.zeros(m, bool)
    names, shapes = ops["name"].to_numpy(), ops["shape"].to_numpy()
    for j, i in enumerate(first):
        try:
            dims, types, concrete = json.loads(shapes[i])
        except (ValueError, TypeError):
            continue
        if types is None:
            untyped[j] = opwork.has_formula(str(names[i]))
            continue
        w = opwork.work(str(names[i]), dims, types, concrete)
        if w is None or not np.isfinite(w.flops) or not np.isfinite(w.bytes):
            continue
        kind[j] = opwork.CLASSES.index(w.kind)
        flops[j], nbytes[j], wbytes[j] = w.flops, w.bytes, w.weight_bytes
        tokens[j] = -1 if w.tokens is None else w.tokens
        dtype[j] = w.dtype
    return kind[inv], flops[inv], nbytes[inv], wbytes[inv], tokens[inv], dtype[inv], untyped[inv]


def _rates(time_ns: float, flops: float, nbytes: float) -> dict:
    return {"time_ns": int(time_ns), "flops": float(flops), "bytes": float(nbytes),
            "achieved_tflops": round(flops / time_ns / 1e3, 3) if time_ns else None,
            "achieved_gbps": round(nbytes / time_ns, 2) if time_ns else None,
            "intensity": round(flops / nbytes, 3) if nbytes else None}


def _roofline(entry: dict | None, flops: np.ndarray, nbytes: np.ndarray, dtypes: np.ndarray, time_ns: float) -> dict:
    """bound, pct_of_roofline and the peak held against, for a set of op calls."""
    if entry is None or not time_ns:
        return {"bound": None, "pct_of_roofline": None, "peak_dtype": None}
    bw = float(entry["bandwidth_gbps"])
    t_c = np.zeros(len(flops))
    for dt in pd.unique(dtypes):
        got = peak_tflops(entry, dt)
        sel = dtypes == dt
        t_c[sel] = flops[sel] / (got[1] * 1e3) if got else 0.0  # TFLOP/s = 1e3 FLOP/ns
    t_m = nbytes / bw
    main = pd.Series(flops).groupby(dtypes).sum().idxmax() if len(flops) else None
    got = peak_tflops(entry, main) if main else None
    return {"bound": "compute" if t_c.sum() >= t_m.sum() else "memory",
            "pct_of_roofline": round(100.0 * float(np.maximum(t_c, t_m).sum()) / time_ns, 2),
            "peak_dtype": got[0] if got else None}


def _device_of(ns_by_device: np.ndarray) -> int | None:
    return int(np.argmax(ns_by_device)) if ns_by_device.size and ns_by_device.max() > 0 else None


KERNEL_SLICE = 1 << 18  # rows per slice: temporaries under the 4 MiB mmap threshold (tracetriage/memory.py)


# shaped ops were recorded, no graph replays: the kernels without one come from ops with no formula
# here, or from ops whose CPU side fell outside the profiled window
NO_SHAPED_OP_HINT = ("their operators have no FLOP/byte formula here (custom or fused ops: Triton, MoE, paged "
                     "attention...; add it to analyzers/opwork.py) or ran before the profiler's CPU activity started "
                     "(start the profiler before the work, or widen its schedule)")

GRAPH_UNTIED = {
    "no_capture": ("the capture phase was not profiled: the trace (and the case) holds no graph capture whose launch calls "
                   "carry the operators' shapes",
                   "also profile the CUDA-graph capture with record_shapes=True (vLLM and SGLang can profile it into its own "
                   "trace) and analyze that trace with this one, or profile one step eagerly (vLLM --enforce-eager)"),
    "no_match": ("no profiled capture launched this sequence of kernels (another graph, or one captured outside the "
                 "profiled window)",
                 "profile the capture of the graphs that are replayed (every batch size served) with record_shapes=True"),
    "ambiguous": ("several profiled captures launched these kernels with different shapes (one graph per batch size): "
                  "which one was replayed is not in the trace",
                  "profile the capture of the one batch size served, or capture and replay in one profiler session"),
    "unnamed": ("the capture is in another file and its launch calls do not name their kernels, so the pairing cannot "
                "be checked",
                "profile the capture and the replays in one profiler session"),
    "no_formula": ("tied to their capture, where the operator that launched them has no FLOP/byte formula here (a "
                   "custom or fused op: Triton, MoE, paged attention...) or recorded no shapes",
                   "the work of custom ops is not modelled: profile with record_shapes=True and compare their kernels' "
                   "time, or add their formula to analyzers/opwork.py"),
}


def _graph_not_measured(trace: Trace, lo: int, hi: int, tied_rows: np.ndarray) -> list[dict]:
    """Per capture (trace): the kernel time of graph-replayed kernels in the window that no
    captured op was tied to, and why (parsers/graph_replays.py); nsys's whole-graph replay
    intervals, whose kernels are not recorded at all. Their time is also in the per-class
    'without shapes' figures: this says which part is graph replay and what would measure it."""
    g = trace.gpu
    if not len(g) or not g["in_graph"].any():
        return []
    start, end = g["start"].to_numpy(), g["end"].to_numpy()
    graph = np.flatnonzero(g["in_graph"].to_numpy(bool))  # row numbers, not column-sized temporaries
    graph = graph[(start[graph] >= lo) & (start[graph] < hi)]
    out = []
    whole = graph[is_kind(g, "graph")[graph]]
    if whole.size:
        out.append({"what": "graph replays without kernels", "time_ns": int((end[whole] - start[whole]).sum()),
                    "share_pct": None,
                    "reason": f"{plural(whole.size, 'graph replay')} traced as one interval each (nsys --cuda-graph-trace=graph, "
                              "the default): their kernels, and so the operators behind them, are not recorded",
                    "capture_hint": "nsys profile --cuda-graph-trace=node records each replayed kernel (its class "
                                    "and time); the operators' shapes need their kernels launched outside a graph: "
                                    "profile one step eagerly (CUDA graphs off, e.g. vLLM --enforce-eager) with "
                                    "--pytorch=autograd-shapes-nvtx"})
    rows = graph[is_kind(g, "kernel")[graph]]
    if not rows.size:
        return out
    untied = rows[~np.isin(rows, tied_rows)] if tied_rows.size else rows
    all_ns = float((end[rows] - start[rows]).sum())
    untied_ns = float((end[untied] - start[untied]).sum())
    if not untied.size:
        return out
    ties = trace.meta.get("graph_ties")
    key = g["pid"].to_numpy(np.int64)[untied] * (1 << 32) + g["correlation"].to_numpy(np.int64)[untied]
    n_replays = int(np.unique(key).size)
    if not ties:
        out.append({"what": "graph-replayed kernels not tied to ops", "time_ns": int(untied_ns), "share_pct": None,
                    "reason": f"{plural(n_replays, 'replay')}, {100.0 * untied_ns / all_ns:.0f}% of the replayed kernel time in "
                              f"the window: this {trace.format} export does not tie a replayed kernel to the launch call "
                              "that captured it",
                    "capture_hint": "profile the same run with the PyTorch profiler (record_shapes=True) over the CUDA-graph "
                                    "capture and the replays, or one step eagerly (vLLM --enforce-eager)"})
        return out
    tied = len(ties.get("tied", []))
    done = (f"; {tied:,} of {ties['replays']:,} replays tied to their capture in "
            f"{', '.join(Path(x).name for x in ties['sources'])}" if tied else "")
    groups = [(reason, pairs) for reason, pairs in ties.get("untied", {}).items()] + [("no_formula", ties.get("tied", []))]
    for reason, pairs in groups:
        pk = np.array([p * (1 << 32) + c for p, c in pairs], dtype=np.int64)
        sel = np.isin(key, pk)
        if not sel.any():
            continue
        ns = float((end[untied[sel]] - start[untied[sel]]).sum())
        why, hint = GRAPH_UNTIED.get(reason, (reason, "profile the CUDA-graph capture with record_shapes=True"))
        out.append({"what": "graph-replayed kernels not tied to ops", "time_ns": int(ns), "share_pct": None,
                    "reason": f"{plural(int(np.unique(key[sel]).size), 'replay')}, {100.0 * ns / all_ns:.0f}% of the replayed "
                              f"kernel time in the window: {why}{done}",
                    "capture_hint": hint})
    return out


def replayed_ops(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(gpu rows, op rows) of the graph-replayed kernels tied to a captured op: ``op_kernels`` rows
    with ``nth`` >= 0 name the n-th kernel, in start order, of the replay with that correlation."""
    ok = trace.op_kernels
    empty = (np.empty(0, np.int64), np.empty(0, np.int64))
    if not (ok["nth"].to_numpy() >= 0).any():
        return empty
    ok = ok[ok["nth"].to_numpy() >= 0]
    g = trace.gpu
    key = ok["pid"].to_numpy(np.int64) * (1 << 32) + ok["correlation"].to_numpy(np.int64)
    rows = np.flatnonzero(is_kind(g, "kernel") & g["in_graph"].to_numpy(bool))
    gkey = g["pid"].to_numpy(np.int64)[rows] * (1 << 32) + g["correlation"].to_numpy(np.int64)[rows]
    keep = np.isin(gkey, key)
    rows, gkey = rows[keep], gkey[keep]
    if not rows.size:
        return empty
    order = np.argsort(gkey, kind="stable")  # rows are in start order: stable keeps it within a replay
    rows, gkey = rows[order], gkey[order]
    first = np.r_[0, np.flatnonzero(np.diff(gkey)) + 1]
    nth = np.arange(rows.size) - np.repeat(first, np.diff(np.r_[first, rows.size]))
    m = pd.DataFrame({"key": gkey, "nth": nth, "row": rows}).merge(
        pd.DataFrame({"key": key, "nth": ok["nth"].to_numpy(np.int64), "op": ok["op"].to_numpy(np.int64)}),
        on=["key", "nth"], how="inner")
    order = np.argsort(m["row"].to_numpy())
    return m["row"].to_numpy()[order], m["op"].to_numpy()[order]


def _kernel_time(trace: Trace, lo: int, hi: int, kind: np.ndarray, untyped: np.ndarray,
                 tied: tuple[np.ndarray, np.ndarray]) -> tuple:
    """One pass over the kernels starting in [lo, hi), a slice of rows at a time (a column-sized
    temporary per step was the first read's peak at 10M kernels): kernel time per device, the
    time of kernels no shaped op launched per class (from their names; collectives apart) and the
    part of it launched by ops whose shapes came without data types, the non-collective kernel
    time, and the shaped op and time of each kernel one launched. ``tied``: :func:`replayed_ops`."""
    g = trace.gpu
    start, end, device = g["start"].to_numpy(), g["end"].to_numpy(), g["device"].to_numpy()
    is_kernel = is_kind(g, "kernel")
    coll_all = g["collective"].notna().to_numpy()
    # classed once per distinct name (a regex per kernel row was 7 s at 2M kernels); code -1 (no name) last
    codes, cats = cat_codes(g["name"])
    class_of = np.array([opwork.CLASSES.index(kernel_class(str(c))) for c in [*cats, "nan"]], dtype=np.int8)
    ok = trace.op_kernels
    tied_rows, tied_ops = tied  # graph-replayed kernels tied to their captured ops
    if len(ok):
        ok = ok[ok["nth"].to_numpy() < 0]
        ok = ok.drop_duplicates(["pid", "correlation"])[["pid", "correlation", "op"]]  # one op per launch: one row per kernel
        pid, corr = g["pid"].to_numpy(), g["correlation"].to_numpy()
    ns_by_device = np.zeros(len(trace.devices))
    by_class = np.zeros(len(opwork.CLASSES))
    untyped_by_class = np.zeros(len(opwork.CLASSES))
    kernel_ns = 0.0
    ops, durs = [np.empty(0, np.int64)], [np.empty(0)]
    for a in range(0, len(g), KERNEL_SLICE):
        s = start[a:a + KERNEL_SLICE]
        rows = a + np.flatnonzero(is_kernel[a:a + KERNEL_SLICE] & (s >= lo) & (s < hi))
        if not rows.size:
            continue
        dur = (end[rows] - start[rows]).astype(np.float64)
        per_device = np.bincount(device[rows], weights=dur, minlength=len(ns_by_device))
        if per_device.size > ns_by_device.size:
            ns_by_device = np.append(ns_by_device, np.zeros(per_device.size - ns_by_device.size))
        ns_by_device[:per_device.size] += per_device
        op = np.full(rows.size, -1, np.int64)  # kernels -> the shaped op that launched them
        if len(ok):
            m = pd.DataFrame({"pid": pid[rows], "correlation": corr[rows]}).merge(ok, how="left", on=["pid", "correlation"])
            op = m["op"].fillna(-1).to_numpy().astype(np.int64)
        if tied_rows.size:
            at = np.clip(np.searchsorted(tied_rows, rows), 0, tied_rows.size - 1)
            hit = tied_rows[at] == rows
            op[hit] = tied_ops[at[hit]]
        has = op >= 0
        has[has] = kind[op[has]] >= 0
        coll = coll_all[rows]
        rest = ~has & ~coll
        by_class += np.bincount(class_of[codes[rows[rest]]], weights=dur[rest], minlength=len(opwork.CLASSES))
        no_type = rest & (op >= 0)
        no_type[no_type] = untyped[op[no_type]]
        if no_type.any():
            untyped_by_class += np.bincount(class_of[codes[rows[no_type]]], weights=dur[no_type],
                                            minlength=len(opwork.CLASSES))
        kernel_ns += float(dur[~coll].sum())
        if has.any():
            ops.append(op[has])
            durs.append(dur[has])
    return ns_by_device, by_class, untyped_by_class, kernel_ns, np.concatenate(ops), np.concatenate(durs)


def measure(trace: Trace, lo: int, hi: int, steps: list) -> Efficiency:
    """Efficiency of one trace in the window [lo, hi): device, classes, top ops, decode floor,
    what was not measured. ``steps`` are the trace's :class:`~tracetriage.analyzers.steps.Steps`."""
    fmt = trace.format
    kind, flops, nbytes, wbytes, tokens, dtypes, untyped = _works(trace.ops)
    tied = replayed_ops(trace)  # once: its grouping of the in-graph kernels is not cheap
    ns_by_device, unmeasured_by_class, untyped_by_class, kernel_ns, op_of, op_dur = _kernel_time(trace, lo, hi, kind,
                                                                                                  untyped, tied)
    dev = _device_of(ns_by_device)
    if dev is None:  # no kernel in the window; graph replays traced whole may be all it ran
        return Efficiency(not_measured=_graph_not_measured(trace, lo, hi, np.empty(0, np.int64)))
    not_measured: list[dict] = []
    classes: list[dict] = []
    top_ops: list[dict] = []
    wasted_ns: dict = {}
    row = trace.devices.iloc[dev]
    device = None
    found = match_device(str(row["name"]), int(row["memory_bytes"]), int(row["sm_count"]))
    entry = found[1] if found else None
    if entry is not None:
        device = {"model": entry["model"], "source": entry["source"], "peak_tflops": dict(entry["peak_tflops"]),
                  "bandwidth_gbps": float(entry["bandwidth_gbps"]), "matched_name": str(row["name"])}
        if entry.get("note"):
            device["note"] = entry["note"]
    else:
        not_measured.append({
            "what": "device peaks", "time_ns": None,
            "reason": f"device {str(row['name']) or '(empty name)'!r} is not in the device table: achieved rates are "
                      "reported, the % of roofline is not",
            "capture_hint": "add the device's datasheet peaks (dense FLOP/s per data type, memory bandwidth) to "
                            "analyzers/devices.toml"})

    unmeasured = {c: float(unmeasured_by_class[i]) for i, c in enumerate(opwork.CLASSES)}

    # per op call: its kernels' time in the window
    op_time = pd.Series(op_dur).groupby(op_of).sum()
    idx = op_time.index.to_numpy()
    t_op = op_time.to_numpy()
    ck = kind[idx]
    measured = {c: float(t_op[ck == i].sum()) for i, c in enumerate(opwork.CLASSES)}
    total = {c: measured[c] + unmeasured[c] for c in opwork.CLASSES}
    dominant = max(total, key=total.get) if any(total.values()) else None
    for i, c in enumerate(opwork.CLASSES):
        s = ck == i
        if not s.any():
            continue
        sub = idx[s]
        cls = {"class": c, **_rates(t_op[s].sum(), flops[sub].sum(), nbytes[sub].sum()),
               **_roofline(entry, flops[sub], nbytes[sub], dtypes[sub], t_op[s].sum()),
               "measured_share_pct": round(100.0 * measured[c] / total[c], 2) if total[c] else None,
               "ops": int(s.sum())}
        classes.append(cls)
        if c == dominant and cls["pct_of_roofline"] is not None:
            wasted_ns = {"class": c, "ns": float(t_op[s].sum()) * max(0.0, 1 - cls["pct_of_roofline"] / 100.0)}
    replays = bool(len(trace.gpu)) and bool(trace.gpu["in_graph"].any())
    for i, c in enumerate(opwork.CLASSES):
        no_dtype = float(untyped_by_class[i])
        if no_dtype > 0:
            not_measured.append({
                "what": f"{c} kernels without dtype", "time_ns": int(no_dtype),
                "share_pct": round(100.0 * no_dtype / total[c], 2) if total[c] else None,
                "reason": "kernels of operators whose NVTX ranges give shapes but no data types, and whose kernel names "
                          "do not state one (or state two, as a conversion does): their bytes and peak are unknown",
                "capture_hint": f"{KINETO_ALONE}: it records each operator's input types"})
        if unmeasured[c] - no_dtype > 0:
            not_measured.append({
                "what": f"{c} kernels without shapes", "time_ns": int(unmeasured[c] - no_dtype),
                "share_pct": round(100.0 * (unmeasured[c] - no_dtype) / total[c], 2) if total[c] else None,
                "reason": "kernels no shaped operator launched (CUDA/HIP graph replays, custom or fused ops, kernels of "
                          "ops outside the profiled CPU window): their work is unknown",
                "capture_hint": capture_hint(fmt) if trace.ops.empty else
                "profile one step eagerly (CUDA graphs off, e.g. vLLM --enforce-eager) or also profile the graph-capture "
                "phase with record_shapes=True so replayed kernels can be tied to their ops" if replays else
                NO_SHAPED_OP_HINT})

    # top ops: per (name, shape)
    if len(idx):
        ops = trace.ops
        grp = pd.DataFrame({"op": idx, "t": t_op, "name": ops["name"].to_numpy()[idx].astype(str),
                            "shape": ops["shape"].to_numpy()[idx].astype(str)})
        top = grp.groupby(["name", "shape"], sort=False).agg(t=("t", "sum"), n=("t", "size"), first=("op", "first"))
        for (name, shape), r in top.sort_values("t", ascending=False).head(10).iterrows():
            members = grp.loc[(grp["name"] == name) & (grp["shape"] == shape), "op"].to_numpy()
            dims, types, _ = json.loads(shape)
            j = int(r["first"])
            top_ops.append({
                "name": name, "class": opwork.CLASSES[kind[j]], "input_dims": dims, "dtype": dtypes[j], "count": int(r["n"]),
                **_rates(r["t"], flops[members].sum(), nbytes[members].sum()),
                **_roofline(entry, flops[members], nbytes[members], dtypes[members], r["t"])})

    not_measured.extend(_graph_not_measured(trace, lo, hi, tied[0]))
    decode_floor = _decode_floor(not_measured, entry, idx, t_op, kind, wbytes, tokens, measured, total, steps)
    if trace.ops.empty:
        nvtx = trace.meta.get("nvtx_ops") or {}
        what = "the capture carries no operator input shapes"
        if nvtx.get("op_ranges") and not nvtx.get("with_shapes"):
            what = (f"the capture's {nvtx['op_ranges']:,} PyTorch operator NVTX ranges carry no input shapes (nsys "
                    "--pytorch=autograd-nvtx, not autograd-shapes-nvtx)")
        not_measured.insert(0, {"what": "operator shapes", "time_ns": int(kernel_ns),
                                "reason": f"{what}: FLOPs and bytes per kernel, the roofline and the decode "
                                          "bandwidth floor are not measured",
                                "capture_hint": capture_hint(fmt)})
    return Efficiency(device=device, device_name=str(row["name"]), classes=classes, top_ops=top_ops,
                      decode_floor=decode_floor, not_measured=not_measured, dominant=dominant, unmeasured_ns=unmeasured,
                      kernel_ns=kernel_ns, wasted_ns=wasted_ns)


def _decode_floor(not_measured: list[dict], entry, idx, t_op, kind, wbytes, tokens, measured, total, steps) -> dict | None:
    gemm = kind[idx] == 0
    if not gemm.any() or entry is None:
        return None
    order = np.argsort(tokens[idx][gemm])
    tw = t_op[gemm][order]
    median_tokens = int(tokens[idx][gemm][order][np.searchsorted(np.cumsum(tw), tw.sum() / 2)])
    if median_tokens > DECODE_MAX_TOKENS:
        return None
    with_steps = [s for s in steps if s.count]
    if not with_steps:
        not_measured.append({"what": "decode bandwidth floor", "time_ns": None,
                                    "reason": f"decode-shaped GEMMs (median {median_tokens} rows) but no steps: the "
                                              "step the floor bounds is unknown",
                                    "capture_hint": "mark each engine step (torch.profiler schedule steps, or an "
                                                    "NVTX/record_function range per step), or pass --step-range REGEX"})
        return None
    share = measured["gemm"] / total["gemm"] if total["gemm"] else 0.0
    if share < THRESHOLDS["decode_min_measured_share"][0]:
        not_measured.append({"what": "decode bandwidth floor", "time_ns": None,
                                    "reason": f"only {100 * share:.0f}% of GEMM time carries shapes: the weights read per "
                                              "step are not known",
                                    "capture_hint": "profile one decode step eagerly (CUDA graphs off) with record_shapes=True"})
        return None
    n_steps = sum(s.count for s in with_steps)
    streamed = kind[idx] <= 1  # GEMM weights and the KV cache attention reads
    bytes_per_step = float(wbytes[idx][streamed].sum()) / n_steps
    floor_ns = bytes_per_step / float(entry["bandwidth_gbps"])
    measured_ns = float(np.median(np.concatenate([s.durations for s in with_steps])))
    return {"bytes_per_step": bytes_per_step, "floor_ns": int(floor_ns), "measured_ns": int(measured_ns),
            "pct_of_floor": round(100.0 * floor_ns / measured_ns, 2) if measured_ns else None,
            "steps": int(n_steps), "median_gemm_tokens": median_tokens,
            "source": "weights from the GEMM shapes + KV cache from the attention shapes, per step"}


# ---------------------------------------------------------------------------
# The JSON block, the rule, the words healthy uses


def block(per_trace: list[TraceMetrics], serving: dict | None = None) -> dict | None:
    """The ``efficiency`` block of the analysis: the trace with the most measured kernel time
    (one block: Kineto captures are one per rank). Without a decode floor from the shapes, the
    serving artifacts may give one (:func:`serving_floor`)."""
    if not per_trace:
        return None
    best = max(per_trace, key=lambda trace: (sum(c["time_ns"] for c in trace.efficiency.classes), trace.efficiency.kernel_ns))
    eff = best.efficiency
    out = {"trace": best.meta.get("path"), "device_name": eff.device_name, "device": eff.device,
           "dominant_class": eff.dominant, "classes": eff.classes, "top_ops": eff.top_ops, "decode_floor": eff.decode_floor,
           "not_measured": list(eff.not_measured)}
    if out["decode_floor"] is None and serving:
        floor, missing = serving_floor(serving, eff.device)
        out["decode_floor"] = floor
        if missing:
            out["not_measured"].append(missing)
    return out


def serving_floor(serving: dict, device: dict | None) -> tuple[dict | None, dict | None]:
    """(decode floor, or what is missing for it) from serving artifacts: the weights one worker
    loaded (the log's "Model loading took N GiB": its shard, so per device under tensor
    parallelism) over the device's bandwidth, against the median TPOT (one decode step per output
    token). The KV cache read is not known from the log, so the floor is a lower bound of a lower
    bound; it is reported, and judges nothing on its own (no window to claim time from)."""
    weights = (serving.get("config") or {}).get("model_weights_bytes")
    lat = serving.get("latency") or {}
    client = (lat.get("client") or {}).get("tpot") or {}
    server = (lat.get("server") or {}).get("tpot") or {}
    tpot_ms, source = None, None
    for value, where in ((client.get("median"), "client median TPOT"), (client.get("mean"), "client mean TPOT"),
                         ((server.get("p50") or {}).get("value_ms"), "server TPOT p50 (histogram)")):
        if isinstance(value, (int, float)) and value > 0:
            tpot_ms, source = float(value), where
            break
    if not weights:
        return None, None  # no weights line: nothing to say beyond the shapes' not_measured
    if device is None or tpot_ms is None:
        what = "the device's bandwidth (no known device in the traces)" if device is None else "a TPOT (no benchmark result or TPOT histogram)"
        return None, {"what": "decode bandwidth floor from the serving log", "time_ns": None,
                      "reason": f"the log gives the weights per device ({weights / 2**30:.2f} GiB) but not {what}",
                      "capture_hint": "add a GPU trace of the server (for the device) and a benchmark result or /metrics "
                                      "scrape (for TPOT) to the bundle"}
    floor_ns = weights / float(device["bandwidth_gbps"])
    measured_ns = tpot_ms * 1e6
    return {"bytes_per_step": float(weights), "floor_ns": int(floor_ns), "measured_ns": int(measured_ns),
            "pct_of_floor": round(100.0 * floor_ns / measured_ns, 2), "steps": None, "median_gemm_tokens": None,
            "source": f"weights from the serving log's model-loading line (per device; KV cache read not included) "
                      f"against the {source}"}, None


def t(name):
    return THRESHOLDS[name][0]


def judgement(eff: Efficiency | None) -> dict | None:
    """What the efficiency says about the dominant class: ``{"class", "entry", "measured", "below",
    "side", "text"}``, or None when there is nothing to say (no efficiency measured at all)."""
    if not eff or not eff.dominant:
        return None
    dom = eff.dominant
    cls = next((c for c in eff.classes if c["class"] == dom), None)
    total = (cls["time_ns"] if cls else 0) + eff.unmeasured_ns.get(dom, 0.0)
    share = (cls["time_ns"] / total) if cls and total else 0.0
    df = eff.decode_floor
    if df and df.get("pct_of_floor") is not None:
        return {"class": dom, "entry": cls, "measured": True, "side": "memory", "decode": df,
                "below": df["pct_of_floor"] < t("decode_floor_min_pct"),
                "text": f"decode steps at {df['pct_of_floor']:.0f}% of the bandwidth floor"}
    if cls is None or cls["pct_of_roofline"] is None or share < t("roofline_min_measured_share"):
        return {"class": dom, "entry": cls, "measured": False, "below": False, "side": None,
                "text": f"{CLASS_WORDS[dom]} efficiency not measured"}
    return {"class": dom, "entry": cls, "measured": True, "side": cls["bound"], "decode": None,
            "below": cls["pct_of_roofline"] < t("roofline_min_pct"), "text": roofline_words(cls)}


def roofline_words(cls: dict) -> str:
    what = CLASS_WORDS[cls["class"]]
    if cls["bound"] == "compute":
        return f"{what} at {cls['pct_of_roofline']:.0f}% of the {DTYPE_WORDS.get(cls['peak_dtype'], cls['peak_dtype'])} peak"
    return f"{what} at {cls['pct_of_roofline']:.0f}% of the memory-bandwidth roofline"


def healthy_words(per_trace: list[TraceMetrics]) -> str:
    """The efficiency clause of the healthy verdict: the dominant class's measured efficiency
    (and the GEMMs' when another class dominates), or why it is not measured."""
    effs = [trace.efficiency for trace in per_trace]
    for eff in effs:
        j = judgement(eff)
        if j and j["measured"]:
            words = [j["text"]]
            gemm = next((c for c in eff.classes if c["class"] == "gemm" and c["pct_of_roofline"] is not None), None)
            if j["class"] != "gemm" and gemm and (gemm["measured_share_pct"] or 0) >= 100 * t("roofline_min_measured_share"):
                words.append(roofline_words(gemm))
            return "; " + ", ".join(words)
    why = "no operator shapes"
    if any(_untyped_dominant(e) for e in effs):
        why = "the operators' data types are neither in their NVTX ranges nor in their kernels' names"
    elif any(e.classes for e in effs):
        why = ("device not in the device table" if not any(e.device for e in effs if e.classes)
               else "too little kernel time carries operator shapes")
    return f"; efficiency not measured ({why})"


def _untyped_dominant(eff: Efficiency) -> dict | None:
    """The not-measured entry of the dominant class's kernels whose ops came without a dtype, when
    they hold more of its time than the threshold lets go unmeasured."""
    dom = eff.dominant
    got = next((n for n in eff.not_measured if n["what"] == f"{dom} kernels without dtype"), None)
    return got if got and (got.get("share_pct") or 0) > 100 * (1 - t("roofline_min_measured_share")) else None


GRAPH_MISSING = ("graph-replayed kernels not tied to ops", "graph replays without kernels")


def missing_shapes(eff: Efficiency) -> dict | None:
    """The not-measured entry that says why the dominant class's efficiency is unknown, and so
    which capture would decide: no shaped op at all ("operator shapes"); shaped ops present but
    the class's ops came without data types; graph replays left untied (the largest such entry:
    the capture phase not profiled, ambiguous, the captured op without a formula, or nsys whole-
    graph intervals); else the class's kernels no shaped op launched."""
    nm = eff.not_measured
    got = next((n for n in nm if n["what"] == "operator shapes"), None) or _untyped_dominant(eff)
    if got:
        return got
    graph = [n for n in nm if n["what"] in GRAPH_MISSING]
    if graph:
        return max(graph, key=lambda n: n.get("time_ns") or 0)
    return next((n for n in nm if n["what"] == f"{eff.dominant} kernels without shapes"), None)
