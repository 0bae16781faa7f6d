"""The sequence lengths of an engine step, and the attention count over them (:mod:`serving_work`,
:mod:`serving_attention` read them).

A serving engine's attention op records the batch's packed tensors (``q[tokens, H, d]``, the KV
cache's pages) but not the sequence lengths, which live in device tensors (``cu_seqlens``,
``kv_indptr``) whose values no profiler writes. The engines that annotate each step with the
aggregates of those lengths give what the FLOPs need (:func:`step_lengths`):

* vLLM ``execute_<T>_context_<n>(sq<>sk<>sqsq<>sqsk<>)_generation_<m>(sq<>sk<>sqsq<>sqsk<>)``;
* SGLang ``step[DECODE|EXTEND|MIXED ... c_sq=.. c_sk=.. c_sqsq=.. c_sqsk=.. g_sq=.. ...]``;

where, over the step's context (prefill) requests, ``c_sq`` = Σ new tokens, ``c_sk`` = Σ tokens
attended (cached + new), ``c_sqsq`` = Σ sq², ``c_sqsk`` = Σ sq·sk; ``g_*`` the same over the
generation (decode) requests. The formats are those TraceLens parses (AMD-AGI/TraceLens,
TraceLens/TraceUtils/annotation_utils.py). A step without them (vLLM's
``execute_context_<n>(<tokens>)_generation_<m>(<tokens>)``, SGLang's ``step[DECODE bs=32]``)
gives token counts but not context lengths: its attention stays "not measured".

Every formula is a pure function of shapes and lengths: no trace, no device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracetriage.analyzers.opwork import Work


@dataclass(frozen=True, slots=True)
class StepLengths:
    """The sequence-length aggregates of one engine step (module docstring): context and generation."""

    c_sq: int = 0
    c_sk: int = 0
    c_sqsq: int = 0
    c_sqsk: int = 0
    g_sq: int = 0
    g_sk: int = 0
    g_sqsq: int = 0
    g_sqsk: int = 0

    @property
    def tokens(self) -> int:
        """Query tokens of the step (context + generation)."""
        return self.c_sq + self.g_sq


_VLLM_STEP = re.compile(r"execute_\d+_context_\d+\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)"
                        r"_generation_\d+\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)")
_SGLANG_STEP = re.compile(r"step\[(?:EXTEND|DECODE|MIXED)\b([^\]]*sqsq=\d+[^\]]*)\]")
_SGLANG_FIELD = re.compile(r"\b([cg]_(?:sq|sk|sqsq|sqsk))=(\d+)")


def step_lengths(name: str) -> StepLengths | None:
    """The aggregates a step annotation carries, or None (not a step, or one without context lengths)."""
    found = _VLLM_STEP.search(name)
    if found:
        return StepLengths(*(int(value) for value in found.groups()))
    found = _SGLANG_STEP.search(name)
    if found:
        return StepLengths(**{key: int(value) for key, value in _SGLANG_FIELD.findall(found.group(1))})
    return None


def attention_work(tokens: int, heads: int, kv_heads: int, d_qk: int, d_v: int, q_bytes: int, kv_bytes: int,
                    dtype: str, step: StepLengths, causal: bool = True) -> Work | None:
    """Chunked-prefill + decode attention over a step (TraceLens's InferenceAttention, AMD-AGI/TraceLens
    TraceLens/PerfModel/extensions/attention_perf_model_extensions.py, itself the FlashAttention
    count, Dao et al. 2022 §3: 2·d FLOPs per (query, key) pair for QKᵀ and as many for PV):

    FLOPs = 2·H·(d_qk + d_v)·pairs, the (query, key) pairs of causal attention: a request's chunk of
    sq new tokens after sk − sq cached ones attends sq·(sk − sq) + sq·(sq + 1)/2 = sq·sk − sq²/2 + sq/2
    pairs, so pairs = c_sqsk − c_sqsq/2 + c_sq/2 + g_sqsk − g_sqsq/2 + g_sq/2 (a decode token: sk pairs).
    TraceLens counts c_sqsk − c_sqsq/2 + g_sqsk, the same but for the c_sq/2 diagonal pairs;
    bytes = Q and O of the step's tokens + K and V of every token attended: the new tokens' in the
    query's dtype, the cached ones (sk − sq) in the cache's; the KV read (``weight_bytes``) is
    every attended token's K and V.

    Without a causal mask (``causal`` False) every query attends every key: pairs = c_sqsk + g_sqsk.
    None when the op's query rows cannot hold the step's tokens (the annotation is another batch's)."""
    if step.tokens <= 0 or tokens < step.tokens or min(heads, kv_heads, d_qk, d_v) <= 0:
        return None
    if causal:
        pairs = step.c_sqsk - step.c_sqsq / 2 + step.c_sq / 2 + step.g_sqsk - step.g_sqsq / 2 + step.g_sq / 2
    else:
        pairs = float(step.c_sqsk + step.g_sqsk)
    flops = 2.0 * heads * (d_qk + d_v) * pairs
    new = step.c_sq + step.g_sq
    cached = max(0, step.c_sk - step.c_sq) + max(0, step.g_sk - step.g_sq)
    kv_row = kv_heads * (d_qk + d_v)
    moved = new * (heads * (d_qk + d_v) + kv_row) * q_bytes + cached * kv_row * kv_bytes
    return Work("attention", flops, float(moved), dtype, weight_bytes=float(new * kv_row * q_bytes
                                                                                   + cached * kv_row * kv_bytes))


@dataclass(frozen=True, slots=True)
class OpCall:
    """One serving op's record, as its formula reads it: the tensors in argument order (lists
    flattened, :func:`tensors_of`), the plain tensor arguments by position, the scalar arguments
    (``Concrete Inputs`` as text; None when the capture records none, as NVTX ranges), the child ops
    recorded inside it (name, dims, types, concrete), and the annotated step it ran in."""

    tensors: list
    at: dict
    concrete: list | None
    context: list | None
    step: StepLengths | None

    def scalar(self, index: int) -> int | None:
        """The integer scalar argument at ``index``, None when not recorded or not an integer."""
        return int_of(self.concrete[index]) if self.concrete is not None and index < len(self.concrete) else None

    def flag(self, index: int) -> bool | None:
        """The boolean argument at ``index``; None when the capture records no scalar arguments."""
        if self.concrete is None:
            return None
        return index < len(self.concrete) and str(self.concrete[index]).strip() in ("True", "1", "true")


def uniform_lengths(batch: int, q_rows: int, k_rows: int | None, max_q: int | None, max_k: int | None) -> StepLengths | None:
    """The lengths of a varlen batch whose shapes determine them: ``batch`` sequences (cu_seqlens has
    batch + 1 entries) packed into ``q_rows`` query and ``k_rows`` key rows, none longer than
    ``max_q`` / ``max_k``; when q_rows = batch·max_q and k_rows = batch·max_k every sequence has
    exactly the maximum lengths (a sum of ``batch`` lengths each at most the maximum reaches
    batch × maximum only then). None otherwise (the lengths are in the device tensors cu_seqlens), or
    when keys are paged (``k_rows`` None: the cache's pages say nothing of the lengths)."""
    if not batch or batch <= 0 or not max_q or not max_k or k_rows is None or max_q > max_k:
        return None
    if q_rows != batch * max_q or k_rows != batch * max_k:
        return None
    return StepLengths(c_sq=batch * max_q, c_sk=batch * max_k, c_sqsq=batch * max_q * max_q, c_sqsk=batch * max_q * max_k)


def int_of(text) -> int | None:
    try:
        return int(str(text).strip())
    except ValueError:
        return None

