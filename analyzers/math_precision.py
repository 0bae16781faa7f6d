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

from tracetriage.analyzers.metrics import MathPrecision
from tracetriage.analyzers.op_kernels import kernel_class
from tracetriage.model import Trace, cat_codes, is_kind

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
    """FP32 SIMT and tensor-core matrix kernel time per device of one trace in [lo, hi) (module docstring)."""
    gpu = trace.gpu
    count = len(trace.devices)
    start, end = gpu["start"].to_numpy(np.int64), gpu["end"].to_numpy(np.int64)
    rows = np.flatnonzero(is_kind(gpu, "kernel") & (start >= lo) & (start < hi))
    codes, categories = cat_codes(gpu["name"])
    kind_of = np.array([{"fp32": 1, "tensor": 2}.get(matrix_precision(str(name)), 0) for name in categories] + [0],
                       np.int8)  # one regex per distinct name; the last slot is code -1 (no name)
    dur = (end[rows] - start[rows]).astype(np.float64)
    device = gpu["device"].to_numpy()[rows]
    kind = kind_of[codes[rows]]

    def per_device(selected: np.ndarray) -> tuple[float, ...]:
        ns = np.bincount(device[selected], weights=dur[selected], minlength=count) if selected.any() else np.zeros(count)
        return tuple(float(value) for value in ns[:count])

    fp32 = kind == 1
    names = codes[rows][fp32]
    top: tuple[tuple[str, float], ...] = ()
    total = float(dur.sum())
    if names.size and total:
        by_name = np.bincount(names, weights=dur[fp32])
        order = np.argsort(-by_name)[:TOP_FP32]
        top = tuple((str(categories[code]), round(100.0 * float(by_name[code]) / total, 1)) for code in order
                    if by_name[code] > 0)
    return MathPrecision(fp32_ns=per_device(fp32), tensor_ns=per_device(kind == 2),
                         kernel_ns=per_device(np.ones(rows.size, bool)), top_fp32=top)
