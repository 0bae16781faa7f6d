#!/usr/bin/env python3
"""Generate a Kineto trace of the serving kernels with varlen attention and packed-weight GEMMs, with ground truth.

One host thread on an NVIDIA B200 runs, ROUNDS times over:

1. a prefill batch of equal-length prompts through ``flash_attn::_flash_attn_varlen_forward`` (not
   in an annotated step: the shapes determine the lengths, every prompt max_seqlen_q long);
2. a vLLM chunked-prefill + decode step (``execute_<T>_context_<n>(sq..sk..sqsq..sqsk..)_generation_<m>(...)``)
   through ``vllm::flash_attn_varlen_func`` over the paged KV cache;
3. a vLLM decode-only step through ``vllm::flash_attn_with_kvcache``;
4. an AWQ GEMM (``_C::awq_gemm``), an NVFP4 GEMM (``_C::cutlass_scaled_fp4_mm``) and a W8A8 grouped
   expert GEMM (``_C::cutlass_moe_mm``);
5. FlashInfer 0.2.0's attention ops (named after their JIT module's uri): a vLLM mixed step whose context
   requests go through the paged prefill run (NHD cache) and its decode requests through the decode run
   (HND cache), an SGLang extend step through the ragged run (keys: the new tokens), a single prefill
   and a single decode (lengths in the shapes);
6. DeepGEMM's FP8 block-scaled GEMM behind vLLM's ``vllm::fp8_gemm_nt_op`` and
   ``vllm::w8a8_block_fp8_matmul_deepgemm`` and SGLang's ``sglang::deep_gemm_fp8_fp8_bf16_nt``;
7. FlashInfer's TensorRT-LLM fused MoE as vLLM wraps it, with 128-block FP8 weights
   (``vllm::flashinfer_fused_moe_blockscale_fp8``) and BF16 weights in a block layout
   (``vllm::flashinfer_fused_moe_bf16``).

A second trace (``serving_models_rocm``, an AMD Instinct MI300X) runs AITER's attention ops: the CK
``aiter::mha_varlen_fwd`` over equal-length prompts, ``aiter::fmha_v3_varlen_fwd`` in an annotated
prefill step, ``aiter::pa_fwd_asm`` in a decode step, and the fixed-length ``aiter::mha_fwd``.

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
KERNEL_NS = {"prefill": 90 * US, "chunked": 50 * US, "decode": 30 * US, "awq": 40 * US, "fp4": 20 * US, "moe": 35 * US,
             "fi_paged": 45 * US, "fi_decode": 25 * US, "fi_ragged": 55 * US, "fi_single": 33 * US, "fi_single_decode": 9 * US,
             "deepgemm": 28 * US}
FI_CONTEXT = [(48, 80), (16, 0)]  # the FlashInfer step's context requests (new, cached)
FI_DECODES = [600, 1200]  # and its decode requests' contexts
FI_EXTEND = [(40, 0), (72, 0), (8, 0)]  # the SGLang extend step's prompts (the ragged run sees only these keys)
FI_SINGLE = (100, 200)  # the single prefill's (new, cached)
FI_SINGLE_DECODE = 777  # the single decode's context
FI_URI = "dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_128_posenc_0_use_swa_False_use_logits_cap_False"
DG_M, DG_K, DG_N, DG_BLOCK = 32, 7168, 2112, 128  # DeepGEMM: rows, depth, columns, scale block
FM_TOKENS, FM_EXPERTS, FM_TOP_K, FM_K, FM_N = 48, 16, 4, 1024, 512  # FlashInfer MoE: every expert local
KERNEL_NS.update({"fi_moe_fp8": 61 * US, "fi_moe_bf16": 83 * US})


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


def sglang_extend_name(prompts: list[tuple[int, int]]) -> str:
    """SGLang's annotated extend step over (new, cached) requests (TraceLens's patched SGLang)."""
    return (f"step[EXTEND bs={len(prompts)} c_sq={sum(n for n, _ in prompts)} c_sk={sum(n + c for n, c in prompts)} "
            f"c_sqsq={sum(n * n for n, _ in prompts)} c_sqsk={sum(n * (n + c) for n, c in prompts)} "
            "g_sq=0 g_sk=0 g_sqsq=0 g_sqsk=0]")


FI_SCALARS = ["Scalar"] * 6  # window_left, logits_soft_cap, sm_scale, rope_scale, rope_theta (+ lse)


def _flashinfer_mixed(w: Writer) -> None:
    """vLLM's FlashInfer backend over one step: the context tokens through the paged prefill run, the
    decode tokens through the decode run, each over its own part of the query."""
    context_rows = sum(n for n, _ in FI_CONTEXT)
    nhd, hnd = [PAGES, PAGE, KV_HEADS, HEAD_DIM], [PAGES, KV_HEADS, PAGE, HEAD_DIM]
    ws = [[128 << 20], [8 << 20], []]
    w.op(f"flashinfer::batch_prefill_with_kv_cache_{FI_URI}_f16qk_False_paged_run",
         [[]] + ws + [[context_rows, HEADS, HEAD_DIM], nhd, nhd, [], [], [3], [3], [64], [2], [], []] + [[]] * 7,
         ["Scalar", U8, U8, "GenericList", BF, BF, BF, "", "", I32, I32, I32, I32, "", "Scalar", *FI_SCALARS],
         ["1", "", "", "[1, 2]", "", "", "", "", "", "", "", "", "", "", "0", "-1", "0.0", "0.088", "1.0", "10000.0", ""],
         [("void flashinfer::BatchPrefillWithPagedKVCacheKernel<128, bf16>", KERNEL_NS["fi_paged"])])
    batch = len(FI_DECODES)
    w.op(f"flashinfer::batch_decode_with_kv_cache_{FI_URI}_run",
         ws + [[batch, HEADS, HEAD_DIM], hnd, hnd, [batch + 1], [200], [batch], []] + [[]] * 6,
         [U8, U8, "GenericList", BF, BF, BF, I32, I32, I32, "", "Scalar", *FI_SCALARS],
         ["", "", "[1]", "", "", "", "", "", "", "", "1", "-1", "0.0", "0.088", "1.0", "10000.0", ""],
         [("void flashinfer::BatchDecodeWithPagedKVCacheKernel<128, bf16>", KERNEL_NS["fi_decode"])])


def _flashinfer_ragged(w: Writer) -> None:
    """SGLang's FlashInfer backend over an extend step: the prompts' new tokens, causal, keys their own."""
    rows = sum(n for n, _ in FI_EXTEND)
    qkv = [[rows, HEADS, HEAD_DIM], [rows, KV_HEADS, HEAD_DIM], [rows, KV_HEADS, HEAD_DIM]]
    w.op(f"flashinfer::batch_prefill_with_kv_cache_{FI_URI}_f16qk_False_ragged_run",
         [[], [128 << 20], [8 << 20], []] + qkv + [[], [], [len(FI_EXTEND) + 1], [len(FI_EXTEND) + 1], [], []] + [[]] * 6,
         ["Scalar", U8, U8, "GenericList", BF, BF, BF, "", "", I32, I32, "", "Scalar", *FI_SCALARS],
         ["1", "", "", "[1]", "", "", "", "", "", "", "", "", "0", "-1", "0.0", "0.088", "1.0", "10000.0", ""],
         [("void flashinfer::BatchPrefillWithRaggedKVCacheKernel<128, bf16>", KERNEL_NS["fi_ragged"])])


def _flashinfer_single(w: Writer) -> None:
    """A single prefill (NHD) and a single decode (HND), their lengths the rows of q and k."""
    new, cached = FI_SINGLE
    kv = [new + cached, KV_HEADS, HEAD_DIM]
    w.op("flashinfer::single_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_head_dim_128_posenc_0_"
         "use_swa_False_use_logits_cap_False_f16qk_False_run",
         [[], [new, HEADS, HEAD_DIM], kv, kv, [], [8 << 20], []] + [[]] * 7,
         ["Scalar", BF, BF, BF, "", U8, "", "Scalar", *FI_SCALARS],
         ["1", "", "", "", "", "", "", "0", "-1", "0.0", "0.088", "1.0", "10000.0", ""],
         [("void flashinfer::SinglePrefillWithKVCacheKernel<128, bf16>", KERNEL_NS["fi_single"])])
    hnd = [KV_HEADS, FI_SINGLE_DECODE, HEAD_DIM]
    w.op("flashinfer::single_decode_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_head_dim_128_posenc_0_"
         "use_swa_False_use_logits_cap_False_run",
         [[HEADS, HEAD_DIM], hnd, hnd, [8 << 20], []] + [[]] * 6, [BF, BF, BF, U8, "", "Scalar", *FI_SCALARS[:5]],
         ["", "", "", "", "", "1", "-1", "0.0", "0.088", "1.0", "10000.0"],
         [("void flashinfer::SingleDecodeWithKVCacheKernel<128, bf16>", KERNEL_NS["fi_single_decode"])])


def _deepgemm(w: Writer) -> None:
    """DeepGEMM's FP8 GEMM through the three torch ops that wrap it (FP32 scales per 1x128 of A, 128x128 of B)."""
    a, b = [DG_M, DG_K], [DG_N, DG_K]
    a_s, b_s = [DG_M, DG_K // DG_BLOCK], [DG_N // DG_BLOCK, DG_K // DG_BLOCK]
    kernel = [("void deep_gemm::sm90_fp8_gemm_1d2d_impl<128, 128>", KERNEL_NS["deepgemm"])]
    w.op("vllm::fp8_gemm_nt_op", [a, a_s, b, b_s, [DG_M, DG_N], []], [FP8, F32, FP8, F32, BF, "Scalar"],
         ["", "", "", "", "", "False"], kernel)
    w.op("sglang::deep_gemm_fp8_fp8_bf16_nt", [a, a_s, b, b_s, [DG_M, DG_N]], [FP8, F32, FP8, F32, BF], [""] * 5, kernel)
    w.op("vllm::w8a8_block_fp8_matmul_deepgemm", [a, b, a_s, b_s, [], []], [FP8, FP8, F32, F32, "ScalarList", "ScalarType"],
         ["", "", "", "", "[128, 128]", "15"], kernel)


def _flashinfer_moe(w: Writer) -> None:
    """The two FlashInfer fused-MoE wrappers: routing logits, hidden states, the gated w13 (2N wide) and w2."""
    e, n, k, blk = FM_EXPERTS, FM_N, FM_K, DG_BLOCK
    logits, hidden = [FM_TOKENS, e], [FM_TOKENS, k]
    w.op("vllm::flashinfer_fused_moe_blockscale_fp8",
         [logits, [e], hidden, [e, 2 * n, k], [e, 2 * n // blk, k // blk], [e, k, n], [e, k // blk, n // blk]] + [[]] * 10,
         [F32, BF, BF, FP8, F32, FP8, F32] + ["Scalar"] * 7 + ["ScalarList", "Scalar", "Scalar"],
         [""] * 7 + [str(e), str(FM_TOP_K), "1", "1", str(n), "0", str(e), "[128, 128]", "2", "1.0"],
         [("void moe::dev::routing::routingKernel", 5 * US),
          ("bmm_E4m3_E4m3E4m3_Fp32_t128x64x128_s4_et64x64_m64x64x32_cga1x1x1_16dp256b_TN_transOut_dsFp8",
           KERNEL_NS["fi_moe_fp8"])])
    w.op("vllm::flashinfer_fused_moe_bf16",
         [logits, [], hidden, [e, 2 * n // blk, k, blk], [e, k // blk, n, blk]] + [[]] * 9,
         [BF, "", BF, BF, BF] + ["Scalar"] * 9, [""] * 5 + [str(e), str(FM_TOP_K), "", "", str(n), "0", str(e), "1", "8192"],
         [("bmm_Bfloat16_Bfloat16Bfloat16_Fp32_t128x64x64_s4_et64x64_m64x64x16_cga1x1x1_16dp256b_TN_transOut",
           KERNEL_NS["fi_moe_bf16"])])


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
        w.step(step_name(FI_CONTEXT, FI_DECODES), lambda: _flashinfer_mixed(w))
        w.step(sglang_extend_name(FI_EXTEND), lambda: _flashinfer_ragged(w))
        _flashinfer_single(w)
        _deepgemm(w)
        _flashinfer_moe(w)
    return _document(w.events, DEVICE_NAME, 191_000_000_000, (10, 0), 148), truth()


def _document(events: list, device: str, memory: int, compute: tuple[int, int], sms: int) -> dict:
    """A Kineto trace document of one rank on one device, shapes recorded."""
    return {"schemaVersion": 1, "record_shapes": 1,
            "deviceProperties": [{"id": 2, "name": device, "totalGlobalMem": memory, "computeMajor": compute[0],
                                  "computeMinor": compute[1], "numSms": sms}],
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
            "traceEvents": events, "displayTimeUnit": "ms"}


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
        **flashinfer_truth(), **deepgemm_truth(), **flashinfer_moe_truth(),
    }


def flashinfer_truth() -> dict:
    """Per FlashInfer op (the shared name of its calls): one call's FLOPs, bytes, kernel ns, dtype."""
    def entry(requests, ns):
        flops, moved = attention_truth(requests)
        return {"flops": flops, "bytes": moved, "dtype": "bf16", "time_ns": ns}

    return {
        "flashinfer::batch_prefill_with_kv_cache_<uri>_paged_run": entry(FI_CONTEXT, KERNEL_NS["fi_paged"]),
        "flashinfer::batch_decode_with_kv_cache_<uri>_run": entry([(1, n - 1) for n in FI_DECODES], KERNEL_NS["fi_decode"]),
        "flashinfer::batch_prefill_with_kv_cache_<uri>_ragged_run": entry(FI_EXTEND, KERNEL_NS["fi_ragged"]),
        "flashinfer::single_prefill_with_kv_cache_<uri>_run": entry([FI_SINGLE], KERNEL_NS["fi_single"]),
        "flashinfer::single_decode_with_kv_cache_<uri>_run": entry([(1, FI_SINGLE_DECODE - 1)], KERNEL_NS["fi_single_decode"]),
    }


def deepgemm_truth() -> dict:
    """DeepGEMM: 2·M·N·K; bytes: A and B in FP8, their FP32 block scales, D in BF16; weight: B and its scales."""
    weights = DG_N * DG_K + (DG_N // DG_BLOCK) * (DG_K // DG_BLOCK) * 4
    moved = DG_M * DG_K + DG_M * (DG_K // DG_BLOCK) * 4 + weights + DG_M * DG_N * 2
    one = {"flops": 2.0 * DG_M * DG_N * DG_K, "bytes": float(moved), "weight_bytes": float(weights), "dtype": "fp8",
           "time_ns": KERNEL_NS["deepgemm"]}
    return {name: dict(one) for name in ("vllm::fp8_gemm_nt_op", "sglang::deep_gemm_fp8_fp8_bf16_nt",
                                         "vllm::w8a8_block_fp8_matmul_deepgemm")}


ROCM_DEVICE = "AMD Instinct MI300X"
AITER_PROMPTS, AITER_PROMPT_LEN = 3, 192  # mha_varlen_fwd's equal-length prompts
AITER_STEP = [(40, 0), (88, 0), (24, 0)]  # fmha_v3_varlen_fwd's step: prompts of other lengths
AITER_DECODES = [500, 1500, 3000, 250]  # pa_fwd_asm's decode contexts
AITER_BATCH, AITER_LEN = 2, 128  # mha_fwd's fixed-length batch
AITER_NS = {"varlen": 70 * US, "v3": 52 * US, "pa": 26 * US, "fixed": 31 * US}


def _aiter_varlen(w: Writer, name: str, prompts: list[tuple[int, int]], max_len: int, kernel: str, ns: int) -> None:
    """One of AITER's varlen forwards over packed prompts: (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
    max_seqlen_k, min_seqlen_q, dropout_p, softmax_scale, logits_soft_cap, zero_tensors, is_causal, ...)."""
    rows = sum(n for n, _ in prompts)
    q, kv = [rows, HEADS, HEAD_DIM], [rows, KV_HEADS, HEAD_DIM]
    cu = [len(prompts) + 1]
    w.op(name, [q, kv, kv, cu, cu] + [[]] * 12, [BF, BF, BF, I32, I32] + ["Scalar"] * 12,
         ["", "", "", "", "", str(max_len), str(max_len), "0", "0.0", "0.088", "0.0", "False", "True", "-1", "0", "0",
          "True"], [(kernel, ns)])


def build_rocm() -> tuple[dict, dict]:
    """(Kineto document, ground truth) of AITER's attention ops on an MI300X."""
    w = Writer()
    batch = len(AITER_DECODES)
    for _ in range(ROUNDS):
        _aiter_varlen(w, "aiter::mha_varlen_fwd", [(AITER_PROMPT_LEN, 0)] * AITER_PROMPTS, AITER_PROMPT_LEN,
                      "fmha_fwd_d128_bf16_group_b128x128x32_causal", AITER_NS["varlen"])
        w.step(step_name(AITER_STEP, []), lambda: _aiter_varlen(
            w, "aiter::fmha_v3_varlen_fwd", AITER_STEP, max(n for n, _ in AITER_STEP),
            "_ZN5aiter34fmha_fwd_hd128_bf16_causal_group", AITER_NS["v3"]))
        w.step(step_name([], AITER_DECODES), lambda: w.op(
            "aiter::pa_fwd_asm", [[batch, HEADS, HEAD_DIM], [PAGES, KV_HEADS, HEAD_DIM // 8, PAGE, 8],
                                  [PAGES, KV_HEADS, HEAD_DIM, PAGE], [batch, 256], [batch], [], []],
            [BF, BF, BF, I32, I32, "Scalar", "Scalar"], ["", "", "", "", "", "256", "1"],
            [("_ZN5aiter39pa_bf16_pertokenFp8_gqa8_2tg_4w_asm", AITER_NS["pa"])]))
        qkv = [[AITER_BATCH, AITER_LEN, HEADS, HEAD_DIM]] + [[AITER_BATCH, AITER_LEN, KV_HEADS, HEAD_DIM]] * 2
        w.op("aiter::mha_fwd", qkv + [[]] * 8, [BF, BF, BF] + ["Scalar"] * 8,
             ["", "", "", "0.0", "0.088", "True", "-1", "0", "0", "True", "False"],
             [("fmha_fwd_d128_bf16_batch_b128x128x32_causal", AITER_NS["fixed"])])
    return _document(w.events, ROCM_DEVICE, 205_822_885_888, (9, 4), 304), rocm_truth()


def rocm_truth() -> dict:
    """Per AITER op: one call's FLOPs, bytes, kernel ns, dtype. The fixed-length mha_fwd follows the SDPA
    convention (TraceLens's, opwork's): a causal mask over Nq = Nkv halves the full Nq·Nkv product."""
    def entry(requests, ns):
        flops, moved = attention_truth(requests)
        return {"flops": flops, "bytes": moved, "dtype": "bf16", "time_ns": ns}

    tokens = AITER_BATCH * AITER_LEN
    fixed_bytes = (tokens * 2 * HEADS * HEAD_DIM + tokens * 2 * KV_HEADS * HEAD_DIM) * 2
    return {
        "device": ROCM_DEVICE, "rounds": ROUNDS,
        "aiter::mha_varlen_fwd": entry([(AITER_PROMPT_LEN, 0)] * AITER_PROMPTS, AITER_NS["varlen"]),
        "aiter::fmha_v3_varlen_fwd": entry(AITER_STEP, AITER_NS["v3"]),
        "aiter::pa_fwd_asm": entry([(1, n - 1) for n in AITER_DECODES], AITER_NS["pa"]),
        "aiter::mha_fwd": {"flops": 4.0 * HEADS * HEAD_DIM * AITER_BATCH * AITER_LEN * AITER_LEN / 2,
                           "bytes": float(fixed_bytes), "dtype": "bf16", "time_ns": AITER_NS["fixed"]},
    }


def flashinfer_moe_truth() -> dict:
    """Both MoE layers: each of the M tokens through k experts, a gated up GEMM (K -> 2N) and a down one
    (N -> K); bytes: the hidden states read and the output written (BF16), the intermediate written and read
    (M·k·N in BF16), and the experts' weights — all of them, as M·k >= E — as stored (FP8 with FP32 128x128
    block scales, or BF16)."""
    routed = FM_TOKENS * FM_TOP_K
    flops = 2.0 * routed * FM_K * 2 * FM_N + 2.0 * routed * FM_N * FM_K
    activations = 2 * FM_TOKENS * FM_K * 2 + 2 * routed * FM_N * 2
    elements = FM_EXPERTS * (2 * FM_N * FM_K + FM_K * FM_N)
    scales = FM_EXPERTS * (2 * FM_N // DG_BLOCK * FM_K // DG_BLOCK + FM_K // DG_BLOCK * FM_N // DG_BLOCK) * 4
    assert routed >= FM_EXPERTS  # every expert touched
    return {"vllm::flashinfer_fused_moe_blockscale_fp8": {"flops": flops, "bytes": float(activations + elements + scales),
                                                          "dtype": "fp8", "time_ns": KERNEL_NS["fi_moe_fp8"] + 5 * US},
            "vllm::flashinfer_fused_moe_bf16": {"flops": flops, "bytes": float(activations + 2 * elements), "dtype": "bf16",
                                                "time_ns": KERNEL_NS["fi_moe_bf16"]}}


def write(out: Path, rocm: bool = False) -> Path:
    """Write ``serving_models/trace.pt.trace.json.gz`` (``serving_models_rocm/``: the AITER trace) and its
    truth.json under ``out``; the folder."""
    folder = out / ("serving_models_rocm" if rocm else "serving_models")
    folder.mkdir(parents=True, exist_ok=True)
    doc, known = build_rocm() if rocm else build()
    with gzip.open(folder / "trace.pt.trace.json.gz", "wt", encoding="utf-8") as handle:
        json.dump(doc, handle)
    (folder / "truth.json").write_text(json.dumps(known, indent=1) + "\n", encoding="utf-8")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    out = parser.parse_args().out
    print(write(out))
    print(write(out, rocm=True))


if __name__ == "__main__":
    main()
