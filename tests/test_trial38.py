"""What a new user met (issue 38, ../shared/trials/new-user-73cc2a3.md), the items of sections A-D
and issue 33's item 8: each test names the trial item it answers."""

from __future__ import annotations

import pytest
from conftest import BUNDLES, run_cli

from tracetriage.analyzers.rules.slo import slo_check
from tracetriage.api import analyze
from tracetriage.case import open_case


def _serving(client: dict | None = None, server: dict | None = None) -> dict:
    """A serving summary with one TPOT block: ``client`` quantiles (ms), ``server`` histogram buckets."""
    return {"latency": {"client": {"tpot": client or {}}, "server": {"tpot": server or {}}}}


@pytest.mark.parametrize(("client", "server", "status", "bounded_by"), [
    ({"p50": 27.0, "p99": 27.3}, None, "broken", "p50"),           # a p50 over a p95 budget: broken
    ({"p50": 12.0, "p99": 19.0}, None, "met", "p99"),              # a p99 within it: met
    ({"p50": 12.0, "p99": 27.3}, None, "not_measured", None),      # neither bound decides
    ({"p95": 21.0, "p50": 5.0}, None, "broken", None),             # the percentile itself
    ({}, {"p90": {"value_ms": 25.0, "lower_bound": True}}, "broken", "p90"),  # a histogram lower bound below p95
    ({}, {"p99": {"value_ms": 25.0, "lower_bound": True}}, "not_measured", None),  # above p95: decides nothing
])
def test_an_slo_is_decided_by_either_bound(client, server, status, bounded_by):
    """Items 3 and 28: quantiles are ordered, so a percentile at or below the budget's one measured
    over it shows it broken, and one at or above it measured within shows it met; only when neither
    decides is it unchecked."""
    check = slo_check(_serving(client, server), "tpot_p95_ms", 20.0)
    assert (check["status"], check["bounded_by"]) == (status, bounded_by)
    assert (check["measured_ms"] is None) == (status == "not_measured")


def test_past_knee_sample_breaks_its_own_tpot_budget_in_analyze_and_compare():
    """Item 28: serving_batch_past_knee measures TPOT p50 27.0 ms; its truth's budget tpot_p95_ms=20
    is broken (was 'unchecked: no p95 of TPOT measured'), in the JSON, the text and the headline, and
    compare reads the same check."""
    data = analyze(open_case([BUNDLES / "serving_batch_past_knee"]), slo={"tpot_p95_ms": 20.0}).data
    (check,) = data["serving"]["slo_checks"]
    tpot = data["serving"]["latency"]["client"]["tpot"]
    p50 = tpot.get("p50") or tpot["median"]
    assert p50 > 20 and check["status"] == "broken" and check["bounded_by"] == "p50"
    assert check["measured_ms"] == pytest.approx(p50, abs=1e-3)
    assert "not checked" not in data["headline"]
    assert not any(a["analysis"] == "slo" for a in data["abstentions"])
    text = run_cli("analyze", BUNDLES / "serving_batch_past_knee", "--slo", "tpot_p95_ms=20").stdout
    assert "so the p95 is over it: broken" in text and "unchecked" not in text
    healthy = run_cli("analyze", BUNDLES / "serving_healthy", "--slo", "tpot_p95_ms=50").stdout
    assert "so the p95 is within it: met" in healthy
    from tracetriage.analyzers.compare import slo_breaks

    broken, unmeasured = slo_breaks(_serving({"p50": 12.0, "p99": 19.0}), data["serving"], {"tpot_p95_ms": 20.0})
    assert unmeasured == [] and len(broken) == 1 and broken[0].startswith("tpot_p95_ms=20:")


def test_one_itl_p99_and_one_ratio_in_every_line():
    """Items 5 and 37: serving_prefill_stall's bench.json states p99_itl_ms (612.98 ms) and holds the
    per-request ITLs (their nearest-rank p99 was 612.75): the stated percentile is the value, rounded
    once, so the latency table, the evidence, the SLO line and the bench row print one ITL p99, and
    the ratio to the median one value."""
    import json
    import re

    stated = json.loads((BUNDLES / "serving_prefill_stall" / "bench.json").read_text())[0]["p99_itl_ms"]
    data = analyze(open_case([BUNDLES / "serving_prefill_stall"]), slo={"itl_p99_ms": 100.0}).data
    assert data["serving"]["latency"]["client"]["itl"]["p99"] == round(stated, 3)
    text = run_cli("analyze", BUNDLES / "serving_prefill_stall", "--slo", "itl_p99_ms=100").stdout
    p99s = set(re.findall(r"ITL p99\s+([\d,.]+) ms", text)) | set(re.findall(r"ITL\s.*p99\s+([\d,.]+) ms", text))
    ratios = set(re.findall(r"([\d.]+) ?x the median|over the median: ([\d.]+)x", text))
    assert len(p99s) == 1, p99s
    assert len({value for pair in ratios for value in (pair if isinstance(pair, tuple) else (pair,)) if value}) == 1, ratios


def test_compare_evidence_and_table_print_one_figure_per_finding(tmp_path):
    """Item 37: the finding table's ms/step and its evidence line ('its slices, ms per step') are
    formatted from the one value the contract holds (2.119 vs 2.120 before); a step percentile of
    several ranks is labelled as their median (the summary line names rank0's)."""
    out = tmp_path / "c.json"
    run_cli("compare", BUNDLES / "eager_decode", BUNDLES / "graph_decode", "-f", "json", "-o", out)
    import json

    from tracetriage.analyzers.compare_metrics import figure_text

    for finding in json.loads(out.read_text())["findings"]:
        (cause,) = [item for item in finding["evidence"] if item["name"] == "cause_ms"]
        assert cause["before"] == finding["before_ms_per_step"]
        assert f"{figure_text(finding['before_ms_per_step'], 'ms')} ->" in cause["text"]
    from tracetriage.reports.compare_view import metric_label

    row = {"name": "step_p50_ms", "unit": "ms"}
    assert metric_label(row, 2) == "step p50, median of 2 ranks" and metric_label(row, 1) == "step p50"


def test_stated_and_stored_figures_read_the_same():
    """Items 5 and 37: a figure and its stored (rounded) value print the same (612.7496 and 612.75,
    20.9503 and 20.95, 2.11953 and 2.1195 were 612.7 / 612.8, 21.0 / 20.9, 2.120 / 2.119)."""
    from tracetriage.wording import ms, ms_text

    for raw in (612.7496127, 20.950341, 13396.0281, 0.04951, 1234.5499):
        assert ms(raw) == ms(round(raw, 3))
    for raw in (2.1195312, 16.70501, -0.60449, 0.00005):
        assert ms_text(raw) == ms_text(round(raw, 4)) and ms_text(raw, sign="+") == ms_text(round(raw, 4), sign="+")
    assert ms_text(2.5, sign="+") == "+2.500 ms" and ms_text(-2.5, sign="+") == "-2.500 ms"


@pytest.mark.parametrize("bundle", ["serving_prefill_stall", "decode_rare_prefill"])
def test_a_per_token_complaint_finds_the_prefill_stall(bundle):
    """Item 33: --symptom tpot (there is no itl symptom) on a prefill stall names it: a prefill step
    stalls every decoding sequence's next token (it said 'no finding on this axis')."""
    text = run_cli("analyze", BUNDLES / bundle, "--symptom", "tpot").stdout
    verdict = next(line for line in text.splitlines() if line.startswith("VERDICT"))
    assert "tpot: [prefill_stall]" in verdict and "no finding on this axis" not in verdict


def _kineto_gaps_in_a_call(path, call: str):
    """A PyTorch profiler trace of 20 steps of 5 kernels, each step then idle 5 ms inside ``call``."""
    import json

    events, ts, correlation = [], 1000.0, 1
    for step in range(20):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 100, "tid": 100,
                       "ts": ts, "dur": 6000})
        for _ in range(5):
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": ts,
                           "dur": 5, "args": {"correlation": correlation}})
            events.append({"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": ts + 10, "dur": 100,
                           "args": {"device": 0, "stream": 7, "correlation": correlation}})
            correlation += 1
            ts += 110
        events.append({"ph": "X", "cat": "cuda_runtime", "name": call, "pid": 100, "tid": 100, "ts": ts, "dur": 5000,
                       "args": {"correlation": correlation}})
        correlation += 1
        ts = 1000.0 + (step + 1) * 6000
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}))
    return path


def test_gaps_in_runtime_calls_of_a_kineto_trace_need_no_nsys(tmp_path):
    """Item 34: the GPU idles inside a runtime call a PyTorch profiler trace recorded: the fix names
    the calls' callers (torch.profiler with_stack), not an nsys report of calls the trace already has."""
    trace = _kineto_gaps_in_a_call(tmp_path / "trace.json", "cudaGetDeviceProperties")
    data = analyze(open_case([trace])).data
    (starved,) = [finding for finding in data["findings"] if finding["id"] == "gpu_starved"]
    assert "cudaGetDeviceProperties" in starved["title"]
    assert "nsys" not in starved["fix"] and "with_stack=True" in starved["fix"]


def test_serving_figures_that_disagree_are_said_to(tmp_path):
    """Items 35, 36 and last session's 7: the engine-stats TPOT fit that predicts 7.1 ms against a
    measured mean TPOT of 38.3 ms, and a client TTFT p50 2.3x the server histogram's, each get a
    sentence (JSON serving.cross_checks, text, md, html); figures that agree get none."""
    prefill = analyze(open_case([BUNDLES / "serving_prefill_stall"])).data["serving"]
    (tpot,) = prefill["cross_checks"]
    assert tpot.startswith("TPOT model and measured TPOT disagree") and "38.3 ms" in tpot
    capacity = analyze(open_case([BUNDLES / "serving_at_capacity"])).data["serving"]
    assert any(sentence.startswith("TTFT p50 disagrees") and "13.40 s" in sentence for sentence in capacity["cross_checks"])
    assert analyze(open_case([BUNDLES / "serving_batch_past_knee"])).data["serving"]["cross_checks"] == []
    assert "check: TTFT p50 disagrees" in run_cli("analyze", BUNDLES / "serving_at_capacity").stdout
    for fmt in ("md", "html"):
        out = tmp_path / f"r.{fmt}"
        run_cli("analyze", BUNDLES / "serving_at_capacity", "-o", out)
        assert "TTFT p50 disagrees" in out.read_text()


def test_the_headline_never_rounds_an_impact_up_to_all():
    """Item 36: serving_at_capacity's impact is 99.5%: the headline says so, not 'explains 100%'."""
    data = analyze(open_case([BUNDLES / "serving_at_capacity"])).data
    (finding,) = [finding for finding in data["findings"] if finding["id"] == "at_capacity"]
    assert 99 < finding["impact_pct"] < 100
    assert "explains 100%" not in data["headline"] and "explains 99.5%" in data["headline"]


def test_one_capture_for_several_unmeasured_analyses_is_written_once():
    """Item 39: eager_decode's three efficiency analyses share one ~330-character capture command:
    it is written once, the others point to it, and in text the block follows the findings."""
    text = run_cli("analyze", BUNDLES / "eager_decode").stdout
    assert text.count("nsys profile --pytorch=autograd-shapes-nvtx") == 1
    assert "capture: the same as for operator shapes above" in text
    assert text.index("[1] ") < text.index("EFFICIENCY NOT MEASURED") < text.index("NOT MEASURED\n")


def test_trend_on_captures_says_where_batch_wrote(tmp_path):
    """Item 23: trend over captures runs batch first; it says where (it printed nothing)."""
    out = tmp_path / "batch"
    proc = run_cli("trend", BUNDLES / "eager_decode", BUNDLES / "graph_decode", "--batch-dir", out)
    assert proc.returncode == 0, proc.stderr
    assert f"batch analyzed the captures into {out}" in proc.stderr and (out / "index.html").is_file()
    again = run_cli("trend", out)  # a batch folder given: nothing to say
    assert again.returncode == 0 and "batch analyzed" not in again.stderr


def test_a_truncated_json_error_names_line_and_column_once(tmp_path):
    """Item 24 (already fixed at e84f952): a Kineto JSON cut in half names line and column, no 'at at'."""
    import gzip

    cut = tmp_path / "cut.json"
    whole = gzip.decompress((BUNDLES.parent / "real" / "kineto" / "hta_critical_path_alexnet.json.gz").read_bytes())
    cut.write_bytes(whole[: len(whole) // 2])
    proc = run_cli("analyze", cut)
    assert proc.returncode == 3 and "at at" not in proc.stderr and "line" in proc.stderr and "column" in proc.stderr


def test_a_graph_capture_companion_is_a_note_not_a_warning():
    """Item 27: the capture phase profiled apart is information: the input row's notes (JSON), 'note:'
    in text, never 'warning:' (the real TraceLens pair: skipped without ../shared/samples/real)."""
    from conftest import real

    execution = real("kineto", "tracelens_sglang_qwen3-8b_decode.json.gz")
    capture = real("kineto", "tracelens_sglang_decode_capture_bs32_rank0.json.gz")
    data = analyze(open_case([execution, capture])).data
    (row,) = [item for item in data["inputs"] if item["path"].endswith(capture.name)]
    assert any("graph capture phase" in note for note in row["notes"])
    assert not any("graph capture phase" in warning for warning in row["warnings"])
    text = run_cli("analyze", execution, capture).stdout
    assert "note: this trace is the graph capture phase" in text and "warning: this trace is the graph" not in text


def test_wording_a_new_user_tripped_on():
    """Item 40: 'computes at least 100.0%' (healthy: all of the window), memsets counted as 'copies'
    (memset_only: memsets), 'Capture: capture ...' in an abstaining headline (To decide: ...), and
    'captured at a time the capture does not record' (capture time not recorded)."""
    healthy = analyze(open_case([BUNDLES / "healthy"])).data["headline"]  # no problem found (efficiency not measured)
    assert "at least 100.0%" not in healthy and "computing all of the window" in healthy
    memset = run_cli("analyze", BUNDLES / "memset_only").stdout
    window = next(line for line in memset.splitlines() if line.startswith("WINDOW"))
    assert "of the window in all: compute 0.0%" in window and window.endswith("memsets 100.0%") and "copies" not in window
    verdict = next(line for line in memset.splitlines() if line.startswith("VERDICT"))
    assert "Capture: capture" not in verdict and "To decide: capture a steady-state window" in verdict
    case = next(line for line in memset.splitlines() if line.startswith("CASE"))
    assert case.endswith("· capture time not recorded")
    eager = run_cli("analyze", BUNDLES / "eager_decode").stdout
    assert "(collectives included), copies 0.0%" in eager  # no memset: still copies


def test_a_gpu_row_lost_to_damage_is_counted_with_its_header(tmp_path):
    """Item 43: a topology matrix whose GPU2 row was destroyed (a 1 MB line in it) said '7 GPUs'
    with GPU2 in an island and missing from the NUMA list: the header's GPUs are the count, the
    lost row is a warning, and its NUMA node reads N/A."""
    raw = (BUNDLES / "tp8_cross_island" / "topo.txt").read_bytes()
    damaged = tmp_path / "topo.txt"
    cut = raw.index(b"\nGPU2") + 3  # inside the name GPU2 (the hostile corpus's cut at byte 200 lands there)
    damaged.write_bytes(raw[:cut] + b"x" * 100_000 + b"\n" + raw[cut:])
    data = analyze(open_case([damaged])).data
    topo = data["topology"]
    assert sorted(gpu for island in topo["islands"] for gpu in island) == list(range(8))
    assert topo["numa"]["2"] is None and list(topo["numa"]) == [str(gpu) for gpu in range(8)]
    assert any("row GPU2 is missing or unreadable" in warning for item in data["inputs"] for warning in item["warnings"])
    text = run_cli("analyze", damaged).stdout
    assert "8 GPUs" in text and "GPU2:N/A" in text


def test_trend_leaves_abstained_cases_out_and_never_calls_the_first_capture_an_outlier(tmp_path):
    """Item 41: trend over sample bundles put the abstained memset_only and single_kernel in one series
    with the others, and called the first capture (decode_rare_prefill) an outlier with 'last good
    none': an abstained case is in no series (listed as not in a series), and the first capture of a
    series has no history to be the odd one against."""
    import json

    names = ["decode_rare_prefill", "eager_decode", "graph_decode", "healthy", "memset_only", "single_kernel"]
    out = tmp_path / "trend.json"
    proc = run_cli("trend", *[BUNDLES / name for name in names], "--batch-dir", tmp_path / "batch", "-f", "json", "-o", out)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    in_series = {case["name"] for group in result["groups"] for case in group["cases"]}
    (abstained,) = [entry for entry in result["ungrouped"] if entry["key"] == "not enough to judge"]
    assert {case["name"] for case in abstained["cases"]} == {"memset_only", "single_kernel"}
    assert not in_series & {"memset_only", "single_kernel"}
    firsts = {group["cases"][0]["name"] for group in result["groups"]}
    assert not [change for change in result["changes"] if change["kind"] == "outlier" and change["first_bad"] in firsts]


def _export_copy(tmp_path, name, *statements):
    import shutil
    import sqlite3

    path = tmp_path / name / "trace.sqlite"
    path.parent.mkdir(parents=True)
    shutil.copyfile(BUNDLES / "eager_decode" / "trace.sqlite", path)
    con = sqlite3.connect(path)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("pad", [False, True], ids=["sqlite3 path", "over 4 MB: ADBC/b-tree path"])
def test_an_export_with_strings_that_are_not_utf8_is_read(tmp_path, pad):
    """Issue 33 item 8 (found fixed at 391c0ef, pinned here): a flipped high bit leaves StringIds text
    that is not UTF-8; the export is read (exit 0, nothing on stderr), its kernels all counted."""
    statements = ["UPDATE StringIds SET value = CAST(x'c328ffa0' || value AS TEXT) WHERE rowid % 2 = 0"]
    if pad:
        statements[:0] = ["CREATE TABLE zz_pad (b BLOB)", "INSERT INTO zz_pad VALUES (zeroblob(4500000))"]
    path = _export_copy(tmp_path, "flipped", *statements)
    proc = run_cli("analyze", path, "--no-cache", "-f", "json")
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    import json

    (row,) = json.loads(proc.stdout)["inputs"]
    assert row["counts"]["kernels"] == 12_000


@pytest.mark.parametrize("fraction", [0.3, 0.7, 0.95, 0.99])
def test_a_truncated_export_is_exit_3_in_one_line(tmp_path, fraction):
    """Issue 33 item 8 (found fixed, pinned here): an export cut anywhere (page-aligned or not, the
    b-tree path too) is exit 3 with one line naming the file, never a silent exit 0."""
    path = _export_copy(tmp_path, "whole", "CREATE TABLE zz_pad (b BLOB)", "INSERT INTO zz_pad VALUES (zeroblob(4500000))",
                        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    data = path.read_bytes()
    for cut, label in ((int(len(data) * fraction), "unaligned"), (int(len(data) * fraction) // 4096 * 4096, "aligned")):
        short = tmp_path / label / "trace.sqlite"
        short.parent.mkdir(exist_ok=True)
        short.write_bytes(data[:cut])
        proc = run_cli("analyze", short, "--no-cache")
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 3 and len(lines) == 1 and lines[0].startswith(f"tracetriage: error: {short}"), proc.stderr


def test_the_cross_island_claim_is_what_the_re_layout_removes():
    """Item 30: the collectives run 52.9% of tp8's window, but the re-layout removes only the time above what
    the same collectives take on one island's link: the impact is that excess (a bus-bandwidth model stated in
    the evidence; tests/test_collective_ring.py checks its figures), below the measured share."""
    data = analyze(open_case([BUNDLES / "tp8_cross_island"])).data
    (finding,) = [finding for finding in data["findings"] if finding["id"] == "cross_island_collective"]
    (bound,) = [item for item in finding["evidence"] if item["name"] == "recoverable_pct"]
    (share,) = [item for item in finding["evidence"] if item["name"] == "collective_share_pct"]
    assert bound["value"] == finding["impact_pct"] < share["value"] and bound["text"].startswith("removable by the re-layout")


def test_the_copy_bound_mechanism_does_not_assert_the_link_speed():
    """Item 42: offload_copy_bound moves 25.0 GB/s from pinned memory; the mechanism said 'the step
    runs at the speed of the PCIe link' without comparing the rate with any link. It now names the
    measured rate and says the link's limit is not measured, with the capture that measures it."""
    (finding,) = analyze(open_case([BUNDLES / "offload_copy_bound"])).data["findings"][:1]
    assert finding["id"] == "copy_bound" and "speed of the PCIe link" not in finding["mechanism"]
    assert "is the link's limit is not measured" in finding["mechanism"] and "nvbandwidth" in finding["mechanism"]


def test_compare_shows_the_figure_analyze_gives_for_a_finding():
    """Issue item 3 (compare and analyze, one figure): compare judges host_sync_per_step on its slices
    (what the sync causes: its wait and the launch after it, measured the same way on both sides) while
    analyze gives what the sync claims in the ledger; where the two differ compare also prints what each
    analysis claims, the figure analyze shows."""
    import json

    data = analyze(open_case([BUNDLES / "eager_decode"])).data
    device = data["devices"][0]
    steps = next(process["steps"]["count"] for process in data["processes"] if process["pid"] == device["pid"])
    claimed = device["accounting"]["claims_pct"]["host_sync_per_step"] / 100 * device["window_ns"] / steps / 1e6
    out = run_cli("compare", BUNDLES / "eager_decode", BUNDLES / "graph_decode", "-f", "json").stdout
    (row,) = [finding for finding in json.loads(out)["findings"] if finding["id"] == "host_sync_per_step"]
    (claim,) = [item for item in row["evidence"] if item["name"] == "claim_ms"]
    assert claim["before"] == pytest.approx(claimed, abs=1e-4)
    assert abs(claim["before"] - row["before_ms_per_step"]) > 1e-3  # the two figures differ: both are printed
    (launch,) = [finding for finding in json.loads(out)["findings"] if finding["id"] == "launch_bound"]
    assert not [item for item in launch["evidence"] if item["name"] == "claim_ms"]  # the same figure: said once


def test_a_budget_broken_by_a_lower_percentile_names_that_percentile_in_the_headline():
    """Trial of integ41 #1: a p95 budget broken by the measured p50 names the p50, never "TTFT p95 70.3 ms"."""
    data = analyze(open_case([BUNDLES / "serving_prefill_stall"]), slo={"ttft_p95_ms": 30.0}).data
    (check,) = data["serving"]["slo_checks"]
    assert check["status"] == "broken" and check["bounded_by"] == "p50"
    p50 = data["serving"]["latency"]["client"]["ttft"]["p50"]
    assert f"TTFT p50 {p50:.1f} ms over the 30 ms p95 budget" in data["headline"]
    assert "TTFT p95" not in data["headline"]
