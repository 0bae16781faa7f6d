"""New-user trial 51 (of main at 89f4d2f): a gate that read noise as a regression, a rate that a graph
capture cannot count, a saved analysis of a path that now holds another capture, and a trend gate that
passed over a broken newest capture."""

import json
import shutil

from conftest import BUNDLES, run_cli, samples_generate

from tracetriage import errors


def _finding(data, finding_id):
    return next(row for row in data["findings"] if row["id"] == finding_id)


def test_a_finding_whose_measure_the_step_test_calls_noise_does_not_fail_the_gate():
    """prefill_stall against its NVTX-less twin: 5 long steps of 60 -> 5 of 59 (Fisher p=1), whose time per
    step moves 1.3 ms by the one step fewer. The gate failed one way ("finding worse") and passed the other."""
    for before, after in (("prefill_stall", "prefill_stall_nonvtx"), ("prefill_stall_nonvtx", "prefill_stall")):
        proc = run_cli("compare", "--gate", BUNDLES / before, BUNDLES / after, "-f", "json")
        assert proc.returncode == errors.EXIT_OK, (before, proc.stderr)
        data = json.loads(proc.stdout)
        row = _finding(data, "prefill_stall")
        assert row["status"] == "persists" and "not more than chance" in row["decided_by"], row
        assert "gate: passed" in proc.stderr
    real = run_cli("compare", "--gate", BUNDLES / "decode_rare_prefill", BUNDLES / "prefill_stall", "-f", "json")
    assert real.returncode == errors.EXIT_REGRESSED  # a rate the test resolves (3/400 -> 5/60) still fails it
    assert _finding(json.loads(real.stdout), "prefill_stall")["status"] == "worse"


def test_calls_per_second_are_not_judged_against_a_graph_level_capture(tmp_path):
    """Without steps, eager -> graph read "regressed: kernel calls per second x0.06": the graph capture
    records no replayed kernel, so it counts only the calls made outside its graphs. (Made step-less as
    saved analyses whose steps were not found; new-user trial 52: the pair is now refused outright,
    the common kernels being 4% of the graph side's kernel time.)"""
    from test_trial52 import stepless_analysis

    before, after = stepless_analysis(tmp_path, "eager_decode"), stepless_analysis(tmp_path, "graph_decode")
    proc = run_cli("compare", "--gate", before, after, "-f", "json")
    assert proc.returncode == errors.EXIT_INCONCLUSIVE, proc.stderr
    data = json.loads(proc.stdout)
    assert data["verdict"] == "inconclusive"
    assert [device["rate_status"] for device in data["work_rate"]["devices"]] == ["not judged"]
    assert "graph-level capture whose replays hide their kernels" in data["summary"]


def test_a_saved_analysis_of_a_path_that_now_holds_another_capture_is_not_the_same_capture(tmp_path):
    """A CI keeps analysis.json of 'latest/' and compares the next 'latest/' against it: same path, other
    capture. It read "the same capture (same path): nothing to compare" over a 3x slower step."""
    latest = tmp_path / "latest"
    shutil.copytree(BUNDLES / "graph_decode", latest)
    saved = tmp_path / "base.json"
    assert run_cli("analyze", latest, "-f", "json", "-o", saved).returncode == 0
    shutil.rmtree(latest)
    shutil.copytree(BUNDLES / "eager_decode", latest)
    proc = run_cli("compare", "--gate", saved, latest, "-f", "json")
    data = json.loads(proc.stdout)
    assert data["identical"] is None and data["verdict"] == "regressed", data["summary"]
    assert proc.returncode == errors.EXIT_REGRESSED
    same = json.loads(run_cli("compare", latest, latest, "-f", "json").stdout)
    assert same["identical"] == "same path"


def test_a_trend_gate_over_a_failed_case_is_inconclusive(tmp_path):
    """Nights 1-8 and a truncated newest night: the gate passed ("1 case failed and not judged") over a
    capture it could not read, which may be the newest (a failed case has no time to place it)."""
    gen = samples_generate()
    nightly = tmp_path / "nightly"
    gen.generate_nightly(nightly, nights=8, switch_at=None, outlier_at=None, seed=5)
    good = run_cli("batch", nightly, "-o", tmp_path / "b1", "--no-progress")
    assert good.returncode == 0, good.stderr
    passed = run_cli("trend", tmp_path / "b1", "--gate")
    assert passed.returncode == errors.EXIT_OK and "gate: passed" in passed.stderr, passed.stderr
    last = sorted(path for path in nightly.iterdir() if path.is_dir())[-1]
    broken = nightly / (last.name + "-z")
    shutil.copytree(last, broken)
    for trace in broken.rglob("*.sqlite"):
        trace.write_bytes(trace.read_bytes()[:8192])
    bad = run_cli("batch", nightly, "-o", tmp_path / "b2", "--no-progress")
    assert bad.returncode == errors.EXIT_BATCH_FAILED, bad.stderr
    gated = run_cli("trend", tmp_path / "b2", "--gate")
    assert gated.returncode == errors.EXIT_INCONCLUSIVE, gated.stderr
    assert "gate: inconclusive (exit 9): 1 case failed and not judged" in gated.stderr and "gate: passed" not in gated.stderr
    assert run_cli("trend", tmp_path / "b2").returncode == 0
