#!/usr/bin/env python3
"""Generate a PyTorch-profiler (Kineto) trace of LLM-serving kernels, with ground truth.

One host thread on an AMD Instinct MI300X runs three engine steps (ROUNDS times over), each an annotated range the
way the engines write them (TraceLens's formats, AMD-AGI/TraceLens TraceUtils/annotation_utils.py):

1. a vLLM chunked-prefill + decode step, ``execute_<T>_context_<n>(sq..sk..sqsq..sqsk..)_generation_<m>(...)``:
   ``vllm::unified_attention_with_output`` per layer, ``_C_cache_ops::reshape_and_cache_flash``, and
   ``vllm::moe_forward`` with the child ops vLLM's triton_kernels path records inside it (``TopK``
   with k in its Concrete Inputs, the views of the MXFP4 expert weights ``w1[E, K/2, 2N]`` and
   ``w2[E, N/2, K]`` in uint8) and its three kernels launched under its External id;
2. an SGLang decode step, ``step[DECODE bs=.. g_sq=.. g_sk=.. g_sqsq=.. g_sqsk=..]``:
   ``sglang_profiler::attention_paged_attention_ragged_<layer>`` per layer;
3. a vLLM step annotated without lengths (``execute_context_0(0)_generation_8(8)``): its attention
   cannot be counted, and a ``vllm::moe_forward`` recorded without its child ops cannot either.

The ground truth (truth.json) is computed here from the generated requests (each request's new and
cached tokens, not the aggregates the annotation prints) and shapes: attention FLOPs per request
2·H·(d_qk+d_v)·(new·cached + new·(new+1)/2) (the i-th new token attends to the cached ones and the first i new),
MoE FLOPs 2·(M·k)·K·2N + 2·(M·k)·N·K — independently of tracetriage's analyzers.

    python samples/gen_serving.py --out /tmp/serving
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

DEVICE_NAME = "AMD Instinct MI300X"
BF = "c10::BFloat16"
US = 1_000  # ns
T0_NS = 1_000_000_000_000

# the vLLM step: two context (prefill) requests (new tokens, cached tokens) and three decode requests (context)
CONTEXT_REQUESTS = [(96, 32), (24, 0)]
DECODE_CONTEXTS = [300, 700, 1500]
HEADS, KV_HEADS, HEAD_DIM = 16, 4, 64
LAYERS = 2
ROUNDS = 8  # the three steps, repeated: enough kernels for a window past the warm-up
# the MoE layer: tokens of the step, experts, top-k, hidden width, expert inner width (gated: 2N up)
EXPERTS, TOP_K, HIDDEN, INNER = 8, 2, 256, 128
# the SGLang decode step: each sequence's context, and the paged cache (pages of one token)
SGLANG_CONTEXTS = [1000, 2000, 4000, 8000]
SGLANG_HEADS, SGLANG_KV_HEADS, SGLANG_DIM, CACHE_PAGES = 32, 8, 128, 20000


def _lengths() -> dict:
    """The step annotation's aggregates, from the requests."""
    c_sq = sum(new for new, _ in CONTEXT_REQUESTS)
    c_sk = sum(new + cached for new, cached in CONTEXT_REQUESTS)
    return {"c_sq": c_sq, "c_sk": c_sk, "c_sqsq": sum(new * new for new, _ in CONTEXT_REQUESTS),
            "c_sqsk": sum(new * (new + cached) for new, cached in CONTEXT_REQUESTS),
            "g_sq": len(DECODE_CONTEXTS), "g_sk": sum(DECODE_CONTEXTS), "g_sqsq": len(DECODE_CONTEXTS),
            "g_sqsk": sum(DECODE_CONTEXTS)}


def vllm_step_name() -> str:
    n = _lengths()
    tokens = n["c_sq"] + n["g_sq"]
    return (f"execute_{tokens}_context_{len(CONTEXT_REQUESTS)}(sq{n['c_sq']}sk{n['c_sk']}sqsq{n['c_sqsq']}sqsk{n['c_sqsk']})"
            f"_generation_{len(DECODE_CONTEXTS)}(sq{n['g_sq']}sk{n['g_sk']}sqsq{n['g_sqsq']}sqsk{n['g_sqsk']})")


def sglang_step_name() -> str:
    count, total = len(SGLANG_CONTEXTS), sum(SGLANG_CONTEXTS)
    return f"step[DECODE bs={count} g_sq={count} g_sk={total} g_sqsq={count} g_sqsk={total}]"


def attention_truth(requests: list[tuple[int, int]], heads: int, kv_heads: int, d: int) -> tuple[float, float]:
    """(FLOPs, bytes) of one attention call over (new tokens, cached tokens) requests, request by request:
    each new token's q and output and its k and v in bf16; each cached token's k and v read."""
    # causal: the i-th new token (1-based) attends to the cached tokens and the first i new ones
    flops = sum(2.0 * heads * (d + d) * (new * cached + new * (new + 1) / 2) for new, cached in requests)
    moved = sum(new * (heads * 2 * d + kv_heads * 2 * d) * 2 + cached * kv_heads * 2 * d * 2 for new, cached in requests)
    return flops, float(moved)


def moe_truth(tokens: int) -> tuple[float, float]:
    """(FLOPs, bytes) of the MoE layer: gate+up and down GEMMs of every routed token; the hidden states read
    and the output written, the intermediate written and read, and the experts touched (all of them once
    tokens x k >= E) in packed MXFP4 bytes."""
    routed = tokens * TOP_K
    flops = 2.0 * routed * HIDDEN * 2 * INNER + 2.0 * routed * INNER * HIDDEN
    weights = min(EXPERTS, routed) / EXPERTS * (EXPERTS * HIDDEN // 2 * 2 * INNER + EXPERTS * INNER // 2 * HIDDEN)
    return flops, float(2 * tokens * HIDDEN * 2 + 2 * routed * INNER * 2 + weights)


class Writer:
    """Kineto events of one host thread and one GPU stream, in time order."""

    def __init__(self):
        self.pid, self.tid = 4343, 4343
        self.ext, self.corr = 100, 9000
        self.host, self.gpu = T0_NS, T0_NS + 50 * US
        self.events = [{"ph": "M", "name": "process_name", "pid": self.pid, "tid": 0, "args": {"name": "python"}}]

    def cpu_op(self, name: str, dims: list, types: list, concrete: list, start: int, dur: int) -> int:
        self.ext += 1
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": self.pid, "tid": self.tid, "ts": start / 1e3,
                            "dur": dur / 1e3, "args": {"External id": self.ext, "Input Dims": dims, "Input type": types,
                                                       "Concrete Inputs": concrete}})
        return self.ext

    def launch(self, ext: int, kernel: str, at: int, dur: int) -> None:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": self.pid, "tid": self.tid,
                            "ts": at / 1e3, "dur": 2.0, "args": {"External id": ext, "correlation": self.corr,
                                                                  "kernel": kernel}})
        self.gpu = max(self.gpu, at + 5 * US)
        self.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 2, "tid": 1, "ts": self.gpu / 1e3,
                            "dur": dur / 1e3, "args": {"External id": ext, "device": 2, "stream": 1,
                                                       "correlation": self.corr}})
        self.gpu += dur + 2 * US

    def op(self, name: str, dims: list, types: list, concrete: list, kernels: list[tuple[str, int]],
           children: list[tuple[str, list, list, list]] = ()) -> None:
        """An op, the child ops recorded inside it, and its kernels (name, ns) launched under its External id."""
        start = self.host
        span = 10 * US + 4 * US * (len(children) + len(kernels))
        ext = self.cpu_op(name, dims, types, concrete, start, span)
        at = start + 2 * US
        for child in children:
            self.cpu_op(*child, at, 2 * US)
            at += 4 * US
        for kernel, dur in kernels:
            self.launch(ext, kernel, at, dur)
            at += 4 * US
        self.host = start + span + 2 * US

    def step(self, name: str, body) -> None:
        start = self.host
        self.host += 1 * US
        body()
        self.events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": self.pid, "tid": self.tid,
                            "ts": start / 1e3, "dur": (self.host - start) / 1e3, "args": {}})
        self.host += 5 * US


ATTENTION_NS, MOE_NS, CACHE_NS, SGLANG_NS = 40 * US, (60 * US, 40 * US, 10 * US), 8 * US, 30 * US


def _moe(w: Writer, tokens: int, recorded: bool) -> None:
    children = [("TopK", [[tokens, EXPERTS], [], [], [], [], [], []], [BF, "Scalar", "Scalar", "Scalar", "Scalar", "", ""],
                 ["", str(TOP_K), "True", "1", "True", "", ""]),
                ("aten::view", [[EXPERTS, HIDDEN // 2, 2 * INNER], []], ["unsigned char", "ScalarList"],
                 ["", f"[{EXPERTS}, {HIDDEN // 2}, {2 * INNER}]"]),
                ("aten::view", [[EXPERTS, INNER // 2, HIDDEN], []], ["unsigned char", "ScalarList"],
                 ["", f"[{EXPERTS}, {INNER // 2}, {HIDDEN}]"])] if recorded else []
    kernels = [("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", MOE_NS[0]),
               ("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1", MOE_NS[1]), ("_finalize_matmul_scatter_bf16", MOE_NS[2])]
    w.op("vllm::moe_forward", [[tokens, HIDDEN], [tokens, EXPERTS], [], []], [BF, BF, "", ""], ["", "", "", ""],
         kernels, children)


def build() -> tuple[dict, dict]:
    """(Kineto document, ground truth)."""
    w = Writer()
    tokens = sum(new for new, _ in CONTEXT_REQUESTS) + len(DECODE_CONTEXTS)
    q, kv = [tokens, HEADS, HEAD_DIM], [tokens, KV_HEADS, HEAD_DIM]

    def vllm_layers():
        for _ in range(LAYERS):
            w.op("_C_cache_ops::reshape_and_cache_flash", [kv, kv, [4096, 16, KV_HEADS, HEAD_DIM],
                                                            [4096, 16, KV_HEADS, HEAD_DIM], [tokens], [], [], []],
                 [BF, BF, BF, BF, "long int", "", "float", "float"], [""] * 8,
                 [("void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16>", CACHE_NS)])
            w.op("vllm::unified_attention_with_output", [q, kv, kv, q, [], [], [], [0]], [BF, BF, BF, BF, "", "", "", BF],
                 [""] * 8, [("kernel_unified_attention_2d", ATTENTION_NS)])
            _moe(w, tokens, recorded=True)

    def sglang_layers():
        count = len(SGLANG_CONTEXTS)
        cache = [CACHE_PAGES, 1, SGLANG_KV_HEADS, SGLANG_DIM]
        for layer in range(LAYERS):
            w.op(f"sglang_profiler::attention_paged_attention_ragged_{layer + 100}",
                 [[count, SGLANG_HEADS, SGLANG_DIM], [1 << 20], [count, SGLANG_HEADS, SGLANG_DIM], cache, cache, [count + 1],
                  [CACHE_PAGES], [count], [], [1], [1], []],
                 [BF, "unsigned char", BF, BF, BF, "int", "int", "int", "", "float", "float", ""], [""] * 12,
                 [("void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16>", SGLANG_NS)])

    def unannotated():
        w.op("vllm::unified_attention_with_output", [[8, HEADS, HEAD_DIM], [8, KV_HEADS, HEAD_DIM], [8, KV_HEADS, HEAD_DIM],
                                                     [8, HEADS, HEAD_DIM], [], [], [], [0]],
             [BF, BF, BF, BF, "", "", "", BF], [""] * 8, [("kernel_unified_attention_2d", ATTENTION_NS)])
        _moe(w, 8, recorded=False)

    for _ in range(ROUNDS):
        w.step(vllm_step_name(), vllm_layers)
        w.step(sglang_step_name(), sglang_layers)
        w.step("execute_context_0(0)_generation_8(8)", unannotated)
    doc = {"schemaVersion": 1, "record_shapes": 1,
           "deviceProperties": [{"id": 2, "name": DEVICE_NAME, "totalGlobalMem": 205_822_885_888, "computeMajor": 9,
                                 "computeMinor": 4, "numSms": 304}],
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
           "traceEvents": w.events, "displayTimeUnit": "ms"}
    return doc, truth(tokens)


def truth(tokens: int) -> dict:
    """Per op kind: calls, FLOPs and bytes of one call, kernel ns; and what stays not measured."""
    vllm_requests = CONTEXT_REQUESTS + [(1, context - 1) for context in DECODE_CONTEXTS]
    attention = attention_truth(vllm_requests, HEADS, KV_HEADS, HEAD_DIM)
    sglang = attention_truth([(1, context - 1) for context in SGLANG_CONTEXTS], SGLANG_HEADS, SGLANG_KV_HEADS, SGLANG_DIM)
    moe = moe_truth(tokens)
    kv_elements = 2 * tokens * KV_HEADS * HEAD_DIM
    return {
        "device": DEVICE_NAME, "layers": LAYERS, "rounds": ROUNDS,  # per call below; LAYERS calls a step
        "vllm_attention": {"flops": attention[0], "bytes": attention[1], "time_ns": ATTENTION_NS},
        "sglang_attention": {"flops": sglang[0], "bytes": sglang[1], "time_ns": SGLANG_NS},
        "moe": {"flops": moe[0], "bytes": moe[1], "time_ns": sum(MOE_NS)},
        "kv_cache_write": {"flops": float(kv_elements), "bytes": float(2 * kv_elements * 2 + tokens * 8), "time_ns": CACHE_NS},
        "not_measured": {"attention_ns": ATTENTION_NS, "gemm_ns": sum(MOE_NS)},  # the finalize kernel's name says matmul
    }


def write(out: Path) -> Path:
    """Write ``serving_kernels/trace.pt.trace.json.gz`` and its truth.json under ``out``; the folder."""
    folder = out / "serving_kernels"
    folder.mkdir(parents=True, exist_ok=True)
    doc, known = build()
    with gzip.open(folder / "trace.pt.trace.json.gz", "wt", encoding="utf-8") as handle:
        json.dump(doc, handle)
    (folder / "truth.json").write_text(json.dumps(known, indent=1) + "\n", encoding="utf-8")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    print(write(parser.parse_args().out))


if __name__ == "__main__":
    main()
