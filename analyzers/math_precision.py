"""Which math units the GEMMs and convolutions ran on, read from their kernels' names (no shapes needed).

Definitions (kernels that start in the window [lo, hi) of one trace, per device):

* **matrix kernel**: op_kernels.kernel_class ``gemm``: a GEMM (gemm, cutlass, xmma, cublas, Cijk_ ...) or a
  convolution (op_kernels.is_convolution: cuDNN, MIOpen and CK conv engines).
* **Tensile / hipBLASLt GEMMs** (``Cijk_<A>_<B>_<types>...``, rocBLAS and hipBLASLt on ROCm) state their data
  types in the ProblemType part of the name (Tensile's ProblemType.__str__, DataType.toChar): after the index
  parts comes DataType, the type of A and B (``S`` single, ``D`` double, ``H`` half, ``B`` bf16, ``X``
  xfloat32, ``I8``/``4xi8`` int8, ``F8``/``B8``/``F8B8``/``B8F8`` fp8 and bf8, ``N`` appended for the fnuz
  ones), then for the high-precision-accumulate types DestDataType and ComputeDataType (``HHS``: half in, half
  out, single compute; ``BBS``, ``F8BS``), in newer names separated by ``_`` (``B_BS_BH``, ``S_B``); then the
  flags (``B`` beta, ``H`` high-precision accumulate), and for single data ``_MX_`` where the math runs as
  XF32. Only the DataType decides: single data (``SB``, ``S_B``) without ``_MX_`` is FP32 math, run on the
  matrix cores' FP32 instructions (the name's ``MI16x16x1``) at the FP32 rate; half, bf16, fp8, int8 or
  xfloat32 data is the reduced-precision path, whatever the accumulate type (``HHS``, ``BBS`` are not FP32 math).
* **tensor-core**: a matrix kernel whose name states a reduced-precision or tensor-core path: the
  MMA-shape families (``h884``, ``s1688``, ``h16816``, ``i8816`` ...), ``hmma``/``imma``/``wmma``/``wgmma``/
  ``gmma``/``mfma``/``tensorop``, cuBLAS's ``nvjet``, or a data type fp16/bf16/fp8/int8/tf32/xf32.
* **FP32 SIMT**: a matrix kernel that states fp32 and none of the above: ``sgemm`` (``volta_sgemm``,
  ``ampere_sgemm``, rocBLAS's ``sgemm``, cuDNN's ``implicit_convolve_sgemm``), ``scudnn``, ``f32``/``fp32``
  without ``tf32``, a ``<float`` template argument, ``simt``; or a Tensile GEMM of single data. Those run at the
  FP32 rate (CUDA cores; an AMD GPU's FP32 matrix or vector instructions), not the reduced-precision one.
* ``fp32_ns`` / ``tensor_ns`` / ``kernel_ns`` per device (the trace's device order): the summed kernel time
  of each kind and of all kernels; ``top_fp32``: the FP32 SIMT kernel names holding the most time,
  with their share of the trace's kernel time.

Caveats: a name that states neither (an unnamed library kernel) is counted in neither class, so the
FP32 share is a lower bound; kernel times are summed, not unioned (two streams count twice).
"""

from __future__ import annotations

import re

import numpy as np

from tracetriage.analyzers.intervals import SLICE
from tracetriage.analyzers.metrics import MathPrecision
from tracetriage.analyzers.op_kernels import kernel_class
from tracetriage.model import Trace, cat_codes

_TENSOR = re.compile(r"(?i)[hsi]\d{3,5}gemm|[hsi](?:884|1688|16816|8816|16832)|hmma|imma|wmma|wgmma|gmma|mfma|tensorop"
                     r"|nvjet|bf16|bfloat16|float16|(?<!b)f16|fp16|half|e4m3|e5m2|fp8|int8|i8i8|tf32|xf32")
_FP32 = re.compile(r"(?i)sgemm|scudnn|(?<![bt])f32|fp32|<float\b|simt")
# Tensile's kernel name: C, A and B index parts, then the ProblemType's data types (module docstring)
_TENSILE = re.compile(r"(?:^|[^A-Za-z0-9])C[a-z]+_A[A-Za-z]+_B[A-Za-z]+_(?P<types>[A-Z0-9x]+)(?P<rest>_.*)?$", re.S)
_TENSILE_TYPE = re.compile(r"F8B8N?|B8F8N?|F8N?|B8N?|I8|I64|4xi8|F6|F4|[SDCZHIBX]")
_TENSILE_REDUCED = {"H", "B", "X", "I8", "4xi8", "F8", "B8", "F8N", "B8N", "F8B8", "B8F8", "F8B8N", "B8F8N", "F6", "F4"}
TOP_FP32 = 3


def tensile_data_type(name: str) -> str | None:
    """The DataType letter (the type of A and B) of a Tensile / hipBLASLt kernel name, None for another name
    or a type part that does not read as Tensile's type letters."""
    match = _TENSILE.search(name)
    if match is None:
        return None
    types = match["types"]
    codes = _TENSILE_TYPE.findall(types)
    return codes[0] if codes and "".join(codes) == types else None


def _tensile_precision(name: str) -> str | None:
    """``fp32`` / ``tensor`` of a Tensile GEMM from its DataType (single data with the XF32 math op ``_MX_`` is
    the reduced-precision path); None when the name is not Tensile's or its type is neither (double, complex)."""
    data = tensile_data_type(name)
    if data == "S":
        return "tensor" if "_MX_" in name else "fp32"
    return "tensor" if data in _TENSILE_REDUCED else None


def matrix_precision(name: str) -> str | None:
    """``tensor`` or ``fp32`` for a GEMM or convolution kernel whose name says which math it runs;
    None for any other kernel, or a matrix kernel whose name states no precision. A Tensile name's data type
    decides before the words (its ``MI16x16x1`` matrix-instruction part runs single data too)."""
    if kernel_class(name) != "gemm":
        return None
    if tensile_data_type(name) is not None:
        return _tensile_precision(name)
    if _TENSOR.search(name):
        return "tensor"
    return "fp32" if _FP32.search(name) else None


def measure(trace: Trace, lo: int, hi: int) -> MathPrecision:
    """FP32 SIMT and tensor-core matrix kernel time per device of one trace in [lo, hi) (module docstring).
    The table is read a slice of rows at a time (intervals.SLICE): the sums are of integer nanoseconds, exact in
    float64 in any order, and no temporary spans a whole column (10M kernels: 1.3 GB of them at the peak)."""
    gpu = trace.gpu
    count = len(trace.devices)
    start, end = gpu["start"].to_numpy(np.int64), gpu["end"].to_numpy(np.int64)
    codes, categories = cat_codes(gpu["name"])
    kind_of = np.array([{"fp32": 1, "tensor": 2}.get(matrix_precision(str(name)), 0) for name in categories] + [0],
                       np.int8)  # one regex per distinct name; the last slot is code -1 (no name)
    device = gpu["device"].to_numpy()
    width = max(count, int(device.max()) + 1 if device.size else 0)
    by_kind = np.zeros(3 * width)  # ns per (kind, device): 0 neither, 1 fp32, 2 tensor
    by_name = np.zeros(len(categories) + 1)  # FP32 kernel ns per name code
    kind_codes, kinds = cat_codes(gpu["kind"])
    kernel_code = kinds.index("kernel") if "kernel" in kinds else -2
    for at in range(0, len(gpu), SLICE):
        part = slice(at, at + SLICE)
        s = start[part]
        rows = np.flatnonzero((kind_codes[part] == kernel_code) & (s >= lo) & (s < hi))
        dur = (end[part][rows] - s[rows]).astype(np.float64)
        code = codes[part][rows]
        kind = kind_of[code]
        by_kind += np.bincount(kind.astype(np.int64) * width + device[part][rows], weights=dur, minlength=3 * width)
        fp32 = kind == 1
        if fp32.any():
            by_name[:-1] += np.bincount(code[fp32], weights=dur[fp32], minlength=len(categories))[:len(categories)]
    per_kind = by_kind.reshape(3, width)[:, :count]
    top: tuple[tuple[str, float], ...] = ()
    total = float(by_kind.sum())
    if by_name.any() and total:
        order = np.argsort(-by_name[:-1], kind="stable")[:TOP_FP32]
        top = tuple((str(categories[code]), round(100.0 * float(by_name[code]) / total, 1)) for code in order
                    if by_name[code] > 0)
    return MathPrecision(fp32_ns=_floats(per_kind[1]), tensor_ns=_floats(per_kind[2]),
                         kernel_ns=_floats(per_kind.sum(axis=0)), top_fp32=top)


def _floats(ns: np.ndarray) -> tuple[float, ...]:
    return tuple(float(value) for value in ns)
