"""New-user trial 52 (of main at cbea1bd): ``compare --gate --step-range nope graph_decode eager_decode``
passed as "unchanged" while, with its steps, the after capture is 3x slower per step. The step range
matched nothing, so both sides were judged as captures without steps, on 7 common kernels that are
4% of the graph capture's kernel time; gpu_starved read "fixed" per GPU op (a replay on one side, a
kernel on the other); and the calls-per-second interval printed "7.19-NaN"."""

import json

from conftest import BUNDLES, run_cli

from tracetriage import errors
from tracetriage.analyzers.findings import UNMATCHED_STEP_RANGE


def stepless_analysis(tmp_path, bundle: str):
    """The bundle's saved analysis as a capture whose steps were not found: analyzed with a step range
    that matches nothing, the abstention that says so taken out (what a capture without step marks and
    without a periodic sync saves)."""
    proc = run_cli("analyze", BUNDLES / bundle, "--step-range", "^no such range$", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    data["abstentions"] = [row for row in data["abstentions"] if UNMATCHED_STEP_RANGE not in row["reason"]]
    out = tmp_path / f"{bundle}.analysis.json"
    out.write_text(json.dumps(data))
    return out


def _compare(*args):
    proc = run_cli("compare", "--gate", *args, "-f", "json")
    return proc, json.loads(proc.stdout)


def test_a_step_range_that_matches_nothing_is_not_judged_as_a_stepless_pair():
    with_steps, _ = _compare(BUNDLES / "graph_decode", BUNDLES / "eager_decode")
    assert with_steps.returncode == errors.EXIT_REGRESSED  # the truth of the pair: 3x slower per step
    proc, data = _compare("--step-range", "nope", BUNDLES / "graph_decode", BUNDLES / "eager_decode")
    assert proc.returncode == errors.EXIT_INCONCLUSIVE, proc.stderr
    assert data["verdict"] == "inconclusive" and not data["comparable"]["ok"]
    first = data["comparable"]["reasons"][0]
    assert first.startswith("--step-range 'nope' matched no annotation range on ")
    assert "graph_decode pid 4202" in first and "eager_decode pid 4101" in first
    assert data["summary"].startswith("inconclusive: --step-range 'nope'")
    assert "gate: inconclusive" in proc.stderr or "gate" in proc.stderr


def test_a_step_range_matched_on_one_side_only_names_that_side():
    proc, data = _compare("--step-range", "^decode_step$", BUNDLES / "eager_decode_nvtx", BUNDLES / "eager_decode")
    assert proc.returncode == errors.EXIT_INCONCLUSIVE, proc.stderr
    first = data["comparable"]["reasons"][0]
    assert "eager_decode pid 4101" in first and "eager_decode_nvtx" not in first, first
    matched, _ = _compare("--step-range", "^decode_step$", BUNDLES / "eager_decode_nvtx", BUNDLES / "eager_decode_nvtx")
    assert matched.returncode == errors.EXIT_OK  # the range both captures mark: judged


def _kernel_time(data) -> dict[str, float]:
    out: dict[str, float] = {}
    for device in data["devices"]:
        for kernel in device["kernels"]:
            if kernel["count"]:
                out[kernel["name"]] = out.get(kernel["name"], 0.0) + kernel["total_ns"]
    return out


def test_a_stepless_pair_whose_common_kernels_are_a_small_share_is_inconclusive(tmp_path):
    before, after = stepless_analysis(tmp_path, "graph_decode"), stepless_analysis(tmp_path, "eager_decode")
    times_before = _kernel_time(json.loads(before.read_text()))
    times_after = _kernel_time(json.loads(after.read_text()))
    common = set(times_before) & set(times_after)
    covered = 100.0 * sum(times_before[name] for name in common) / sum(times_before.values())
    assert covered < 10  # the truth, from the saved kernels: the graph replays are the rest
    proc, data = _compare(before, after)
    assert proc.returncode == errors.EXIT_INCONCLUSIVE, proc.stderr
    assert data["verdict"] == "inconclusive"
    device = data["work_rate"]["devices"][0]
    assert device["status"] == "not judged" and abs(device["before_covered_pct"] - covered) < 0.01
    assert f"the common kernels are {covered:.1f}% of the before kernel time" in data["comparable"]["reasons"][0]
    assert "NaN" not in run_cli("compare", before, after).stdout


def test_per_gpu_op_findings_are_not_judged_between_a_graph_level_and_an_eager_capture(tmp_path):
    """A GPU op is a whole replay on the graph-level side and one kernel on the other: gpu_starved per
    GPU op 102.5 us -> 3.4 us was no measure of the starvation."""
    from tracetriage.analyzers.compare import compare

    before = json.loads(stepless_analysis(tmp_path, "graph_decode").read_text())
    after = json.loads(stepless_analysis(tmp_path, "eager_decode").read_text())
    for finding in compare(before, after)["findings"]:
        assert not any(evidence["name"] == "cause_ns_per_op" for evidence in finding["evidence"]), finding
        assert finding["status"] not in ("fixed", "better", "worse"), finding
