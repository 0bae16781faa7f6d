"""compare read as an engineer reads it (issue 32, items 1-6): a change the data cannot tell is said
to be within noise with its interval and step counts, never "unchanged"; a finding whose own quantity is
0 on both sides does not persist; the confidence reflects the smaller sample; per-step movers say their
statistic; busy % of a graph-level capture is no verdict; the late rank is the headline of a skewed
collective; compare abstains on dependency waits where analyze does (offset clocks).

Pairs: the generated prefill_stall (60 steps, p99 447 ms) -> decode_rare_prefill (400 steps, p99 22 ms),
and the real 2xH100 nsys pair (mfu_before -> mfu_after, 15 / 14 steps per rank)."""

from __future__ import annotations

import json

import pytest
from conftest import BUNDLES, ROOT, compared, script_module

import tracetriage
from tracetriage.analyzers.compare_steps import judged_status
from tracetriage.analyzers.trend import pair_test
from tracetriage.analyzers.trend_records import Compared
from tracetriage.contract import load

REAL_NSYS = ROOT / "samples" / "real" / "nsys"


def stall_to_rare() -> dict:
    return compared(str(BUNDLES / "prefill_stall"), str(BUNDLES / "decode_rare_prefill"))


def mfu_pair() -> dict:
    return compared(str(REAL_NSYS / "nsys2026.2_2xH100_mfu_before.sqlite"), str(REAL_NSYS / "nsys2026.2_2xH100_mfu_after.sqlite"))


# -- item 1: not significant is said so, never "unchanged"

def test_the_rule_tells_a_small_change_from_one_the_data_cannot_tell():
    assert judged_status(1.20, (1.10, 1.30), True, 5.0) == "regressed"
    assert judged_status(0.80, (0.70, 0.90), True, 5.0) == "improved"
    assert judged_status(1.03, (1.01, 1.06), True, 5.0) == "unchanged"  # resolved, under the threshold
    assert judged_status(1.01, (0.97, 1.04), False, 5.0) == "unchanged"  # the whole interval within 5% of 1
    assert judged_status(1.01, (0.90, 1.12), False, 5.0) == "within noise"  # could be 10% either way
    assert judged_status(0.05, (0.05, 1.03), False, 5.0) == "within noise"  # 447 -> 22 ms on 60 steps


def test_a_p99_that_moved_20x_on_60_steps_is_not_judged_and_the_long_steps_decide():
    """A p99 of 60 steps is their longest step or two (new-user trial 50: not judged under 100 steps);
    the tail's rate is what the data decides: 5 long steps of 60 -> 3 of 400, Fisher p=0.0013."""
    data = stall_to_rare()
    step = data["step_time"][0]
    assert step["before_count"] == 60 and step["after_count"] == 400
    assert step["p99_ratio"] < 0.1 and step["p99_ci95"] is None
    assert step["p99_status"] == "not judged" and not step["p99_significant"]
    assert step["p99_reason"] == "not judged (60 steps; a p99 needs 100)"
    assert data["budgets"]["step p99"] == "not judged"
    assert step["long_steps"]["before"] == 5 and step["long_steps"]["after"] == 3
    assert step["long_steps"]["status"] == "improved" and step["long_steps"]["p_value"] == 0.00133
    assert data["verdict"] == "improved"
    p99 = next(metric for metric in data["metrics"] if metric["name"] == "step_p99_ms")
    assert p99["direction"] == "not judged"
    assert "step p99 447.4 ms -> 21.90 ms not judged (60 steps; a p99 needs 100)" in data["summary"]
    text = tracetriage.api.Comparison(data).render("text")
    line = next(line for line in text.splitlines() if line.strip().startswith("rank0"))
    assert "p99 447.4 ms -> 21.90 ms (not judged (60 steps; a p99 needs 100))" in line
    # the p50 moved 2% and the test resolved it: a small change, said as such
    assert step["status"] == "unchanged" and "unchanged (within the 5% threshold)" in line
    for fmt in ("md", "html"):
        assert "not judged (60 steps; a p99 needs 100)" in tracetriage.api.Comparison(data).render(fmt)
    assert tracetriage.api.Comparison(data).gate_exit() == 0  # improved


def test_the_real_pairs_p99_plus_22_percent_on_15_steps_is_not_significant():
    data = mfu_pair()
    for step in data["step_time"]:
        assert 1.15 < step["p99_ratio"] < 1.3 and step["p99_ci95"] is None
        assert step["p99_status"] == "not judged"  # 14 steps: a p99 needs 100
        assert step["status"] == "regressed"  # the p50 test resolves 13% on the same steps
    assert data["verdict"] == "regressed"
    assert "step p99 21.96 ms -> 26.91 ms not judged (14 steps; a p99 needs 100)" in data["summary"]


def test_trend_says_the_pairs_significance_as_compare_does():
    compared_pair = load(Compared, stall_to_rare())
    words = pair_test("step_p99_ms", compared_pair)
    assert words == "compare of the captures either side: after/before 0.05, not judged (60 steps; a p99 needs 100)"
    assert "unchanged (within the 5% threshold)" in pair_test("step_p50_ms", compared_pair)
    assert pair_test("busy_pct", compared_pair) is None
    assert "regressed" in pair_test("step_p50_ms", load(Compared, mfu_pair()))


@pytest.fixture(scope="module")
def stall_archive(tmp_path_factory):
    """Six nightly captures: decode_rare_prefill (400 steps) three times, then prefill_stall (60 steps) three
    times, each generated with its own seed (the generator's randomness is the noise), batched."""
    import shutil
    import sys

    sys.path.insert(0, str(ROOT / "samples"))
    try:
        import generate
    finally:
        sys.path.pop(0)
    generated, archive = tmp_path_factory.mktemp("seeds"), tmp_path_factory.mktemp("nightly")
    for night, (scenario, seed) in enumerate([("decode_rare_prefill", seed) for seed in (1, 2, 3)]
                                             + [("prefill_stall", seed) for seed in (1, 2, 3)], start=1):
        generate.generate(generated / f"{scenario}{seed}", only=[scenario], seed=seed)
        shutil.copytree(generated / f"{scenario}{seed}" / scenario, archive / f"nightly-2026-11-0{night}")
    out = tmp_path_factory.mktemp("batch")
    tracetriage.batch([str(archive)], str(out), progress=False)
    return out


def test_trend_and_compare_say_significance_in_the_same_words(stall_archive):
    """trend finds the p99 shift over six captures (beyond the series' noise) and says so with its test;
    at the shift it writes compare's test of the two captures either side: a p99 of 60 steps is not judged."""
    result = tracetriage.trend(str(stall_archive))
    change = next(change for change in result.changes if change["metric"] == "step_p99_ms")
    assert change["direction"] == "regressed" and change["first_bad"] == "nightly-2026-11-04"
    assert change["pair_test"].startswith("compare of the captures either side: after/before ")
    assert change["pair_test"].endswith("not judged (60 steps; a p99 needs 100)")
    verdict = result.groups[0]["verdict"]
    assert "regressed (beyond the series' noise over the captures); compare of the captures either side" in verdict
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(result.data, json.loads((ROOT / "reports" / "trend.schema.json").read_text()))


# -- item 2: a finding on its own quantity, never "persists" on 0 -> 0; the confidence of the smaller sample

def test_a_tail_finding_is_judged_on_what_its_long_steps_cost():
    """prefill_stall claims no slice of the window: it was judged on "its slices, per GPU op: 0 ns -> 0 ns"
    and read PERSISTS while the freezes went from 5 in 60 steps to 3 in 400. Its own quantity is the long
    steps' time above the before p50 per step, both sides against that one cutoff (the long-step test's)."""
    data = stall_to_rare()
    row = next(finding for finding in data["findings"] if finding["id"] == "prefill_stall")
    assert row["status"] == "better"
    assert 34.0 < row["before_ms_per_step"] < 36.5 and 3.0 < row["after_ms_per_step"] < 3.5
    assert not any(evidence["name"] == "cause_ns_per_op" for evidence in row["evidence"])
    assert row["evidence"][0]["text"].startswith(
        "the long steps' time above the before p50 (steps over 3x the before p50), ms per step: ")
    reverse = compared(str(BUNDLES / "decode_rare_prefill"), str(BUNDLES / "prefill_stall"))
    assert next(finding for finding in reverse["findings"] if finding["id"] == "prefill_stall")["status"] == "worse"


def test_a_measure_that_is_zero_on_both_sides_decides_nothing():
    from tracetriage.analyzers.compare_findings import Measure, _unless_empty

    empty = _unless_empty(Measure("its slices, per GPU op", 0.0, 0.0, 1430.0, per="op"))
    assert empty.empty and empty.delta is None
    kept = _unless_empty(Measure("its slices, ms per step", 0.0, 0.4, 0.1))
    assert not kept.empty and kept.delta == 0.4


def test_the_confidence_is_that_of_the_smaller_sample():
    data = stall_to_rare()  # 60 steps against 400: judged as 60
    # 0.75 + 0.25 x (60 - 5) / (100 - 5) = 0.895, x0.9 for the kernel overlap not measured (graph-level captures)
    assert data["comparable"]["confidence"] == 0.805
    assert any(reason.startswith("the smaller sample: 60 steps on ") for reason in data["comparable"]["reasons"])
    real = mfu_pair()  # 14 steps on after's pid 148
    assert 0.7 < real["comparable"]["confidence"] < 0.8
    assert any("14 steps on " in reason and "pid 148" in reason for reason in real["comparable"]["reasons"])
    reseeded = compared(str(BUNDLES / "decode_rare_prefill"), str(BUNDLES / "decode_rare_prefill"))
    assert not any(reason.startswith("the smaller sample") for reason in reseeded["comparable"]["reasons"])  # 400 steps


# -- item 3: a mean beside p50 figures says it is the mean, in every format

@pytest.mark.parametrize("pair", [mfu_pair, stall_to_rare], ids=["real_mfu", "generated_stall"])
def test_movers_say_they_are_means_in_every_format(pair):
    data = pair()
    assert data["movers"] and all(mover["statistic"] == "mean" for mover in data["movers"])
    statistics = {metric["name"]: metric["statistic"] for metric in data["metrics"]}
    assert statistics["step_p50_ms"] == "p50" and statistics["step_p99_ms"] == "p99"
    assert statistics["compute_ms"] == "mean" and statistics["idle_ms"] == "mean"
    assert statistics["launches_per_step"] == "median" and statistics["busy_pct"] == "share of the window"
    assert "; moved (mean per step): " in data["summary"]
    comparison = tracetriage.api.Comparison(data)
    text, markdown, html = comparison.render("text"), comparison.render("md"), comparison.render("html")
    assert "what moved, mean ms per step (largest first, across ranks):" in text
    assert "## What moved (mean ms per step, largest first across ranks)" in markdown
    assert "What moved (mean ms per step, largest first across ranks)" in html
    for rendered in (text, markdown, html):
        assert "compute, collectives excluded (mean per step)" in rendered
        assert "kernel launches (median per step)" in rendered


# -- item 4: busy % is no verdict; where the step held, a component that moved is "changed"

def test_a_graph_level_capture_whose_step_held_is_not_called_busier_or_better():
    """eager_decode -> graph_decode_no_gain: CUDA graphs on, the step the same (4.776 -> 4.780 ms). The
    graph-level capture records each replay as one interval that spans the gaps inside it, so busy % went
    23.6 -> 68.2% and the launch idle 'went': a share of two windows and time moved between causes."""
    data = compared(str(BUNDLES / "eager_decode"), str(BUNDLES / "graph_decode_no_gain"))
    assert data["after"]["graph_level"] and data["verdict"] == "unchanged"
    rows = {metric["name"]: metric for metric in data["metrics"]}
    assert rows["busy_pct"]["change"] > 40 and rows["busy_pct"]["direction"] == "changed"
    for name in ("idle_ms", "idle_launch_ms", "idle_host_ms", "compute_ms"):
        assert rows[name]["significant"] and rows[name]["direction"] == "changed", name
    text = tracetriage.api.Comparison(data).render("text")
    busy = next(line for line in text.splitlines() if line.strip().startswith("GPU busy (share of its window)"))
    assert busy.rstrip().endswith("changed")
    # where the step did move, the per-step components keep their direction; busy % still judges nothing
    faster = compared(str(BUNDLES / "eager_decode"), str(BUNDLES / "graph_decode"))
    rows = {metric["name"]: metric for metric in faster["metrics"]}
    assert faster["verdict"] == "improved" and rows["idle_ms"]["direction"] == "improved"
    assert rows["busy_pct"]["direction"] == "changed"


def test_the_real_pairs_busy_share_is_no_verdict():
    rows = {metric["name"]: metric for metric in mfu_pair()["metrics"]}
    assert rows["busy_pct"]["change"] < -5 and rows["busy_pct"]["direction"] == "changed"
    assert rows["idle_ms"]["direction"] == "regressed"  # absolute per step, and the step regressed with it


# -- item 6: where analyze abstains from dependency_wait (offset clocks), compare abstains too

@pytest.fixture(scope="module")
def clocks(tmp_path_factory):
    """samples/gen_dependency.py's 10 ms waits a step, on aligned clocks and with the GPU 5 ms ahead."""
    gen_dependency = script_module("samples", "gen_dependency")
    out = tmp_path_factory.mktemp("clocks")
    gen_dependency.write_bundle(out / "aligned", "dependency:clock", 10_000)
    gen_dependency.write_bundle(out / "offset", "dependency:clock", 10_000, gpu_offset_us=5_000)
    return out


@pytest.mark.parametrize("before,after", [("aligned", "offset"), ("offset", "aligned")])
def test_dependency_wait_is_not_judged_against_offset_clocks(clocks, before, after):
    """Aligned -> offset read "dependency_wait fixed, 9.80 -> 0.00 ms per step" (the rule abstained after,
    so its slices were empty there); offset -> aligned read "new". The waits are the same 10 ms a step."""
    data = compared(str(clocks / before), str(clocks / after))
    row = next(finding for finding in data["findings"] if finding["id"] == "dependency_wait")
    assert row["status"] is None and row["evidence"] == []
    assert row["before_ms_per_step"] is None and row["after_ms_per_step"] is None
    assert row["decided_by"].startswith(f"not judged: the {clocks / 'offset'} analysis abstained from dependency_wait (")
    assert "clocks are offset" in row["decided_by"]
    assert "not judged (a side's analysis abstained from it): dependency_wait" in data["summary"]
    assert "fixed: dependency_wait" not in data["summary"] and "new: dependency_wait" not in data["summary"]


def test_dependency_wait_on_aligned_clocks_is_still_judged(clocks, tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "samples"))
    try:
        import gen_dependency
    finally:
        sys.path.pop(0)
    gen_dependency.write_bundle(tmp_path / "fewer", "dependency:clock", 2_000)
    data = compared(str(clocks / "aligned"), str(tmp_path / "fewer"))
    row = next(finding for finding in data["findings"] if finding["id"] == "dependency_wait")
    assert row["status"] in ("fixed", "better") and row["before_ms_per_step"] > 9
