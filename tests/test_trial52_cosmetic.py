"""New-user trial 52, what compare and trend say (of main at 57602a3): the gate's pass line named --slo when
none was given; one compare output gave two figures for the long steps' time (3.277 -> 35.25 ms per step
above the before p50 in the long-step test, 3.277 -> 35.22 ms in prefill_stall's evidence, measured against
each side's own p50); a 22-step p99 of one capture twice read "unchanged" where any other 22-step p99 is not
judged; trend's gate lines lacked the "(exit N)" compare's carry; a step-less pair's kernels that only one
side ran were in the JSON only; and the trend page's last column ran past its box at 1280 px."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import BUNDLES, chromium_page, compare_contract, run_cli, script_module
from test_trial52 import stepless_analysis

from tracetriage import errors

# -- 1. the gate's pass line names --slo only when budgets were given


def test_the_gate_pass_line_names_slo_only_when_budgets_were_given():
    before, after = BUNDLES / "eager_decode", BUNDLES / "eager_decode_nvtx"
    plain = run_cli("compare", "--gate", before, after)
    assert plain.returncode == errors.EXIT_OK, plain.stderr
    line = next(row for row in plain.stderr.splitlines() if "gate: passed" in row)
    assert "--slo" not in line and "SLO" not in line, line
    assert line.endswith("no budget regressed and no finding worse"), line

    serving = BUNDLES / "serving_healthy"
    budgets = "tpot_p99_ms=100000,ttft_p99_ms=100000"  # budgets no capture breaks: met on both sides
    data = compare_contract(serving, serving, "--slo", budgets)
    assert data["slo_broken"] == [] and data["slo_not_measured"] == []  # the contract alone cannot tell
    given = run_cli("compare", "--gate", "--slo", budgets, serving, serving)
    assert given.returncode == errors.EXIT_OK, given.stderr
    assert ("gate: passed: unchanged, no budget regressed, no finding worse and no --slo budget newly broken "
            "(met before, broken after)") in given.stderr

    unmeasured = run_cli("compare", "--gate", "--slo", "tpot_p99_ms=50", before, after)  # no serving artifacts
    assert unmeasured.returncode == errors.EXIT_OK, unmeasured.stderr
    assert ("no --slo budget newly broken (met before, broken after) (1 of 1 not measured: tpot_p99_ms=50"
            in unmeasured.stderr), unmeasured.stderr


# -- 2. one figure for the long steps' time: above the before p50, as the long-step test


def _durations(bundle: str) -> np.ndarray:
    proc = run_cli("analyze", BUNDLES / bundle, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    process = next(p for p in json.loads(proc.stdout)["processes"] if p["steps"]["count"])
    return np.asarray(process["steps"]["durations_ns"], np.float64)


@pytest.mark.parametrize("before, after", [("decode_rare_prefill", "prefill_stall"),
                                           ("prefill_stall", "decode_rare_prefill")])
def test_the_long_steps_time_is_one_figure_against_the_before_p50(before, after):
    steps_before, steps_after = _durations(before), _durations(after)
    p50 = float(np.median(steps_before))  # the one cutoff: 3x the before p50, for both sides
    truth = [round(float(np.sum(steps[steps > 3 * p50] - p50)) / steps.size / 1e6, 4)
             for steps in (steps_before, steps_after)]
    own = float(np.median(steps_after))  # what the finding's row measured before: the after side's own p50
    assert abs(round(float(np.sum(steps_after[steps_after > 3 * own] - own)) / steps_after.size / 1e6, 4)
               - truth[1]) > 0.001  # the two definitions differ on this pair, in the figure printed

    data = compare_contract(BUNDLES / before, BUNDLES / after)
    long_steps = data["step_time"][0]["long_steps"]
    assert [long_steps["before_ms_per_step"], long_steps["after_ms_per_step"]] == pytest.approx(truth, abs=1e-4)
    stall = next(finding for finding in data["findings"] if finding["id"] == "prefill_stall")
    assert [stall["before_ms_per_step"], stall["after_ms_per_step"]] == pytest.approx(truth, abs=1e-4)
    cause = next(evidence for evidence in stall["evidence"] if evidence["name"] == "cause_ms")
    assert [cause["before"], cause["after"]] == pytest.approx(truth, abs=1e-4)
    assert "above the before p50" in cause["text"]

    text = run_cli("compare", BUNDLES / before, BUNDLES / after).stdout
    before_ms, after_ms = (f"{value:.4g}" for value in truth)
    assert f"{before_ms} -> {after_ms} ms per step above the before p50" in text  # the long-step test's line
    evidence = next(line for line in text.splitlines() if "the long steps' time above" in line)
    assert evidence.strip() == ("the long steps' time above the before p50 (steps over 3x the before p50), per step: "
                                f"{before_ms} ms -> {after_ms} ms"), evidence  # the finding's row: the same figures


# -- 3. a p99 of under 100 steps is not judged, on one capture twice as on any pair


def test_a_p99_of_too_few_steps_is_not_judged_on_one_capture_twice(tmp_path):
    bundle = BUNDLES / "eager_decode"
    steps = _durations("eager_decode").size
    assert 20 <= steps < 100  # the truth of the capture: too few steps for a p99
    copy = tmp_path / "eager_decode"
    shutil.copytree(bundle, copy)
    for after, identical in ((bundle, "same path"), (copy, "same bytes")):
        data = compare_contract(bundle, after)
        assert data["identical"] == identical
        row = data["step_time"][0]
        assert row["status"] == "unchanged" and row["p99_status"] == "not judged", row
        assert row["p99_reason"] == f"not judged ({steps} steps; a p99 needs 100)"
        assert data["budgets"]["step p99"] == "not judged"
        assert next(m for m in data["metrics"] if m["name"] == "step_p99_ms")["direction"] == "not judged"
    other = compare_contract(bundle, BUNDLES / "eager_decode_nvtx")  # another capture of 22 steps: as one twice
    assert other["identical"] is None and other["step_time"][0]["p99_status"] == "not judged"
    text = run_cli("compare", bundle, bundle).stdout
    assert f"not judged ({steps} steps; a p99 needs 100)" in text


def test_a_p99_of_enough_steps_on_one_capture_twice_stays_unchanged():
    bundle = BUNDLES / "decode_rare_prefill"  # 400 steps
    data = compare_contract(bundle, bundle)
    row = data["step_time"][0]
    assert row["before_count"] >= 100 and row["p99_status"] == "unchanged" and row["p99_ci95"] == [1.0, 1.0]


# -- 4. trend's gate lines say their exit code, as compare's


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """benchmarks/bench_trend.py's archive of 60 cases (three workloads, level shifts and outliers)."""
    folder = tmp_path_factory.mktemp("cosmetic") / "archive"
    script_module("benchmarks", "bench_trend").write_archive(folder, 60)
    return folder


def _subset(archive, folder, keep):
    """The archive's batch tables with the cases ``keep(case_id)`` holds, in ``folder``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    folder.mkdir()
    summary = pq.read_table(archive / "summary.parquet")
    kept = [case for case in summary.column("case_id").to_pylist() if keep(case)]
    for name in ("summary.parquet", "findings.parquet", "kernels.parquet"):
        table = pq.read_table(archive / name)
        pq.write_table(table.filter(pc.is_in(table.column("case_id"), value_set=pa.array(kept))), folder / name)
    for name in ("good.json", "bad.json"):
        shutil.copy(archive / name, folder / name)
    return folder


def test_trend_gate_lines_say_their_exit_code_as_compare(archive, tmp_path):
    # each workload's first 13 nights of 20: the regression a third of the way in, not yet its fix (bench_trend)
    regressed = _subset(archive, tmp_path / "regressed", lambda case: int(case.rpartition("case")[2]) < 13)
    failed = run_cli("trend", regressed, "--gate")
    assert failed.returncode == errors.EXIT_REGRESSED, failed.stderr
    assert "tracetriage: gate: failed (exit 8): the latest capture is in a regressed segment" in failed.stderr
    shown = run_cli("trend", regressed, "--gate", "-o", tmp_path / "trend.html")
    assert shown.returncode == errors.EXIT_REGRESSED and "; gate: failed (exit 8): " in shown.stderr, shown.stderr

    few = _subset(archive, tmp_path / "few", lambda case: case in ("w0-case00000", "w0-case00001"))
    inconclusive = run_cli("trend", few, "--gate")
    assert inconclusive.returncode == errors.EXIT_INCONCLUSIVE, inconclusive.stderr
    assert "tracetriage: gate: inconclusive (exit 9): no group has a series to judge" in inconclusive.stderr

    passed = run_cli("trend", archive, "--gate")  # the regression and its fix: the latest captures are good
    assert passed.returncode == errors.EXIT_OK and "tracetriage: gate: passed: " in passed.stderr, passed.stderr


def test_every_trend_gate_line_that_is_not_a_pass_names_the_code_gate_exit_returns():
    """Each outcome's line against the exit code ``trend --gate`` returns for it (records.trend.gate_exit)."""
    from test_view_parity_compare_trend import trend_contract

    from tracetriage.api import Trend
    from tracetriage.reports.trend_view import gate_line

    regressed = trend_contract()
    passed = {**regressed, "gate": {**regressed["gate"], "regressed": False, "groups": []}, "failed": []}
    failed_case = {**passed, "failed": regressed["failed"]}
    no_series = {**passed, "groups": [], "changes": []}
    too_few = {**passed, "gate": {**passed["gate"], "judged": []}}
    baseline = {**regressed, "gate": {**regressed["gate"], "baseline": "nightly-2026-11-01"}}
    for contract in (regressed, passed, failed_case, no_series, too_few, baseline):
        code, line = Trend(contract, gate=True).gate_exit(), gate_line(contract, True)
        if code == errors.EXIT_OK:
            assert line.startswith("gate: passed") and "(exit" not in line, line
        else:
            word = "failed" if code == errors.EXIT_REGRESSED else "inconclusive"
            assert line.startswith(f"gate: {word} (exit {code}): "), (code, line)
    assert {Trend(c, gate=True).gate_exit() for c in (regressed, failed_case, no_series, too_few)} == {8, 9}


# -- 5. a step-less pair shows the kernels only one side ran, in every format


def _one_side_truth(before: dict, after: dict) -> dict[str, tuple[str, float]]:
    """From the two saved analyses: each kernel that ran on one side's first device only, with its share (%)
    of that device's window."""
    def kernels(data):
        device = data["devices"][0]
        return {k["name"]: 100.0 * k["total_ns"] / device["window_ns"] for k in device["kernels"] if k["count"]}, device

    ran_before, _ = kernels(before)
    ran_after, _ = kernels(after)
    out = {name: ("before", share) for name, share in ran_before.items() if name not in ran_after}
    out.update({name: ("after", share) for name, share in ran_after.items() if name not in ran_before})
    return out


@pytest.fixture(scope="module")
def stepless_pair(tmp_path_factory):
    """decode_rare_prefill -> graph_decode saved as captures without steps, a kernel of the after side renamed
    to carry markup (a C++ template name, as real kernels have: it must come out escaped in the page)."""
    folder = tmp_path_factory.mktemp("stepless")
    before = stepless_analysis(folder, "decode_rare_prefill")
    after = stepless_analysis(folder, "graph_decode")
    data = json.loads(after.read_text())
    for kernel in data["devices"][0]["kernels"]:
        if kernel["name"] == "reduce_kernel":
            kernel["name"] = "void reduce_kernel<float, 4>(float const*, float*) & co"
    after.write_text(json.dumps(data))
    return before, after


def test_a_stepless_pair_shows_the_kernels_one_side_ran_in_every_format(stepless_pair):
    import html as html_lib

    before, after = stepless_pair
    truth = _one_side_truth(json.loads(before.read_text()), json.loads(after.read_text()))
    assert len(truth) >= 2 and {side for side, _ in truth.values()} == {"before", "after"}
    data = compare_contract(before, after)
    assert data["work_rate"] is not None and data["comparable"]["ok"]
    listed = {row["name"] for row in data["kernels"]
              if bool(row["before_share_pct"]) != bool(row["after_share_pct"])}
    assert listed == set(truth)  # the JSON lists them
    outputs = {fmt: run_cli("compare", before, after, "-f", fmt).stdout for fmt in ("text", "md", "html")}
    for name, (side, share) in truth.items():
        for fmt, out in outputs.items():
            shown = html_lib.escape(name, quote=False) if fmt == "html" else name
            row = next((line for line in out.splitlines() if shown in line and f"{side} only" in line), None)
            assert row is not None, (fmt, name)
            assert f"{share:.1f}%" in row, (fmt, name, row)
    assert "<float, 4>" not in outputs["html"] and "&lt;float, 4&gt;" in outputs["html"]
    assert "reduce_kernel<float, 4>(float const*, float*) &amp; co" not in outputs["html"]


def test_the_kernels_one_side_ran_are_in_the_views_parity(stepless_pair):
    """tests/test_compare_workrate.py's parity check of the view on a pair whose kernels differ: every field
    of the one-side rows is in every format (the short name in HTML, the name cut as the others elsewhere)."""
    from test_view_parity import missing_fields
    from test_view_parity_compare_trend import COMPARE_CUT_TO, COMPARE_OMITTED, COMPARE_SHOWN_FIRST

    from tracetriage.analyzers.compare import compare
    from tracetriage.reports.compare import render_compare
    from tracetriage.reports.compare_view import compare_view

    before, after = (json.loads(path.read_text()) for path in stepless_pair)
    comparison = compare(before, after, "before", "after")
    view = compare_view(comparison)
    assert view.one_side_kernels and view.work_rate
    cut = "the kernel name is cut at its end, as the per-step kernels are"
    omitted = {fmt: {**fields, **({"rate_kernels.short_name": cut, "one_side_kernels.short_name": cut}
                                  if fmt != "html" else {})} for fmt, fields in COMPARE_OMITTED.items()}
    cut_to = {fmt: {**fields, "rate_kernels.name": fields["kernels.name"], "one_side_kernels.name": fields["kernels.name"]}
              for fmt, fields in COMPARE_CUT_TO.items()}
    for fmt in ("text", "md", "html"):
        missing = missing_fields(view, fmt, render_compare(comparison, fmt), omitted, COMPARE_SHOWN_FIRST, cut_to)
        assert not missing, (fmt, sorted(missing))


# -- 6. the trend page's tables fit their box at 1280 px


def test_the_trend_page_tables_fit_their_box_at_1280_px(archive, tmp_path):
    page_path = tmp_path / "trend.html"
    assert run_cli("trend", archive, "-o", page_path).returncode == 0
    with chromium_page(page_path, width=1280) as (page, _, _):
        tables = page.evaluate("""() => [...document.querySelectorAll('table')].map(t => {
          const box = t.parentElement.getBoundingClientRect();
          const cells = [...t.querySelectorAll('th, td')].map(c => c.getBoundingClientRect().right);
          return {box: box.right, table: t.getBoundingClientRect().right, cells: Math.max(...cells),
                  page: document.documentElement.scrollWidth - innerWidth};
        })""")
    assert tables, "no table on the trend page"
    for table in tables:  # no column past its box: nothing hidden behind a scroll bar at the table's foot
        assert table["table"] <= table["box"] + 1 and table["cells"] <= table["box"] + 1 and table["page"] <= 0, tables
