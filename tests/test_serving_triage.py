"""Serving-level triage: generated serving bundles (log + scrape + benchmark result), the real
serving samples, and bad serving input. Expected findings and numbers come from each bundle's
samples/truth/<bundle>.json, written by samples/serving_scenarios.py from what it generated."""

import json
import math
import shutil

import pytest
from conftest import BUNDLES, REAL, TRUTH, run_cli

from tracetriage import analyze, open_case
from tracetriage.analyzers import catalog
from tracetriage.case import detect
from tracetriage.parsers import serving

SERVING = sorted(p.stem for p in TRUTH.glob("*.json") if (BUNDLES / p.stem).is_dir() and "expect" in json.loads(p.read_text()))


def truth(name):
    return json.loads((TRUTH / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def results():
    return {n: analyze(open_case([BUNDLES / n]), slo=truth(n)["slo"]) for n in SERVING}


def ev(finding, name):
    return next(e for e in finding["evidence"] if e["name"] == name)


def test_there_is_a_bundle_per_serving_finding():
    expected = {f for n in SERVING for f in truth(n)["expect"]}
    assert expected >= {"at_capacity", "batch_past_knee", "prefill_stall", "memory_pressure", "prefix_cache_miss",
                        "proxy_buffering", "over_replicated", "admission_blocked", "healthy"}


@pytest.mark.parametrize("name", SERVING)
def test_bundle_fires_its_finding_and_only_it(name, results):
    a = results[name]
    assert [f["id"] for f in a.findings] == truth(name)["expect"], a.headline
    assert a.data["devices"] == []


@pytest.mark.parametrize("name", SERVING)
def test_symptom_puts_the_finding_first(name, results):
    fid = truth(name)["expect"][0]
    axis = catalog.axis_of("healthy_serving" if fid == "healthy" else fid)
    if axis == "all":
        return
    slo = ",".join(f"{k}={v}" for k, v in truth(name)["slo"].items())
    p = run_cli("analyze", BUNDLES / name, "--symptom", axis, "-f", "json", *(["--slo", slo] if slo else []))
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    if fid in truth(name).get("falsified", []):  # ruled out by its own falsifier: listed, never the answer
        assert d["findings"][0]["id"] == fid and d["findings"][0]["falsified"]
        assert d["headline"].startswith(f"{axis}: no finding on this axis")
        return
    assert d["findings"][0]["id"] == fid and d["headline"].startswith(f"{axis}: [{fid}]")


def test_at_capacity_numbers(results):
    t = truth("serving_at_capacity")["numbers"]
    f = results["serving_at_capacity"].findings[0]
    assert ev(f, "arrival_rate_rps")["value"] == t["arrival_rate_rps"]
    assert abs(ev(f, "capacity_rps")["value"] - t["capacity_rps"]) < 0.01
    assert abs(ev(f, "queue_share_of_ttft")["value"] - 100 * t["queue_share_of_server_ttft"]) < 0.5
    assert "2 replicas" in f["fix"]
    law = results["serving_at_capacity"].data["serving"]["littles_law"]
    assert law["arrival_rate_rps"] == 18.0 and law["in_system"] > 0


def test_batch_past_knee_reads_the_cap_off_the_fit(results):
    t = truth("serving_batch_past_knee")["numbers"]
    f = results["serving_batch_past_knee"].findings[0]
    fit = ev(f, "tpot_fit")["value"]
    assert abs(fit["a_ms"] - t["a_ms"]) < 0.1 and abs(fit["b_ms_per_seq"] - t["b_ms_per_seq"]) < 0.002
    assert abs(ev(f, "max_num_seqs_for_slo")["value"] - t["max_num_seqs_for_slo"]) <= 2
    assert ev(f, "throughput_given_up_pct")["value"] > 0
    # without a budget: no finding, an abstention asking for one
    a = analyze(open_case([BUNDLES / "serving_batch_past_knee"]))
    assert "batch_past_knee" not in [x["id"] for x in a.findings]
    assert "tpot_budget" in [x["analysis"] for x in a.data["abstentions"]]


def test_prefill_stall_from_itl(results):
    t = truth("serving_prefill_stall")["numbers"]
    f = results["serving_prefill_stall"].findings[0]
    assert f["axis"] == "tail" and f["severity"] == "high"
    assert abs(ev(f, "itl_p99_ms")["value"] - t["itl_p99_ms"]) / t["itl_p99_ms"] < 0.05
    assert abs(ev(f, "itl_p50_ms")["value"] - t["itl_p50_ms"]) / t["itl_p50_ms"] < 0.05
    assert "over" in ev(f, "itl_p99_budget_ms")["text"]


def test_prefill_stall_seen_in_trace_and_itl_is_one_finding(tmp_path):
    b = tmp_path / "both"
    shutil.copytree(BUNDLES / "prefill_stall", b)
    shutil.copyfile(BUNDLES / "serving_prefill_stall" / "bench.json", b / "bench.json")
    shutil.copyfile(BUNDLES / "serving_prefill_stall" / "vllm.log", b / "vllm.log")
    a = analyze(open_case([b]))
    stalls = [f for f in a.findings if f["id"] == "prefill_stall"]
    assert len(stalls) == 1
    names = [e["name"] for e in stalls[0]["evidence"]]
    assert "step_max_over_p50" in names and "itl_p99_ms" in names


def test_memory_pressure_mechanism(results):
    t = truth("serving_memory_pressure")["numbers"]
    f = results["serving_memory_pressure"].findings[0]
    assert ev(f, "mechanism")["value"] == t["variant"]
    assert abs(ev(f, "fragmentation_share")["value"] - t["fragmentation_share_pct"]) < 0.5
    assert "chunked prefill" in f["fix"] and f["axis"] == "oom" and f["severity"] == "high"
    oom = results["serving_memory_pressure"].data["serving"]["memory"]["oom_events"][0]
    assert oom["tried_bytes"] == t["tried_bytes"]


def test_prefix_cache_miss_ratio(results):
    t = truth("serving_prefix_cache_miss")["numbers"]
    f = results["serving_prefix_cache_miss"].findings[0]
    assert abs(ev(f, "prompt_per_output")["value"] - t["prompt_per_output"]) < 0.05


def test_proxy_buffering_client_vs_server(results):
    t = truth("serving_proxy_buffering")["numbers"]
    f = results["serving_proxy_buffering"].findings[0]
    assert abs(ev(f, "client_ttft_ms")["value"] - t["client_ttft_mean_ms"]) < 1.0
    assert abs(ev(f, "server_ttft_ms")["value"] - t["server_ttft_mean_ms"]) < 1.0  # histogram sum / count


def test_over_replicated_and_admission_blocked(results):
    t = truth("serving_over_replicated")["numbers"]
    f = results["serving_over_replicated"].findings[0]
    assert ev(f, "replicas")["value"] == t["replicas"]
    assert abs(ev(f, "running_per_replica")["value"] - t["running_per_replica"]) < 0.01
    t = truth("serving_admission_blocked")["numbers"]
    f = results["serving_admission_blocked"].findings[0]
    assert (abs(ev(f, "running_mean")["value"] - t["running_mean"]) < 0.01
            and f"of a cap of {t['cap']}" in ev(f, "running_mean")["text"])


def test_healthy_says_which_budgets(results):
    a = results["serving_healthy"]
    assert a.headline.startswith("Healthy: Serving looks healthy") and "ttft_p95_ms=800" in a.headline
    strict = analyze(open_case([BUNDLES / "serving_healthy"]), slo={"ttft_p95_ms": 50})
    assert "healthy" not in [f["id"] for f in strict.findings]


def test_html_has_the_serving_section(results, tmp_path):
    from tracetriage.reports import render

    html = render(results["serving_batch_past_knee"], "html")
    assert 'id="chart-tpot_fit"' in html and 'id="chart-serving_load"' in html and "Little" in html
    html = render(results["serving_at_capacity"], "html")
    assert "server (/metrics histogram)" in html and "bucket resolution" in html


REAL_SERVING = sorted(p.name for p in (REAL / "serving").glob("*") if p.suffix != ".md") if (REAL / "serving").exists() else []


@pytest.mark.parametrize("name", REAL_SERVING)
def test_every_real_serving_sample_is_detected_and_analyzed(name):
    path = REAL / "serving" / name
    assert detect(path) == "serving", name  # SGLang logs start with "[": not JSON
    a = analyze(open_case([path]))
    assert a.headline and a.data["serving"]["captures"][0]["kind"] != "unknown"
    cap = serving.parse(str(path))
    assert cap.kind in ("vllm_log", "sglang_log", "vllm_metrics", "sglang_metrics", "bench_result", "oom_report")


def test_real_sglang_logs_parse():
    from conftest import real

    for name in ("sglang_log_decode_queue_issue938_excerpt.log", "sglang_log_prefill_decode_issue1612_excerpt.log",
                 "sglang_log_decode_prefill_access_pr22166_excerpt.log"):
        real("serving", name)  # skips, saying so, where only the repository's licensed samples are
    q = serving.parse(str(REAL / "serving" / "sglang_log_decode_queue_issue938_excerpt.log"))
    assert q.kind == "sglang_log" and q.stats[0]["running"] == 1010 and q.stats[0]["waiting"] == 12279
    assert abs(q.stats[0]["kv_usage_pct"] - 93.0) < 1e-9
    p = serving.parse(str(REAL / "serving" / "sglang_log_prefill_decode_issue1612_excerpt.log"))
    assert len(p.prefills) == 7 and p.prefills[1]["cached_token"] == 291 and p.prefills[1]["cache_hit_pct"] == 2.76
    n = serving.parse(str(REAL / "serving" / "sglang_log_decode_prefill_access_pr22166_excerpt.log"))
    assert n.config.get("cuda_graph") is True and len(n.prefills) == 3
    # one Decode batch line: a queue of 12,279 at that moment, no trend (tests/test_serving_queue.py)
    a = analyze(open_case([REAL / "serving" / "sglang_log_decode_queue_issue938_excerpt.log"]))
    assert not a.findings and [x["analysis"] for x in a.data["abstentions"]] == ["queue_trend"]


def test_histogram_percentile_from_real_scrape():
    if not REAL_SERVING:
        pytest.skip("../shared/samples/real/serving is absent")
    a = analyze(open_case([REAL / "serving" / "vllm_metrics_docs_example_llama31_8b_excerpt.prom"]))
    ttft = a.data["serving"]["latency"]["server"]["ttft"]
    # 140 requests: 13 <= 20 ms, 97 <= 40 ms: the median (70th) lies in (20, 40] ms: 20 + (70 - 13) / (97 - 13) * 20
    assert abs(ttft["p50"]["value_ms"] - (20 + (70 - 13) / (97 - 13) * 20)) < 0.01 and ttft["p50"]["resolution_ms"] == 20.0
    assert any("+Inf" in w for i in a.data["inputs"] for w in i["warnings"])


@pytest.mark.parametrize("content,warning", [
    ("vllm:num_requests_running{model_name=\"m\"} 3.0\nvllm:num_requests_waiting{model_name=\"m\"} ", "metric samples"),
    ("INFO 07-28 09:05:55 [loggers.py:118] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
     "2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%\n\x00\x01\x02\xff\xfe garbage\n", "binary noise"),
    ('[{"request_throughput": 3.0, "mean_ttft_ms": 40}, {"foo": 1}]', "without throughput or latency"),
    ('vllm:e2e_request_latency_seconds_bucket{le="1.0"} 3\nvllm:e2e_request_latency_seconds_count 3\n', "+Inf"),
])
def test_bad_serving_input_reads_what_it_can_with_a_warning(tmp_path, content, warning):
    f = tmp_path / "artifact.txt"
    f.write_bytes(content.encode("utf-8", errors="surrogateescape") if isinstance(content, str) else content)
    p = run_cli("analyze", f, "-f", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    row = next(i for i in d["inputs"] if i["path"].endswith("artifact.txt"))
    assert any(warning in w for w in row["warnings"]), row
    assert "Traceback" not in p.stderr


TABLE = """Namespace(backend='vllm', request_rate=12.0, max_concurrency=None)
============ Serving Benchmark Result ============
Successful requests:                     1000
Benchmark duration (s):                  43.21
Total input tokens:                      215196
Total generated tokens:                  185671
Request throughput (req/s):              23.14
Output token throughput (tok/s):         4296.85
Total Token throughput (tok/s):          9277.06
---------------Time to First Token----------------
Mean TTFT (ms):                          3021.55
Median TTFT (ms):                        2898.38
P99 TTFT (ms):                           6321.54
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          92.40
Median TPOT (ms):                        84.22
P99 TPOT (ms):                           208.74
---------------Inter-token Latency----------------
Mean ITL (ms):                           71.42
Median ITL (ms):                         61.59
P99 ITL (ms):                            282.20
==================================================
"""


def test_printed_benchmark_table(tmp_path):
    f = tmp_path / "bench.txt"
    f.write_text(TABLE)
    assert detect(f) == "serving"
    cap = serving.parse(str(f))
    assert cap.kind == "bench_result" and len(cap.bench) == 1
    b = cap.bench[0]
    assert b["completed"] == 1000 and b["request_throughput"] == 23.14 and b["p99_itl_ms"] == 282.2
    assert b["median_ttft_ms"] == 2898.38 and b["total_output_tokens"] == 185671


def test_sglang_bench_serving_jsonl(tmp_path):
    rec = {"backend": "sglang", "request_rate": float("inf"), "max_concurrency": 64, "duration": 60.1, "completed": 1000,
           "total_input_tokens": 300000, "total_output_tokens": 200000, "request_throughput": 16.6,
           "mean_e2e_latency_ms": 3800.0, "median_e2e_latency_ms": 3600.0, "mean_ttft_ms": 120.0, "median_ttft_ms": 100.0,
           "p99_ttft_ms": 400.0, "mean_tpot_ms": 18.0, "median_itl_ms": 17.0, "p99_itl_ms": 40.0, "concurrency": 57.3}
    f = tmp_path / "sglang_bench.jsonl"
    f.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "max_concurrency": 128}) + "\n")
    cap = serving.parse(str(f))
    assert cap.engine == "sglang" and len(cap.bench) == 2
    assert cap.bench[0]["mean_e2el_ms"] == 3800.0 and cap.bench[1]["max_concurrency"] == 128
    assert math.isinf(cap.bench[0]["request_rate"])


# --- --slo budgets are reported whether or not a finding fires (new-user trial, item 1) -------------

def test_broken_slo_budgets_lead_the_verdict_when_no_finding_fires(tmp_path):
    """serving_healthy measures TTFT p95 240 ms (server histogram) and E2E p50 4,980 ms: budgets of
    100 ms and 1 ms are broken, and with no finding to explain them the headline names them (it said
    only 'No serving finding ... not enough to call it healthy'); every budget is in the JSON, the
    text, the markdown and the HTML with its measured value and status."""
    slo = {"ttft_p95_ms": 100.0, "e2e_p50_ms": 1.0, "itl_p90_ms": 50.0}
    result = analyze(open_case([BUNDLES / "serving_healthy"]), slo=slo)
    data = result.data
    checks = {c["budget"]: c for c in data["serving"]["slo_checks"]}
    assert checks["ttft_p95_ms"]["status"] == "broken" and checks["ttft_p95_ms"]["measured_ms"] > 100
    assert checks["e2e_p50_ms"]["status"] == "broken" and checks["e2e_p50_ms"]["metric"] == "e2el"
    assert math.isclose(checks["e2e_p50_ms"]["measured_ms"], 4980.2, rel_tol=1e-3)
    assert checks["itl_p90_ms"]["status"] == "met"  # the ITL p99 (39.8 ms) bounds the p90
    h = data["headline"]
    assert h.startswith("SLO broken: TTFT p95") and "E2EL p50 4,980.2 ms over the 1 ms budget" in h
    assert "healthy" not in h.lower() and not any(f["id"] == "healthy" for f in data["findings"])
    text = run_cli("analyze", str(BUNDLES / "serving_healthy"), "--slo", "ttft_p95_ms=100,e2e_p50_ms=1").stdout
    assert "SLO TTFT p95" in text and "broken" in text
    for fmt in ("md", "html"):
        out = tmp_path / f"r.{fmt}"
        run_cli("analyze", str(BUNDLES / "serving_healthy"), "--slo", "ttft_p95_ms=100,e2e_p50_ms=1",
                "--format", fmt, "-o", str(out))
        body = out.read_text()
        assert "E2EL p50 4,980.2 ms" in body and "budget 1 ms: broken" in body


def test_a_broken_budget_is_named_when_the_only_finding_is_ruled_out():
    """serving_over_replicated with a TPOT p99 budget of 5 ms (TPOT p99 11 ms): over_replicated is
    ruled out by the broken budget, and the headline names the budget instead of 'No serving finding'."""
    data = analyze(open_case([BUNDLES / "serving_over_replicated"]), slo={"tpot_p99_ms": 5.0}).data
    assert data["headline"].startswith("SLO broken: TPOT p99 11.0 ms over the 5 ms budget")
    assert "No serving finding" not in data["headline"]


def test_budgets_nothing_measured_are_said_to_be_unchecked():
    """A budget on a GPU-only bundle, or on a percentile no artifact measured, is unchecked: said in
    the headline and as an abstention, never silently passed."""
    gpu = analyze(open_case([BUNDLES / "healthy"]), slo={"ttft_p95_ms": 100.0}).data
    assert "--slo not checked: ttft_p95_ms" in gpu["headline"]
    assert any(a["analysis"] == "slo" for a in gpu["abstentions"])
    # E2EL p50 1,652 ms and p99 1,798 ms: a 1,700 ms p90 budget lies between them, neither bound decides
    srv = analyze(open_case([BUNDLES / "serving_over_replicated"]), slo={"e2e_p90_ms": 1700.0}).data
    (check,) = srv["serving"]["slo_checks"]
    assert check["status"] == "not_measured" and check["measured_ms"] is None
    assert "--slo not checked: e2e_p90_ms" in srv["headline"]
