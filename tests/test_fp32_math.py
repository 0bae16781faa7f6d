"""No healthy verdict without a measured efficiency, and FP32 matrix math on a tensor-core GPU named from the
kernels' names (audit: hta_ns_resolution_rank0, a V100 training in FP32 — volta_sgemm and fp32 cuDNN kernels,
no tensor-core kernel — called "Healthy", with bf16/fp8 advice the V100 cannot take)."""

import gzip
import json
import re

import pytest
from conftest import matrix_training, real, samples_generate

from tracetriage import analyze, open_case

US = 1_000
V100 = ("Tesla V100-SXM2-32GB", 34079637504)
A100 = ("NVIDIA A100-SXM4-80GB", 85899345920)
H100 = ("NVIDIA H100 80GB HBM3", 85520809984)
FP32_KERNELS = ("volta_sgemm_128x64_nn", "cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1")
TENSOR_KERNELS = ("volta_h884gemm_128x128_ldg8_nn", "volta_fp16_s884cudnn_fp16_128x128_ldg8_relu_f2f_exp_medium_nhwc_tn_v1")
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


def _training(tmp_path, gpu, matrix_kernels, seed=11):
    """conftest.matrix_training written as an nsys export on ``gpu``; returns its path and the matrix share."""
    rank, share = matrix_training(matrix_kernels, ELEMENTWISE, 7100, seed)
    path = tmp_path / f"train_{gpu[0].split()[-1]}.sqlite"
    samples_generate().write_nsys(path, [rank], "fp32_training", gpu=gpu)
    return path, share


def _ids(a):
    return [f["id"] for f in a.findings]


def test_generated_fp32_training_on_a_v100_is_fp32_math_with_fp16_advice(tmp_path):
    path, share = _training(tmp_path, V100, FP32_KERNELS)
    a = analyze(open_case([path]))
    assert "healthy" not in _ids(a) and a.headline.startswith("[fp32_math]")
    found = next(f for f in a.findings if f["id"] == "fp32_math")
    by_name = {row["name"]: row["value"] for row in found["evidence"]}
    assert by_name["fp32_matrix_pct"] == pytest.approx(share, abs=0.2) and by_name["tensor_matrix_pct"] == 0.0
    # the claim: that share of the compute time, less what the same work takes at the FP16 tensor-core peak
    compute = a.data["devices"][0]["accounting"]["slices_pct"]["compute"]
    assert found["impact_pct"] == pytest.approx(compute * share / 100 * (1 - 15.7 / 125), abs=0.5)
    assert "float16" in found["fix"] and "GradScaler" in found["fix"] and "no bf16 or fp8" in found["fix"]
    assert "bfloat16" not in found["fix"]


@pytest.mark.parametrize("gpu, words, absent", [(A100, ("bfloat16", "allow_tf32"), "fp8"),
                                                (H100, ("bfloat16", "fp8 with scaling"), "dtype=torch.float16")])
def test_precision_advice_follows_the_architecture(tmp_path, gpu, words, absent):
    a = analyze(open_case([_training(tmp_path, gpu, ("ampere_sgemm_128x64_nn", "sm80_xmma_gemm_f32f32_f32f32_f32_nn"))[0]]))
    found = next(f for f in a.findings if f["id"] == "fp32_math")
    assert all(word in found["fix"] for word in words) and absent not in found["fix"]


def test_generated_tensor_core_training_without_shapes_is_not_called_healthy(tmp_path):
    path, _ = _training(tmp_path, V100, TENSOR_KERNELS)
    a = analyze(open_case([path]))
    assert _ids(a) == []
    assert a.headline.startswith("No problem found in what was measured") and "efficiency" in a.headline
    # busy and steady, nothing found: only the unmeasured efficiency keeps it from "Healthy"
    assert [ab["analysis"] for ab in a.data["abstentions"]] == ["efficiency"]
    assert a.data["processes"][0]["steps"]["count"] >= 3
    assert a.data["devices"][0]["accounting"]["slices_pct"]["compute"] >= 80


def _independent_shares(path) -> tuple[float, float]:
    """From the raw trace: the share of all kernel time held by kernels named sgemm / scudnn (a lower bound of
    the FP32 matrix share) and by every kernel whose name says float or sgemm/scudnn (an upper bound)."""
    events = json.load(gzip.open(path, "rt"))["traceEvents"]
    kernels = [(e["name"], float(e.get("dur", 0))) for e in events if e.get("cat") == "kernel"]
    total = sum(dur for _, dur in kernels)
    lower = sum(dur for name, dur in kernels if re.search(r"sgemm|scudnn", name))
    upper = sum(dur for name, dur in kernels if re.search(r"sgemm|scudnn|float", name))
    return 100 * lower / total, 100 * upper / total


def test_real_v100_fp32_training_is_not_healthy():
    path = real("kineto", "hta_ns_resolution_rank0.json.gz")
    a = analyze(open_case([path]))
    assert "healthy" not in _ids(a) and a.headline.startswith("[fp32_math]")
    found = next(f for f in a.findings if f["id"] == "fp32_math")
    lower, upper = _independent_shares(path)
    value = next(row["value"] for row in found["evidence"] if row["name"] == "fp32_matrix_pct")
    assert lower >= 25 and lower - 2 <= value <= upper + 2
    assert next(row["value"] for row in found["evidence"] if row["name"] == "tensor_matrix_pct") == 0.0
    assert "float16" in found["fix"] and "bf16, or fp8" not in found["fix"] and found["severity"] == "high"


def test_math_precision_read_in_slices_equals_the_whole_table(tmp_path, monkeypatch):
    """math_precision.measure reads the table a slice of rows at a time (10M kernels: no temporary over a whole
    column); with slices of 7 rows its sums are those computed here from the raw table, row by row."""
    from tracetriage.analyzers import math_precision

    path, _ = _training(tmp_path, A100, (FP32_KERNELS[0], TENSOR_KERNELS[0]))
    trace = open_case([path]).traces[0]
    gpu = trace.gpu
    lo = int(gpu["start"].quantile(0.2))
    hi = int(gpu["start"].quantile(0.9))
    want = {"fp32": 0, "tensor": 0, "all": 0}
    for kind, name, start, end in zip(gpu["kind"], gpu["name"], gpu["start"], gpu["end"]):
        if kind == "kernel" and lo <= start < hi:
            want["all"] += int(end - start)
            precision = math_precision.matrix_precision(str(name))
            if precision:
                want[precision] += int(end - start)
    monkeypatch.setattr(math_precision, "SLICE", 7)
    got = math_precision.measure(trace, lo, hi)
    assert (got.fp32_ns[0], got.tensor_ns[0], got.kernel_ns[0]) == (want["fp32"], want["tensor"], want["all"])
    assert want["fp32"] and want["tensor"] and got.top_fp32[0][0] == FP32_KERNELS[0]
