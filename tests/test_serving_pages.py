"""A serving page read as a serving engineer reads it: one quantity, one value, named with its source.

- Little's law: the capacity is the highest completion rate measured, and is called the capacity only
  where a run saturated the server (else "at least"); it is printed with the at_capacity finding's own
  rounding; a closed-loop run's bound C / W is printed beside its measured completion rate.
- Every serving chart's title says what it draws (the points' source, the lines drawn).
- The waiting queue, wherever it was measured, is on every page (text, md, html, json), whichever finding
  fires: healthy no longer fires on a trace without a measured efficiency, and the queue it carried stays.

Truth comes from the generator's truth files (samples/truth), from the bundles' raw files read here with
json / a regular expression, and from the real serving captures read the same way; never from the code
under test."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from conftest import BUNDLES, TRUTH, real, run_cli

from tracetriage import analyze, open_case
from tracetriage.reports import render
from tracetriage.reports.charts import serving_load, tpot_vs_batch

STATS = re.compile(r"Running: (\d+) reqs, Waiting: (\d+) reqs")
REAL_QUEUE_LOG = "vllm_log_v1_pr21809_stats_queueing.log"


def _truth(name: str) -> dict:
    return json.loads((TRUTH / f"{name}.json").read_text())


def _bench(name: str) -> list[dict]:
    data = json.loads((BUNDLES / name / "bench.json").read_text())
    return data if isinstance(data, list) else [data]


def _pages(analysis) -> dict[str, str]:
    return {fmt: render(analysis, fmt) for fmt in ("text", "md", "html", "json")}


def _analysis(name: str):
    return analyze(open_case([BUNDLES / name]), slo=_truth(name)["slo"])


def test_at_capacity_capacity_is_one_value_named_with_its_run():
    """The capacity the finding gives and the one Little's law gives are one figure, one rounding, and the
    run that saturated the server is named (the generator's truth: 18 req/s arrive at a ~9.6 req/s server)."""
    truth = _truth("serving_at_capacity")["numbers"]
    analysis = _analysis("serving_at_capacity")
    law = analysis.data["serving"]["littles_law"]
    assert abs(law["capacity_rps"] - truth["capacity_rps"]) < 1e-3 and law["capacity_saturated"] is True
    assert law["arrival_rate_rps"] == truth["arrival_rate_rps"]
    finding = analysis.findings[0]
    shown = f"{truth['capacity_rps']:.1f} req/s"
    capacity_text = next(e["text"] for e in finding["evidence"] if e["name"] == "capacity_rps")
    text = render(analysis, "text")
    line = next(row for row in text.splitlines() if row.lstrip().startswith("Little's law"))
    assert shown in capacity_text and f"capacity {shown}" in line and "saturated the server" in line
    assert f"{truth['capacity_rps']:.3f}" not in text  # the stored 3 decimals never printed beside the rounded one
    assert f"{truth['arrival_rate_rps']:g} req/s run" in line


@pytest.mark.parametrize("name", ["serving_healthy", "serving_prefill_stall", "serving_proxy_buffering"])
def test_a_server_that_kept_up_has_a_capacity_lower_bound_not_a_load_share(name):
    """The engine's stats lines show no request waiting in any sample: no run saturated the server, so the
    highest completion rate is a lower bound of its capacity, never 'arrivals at 102% of capacity'."""
    waiting = [int(m[2]) for m in STATS.finditer((BUNDLES / name / "vllm.log").read_text())]
    assert waiting and not any(waiting)
    analysis = _analysis(name)
    law = analysis.data["serving"]["littles_law"]
    assert law["capacity_saturated"] is False
    best = max(record["request_throughput"] for record in _bench(name))
    assert abs(law["capacity_rps"] - best) < 1e-3
    for fmt, page in _pages(analysis).items():
        if fmt == "json":
            continue
        assert f"capacity at least {best:.1f} req/s" in page, fmt
        assert "of capacity" not in page, fmt


def test_closed_loop_bound_beside_the_measured_rate():
    """A sweep at max concurrency C: Little's bound C / W (W the mean E2E latency of that run, read from the
    bench file) is printed beside the measured completion rate, each with its source."""
    records = _bench("serving_batch_past_knee")
    best = max(records, key=lambda record: record["request_throughput"])
    bound = best["max_concurrency"] / (best["mean_e2el_ms"] / 1000.0)
    law = _analysis("serving_batch_past_knee").data["serving"]["littles_law"]
    assert law["concurrency"] == best["max_concurrency"] and abs(law["concurrency_rps"] - bound) < 1e-2
    text = run_cli("analyze", BUNDLES / "serving_batch_past_knee").stdout
    line = next(row for row in text.splitlines() if row.lstrip().startswith("Little's law"))
    assert f"C / W = {bound:.1f} req/s" in line and f"measured {best['request_throughput']:.1f} req/s" in line
    assert "of capacity" not in line and "capacity at least" in line


def test_real_sweep_run_that_trails_its_arrivals_says_why():
    """Real llm-d L40S sweep: at 30 req/s a 900-prompt run completes 22.1 req/s (its duration holds the drain),
    while the rate-inf run completes 31.2 req/s: both are named, and the first is not called saturation."""
    path = real("serving", "vllm_bench_serving_llmd_l40s_results.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    mine = [row for row in rows if row["deployment"] == "no-features"]
    top = max((row for row in mine if float(row["request_rate"]) != float("inf")), key=lambda row: float(row["request_rate"]))
    inf = next(row for row in mine if float(row["request_rate"]) == float("inf"))
    text = run_cli("analyze", path).stdout
    line = next(row for row in text.splitlines() if row.lstrip().startswith("Little's law"))
    assert f"completed {top['request_throughput']:.1f} req/s in that run" in line
    assert f"capacity {inf['request_throughput']:.1f} req/s" in line and "rate-inf run" in line
    assert "drain" in line


def _svg_text(svg: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", t) for t in re.findall(r"<text[^>]*>.*?</text>", svg, re.S))


def test_tpot_chart_of_a_sweep_is_titled_by_concurrency():
    """The sweep's points are mean TPOT at each max concurrency: the title and the x axis say so."""
    fit = _analysis("serving_batch_past_knee").data["serving"]["tpot_fit"]
    words = _svg_text(tpot_vs_batch(fit, 20.0))
    runs = len({record["max_concurrency"] for record in _bench("serving_batch_past_knee")})
    assert f"Mean TPOT at each max concurrency ({runs} benchmark runs)" in words
    assert "max concurrency (requests in flight)" in words and "running batch" not in words
    assert "budget 20 ms" in words


def test_tpot_chart_of_engine_counters_shows_the_measured_tpot_beside_it():
    """A fit of the engine's counters (~7 ms) beside a benchmark TPOT of ~38 ms: the chart draws both and its
    title names both, so the model is never shown alone against what users saw."""
    analysis = _analysis("serving_prefill_stall")
    fit = analysis.data["serving"]["tpot_fit"]
    mean_tpot = _bench("serving_prefill_stall")[0]["mean_tpot_ms"]
    words = _svg_text(tpot_vs_batch(fit, None, mean_tpot))
    assert "TPOT from the engine's counters" in words and "running batch" in words
    assert f"benchmark's mean TPOT ({mean_tpot:.1f} ms)" in words
    html = render(analysis, "html")
    assert f"benchmark&#39;s mean TPOT ({mean_tpot:.1f} ms)" in html or f"benchmark's mean TPOT ({mean_tpot:.1f} ms)" in html


def test_load_chart_title_names_what_it_draws_and_no_unreported_queue():
    """Stats lines without a queue figure: no 'waiting' line (it would read as an empty queue), and the
    title says what is drawn rather than what it would mean."""
    points = [{"t": float(i), "running": 4 + i, "waiting": None, "kv_usage_pct": None} for i in range(5)]
    words = _svg_text(serving_load(points))
    assert "Running requests over time, from 5 engine stats lines" in words
    assert "waiting" not in words.lower() and "capacity" not in words
    both = [{"t": float(i), "running": 4, "waiting": i, "kv_usage_pct": 50.0} for i in range(5)]
    words = _svg_text(serving_load(both))
    assert "Running and waiting requests over time, KV cache usage" in words and "drains" not in words


def _queue_truth(path) -> tuple[list[int], int]:
    waiting = [int(m[2]) for m in STATS.finditer(path.read_text())]
    return waiting, f"{100 * sum(1 for w in waiting if w) / len(waiting):.1f}%"


@pytest.mark.parametrize("trace_bundle", ["healthy", "eager_decode"])
def test_queue_is_on_every_page_whichever_finding_fires(tmp_path, trace_bundle):
    """A GPU trace with the real vLLM log of a queue that drains (6 -> 0 over 6 stats lines): healthy does not
    fire on the healthy bundle (its graph replays hide the kernels: no measured efficiency) and launch_bound
    fires on eager_decode; either way the queue, its first and last sample and its trend are on every page."""
    log = real("serving", REAL_QUEUE_LOG)
    waiting, share = _queue_truth(log)
    case = tmp_path / trace_bundle
    shutil.copytree(BUNDLES / trace_bundle, case)
    shutil.copyfile(log, case / "vllm.log")
    analysis = analyze(open_case([case]))
    trend = "drains" if waiting[-1] < waiting[0] else "grows" if waiting[-1] > waiting[0] else "holds level"
    expected = f"first sample {waiting[0]}, last {waiting[-1]}: the queue {trend}"
    assert expected in analysis.data["serving"]["queue"]
    for fmt, page in _pages(analysis).items():
        assert expected in page, fmt
        assert f"max {max(waiting)} requests" in page and f"non-empty in {share} of" in page, fmt


def test_a_finding_less_trace_verdict_names_the_queue(tmp_path):
    """The healthy bundle plus a queue log: 'No problem found in what was measured' says what the engine's
    queue showed (the healthy finding's evidence carried it before healthy needed a measured efficiency)."""
    log = real("serving", REAL_QUEUE_LOG)
    waiting, share = _queue_truth(log)
    case = tmp_path / "healthy"
    shutil.copytree(BUNDLES / "healthy", case)
    shutil.copyfile(log, case / "vllm.log")
    analysis = analyze(open_case([case]))
    assert not analysis.findings and analysis.headline.startswith("No problem found in what was measured")
    assert f"serving: queue non-empty in {share} of {len(waiting)} stats samples" in analysis.headline
    assert f"{waiting[0]} to {waiting[-1]}" in analysis.headline


@pytest.mark.parametrize("name", ["vllm_metrics_v0_qwenvl_excerpt.prom", "vllm_metrics_v1_early_qwen25coder_excerpt.prom"])
def test_real_scrape_without_stats_lines_gives_the_queue_gauge(name):
    """A /metrics scrape alone: its waiting gauge is the queue at that moment (read with a regex here)."""
    path = real("serving", name)
    gauges = [float(m[1]) for m in re.finditer(r"^vllm:num_requests_waiting\{[^}]*\} ([\d.e+-]+)$", path.read_text(), re.M)]
    if not gauges:
        pytest.skip("the scrape has no vllm:num_requests_waiting gauge")
    queue = analyze(open_case([path])).data["serving"]["queue"]
    total = sum(gauges)
    assert ("no request waiting at the /metrics scrape" in queue) if total == 0 else (f"{total:,.0f} requests" in queue)


def _healthy_mechanism(path) -> str:
    analysis = analyze(open_case([path]))
    found = next(f for f in analysis.findings if f["id"] == "healthy")
    return found["mechanism"]


def test_healthy_serving_says_only_what_its_artifacts_measured(tmp_path):
    """The healthy serving mechanism said "The queue drains, the batch and KV cache have headroom" whatever was
    given: with a benchmark alone (no stats lines) the queue and the KV cache were never measured. With the
    stats lines, it states their counts, taken here from the log's own lines."""
    bundle = BUNDLES / "serving_healthy"
    shutil.copy(bundle / "bench.json", tmp_path / "bench.json")
    alone = _healthy_mechanism(tmp_path)
    assert "were not measured" in alone and "queue drains" not in alone and "headroom" not in alone
    lines = re.findall(r"Running: \d+ reqs, Waiting: (\d+) reqs, GPU KV cache usage: ([\d.]+)%",
                       (bundle / "vllm.log").read_text())
    waited = sum(int(waiting) > 0 for waiting, _ in lines)
    kv_max = max(float(kv) for _, kv in lines)
    full = _healthy_mechanism(bundle)
    count = f"{len(lines)} stats samples"
    assert (f"no request was waiting in any of {count}" if not waited else "non-empty in ") in full.lower()
    assert count in full and f"at most {kv_max:.1f}% used" in full and "not held to one" in full
