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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tracetriage.analyzers import op_kernels, opwork
from tracetriage.analyzers.capture_kind import is_native_trace, trace_vendor
from tracetriage.analyzers.efficiency_rows import ClassRow, DecodeFloor, Judgement, NotMeasured, Rates, Roofline, TopOp
from tracetriage.analyzers.graph_window import KEY_SHIFT, graph_rows
from tracetriage.analyzers.metrics import Efficiency, TraceMetrics
from tracetriage.analyzers.op_kernels import KernelTime, OpWork, kernel_time, op_steps, op_works, replayed_ops
from tracetriage.analyzers.peaks import device_peaks, roofline
from tracetriage.analyzers.serving_work import canonical_name
from tracetriage.model import Trace
from tracetriage.wording import for_vendor, plural

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
CLASS_WORDS = op_kernels.CLASS_WORDS


def class_words(eff: Efficiency | None, kind: str) -> str:
    """A class of ``eff`` in words ('GEMMs and convolutions' where convolution kernels ran: op_kernels.class_words)."""
    return op_kernels.class_words(kind, eff.conv_ns if eff else 0.0)
DTYPE_WORDS = {"bf16": "BF16", "fp16": "FP16", "fp32": "FP32", "tf32": "TF32", "fp8": "FP8", "fp4": "FP4", "int8": "INT8",
               "fp64": "FP64"}


def _threshold(name: str):
    """A threshold's value."""
    return THRESHOLDS[name][0]


# tracetriage reads one profiler's captures as one run (tracetriage/runs.py refuses a mix), so a
# hint never asks to analyze a PyTorch profiler trace "with" an nsys or rocprof one: on its own.
KINETO_ALONE = ("profile the run with the PyTorch profiler (torch.profiler, record_shapes=True) and analyze that trace "
                "on its own")


# a native program (C++/HIP/CUDA, no PyTorch operators) gets no shapes from any profiler: the
# kernels' achieved rates come from hardware counters instead
NATIVE_HINTS = {
    "rocm": ("a native HIP program has no PyTorch operators to read shapes from: measure each kernel's achieved "
             "FLOP/s and bandwidth with counters (rocprofv3 --kernel-trace --pmc with the FLOP and memory counters, or "
             "rocprof-compute profile), or name each problem size with a roctx range"),
    "cuda": ("a native CUDA program has no PyTorch operators to read shapes from: measure each kernel's achieved "
             "FLOP/s and bandwidth with Nsight Compute (ncu --set full), or name each problem size with an NVTX range"),
}


def capture_hint(fmt: str | None, native: bool = False) -> str:
    """The capture that records operator shapes, for the format at hand; for a ``native`` program
    (capture_kind: no Python process drives the GPU) the counters that measure its kernels instead."""
    rocm = fmt in ("rocpd", "rpd", "rocprof_csv", "rocprof_json")
    if native and fmt != "kineto":
        return NATIVE_HINTS["rocm" if rocm else "cuda"]
    if fmt == "kineto":
        return ("profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], "
                "record_shapes=True) so each op's input shapes are written and linked to its kernels")
    if rocm:
        return f"rocprof records no operator shapes: {KINETO_ALONE}"
    if fmt == "nsys":
        return ("profile with nsys profile --pytorch=autograd-shapes-nvtx (PyTorch's emit_nvtx(record_shapes=True): each "
                "operator's NVTX range carries its input shapes, tied to its kernels by the launch calls inside it); or "
                f"{KINETO_ALONE} (it also records the data types)")
    return KINETO_ALONE


def _busiest_device(ns_by_device: np.ndarray) -> int | None:
    """The device that ran the most kernel time in the window, None when none ran any."""
    return int(np.argmax(ns_by_device)) if ns_by_device.size and ns_by_device.max() > 0 else None


# shaped ops were recorded, no graph replays: the kernels without one come from ops with no formula
# here, or from ops whose CPU side fell outside the profiled window
NO_SHAPED_OP_HINT = ("their operators have no FLOP/byte formula here (custom or fused ops: Triton kernels, fused norms, "
                     "rotary embeddings...; add it to analyzers/opwork.py or analyzers/serving_work.py) or ran before the "
                     "profiler's CPU activity started (start the profiler before the work, or widen its schedule)")

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
                   "custom or fused op: Triton kernels, fused norms, rotary embeddings...), recorded no shapes, or needs "
                   "what the trace does not hold (an attention's step lengths, a MoE's expert weights)",
                   "the work of custom ops is not modelled: profile with record_shapes=True and compare their kernels' "
                   "time, or add their formula to analyzers/opwork.py or analyzers/serving_work.py"),
}


def _graph_not_measured(trace: Trace, lo: int, hi: int, tied_rows: np.ndarray) -> list[NotMeasured]:
    """Per capture (trace): the kernel time of graph-replayed kernels in the window that no
    captured op was tied to, and why (parsers/graph_replays.py); nsys's whole-graph replay
    intervals, whose kernels are not recorded at all. Their time is also in the per-class
    'without shapes' figures: this says which part is graph replay and what would measure it."""
    gpu = trace.gpu
    if not len(gpu) or not gpu["in_graph"].any():
        return []
    ties = trace.meta.get("graph_ties")
    found = graph_rows(trace, lo, hi, tied_rows, keep_rows=bool(ties))
    out = []
    if found.whole:
        out.append(NotMeasured(
            what="graph replays without kernels", time_ns=found.whole_ns, has_share=True,
            share_pct=None,
            reason=f"{plural(found.whole, 'graph replay')} traced as one interval each (nsys --cuda-graph-trace=graph, "
                   "the default): their kernels, and so the operators behind them, are not recorded",
            capture_hint="nsys profile --cuda-graph-trace=node records each replayed kernel (its class and time); the "
                         "operators' shapes need their kernels launched outside a graph: profile one step eagerly (CUDA "
                         "graphs off, e.g. vLLM --enforce-eager) with --pytorch=autograd-shapes-nvtx"))
    if not found.kernels or not found.untied:
        return out
    all_ns, untied_ns = float(found.kernel_ns), float(found.untied_ns)
    if not ties:
        out.append(NotMeasured(
            what="graph-replayed kernels not tied to ops", time_ns=int(untied_ns), has_share=True, share_pct=None,
            reason=f"{plural(found.replays, 'replay')}, {100.0 * untied_ns / all_ns:.0f}% of the replayed kernel time in "
                   f"the window: this {trace.format} export does not tie a replayed kernel to the launch call that "
                   "captured it",
            capture_hint=for_vendor("profile the same run with the PyTorch profiler (record_shapes=True) over the "
                                    "CUDA-graph capture and the replays, or one step eagerly (vLLM --enforce-eager)",
                                    trace_vendor(trace))))
        return out
    untied = found.untied_rows
    start, end = gpu["start"].to_numpy(), gpu["end"].to_numpy()
    key = gpu["pid"].to_numpy(np.int64)[untied] * KEY_SHIFT + gpu["correlation"].to_numpy(np.int64)[untied]
    tied = len(ties.get("tied", []))
    done = (f"; {tied:,} of {ties['replays']:,} replays tied to their capture in "
            f"{', '.join(Path(source).name for source in ties['sources'])}" if tied else "")
    groups = [(reason, pairs) for reason, pairs in ties.get("untied", {}).items()] + [("no_formula", ties.get("tied", []))]
    for reason, pairs in groups:
        pair_keys = np.array([pid * KEY_SHIFT + correlation for pid, correlation in pairs], dtype=np.int64)
        selected = np.isin(key, pair_keys)
        if not selected.any():
            continue
        ns = float((end[untied[selected]] - start[untied[selected]]).sum())
        why, hint = GRAPH_UNTIED.get(reason, (reason, "profile the CUDA-graph capture with record_shapes=True"))
        replays = plural(int(np.unique(key[selected]).size), "replay")
        out.append(NotMeasured(
            what="graph-replayed kernels not tied to ops", time_ns=int(ns), has_share=True, share_pct=None,
            reason=f"{replays}, {100.0 * ns / all_ns:.0f}% of the replayed kernel time in the window: {why}{done}",
            capture_hint=for_vendor(hint, trace_vendor(trace))))
    return out


@dataclass(frozen=True, slots=True)
class _OpCalls:
    """The shaped op calls with kernels in the window: their rows of ``trace.ops`` (ascending), the
    summed ns of their kernels, and their class codes."""

    rows: np.ndarray
    ns: np.ndarray
    kind: np.ndarray


def _op_calls(kernels: KernelTime, work: OpWork) -> _OpCalls:
    """Per op call: its kernels' time in the window."""
    op_time = pd.Series(kernels.kernel_dur).groupby(kernels.op_of_kernel).sum()
    rows = op_time.index.to_numpy()
    return _OpCalls(rows=rows, ns=op_time.to_numpy(), kind=work.kind[rows])


def _class_rows(entry: dict | None, work: OpWork, calls: _OpCalls, measured: dict[str, float], total: dict[str, float],
                dominant: str | None) -> tuple[list[ClassRow], dict]:
    """The contract's class rows (rates, roofline, measured share, op calls) and the ns the dominant
    class wastes below its roofline (``{"class", "ns"}``, empty when its roofline is unknown)."""
    classes: list[ClassRow] = []
    wasted_ns: dict = {}
    for code, name in enumerate(opwork.CLASSES):
        selected = calls.kind == code
        if not selected.any():
            continue
        rows = calls.rows[selected]
        class_ns = calls.ns[selected].sum()
        row = ClassRow(name=name, rates=Rates.of(class_ns, work.flops[rows].sum(), work.bytes[rows].sum()),
                       roofline=roofline(entry, work.flops[rows], work.bytes[rows], work.dtype[rows], class_ns),
                       measured_share_pct=round(100.0 * measured[name] / total[name], 2) if total[name] else None,
                       ops=int(selected.sum()))
        classes.append(row)
        if name == dominant and row.roofline.pct_of_roofline is not None:
            wasted_ns = {"class": name, "ns": float(class_ns) * max(0.0, 1 - row.roofline.pct_of_roofline / 100.0)}
    return classes, wasted_ns


def _no_shape_hint(trace: Trace) -> str:
    """The capture that would give shapes to the kernels no shaped op launched."""
    if trace.ops.empty:
        return capture_hint(trace.format, is_native_trace(trace))
    if bool(len(trace.gpu)) and bool(trace.gpu["in_graph"].any()):
        return for_vendor("profile one step eagerly (CUDA graphs off, e.g. vLLM --enforce-eager) or also profile the "
                          "graph-capture phase with record_shapes=True so replayed kernels can be tied to their ops",
                          trace_vendor(trace))
    return NO_SHAPED_OP_HINT


LISTED_MIN_SHARE_PCT = 0.5  # a share the reports print as "0% of that class's time" is no not-measured item


def _unmeasured_rows(trace: Trace, kernels: KernelTime, unmeasured: dict[str, float],
                     total: dict[str, float]) -> list[NotMeasured]:
    """Per class, the not-measured entries of its kernels whose ops came without a dtype, and of those
    no shaped op launched; entries under LISTED_MIN_SHARE_PCT of their class's time are left out."""
    out = []
    for code, name in enumerate(opwork.CLASSES):
        no_dtype = float(kernels.untyped_by_class[code])
        if no_dtype > 0:
            out.append(NotMeasured(
                what=f"{name} kernels without dtype", time_ns=int(no_dtype),
                has_share=True, share_pct=round(100.0 * no_dtype / total[name], 2) if total[name] else None,
                reason="kernels of operators whose NVTX ranges give shapes but no data types, and whose kernel names "
                       "do not state one (or state two, as a conversion does): their bytes and peak are unknown",
                capture_hint=f"{KINETO_ALONE}: it records each operator's input types"))
        no_lengths = float(kernels.no_lengths_by_class[code])
        if no_lengths > 0:
            out.append(NotMeasured(
                what=f"{name} kernels without sequence lengths", time_ns=int(no_lengths),
                has_share=True, share_pct=round(100.0 * no_lengths / total[name], 2) if total[name] else None,
                reason="paged / ragged attention ops record the batch's packed tensors, not its sequence lengths "
                       "(those are device tensors: cu_seqlens, kv_indptr), and no step range around them carries "
                       "the lengths' aggregates: their FLOPs are unknown",
                capture_hint=STEP_LENGTHS_HINT))
        rest = unmeasured[name] - no_dtype - no_lengths
        if rest > 0:
            out.append(NotMeasured(
                what=f"{name} kernels without shapes", time_ns=int(rest),
                has_share=True, share_pct=round(100.0 * rest / total[name], 2) if total[name] else None,
                reason="kernels launched by no operator with recorded input shapes (CUDA/HIP graph replays, custom or "
                       "fused ops, kernels of ops outside the profiled CPU window): their work is unknown",
                capture_hint=_no_shape_hint(trace)))
    return [row for row in out if row.share_pct is None or row.share_pct >= LISTED_MIN_SHARE_PCT]


STEP_LENGTHS_HINT = ("annotate each engine step with its sequence-length aggregates, as TraceLens's patched vLLM "
                     "(execute_<T>_context_<n>(sq..sk..sqsq..sqsk..)_generation_<m>(...)) and SGLang "
                     "(step[DECODE ... g_sq=.. g_sk=.. g_sqsq=.. g_sqsk=..]) write them")

TOP_OPS = 10  # the (name, shape) groups of op calls with the most kernel time listed


def _top_ops(trace: Trace, entry: dict | None, work: OpWork, calls: _OpCalls) -> list[TopOp]:
    """The op calls grouped per (name, shape), most kernel time first: rates and roofline of each."""
    if not len(calls.rows):
        return []
    ops = trace.ops
    names = [canonical_name(name) for name in ops["name"].to_numpy()[calls.rows].astype(str)]
    grouped = pd.DataFrame({"op": calls.rows, "t": calls.ns, "name": names,
                            "shape": ops["shape"].to_numpy()[calls.rows].astype(str)})
    top = grouped.groupby(["name", "shape"], sort=False).agg(t=("t", "sum"), n=("t", "size"), first=("op", "first"))
    out = []
    for (name, shape), group in top.sort_values("t", ascending=False).head(TOP_OPS).iterrows():
        members = grouped.loc[(grouped["name"] == name) & (grouped["shape"] == shape), "op"].to_numpy()
        dims = json.loads(shape)[0]
        first = int(group["first"])
        out.append(TopOp(name=name, kind=opwork.CLASSES[work.kind[first]], input_dims=dims, dtype=work.dtype[first],
                         count=int(group["n"]), rates=Rates.of(group["t"], work.flops[members].sum(), work.bytes[members].sum()),
                         roofline=roofline(entry, work.flops[members], work.bytes[members], work.dtype[members], group["t"])))
    return out


def _no_shapes_row(trace: Trace, kernel_ns: float) -> dict:
    """The not-measured entry of a capture without any operator shapes (listed first)."""
    nvtx = trace.meta.get("nvtx_ops") or {}
    what = "the capture carries no operator input shapes"
    hint = capture_hint(trace.format, is_native_trace(trace))
    if trace.meta.get("untyped_shapes"):  # PyTorch 1.8-1.10: "Input dims" without "Input type"
        what = (f"the capture's {trace.meta['untyped_shapes']:,} operators record input dims without input types "
                "(an early PyTorch profiler's trace format)")
        hint = ("re-capture with a newer PyTorch, whose traces record 'Input type' beside 'Input dims', and "
                "torch.profiler.profile(record_shapes=True)")
    elif nvtx.get("op_ranges") and not nvtx.get("with_shapes"):
        what = (f"the capture's {nvtx['op_ranges']:,} PyTorch operator NVTX ranges carry no input shapes (nsys "
                "--pytorch=autograd-nvtx, not autograd-shapes-nvtx)")
    return NotMeasured(what="operator shapes", time_ns=int(kernel_ns),
                       reason=f"{what}: FLOPs and bytes per kernel, the roofline and the decode bandwidth floor are not measured",
                       capture_hint=hint)


def measure(trace: Trace, lo: int, hi: int, steps: list) -> Efficiency:
    """Efficiency of one trace in the window [lo, hi): device, classes, top ops, decode floor,
    what was not measured. ``steps`` are the trace's :class:`~tracetriage.analyzers.steps.Steps`."""
    work = op_works(trace.ops, op_steps(trace))
    tied = replayed_ops(trace)  # once: its grouping of the in-graph kernels is not cheap
    kernels = kernel_time(trace, lo, hi, work, tied)
    busiest = _busiest_device(kernels.ns_by_device)
    if busiest is None:  # no kernel in the window; graph replays traced whole may be all it ran
        graphs_only = _graph_not_measured(trace, lo, hi, np.empty(0, np.int64))
        models = trace.devices["name"].astype(str).unique() if len(trace.devices) else []
        if len(models) != 1:  # devices of several models (or none): which one ran is not known
            return Efficiency(not_measured=graphs_only)
        row = trace.devices.iloc[0]  # one model: the roof the window would be judged against is known
        _, device, _ = device_peaks(row)
        return Efficiency(device=device, device_name=str(row["name"]), not_measured=graphs_only)
    row = trace.devices.iloc[busiest]
    entry, device, unknown_device = device_peaks(row)
    not_measured: list[NotMeasured] = [unknown_device] if unknown_device else []
    unmeasured = {name: float(kernels.unmeasured_by_class[code]) for code, name in enumerate(opwork.CLASSES)}
    calls = _op_calls(kernels, work)
    measured = {name: float(calls.ns[calls.kind == code].sum()) for code, name in enumerate(opwork.CLASSES)}
    total = {name: measured[name] + unmeasured[name] for name in opwork.CLASSES}
    dominant = max(total, key=total.get) if any(total.values()) else None
    classes, wasted_ns = _class_rows(entry, work, calls, measured, total, dominant)
    not_measured.extend(_unmeasured_rows(trace, kernels, unmeasured, total))
    top_ops = _top_ops(trace, entry, work, calls)
    not_measured.extend(_graph_not_measured(trace, lo, hi, tied[0]))
    decode_floor = _decode_floor(not_measured, entry, work, calls, measured, total, steps, trace_vendor(trace))
    if trace.ops.empty:
        not_measured.insert(0, _no_shapes_row(trace, kernels.kernel_ns))
    return Efficiency(device=device, device_name=str(row["name"]), classes=classes, top_ops=top_ops,
                      decode_floor=decode_floor, not_measured=not_measured, dominant=dominant, unmeasured_ns=unmeasured,
                      kernel_ns=kernels.kernel_ns, wasted_ns=wasted_ns, conv_ns=kernels.conv_ns)


def _decode_floor(not_measured: list[NotMeasured], entry: dict | None, work: OpWork, calls: _OpCalls, measured: dict[str, float],
                  total: dict[str, float], steps: list, vendor: str) -> DecodeFloor | None:
    """The decode bandwidth floor (module docstring), or None; appends to ``not_measured`` why a
    decode-shaped trace has none (its capture hint in the ``vendor``'s words)."""
    gemm = calls.kind == 0
    if not gemm.any() or entry is None:
        return None
    gemm_tokens = work.tokens[calls.rows][gemm]
    order = np.argsort(gemm_tokens)
    gemm_ns = calls.ns[gemm][order]
    median_tokens = int(gemm_tokens[order][np.searchsorted(np.cumsum(gemm_ns), gemm_ns.sum() / 2)])
    if median_tokens > DECODE_MAX_TOKENS:
        return None
    with_steps = [process_steps for process_steps in steps if process_steps.count]
    if not with_steps:
        not_measured.append(NotMeasured(what="decode bandwidth floor", time_ns=None,
                                        reason=f"decode-shaped GEMMs (median {median_tokens} rows) but no steps: the "
                                               "step the floor bounds is unknown",
                                        capture_hint=for_vendor("mark each engine step (torch.profiler schedule steps, or "
                                                                "an NVTX/record_function range per step), or pass "
                                                                "--step-range REGEX", vendor)))
        return None
    share = measured["gemm"] / total["gemm"] if total["gemm"] else 0.0
    if share < _threshold("decode_min_measured_share"):
        not_measured.append(NotMeasured(what="decode bandwidth floor", time_ns=None,
                                        reason=f"only {100 * share:.0f}% of GEMM time carries shapes: the weights read per "
                                               "step are not known",
                                        capture_hint=for_vendor("profile one decode step eagerly (CUDA graphs off) with "
                                                                "record_shapes=True", vendor)))
        return None
    step_count = sum(process_steps.count for process_steps in with_steps)
    streamed = calls.kind <= 1  # GEMM weights and the KV cache attention reads
    bytes_per_step = float(work.weight_bytes[calls.rows][streamed].sum()) / step_count
    floor_ns = bytes_per_step / float(entry["bandwidth_gbps"])
    measured_ns = float(np.median(np.concatenate([process_steps.durations for process_steps in with_steps])))
    return DecodeFloor(bytes_per_step=bytes_per_step, floor_ns=int(floor_ns), measured_ns=int(measured_ns),
                       pct_of_floor=round(100.0 * floor_ns / measured_ns, 2) if measured_ns else None,
                       steps=int(step_count), median_gemm_tokens=median_tokens,
                       source="weights from the GEMM shapes + KV cache from the attention shapes, per step")


# ---------------------------------------------------------------------------
# The JSON block, the judgement the rules read, the words healthy uses


def block(per_trace: list[TraceMetrics], serving: dict | None = None) -> dict | None:
    """The ``efficiency`` block of the analysis: the trace with the most measured kernel time
    (one block: Kineto captures are one per rank). Without a decode floor from the shapes, the
    serving artifacts may give one (:func:`serving_floor`)."""
    if not per_trace:
        return None
    best = max(per_trace, key=lambda trace: (sum(row.rates.time_ns for row in trace.efficiency.classes),
                                             trace.efficiency.kernel_ns))
    eff = best.efficiency
    floor, not_measured = eff.decode_floor, list(eff.not_measured)
    if floor is None and serving:
        floor, missing = serving_floor(serving, eff.device)
        if missing:
            not_measured.append(missing)
    return {"trace": best.meta.get("path"), "device_name": eff.device_name, "device": eff.device,
            "dominant_class": eff.dominant, "classes": [row.to_contract() for row in eff.classes],
            "top_ops": [op.to_contract() for op in eff.top_ops], "decode_floor": floor.to_contract() if floor else None,
            "not_measured": [row.to_contract() for row in not_measured], "coverage": coverage(eff)}


def coverage(eff: Efficiency) -> list[dict]:
    """Per class with kernel time in the window: its time, the part launched by ops whose work was
    measured, and that share (the contract's ``coverage``: how much of each class the rates speak for)."""
    out = []
    for name in opwork.CLASSES:
        measured = next((row.rates.time_ns for row in eff.classes if row.name == name), 0)
        total = measured + eff.unmeasured_ns.get(name, 0.0)
        if total > 0:
            out.append({"class": name, "time_ns": int(total), "measured_ns": int(measured),
                        "measured_share_pct": round(100.0 * measured / total, 2)})
    return out


def serving_floor(serving: dict, device: dict | None) -> tuple[DecodeFloor | None, NotMeasured | None]:
    """(decode floor, or what is missing for it) from serving artifacts: the weights one worker
    loaded (the log's "Model loading took N GiB": its shard, so per device under tensor
    parallelism) over the device's bandwidth, against the median TPOT (one decode step per output
    token). The KV cache read is not known from the log, so the floor is a lower bound of a lower
    bound; it is reported, and judges nothing on its own (no window to claim time from)."""
    weights = (serving.get("config") or {}).get("model_weights_bytes")
    latency = serving.get("latency") or {}
    client = (latency.get("client") or {}).get("tpot") or {}
    server = (latency.get("server") or {}).get("tpot") or {}
    tpot_ms, source = None, None
    for value, where in ((client.get("median"), "client median TPOT"), (client.get("mean"), "client mean TPOT"),
                         ((server.get("p50") or {}).get("value_ms"), "server TPOT p50 (histogram)")):
        if isinstance(value, (int, float)) and value > 0:
            tpot_ms, source = float(value), where
            break
    if not weights:
        return None, None  # no weights line: nothing to say beyond the shapes' not_measured
    if device is None or tpot_ms is None:
        what = ("the device's bandwidth (no known device in the traces)" if device is None
                else "a TPOT (no benchmark result or TPOT histogram)")
        return None, NotMeasured(what="decode bandwidth floor from the serving log", time_ns=None,
                                 reason=f"the log gives the weights per device ({weights / 2**30:.2f} GiB) but not {what}",
                                 capture_hint="add a GPU trace of the server (for the device) and a benchmark result or /metrics "
                                              "scrape (for TPOT) to the bundle")
    floor_ns = weights / float(device["bandwidth_gbps"])
    measured_ns = tpot_ms * 1e6
    return DecodeFloor(bytes_per_step=float(weights), floor_ns=int(floor_ns), measured_ns=int(measured_ns),
                       pct_of_floor=round(100.0 * floor_ns / measured_ns, 2), steps=None, median_gemm_tokens=None,
                       source=f"weights from the serving log's model-loading line (per device; KV cache read not included) "
                              f"against the {source}"), None


def judgement(eff: Efficiency | None) -> Judgement | None:
    """What the efficiency says about the dominant class (:class:`Judgement`), or None when there is
    nothing to say (no efficiency measured at all)."""
    if not eff or not eff.dominant:
        return None
    dominant = eff.dominant
    row = next((row for row in eff.classes if row.name == dominant), None)
    total = (row.rates.time_ns if row else 0) + eff.unmeasured_ns.get(dominant, 0.0)
    share = (row.rates.time_ns / total) if row and total else 0.0
    floor = eff.decode_floor
    if floor and floor.pct_of_floor is not None:
        return Judgement(kind=dominant, entry=row, measured=True, side="memory", decode=floor,
                         below=floor.pct_of_floor < _threshold("decode_floor_min_pct"),
                         text=f"decode steps at {floor.pct_of_floor:.0f}% of the bandwidth floor")
    if row is None or row.roofline.pct_of_roofline is None or share < _threshold("roofline_min_measured_share"):
        return Judgement(kind=dominant, entry=row, measured=False, below=False, side=None, decode=None,
                         text=f"{class_words(eff, dominant)} efficiency not measured")
    return Judgement(kind=dominant, entry=row, measured=True, side=row.roofline.bound, decode=None,
                     below=row.roofline.pct_of_roofline < _threshold("roofline_min_pct"), text=roofline_words(row, eff))


def peak_words(roof: Roofline) -> str:
    """The peak a row's % of roofline is held against, named: 'the 1,307 TFLOP/s datasheet dense BF16
    peak', and where the vendor publishes a measured max-achievable one ', 54% of the 708 TFLOP/s
    measured max-achievable' (the roofline of a class or a top op)."""
    dtype = DTYPE_WORDS.get(roof.peak_dtype, roof.peak_dtype)
    words = (f"the {roof.peak_tflops:,.0f} TFLOP/s datasheet dense {dtype} peak" if roof.peak_tflops
             else f"the datasheet dense {dtype} peak")
    if roof.pct_of_achievable is not None and roof.achievable_tflops:
        words += f", {roof.pct_of_achievable:.0f}% of the {roof.achievable_tflops:,.0f} TFLOP/s measured max-achievable"
    return words


def roofline_words(row: ClassRow, eff: Efficiency | None = None) -> str:
    """A class row's % of roofline in words, against the peak (named) or the bandwidth that bounds it."""
    what = class_words(eff, row.name)
    if row.roofline.bound == "compute":
        return f"{what} at {row.roofline.pct_of_roofline:.0f}% of {peak_words(row.roofline)}"
    return f"{what} at {row.roofline.pct_of_roofline:.0f}% of the datasheet memory-bandwidth roofline"


def healthy_words(per_trace: list[TraceMetrics]) -> str:
    """The efficiency clause of the healthy verdict: the dominant class's measured efficiency
    (and the GEMMs' when another class dominates), or why it is not measured."""
    efficiencies = [trace.efficiency for trace in per_trace]
    for eff in efficiencies:
        judged = judgement(eff)
        if judged and judged.measured:
            words = [judged.text]
            gemm = next((row for row in eff.classes if row.name == "gemm" and row.roofline.pct_of_roofline is not None), None)
            if judged.kind != "gemm" and gemm and \
                    (gemm.measured_share_pct or 0) >= 100 * _threshold("roofline_min_measured_share"):
                words.append(roofline_words(gemm, eff))
            return "; " + ", ".join(words)
    why = "no operator shapes"
    if any(_untyped_dominant(eff) for eff in efficiencies):
        why = "the operators' data types are neither in their NVTX ranges nor in their kernels' names"
    elif any(eff.classes for eff in efficiencies):
        why = ("device not in the device table" if not any(eff.device for eff in efficiencies if eff.classes)
               else "too little kernel time carries operator shapes")
    return f"; efficiency not measured ({why})"


def _untyped_dominant(eff: Efficiency) -> NotMeasured | None:
    """The not-measured entry of the dominant class's kernels whose ops came without a dtype, when
    they hold more of its time than the threshold lets go unmeasured."""
    untyped = next((row for row in eff.not_measured if row.what == f"{eff.dominant} kernels without dtype"), None)
    allowed_pct = 100 * (1 - _threshold("roofline_min_measured_share"))
    return untyped if untyped and (untyped.share_pct or 0) > allowed_pct else None


GRAPH_MISSING = ("graph-replayed kernels not tied to ops", "graph replays without kernels")


def missing_shapes(eff: Efficiency) -> NotMeasured | None:
    """The not-measured entry that says why the dominant class's efficiency is unknown, and so
    which capture would decide: no shaped op at all ("operator shapes"); shaped ops present but
    the class's ops came without data types; graph replays left untied (the largest such entry:
    the capture phase not profiled, ambiguous, the captured op without a formula, or nsys whole-
    graph intervals); else the larger of the class's kernels no shaped op launched and those whose
    ops lacked the step's sequence lengths."""
    not_measured = eff.not_measured
    why = next((row for row in not_measured if row.what == "operator shapes"), None) or _untyped_dominant(eff)
    if why:
        return why
    graph = [row for row in not_measured if row.what in GRAPH_MISSING]
    if graph:
        return max(graph, key=lambda row: row.time_ns or 0)
    own = [row for row in not_measured if row.what in (f"{eff.dominant} kernels without shapes",
                                                            f"{eff.dominant} kernels without sequence lengths")]
    return max(own, key=lambda row: row.time_ns or 0) if own else None
