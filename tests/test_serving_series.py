"""A benchmark file holding several deployments' sweeps: Little's law, the client latencies and the token
totals are figures of one server, read from one series (analyzers/serving_series.py), never a rate of
one deployment against another's capacity. The truth is read from the file with json (the real one)
or written by samples/serving_cases.py (the generated one), not by the code under test."""

import json
import math

from conftest import real, run_cli, samples_generate

from tracetriage import analyze, open_case
from tracetriage.analyzers.serving_series import series_names

REAL_SWEEPS = "vllm_bench_serving_llmd_l40s_results.jsonl"


def _rate(record) -> float:
    return math.inf if record["request_rate"] == "inf" else float(record["request_rate"])


def _file_truth(path):
    """Per deployment of the JSONL file: its highest finite rate, that run's figures, its capacity (the
    highest completion rate of its runs, rate inf included) and its token totals."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    truth = {}
    for record in records:
        truth.setdefault(record["deployment"], []).append(record)
    out = {}
    for name, runs in truth.items():
        finite = [run for run in runs if math.isfinite(_rate(run))]
        top = max(finite, key=_rate)
        out[name] = {"rate": _rate(top), "top": top, "capacity": max(run["request_throughput"] for run in runs),
                     "input": sum(run["total_input_tokens"] for run in runs),
                     "output": sum(run["total_output_tokens"] for run in runs)}
    return out, max(record["request_throughput"] for record in records)


def test_real_sweep_reads_one_deployment_for_arrivals_capacity_latency_and_tokens():
    """Auditor's reading: arrival 30 req/s of no-features was set against kvcache's 41.2 req/s rate-inf
    run (73% loaded); no-features' own saturated run completes 31.2 req/s (96%)."""
    path = real("serving", REAL_SWEEPS)
    per, pooled_max = _file_truth(path)
    read = max(per, key=lambda name: (per[name]["rate"], -list(per).index(name)))  # highest rate, first on a tie
    serving = analyze(open_case([path])).data["serving"]
    law, tokens, client = serving["littles_law"], serving["tokens"], serving["latency"]["client"]
    assert law["arrival_rate_rps"] == per[read]["rate"]
    assert abs(law["capacity_rps"] - per[read]["capacity"]) < 1e-3 and abs(law["capacity_rps"] - pooled_max) > 1
    others = [name for name in per if name != read]
    assert f"of series {read} ({len(others)} other series left out: {', '.join(others)})" in law["source"]
    assert client["record"]["request_throughput"] == per[read]["top"]["request_throughput"]
    assert client["ttft"]["mean"] == round(per[read]["top"]["mean_ttft_ms"], 3)
    assert client["itl"]["p99"] == round(per[read]["top"]["p99_itl_ms"], 3)
    assert (tokens["prompt_tokens"], tokens["output_tokens"]) == (per[read]["input"], per[read]["output"])
    assert f"of series {read}" in tokens["source"]
    assert len(serving["bench"]) == sum(1 for _ in path.read_text().splitlines() if _.strip())  # every row still listed
    text = run_cli("analyze", path).stdout
    share = 100.0 * per[read]["rate"] / per[read]["capacity"]
    assert f"arrivals at {share:.1f}% of capacity" in text and f"of series {read}" in text


def test_generated_sweeps_read_the_series_of_the_highest_rate(tmp_path):
    case, truth = samples_generate().generate_serving_case(tmp_path, "deployment_sweeps")
    read = truth["deployments"][truth["read"]]
    analysis = analyze(open_case([case]))
    serving = analysis.data["serving"]
    law, tokens = serving["littles_law"], serving["tokens"]
    assert law["arrival_rate_rps"] == read["highest_finite_rate"]
    assert abs(law["capacity_rps"] - read["capacity_rps"]) < 1e-3
    assert abs(law["capacity_rps"] - truth["pooled_capacity_rps"]) > 1  # not the best deployment's capacity
    assert f"of series {truth['read']} ({len(truth['left_out'])} other series left out: " \
           f"{', '.join(truth['left_out'])})" in law["source"]
    assert (tokens["prompt_tokens"], tokens["output_tokens"]) == (read["input_tokens"], read["output_tokens"])
    # the rule judges the series on its own: its capacity is the series' (its rate-inf run included)
    capacity = next(f for f in analysis.findings if f["id"] == "at_capacity")
    value = next(e for e in capacity["evidence"] if e["name"] == "capacity_rps")["value"]
    assert abs(value - read["capacity_rps"]) < 1e-3
    assert any(e["name"] == "sweep" and e["text"] == f"benchmark series: {truth['read']}" for e in capacity["evidence"])


def test_one_series_is_named_by_nothing(tmp_path):
    case, truth = samples_generate().generate_serving_case(tmp_path, "deployment_sweeps")
    lines = (case / "results.jsonl").read_text().splitlines()
    only = [line for line in lines if json.loads(line)["deployment"] == truth["read"]]
    (case / "results.jsonl").write_text("\n".join(only) + "\n")
    law = analyze(open_case([case])).data["serving"]["littles_law"]
    assert law["source"] == "benchmark: configured request rate vs measured completion rate"


def test_series_names_keep_only_what_differs():
    assert series_names(["v|m|a|gpu", "v|m|b|gpu"]) == {"v|m|a|gpu": "a", "v|m|b|gpu": "b"}
    assert series_names(["v|m|a", "v|m2|b"]) == {"v|m|a": "m/a", "v|m2|b": "m2/b"}
    assert series_names(["v|m", "v|m|x", ""]) == {"v|m": "v|m", "v|m|x": "v|m|x", "": "(no metadata)"}
