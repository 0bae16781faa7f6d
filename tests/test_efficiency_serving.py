"""Work models of the serving kernels (issue 34): paged / ragged attention from the step's sequence
lengths, vLLM's MoE from its child ops, KV-cache writes; coverage per class; peaks named, with the
vendor's max-achievable beside the datasheet's — on a generated trace whose truth is computed
request by request (samples/gen_serving.py) and on TraceLens's vLLM and SGLang serving traces."""

import gzip
import json
import sys

import pytest
from conftest import ROOT, real

from tracetriage import analyze, open_case
from tracetriage.analyzers import efficiency, peaks, serving_work
from tracetriage.analyzers.serving_work import StepLengths
from tracetriage.reports import render
from tracetriage.reports.html import render_card

sys.path.insert(0, str(ROOT / "samples"))
import gen_serving  # noqa: E402

BF = "c10::BFloat16"
KINETO = "kineto"
VLLM = ("tracelens_vllm_prefilldecode_piecewise_graph_execution.json.gz",
        "tracelens_vllm_prefilldecode_piecewise_graph_capture_rank0.json.gz")
SGLANG = ("tracelens_sglang_qwen3-8b_decode.json.gz", "tracelens_sglang_decode_capture_bs32_rank0.json.gz")


# --- step annotations ---------------------------------------------------------------------------

def test_step_lengths_from_the_engines_annotations():
    vllm = serving_work.step_lengths("execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)"
                                     "_generation_37(sq37sk34489sqsq37sqsk34489)")
    assert vllm == StepLengths(8155, 8430, 7475785, 7671310, 37, 34489, 37, 34489)
    sglang = serving_work.step_lengths("step[MIXED bs=2 c=1 g=1 c_sq=5 c_sk=8 c_sqsq=25 c_sqsk=40 g_sq=1 g_sk=12 "
                                       "g_sqsq=1 g_sqsk=12]")
    assert sglang == StepLengths(5, 8, 25, 40, 1, 12, 1, 12)
    decode = serving_work.step_lengths("step[DECODE bs=64 g_sq=128 g_sqsq=256 g_sqsk=262144 g_sk=131072]")
    assert decode == StepLengths(g_sq=128, g_sk=131072, g_sqsq=256, g_sqsk=262144)
    for without_lengths in ("execute_context_2(6144)_generation_3(3)", "step[DECODE bs=32]", "ProfilerStep#3"):
        assert serving_work.step_lengths(without_lengths) is None


# --- the formulas on hand-checked shapes ---------------------------------------------------------

def test_unified_attention_counts_each_requests_causal_pairs():
    # one prefill chunk of 4 new tokens after 6 cached, one decode token with 9 tokens of context
    step = StepLengths(c_sq=4, c_sk=10, c_sqsq=16, c_sqsk=40, g_sq=1, g_sk=10, g_sqsq=1, g_sqsk=10)
    pairs = (4 * 6 + (1 + 2 + 3 + 4)) + 10  # each new token sees the cached ones and the new ones up to itself
    got = serving_work.work("vllm::unified_attention_with_output", [[[5, 8, 64], [5, 2, 64], [5, 2, 64], [5, 8, 64]],
                                                                    [BF] * 4, [""] * 4], step)
    assert got.kind == "attention" and got.flops == 2 * 8 * (64 + 64) * pairs
    # q and o of the 5 new tokens, their k and v, the 6 + 9 cached tokens' k and v: all bf16
    assert got.bytes == (5 * 8 * 128 + 5 * 2 * 128 + 15 * 2 * 128) * 2
    assert serving_work.work("vllm::unified_attention_with_output",
                             [[[5, 8, 64], [5, 2, 64], [5, 2, 64], [5, 8, 64]], [BF] * 4, [""] * 4], None) is None
    # an annotation for more tokens than the op's rows is another batch's: no work
    big = StepLengths(c_sq=400, c_sk=400, c_sqsq=160000, c_sqsk=160000)
    assert serving_work.work("vllm::unified_attention", [[[5, 8, 64], [5, 2, 64], [5, 2, 64]], [BF] * 3, [""] * 3], big) is None


def test_moe_needs_its_top_k_and_expert_weights():
    topk = ["TopK", [[16, 4], [], [], [], [], [], []], [BF, "Scalar", "Scalar", "Scalar", "Scalar", "", ""],
            ["", "2", "True", "1", "True", "", ""]]
    w1 = ["aten::view", [[4, 32, 96], []], ["unsigned char", "ScalarList"], ["", ""]]  # K=64 packed 2 per byte, 2N=96
    w2 = ["aten::view", [[4, 24, 64], []], ["unsigned char", "ScalarList"], ["", ""]]  # N=48 packed, K=64
    record = [[[16, 64], [16, 4], [], []], [BF, BF, "", ""], ["", "", "", ""]]
    got = serving_work.work("vllm::moe_forward", record + [[topk, w1, w2]], None)
    routed = 16 * 2
    assert got.kind == "gemm" and got.dtype == "bf16" and got.tokens == 16
    assert got.flops == 2 * routed * 64 * 96 + 2 * routed * 48 * 64
    weights = 4 * 32 * 96 + 4 * 24 * 64  # every expert touched: 32 routed tokens over 4 experts
    assert got.weight_bytes == weights and got.bytes == 2 * 16 * 64 * 2 + 2 * routed * 48 * 2 + weights
    assert serving_work.work("vllm::moe_forward", record, None) is None  # no child ops: the experts are unknown
    assert serving_work.work("vllm::moe_forward", record + [[w1, w2]], None) is None  # no top-k
    odd = ["aten::view", [[4, 24, 80], []], ["unsigned char", "ScalarList"], ["", ""]]  # w2 does not give back K
    assert serving_work.work("vllm::moe_forward", record + [[topk, w1, odd]], None) is None


def test_the_achievable_peak_is_the_same_roofline_at_the_vendors_measured_rate():
    entry = peaks.DEVICES["mi300x"]
    import numpy as np

    flops, nbytes, dtypes = np.array([1e15]), np.array([1e6]), np.array(["bf16"], dtype=object)
    got = peaks.roofline(entry, flops, nbytes, dtypes, 2e9)  # 1 PFLOP in 2 s: 500 TFLOP/s
    assert got.peak_tflops == entry["peak_tflops"]["bf16"] and got.achievable_tflops == 708
    assert got.pct_of_roofline == pytest.approx(100 * 500 / entry["peak_tflops"]["bf16"], abs=0.01)
    assert got.pct_of_achievable == pytest.approx(100 * 500 / 708, abs=0.01)
    h100 = peaks.roofline(peaks.DEVICES["h100_sxm"], flops, nbytes, dtypes, 2e9)  # NVIDIA publishes no such figure
    assert h100.pct_of_achievable is None and h100.achievable_tflops is None
    for key, device in peaks.DEVICES.items():
        if "achievable_tflops" in device:
            assert device["achievable_source"].startswith("AMD") and "https://" in device["achievable_source"], key
            assert all(device["achievable_tflops"][d] < device["peak_tflops"][d] for d in device["achievable_tflops"]), key


# --- the generated serving trace ----------------------------------------------------------------

@pytest.fixture(scope="module")
def serving(tmp_path_factory):
    folder = gen_serving.write(tmp_path_factory.mktemp("serving"))
    truth = json.loads((folder / "truth.json").read_text())
    case = open_case([folder / "trace.pt.trace.json.gz"])
    trace = case.traces[0]
    whole = efficiency.measure(trace, 0, 1 << 62, [])  # every kernel, no window
    return case, trace, whole, truth


def _per_call(eff, name):
    op = next(o.to_contract() for o in eff.top_ops if o.name == name)
    return op["flops"] / op["count"], op["bytes"] / op["count"], op["time_ns"] / op["count"], op


@pytest.mark.parametrize(("name", "key"), [
    ("vllm::unified_attention_with_output", "vllm_attention"),
    ("sglang_profiler::attention_paged_attention_ragged_<layer>", "sglang_attention"),
    ("vllm::moe_forward", "moe"),
    ("_C_cache_ops::reshape_and_cache_flash", "kv_cache_write"),
])
def test_generated_serving_ops_get_the_truths_work(serving, name, key):
    _, _, whole, truth = serving
    flops, nbytes, time_ns, op = _per_call(whole, name)
    assert flops == pytest.approx(truth[key]["flops"], rel=1e-12)
    assert nbytes == pytest.approx(truth[key]["bytes"], rel=1e-12)
    assert time_ns == truth[key]["time_ns"]
    assert op["peak_dtype"] == "bf16" and op["peak_tflops"] == peaks.DEVICES["mi300x"]["peak_tflops"]["bf16"]


def test_generated_ops_without_lengths_or_child_ops_stay_not_measured_with_the_reason(serving):
    _, _, whole, truth = serving
    rounds = truth["rounds"]
    by_what = {row.what: row.to_contract() for row in whole.not_measured}
    lengths = by_what["attention kernels without sequence lengths"]
    assert lengths["time_ns"] == rounds * truth["not_measured"]["attention_ns"]
    assert "sequence lengths" in lengths["reason"] and "sq" in lengths["capture_hint"]
    assert by_what["gemm kernels without shapes"]["time_ns"] == rounds * truth["not_measured"]["gemm_ns"]
    layers = truth["layers"]
    measured_attention = rounds * layers * (truth["vllm_attention"]["time_ns"] + truth["sglang_attention"]["time_ns"])
    coverage = {row["class"]: row for row in efficiency.coverage(whole)}
    assert coverage["attention"]["measured_ns"] == measured_attention
    assert coverage["attention"]["time_ns"] == measured_attention + lengths["time_ns"]
    assert coverage["gemm"]["measured_share_pct"] == pytest.approx(
        100 * layers * truth["moe"]["time_ns"] / (layers * truth["moe"]["time_ns"] + truth["not_measured"]["gemm_ns"]), abs=0.005)


def test_every_format_says_each_classs_measured_share_and_names_its_peak(serving):
    case, _, _, _ = serving
    a = analyze(case)
    eff = a.data["efficiency"]
    assert {row["class"] for row in eff["coverage"]} == {"gemm", "attention", "memory_bound"}
    text, md, html, card = render(a, "text"), render(a, "md"), render(a, "html"), render_card(a)
    for row in eff["coverage"]:
        assert f"{row['class']} " in card.split("Efficiency measured:", 1)[1].split("</p>", 1)[0]
        share = f"{row['measured_share_pct']:.0f}%"
        assert f"{row['class']} " in text.split("measured: ", 1)[1].splitlines()[0] and share in text.split("measured: ", 1)[1]
        assert share in md.split("Measured share of each class's kernel time: ", 1)[1].splitlines()[0]
        assert share in html.split("Measured share of each class's kernel time: ", 1)[1].split("</p>", 1)[0]
    for out in (text, md, html, card):
        assert "BF16 1,307" in out and "max-achievable FP8 1,273, BF16 708, FP16 654 TFLOP/s" in out and "5,300 GB/s" in out


# --- the real serving traces ---------------------------------------------------------------------

def _raw(name):
    with gzip.open(real(KINETO, name), "rt") as handle:
        return json.load(handle)["traceEvents"]


def _shares(pair):
    a = analyze(open_case([real(KINETO, name) for name in pair]))
    eff = a.data["efficiency"]
    return eff, {row["class"]: row["measured_share_pct"] for row in eff["coverage"]}


def test_real_vllm_prefill_decode_gemm_and_attention_are_measured():
    """gpt-oss on MI300X, 25 piecewise graph replays tied to their capture: the MoE layers (88% of
    GEMM time before) and unified_attention are measured: FLOPs from the capture's child ops and the
    step annotation, checked against the raw events."""
    eff, shares = _shares(VLLM)
    assert shares["gemm"] >= 80 and shares["attention"] >= 80
    capture = _raw(VLLM[1])
    moe = next(e for e in capture if e.get("cat") == "cpu_op" and e["name"] == "vllm::moe_forward")
    inside = sorted((e for e in capture if e.get("cat") == "cpu_op" and e["tid"] == moe["tid"]
                     and moe["ts"] <= e["ts"] <= moe["ts"] + moe["dur"]), key=lambda e: e["ts"])
    top_k = int(next(e for e in inside if e["name"] == "TopK")["args"]["Concrete Inputs"][1])
    tokens, width = moe["args"]["Input Dims"][0]
    w1, w2 = [e["args"]["Input Dims"][0] for e in inside if e["name"] == "aten::view"
              and e["args"]["Input type"][0] == "unsigned char"]
    inner = w2[1] * width // w1[1]
    op = next(o for o in eff["top_ops"] if o["name"] == "vllm::moe_forward")
    assert op["flops"] == op["count"] * (2 * tokens * top_k * width * w1[2] + 2 * tokens * top_k * inner * width)
    step = next(e["name"] for e in _raw(VLLM[0]) if e.get("cat") == "user_annotation" and e["name"].startswith("execute_"))
    numbers = [int(x) for x in __import__("re").findall(r"\d+", step)]
    c_sq, c_sk, c_sqsq, c_sqsk, g_sq, _g_sk, g_sqsq, g_sqsk = numbers[2:6] + numbers[7:11]
    attention = next(o for o in eff["top_ops"] if o["name"] == "vllm::unified_attention_with_output")
    _, heads, d_qk = attention["input_dims"][0]
    d_v = attention["input_dims"][2][2]
    pairs = c_sqsk - c_sqsq / 2 + c_sq / 2 + g_sqsk - g_sqsq / 2 + g_sq / 2
    assert attention["flops"] == pytest.approx(attention["count"] * 2 * heads * (d_qk + d_v) * pairs, rel=1e-12)
    assert c_sk > c_sq  # a chunk after cached tokens: the step is chunked prefill + decode


def test_real_sglang_decode_attention_is_measured():
    eff, shares = _shares(SGLANG)
    assert shares["gemm"] >= 80 and shares["attention"] >= 80
    op = next(o for o in eff["top_ops"] if o["name"].startswith("sglang_profiler::attention_paged_attention_ragged"))
    _, heads, d = op["input_dims"][2]
    # execute_32_context_0(...)_generation_32(sq32sk32785...): 32 decode tokens over 32,785 tokens of context
    assert op["flops"] == op["count"] * 2 * heads * (d + d) * 32785
    assert op["bound"] == "memory" and eff["device"]["achievable_tflops"]["bf16"] == 708


def test_fused_experts_with_weights_as_arguments():
    # vLLM's fused_experts: hidden[6, 32], w1[4, 2*16, 32] bf16 (gated), w2[4, 32, 16], top-2 routing
    dims = [[6, 32], [4, 32, 32], [4, 32, 16], [6, 2], [6, 2]]
    got = serving_work.work("vllm::outplace_fused_experts", [dims, [BF, BF, BF, "float", "int"], [""] * 5], None)
    routed = 12
    assert got.flops == 2 * routed * 32 * 32 + 2 * routed * 16 * 32 and got.dtype == "bf16"
    weights = (4 * 32 * 32 + 4 * 32 * 16) * 2  # 12 routed tokens over 4 experts: all touched
    assert got.weight_bytes == weights and got.bytes == 6 * 32 * 2 * 2 + 2 * routed * 16 * 2 + weights
    fp8 = serving_work.work("vllm::inplace_fused_experts",
                            [dims, [BF, "c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "int"], [""] * 5], None)
    assert fp8.dtype == "fp8" and fp8.weight_bytes == weights / 2
    one_token = serving_work.work("vllm::outplace_fused_experts",
                                  [[[1, 32], [4, 32, 32], [4, 32, 16], [1, 2], [1, 2]], [BF, BF, BF, "float", "int"], [""] * 5],
                                  None)
    assert one_token.weight_bytes == weights * 2 / 4  # one token, two experts of four
    assert serving_work.work("vllm::outplace_fused_experts", [[[6, 32], [4, 32, 32], [4, 16, 16], [6, 2]],
                                                              [BF, BF, BF, "float"], [""] * 4], None) is None


def test_quantized_gemms_count_the_dense_work_and_the_packed_bytes():
    fp8 = "c10::Float8_e4m3fn"
    # cutlass_scaled_mm(out[8, 64] bf16, a[8, 128] fp8, b[128, 64] fp8, a_scales[8, 1], b_scales[1, 64])
    got = serving_work.work("_C::cutlass_scaled_mm", [[[8, 64], [8, 128], [128, 64], [8, 1], [1, 64], []],
                                                      [BF, fp8, fp8, "float", "float", ""], [""] * 6], None)
    assert (got.flops, got.dtype, got.weight_bytes) == (2 * 8 * 64 * 128, "fp8", 128 * 64)
    assert got.bytes == 8 * 128 + 128 * 64 + 8 * 64 * 2 + (8 + 64) * 4
    # gptq_marlin_gemm(a[4, 256] fp16, b_q_weight[16, 1024] int32 (4-bit), b_scales[2, 512] fp16, ..., 4, 512, 256)
    half = "c10::Half"
    dims = [[4, 256], [16, 1024], [2, 512], [], [], [64], [], [], [], [], []]
    types = [half, "int", half, "", "", "int", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"]
    concrete = ["", "", "", "", "", "", "4", "4", "512", "256", "True"]
    got = serving_work.work("_C::gptq_marlin_gemm", [dims, types, concrete], None)
    packed = 16 * 1024 * 4 + 2 * 512 * 2  # 4-bit weights in int32, fp16 group scales
    assert (got.flops, got.dtype, got.weight_bytes) == (2 * 4 * 512 * 256, "fp16", packed)
    assert got.bytes == 4 * 256 * 2 + packed + 4 * 512 * 2
    assert serving_work.work("_C::gptq_marlin_gemm", [dims, types, [""] * 11], None) is None  # sizes not recorded
