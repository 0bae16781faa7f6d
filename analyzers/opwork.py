"""Work per operator from its recorded shapes: FLOPs and bytes moved.

The PyTorch profiler, run with ``record_shapes=True``, writes each CPU op's ``Input Dims``
(one list per argument; a tensor list is a list of lists; a scalar or None is ``[]``),
``Input type`` (``c10::BFloat16``, ``float``, ``Scalar`` ...) and ``Concrete Inputs`` (scalar
arguments as text). :func:`work` turns one op into a :class:`Work`, or None when its kind has
no formula here (views, allocations, ops whose work the shapes do not determine).

Conventions (the same as TraceLens's perf models, AMD-AGI/TraceLens PerfModel/perf_model.py,
so the counts can be checked against it):

* GEMM ``C[M,N] = A[M,K] @ B[K,N]``: 2·M·N·K FLOPs, plus M·N for a bias (addmm, baddbmm,
  linear with bias); bytes = A + B + C (+ bias), each in its own dtype. ``weight_bytes`` is the B
  operand (the weight of a linear layer): what a decode step must read from memory.
* Attention (SDPA and its flash / efficient / cuDNN kernels): 2·B·H·Nq·Nkv·(d_qk + d_v)
  FLOPs, halved when causal with Nq == Nkv; bytes = Q + K + V + O. ``weight_bytes`` is K + V
  (the KV cache a decode step reads). Varlen / paged attention (the sequence lengths are not in
  the shapes) is :mod:`serving_work`'s, from the step's annotated lengths.
* Memory-bound ops (elementwise, copies, concatenation, norms, softmax, reductions): FLOPs =
  elements of the output (reductions: of the input; norms: TraceLens's per-element counts); bytes =
  every tensor input read plus the output written (``copy_(dst, src)``: src read and dst written;
  reductions: the input, and the output over the dims named in the arguments). A tensor list recorded
  without an element type (``TensorList``, as Kineto writes ``aten::cat``'s input) has unknown bytes: no Work.

nsys's PyTorch operator NVTX ranges (``--pytorch=autograd-shapes-nvtx``) give the same dims
(a tensor list flattened into its tensors) and no ``Concrete Inputs``: ``concrete`` is then None,
and an attention whose causal flag decides its FLOPs (Nq == Nkv) gets no Work.

Every formula is a pure function of the shapes: no trace, no device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracetriage.model import (
    CONCAT_OPS,
    COPY_OPS,
    ELEMENTWISE_OPS,
    NORM_OPS,
    REDUCTION_OPS,
    SCAN_OPS,
    SOFTMAX_OPS,
)

# Kineto "Input type" -> (our dtype name, bytes per element)
_DTYPES = {
    "c10::BFloat16": ("bf16", 2), "c10::Half": ("fp16", 2), "float": ("fp32", 4), "double": ("fp64", 8),
    "c10::Float8_e4m3fn": ("fp8", 1), "c10::Float8_e5m2": ("fp8", 1), "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1), "c10::Float8_e8m0fnu": ("fp8", 1),
    "signed char": ("int8", 1), "unsigned char": ("uint8", 1), "bool": ("bool", 1), "short int": ("int16", 2),
    "int": ("int32", 4), "long int": ("int64", 8), "long": ("int64", 8),
    "c10::complex<float>": ("complex64", 8), "c10::complex<double>": ("complex128", 16),
}

CLASSES = ("gemm", "attention", "memory_bound")


@dataclass(frozen=True)
class Work:
    kind: str  # gemm | attention | memory_bound
    flops: float
    bytes: float
    dtype: str  # the data type the op computes in (the peak it is held against)
    weight_bytes: float = 0.0  # operands a decode step must stream from memory (weights, KV cache)
    tokens: int | None = None  # GEMM rows (M): a decode GEMM has few


def dtype_of(kineto_type) -> tuple[str, int] | None:
    return _DTYPES.get(kineto_type) if isinstance(kineto_type, str) else None


def _numel(dims) -> int:
    return math.prod(int(d) for d in dims)


def _is_shape(dims) -> bool:
    return isinstance(dims, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims)


def tensors_of(dims: list, types: list) -> list[tuple[list, int, str]]:
    """(dims, bytes per element, dtype) of every tensor argument, tensor lists flattened; a list
    argument without a per-element type (``TensorList``) takes the first known tensor dtype."""
    known = next((dtype_of(t) for t in types if dtype_of(t)), None)
    out = []
    for i, d in enumerate(dims):
        t = dtype_of(types[i]) if i < len(types) else None
        if isinstance(d, list) and d and all(isinstance(x, list) for x in d):  # a tensor list
            for sub in d:
                if _is_shape(sub) and (t or known):
                    out.append((sub, (t or known)[1], (t or known)[0]))
        elif t and _is_shape(d) and (d or types[i] not in ("Scalar", "")):
            out.append((d, t[1], t[0]))
    return out


def _broadcast(*shapes: list) -> list[int]:
    n = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        dims = [s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0]
        big = [d for d in dims if d != 1]
        out.append(max(big) if big else 1)
    return out


def _flag(concrete: list, i: int) -> bool:
    return i < len(concrete) and str(concrete[i]).strip() in ("True", "1", "true")


# --- GEMMs -----------------------------------------------------------------------------------

def _gemm(M, N, K, batch, a, b, out_e, bias_elems, bias_e, dtype) -> Work:
    flops = 2.0 * batch * M * N * K + (batch * M * N if bias_elems else 0)
    a_bytes, b_bytes = batch * M * K * a, batch * K * N * b
    return Work("gemm", flops, a_bytes + b_bytes + batch * M * N * out_e + bias_elems * bias_e, dtype,
                weight_bytes=b_bytes, tokens=int(batch * M))


def _mm_like(t, bias=None) -> Work | None:
    (a, ea, da), (b, eb, _) = t
    if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    return _gemm(a[0], b[1], a[1], 1, ea, eb, ea, _numel(bias[0]) if bias else 0, bias[1] if bias else 0, da)


def _bmm_like(t, bias=None) -> Work | None:
    (a, ea, da), (b, eb, _) = t
    if len(a) != 3 or len(b) != 3 or a[2] != b[1] or a[0] != b[0]:
        return None
    return _gemm(a[1], b[2], a[2], a[0], ea, eb, ea, _numel(bias[0]) if bias else 0, bias[1] if bias else 0, da)


def _linear(t) -> Work | None:
    """input[..., K] @ weight[N, K]^T (+ bias[N])."""
    if len(t) < 2:
        return None
    (x, ex, dx), (w, ew, _) = t[0], t[1]
    if len(x) < 1 or len(w) != 2 or x[-1] != w[1]:
        return None
    bias = t[2] if len(t) > 2 and len(t[2][0]) == 1 else None
    return _gemm(_numel(x[:-1]), w[0], w[1], 1, ex, ew, ex, _numel(bias[0]) if bias else 0, bias[1] if bias else 0, dx)


def _matmul(t) -> Work | None:
    (a, ea, da), (b, eb, _) = t[0], t[1]
    if not a or not b:
        return None
    a2 = [1] + a if len(a) == 1 else a
    b2 = b + [1] if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return None
    if len(b2) == 2:  # the common linear-layer case: fold A's leading dims into M
        return _gemm(_numel(a2[:-1]), b2[-1], a2[-1], 1, ea, eb, ea, 0, 0, da)
    batch = _numel(_broadcast(a2[:-2], b2[:-2]))
    return _gemm(a2[-2], b2[-1], a2[-1], batch, ea, eb, ea, 0, 0, da)


def _scaled_mm(dims, types, t) -> Work | None:
    """_scaled_mm(A[M,K] fp8, B[K,N] fp8, scale_a, scale_b, bias?, scale_result?, out_dtype, ...):
    the output is written in out_dtype (bf16 unless the trace says otherwise)."""
    if len(t) < 2:
        return None
    (a, ea, da), (b, eb, _) = t[0], t[1]
    if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    bias = None
    if len(dims) > 4 and _is_shape(dims[4]) and len(dims[4]) == 1 and dtype_of(types[4]):
        bias = (dims[4], dtype_of(types[4])[1])
    return _gemm(a[0], b[1], a[1], 1, ea, eb, 2, _numel(bias[0]) if bias else 0, bias[1] if bias else 0, da)


GEMMS = {
    "aten::mm": lambda d, ty, c, t: _mm_like(t[:2]) if len(t) >= 2 else None,
    "aten::addmm": lambda d, ty, c, t: _mm_like(t[1:3], t[0]) if len(t) >= 3 else None,
    "aten::bmm": lambda d, ty, c, t: _bmm_like(t[:2]) if len(t) >= 2 else None,
    "aten::baddbmm": lambda d, ty, c, t: _bmm_like(t[1:3], t[0]) if len(t) >= 3 else None,
    "aten::linear": lambda d, ty, c, t: _linear(t),
    "aten::matmul": lambda d, ty, c, t: _matmul(t) if len(t) >= 2 else None,
    "aten::_scaled_mm": lambda d, ty, c, t: _scaled_mm(d, ty, t),
    "vllm::rocm_unquantized_gemm": lambda d, ty, c, t: _linear(t),
}


# --- attention -------------------------------------------------------------------------------

def _attention(t, layout: str, causal: bool | None) -> Work | None:
    """q, k, v in layout BHLD ([B, H, L, d], SDPA) or BLHD ([B, L, H, d], the flash kernels).
    ``causal`` None: not recorded (NVTX ranges write no scalar arguments) — decisive, so no Work,
    when Nq == Nkv (a causal mask halves the FLOPs), irrelevant otherwise (decode)."""
    if len(t) < 3 or any(len(x[0]) != 4 for x in t[:3]):
        return None
    (q, e, dq), (k, _, _), (v, _, _) = t[:3]
    if layout == "BHLD":
        B, H, Nq, dqk = q
        Hkv, Nkv, dv = k[1], k[2], v[3]
    else:
        B, Nq, H, dqk = q
        Nkv, Hkv, dv = k[1], k[2], v[3]
    if causal is None and Nq == Nkv:
        return None
    flops = 2.0 * B * H * Nq * Nkv * (dqk + dv)
    if causal and Nq == Nkv:
        flops /= 2
    kv = B * Nkv * Hkv * (dqk + dv) * e
    return Work("attention", flops, (B * Nq * H * dqk + B * Nq * H * dv) * e + kv, dq, weight_bytes=kv)


ATTENTION = {
    # name: (layout, index of is_causal in the arguments)
    "aten::scaled_dot_product_attention": ("BHLD", 5),
    "aten::_scaled_dot_product_flash_attention": ("BHLD", 4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("BHLD", 4),
    "aten::_scaled_dot_product_efficient_attention": ("BHLD", 6),
    "aten::_scaled_dot_product_cudnn_attention": ("BHLD", 6),
    "aten::_flash_attention_forward": ("BLHD", 8),
    "flash_attn::_flash_attn_forward": ("BLHD", 5),
    # AITER's CK forward (ROCm/aiter aiter/ops/mha.py): mha_fwd(q[B,L,H,d], k, v, dropout_p, softmax_scale, is_causal, ...)
    "aiter::mha_fwd": ("BLHD", 5),
}


def _efficient_forward(c, t) -> Work | None:
    # _efficient_attention_forward(q[B,M,H,K], k, v, bias, cu_q, cu_k, max_q, max_k, dropout_p,
    # custom_mask_type, ...): custom_mask_type 1 or 2 = causal; cu_seqlens given = varlen
    causal = (len(c) > 9 and str(c[9]).strip() in ("1", "2")) if c is not None else None
    return _attention(t, "BLHD", causal)


# --- memory-bound ----------------------------------------------------------------------------

ELEMENTWISE = ELEMENTWISE_OPS
COPIES = COPY_OPS
CONCAT = CONCAT_OPS
SOFTMAX = SOFTMAX_OPS
REDUCTIONS = REDUCTION_OPS
SCANS = SCAN_OPS  # an output as large as the input
NORMS = NORM_OPS


def _norm_flops(name: str, n: int, t) -> float:
    """TraceLens's norm conventions: layer norm 5 FLOPs an element (statistics and affine) plus 6
    per channel; RMS norm 2C+2 per row for the statistic, then 1-2 an element (scale, weight)."""
    c = _numel(t[1][0]) if len(t) > 1 and t[1][0] else (t[0][0][-1] if t[0][0] else 1)
    if "rms" in name:
        return (n / max(1, c)) * (2 * c + 2) + n * (2 if len(t) > 1 else 1)
    return 5.0 * n + 6.0 * c


def _reduced_elems(shape: list, concrete: list) -> int:
    """Output elements of a reduction: the input over the reduced dims named in the concrete
    arguments (``[-1]``, ``-1``), or a single element when no dim is given (a full reduction)."""
    import re as _re

    dims = None
    for c in concrete[1:3]:
        got = _re.fullmatch(r"\[?\s*(-?\d+(?:\s*,\s*-?\d+)*)\s*\]?", str(c).strip())
        if got:
            dims = [int(x) for x in got.group(1).split(",")]
            break
    if not dims or not shape:
        return 1
    kept = [n for i, n in enumerate(shape) if i not in {d % len(shape) for d in dims}]
    return _numel(kept)


GATHERS = ("aten::index_select", "aten::embedding", "aten::gather")


def _gather_work(name: str, t, concrete: list) -> Work | None:
    """A gather reads the rows it selects, not its whole table: the output's elements read from the
    table, the indices read, the output written. ``index_select(self, dim, index)``: the output is
    ``self`` with dimension ``dim`` (its concrete argument, 0 when not recorded) the index's length;
    ``embedding(weight, indices)``: ``indices.shape + weight.shape[1:]``; ``gather(self, dim,
    index)``: the index's shape (PyTorch's definitions of the three ops)."""
    if len(t) < 2:
        return None
    (table, elem, dtype), (index, index_elem, _) = t[0], t[1]
    if name == "aten::embedding":
        out = list(index) + list(table[1:])
    elif name == "aten::gather":
        out = list(index)
    else:
        dim = 0
        if len(concrete) > 1 and str(concrete[1]).strip().lstrip("-").isdigit():
            dim = int(str(concrete[1]).strip())
        out = list(table)
        if out:
            out[dim % len(out)] = _numel(index)
    out_elems = _numel(out)
    return Work("memory_bound", float(out_elems), float(2 * out_elems * elem + _numel(index) * index_elem), dtype)


def _memory_bound(name: str, t, concrete: list) -> Work | None:
    if not t:
        return None
    dtype = t[0][2]
    if name in COPIES:  # copy_(dst, src): src read, dst written
        return Work("memory_bound", float(_numel(t[0][0])), float(sum(_numel(d) * e for d, e, _ in t[:2])), dtype)
    if name in CONCAT:  # every input read, the concatenation written
        moved = sum(_numel(d) * e for d, e, _ in t)
        return Work("memory_bound", float(sum(_numel(d) for d, _, _ in t)), 2.0 * moved, dtype)
    if name in REDUCTIONS:  # the input read, the reduced output written
        n = _numel(t[0][0])
        return Work("memory_bound", float(n), float((n + _reduced_elems(t[0][0], concrete)) * t[0][1]), dtype)
    if name in SCANS:
        n = _numel(t[0][0])
        return Work("memory_bound", float(n), float(2 * n * t[0][1]), dtype)
    if name in SOFTMAX or name in NORMS:  # input read and an output of its size written (+ weights)
        n = _numel(t[0][0])
        moved = float(2 * n * t[0][1] + sum(_numel(d) * e for d, e, _ in t[1:]))
        if name in NORMS:
            return Work("memory_bound", _norm_flops(name, n, t), moved, dtype)
        return Work("memory_bound", float(n), moved, dtype)
    if name in ELEMENTWISE:
        if name in ("aten::fill_", "aten::zero_"):
            return Work("memory_bound", float(_numel(t[0][0])), float(_numel(t[0][0]) * t[0][1]), dtype)
        if name in GATHERS:
            return _gather_work(name, t, concrete)
        out_elems = _numel(_broadcast(*[d for d, _, _ in t]))
        read = sum(_numel(d) * e for d, e, _ in t)
        return Work("memory_bound", float(out_elems), float(read + out_elems * t[0][1]), dtype)
    return None


KNOWN = set(GEMMS) | set(ATTENTION) | {"aten::_efficient_attention_forward"} | ELEMENTWISE | COPIES | CONCAT \
    | SOFTMAX | REDUCTIONS | SCANS | NORMS


def has_formula(name: str) -> bool:
    """Whether an op of this name may get a :class:`Work` here (the serving ops' formulas are in
    :mod:`serving_work`; the parsers keep both, :func:`tracetriage.model.is_work_op`)."""
    return name in KNOWN


def work(name: str, dims, types, concrete=None) -> Work | None:
    """The FLOPs and bytes of one op from its recorded shapes, or None (no formula, or shapes
    that do not fit the op's signature: a hand-written or truncated record)."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    recorded = isinstance(concrete, list)  # NVTX operator ranges write no scalar arguments
    concrete = concrete if recorded else []
    try:
        t = tensors_of(dims, types)
        if name in GEMMS:
            return GEMMS[name](dims, types, concrete, t)
        if name in ATTENTION:
            layout, causal_at = ATTENTION[name]
            return _attention(t, layout, _flag(concrete, causal_at) if recorded else None)
        if name == "aten::_efficient_attention_forward":
            return _efficient_forward(concrete if recorded else None, t)
        return _memory_bound(name, t, concrete)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
