"""Work of the attention ops of LLM serving — paged, ragged and varlen, prefill and decode — from the
op's recorded shapes and, where the shapes do not give the sequence lengths, the annotated step's
(:mod:`serving_lengths`). Each counts as :func:`serving_lengths.attention_work` does (the
FlashAttention count: 4·d FLOPs per (query, key) pair and head), with the pairs its mask leaves.

Every formula is a pure function of shapes and lengths: no trace, no device.
"""

from __future__ import annotations

from tracetriage.analyzers.opwork import Work
from tracetriage.analyzers.serving_lengths import OpCall, StepLengths, attention_work, uniform_lengths


def unified_attention(tensors, step: StepLengths | None) -> Work | None:
    """vLLM's ``unified_attention[_with_output](q[T,H,d], k[T,Hkv,d], v[T,Hkv,dv], out, layer, ...)``
    (vllm/attention/layer.py; its Triton kernel kernel_unified_attention_2d/3d or the backend's):
    the step's new tokens' q, k, v; the KV cache and the lengths are in the forward context."""
    if step is None or len(tensors) < 3 or any(len(t[0]) != 3 for t in tensors[:3]):
        return None
    (q, q_bytes, dtype), (k, kv_bytes, _), (v, _, _) = tensors[:3]
    return attention_work(q[0], q[1], k[1], q[2], v[2], q_bytes, kv_bytes, dtype, step)


def paged_attention_ragged(tensors_at: dict, step: StepLengths | None) -> Work | None:
    """AITER's ``paged_attention_ragged(out, workspace, query[T,H,d], key_cache[pages, page, Hkv, d],
    value_cache, scale, kv_indptr, kv_page_indices, kv_last_page_lens, ...)`` (ROCm/aiter
    csrc/kernels/attention_ragged.cu; SGLang's aiter backend records it as
    ``sglang_profiler::attention_paged_attention_ragged_<layer>``): the lengths are in kv_indptr."""
    if step is None or not all(i in tensors_at for i in (2, 3, 4)):
        return None
    (q, q_bytes, dtype), (k, kv_bytes, _), (v, _, _) = tensors_at[2], tensors_at[3], tensors_at[4]
    if len(q) != 3 or len(k) != 4 or len(v) != 4:
        return None
    return attention_work(q[0], q[1], k[2], q[2], v[3], q_bytes, kv_bytes, dtype, step)


def flash_varlen(call: OpCall, causal_at: int) -> Work | None:
    """FlashAttention's varlen forward: ``flash_attn::_flash_attn_varlen_forward(q[Tq, H, d],
    k[Tk, Hkv, d], v[Tk, Hkv, dv], cu_seqlens_q[B+1], cu_seqlens_k, max_seqlen_q, max_seqlen_k,
    dropout_p, softmax_scale, causal, ..., block_table, ...)`` (Dao-AILab/flash-attention
    flash_attn/flash_attn_interface.py, the torch custom op) and vLLM's wrapper
    ``vllm::flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
    softmax_scale, causal, window_size, softcap, alibi_slopes, block_table)`` (vllm
    attention/backends/flash_attn.py); with a block table, k and v are the paged KV cache
    ``[blocks, page, Hkv, d]``. The count is :func:`_attention_work`'s (Dao et al. 2022: 4·d FLOPs per
    (query, key) pair; causal pairs bottom-right aligned, as FlashAttention ≥ 2.1 masks a query chunk
    after its cached keys), the lengths from the shapes where they determine them
    (:func:`uniform_lengths`), else from the step's annotation (a causal decoder's step). None when the
    causal flag is not recorded (it decides the pairs)."""
    q, k, v = call.at.get(0), call.at.get(1), call.at.get(2)
    cu_q = call.at.get(3)
    causal = call.flag(causal_at)
    if q is None or k is None or v is None or cu_q is None or causal is None or len(q[0]) != 3 or len(k[0]) not in (3, 4):
        return None
    k_rows = k[0][0] if len(k[0]) == 3 else None
    lengths = uniform_lengths(cu_q[0][0] - 1, q[0][0], k_rows, call.scalar(5), call.scalar(6))
    if lengths is None and causal:
        lengths = call.step
    if lengths is None:
        return None
    return attention_work(q[0][0], q[0][1], k[0][-2], q[0][2], v[0][-1], q[1], k[1], q[2], lengths, causal)


def flash_with_kvcache(call: OpCall) -> Work | None:
    """vLLM's ``vllm::flash_attn_with_kvcache(decode_query[B, sq, H, d], key_cache[blocks, page, Hkv, d],
    value_cache, cache_seqlens[B], block_table, softmax_scale, causal, ...)`` (vllm
    attention/backends/flash_attn.py over FlashAttention's ``flash_attn_with_kvcache``, its split-KV
    kernels ``flash_fwd_splitkv_kernel``): the B·sq query tokens attend their sequences' cached keys,
    whose lengths (cache_seqlens) are a device tensor, so the step's annotation gives them; the count
    is :func:`_attention_work`'s."""
    q, k, v = call.at.get(0), call.at.get(1), call.at.get(2)
    if call.step is None or q is None or k is None or v is None or len(q[0]) != 4 or len(k[0]) != 4:
        return None
    batch, per_sequence, heads, d_qk = q[0]
    return attention_work(batch * per_sequence, heads, k[0][2], d_qk, v[0][3], q[1], k[1], q[2], call.step)

