"""Which math units the GEMMs and convolutions ran on, read from their kernels' names (no shapes needed).

Definitions (kernels that start in the window [lo, hi) of one trace, per device):

* **matrix kernel**: a GEMM (op_kernels.kernel_class ``gemm``: gemm, cutlass, xmma, cublas, Cijk_ ...) or a
  convolution (cuDNN / MIOpen conv engines: ``conv``, ``scudnn``, ``dgrad``, ``wgrad``, ``fprop``,
  ``winograd``, ``implicit_gemm``, ``implicit_convolve``).
* **tensor-core**: a matrix kernel whose name states a reduced-precision or tensor-core path: the
  MMA-shape families (``h884``, ``s1688``, ``h16816``, ``i8816`` ...), ``hmma``/``imma``/``wmma``/``wgmma``/
  ``gmma``/``mfma``/``tensorop``, cuBLAS's ``nvjet``, or a data type fp16/bf16/fp8/int8/tf32.
* **FP32 SIMT**: a matrix kernel that states fp32 and none of the above: ``sgemm`` (``volta_sgemm``,
  ``ampere_sgemm``, cuDNN's ``implicit_convolve_sgemm``), ``scudnn``, ``f32``/``fp32`` without ``tf32``,
  a ``<float`` template argument, ``simt``. Those run on the CUDA cores, not the tensor cores.
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

_CONV = re.compile(r"(?i)conv|scudnn|dgrad|wgrad|fprop|winograd|implicit_gemm|implicit_convolve")
_TENSOR = re.compile(r"(?i)[hsi]\d{3,5}gemm|[hsi](?:884|1688|16816|8816|16832)|hmma|imma|wmma|wgmma|gmma|mfma|tensorop"
                     r"|nvjet|bf16|bfloat16|(?<!b)f16|fp16|half|e4m3|e5m2|fp8|int8|i8i8|tf32|xf32")
_FP32 = re.compile(r"(?i)sgemm|scudnn|(?<![bt])f32|fp32|<float\b|simt")
TOP_FP32 = 3


def matrix_precision(name: str) -> str | None:
    """``tensor`` or ``fp32`` for a GEMM or convolution kernel whose name says which math it runs;
    None for any other kernel, or a matrix kernel whose name states no precision."""
    if kernel_class(name) != "gemm" and not _CONV.search(name):
        return None
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
