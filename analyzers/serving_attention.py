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



def step_part(step: StepLengths | None, rows: int, decode: bool = False) -> StepLengths | None:
    """The requests of the step whose query tokens an op's ``rows`` hold. An engine may split a step's
    attention into a decode call and a prefill call (vLLM's FlashInfer backend: the decode tokens,
    first in the batch, through ``BatchDecodeWithPagedKVCacheWrapper``, the rest through
    ``BatchPrefillWithPagedKVCacheWrapper``, vllm/v1/attention/backends/flashinfer.py): a decode op
    (``decode``) holds the generation requests when its rows are g_sq, or the whole step when it has
    no context requests and the rows hold it (a padded graph batch); a prefill op holds the whole step
    when its rows hold it, else the context requests when its rows are c_sq. None otherwise."""
    if step is None:
        return None
    generation = StepLengths(g_sq=step.g_sq, g_sk=step.g_sk, g_sqsq=step.g_sqsq, g_sqsk=step.g_sqsk)
    if decode:
        fits = step.g_sq and (rows == step.g_sq or (not step.c_sq and rows >= step.g_sq))
        return generation if fits else None
    if rows >= step.tokens:
        return step
    if step.c_sq and rows == step.c_sq:
        return StepLengths(c_sq=step.c_sq, c_sk=step.c_sk, c_sqsq=step.c_sqsq, c_sqsk=step.c_sqsk)
    return None


def _new_keys_only(part: StepLengths) -> StepLengths:
    """The lengths of attention over each request's new tokens alone (sk = sq): SGLang's FlashInfer
    backend runs an extend's new tokens through the ragged op, causal, and its cached prefix through
    the paged one (sglang/srt/layers/attention/flashinfer_backend.py, merged with merge_state)."""
    return StepLengths(c_sq=part.c_sq, c_sk=part.c_sq, c_sqsq=part.c_sqsq, c_sqsk=part.c_sqsq,
                       g_sq=part.g_sq, g_sk=part.g_sq, g_sqsq=part.g_sqsq, g_sqsk=part.g_sqsq)


# FlashInfer 0.2.0 registered its attention runs as torch custom ops named after the JIT module's uri
# (flashinfer/jit/attention.py get_*_uri: dtypes, head dim, options), flashinfer/prefill.py and decode.py;
# 0.2.0.post2 on (flashinfer #709) calls the extension directly: no op is recorded, the kernels stay
# "not measured". (prefix, suffix, the one name the calls of every uri share)
FLASHINFER_PAGED = "flashinfer::batch_prefill_with_kv_cache_<uri>_paged_run"
FLASHINFER_RAGGED = "flashinfer::batch_prefill_with_kv_cache_<uri>_ragged_run"
FLASHINFER_DECODE = "flashinfer::batch_decode_with_kv_cache_<uri>_run"
FLASHINFER_SINGLE_PREFILL = "flashinfer::single_prefill_with_kv_cache_<uri>_run"
FLASHINFER_SINGLE_DECODE = "flashinfer::single_decode_with_kv_cache_<uri>_run"
FLASHINFER_NAMES = tuple((canonical.split("<uri>")[0], canonical.split("<uri>")[1], canonical) for canonical in (
    FLASHINFER_PAGED, FLASHINFER_RAGGED, FLASHINFER_DECODE, FLASHINFER_SINGLE_PREFILL, FLASHINFER_SINGLE_DECODE))
_NHD, _HND = 0, 1  # flashinfer/utils.py TensorLayout: the K/V layout code among an op's arguments


def flashinfer_name(name: str) -> str | None:
    """The shared name of a FlashInfer attention op (:data:`FLASHINFER_NAMES`), None for another op."""
    return next((canonical for prefix, suffix, canonical in FLASHINFER_NAMES
                 if name.startswith(prefix) and name.endswith(suffix)), None)


def _mask(call: OpCall, at: int) -> bool | None:
    """FlashInfer's ``mask_mode`` argument (flashinfer/utils.py MaskMode): 0 non-causal, 1 causal;
    None for a custom mask or when not recorded."""
    return {0: False, 1: True}.get(call.scalar(at))


def _keys(shape: list, layout: int | None) -> tuple[int, int] | None:
    """(key rows, KV heads) of a ragged K ``[T, Hkv, d]`` (NHD) or ``[Hkv, T, d]`` (HND), or of a paged
    cache ``[pages, page, Hkv, d]`` / ``[pages, Hkv, page, d]`` (rows: None, the pages say nothing of
    the lengths); None for another layout."""
    if layout not in (_NHD, _HND) or len(shape) not in (3, 4):
        return None
    if len(shape) == 4:
        return None, shape[2] if layout == _NHD else shape[1]
    return (shape[0], shape[1]) if layout == _NHD else (shape[1], shape[0])


def _flashinfer(call: OpCall, at: tuple[int, int, int], layout_at: int, lengths, causal: bool = True) -> Work | None:
    """:func:`attention_work` of a FlashInfer op whose q, k, v are at ``at`` and its layout code at
    ``layout_at``, over ``lengths`` (a function of the query rows and the key rows)."""
    q, k, v = (call.at.get(i) for i in at)
    if q is None or k is None or v is None or len(q[0]) not in (2, 3) or len(v[0]) != len(k[0]):
        return None
    keys = _keys(k[0], call.scalar(layout_at))
    if keys is None:
        return None
    rows, heads, d_qk = (1, *q[0]) if len(q[0]) == 2 else q[0]
    found = lengths(rows, keys[0])
    if found is None:
        return None
    return attention_work(rows, heads, keys[1], d_qk, v[0][-1], q[1], k[1], q[2], found, causal)


def flashinfer_paged_prefill(call: OpCall) -> Work | None:
    """FlashInfer 0.2.0's ``BatchPrefillWithPagedKVCacheWrapper`` run, ``flashinfer::<uri>_paged_run(
    mask_mode, float_workspace, int_workspace, plan_info, q[T, H, d], paged_k_cache, paged_v_cache,
    custom_mask, alibi_slopes, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
    qk_indptr, layout, ...)`` (flashinfer/prefill.py): the lengths are in the indptr device tensors, so
    the step's requests the rows hold (:func:`step_part`) give them; causal (FlashInfer aligns a query
    chunk after its cached keys) counts as :func:`attention_work`. Non-causal (SGLang's prefix-only
    call) attends keys the step does not say: None."""
    if not _mask(call, 0):
        return None
    return _flashinfer(call, (4, 5, 6), 14, lambda rows, _keys: step_part(call.step, rows))


def flashinfer_ragged_prefill(call: OpCall) -> Work | None:
    """FlashInfer 0.2.0's ``BatchPrefillWithRaggedKVCacheWrapper`` run, ``flashinfer::<uri>_ragged_run(
    mask_mode, float_workspace, int_workspace, plan_info, q[Tq, H, d], k[Tk, Hkv, d], v, custom_mask,
    alibi_slopes, qo_indptr[B+1], kv_indptr, qk_indptr, layout, ...)`` (flashinfer/prefill.py). One
    sequence (B = 1): its lengths are the rows, sq = Tq, sk = Tk. Else, causal, the step's requests
    the query rows hold (:func:`step_part`), keys either every token they attend (Tk = Σ sk) or
    their new tokens alone (Tk = Tq: SGLang's split, :func:`_new_keys_only`); None otherwise."""
    causal, qo_indptr = _mask(call, 0), call.at.get(9)
    if causal is None or qo_indptr is None or len(qo_indptr[0]) != 1:
        return None

    def lengths(rows: int, key_rows: int) -> StepLengths | None:
        if qo_indptr[0][0] == 2:
            return uniform_lengths(1, rows, key_rows, rows, key_rows)
        part = step_part(call.step, rows) if causal else None
        if part is None or key_rows == part.c_sk + part.g_sk:
            return part
        return _new_keys_only(part) if key_rows == rows else None

    return _flashinfer(call, (4, 5, 6), 12, lengths, causal)


def flashinfer_decode(call: OpCall) -> Work | None:
    """FlashInfer 0.2.0's ``BatchDecodeWithPagedKVCacheWrapper`` run, ``flashinfer::<uri>_run(
    float_workspace, int_workspace, plan_info, q[B, H, d], paged_k_cache, paged_v_cache,
    paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, alibi_slopes, kv_layout_code, ...)``
    (flashinfer/decode.py): one query token per sequence attending its whole cache; the lengths are
    the step's generation requests (:func:`step_part`)."""
    return _flashinfer(call, (3, 4, 5), 10, lambda rows, _keys: step_part(call.step, rows, decode=True))


def flashinfer_single_prefill(call: OpCall) -> Work | None:
    """FlashInfer 0.2.0's ``single_prefill_with_kv_cache``, ``flashinfer::<uri>_run(mask_mode,
    q[qo_len, H, d], k[kv_len, Hkv, d], v, custom_mask, tmp, alibi_slopes, layout, ...)``
    (flashinfer/prefill.py): one sequence, its lengths the rows (sq = qo_len, sk = kv_len; the
    causal mask bottom-right aligned)."""
    causal = _mask(call, 0)
    if causal is None:
        return None
    return _flashinfer(call, (1, 2, 3), 7, lambda rows, keys: uniform_lengths(1, rows, keys, rows, keys), causal)


def flashinfer_single_decode(call: OpCall) -> Work | None:
    """FlashInfer 0.2.0's ``single_decode_with_kv_cache``, ``flashinfer::<uri>_run(q[H, d],
    k[kv_len, Hkv, d], v, tmp, alibi_slopes, kv_layout_code, ...)`` (flashinfer/decode.py): one query
    token attending kv_len keys."""
    def lengths(rows: int, keys: int | None) -> StepLengths | None:
        return StepLengths(g_sq=1, g_sk=keys, g_sqsq=1, g_sqsk=keys) if keys else None

    return _flashinfer(call, (0, 1, 2), 5, lengths)


def aiter_paged_decode(call: OpCall) -> Work | None:
    """AITER's assembly paged attention ``aiter::pa_fwd_asm(Q[T, H, d], K[blocks, Hkv, d/x, block, x],
    V, block_tables, context_lens, block_tables_stride0, max_qlen, ...)`` (ROCm/aiter
    aiter/ops/attention.py; the output is ``empty_like(Q)``, so d_v = d): the decode tokens of the
    step attend their cached sequences, whose lengths (context_lens) the step's generation requests
    give (:func:`step_part`)."""
    q, k = call.at.get(0), call.at.get(1)
    if q is None or k is None or len(q[0]) != 3 or len(k[0]) not in (4, 5):
        return None
    lengths = step_part(call.step, q[0][0], decode=True)
    if lengths is None:
        return None
    return attention_work(q[0][0], q[0][1], k[0][1], q[0][2], q[0][2], q[1], k[1], q[2], lengths)
