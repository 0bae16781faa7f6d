"""Dependency waits across captures: ``idle_dependency_ms`` in compare's metrics and movers, trend's series and the
batch summary's ``idle_dependency_pct`` (analyzers/compare_metrics.py, compare_side.py, summary.py,
tracetriage/batch_tables.py).

On generated captures (samples/gen_dependency.py) the truth is the generator's: the hidden waits it built, in ns,
over its steps. On the real TorchRec rank the figure is measured here from the raw JSON
(test_real_distributed._dependency_ns)."""

import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT, compare_contract, real, run_cli

from tracetriage import analyze, open_case
from tracetriage.analyzers.compare import trend_record
from tracetriage.analyzers.summary import headline_metrics

sys.path.insert(0, str(ROOT / "samples"))
import gen_dependency  # noqa: E402

TREND_SCHEMA = json.loads((ROOT / "reports" / "trend.schema.json").read_text())


def _wait_ms_per_step(truth) -> float:
    return truth["dependency"]["wait_ns"] / truth["steps"] / 1e6


def _metric(result, name):
    return next(metric for metric in result["metrics"] if metric["name"] == name)


def _validate(data, schema):
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(data, schema)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """Three captures of the same program: 10 ms waits a step, the same with another seed, 2 ms waits a step."""
    out = tmp_path_factory.mktemp("dependency_compare")
    cases = {}
    for name, seed, wait_us in (("wait", "a", 10_000), ("wait_again", "b", 10_000), ("fewer", "a", 2_000)):
        truth = gen_dependency.write_bundle(out / name, f"dependency:{seed}", wait_us)
        cases[name] = (out / name, analyze(open_case([out / name])).data, truth)
    return cases


def test_fewer_waits_move_the_dependency_figure_by_what_the_generator_built(bundles):
    before, _, before_truth = bundles["wait"]
    after, _, after_truth = bundles["fewer"]
    result = compare_contract(before, after)  # valid against compare.schema.json (its movers' component enum)
    dependency = _metric(result, "idle_dependency_ms")
    assert dependency["unit"] == "ms/step"
    assert abs(dependency["before"] - _wait_ms_per_step(before_truth)) < 0.001
    assert abs(dependency["after"] - _wait_ms_per_step(after_truth)) < 0.001
    assert dependency["direction"] == "improved" and dependency["significant"]
    # the host's causes did not move: the waits are not theirs
    for cause in ("sync", "memcpy_sync", "launch", "other_cuda", "host", "unknown"):
        assert not _metric(result, f"idle_{cause}_ms")["significant"], cause
    top = result["movers"][0]
    assert top["component"] == "idle_dependency_ms" and top["rank"] == 0 and top["beyond_noise"]
    assert abs(top["change_ms"] - (_wait_ms_per_step(after_truth) - _wait_ms_per_step(before_truth))) < 0.002
    assert "dependency" in result["summary"]


def test_the_same_waits_in_another_capture_are_within_noise(bundles):
    before, _, before_truth = bundles["wait"]
    after, _, after_truth = bundles["wait_again"]
    result = compare_contract(before, after)
    dependency = _metric(result, "idle_dependency_ms")
    assert abs(dependency["after"] - _wait_ms_per_step(after_truth)) < 0.001
    # the two seeds' waits differ by well under the 5%-of-step threshold: no change, as any other idle cause
    assert abs(_wait_ms_per_step(after_truth) - _wait_ms_per_step(before_truth)) < 0.05 * before_truth["step_p50_ns"] / 1e6
    assert dependency["direction"] == "unchanged" and not dependency["significant"]
    assert not any(mover["component"] == "idle_dependency_ms" for mover in result["movers"])


def test_the_text_and_html_name_the_dependency_row(bundles):
    (before, *_), (after, *_) = bundles["wait"], bundles["fewer"]
    text = run_cli("compare", before, after)
    assert text.returncode == 0, text.stderr
    row = next(line for line in text.stdout.splitlines() if line.strip().startswith("idle: dependency, work queued"))
    assert "improved" in row and row.index("->") == next(
        line for line in text.stdout.splitlines() if line.strip().startswith("GPU idle (mean per step)")).index("->")
    html = run_cli("compare", before, after, "-f", "html")
    assert html.returncode == 0 and "idle: dependency, work queued" in html.stdout


def test_batch_summary_and_trend_record_carry_the_dependency_figures(bundles):
    _, data, truth = bundles["wait"]
    metrics = headline_metrics(data)
    assert abs(metrics["idle_dependency_pct"] - truth["dependency"]["wait_pct"]) < 0.001
    assert abs(trend_record(data)["figures"]["idle_dependency_ms"] - _wait_ms_per_step(truth)) < 0.001


def test_a_capture_without_waits_reads_zero_not_missing(tmp_path):
    truth = gen_dependency.write_bundle(tmp_path / "none", "dependency:none", 0)
    data = analyze(open_case([tmp_path / "none"])).data
    assert truth["dependency"]["wait_ns"] == 0 and "dependency" not in data["devices"][0]["gaps"]["by_cause"]
    assert headline_metrics(data)["idle_dependency_pct"] == 0.0
    assert trend_record(data)["figures"]["idle_dependency_ms"] == 0.0


def test_batch_and_trend_follow_the_waits(tmp_path):
    """Eight nights (by name): four with 10 ms waits a step, then four with 2 ms. batch's summary carries each
    night's idle_dependency_pct; trend finds one improving level shift of idle_dependency_ms at night 5."""
    archive, truths = tmp_path / "nights", {}
    for night in range(1, 9):
        name = f"night{night:02d}"
        truths[name] = gen_dependency.write_bundle(archive / name, f"dependency:{night}", 10_000 if night <= 4 else 2_000)
    batch = tmp_path / "batch"
    proc = run_cli("batch", archive, "-o", batch)
    assert proc.returncode == 0, proc.stderr
    import pandas as pd

    summary = pd.read_parquet(batch / "summary.parquet")
    for path, value, per_step in zip(summary["path"], summary["idle_dependency_pct"], summary["idle_dependency_ms"]):
        truth = truths[Path(path).parent.name]  # the case is the bundle's trace.sqlite
        assert abs(value - truth["dependency"]["wait_pct"]) < 0.001 and abs(per_step - _wait_ms_per_step(truth)) < 0.001
    proc = run_cli("trend", batch, "--order-by", "name", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    trend = json.loads(proc.stdout)
    _validate(trend, TREND_SCHEMA)
    shifts = [change for change in trend["changes"] if change["metric"] == "idle_dependency_ms"]
    assert len(shifts) == 1 and shifts[0]["kind"] == "level_shift" and shifts[0]["direction"] == "improved"
    assert shifts[0]["first_bad"] == "night05" and shifts[0]["last_good"] == "night04"
    after = sorted(_wait_ms_per_step(truths[f"night{n:02d}"]) for n in range(5, 9))
    assert abs(shifts[0]["after"]["level"] - (after[1] + after[2]) / 2) < 0.001


def test_real_torchrec_rank_reads_its_dependency_wait_per_step():
    """The real 16-rank TorchRec capture's rank 0 against itself: the dependency figure is the raw JSON's hidden
    waits over its 5 steps, unchanged; batch's summary share is the same waits over the window."""
    from test_real_distributed import _dependency_ns, _events

    path = real("kineto", "hta_torchrec_16rank_train_rank0.json.gz")
    data = analyze(open_case([path])).data
    lo, hi = data["window"]["start_ns"], data["window"]["end_ns"]
    waited = _dependency_ns(_events(path), lo, hi)
    steps = data["processes"][0]["steps"]["count"]
    result = compare_contract(path, path)
    dependency = _metric(result, "idle_dependency_ms")
    assert steps == 5 and abs(dependency["before"] - waited / steps / 1e6) < 0.05  # ~131 ms of window idle per step (216 ms p50)
    assert dependency["direction"] == "unchanged" and dependency["change"] == 0
    assert abs(headline_metrics(data)["idle_dependency_pct"] - 100.0 * waited / (hi - lo)) < 0.05
