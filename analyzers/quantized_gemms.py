"""Work of quantized and grouped GEMM ops whose weights are stored packed: AWQ (W4A16), NVFP4
(W4A4 with FP8 block scales), the W8A8 grouped GEMM of a MoE layer's experts, and DeepGEMM's FP8
GEMM with fine-grained (block) scales.

Conventions (those of :mod:`opwork`'s GEMMs, so the counts compare with TraceLens's): FLOPs are the
dense equivalent, 2·M·N·K for ``C[M, N] = A[M, K] · B[K, N]`` whatever the storage (a packed
weight is unpacked and multiplied at full width); bytes are what the op reads and writes as
stored: the activations, the packed weight and its scales (and zero points), the output;
``weight_bytes`` is the packed weight and its scales (what a decode step streams); the dtype is
the one the tensor cores compute in, whose peak the op is held against (NVFP4: ``fp4``, where
the device has such a peak, else its fallback in :data:`peaks.DTYPE_FALLBACK`).

Every formula is a pure function of the shapes: no trace, no device.
"""

from __future__ import annotations

import math

from tracetriage.analyzers.opwork import Work

AWQ_PACK = 8  # 4-bit weights per int32 of AWQ's qweight and qzeros (vllm csrc/quantization/awq/gemm_kernels.cu)
FP4_PACK = 2  # e2m1 weights per byte of an NVFP4 tensor (two nibbles)


def _bytes(tensor) -> int:
    """Bytes of one recorded tensor (dims, bytes per element, dtype) as stored."""
    shape, size, _ = tensor
    return math.prod(shape) * size


def awq_gemm(tensors) -> Work | None:
    """vLLM's ``_C::awq_gemm(_in_feats[M, K], _kernel[K, N/8] int32, _scaling_factors[K/G, N],
    _zeros[K/G, N/8] int32, split_k_iters)`` (vllm csrc/torch_bindings.cpp and
    csrc/quantization/awq/gemm_kernels.cu: the output is ``[M, _kernel.size(1) · 8]`` in the
    input's dtype; AWQ, Lin et al. 2024, 4-bit weights in groups of G along K with one scale and one
    zero point per group and output channel). Dense-equivalent 2·M·N·K FLOPs; bytes = input +
    packed weight + scales + zeros read, output written; held against the input's dtype (the weights
    are dequantized to FP16 in the kernel)."""
    if len(tensors) < 4:
        return None
    activations, packed, scales, zeros = tensors[:4]
    (a, a_bytes, dtype), (weight, _, weight_kind) = activations, packed
    if len(a) != 2 or len(weight) != 2 or len(scales[0]) != 2 or weight_kind != "int32" or weight[0] != a[1]:
        return None
    columns = weight[1] * AWQ_PACK
    if scales[0][1] != columns:
        return None
    weight_bytes = float(_bytes(packed) + _bytes(scales) + _bytes(zeros))
    moved = math.prod(a) * a_bytes + weight_bytes + a[0] * columns * a_bytes
    return Work("gemm", 2.0 * a[0] * columns * a[1], float(moved), dtype, weight_bytes=weight_bytes, tokens=int(a[0]))


def cutlass_scaled_fp4_mm(tensors) -> Work | None:
    """vLLM's and SGLang's ``cutlass_scaled_fp4_mm(out[M, N], a[M, K/2], b[N, K/2], block_scale_a,
    block_scale_b, alpha)`` (vllm csrc/torch_bindings.cpp, csrc/quantization/fp4/; sgl-kernel's
    copy): NVFP4, e2m1 values two to a byte with one FP8 (e4m3) scale per 16 values and a global
    ``alpha``. Dense-equivalent 2·M·N·K FLOPs with K = 2 × a's last dim; bytes = a, b, both block
    scales and alpha as stored + out written; ``weight_bytes`` = b and its scales; held against the
    FP4 tensor-core peak."""
    if len(tensors) < 5:
        return None
    (out, out_bytes, _), (a, _, _), (b, _, _) = tensors[:3]
    if len(out) != 2 or len(a) != 2 or len(b) != 2 or a[1] != b[1] or out != [a[0], b[0]]:
        return None
    depth = a[1] * FP4_PACK
    weight_bytes = float(_bytes(tensors[2]) + _bytes(tensors[4]))
    moved = sum(_bytes(tensor) for tensor in tensors[1:6]) + math.prod(out) * out_bytes
    return Work("gemm", 2.0 * a[0] * b[0] * depth, float(moved), "fp4", weight_bytes=weight_bytes, tokens=int(a[0]))


def cutlass_moe_mm(tensors) -> Work | None:
    """vLLM's W8A8 grouped GEMM ``_C::cutlass_moe_mm(out_tensors[R, N], a_tensors[R, K],
    b_tensors[E, ·, ·], a_scales, b_scales, expert_offsets[E], problem_sizes[E, 3], a_strides,
    b_strides, c_strides, per_act_token, per_out_ch)`` (vllm csrc/torch_bindings.cpp,
    model_executor/layers/fused_moe/cutlass_moe.py): one of a MoE layer's two expert GEMMs, the
    R = M·k routed token rows (sorted by expert) each multiplied by its expert's FP8 weight
    (``b_tensors`` holds the E experts' [N, K] or [K, N]). FLOPs = 2·R·N·K (what the problem sizes
    add up to); bytes = a and its scales read, out written, plus the experts' weights touched:
    min(E, R)/E of b and its scales (the rows' experts are a device tensor: at most R distinct, as
    :func:`serving_work.moe_forward` bounds them); held against a's dtype (FP8)."""
    if len(tensors) < 5:
        return None
    (out, out_bytes, _), (a, a_bytes, dtype), (b, _, _) = tensors[:3]
    if len(out) != 2 or len(a) != 2 or len(b) != 3 or out[0] != a[0] or sorted(b[1:]) != sorted([out[1], a[1]]):
        return None
    rows, experts = a[0], b[0]
    if not rows or not experts:
        return None
    a_scales, b_scales = tensors[3], tensors[4]
    weight_bytes = min(experts, rows) / experts * (_bytes(tensors[2]) + _bytes(b_scales))
    moved = math.prod(a) * a_bytes + _bytes(a_scales) + math.prod(out) * out_bytes + weight_bytes
    return Work("gemm", 2.0 * rows * out[1] * a[1], float(moved), dtype, weight_bytes=float(weight_bytes), tokens=int(rows))


def deepgemm_fp8_nt(tensors) -> Work | None:
    """DeepGEMM's dense FP8 GEMM ``D[M, N] = A[M, K] · B[N, K]ᵀ`` with per-128 block scales
    (deepseek-ai/DeepGEMM, ``fp8_gemm_nt`` / ``gemm_fp8_fp8_bf16_nt``; scales per 1×128 of A and
    128×128 of B, FP32 or packed UE8M0), as the engines wrap it in a torch op: vLLM's
    ``vllm::fp8_gemm_nt_op(q_input[M, K], input_scale, weight[N, K], weight_scale, output[M, N],
    use_e8m0)`` (vllm model_executor/layers/quantization/utils/fp8_utils.py) and SGLang's
    ``sglang::deep_gemm_fp8_fp8_bf16_nt(A, As, B, Bs, C)`` (sglang srt/layers/quantization/fp8_kernel.py).
    2·M·N·K FLOPs; bytes = A, B and both scales as stored + D written; ``weight_bytes`` = B and its
    scales; held against the FP8 peak."""
    if len(tensors) < 5:
        return None
    (a, a_bytes, dtype), a_scales, (b, b_bytes, _), b_scales, (out, out_bytes, _) = tensors[:5]
    if len(a) != 2 or len(b) != 2 or len(out) != 2 or a[1] != b[1] or out != [a[0], b[0]] or dtype != "fp8":
        return None
    weight_bytes = float(math.prod(b) * b_bytes + _bytes(b_scales))
    moved = math.prod(a) * a_bytes + _bytes(a_scales) + weight_bytes + math.prod(out) * out_bytes
    return Work("gemm", 2.0 * a[0] * b[0] * a[1], float(moved), dtype, weight_bytes=weight_bytes, tokens=int(a[0]))


def block_fp8_matmul_deepgemm(tensors) -> Work | None:
    """vLLM's ``vllm::w8a8_block_fp8_matmul_deepgemm(A[M, K], B[N, K], As, Bs, block_size,
    output_dtype)`` (vllm model_executor/layers/quantization/deepgemm.py): DeepGEMM's FP8 GEMM
    (:func:`deepgemm_fp8_nt`) into a new output, which DeepGEMM writes in BF16 (the wrapper asserts
    it): the same count with D = M·N·2 bytes."""
    if len(tensors) < 4:
        return None
    a, b, a_scales, b_scales = tensors[:4]
    return deepgemm_fp8_nt([a, a_scales, b, b_scales, ([a[0][0], b[0][0]], 2, "bf16")]) if len(a[0]) == 2 and b[0] else None


FORMULAS = {
    "_C::awq_gemm": awq_gemm,
    "_C::cutlass_scaled_fp4_mm": cutlass_scaled_fp4_mm,
    "sgl_kernel::cutlass_scaled_fp4_mm": cutlass_scaled_fp4_mm,
    "_C::cutlass_moe_mm": cutlass_moe_mm,
    "vllm::fp8_gemm_nt_op": deepgemm_fp8_nt,
    "sglang::deep_gemm_fp8_fp8_bf16_nt": deepgemm_fp8_nt,
    "vllm::w8a8_block_fp8_matmul_deepgemm": block_fp8_matmul_deepgemm,
}
