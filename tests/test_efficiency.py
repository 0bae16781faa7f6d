"""Busy is not fast (issue 23): work per op from shapes, device peaks, the roofline, the decode floor,
below_roofline against healthy — on hand-checked shapes, generated traces with known speeds, the real
Kineto captures, and TraceLens's perf model run on the same traces."""

import gzip
import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT, real

from tracetriage import analyze, open_case
from tracetriage.analyzers import efficiency, opwork
from tracetriage.model import WORK_OPS

sys.path.insert(0, str(ROOT / "samples"))
import gen_efficiency  # noqa: E402

BF = "c10::BFloat16"


# --- FLOPs and bytes on hand-checked shapes ---------------------------------------------------

def w(name, dims, types, concrete=None):
    got = opwork.work(name, dims, types, concrete)
    assert got is not None, name
    return got


def test_mm_addmm():
    # A[4,6] @ B[6,5] in bf16: 2*4*5*6 FLOPs; (24 + 30 + 20) elements x 2 bytes
    mm = w("aten::mm", [[4, 6], [6, 5]], [BF, BF])
    assert (mm.kind, mm.flops, mm.bytes, mm.weight_bytes, mm.tokens, mm.dtype) == ("gemm", 240, 148, 60, 4, "bf16")
    # addmm adds the bias: +4*5 FLOPs, +5 elements read
    add = w("aten::addmm", [[5], [4, 6], [6, 5], [], []], [BF, BF, BF, "Scalar", "Scalar"])
    assert (add.flops, add.bytes) == (260, 158)


def test_bmm_baddbmm_fp32():
    b = w("aten::bmm", [[3, 4, 6], [3, 6, 5]], ["float", "float"])
    assert (b.flops, b.bytes, b.dtype) == (720, 3 * 74 * 4, "fp32")
    bb = w("aten::baddbmm", [[3, 4, 5], [3, 4, 6], [3, 6, 5], [], []], ["float"] * 3 + ["Scalar"] * 2)
    assert (bb.flops, bb.bytes) == (720 + 60, 3 * 74 * 4 + 60 * 4)


def test_linear_and_matmul_fold_leading_dims():
    # x[2,3,6] @ W[5,6]^T + b[5]: M = 6 rows; 2*6*5*6 + 6*5
    lin = w("aten::linear", [[2, 3, 6], [5, 6], [5]], [BF, BF, BF])
    assert (lin.flops, lin.bytes, lin.weight_bytes, lin.tokens) == (390, (36 + 30 + 30 + 5) * 2, 60, 6)
    assert w("aten::matmul", [[2, 3, 6], [6, 5]], [BF, BF]).flops == 360
    # batched: [2,4,6] @ [2,6,5] = 2 x (2*4*5*6)
    assert w("aten::matmul", [[2, 4, 6], [2, 6, 5]], [BF, BF]).flops == 480


def test_scaled_mm_fp8():
    f = w("aten::_scaled_mm", [[16, 32], [32, 8], [], [], [], [], []],
          ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", "", "", "Scalar"])
    # 2*16*8*32 FLOPs; A 512 B + B 256 B in fp8, C 128 elements written in bf16
    assert (f.flops, f.bytes, f.dtype) == (8192, 512 + 256 + 256, "fp8")


def test_attention():
    q = [2, 4, 8, 16]
    args = ["", "", "", "0.", "False", "False", "0.25"]
    sdpa = w("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], [BF] * 3 + ["Scalar"] * 4, args)
    # 2 * B*H*Nq*Nkv*(d_qk + d_v) = 2*2*4*8*8*32; Q, K, V and O of 2*4*8*16 elements each in bf16
    assert (sdpa.kind, sdpa.flops, sdpa.bytes) == ("attention", 32768, 4 * 1024 * 2)
    causal = w("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], [BF] * 3 + ["Scalar"] * 4,
               ["", "", "", "0.", "True", "False", "0.25"])
    assert causal.flops == 16384
    # the flash kernel's own op: [B, L, H, d], is_causal at argument 8
    flash = w("aten::_flash_attention_forward", [[2, 8, 4, 16]] * 3 + [[]] * 12, [BF] * 3 + [""] * 12,
              ["", "", "", "", "", "8", "8", "0.", "True", "False", "0.25"])
    assert flash.flops == 16384
    # decode with grouped KV heads: q [1,8,1,64], k/v [1,2,100,64]
    gqa = w("aten::scaled_dot_product_attention", [[1, 8, 1, 64], [1, 2, 100, 64], [1, 2, 100, 64], [], [], [], [], []],
            [BF] * 3 + ["", "Scalar", "Scalar", "Scalar", "Scalar"], ["", "", "", "", "0.", "False", "0.125", "True"])
    assert (gqa.flops, gqa.weight_bytes, gqa.bytes) == (2 * 8 * 100 * 128, 2 * 12800 * 2, 1024 + 1024 + 51200)


def test_memory_bound_ops():
    mul = w("aten::mul", [[4, 6], [4, 1]], ["float", "float"])  # broadcast: 24 + 4 read, 24 written
    assert (mul.kind, mul.flops, mul.bytes) == ("memory_bound", 24, (24 + 4 + 24) * 4)
    cp = w("aten::copy_", [[10], [10], []], ["float", BF, "Scalar"])  # bf16 read, fp32 written
    assert cp.bytes == 10 * 2 + 10 * 4
    # a tensor list is recorded without its element type: the bytes are unknown, not guessed
    assert opwork.work("aten::cat", [[[2, 3], [2, 5]], []], ["TensorList", "Scalar"]) is None
    # mean over the last dim: 32 read, 4 written; with no dim given, one element written
    assert w("aten::mean", [[4, 8], [], [], []], ["float", "ScalarList", "Scalar", ""], ["", "[-1]", "True", ""]).bytes == (32 + 4) * 4
    assert w("aten::max", [[32]], ["int"], [""]).bytes == (32 + 1) * 4
    assert w("aten::cumsum", [[32], [], []], ["int", "Scalar", ""]).bytes == 2 * 32 * 4
    assert w("aten::_softmax", [[4, 8], [], []], [BF, "Scalar", "Scalar"]).bytes == 2 * 32 * 2
    ln = w("aten::native_layer_norm", [[2, 4, 8], [], [8], [8], []], [BF, "ScalarList", BF, BF, "Scalar"])
    assert ln.flops == 5 * 64 + 6 * 8  # TraceLens's layer-norm convention


def test_no_formula_or_odd_shapes_give_none():
    assert opwork.work("aten::view", [[4, 6], []], [BF, "ScalarList"]) is None
    assert opwork.work("aten::mm", [[4, 6], [7, 5]], [BF, BF]) is None  # inner dims disagree
    assert opwork.work("aten::mm", "not a list", [BF, BF]) is None
    assert opwork.work("aten::mm", [[4, "x"], [6, 5]], [BF, BF]) is None


def test_parser_keeps_exactly_the_ops_with_a_formula():
    assert WORK_OPS == opwork.KNOWN


# --- device table -----------------------------------------------------------------------------

@pytest.mark.parametrize("name,mem_gib,sms,model", [
    ("NVIDIA H100 80GB HBM3", 79, 132, "NVIDIA H100 SXM"),
    ("NVIDIA H100 PCIe", 80, 114, "NVIDIA H100 PCIe"),
    ("NVIDIA H100 NVL", 94, 132, "NVIDIA H100 NVL"),
    ("NVIDIA H200", 141, 132, "NVIDIA H200 SXM"),
    ("NVIDIA H200 NVL", 141, 132, "NVIDIA H200 NVL"),
    ("NVIDIA A100-SXM4-40GB", 40, 108, "NVIDIA A100 SXM4 40GB"),
    ("NVIDIA A100-SXM4-80GB", 80, 108, "NVIDIA A100 SXM4 80GB"),
    ("A100-PG509-200", 39.4, 108, "NVIDIA A100 SXM4 40GB"),
    ("NVIDIA A100-PCIE-40GB", 40, 108, "NVIDIA A100 PCIe 40GB"),
    ("NVIDIA A100 80GB PCIe", 80, 108, "NVIDIA A100 PCIe 80GB"),
    ("NVIDIA A10G", 23, 80, "NVIDIA A10G"),
    ("NVIDIA A10", 23, 72, "NVIDIA A10"),
    ("NVIDIA L4", 22, 58, "NVIDIA L4"),
    ("NVIDIA L40S", 45, 142, "NVIDIA L40S"),
    ("NVIDIA B200", 180, 148, "NVIDIA B200"),
    ("Tesla V100-SXM2-32GB", 32, 80, "NVIDIA V100 SXM2"),
    ("Tesla V100-PCIE-16GB", 16, 80, "NVIDIA V100 PCIe"),
    ("NVIDIA GeForce RTX 4090", 24, 128, "NVIDIA GeForce RTX 4090"),
    ("NVIDIA GeForce RTX 3090", 24, 82, "NVIDIA GeForce RTX 3090"),
    ("AMD Instinct MI300X VF", 191, 304, "AMD Instinct MI300X"),
    ("AMD Instinct MI325X", 256, 304, "AMD Instinct MI325X"),
    ("AMD Instinct MI250X", 64, 110, "AMD Instinct MI250X (one GCD)"),
    ("", 192, 304, "AMD Instinct MI300X"),  # ROCm leaves the name empty: CUs and memory decide
    ("AMD Radeon Graphics", 64, 110, "AMD Instinct MI250X (one GCD)"),
])
def test_device_names_match(name, mem_gib, sms, model):
    got = efficiency.match_device(name, int(mem_gib * 2**30), sms)
    assert got is not None and got[1]["model"] == model


def test_unknown_device_is_none_and_every_entry_has_a_source():
    assert efficiency.match_device("Some Future GPU", 2**36, 100) is None
    assert efficiency.match_device("", -1, -1) is None
    for key, e in efficiency.DEVICES.items():
        assert e["source"] and e["bandwidth_gbps"] > 0 and e["names"], key
        assert all(v > 0 for v in e["peak_tflops"].values()), key


# --- generated traces with known speeds -------------------------------------------------------

@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("eff")
    runs = {}
    for d in gen_efficiency.write(out):
        truth = json.loads((d / "truth.json").read_text())
        runs[truth["scenario"]] = (analyze(open_case([d / "trace.pt.trace.json.gz"])), truth, d)
    return runs


def _class(a, name):
    return next(c for c in a.data["efficiency"]["classes"] if c["class"] == name)


def test_slow_gemms_on_a_busy_gpu_are_below_roofline_not_healthy(generated):
    a, truth, _ = generated["gemm_slow"]
    ids = [f["id"] for f in a.findings]
    assert truth["busy_pct"] > 96 and "healthy" not in ids and ids[0] == "below_roofline"
    gemm, want = _class(a, "gemm"), truth["classes"]["gemm"]
    assert gemm["achieved_tflops"] == pytest.approx(want["achieved_tflops"], rel=1e-3)
    assert gemm["pct_of_roofline"] == pytest.approx(want["pct_of_roofline"], rel=1e-3)  # 25%
    assert gemm["bound"] == want["bound"] == "compute"
    f = a.findings[0]
    assert f["axis"] == "throughput" and "25% of the BF16 peak" in f["title"]
    # it claims the busy time above the roofline time: GEMM time x (1 - 25%) of the window
    claim = 100 * want["time_ns"] * (1 - want["pct_of_roofline"] / 100) / a.data["devices"][0]["window_ns"]
    assert f["impact_pct"] == pytest.approx(claim, rel=0.02)


def test_fast_gemms_are_healthy_with_the_efficiency_stated(generated):
    a, truth, _ = generated["gemm_fast"]
    ids = [f["id"] for f in a.findings]
    assert ids == ["healthy"]
    assert _class(a, "gemm")["pct_of_roofline"] == pytest.approx(truth["classes"]["gemm"]["pct_of_roofline"], rel=1e-3)
    assert "GEMMs at 75% of the BF16 peak" in a.findings[0]["title"] and a.headline.startswith("Healthy")


def test_slow_decode_is_below_its_bandwidth_floor(generated):
    a, truth, _ = generated["decode_slow"]
    df = a.data["efficiency"]["decode_floor"]
    assert df["bytes_per_step"] == pytest.approx(truth["bytes_per_step"])
    assert df["measured_ns"] == pytest.approx(truth["step_ns"], abs=2)
    assert df["pct_of_floor"] == pytest.approx(truth["pct_of_floor"], rel=1e-3)  # ~29%
    f = a.findings[0]
    assert f["id"] == "below_roofline" and "bandwidth floor" in f["title"] and "healthy" not in [x["id"] for x in a.findings]
    assert _class(a, "gemm")["bound"] == truth["classes"]["gemm"]["bound"] == "memory"
    assert "weights and the KV cache" in f["mechanism"]


def _rewrite(src: Path, dst: Path, change) -> Path:
    doc = json.loads(gzip.open(src / "trace.pt.trace.json.gz", "rt").read())
    change(doc)
    out = dst / "trace.json"
    out.write_text(json.dumps(doc))
    return out


def test_without_shapes_efficiency_is_not_measured_and_said_so(generated, tmp_path):
    def strip(doc):
        for e in doc["traceEvents"]:
            for k in ("Input Dims", "Input type", "Concrete Inputs"):
                e.get("args", {}).pop(k, None)
    a = analyze(open_case([_rewrite(generated["gemm_slow"][2], tmp_path, strip)]))
    eff = a.data["efficiency"]
    assert eff["classes"] == [] and "below_roofline" not in [f["id"] for f in a.findings]
    nm = eff["not_measured"][0]
    assert nm["what"] == "operator shapes" and "record_shapes=True" in nm["capture_hint"]
    ab = next(x for x in a.data["abstentions"] if x["analysis"] == "efficiency")
    assert "record_shapes=True" in ab["capture_hint"]
    healthy = [f for f in a.findings if f["id"] == "healthy"]
    assert not healthy or "efficiency not measured" in healthy[0]["title"]


def test_unknown_device_still_reports_rates(generated, tmp_path):
    def rename(doc):
        doc["deviceProperties"][0]["name"] = "Some Future GPU"
    a = analyze(open_case([_rewrite(generated["gemm_slow"][2], tmp_path, rename)]))
    eff = a.data["efficiency"]
    assert eff["device"] is None and _class(a, "gemm")["achieved_tflops"] > 0 and _class(a, "gemm")["pct_of_roofline"] is None
    assert any("not in the device table" in n["reason"] for n in eff["not_measured"])
    assert "below_roofline" not in [f["id"] for f in a.findings]


# --- the real Kineto captures -----------------------------------------------------------------

@pytest.mark.parametrize("name,model", [
    ("tracelens_h100_qwen1.5-0.5b_chat.json.gz", "NVIDIA H100 SXM"),
    ("tracelens_mi300_qwen1.5-0.5b_chat.json.gz", "AMD Instinct MI300X"),
])
def test_real_qwen_gemm_rates(name, model):
    a = analyze(open_case([real("kineto", name)]))
    eff = a.data["efficiency"]
    assert eff["device"]["model"] == model
    gemm = _class(a, "gemm")
    peak = eff["device"]["peak_tflops"]["bf16"]
    # measured, plausible: above 10% of the bf16 peak (these are 8944-row prefill GEMMs), below the peak
    assert 0.1 * peak < gemm["achieved_tflops"] < peak and gemm["bound"] == "compute"
    assert gemm["flops"] > 0 and gemm["time_ns"] > 0
    assert any(n["what"] == "gemm kernels without shapes" for n in eff["not_measured"])  # kernels with no External id


def test_real_graph_replays_leave_gemm_efficiency_unmeasured():
    a = analyze(open_case([real("kineto", "tracelens_sglang_qwen3-8b_decode.json.gz")]))
    eff = a.data["efficiency"]
    assert eff["device"]["model"] == "AMD Instinct MI300X"
    assert not any(c["class"] == "gemm" for c in eff["classes"])  # replayed from a HIP graph: no shapes
    gemm = next(n for n in eff["not_measured"] if n["what"] == "gemm kernels without shapes")
    assert gemm["share_pct"] == 100.0 and "graph" in gemm["reason"]


def test_real_piecewise_graph_execution_eager_gemm():
    a = analyze(open_case([real("kineto", "tracelens_vllm_prefilldecode_piecewise_graph_execution.json.gz")]))
    eff = a.data["efficiency"]
    assert eff["device"]["model"] == "AMD Instinct MI300X"  # empty name: 304 CUs and 192 GiB decide
    lm_head = next(o for o in eff["top_ops"] if o["name"] == "aten::mm")
    assert lm_head["input_dims"] == [[46, 2880], [2880, 201088]] and lm_head["achieved_tflops"] > 0
    assert lm_head["flops"] == 2 * 46 * 2880 * 201088
    assert "below_roofline" not in [f["id"] for f in a.findings]  # 0.2% of GEMM time measured: not judged


# --- TraceLens's perf model on the same traces --------------------------------------------------

TRACELENS = json.loads((Path(__file__).parent / "data" / "tracelens_perf_model.json").read_text())
# byte conventions that differ from TraceLens's (FLOPs agree): its layer norm also moves mean/var tensors, and
# its reductions write one output element whatever the dims (we write the reduced shape)
NO_BYTES = ("aten::layer_norm", "aten::native_layer_norm", "aten::mean", "aten::max", "aten::sum", "aten::amax")


def _tl_rows():
    return [(trace, row) for trace, rows in TRACELENS["ops"].items() for row in rows]


@pytest.mark.parametrize("trace,row", _tl_rows(), ids=lambda x: x if isinstance(x, str) else x["name"])
def test_flops_agree_with_tracelens(trace, row):
    got = opwork.work(row["name"], row["input_dims"], row["input_type"], row["concrete_inputs"])
    assert got is not None
    assert got.flops == pytest.approx(row["gflops"] * 1e9, rel=1e-9, abs=1e-3)
    if row["data_moved_mib"] is not None and row["name"] not in NO_BYTES:
        assert got.bytes / 2**20 == pytest.approx(row["data_moved_mib"], rel=1e-6)


@pytest.mark.parametrize("name", ["tracelens_h100_qwen1.5-0.5b_chat.json.gz", "tracelens_mi300_qwen1.5-0.5b_chat.json.gz"])
def test_linked_ops_carry_tracelens_flops(name):
    """Each op the parser kept and linked to its kernels, found by External id among TraceLens's rows,
    gets TraceLens's FLOP count."""
    from tracetriage.parsers import kineto

    trace = kineto.parse(str(real("kineto", name)))
    by_ext = {x: r for r in TRACELENS["ops"][name] for x in r["external_ids"]}
    checked = 0
    for op in trace.ops.itertuples():
        r = by_ext.get(op.ext_id)
        if r is None or r["name"] != op.name:
            continue
        dims, types, concrete = json.loads(op.shape)
        assert opwork.work(op.name, dims, types, concrete).flops == pytest.approx(r["gflops"] * 1e9, rel=1e-9, abs=1e-3)
        checked += 1
    gemms = sum(1 for op in trace.ops.itertuples() if op.name in ("aten::mm", "aten::addmm"))
    assert gemms and checked >= gemms  # every linked GEMM call, and the elementwise ops besides


# --- the HTML report ----------------------------------------------------------------------------

def test_html_has_the_roofline_chart_and_escapes_the_device_name(generated, tmp_path):
    from tracetriage.reports.html import render_html

    page = render_html(generated["decode_slow"][0])
    assert '<figure class="chart" id="chart-roofline"><svg' in page and "Efficiency against the roofline" in page
    assert "Decode bandwidth floor" in page and "<script" not in page

    def rename(doc):
        doc["deviceProperties"][0]["name"] = "<b>evil</b> GPU"
    page = render_html(analyze(open_case([_rewrite(generated["gemm_slow"][2], tmp_path, rename)])))
    assert "&lt;b&gt;evil&lt;/b&gt; GPU" in page and "<b>evil</b>" not in page
    assert 'id="chart-roofline"' in page  # rates without a roof are still drawn


def test_serving_log_weights_give_a_decode_floor_without_shapes(generated, tmp_path):
    """No shapes in the trace: the weights come from vLLM's model-loading line (the rank's shard) and the
    step from the benchmark's median TPOT; the device from the trace."""
    def strip(doc):
        for e in doc["traceEvents"]:
            e.get("args", {}).pop("Input Dims", None)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    _rewrite(generated["decode_slow"][2], bundle, strip)
    (bundle / "vllm.log").write_text(
        "INFO 05-04 01:05:40 [__init__.py:244] Automatically detected platform cuda.\n"
        "(VllmWorker rank=0 pid=118) INFO 05-04 01:05:50 [gpu_model_runner.py:1595] Model loading took 1.8750 GiB "
        "and 2.513 seconds\n"
        "INFO 05-04 01:06:10 [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
        "400.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%\n")
    (bundle / "bench.json").write_text(json.dumps({"backend": "vllm", "completed": 100, "request_throughput": 10.0,
                                                   "median_ttft_ms": 50.0, "median_tpot_ms": 2.0, "mean_tpot_ms": 2.1}))
    a = analyze(open_case([bundle]))
    df = a.data["efficiency"]["decode_floor"]
    assert df["bytes_per_step"] == 1.875 * 2**30
    assert df["floor_ns"] == int(1.875 * 2**30 / 3350)  # H100 SXM: 3,350 GB/s
    assert df["measured_ns"] == 2_000_000 and df["pct_of_floor"] == pytest.approx(100 * 1.875 * 2**30 / 3350 / 2e6, abs=0.01)
    assert "model-loading line" in df["source"] and "median TPOT" in df["source"]


def test_below_roofline_answers_the_utilization_symptom(generated):
    """'The GPU shows 100% utilized' is answered by busy-but-slow, not only 'tokens/s too low'."""
    d = generated["gemm_slow"][2] / "trace.pt.trace.json.gz"
    a = analyze(open_case([d]), symptom="utilization")
    assert a.findings[0]["id"] == "below_roofline" and a.findings[0]["answers"] == ["throughput", "utilization"]
    assert a.headline.startswith("utilization: [below_roofline]")
