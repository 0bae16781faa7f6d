#!/usr/bin/env python3
"""Generate PyTorch-profiler (Kineto) traces and/or nsys exports with recorded shapes and chosen kernel speeds, with ground truth.

Each scenario is a host thread issuing ops to one GPU stream, written the way the PyTorch profiler
writes them with ``record_shapes=True``: a ``cpu_op`` event per op (``Input Dims``, ``Input type``,
``Concrete Inputs``, ``External id``), the ``cudaLaunchKernel`` it makes (same External id, a
``correlation``), the kernel on the GPU (same External id and correlation), and a ``ProfilerStep#N``
range per step. Every kernel's duration is chosen from its work: a GEMM that should run at 25% of
the device's BF16 peak lasts ``flops / (0.25 * peak)``; a memory-bound kernel at 80% of the
bandwidth lasts ``bytes / (0.8 * bandwidth)``. Idle gaps between kernels set the busy share.

The ground truth (truth/<folder>.json beside the folders) is computed here from what was generated:
FLOPs by 2·M·N·K, bytes by summing operand sizes, the H100 SXM datasheet peaks written below — independently of
tracetriage's analyzers.

    python samples/gen_efficiency.py --out /tmp/eff                 # every scenario, Kineto and nsys
    python samples/gen_efficiency.py --out /tmp/eff --only gemm_slow --format nsys
"""

from __future__ import annotations

import argparse
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

# NVIDIA H100 SXM datasheet, dense (the sparse figures halved): BF16 1979/2 TFLOP/s, 3.35 TB/s
DEVICE_NAME = "NVIDIA H100 80GB HBM3"
PEAK_BF16_TFLOPS = 989.4
BANDWIDTH_GBPS = 3350.0
BF16 = 2
US = 1_000  # ns


@dataclass
class Op:
    name: str
    dims: list
    types: list
    concrete: list
    kernel: str
    flops: float
    nbytes: float
    klass: str
    weight_bytes: float = 0.0


def gemm(M: int, N: int, K: int) -> Op:
    """aten::mm(A[M,K], B[K,N]) in bf16."""
    return Op("aten::mm", [[M, K], [K, N]], ["c10::BFloat16", "c10::BFloat16"], ["", ""],
              "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel",
              2.0 * M * N * K, float((M * K + K * N + M * N) * BF16), "gemm", weight_bytes=float(K * N * BF16))


def silu_mul(rows: int, cols: int) -> Op:
    """aten::mul of two bf16 [rows, cols] tensors."""
    n = rows * cols
    return Op("aten::mul", [[rows, cols], [rows, cols]], ["c10::BFloat16", "c10::BFloat16"], ["", ""],
              "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16>>",
              float(n), float(3 * n * BF16), "memory_bound")


def decode_attention(batch: int, heads: int, kv_heads: int, context: int, d: int) -> Op:
    """aten::_scaled_dot_product_flash_attention, one query token per sequence, not causal."""
    q, kv = [batch, heads, 1, d], [batch, kv_heads, context, d]
    kv_bytes = 2.0 * batch * kv_heads * context * d * BF16
    return Op("aten::_scaled_dot_product_flash_attention", [q, kv, kv, [], [], [], []],
              ["c10::BFloat16"] * 3 + ["Scalar"] * 4, ["", "", "", "0.", "False", "False", "0.088"],
              "void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>",
              4.0 * batch * heads * context * d, 2.0 * batch * heads * d * BF16 + kv_bytes, "attention",
              weight_bytes=kv_bytes)


@dataclass
class Scenario:
    name: str
    description: str
    step_ops: list[Op]
    speed: dict  # class -> fraction of its roofline bound the kernels run at
    busy: float  # kernel time / step time
    steps: int = 12
    events: list = field(default_factory=list)


def duration_ns(op: Op, speed: dict) -> int:
    """The kernel lasts its roofline time divided by the chosen fraction of the roofline."""
    compute_ns = op.flops / (PEAK_BF16_TFLOPS * 1e3)
    memory_ns = op.nbytes / BANDWIDTH_GBPS
    return max(5 * US, round(max(compute_ns, memory_ns) / speed[op.klass]))


def scenarios() -> dict[str, Scenario]:
    prefill = [gemm(4096, 4096, 4096), silu_mul(4096, 4096), gemm(4096, 11008, 4096), gemm(4096, 4096, 11008),
               silu_mul(4096, 11008)]
    decode = []
    for _ in range(4):  # four layers of an 8-sequence decode: QKV, attention, out, gate/up, down
        decode += [gemm(8, 6144, 4096), decode_attention(8, 32, 8, 2048, 128), gemm(8, 4096, 4096),
                   gemm(8, 28672, 4096), silu_mul(8, 14336), gemm(8, 4096, 14336)]
    return {
        "gemm_slow": Scenario("gemm_slow", "prefill GEMMs at 25% of the BF16 peak on a 97%-busy GPU", prefill,
                              {"gemm": 0.25, "memory_bound": 0.8, "attention": 0.8}, busy=0.97),
        "gemm_fast": Scenario("gemm_fast", "the same GEMMs at 75% of the BF16 peak, 97% busy", prefill,
                              {"gemm": 0.75, "memory_bound": 0.8, "attention": 0.8}, busy=0.97),
        "decode_slow": Scenario("decode_slow", "an 8-sequence decode whose kernels stream at 30% of the bandwidth, 97% busy",
                                decode, {"gemm": 0.30, "memory_bound": 0.30, "attention": 0.30}, busy=0.97),
    }


T0_NS = 1_000_000_000_000  # the first step's host clock, ns


def schedule(sc: Scenario) -> tuple[list, list]:
    """Every op call as (op, host ns, kernel start ns, kernel duration ns) — the op is issued on the
    host 8 us before its kernel starts, after an idle gap that sets the busy share — and each
    step's (first kernel's start, last kernel's end). Both writers below follow it."""
    gpu_t = T0_NS + 100 * US
    calls, step_bounds = [], []
    for _ in range(sc.steps):
        step_start = gpu_t
        for op in sc.step_ops:
            dur = duration_ns(op, sc.speed)
            gap = round(dur * (1 / sc.busy - 1))
            k_start = gpu_t + gap
            calls.append((op, k_start - 8 * US, k_start, dur))
            gpu_t = k_start + dur
        step_bounds.append((step_start, gpu_t))
    return calls, step_bounds


def truth_of(sc: Scenario, calls: list, step_bounds: list) -> dict:
    """The ground truth, from the generated shapes and durations alone."""
    per_class = {}
    kernel_ns_total = 0
    for op, _, _, dur in calls:
        c = per_class.setdefault(op.klass, {"time_ns": 0, "flops": 0.0, "bytes": 0.0, "roofline_ns": 0.0,
                                            "compute_ns": 0.0, "memory_ns": 0.0})
        c["time_ns"] += dur
        c["flops"] += op.flops
        c["bytes"] += op.nbytes
        c["compute_ns"] += op.flops / (PEAK_BF16_TFLOPS * 1e3)
        c["memory_ns"] += op.nbytes / BANDWIDTH_GBPS
        c["roofline_ns"] += max(op.flops / (PEAK_BF16_TFLOPS * 1e3), op.nbytes / BANDWIDTH_GBPS)
        kernel_ns_total += dur
    classes = {k: {**v, "achieved_tflops": v["flops"] / v["time_ns"] / 1e3, "achieved_gbps": v["bytes"] / v["time_ns"],
                   "pct_of_roofline": 100.0 * v["roofline_ns"] / v["time_ns"],
                   "bound": "compute" if v["compute_ns"] >= v["memory_ns"] else "memory"}
               for k, v in per_class.items()}
    step_ns = [e - s for s, e in step_bounds]
    streamed = sum(op.weight_bytes for op in sc.step_ops)
    floor_ns = streamed / BANDWIDTH_GBPS
    return {"scenario": sc.name, "description": sc.description, "device": DEVICE_NAME, "steps": sc.steps,
            "busy_pct": 100.0 * kernel_ns_total / sum(step_ns), "classes": classes,
            "dominant_class": max(classes, key=lambda k: classes[k]["time_ns"]),
            "step_ns": sorted(step_ns)[len(step_ns) // 2], "bytes_per_step": streamed, "floor_ns": floor_ns,
            "pct_of_floor": 100.0 * floor_ns / sorted(step_ns)[len(step_ns) // 2],
            "decode": all(len(op.dims[0]) != 2 or op.dims[0][0] <= 64 for op in sc.step_ops if op.klass == "gemm")}


def build(sc: Scenario) -> tuple[dict, dict]:
    """(Kineto document, ground truth) of one scenario."""
    pid, tid = 4242, 4242  # times in ns; written as µs floats like the profiler
    ext, corr = 1000, 50000
    events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}}]
    calls, step_bounds = schedule(sc)
    for op, host, k_start, dur in calls:
        ext += 1
        corr += 1
        events.append({"ph": "X", "cat": "cpu_op", "name": op.name, "pid": pid, "tid": tid, "ts": host / 1e3,
                       "dur": 5.0, "args": {"External id": ext, "Record function id": 0, "Input Dims": op.dims,
                                            "Input type": op.types, "Concrete Inputs": op.concrete,
                                            "Input Strides": [[] for _ in op.dims]}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                       "ts": (host + 1 * US) / 1e3, "dur": 3.0,
                       "args": {"External id": ext, "cbid": 211, "correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": op.kernel, "pid": 0, "tid": 7, "ts": k_start / 1e3,
                       "dur": dur / 1e3, "args": {"External id": ext, "queued": 0, "device": 0, "context": 1,
                                                  "stream": 7, "correlation": corr, "grid": [132, 1, 1],
                                                  "block": [384, 1, 1]}})
    for i, (s, e) in enumerate(step_bounds):  # host step ranges: the step's first op to the next step's
        host_s = s - 8 * US + 0  # the first op of the step is issued 8 us before its kernel (after its gap)
        host_e = step_bounds[i + 1][0] - 8 * US if i + 1 < len(step_bounds) else e
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": pid, "tid": tid,
                       "ts": host_s / 1e3, "dur": (host_e - host_s) / 1e3, "args": {"External id": 10 + i}})
    doc = {"schemaVersion": 1, "record_shapes": 1,
           "deviceProperties": [{"id": 0, "name": DEVICE_NAME, "totalGlobalMem": 85_017_755_648, "computeMajor": 9,
                                 "computeMinor": 0, "numSms": 132}],
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
           "traceEvents": events, "displayTimeUnit": "ms"}
    return doc, truth_of(sc, calls, step_bounds)


# --- the same scenarios as Nsight Systems exports taken with --pytorch=autograd-shapes-nvtx -------

# the kernels' full (demangled) names, as nsys writes them, where they differ from the Kineto ones;
# the short name nsys also writes drops the template arguments (and with them the data type)
NSYS_KERNELS = {
    "aten::mul": ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor<c10::BFloat16, "
                  "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float>>, "
                  "std::array<char *, (unsigned long)3>>(int, T2, T3)", "vectorized_elementwise_kernel"),
    "aten::_scaled_dot_product_flash_attention": (
        "void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<(int)128, (int)64, (int)128, (int)4, "
        "(bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)64, (int)128, (int)4, "
        "cutlass::bfloat16_t>>, (bool)0, (bool)1, (bool)0, (bool)0, (bool)1, (bool)0, (bool)0>(Flash_fwd_params)",
        "flash_fwd_splitkv_kernel"),
}


def nvtx_text(name: str, op_id: int, sizes: list, seq: int | None = None, inputs: int = 0) -> str:
    """An operator's NVTX range text exactly as PyTorch's emit_nvtx(record_shapes=True) writes it
    (torch/csrc/profiler/util.cpp getNvtxStr, shapesToStr, inputOpIdsToStr)."""
    text = name if seq is None else f"{name}, seq = {seq}"
    text += f", op_id = {op_id}"
    text += ", sizes = [" + ", ".join("[" + ", ".join(str(d) for d in dims) + "]" for dims in sizes) + "]"
    if inputs:
        text += ", input_op_ids = [" + ", ".join(f"({op_id - 1 - i},0)" for i in range(inputs)) + "]"
    return text


def build_nsys(sc: Scenario, path: Path, gemm_kernel: str | None = None, shapes: bool = True) -> dict:
    """Write the scenario as an nsys SQLite export (samples/generate.py's schema writer) in which
    PyTorch's operator ranges carry the shapes: each GEMM an ``aten::matmul`` range holding an
    ``aten::t`` range (a view: no kernel) and the ``aten::mm`` range whose ``cudaLaunchKernel``
    starts the kernel; the other ops one range each; a ``ProfilerStep#N`` range per step. Kernel
    times are those of :func:`build`, so the truth is the same. ``gemm_kernel`` renames the GEMM
    kernel (a name that states no dtype); ``shapes=False`` writes the ranges as
    ``--pytorch=autograd-nvtx`` does (no sizes). Returns the truth."""
    import generate  # samples/generate.py

    calls, step_bounds = schedule(sc)
    r = generate.Rank(pid=4242, device=0)
    op_id, seq = 7000, 300
    for op, host, k_start, dur in calls:
        r.corr += 1
        kernel, short = NSYS_KERNELS.get(op.name, (op.kernel, op.kernel))
        if op.klass == "gemm" and gemm_kernel:
            kernel = short = gemm_kernel
        r.short_names[kernel] = short
        sizes = op.dims

        def text(name, sz, **kw):
            if shapes:
                return nvtx_text(name, op_id, sz, **kw)
            if kw.get("seq") is not None:
                return f"{name}, seq = {kw['seq']}, op_id = {op_id}"
            return f"{name}, op_id = {op_id}"

        if op.name == "aten::mm":
            op_id += 1
            r.nvtx.append((host - 3 * US, host + 6 * US, text("aten::matmul", sizes, seq=seq, inputs=2)))
            op_id += 1
            r.nvtx.append((host - 2 * US, host - 1 * US, text("aten::t", [sizes[1]], inputs=1)))
        op_id += 1
        seq += 1
        r.nvtx.append((host, host + 5 * US, text(op.name, sizes, seq=seq, inputs=sum(1 for d in sizes if d))))
        r.api.append((host + 1 * US, host + 4 * US, "cudaLaunchKernel_v7000", r.corr))
        r.kernels.append((k_start, k_start + dur, kernel, r.corr, None))
    for i, (s, e) in enumerate(step_bounds):
        host_s = s - 8 * US
        host_e = step_bounds[i + 1][0] - 8 * US if i + 1 < len(step_bounds) else e
        r.nvtx.append((host_s, host_e, f"ProfilerStep#{i}"))
    r.nvtx.sort()
    generate.write_nsys(path, [r], f"efficiency_{sc.name}")
    return truth_of(sc, calls, step_bounds)


FORMATS = ("kineto", "nsys", "both")


def write(out: Path, only: list[str] | None = None, fmt: str = "kineto") -> list[Path]:
    """Write each scenario (or those named in ``only``) under ``out``: ``fmt`` kineto writes
    ``efficiency_NAME/trace.pt.trace.json.gz``, nsys ``efficiency_NAME_nsys/trace.sqlite`` (the
    same kernels, :func:`build_nsys`), both writes both; each folder's truth goes to
    ``truth/<folder>.json`` beside them (outside the bundle: a report would list a truth.json inside
    it as a skipped input), see :func:`truth_path`. The two formats go to separate folders:
    tracetriage analyzes one profiler's captures as one run."""
    known = scenarios()
    unknown = [n for n in only or [] if n not in known]
    if unknown:
        raise ValueError(f"unknown scenario {', '.join(unknown)}: the scenarios are {', '.join(known)}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt}: one of {', '.join(FORMATS)}")
    paths = []
    for name, sc in known.items():
        if only and name not in only:
            continue
        if fmt in ("kineto", "both"):
            doc, truth = build(sc)
            d = out / f"efficiency_{name}"
            d.mkdir(parents=True, exist_ok=True)
            with gzip.open(d / "trace.pt.trace.json.gz", "wt", encoding="utf-8") as fh:
                json.dump(doc, fh)
            _write_truth(d, truth)
            paths.append(d)
        if fmt in ("nsys", "both"):
            d = out / f"efficiency_{name}_nsys"
            d.mkdir(parents=True, exist_ok=True)
            (d / "trace.sqlite").unlink(missing_ok=True)
            truth = build_nsys(sc, d / "trace.sqlite")
            _write_truth(d, truth)
            paths.append(d)
    return paths


def truth_path(folder: Path) -> Path:
    """Where the ground truth of a scenario folder written by :func:`write` is: ``truth/<folder>.json``
    beside the folder, as generate.py keeps samples/truth outside the bundles."""
    return folder.parent / "truth" / f"{folder.name}.json"


def _write_truth(folder: Path, truth: dict) -> None:
    path = truth_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(truth, indent=1, sort_keys=True))


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Write generated captures with recorded shapes and chosen kernel speeds, and their ground truth "
                    "(DIR/truth/<folder>.json), as PyTorch-profiler (Kineto) traces and/or nsys SQLite exports "
                    "(the operator shapes in PyTorch's --pytorch=autograd-shapes-nvtx ranges).",
        epilog="scenarios: " + ", ".join(scenarios()))
    ap.add_argument("--out", type=Path, required=True, metavar="DIR",
                    help="folder to write into: one folder per scenario and format (efficiency_NAME/ for Kineto, "
                         "efficiency_NAME_nsys/ for nsys), each with truth.json")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="write only these scenarios (default: all of them)")
    ap.add_argument("--format", choices=FORMATS, default="both", dest="fmt",
                    help="kineto: trace.pt.trace.json.gz; nsys: trace.sqlite (an nsys export); both: each (default: both)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.only or [] if n not in scenarios()]
    if unknown:
        ap.error(f"unknown scenario {', '.join(unknown)} (valid: {', '.join(scenarios())})")
    for p in write(args.out, args.only, args.fmt):
        print(p)


if __name__ == "__main__":
    main()
