#!/usr/bin/env python3
"""Generate a Kineto trace of the serving kernels with varlen attention and packed-weight GEMMs, with ground truth.

One host thread on an NVIDIA B200 runs, ROUNDS times over:

1. a prefill batch of equal-length prompts through ``flash_attn::_flash_attn_varlen_forward`` (not
   in an annotated step: the shapes determine the lengths, every prompt max_seqlen_q long);
2. a vLLM chunked-prefill + decode step (``execute_<T>_context_<n>(sq..sk..sqsq..sqsk..)_generation_<m>(...)``)
   through ``vllm::flash_attn_varlen_func`` over the paged KV cache;
3. a vLLM decode-only step through ``vllm::flash_attn_with_kvcache``;
4. an AWQ GEMM (``_C::awq_gemm``), an NVFP4 GEMM (``_C::cutlass_scaled_fp4_mm``) and a W8A8 grouped
   expert GEMM (``_C::cutlass_moe_mm``).

The ground truth (truth.json) is computed here from the generated requests and the logical shapes
(attention: 4·H·d FLOPs per (query, key) pair, counted per query token; GEMMs: 2·M·N·K with K and
N the unpacked widths), independently of tracetriage's analyzers.

    python samples/gen_serving_models.py --out /tmp/serving_models
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from gen_serving import BF, US, Writer

DEVICE_NAME = "NVIDIA B200"
HALF, FP8, U8, I32, I64, F32 = "c10::Half", "c10::Float8_e4m3fn", "unsigned char", "int", "long int", "float"
ROUNDS = 6
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
PROMPTS, PROMPT_LEN = 4, 256  # the equal-length prefill batch
CHUNKED = [(64, 192), (32, 0)]  # (new, cached) of the chunked-prefill requests
DECODES = [400, 900, 2000]  # the decode requests' context lengths (the new token included)
PAGES, PAGE = 4096, 16
AWQ_M, AWQ_K, AWQ_N, AWQ_GROUP = 16, 4096, 8192, 128
FP4_M, FP4_K, FP4_N = 64, 4096, 4096
MOE_TOKENS, MOE_TOP_K, MOE_EXPERTS, MOE_K, MOE_N = 64, 2, 8, 1536, 2048
KERNEL_NS = {"prefill": 90 * US, "chunked": 50 * US, "decode": 30 * US, "awq": 40 * US, "fp4": 20 * US, "moe": 35 * US}


def pair_count(new: int, cached: int, causal: bool = True) -> int:
    """(query, key) pairs of one request: its i-th new token (1-based) attends the cached keys and the
    first i new ones when causal, every key otherwise."""
    return sum(cached + (i if causal else new) for i in range(1, new + 1))


def attention_truth(requests: list[tuple[int, int]]) -> tuple[float, float]:
    """(FLOPs, bytes) of attention over the requests (new, cached): QKᵀ and PV, 2·d each per pair and
    head; bytes: each new token's Q and O and its K and V, each cached token's K and V, all bf16."""
    flops = sum(4.0 * HEADS * HEAD_DIM * pair_count(new, cached) for new, cached in requests)
    new_tokens = sum(new for new, _ in requests)
    cached_tokens = sum(cached for _, cached in requests)
    moved = new_tokens * (2 * HEADS * HEAD_DIM + 2 * KV_HEADS * HEAD_DIM) * 2 + cached_tokens * 2 * KV_HEADS * HEAD_DIM * 2
    return flops, float(moved)


def step_name(context: list[tuple[int, int]], generation: list[int]) -> str:
    """vLLM's annotated step (TraceLens's patched vLLM) over context requests (new, cached) and decode contexts."""
    def group(requests):
        return (f"sq{sum(n for n, _ in requests)}sk{sum(n + c for n, c in requests)}"
                f"sqsq{sum(n * n for n, _ in requests)}sqsk{sum(n * (n + c) for n, c in requests)}")

    decodes = [(1, length - 1) for length in generation]
    tokens = sum(n for n, _ in context) + len(generation)
    return f"execute_{tokens}_context_{len(context)}({group(context)})_generation_{len(generation)}({group(decodes)})"


def build() -> tuple[dict, dict]:
    """(Kineto document, ground truth)."""
    w = Writer()
    cache = [PAGES, PAGE, KV_HEADS, HEAD_DIM]
    packed_rows = PROMPTS * PROMPT_LEN
    chunk_tokens = sum(n for n, _ in CHUNKED) + len(DECODES)

    def prefill():
        q, kv = [packed_rows, HEADS, HEAD_DIM], [packed_rows, KV_HEADS, HEAD_DIM]
        w.op("flash_attn::_flash_attn_varlen_forward", [q, kv, kv, [PROMPTS + 1], [PROMPTS + 1]] + [[]] * 10,
             [BF, BF, BF, I32, I32, "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "", ""],
             ["", "", "", "", "", str(PROMPT_LEN), str(PROMPT_LEN), "0.0", "0.088", "True", "-1", "-1", "0.0", "", "False"],
             [("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>",
               KERNEL_NS["prefill"])])

    def chunked():
        w.op("vllm::flash_attn_varlen_func", [[chunk_tokens, HEADS, HEAD_DIM], cache, cache, [6], [6], [], [], [], [], [],
                                              [], [], [6, 128]],
             [BF, BF, BF, I32, I32, "Scalar", "Scalar", "Scalar", "Scalar", "GenericList", "Scalar", "", I32],
             ["", "", "", "", "", "64", "2000", "0.088", "True", "[-1, -1]", "0.0", "", ""],
             [("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>>",
               KERNEL_NS["chunked"])])

    def decode():
        batch = len(DECODES)
        w.op("vllm::flash_attn_with_kvcache", [[batch, 1, HEADS, HEAD_DIM], cache, cache, [batch], [batch, 128], [], [], [],
                                               []],
             [BF, BF, BF, I32, I32, "Scalar", "Scalar", "", "Scalar"], ["", "", "", "", "", "0.088", "True", "", "0.0"],
             [("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>>",
               KERNEL_NS["decode"])])

    def gemms():
        w.op("_C::awq_gemm", [[AWQ_M, AWQ_K], [AWQ_K, AWQ_N // 8], [AWQ_K // AWQ_GROUP, AWQ_N], [AWQ_K // AWQ_GROUP, AWQ_N // 8],
                              []], [HALF, I32, HALF, I32, "Scalar"], ["", "", "", "", "0"],
             [("void vllm::awq::gemm_forward_4bit_cuda_m16nXk32<128>", KERNEL_NS["awq"])])
        w.op("_C::cutlass_scaled_fp4_mm", [[FP4_M, FP4_N], [FP4_M, FP4_K // 2], [FP4_N, FP4_K // 2], [FP4_M, FP4_K // 16],
                                           [FP4_N, FP4_K // 16], [1]], [BF, U8, U8, FP8, FP8, F32], [""] * 6,
             [("cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<nvfp4>>", KERNEL_NS["fp4"])])
        rows = MOE_TOKENS * MOE_TOP_K
        w.op("_C::cutlass_moe_mm", [[rows, MOE_N], [rows, MOE_K], [MOE_EXPERTS, MOE_N, MOE_K], [rows, 1], [MOE_EXPERTS, MOE_N, 1],
                                    [MOE_EXPERTS], [MOE_EXPERTS, 3], [MOE_EXPERTS], [MOE_EXPERTS], [MOE_EXPERTS], [], []],
             [BF, FP8, FP8, F32, F32, I32, I32, I64, I64, I64, "Scalar", "Scalar"], [""] * 10 + ["True", "True"],
             [("cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<grouped_fp8>>", KERNEL_NS["moe"])])

    for _ in range(ROUNDS):
        prefill()
        w.step(step_name(CHUNKED, DECODES), chunked)
        w.step(step_name([], DECODES), decode)
        gemms()
    doc = {"schemaVersion": 1, "record_shapes": 1,
           "deviceProperties": [{"id": 2, "name": DEVICE_NAME, "totalGlobalMem": 191_000_000_000, "computeMajor": 10,
                                 "computeMinor": 0, "numSms": 148}],
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
           "traceEvents": w.events, "displayTimeUnit": "ms"}
    return doc, truth()


def truth() -> dict:
    """Per op: FLOPs and bytes of one call, its kernel ns, and the dtype whose peak applies."""
    decodes = [(1, length - 1) for length in DECODES]
    prefill = attention_truth([(PROMPT_LEN, 0)] * PROMPTS)
    chunked = attention_truth(CHUNKED + decodes)
    decode = attention_truth(decodes)
    awq_weights = AWQ_K * AWQ_N // 8 * 4 + AWQ_K // AWQ_GROUP * AWQ_N * 2 + AWQ_K // AWQ_GROUP * AWQ_N // 8 * 4
    fp4_weights = FP4_N * FP4_K // 2 + FP4_N * FP4_K // 16
    fp4_moved = FP4_M * FP4_K // 2 + FP4_M * FP4_K // 16 + fp4_weights + 4 + FP4_M * FP4_N * 2
    rows = MOE_TOKENS * MOE_TOP_K
    moe_weights = MOE_EXPERTS * MOE_N * MOE_K + MOE_EXPERTS * MOE_N * 4  # every expert touched: 128 rows over 8
    moe_moved = rows * MOE_K + rows * 4 + rows * MOE_N * 2 + moe_weights
    return {
        "device": DEVICE_NAME, "rounds": ROUNDS,
        "flash_attn::_flash_attn_varlen_forward": {"flops": prefill[0], "bytes": prefill[1], "dtype": "bf16",
                                                   "time_ns": KERNEL_NS["prefill"]},
        "vllm::flash_attn_varlen_func": {"flops": chunked[0], "bytes": chunked[1], "dtype": "bf16",
                                         "time_ns": KERNEL_NS["chunked"]},
        "vllm::flash_attn_with_kvcache": {"flops": decode[0], "bytes": decode[1], "dtype": "bf16",
                                          "time_ns": KERNEL_NS["decode"]},
        "_C::awq_gemm": {"flops": 2.0 * AWQ_M * AWQ_N * AWQ_K, "dtype": "fp16", "time_ns": KERNEL_NS["awq"],
                         "bytes": float(AWQ_M * AWQ_K * 2 + awq_weights + AWQ_M * AWQ_N * 2), "weight_bytes": float(awq_weights)},
        "_C::cutlass_scaled_fp4_mm": {"flops": 2.0 * FP4_M * FP4_N * FP4_K, "bytes": float(fp4_moved), "dtype": "fp4",
                                      "weight_bytes": float(fp4_weights), "time_ns": KERNEL_NS["fp4"]},
        "_C::cutlass_moe_mm": {"flops": 2.0 * rows * MOE_N * MOE_K, "bytes": float(moe_moved), "dtype": "fp8",
                               "weight_bytes": float(moe_weights), "time_ns": KERNEL_NS["moe"]},
    }


def write(out: Path) -> Path:
    """Write ``serving_models/trace.pt.trace.json.gz`` and its truth.json under ``out``; the folder."""
    folder = out / "serving_models"
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
