"""compare --across-devices: the same program on two GPUs, each op class and top op held against its
own device's peaks (issue 34, item 4).

Generated: a Kineto trace pair built here, one on an H100 and one on an MI300X, with the same ops
(samples/gen_efficiency.py's shapes, whose FLOPs and bytes it computes from the shapes) and kernel
times chosen per device: the GEMM at 70% of the H100's BF16 peak and 35% of the MI300X's (slower
than the peaks predict), the elementwise op at 80% of each one's bandwidth (as predicted), decode
attention at 40% vs 70% (faster). The expected ratios are computed here from those times and the
datasheet peaks written below, not by the code under test. Real: the TraceLens Qwen1.5-0.5B traces
on an H100 and an MI300X (../shared/samples/real/kineto/SOURCES.md)."""

from __future__ import annotations

import gzip
import json
import sys

import pytest
from conftest import ROOT, compare_contract, real, run_cli
from test_view_parity import missing_fields

from tracetriage.analyzers.compare import compare
from tracetriage.analyzers.compare_devices import BAND, THRESHOLDS
from tracetriage.reports.compare import render_compare
from tracetriage.reports.compare_view import compare_view

sys.path.insert(0, str(ROOT / "samples"))
import gen_efficiency  # noqa: E402

SCHEMA = json.loads((ROOT / "reports" / "compare.schema.json").read_text())
US = 1_000
# datasheet dense peaks (H100 SXM: NVIDIA H100 datasheet, sparse halved; MI300X: AMD data sheet)
DEVICES = {
    "h100": {"name": "NVIDIA H100 80GB HBM3", "memory": 85_017_755_648, "sms": 132, "major": 9, "bf16": 989.4,
             "bandwidth": 3350.0, "gemm_kernel": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"},
    "mi300x": {"name": "AMD Instinct MI300X", "memory": 205_822_885_888, "sms": 304, "major": 9, "bf16": 1307.4,
               "bandwidth": 5300.0, "gemm_kernel": "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN_1LDSB0"},
}
# share of each device's roofline bound its kernels reach, per class
SPEEDS = {"h100": {"gemm": 0.70, "memory_bound": 0.80, "attention": 0.40},
          "mi300x": {"gemm": 0.35, "memory_bound": 0.80, "attention": 0.70}}
JITTER = (-0.02, -0.01, 0.0, 0.01, 0.02)  # per-call spread of a kernel's time: mean exactly its base
STEPS = 10


def step_ops():
    return [gen_efficiency.gemm(4096, 4096, 4096), gen_efficiency.silu_mul(4096, 11008),
            gen_efficiency.decode_attention(8, 32, 8, 2048, 128)] * 2


def roofline_ns(op, device: dict) -> float:
    return max(op.flops / (device["bf16"] * 1e3), op.nbytes / device["bandwidth"])


def base_ns(op, key: str) -> int:
    return round(roofline_ns(op, DEVICES[key]) / SPEEDS[key][op.klass])


def build(key: str, path, steps: bool = True, ops=None) -> None:
    """A Kineto trace of STEPS steps of ``ops`` on device ``key``, each kernel at its chosen speed."""
    device = DEVICES[key]
    pid, tid = 4242, 4242
    events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}}]
    gpu_t, ext, call = 1_000_000_000_000, 1000, 0
    bounds = []
    for _step in range(STEPS):
        start = gpu_t
        for op in ops or step_ops():
            ext += 1
            duration = round(base_ns(op, key) * (1 + JITTER[call % len(JITTER)]))
            call += 1
            kernel = device["gemm_kernel"] if op.klass == "gemm" else op.kernel
            host = gpu_t - 8 * US
            events += [
                {"ph": "X", "cat": "cpu_op", "name": op.name, "pid": pid, "tid": tid, "ts": host / 1e3, "dur": 5.0,
                 "args": {"External id": ext, "Input Dims": op.dims, "Input type": op.types,
                          "Concrete Inputs": op.concrete, "Input Strides": [[] for _ in op.dims]}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                 "ts": (host + US) / 1e3, "dur": 3.0, "args": {"External id": ext, "correlation": ext}},
                {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": gpu_t / 1e3, "dur": duration / 1e3,
                 "args": {"External id": ext, "device": 0, "stream": 7, "correlation": ext}}]
            gpu_t += duration + 2 * US
        bounds.append((start, gpu_t))
    if steps:
        for index, (start, end) in enumerate(bounds):
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{index}", "pid": pid, "tid": tid,
                           "ts": (start - 9 * US) / 1e3, "dur": (end - start) / 1e3, "args": {"External id": 10 + index}})
    doc = {"schemaVersion": 1, "record_shapes": 1, "traceEvents": events, "displayTimeUnit": "ms",
           "deviceProperties": [{"id": 0, "name": device["name"], "totalGlobalMem": device["memory"],
                                 "computeMajor": device["major"], "computeMinor": 0, "numSms": device["sms"]}]}
    with gzip.open(path, "wt") as handle:
        json.dump(doc, handle)


def expected(op_class: str) -> dict:
    """The ratios of one class from the generated times and the datasheet peaks alone."""
    ops = [op for op in step_ops() if op.klass == op_class]
    time = {key: sum(base_ns(op, key) for op in ops) for key in DEVICES}
    roofline = {key: sum(roofline_ns(op, DEVICES[key]) for op in ops) for key in DEVICES}
    ratio = time["mi300x"] / time["h100"]
    predicted = roofline["mi300x"] / roofline["h100"]
    return {"ratio": ratio, "predicted": predicted, "normalised": ratio / predicted,
            "pct": {key: 100.0 * roofline[key] / time[key] for key in DEVICES}}


def across_json(before, after, *extra, code=0):
    return compare_contract(before, after, "--no-cache", *extra, codes=(code,))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("devices")
    paths = {}
    for key in DEVICES:
        paths[key] = out / f"{key}.json.gz"
        build(key, paths[key])
        paths[f"{key}_stepless"] = out / f"{key}_stepless.json.gz"
        build(key, paths[f"{key}_stepless"], steps=False)
    return paths


def _rows(data: dict) -> dict:
    return {row["class"]: row for row in data["across_devices"]["classes"]}


# ---------------------------------------------------------------------------
# Generated pair: known kernel times on two devices


def test_generated_pair_per_step_matches_the_ratios_computed_from_the_times_and_the_peaks(pair):
    data = across_json(pair["h100"], pair["mi300x"], "--across-devices")
    across = data["across_devices"]
    assert data["verdict"] == "across_devices" and across["ok"] and across["unit"] == "step"
    assert (across["before_device"], across["after_device"]) == ("NVIDIA H100 SXM", "AMD Instinct MI300X")
    rows = _rows(data)
    for op_class, verdict in (("gemm", "slower"), ("memory_bound", "as the peaks predict"), ("attention", "faster")):
        truth, row = expected(op_class), rows[op_class]
        assert row["ratio"] == pytest.approx(truth["ratio"], rel=2e-3), op_class
        assert row["predicted_ratio"] == pytest.approx(truth["predicted"], rel=2e-3), op_class
        assert row["normalised_ratio"] == pytest.approx(truth["normalised"], rel=3e-3), op_class
        assert row["before"]["pct_of_peak"] == pytest.approx(truth["pct"]["h100"], rel=3e-3), op_class
        assert row["after"]["pct_of_peak"] == pytest.approx(truth["pct"]["mi300x"], rel=3e-3), op_class
        per_step = {key: sum(base_ns(op, key) for op in step_ops() if op.klass == op_class) / 1e6 for key in DEVICES}
        assert row["before"]["ms_per_unit"] == pytest.approx(per_step["h100"], rel=2e-3)
        assert row["after"]["ms_per_unit"] == pytest.approx(per_step["mi300x"], rel=2e-3)
        low, high = row["normalised_ci95"]
        assert low <= row["normalised_ratio"] <= high
        assert row["verdict"] == verdict, (op_class, row["words"])
    gemm = expected("gemm")
    assert (f"GEMMs {gemm['ratio']:.2f}× slower on AMD Instinct MI300X at {gemm['pct']['mi300x']:.0f}% vs "
            f"{gemm['pct']['h100']:.0f}% of peak: the kernels, not the hardware") in data["summary"]
    assert data["across_devices"]["ops"], "the top ops of the same shapes are matched"


def test_generated_stepless_pair_is_judged_per_call_with_the_noise_of_the_sampled_calls(pair):
    data = across_json(pair["h100_stepless"], pair["mi300x_stepless"], "--across-devices")
    assert data["across_devices"]["unit"] == "call"
    rows = _rows(data)
    for op_class in ("gemm", "memory_bound", "attention"):
        row, truth = rows[op_class], expected(op_class)
        calls = sum(1 for op in step_ops() if op.klass == op_class) * STEPS
        assert row["before"]["calls"] == calls
        assert row["ratio"] == pytest.approx(truth["ratio"], rel=2e-3)
        low, high = row["ci95"]  # the sampled calls spread by +-2%: an interval around the ratio, not a point
        assert low < row["ratio"] < high and high - low < 0.1 * row["ratio"]


def test_top_op_rows_carry_their_class_rows_noise_per_step_and_per_call(pair):
    """Trial: the top-op rows had no interval. Each now has one, drawn as its class row's (per step: the step's
    bootstrap; per call: its class's sampled kernels), so it lies around the op's own ratio."""
    for before, after in (("h100", "mi300x"), ("h100_stepless", "mi300x_stepless")):
        data = across_json(pair[before], pair[after], "--across-devices")
        classes = _rows(data)
        judged = [op for op in data["across_devices"]["ops"] if op["verdict"] != "not judged"]
        assert judged, (before, after)
        for op in judged:
            low, high = op["ci95"]
            assert low < op["ratio"] < high, op["what"]
            spread = classes[op["class"]]["ci95"]  # the same relative spread as the class row's
            assert (high - low) / op["ratio"] == pytest.approx((spread[1] - spread[0]) / classes[op["class"]]["ratio"],
                                                               rel=1e-3)
            assert op["normalised_ci95"][0] <= op["normalised_ratio"] <= op["normalised_ci95"][1]
            assert "noise not measured" not in op["words"]


def test_the_band_is_a_declared_threshold_and_decides_the_verdict():
    from tracetriage.analyzers.compare_devices import verdict_of

    assert BAND == THRESHOLDS["as_predicted_band_pct"][0] / 100 and THRESHOLDS["as_predicted_band_pct"][1]
    assert verdict_of(1.0 + BAND * 1.01, None) == "slower"
    assert verdict_of(1.0 + BAND * 0.99, None) == "as the peaks predict"
    assert verdict_of(1.5, (1.1, 1.9)) == "as the peaks predict"  # the interval reaches into the band
    assert verdict_of(0.5, (0.45, 0.55)) == "faster"


def test_without_the_flag_the_gate_is_inconclusive_and_points_at_it(pair):
    data = across_json(pair["h100"], pair["mi300x"], "--gate", code=9)
    assert data["verdict"] == "inconclusive" and data["across_devices"] is None
    assert "--across-devices" in data["comparable"]["reasons"][0]


def test_the_same_device_is_refused(pair):
    data = across_json(pair["h100"], pair["h100_stepless"], "--across-devices", code=9)
    assert data["verdict"] == "inconclusive" and not data["across_devices"]["ok"]
    assert "the same device" in data["across_devices"]["reasons"][0]


def test_other_work_per_step_is_refused_with_the_reason(pair, tmp_path):
    other = tmp_path / "other.json.gz"  # other shapes: another model, not the same work per step
    build("mi300x", other, ops=[gen_efficiency.gemm(1024, 1024, 1024), gen_efficiency.silu_mul(512, 512),
                                gen_efficiency.decode_attention(2, 8, 8, 256, 64)])
    data = across_json(pair["h100"], other, "--across-devices", code=9)
    across = data["across_devices"]
    assert not across["ok"] and across["reasons"][0].startswith("no common op class with the same work per step")
    assert data["summary"].startswith("inconclusive: no common op class")


def test_another_program_by_its_process_is_refused(pair, tmp_path):
    """Kineto traces name no process; an nsys or rocprof capture does, and a saved analysis keeps it."""
    saved = []
    for key, command in (("h100", "python serve.py --port 8000"), ("mi300x", "python train.py --epochs 3")):
        analysis = json.loads(run_cli("analyze", pair[key], "-f", "json", "--no-cache").stdout)
        for process in analysis["processes"]:
            process["name"] = command
        saved.append(tmp_path / f"{key}.json")
        saved[-1].write_text(json.dumps(analysis))
    data = across_json(*saved, "--across-devices", code=9)
    assert data["across_devices"]["reasons"][0] == "another program: python serve.py before, python train.py after"


def test_a_side_without_shapes_is_refused(pair, tmp_path):
    analysis = json.loads(run_cli("analyze", pair["mi300x"], "-f", "json", "--no-cache").stdout)
    analysis["efficiency"]["classes"] = []
    saved = tmp_path / "no_shapes.json"
    saved.write_text(json.dumps(analysis))
    data = across_json(pair["h100"], saved, "--across-devices", code=9)
    assert data["across_devices"]["reasons"][0].startswith(f"no op class measured on {saved}")


def test_every_format_shows_every_field_of_the_table(pair):
    data = compare(*(json.loads(run_cli("analyze", pair[key], "-f", "json", "--no-cache").stdout)
                     for key in ("h100", "mi300x")), across_devices=True)
    view = compare_view(data).across_devices
    assert view is not None and view.classes
    omitted = {fmt: {} for fmt in ("text", "md", "html")}
    shown = {fmt: {} for fmt in omitted}
    for fmt in omitted:
        output = render_compare(data, fmt)
        assert not missing_fields(view, fmt, output, omitted, shown), fmt
        without = output.replace(view.classes[0].after.peak, "")  # the check can fail: a field dropped is named
        assert "classes.after.peak" in missing_fields(view, fmt, without, omitted, shown), fmt
    data["across_devices"]["ops"][0]["what"] = "<b>aten::mm</b>"  # capture text: escaped, never markup
    assert "&lt;b&gt;aten::mm&lt;/b&gt;" in render_compare(data, "html")


def test_the_library_call_takes_the_flag(pair):
    import tracetriage

    comparison = tracetriage.compare(pair["h100"], pair["mi300x"], across_devices=True)
    assert comparison.verdict == "across_devices" and comparison.gate_exit() == 0
    assert tracetriage.compare(pair["h100"], pair["mi300x"]).gate_exit() == 9


def test_the_mcp_tool_passes_the_flag(pair):
    from tracetriage.mcp_work import CompareRequest, work_compare

    contract, summary = work_compare(CompareRequest(str(pair["h100"]), str(pair["mi300x"]), threshold=5.0,
                                                    across_devices=True), {"cache_dir": None})
    assert contract["verdict"] == "across_devices" and summary.startswith("across_devices:")


# ---------------------------------------------------------------------------
# Real: Qwen1.5-0.5B on an H100 and an MI300X (TraceLens)

QWEN = ("tracelens_h100_qwen1.5-0.5b_chat.json.gz", "tracelens_mi300_qwen1.5-0.5b_chat.json.gz")


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    before, after = (real("kineto", name) for name in QWEN)
    out = tmp_path_factory.mktemp("qwen")
    saved = []
    for path, name in ((before, "h100.json"), (after, "mi300x.json")):
        saved.append(out / name)
        assert run_cli("analyze", path, "-f", "json", "-o", saved[-1], "--no-cache").returncode == 0
    return saved


def test_real_qwen_pair_exits_0_with_the_table_in_every_format(qwen, tmp_path):
    data = across_json(*qwen, "--across-devices")
    analyses = [json.loads(path.read_text()) for path in qwen]
    classes = [{row["class"]: row for row in analysis["efficiency"]["classes"]} for analysis in analyses]
    gemm = _rows(data)["gemm"]
    # per call of the same 169 GEMM calls: the time ratio is the ratio of the measured times, and for
    # the same work the normalised ratio is the before % of roofline over the after one
    assert gemm["before"]["calls"] == classes[0]["gemm"]["ops"] == classes[1]["gemm"]["ops"]
    assert gemm["ratio"] == pytest.approx(classes[1]["gemm"]["time_ns"] / classes[0]["gemm"]["time_ns"], rel=1e-3)
    assert gemm["normalised_ratio"] == pytest.approx(
        classes[0]["gemm"]["pct_of_roofline"] / classes[1]["gemm"]["pct_of_roofline"], rel=2e-3)
    assert gemm["verdict"] == ("slower" if gemm["normalised_ci95"][0] > 1 + BAND else "as the peaks predict")
    assert "the kernels, not the hardware" in gemm["words"] or gemm["verdict"] != "slower"
    for fmt, marker in (("text", "across devices, "), ("md", "## Across devices"), ("html", "<h2>Across devices")):
        output = tmp_path / f"out.{fmt}"
        proc = run_cli("compare", *qwen, "--across-devices", "-f", fmt, "-o", output)
        assert proc.returncode == 0, proc.stderr
        assert marker in output.read_text(encoding="utf-8") and gemm["words"].split(":")[0] in output.read_text(
            encoding="utf-8").replace("&#215;", "×")
