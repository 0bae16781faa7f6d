"""Work of the kernels LLM serving spends its time in, from the op's recorded shapes, the step's
sequence lengths (:mod:`serving_lengths`) and the op's child ops: the registry of the serving ops'
formulas (attention's in :mod:`serving_attention`, packed-weight GEMMs' in :mod:`quantized_gemms`),
and here KV-cache writes, fused MoE experts and the W8A8 / Marlin GEMMs.

Every formula is a pure function of shapes and lengths: no trace, no device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracetriage.analyzers import quantized_gemms, serving_attention
from tracetriage.analyzers.opwork import Work, dtype_of, tensors_of
from tracetriage.analyzers.serving_lengths import OpCall, StepLengths, int_of, step_lengths
from tracetriage.model import WORK_OP_PREFIXES

__all__ = ["StepLengths", "step_lengths", "work", "handles", "needs_step", "canonical_name", "NAMES"]

SGLANG_ATTENTION_PREFIX = "sglang_profiler::attention_paged_attention_ragged_"
SGLANG_ATTENTION = SGLANG_ATTENTION_PREFIX + "<layer>"  # its calls, one name per layer, as one op


def reshape_and_cache(tensors) -> Work | None:
    """vLLM's ``reshape_and_cache[_flash](key[T,Hkv,d], value[T,Hkv,dv], key_cache, value_cache,
    slot_mapping[T], ...)`` (vllm csrc/cache_kernels.cu): each token's K and V read and written into
    its cache slot, the slot index read; no arithmetic (FLOPs: the elements written). A memory-bound op."""
    if len(tensors) < 5:
        return None
    (key, key_bytes, dtype), (value, value_bytes, _) = tensors[0], tensors[1]
    slots, slot_bytes = tensors[4][0], tensors[4][1]
    if len(key) != 3 or len(value) != 3 or len(slots) != 1 or slots[0] != key[0]:
        return None
    elements = math.prod(key) + math.prod(value)
    moved = 2 * (math.prod(key) * key_bytes + math.prod(value) * value_bytes) + slots[0] * slot_bytes
    return Work("memory_bound", float(elements), float(moved), dtype, weight_bytes=0.0)


# bytes per element of an expert weight's storage dtype, and how many logical weights one holds
PACKED = {"uint8": 1, "int8": 1, "fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4}


def moe_forward(tensors, context: list | None) -> Work | None:
    """vLLM's ``moe_forward(hidden_states[M, K], router_logits[M, E], layer)`` (vllm
    model_executor/layers/fused_moe/layer.py): the experts' weights and top-k are the layer's, not
    arguments. The trace records them inside the op: its ``TopK`` child op's k (Concrete Inputs[1]),
    and the views of the two expert weights, ``w1[E, K/p, N1]`` and ``w2[E, N2_in/p, K]`` (triton_kernels'
    matmul_ogs, p logical weights per stored element: 2 for MXFP4 packed in uint8). TraceLens models the
    same kernels (TraceLens/PerfModel/extensions/moe_perf_model_extensions.py, UnfusedMoE_Up/Down), but
    takes N = K where the trace does not say; here the weights' views say it, and without them no Work.

    Dense-equivalent FLOPs = 2·M·k·K·N1 (gate and up, N1 = 2·N2_in when gated) + 2·M·k·N2_in·K (down);
    bytes = hidden states read + expert weights touched + the intermediate written and read (M·k·N2_in
    in the activations' dtype, twice) + the output written; weights touched = min(E, M·k) of the E
    experts' packed bytes (every routed token picks k experts: at most M·k distinct; the routing itself
    is in device memory, so this is the bound, exact once M·k ≥ E and every expert is hit — the
    prefill case). Scales (MXFP4: one byte per 32 weights) are not counted. The dtype is the
    activations' (the MFMA runs in it after the weights are unpacked)."""
    if len(tensors) < 2 or not context:
        return None
    (hidden, act_bytes, dtype), (router, _, _) = tensors[0], tensors[1]
    if len(hidden) != 2 or len(router) != 2 or router[0] != hidden[0]:
        return None
    tokens, width = hidden
    experts = router[1]
    top_k = _child_top_k(context)
    weights = _expert_weight_views(context, experts)
    if not top_k or top_k > experts or len(weights) < 2:
        return None
    (w1, w1_bytes), (w2, w2_bytes) = weights[0], weights[1]
    packing = width // w1[1] if w1[1] and width % w1[1] == 0 else 0
    inner = w2[1] * packing
    if not packing or w2[2] != width or w1[2] not in (inner, 2 * inner):
        return None
    expert_bytes = math.prod(w1) * w1_bytes + math.prod(w2) * w2_bytes
    return _experts_work(ExpertShapes(tokens, width, top_k, experts, w1[2], inner), expert_bytes, act_bytes, dtype)


def _child_top_k(context: list) -> int | None:
    """The k of the op's ``TopK`` child op (its Concrete Inputs[1]), None when no such child."""
    return next((int_of(child[3][1]) for child in context if child[0] == "TopK" and isinstance(child[3], list)
                 and len(child[3]) > 1), None)


def _expert_weight_views(context: list, experts: int) -> list[tuple[list, int]]:
    """(dims, bytes per stored element) of the op's child ``aten::view`` calls on 3-D tensors with one
    row per expert in a storage dtype an expert weight has (:data:`PACKED`), in call order."""
    weights = []
    for name, dims, types, _concrete in context:
        if name == "aten::view" and dims and len(dims[0]) == 3 and dims[0][0] == experts and isinstance(types, list):
            stored = dtype_of(types[0]) if types else None
            if stored and stored[0] in PACKED:
                weights.append((dims[0], stored[1]))
    return weights


@dataclass(frozen=True, slots=True)
class ExpertShapes:
    """The logical shapes of one MoE layer's expert GEMMs: M tokens of width K, each routed to k of the
    E experts; ``gate_up`` = N1 (the first GEMM's output width, 2·N2 when gated), ``inner`` = N2 (the
    second GEMM's input width)."""

    tokens: int
    width: int
    top_k: int
    experts: int
    gate_up: int
    inner: int

    @property
    def routed(self) -> int:
        """Token-expert pairs: each of the M tokens goes through k experts."""
        return self.tokens * self.top_k


def _experts_work(shape: ExpertShapes, expert_bytes: float, act_bytes: int, dtype: str) -> Work:
    """The work of a MoE layer's two expert GEMMs (:func:`moe_forward`'s formula) from its shapes and
    the E experts' stored weight bytes, of which min(E, M·k)/E are touched."""
    routed = shape.routed
    flops = 2.0 * routed * shape.width * shape.gate_up + 2.0 * routed * shape.inner * shape.width
    weight_bytes = min(shape.experts, routed) / shape.experts * expert_bytes
    moved = shape.tokens * shape.width * act_bytes * 2 + 2 * routed * shape.inner * act_bytes + weight_bytes
    return Work("gemm", flops, float(moved), dtype, weight_bytes=float(weight_bytes), tokens=int(shape.tokens))


FUSED_EXPERTS = frozenset({"vllm::inplace_fused_experts", "vllm::outplace_fused_experts", "vllm::rocm_aiter_fused_moe",
                           "sglang::inplace_fused_experts", "sglang::outplace_fused_experts"})


def fused_experts(tensors) -> Work | None:
    """Fused MoE ops that take the expert weights as arguments: vLLM's ``inplace/outplace_fused_experts
    (hidden[M, K], w1[E, N1, K/p], w2[E, K, N2/p], topk_weights[M, k], topk_ids[M, k], ...)``
    (vllm model_executor/layers/fused_moe/fused_moe.py, SGLang's copy) and ``rocm_aiter_fused_moe``
    with the same first four (TraceLens's ``moe_aiter_fused_1stage``, moe_perf_model_extensions.py:
    p = K / w1's last dim, p logical weights per stored element for packed INT4; gated when
    N1 = 2·N2). FLOPs, bytes and the experts touched as :func:`moe_forward`'s; held against the
    weights' dtype when it is FP8 (W8A8: the activations are quantized to it), else the activations'."""
    if len(tensors) < 4:
        return None
    (hidden, act_bytes, act_dtype), (w1, w1_bytes, w_dtype), (w2, w2_bytes, _), (routing, _, _) = tensors[:4]
    if len(hidden) != 2 or len(w1) != 3 or len(w2) != 3 or len(routing) != 2 or routing[0] != hidden[0]:
        return None
    tokens, width = hidden
    experts, top_k = w1[0], routing[1]
    packing = width // w1[2] if w1[2] and width % w1[2] == 0 else 0
    inner = w2[2] * packing
    if not packing or w2[0] != experts or w2[1] != width or w1[1] not in (inner, 2 * inner) or not 0 < top_k <= experts:
        return None
    expert_bytes = math.prod(w1) * w1_bytes + math.prod(w2) * w2_bytes
    return _experts_work(ExpertShapes(tokens, width, top_k, experts, w1[1], inner), expert_bytes, act_bytes,
                         w_dtype if w_dtype == "fp8" else act_dtype)


# FlashInfer's TensorRT-LLM fused MoE as vLLM wraps it (vllm model_executor/layers/fused_moe/
# flashinfer_trtllm_moe.py): name -> (argument index of the hidden states, w13, w2; Concrete Inputs index of
# the global expert count, top_k, intermediate_size, local expert count)
FLASHINFER_MOE = {
    "vllm::flashinfer_fused_moe_blockscale_fp8": (2, 3, 5, 7, 8, 11, 13),
    "vllm::flashinfer_fused_moe_bf16": (2, 3, 4, 5, 6, 9, 11),
}


def flashinfer_fused_moe(call: OpCall, at: tuple) -> Work | None:
    """vLLM's wrappers of FlashInfer's TensorRT-LLM fused MoE: ``flashinfer_fused_moe_blockscale_fp8(
    routing_logits[M, E], routing_bias, x[M, K], w13[E, 2N, K] fp8, w13_scale, w2[E, K, N] fp8, w2_scale,
    global_num_experts, top_k, num_expert_group, topk_group, intermediate_size, expert_offset,
    local_num_experts, block_shape, ...)`` (DeepSeek-style 128-block FP8; x is quantized inside) and
    ``flashinfer_fused_moe_bf16(routing_logits, routing_bias, hidden_states[M, K], gemm1_weights,
    gemm2_weights, num_experts, top_k, n_group, topk_group, intermediate_size, local_expert_offset,
    local_num_experts, ...)`` (weights in the TRT-LLM block layout: their shapes are not [E, 2N, K], their
    element count is). Gated (SwiGLU: the first GEMM 2N wide), N = intermediate_size, k = top_k, so FLOPs,
    bytes and the experts touched are :func:`moe_forward`'s with E the local experts; the weights' element
    count must be E·2N·K and E·K·N. None under expert parallelism (local ≠ global experts: which routed pairs
    stay on this GPU is in device memory)."""
    hidden_at, w1_at, w2_at, experts_at, top_k_at, inner_at, local_at = at
    hidden, w1, w2 = call.at.get(hidden_at), call.at.get(w1_at), call.at.get(w2_at)
    experts, top_k, inner, local = (call.scalar(i) for i in (experts_at, top_k_at, inner_at, local_at))
    if hidden is None or w1 is None or w2 is None or len(hidden[0]) != 2 or not (experts and top_k and inner):
        return None
    tokens, width = hidden[0]
    if local != experts or w1[0][0] != experts or not 0 < top_k <= experts:
        return None
    if math.prod(w1[0]) != experts * 2 * inner * width or math.prod(w2[0]) != experts * width * inner:
        return None
    scales = (call.at.get(w1_at + 1), call.at.get(w2_at + 1)) if w1[2] == "fp8" else ()  # FP8: each weight's block scales
    expert_bytes = math.prod(w1[0]) * w1[1] + math.prod(w2[0]) * w2[1] + sum(
        math.prod(scale[0]) * scale[1] for scale in scales if scale is not None)
    return _experts_work(ExpertShapes(tokens, width, top_k, experts, 2 * inner, inner), expert_bytes, hidden[1], w1[2])


def cutlass_scaled_mm(tensors) -> Work | None:
    """vLLM's ``cutlass_scaled_mm(out[M, N], a[M, K], b[K, N], a_scales, b_scales, bias?)`` (vllm
    csrc/torch_bindings.cpp; FP8 or INT8 W8A8 with per-tensor, per-token or per-channel scales):
    2·M·N·K FLOPs (+ M·N with a bias), bytes = a + b + scales + bias read, out written; held against
    the peak of a's dtype."""
    if len(tensors) < 5:
        return None
    (out, out_bytes, _), (a, a_bytes, dtype), (b, b_bytes, _) = tensors[:3]
    if len(out) != 2 or len(a) != 2 or len(b) != 2 or a[1] != b[0] or out != [a[0], b[1]]:
        return None
    extras = tensors[3:6]
    bias = sum(math.prod(shape) for shape, _, _ in extras[2:] if shape == [b[1]])
    flops = 2.0 * a[0] * b[1] * a[1] + (a[0] * b[1] if bias else 0)
    moved = math.prod(a) * a_bytes + math.prod(b) * b_bytes + math.prod(out) * out_bytes \
        + sum(math.prod(shape) * size for shape, size, _ in extras)
    return Work("gemm", flops, float(moved), dtype, weight_bytes=float(math.prod(b) * b_bytes), tokens=int(a[0]))


def marlin_gemm(tensors, concrete: list) -> Work | None:
    """vLLM's ``gptq_marlin_gemm(a[M, K], ..., b_q_weight, b_scales, ..., size_m, size_n, size_k, ...)``
    (vllm csrc/torch_bindings.cpp; W4A16 / W8A16 GPTQ and AWQ, FP8 and NVFP4/MXFP4 weights on Marlin):
    the packed weight's shape depends on the tile layout, so N comes from the ``size_m, size_n,
    size_k`` arguments (three consecutive Concrete Inputs equal to M, ?, K). Dense-equivalent
    2·M·N·K FLOPs; bytes = a + the packed weight (``b_q_weight``, the first int32 tensor after a) and
    its scales (the tensor after it) as stored + the output M·N in a's dtype; held against a's dtype
    (the weights are dequantized to it)."""
    if not tensors or not concrete:
        return None
    a, a_bytes, dtype = tensors[0]
    if len(a) != 2:
        return None
    numbers = [int_of(value) for value in concrete]
    size_n = next((numbers[i + 1] for i in range(len(numbers) - 2)
                   if numbers[i] == a[0] and numbers[i + 2] == a[1] and numbers[i + 1]), None)
    if not size_n:
        return None
    packed = next((i for i, (_, _, kind) in enumerate(tensors) if i and kind == "int32"), None)
    if packed is None or packed + 1 >= len(tensors):
        return None
    weight_bytes = float(sum(math.prod(shape) * size for shape, size, _ in tensors[packed:packed + 2]))
    moved = math.prod(a) * a_bytes + weight_bytes + a[0] * size_n * a_bytes
    return Work("gemm", 2.0 * a[0] * size_n * a[1], float(moved), dtype, weight_bytes=weight_bytes, tokens=int(a[0]))


def canonical_name(name: str) -> str:
    """The one name the calls of an op share: without SGLang's per-layer suffix (``..._ragged_<layer>``),
    or FlashInfer's JIT module uri (:data:`serving_attention.FLASHINFER_NAMES`)."""
    if not name.startswith(WORK_OP_PREFIXES):
        return name
    return SGLANG_ATTENTION if name.startswith(SGLANG_ATTENTION_PREFIX) else serving_attention.flashinfer_name(name) or name


STEP_OPS = {  # ops whose FLOPs need the step's lengths (varlen ones: where their shapes do not give them)
    "vllm::unified_attention_with_output": lambda call: serving_attention.unified_attention(call.tensors, call.step),
    "vllm::unified_attention": lambda call: serving_attention.unified_attention(call.tensors, call.step),
    "aiter::paged_attention_ragged": lambda call: serving_attention.paged_attention_ragged(call.at, call.step),
    SGLANG_ATTENTION: lambda call: serving_attention.paged_attention_ragged(call.at, call.step),
    "flash_attn::_flash_attn_varlen_forward": lambda call: serving_attention.flash_varlen(call, causal_at=9),
    "vllm::flash_attn_varlen_func": lambda call: serving_attention.flash_varlen(call, causal_at=8),
    "vllm::flash_attn_with_kvcache": serving_attention.flash_with_kvcache,
    "aiter::mha_varlen_fwd": lambda call: serving_attention.flash_varlen(call, causal_at=12),
    "aiter::fmha_v3_varlen_fwd": lambda call: serving_attention.flash_varlen(call, causal_at=12),
    "aiter::pa_fwd_asm": serving_attention.aiter_paged_decode,
    serving_attention.FLASHINFER_PAGED: serving_attention.flashinfer_paged_prefill,
    serving_attention.FLASHINFER_RAGGED: serving_attention.flashinfer_ragged_prefill,
    serving_attention.FLASHINFER_DECODE: serving_attention.flashinfer_decode,
}
FORMULAS = {
    **STEP_OPS,
    serving_attention.FLASHINFER_SINGLE_PREFILL: serving_attention.flashinfer_single_prefill,
    serving_attention.FLASHINFER_SINGLE_DECODE: serving_attention.flashinfer_single_decode,
    "vllm::moe_forward": lambda call: moe_forward(call.tensors, call.context),
    **{name: lambda call: fused_experts(call.tensors) for name in FUSED_EXPERTS},
    **{name: lambda call, at=at: flashinfer_fused_moe(call, at) for name, at in FLASHINFER_MOE.items()},
    "_C::cutlass_scaled_mm": lambda call: cutlass_scaled_mm(call.tensors),
    "_C::gptq_marlin_gemm": lambda call: marlin_gemm(call.tensors, call.concrete or []),
    "_C_cache_ops::reshape_and_cache_flash": lambda call: reshape_and_cache(call.tensors),
    "_C_cache_ops::reshape_and_cache": lambda call: reshape_and_cache(call.tensors),
    **{name: lambda call, formula=formula: formula(call.tensors) for name, formula in quantized_gemms.FORMULAS.items()},
}

# the op names the parsers keep (model.WORK_OPS); the shared names of prefixed ops (model.WORK_OP_PREFIXES) apart
PREFIXED = frozenset({SGLANG_ATTENTION} | {canonical for _, _, canonical in serving_attention.FLASHINFER_NAMES})
NAMES = frozenset(FORMULAS) - PREFIXED


def needs_step(name: str) -> bool:
    """Whether an op's work depends on the step's sequence lengths."""
    return canonical_name(name) in STEP_OPS


def handles(name: str) -> bool:
    """Whether :func:`work` is the formula for ops of this name."""
    return canonical_name(name) in FORMULAS


def work(name: str, record: list, step: StepLengths | None) -> Work | None:
    """The work of one serving op from its shape record ``[dims, types, concrete(, child ops)]`` and,
    for attention, its step's lengths; None when they do not determine it."""
    dims, types = record[0], record[1]
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    try:
        call = OpCall(tensors=tensors_of(dims, types), at=dict(_positional(dims, types)),
                      concrete=record[2] if len(record) > 2 and isinstance(record[2], list) else None,
                      context=record[3] if len(record) > 3 and isinstance(record[3], list) else None, step=step)
        return FORMULAS[canonical_name(name)](call)
    except (TypeError, ValueError, IndexError, OverflowError, ZeroDivisionError):
        return None


def _positional(dims: list, types: list):
    """(argument index, (dims, bytes per element, dtype)) of each plain tensor argument."""
    for i, (shape, kind) in enumerate(zip(dims, types)):
        known = dtype_of(kind)
        if known and isinstance(shape, list) and shape and all(isinstance(x, int) and x >= 0 for x in shape):
            yield i, (shape, known[1], known[0])
