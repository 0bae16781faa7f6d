"""Work models of varlen / KV-cache FlashAttention, FlashInfer, AITER attention and of packed-weight GEMMs (AWQ,
NVFP4, the W8A8 grouped expert GEMM, DeepGEMM), and the bandwidth-bound '% achv': formulas checked against counts
made here, and generated traces (samples/gen_serving_models.py) whose truth is computed from the generated requests
and shapes."""

import json
import sys

import numpy as np
import pytest
from conftest import ROOT

from tracetriage import analyze, open_case
from tracetriage.analyzers import efficiency, peaks, quantized_gemms, serving_attention, serving_work
from tracetriage.analyzers.serving_work import StepLengths
from tracetriage.model import WORK_OP_PREFIXES, WORK_OPS, is_work_op
from tracetriage.reports import render

sys.path.insert(0, str(ROOT / "samples"))
import gen_serving_models  # noqa: E402

BF, I32 = "c10::BFloat16", "int"


def _varlen_record(rows, kv_rows, batch, max_q, max_k, causal):
    dims = [[rows, 8, 64], [kv_rows, 2, 64], [kv_rows, 2, 64], [batch + 1], [batch + 1]] + [[]] * 5
    types = [BF, BF, BF, I32, I32, "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"]
    return [dims, types, ["", "", "", "", "", str(max_q), str(max_k), "0.0", "0.125", str(causal)]]


def test_varlen_equal_lengths_come_from_the_shapes_causal_or_not():
    batch, sq, sk = 3, 16, 40
    got = serving_work.work("flash_attn::_flash_attn_varlen_forward", _varlen_record(batch * sq, batch * sk, batch, sq, sk, True),
                            None)
    causal_pairs = batch * sum(sk - sq + i for i in range(1, sq + 1))  # bottom-right aligned mask
    assert got.kind == "attention" and got.flops == 4 * 8 * 64 * causal_pairs
    full = serving_work.work("flash_attn::_flash_attn_varlen_forward",
                             _varlen_record(batch * sq, batch * sk, batch, sq, sk, False), None)
    assert full.flops == 4 * 8 * 64 * batch * sq * sk
    # a shorter sequence in the batch: the rows fall short of batch x max, the lengths are not in the shapes
    ragged = _varlen_record(batch * sq - 5, batch * sk - 5, batch, sq, sk, True)
    assert serving_work.work("flash_attn::_flash_attn_varlen_forward", ragged, None) is None
    step = StepLengths(c_sq=batch * sq - 5, c_sk=batch * sk - 5, c_sqsq=(batch * sq - 5) * sq, c_sqsk=(batch * sq - 5) * sk)
    assert serving_work.work("flash_attn::_flash_attn_varlen_forward", ragged, step) is not None
    unrecorded = _varlen_record(batch * sq, batch * sk, batch, sq, sk, True)[:2] + [None]  # NVTX: no scalars, no causal flag
    assert serving_work.work("flash_attn::_flash_attn_varlen_forward", unrecorded, None) is None
    assert serving_work.needs_step("vllm::flash_attn_varlen_func") and serving_work.needs_step("vllm::flash_attn_with_kvcache")


def test_packed_weight_gemms_count_the_dense_equivalent_and_the_stored_bytes():
    m, k, n = 8, 256, 512
    awq = quantized_gemms.awq_gemm([([m, k], 2, "fp16"), ([k, n // 8], 4, "int32"), ([k // 128, n], 2, "fp16"),
                                    ([k // 128, n // 8], 4, "int32")])
    weights = k * n // 2 + (k // 128) * n * 2 + (k // 128) * n // 2
    assert awq.flops == 2 * m * n * k and awq.weight_bytes == weights and awq.bytes == m * k * 2 + weights + m * n * 2
    assert awq.dtype == "fp16" and awq.tokens == m
    assert quantized_gemms.awq_gemm([([m, k], 2, "fp16"), ([k, n // 8], 4, "int32"), ([k // 128, n + 8], 2, "fp16"),
                                     ([k // 128, n // 8], 4, "int32")]) is None  # scales wider than the packed weight
    fp4 = quantized_gemms.cutlass_scaled_fp4_mm([([m, n], 2, "bf16"), ([m, k // 2], 1, "uint8"), ([n, k // 2], 1, "uint8"),
                                                 ([m, k // 16], 1, "fp8"), ([n, k // 16], 1, "fp8"), ([1], 4, "fp32")])
    assert fp4.flops == 2 * m * n * k and fp4.dtype == "fp4" and fp4.weight_bytes == n * k // 2 + n * k // 16
    experts, rows = 16, 4  # four routed rows touch at most four of the sixteen experts
    moe = quantized_gemms.cutlass_moe_mm([([rows, n], 2, "bf16"), ([rows, k], 1, "fp8"), ([experts, n, k], 1, "fp8"),
                                          ([rows, 1], 4, "fp32"), ([experts, n, 1], 4, "fp32")])
    assert moe.flops == 2 * rows * n * k and moe.weight_bytes == rows / experts * (experts * n * k + experts * n * 4)
    assert {"_C::awq_gemm", "_C::cutlass_scaled_fp4_mm", "_C::cutlass_moe_mm", "vllm::flash_attn_with_kvcache"} <= WORK_OPS


def test_fp4_is_held_against_the_fp4_peak_or_the_fp8_one():
    assert peaks.peak_tflops(peaks.DEVICES["b200"], "fp4") == ("fp4", 9000.0)
    assert peaks.peak_tflops(peaks.DEVICES["h100_sxm"], "fp4") == ("fp8", peaks.DEVICES["h100_sxm"]["peak_tflops"]["fp8"])


def test_a_bandwidth_bound_row_has_no_achievable_share():
    """No vendor publishes a measured achievable bandwidth: a memory-bound row is neither held against a
    compute peak (AMD's achievable FLOP/s) nor given its % of roofline twice (the trial's "12 / 12")."""
    flops, nbytes, dtypes = np.array([1e9]), np.array([2e12]), np.array(["bf16"], dtype=object)
    for key in ("mi300x", "h100_sxm"):
        entry = peaks.DEVICES[key]
        got = peaks.roofline(entry, flops, nbytes, dtypes, 1e9)  # 2 TB in 1 s
        assert got.bound == "memory"
        assert got.pct_of_roofline == pytest.approx(100 * 2000 / entry["bandwidth_gbps"], abs=0.01)
        assert got.pct_of_achievable is None


def _measured(folder):
    truth = json.loads((folder / "truth.json").read_text())
    case = open_case([folder / "trace.pt.trace.json.gz"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(efficiency, "TOP_OPS", 50)  # every generated op listed
        return case, efficiency.measure(case.traces[0], 0, 1 << 62, []), truth


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return _measured(gen_serving_models.write(tmp_path_factory.mktemp("models")))


@pytest.fixture(scope="module")
def generated_rocm(tmp_path_factory):
    return _measured(gen_serving_models.write(tmp_path_factory.mktemp("models"), rocm=True))


FLASHINFER_OPS = ["flashinfer::batch_prefill_with_kv_cache_<uri>_paged_run", "flashinfer::batch_decode_with_kv_cache_<uri>_run",
                  "flashinfer::batch_prefill_with_kv_cache_<uri>_ragged_run",
                  "flashinfer::single_prefill_with_kv_cache_<uri>_run", "flashinfer::single_decode_with_kv_cache_<uri>_run"]
DEEPGEMM_OPS = ["vllm::fp8_gemm_nt_op", "sglang::deep_gemm_fp8_fp8_bf16_nt", "vllm::w8a8_block_fp8_matmul_deepgemm"]
MOE_OPS = ["vllm::flashinfer_fused_moe_blockscale_fp8", "vllm::flashinfer_fused_moe_bf16"]


def _check_op(measured, name):
    _, eff, truth = measured
    op = next(row.to_contract() for row in eff.top_ops if row.name == name)
    assert op["count"] == truth["rounds"]
    assert op["flops"] / op["count"] == pytest.approx(truth[name]["flops"], rel=1e-12)
    assert op["bytes"] / op["count"] == pytest.approx(truth[name]["bytes"], rel=1e-12)
    assert op["time_ns"] / op["count"] == truth[name]["time_ns"] and op["dtype"] == truth[name]["dtype"]
    assert op["peak_dtype"] == truth[name]["dtype"]  # B200: an FP4, FP8, BF16 and FP16 peak each


@pytest.mark.parametrize("name", ["flash_attn::_flash_attn_varlen_forward", "vllm::flash_attn_varlen_func",
                                  "vllm::flash_attn_with_kvcache", "_C::awq_gemm", "_C::cutlass_scaled_fp4_mm",
                                  "_C::cutlass_moe_mm", *FLASHINFER_OPS, *DEEPGEMM_OPS, *MOE_OPS])
def test_generated_ops_get_the_truths_work(generated, name):
    _check_op(generated, name)


@pytest.mark.parametrize("name", ["aiter::mha_varlen_fwd", "aiter::fmha_v3_varlen_fwd", "aiter::pa_fwd_asm", "aiter::mha_fwd"])
def test_generated_aiter_ops_get_the_truths_work(generated_rocm, name):
    _check_op(generated_rocm, name)
    assert all(row["measured_share_pct"] == 100.0 for row in efficiency.coverage(generated_rocm[1]))


def test_generated_trace_is_all_measured_and_every_format_shows_the_bandwidth_share(generated):
    case, eff, _ = generated
    assert all(row["measured_share_pct"] == 100.0 for row in efficiency.coverage(eff))
    analysis = analyze(case)
    memory_rows = [row for row in analysis.data["efficiency"]["classes"] if row["bound"] == "memory"]
    assert memory_rows, "the decode attention streams its KV cache: a memory-bound class"
    for row in memory_rows:
        assert row["pct_of_roofline"] == pytest.approx(100 * row["achieved_gbps"] / 8000, abs=0.02)
        assert row["pct_of_achievable"] is None
        for fmt in ("text", "md", "html"):
            assert f"{row['pct_of_roofline']:.0f}" in render(analysis, fmt)


def _pairs(requests, causal=True):
    """(query, key) pairs of (new, cached) requests, counted query by query."""
    return sum(cached + (i if causal else new + cached) for new, cached in requests for i in range(1, new + 1))


def _paged_prefill(rows, mask, layout=0):
    cache = [64, 16, 2, 64] if layout == 0 else [64, 2, 16, 64]
    dims = [[], [8], [8], [], [rows, 8, 64], cache, cache, [], [], [3], [3], [9], [2], [], []]
    types = ["Scalar", "unsigned char", "unsigned char", "GenericList", BF, BF, BF, "", "", I32, I32, I32, I32, "", "Scalar"]
    return [dims, types, [str(mask)] + [""] * 13 + [str(layout)]]


def test_flashinfer_ops_share_one_name_and_the_parsers_keep_them():
    uri = "flashinfer::batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_head_dim_64_f16qk_False"
    assert serving_work.canonical_name(uri + "_paged_run") == serving_attention.FLASHINFER_PAGED
    assert serving_work.canonical_name(uri + "_ragged_run") == serving_attention.FLASHINFER_RAGGED
    assert serving_work.canonical_name("flashinfer::merge_state") == "flashinfer::merge_state"  # not attention
    assert is_work_op(uri + "_paged_run") and serving_work.needs_step(uri + "_paged_run")
    for prefix, _, canonical in serving_attention.FLASHINFER_NAMES:
        assert prefix in WORK_OP_PREFIXES and canonical not in WORK_OPS


def test_flashinfer_paged_prefill_takes_its_part_of_a_split_step():
    context, decodes = [(20, 30), (12, 0)], [(1, 99), (1, 399)]
    step = StepLengths(c_sq=32, c_sk=62, c_sqsq=20 * 20 + 144, c_sqsk=20 * 50 + 144, g_sq=2, g_sk=500, g_sqsq=2, g_sqsk=500)
    name = "flashinfer::batch_prefill_with_kv_cache_x_paged_run"
    for layout in (0, 1):  # NHD and HND caches: the same two KV heads
        got = serving_work.work(name, _paged_prefill(32, 1, layout), step)  # the context requests' rows
        assert got.flops == 4 * 8 * 64 * _pairs(context)
    whole = serving_work.work(name, _paged_prefill(34, 1), step)
    assert whole.flops == 4 * 8 * 64 * _pairs(context + decodes)
    assert serving_work.work(name, _paged_prefill(33, 1), step) is None  # rows no part of the step holds
    assert serving_work.work(name, _paged_prefill(32, 0), step) is None  # non-causal: SGLang's prefix-only keys
    assert serving_work.work(name, _paged_prefill(32, 2), step) is None  # a custom mask
    assert serving_work.work(name, _paged_prefill(32, 1), None) is None  # no annotated step


def test_flashinfer_ragged_lengths_from_one_sequence_or_the_step():
    def ragged(rows, key_rows, batch, mask=1):
        qkv = [[rows, 8, 64], [key_rows, 2, 64], [key_rows, 2, 64]]
        dims = [[], [8], [8], []] + qkv + [[], [], [batch + 1], [batch + 1], [], []]
        types = ["Scalar", "unsigned char", "unsigned char", "GenericList", BF, BF, BF, "", "", I32, I32, "", "Scalar"]
        return [dims, types, [str(mask)] + [""] * 11 + ["0"]]

    name = "flashinfer::batch_prefill_with_kv_cache_x_ragged_run"
    assert serving_work.work(name, ragged(30, 50, 1), None).flops == 4 * 8 * 64 * _pairs([(30, 20)])
    assert serving_work.work(name, ragged(30, 50, 1, mask=0), None).flops == 4 * 8 * 64 * 30 * 50
    assert serving_work.work(name, ragged(30, 30, 2), None) is None  # two sequences, no step: lengths unknown
    step = StepLengths(c_sq=30, c_sk=70, c_sqsq=100 + 400, c_sqsk=10 * 30 + 20 * 40)  # (10, 20) and (20, 20)
    assert serving_work.work(name, ragged(30, 70, 2), step).flops == 4 * 8 * 64 * _pairs([(10, 20), (20, 20)])
    assert serving_work.work(name, ragged(30, 30, 2), step).flops == 4 * 8 * 64 * _pairs([(10, 0), (20, 0)])
    assert serving_work.work(name, ragged(30, 50, 2), step) is None  # keys neither every attended token nor the new


def test_aiter_varlen_reads_its_causal_flag_and_deepgemm_checks_its_operands():
    q, kv = [48, 8, 64], [48, 2, 64]
    dims, types = [q, kv, kv, [4], [4]] + [[]] * 12, [BF, BF, BF, I32, I32] + ["Scalar"] * 12
    concrete = ["", "", "", "", "", "16", "16", "0", "0.0", "0.125", "0.0", "False", "False"] + [""] * 4
    full = serving_work.work("aiter::mha_varlen_fwd", [dims, types, concrete], None)
    assert full.flops == 4 * 8 * 64 * 3 * 16 * 16  # three 16-token sequences, no mask
    concrete[12] = "True"
    assert serving_work.work("aiter::fmha_v3_varlen_fwd", [dims, types, concrete], None).flops \
        == 4 * 8 * 64 * _pairs([(16, 0)] * 3)
    fp8, f32 = "c10::Float8_e4m3fn", "float"
    good = [[[16, 512], [16, 4], [256, 512], [2, 4], [16, 256]], [fp8, f32, fp8, f32, BF]]
    got = serving_work.work("vllm::fp8_gemm_nt_op", good, None)
    assert got.flops == 2 * 16 * 256 * 512 and got.dtype == "fp8" and got.weight_bytes == 256 * 512 + 2 * 4 * 4
    assert serving_work.work("vllm::fp8_gemm_nt_op", [good[0], [BF, f32, BF, f32, BF]], None) is None  # not FP8
    assert serving_work.work("sglang::deep_gemm_fp8_fp8_bf16_nt", [[[16, 512], [16, 4], [256, 256], [2, 4], [16, 256]],
                                                                   good[1]], None) is None  # depths disagree


def test_flashinfer_moe_needs_every_expert_local_and_the_gated_weights():
    def moe(local, inner=64, experts=8):
        dims = [[4, experts], [], [4, 256], [8, 128 // 32, 256, 32], [8, 256 // 32, 64, 32]] + [[]] * 9
        types = [BF, "", BF, BF, BF] + ["Scalar"] * 9
        concrete = [""] * 5 + [str(experts), "2", "", "", str(inner), "0", str(local), "1", "8192"]
        return serving_work.work("vllm::flashinfer_fused_moe_bf16", [dims, types, concrete], None)

    got = moe(local=8)  # 4 tokens x top-2 = 8 routed pairs: at most all 8 experts touched
    assert got.flops == 2 * 8 * 256 * 128 + 2 * 8 * 64 * 256 and got.dtype == "bf16" and got.kind == "gemm"
    assert got.weight_bytes == 8 * (128 * 256 + 256 * 64) * 2
    assert moe(local=4) is None  # expert parallelism: the pairs routed to this GPU are in device memory
    assert moe(local=8, inner=32) is None  # the weights do not hold E x 2N x K and E x K x N elements
