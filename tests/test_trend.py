"""trend (tracetriage.trend/1): an archive over time from batch's tables.

The nightly archives come from the project's generator (samples/generate.py --nightly): each
night its own seed, the capture time in the export's session table; the ground truth (which
nights run eager, which carries the host stall) is the generator's own series_truth.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import BUNDLES, run_cli, samples_generate

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "reports" / "trend.schema.json").read_text())




@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    """Two nightly archives (with and without the switch to eager) and their batch folders."""
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    gen = samples_generate()
    root = tmp_path_factory.mktemp("nightly")
    out = {}
    for name, switch in (("switch", 13), ("steady", None)):
        gen.generate_nightly(root / name, nights=20, switch_at=switch, outlier_at=6, seed=11)
        run_batch([str(root / name)], str(root / f"{name}-batch"), runtime=Runtime(jobs=2), progress=False)
        out[name] = (root / name, root / f"{name}-batch")
    return out


def trend_json(batch_dir, *extra, code=0):
    proc = run_cli("trend", batch_dir, "-f", "json", *extra)
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr
    data = json.loads(proc.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(data, SCHEMA)
    return data


def night_name(truth, night):
    return next(n["name"] for n in truth["nights"] if n["night"] == night)


def test_switch_to_eager_is_one_regression_with_its_first_bad_night(archives):
    folder, batch = archives["switch"]
    truth = json.loads((folder / "series_truth.json").read_text())
    t = trend_json(batch, "--gate", code=8)
    assert t["order"] == "capture time" and len(t["groups"]) == 1
    g = t["groups"][0]
    assert [c["name"] for c in g["cases"]] == [n["name"] for n in truth["nights"]]  # ordered by capture time
    assert g["latest_regressed"] and t["gate"]["regressed"]
    step = [c for c in t["changes"] if c["metric"] == "step_p50_ms"]
    shifts = [c for c in step if c["kind"] == "level_shift"]
    assert len(shifts) == 1
    s = shifts[0]
    first_eager = truth["switch_at"]
    assert s["first_bad"] == night_name(truth, first_eager) and s["last_good"] == night_name(truth, first_eager - 1)
    assert s["direction"] == "regressed"
    eager = [n["step_p50_ns"] / 1e6 for n in truth["nights"] if n["eager"]]
    graph = [n["step_p50_ns"] / 1e6 for n in truth["nights"] if not n["eager"] and not n["outlier"]]
    assert abs(s["after"]["level"] - np.median(eager)) < 0.02 * np.median(eager)
    assert abs(s["before"]["level"] - np.median(graph)) < 0.02 * np.median(graph)
    assert {"id": "launch_bound", "status": "new"}.items() <= next(f for f in s["findings"] if f["id"] == "launch_bound").items()
    outliers = [c for c in step if c["kind"] == "outlier"]
    assert [c["first_bad"] for c in outliers] == [night_name(truth, truth["outlier_at"])]
    assert "launch_bound new" in g["verdict"] and night_name(truth, first_eager) in g["verdict"]
    # a launch_bound series appears at the switch, with its ms per step
    lb = [c for c in t["changes"] if c["metric"] == "finding:launch_bound" and c["kind"] == "level_shift"]
    assert lb and lb[0]["first_bad"] == night_name(truth, first_eager)


def test_the_switch_to_eager_judges_each_finding_on_its_own_quantity(archives):
    """Trial #31/#32 (issue 38 item 5): at the switch to eager the sync is the same (one per step, the same
    wait), so host_sync_per_step is not 'better' because launch_bound now takes the gaps after it; the
    kernels named there are the eager kernels that appeared (grew), then the CUDA graph that went."""
    folder, batch = archives["switch"]
    truth = json.loads((folder / "series_truth.json").read_text())
    t = trend_json(batch, "--gate", code=8)
    first_bad = night_name(truth, truth["switch_at"])
    at_switch = [c for c in t["changes"] if c["first_bad"] == first_bad and c["kind"] == "level_shift"]
    assert not [c for c in at_switch if c["metric"] == "finding:host_sync_per_step"]
    step = next(c for c in at_switch if c["metric"] == "step_p50_ms")
    assert not [f for f in step["findings"] if f["id"] == "host_sync_per_step"]  # persists: left out
    assert "host_sync_per_step better" not in t["groups"][0]["verdict"]
    growth = [(k["after_ms_per_step"] or 0.0) - (k["before_ms_per_step"] or 0.0) for k in step["kernels"]]
    assert growth and growth[0] > 0 and step["kernels"][0]["name"] != "graph 1"
    assert any(k["name"] == "graph 1" for k in step["kernels"]) and growth == sorted(growth, key=lambda g: (g < 0, -abs(g)))
    eager_names = {n for n in ("gemv_kernel", "rms_norm_kernel", "paged_attention_v1_kernel")}
    assert eager_names & {k["name"] for k in step["kernels"]}
    text = run_cli("trend", batch).stdout
    assert "kernels that moved: grew " in text and "; shrank graph 1 -" in text


def test_the_same_series_without_the_switch_has_no_regression(archives):
    folder, batch = archives["steady"]
    truth = json.loads((folder / "series_truth.json").read_text())
    t = trend_json(batch, "--gate", code=0)
    steps = [n["step_p50_ns"] for n in truth["nights"] if not n["outlier"]]
    assert max(steps) != min(steps)  # every night differs by noise ...
    assert not [c for c in t["changes"] if c["kind"] == "level_shift" and not c["metric"].startswith("kernel:")]
    assert not t["gate"]["regressed"]  # ... and none of it is a change
    assert [c["first_bad"] for c in t["changes"] if c["metric"] == "step_p50_ms"] == [night_name(truth, truth["outlier_at"])]


def test_baseline_pins_the_reference(archives):
    folder, batch = archives["switch"]
    truth = json.loads((folder / "series_truth.json").read_text())
    trend_json(batch, "--gate", "--baseline", night_name(truth, 2), code=8)
    trend_json(batch, "--gate", "--baseline", night_name(truth, 15), code=0)  # eager vs eager: no regression


def test_two_workloads_are_two_groups(archives, tmp_path):
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    folder, _ = archives["switch"]
    mixed = tmp_path / "mixed"
    for night in sorted(folder.glob("nightly-*"))[:6]:
        shutil.copytree(night, mixed / night.name)
    gen = samples_generate()
    for seed in (3, 4, 5):
        gen.generate(mixed / f"tp8-seed{seed}", only=["tp8_cross_island"], seed=seed)
    run_batch([str(mixed)], str(tmp_path / "b"), runtime=Runtime(jobs=2), progress=False)
    t = trend_json(tmp_path / "b")
    keys = sorted(g["key"] for g in t["groups"])
    assert len(keys) == 2 and any("8x" in k and "world size 8" in k for k in keys) and any("1x" in k for k in keys)
    for g in t["groups"]:
        eight = "world size 8" in g["key"]
        assert all(("tp8" in c["name"]) == eight for c in g["cases"])
        assert len(g["cases"]) == (3 if eight else 6)


def test_formats_and_the_report(archives, tmp_path):
    _, batch = archives["switch"]
    for fmt in ("text", "md"):
        out = run_cli("trend", batch, "-f", fmt)
        assert out.returncode == 0 and "launch_bound" in out.stdout.replace("\\_", "_")
    html = tmp_path / "trend.html"
    assert run_cli("trend", batch, "-o", html).returncode == 0
    text = html.read_text()
    assert "<svg" in text and text.count('href="') >= 20 and "<script" not in text
    from tracetriage import __version__

    assert f"tracetriage {__version__} · schema tracetriage.trend/1" in text  # the footer names the version, as analyze's does
    assert "outlier, regressed" in text and "level shift, regressed" in text  # the charts' marks are explained
    pq = tmp_path / "series.parquet"
    assert run_cli("trend", batch, "-o", pq).returncode == 0
    import pandas as pd

    df = pd.read_parquet(pq)
    assert set(df.columns) == {"group", "case", "time", "label", "metric", "unit", "value"}
    assert (df[df["metric"] == "step_p50_ms"]["case"].nunique()) == 20
    assert run_cli("trend", batch, "-f", "parquet").returncode == 2  # binary: needs -o


def test_the_kernels_that_moved_at_a_capture_are_written_once(archives):
    """A level shift moves several series at one capture, with the same kernels: the text writes them at
    the first change there and points to it from the others; the JSON keeps them on every change."""
    _, batch = archives["switch"]
    data = json.loads(run_cli("trend", batch, "-f", "json").stdout)
    with_kernels = [change for change in data["changes"] if change["kernels"]]
    assert len(with_kernels) >= 2
    lines = [line for line in run_cli("trend", batch).stdout.splitlines() if "kernels that moved: " in line]
    said = [line.split("kernels that moved: ")[1].split("; ")[0] for line in lines]
    firsts = {change["first_bad"] for change in with_kernels}
    assert sum(not text.startswith("as above, at ") for text in said) <= len(firsts) < len(said)
    for text in said:
        assert not text.startswith("as above, at ") or text.removeprefix("as above, at ") in firsts


def test_trend_runs_batch_first_on_captures(tmp_path):
    gen = samples_generate()
    gen.generate_nightly(tmp_path / "a", nights=5, switch_at=None, outlier_at=None, seed=2)
    proc = run_cli("trend", tmp_path / "a", "--batch-dir", tmp_path / "b", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "b" / "summary.parquet").exists() and len(json.loads(proc.stdout)["groups"]) == 1


def test_order_by_name_without_capture_times(tmp_path):
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    for i, name in enumerate(["run-10", "run-2", "run-1"]):
        shutil.copytree(BUNDLES / "graph_decode", tmp_path / "c" / name)
    run_batch([str(tmp_path / "c")], str(tmp_path / "b"), runtime=Runtime(jobs=1), progress=False)
    t = trend_json(tmp_path / "b")
    assert t["order"].startswith("case name")
    assert [c["name"].split("/")[0] for c in t["groups"][0]["cases"]] == ["run-1", "run-2", "run-10"]


def test_a_lone_workload_is_listed_not_mixed_in(tmp_path):
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    shutil.copytree(BUNDLES / "graph_decode", tmp_path / "c" / "a")
    shutil.copytree(BUNDLES / "graph_decode", tmp_path / "c" / "b")
    shutil.copytree(BUNDLES / "tp4_island", tmp_path / "c" / "tp4")
    run_batch([str(tmp_path / "c")], str(tmp_path / "b"), runtime=Runtime(jobs=1), progress=False)
    t = trend_json(tmp_path / "b")
    assert len(t["groups"]) == 1 and len(t["ungrouped"]) == 1 and "tp4" in t["ungrouped"][0]["cases"][0]["name"]


def test_captures_with_no_time_and_label_names_are_no_series(tmp_path):
    """Trial item 41: the sample bundles (no capture time; names eager_decode, graph_decode, ... that
    differ in their words) were one series ordered by name, with outliers and regressions called
    between experiments. Without a time order they are no series (listed, with why); names that
    differ only in a number or a letter are a sequence; --order-by name follows the names when asked."""
    from tracetriage.analyzers.trend_cases import names_in_sequence
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    for name in ("eager_decode", "graph_decode", "healthy", "prefill_stall"):
        shutil.copytree(BUNDLES / name, tmp_path / "c" / name)
    run_batch([str(tmp_path / "c")], str(tmp_path / "b"), runtime=Runtime(jobs=1), progress=False)
    t = trend_json(tmp_path / "b")
    assert t["groups"] == [] and t["changes"] == [] and t["order"].startswith("none: no capture time recorded")
    (entry,) = t["ungrouped"]
    assert len(entry["cases"]) == 4 and entry["reason"].startswith("no order in time")
    asked = trend_json(tmp_path / "b", "--order-by", "name")
    assert len(asked["groups"]) == 1 and len(asked["groups"][0]["cases"]) == 4
    assert names_in_sequence(["night_01", "night_02", "night_10"]) and names_in_sequence(["a/2026-11-13", "b/2026-11-14"])
    assert names_in_sequence(["run-9", "run-10"]) and names_in_sequence(["a", "b", "c"])
    assert not names_in_sequence(["eager_decode", "graph_decode"]) and not names_in_sequence(["tp4", "tp8_cross"])


def test_bad_batch_folder_is_one_line(tmp_path):
    (tmp_path / "summary.parquet").write_text("not parquet")
    proc = run_cli("trend", tmp_path)
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1 and "batch tables" in proc.stderr


# -- the change detection on its own, series with known structure


@pytest.mark.parametrize("seed", range(8))
def test_noise_alone_is_no_change(seed):
    from tracetriage.analyzers.trend import find_changes

    x = np.random.default_rng(seed).normal(10.0, 0.15, 40)  # 1.5% noise, under the 5% practical minimum
    outliers, shifts = find_changes(x, "ms", 10.0, 5.0)
    assert shifts == [] and outliers == []


@pytest.mark.parametrize("at", [3, 10, 25])
def test_a_step_is_found_where_it_is(at):
    from tracetriage.analyzers.trend import find_changes

    rng = np.random.default_rng(at)
    x = np.r_[rng.normal(10, 0.1, at), rng.normal(12, 0.1, 30 - at)]
    outliers, shifts = find_changes(x, "ms", 10.0, 5.0)
    assert [s.index for s in shifts] == [at] and shifts[0].last_index == at - 1 and outliers == []


def test_a_spike_is_an_outlier_not_a_shift():
    from tracetriage.analyzers.trend import find_changes

    x = np.random.default_rng(1).normal(10, 0.1, 20)
    x[7] = 16
    outliers, shifts = find_changes(x, "ms", 10.0, 5.0)
    assert [o.index for o in outliers] == [7] and shifts == []


def test_a_small_real_shift_under_the_practical_minimum_is_not_reported():
    from tracetriage.analyzers.trend import find_changes

    x = np.r_[np.full(10, 10.0), np.full(10, 10.3)] + np.random.default_rng(0).normal(0, 0.01, 20)  # 3% < 5%
    assert find_changes(x, "ms", 10.0, 5.0)[1] == []


def test_trend_page_in_chromium(archives, tmp_path):
    from conftest import open_in_chromium

    _, batch = archives["switch"]
    page = tmp_path / "trend.html"
    assert run_cli("trend", batch, "-o", page).returncode == 0
    text, errors, requests = open_in_chromium(page, "trend_nightly.png")
    assert errors == [] and requests == [page.resolve().as_uri()]
    assert "launch_bound new" in text and "level_shift" in text and "outlier" in text


def test_damaged_batch_tables_never_crash(archives, tmp_path):
    """A batch folder is input like any other: wrong column types and a damaged case file
    leave values missing (and a change without its causes), never an internal error."""
    import pandas as pd

    _, batch = archives["switch"]
    copy = tmp_path / "b"
    shutil.copytree(batch, copy)
    s = pd.read_parquet(copy / "summary.parquet")
    s["step_p50_ms"] = s["step_p50_ms"].astype(str)
    s.loc[3, "step_p50_ms"] = "abc"
    s["world_size"] = s["world_size"].astype(str)
    s.to_parquet(copy / "summary.parquet")
    (copy / s.loc[5, "report_json"]).write_text('{"schema": "tracetriage.analysis/1", "devices": 5}')
    t = trend_json(copy)
    assert len(t["groups"]) == 1 and any(c["kind"] == "level_shift" for c in t["changes"])


def test_trend_refuses_what_it_cannot_judge(archives, tmp_path):
    _, batch = archives["switch"]
    missing = run_cli("trend", tmp_path / "nothing-here")
    assert missing.returncode == 3 and "no such file" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = run_cli("trend", tmp_path / "empty", "--batch-dir", tmp_path / "eb")
    assert empty.returncode == 4 and "no capture found" in empty.stderr
    assert not any((tmp_path / "empty").iterdir())  # nothing written beside the input
    assert run_cli("trend", batch, batch).returncode == 2
    unknown = run_cli("trend", batch, "--baseline", "no-such-night", "--gate")
    assert unknown.returncode == 2 and "no case of that name" in unknown.stderr
    assert run_cli("trend", batch, "--group-by", "99").returncode == 2
    no_tag = run_cli("trend", batch, "--group-by", "tag:no-such-file")  # not one silent "(no tag)" group
    assert no_tag.returncode == 2 and "no case folder holds a file 'no-such-file'" in no_tag.stderr
    assert run_cli("trend", batch, "--threshold", "0").returncode == 2


def test_too_few_captures_are_said_to_be_too_few(tmp_path):
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    for name in ("a", "b", "c"):
        shutil.copytree(BUNDLES / "graph_decode", tmp_path / "c" / name)
    run_batch([str(tmp_path / "c")], str(tmp_path / "b"), runtime=Runtime(jobs=1), progress=False)
    t = trend_json(tmp_path / "b")
    assert "too few" in t["groups"][0]["verdict"] and t["changes"] == []
    # the gate judges nothing it says it cannot tell: inconclusive (9), not passed (new-user trial 49 item 3)
    gated = run_cli("trend", tmp_path / "b", "--gate")
    assert gated.returncode == 9, (gated.returncode, gated.stdout[-300:])
    assert "gate: inconclusive (exit 9): no group has a series to judge (each has too few captures to tell" in gated.stderr
    assert "gate: passed" not in gated.stderr + gated.stdout
    assert trend_json(tmp_path / "b", "--gate", code=9)["groups"][0]["cases"]


@pytest.fixture(scope="module")
def branches(tmp_path_factory):
    """The new-user trial's archive: <root>/{main,dev}/nightly-*/trace.sqlite, main steady,
    dev eager (the regression) from its 4th night; dev's nights renamed so every case name
    is unique."""
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    gen = samples_generate()
    root = tmp_path_factory.mktemp("branches")
    gen.generate_nightly(root / "ng" / "main", nights=5, switch_at=None, outlier_at=None, seed=1)
    gen.generate_nightly(root / "ng" / "dev", nights=6, switch_at=4, outlier_at=None, seed=2)
    for night in sorted((root / "ng" / "dev").glob("nightly-*")):
        night.rename(night.with_name("dev-" + night.name))
    run_batch([str(root / "ng")], str(root / "b"), runtime=Runtime(jobs=2), progress=False)
    return root


def test_group_by_counts_from_the_case(branches):
    """--group-by -2 is the folder holding the case, as its help says (new-user trial: -2 was
    the case folder itself, "0 group(s)" and every case "not in a series", no warning)."""
    from tracetriage.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    help_text = next(a.help for a in sub.choices["trend"]._actions if a.dest == "group_by")
    assert "-2: the folder holding the case" in help_text
    t = trend_json(branches / "b", "--group-by", "-2")
    assert sorted(g["key"].rsplit(", ", 1)[1] for g in t["groups"]) == ["dev", "main"] and t["ungrouped"] == []
    for g in t["groups"]:
        branch = g["key"].rsplit(", ", 1)[1]
        assert len(g["cases"]) == (6 if branch == "dev" else 5)
        assert all(c["name"].startswith(f"{branch}/") for c in g["cases"])
    own = run_cli("trend", branches / "b", "--group-by", "-1")
    assert own.returncode == 2 and "-2 is the folder holding the case" in own.stderr
    case = next((branches / "ng" / "main").glob("nightly-*"))
    alone = run_cli("trend", branches / "b", "--group-by", str(len(case.parts) - 1))  # the case's own name, from the root
    assert alone.returncode == 2 and "leaves every case alone in its group" in alone.stderr
    assert "it picked 'dev-nightly-2026-" in alone.stderr and "-2 is the folder holding the case" in alone.stderr
    for i, night in enumerate(sorted((branches / "ng").glob("*/*nightly-*"))):
        (night / "build-id").write_text(f"build {i}\n")
    tagged = run_cli("trend", branches / "b", "--group-by", "tag:build-id")
    assert tagged.returncode == 2 and "it picked 'build 0'" in tagged.stderr


def test_gate_says_its_result_and_baseline_needs_the_gate(branches):
    """--baseline without --gate is refused (it would be ignored); with --gate the output says
    passed or failed and against which baseline; without --gate a regressed latest capture is
    a finding of the trend, not a gate line."""
    b = branches / "b"
    dev = sorted(p.name for p in (branches / "ng" / "dev").glob("dev-nightly-*"))
    plain = run_cli("trend", b, "--group-by", "-2")
    assert plain.returncode == 0 and "gate" not in plain.stdout
    assert "the latest capture is in a regressed segment in: " in plain.stdout
    failed = run_cli("trend", b, "--group-by", "-2", "--gate")  # the gate line on stderr, as compare --gate's
    assert failed.returncode == 8
    assert "tracetriage: gate: failed (exit 8): the latest capture is in a regressed segment" in failed.stderr
    assert "gate:" not in failed.stdout
    alone = run_cli("trend", b, "--group-by", "-2", "--baseline", f"dev/{dev[0]}")
    assert alone.returncode == 2 and "add --gate" in alone.stderr and not alone.stdout
    worse = run_cli("trend", b, "--group-by", "-2", "--gate", "--baseline", f"dev/{dev[0]}")
    assert worse.returncode == 8 and f"gate: failed (exit 8): against baseline dev/{dev[0]}" in worse.stderr
    assert "1 group without" in worse.stderr  # main has no such capture: not judged, and said so
    same = run_cli("trend", b, "--group-by", "-2", "--gate", "--baseline", f"dev/{dev[-2]}", "-f", "md")
    assert same.returncode == 0 and f"gate: passed against baseline dev/{dev[-2]}" in same.stderr
    page = branches / "gate.html"
    written = run_cli("trend", b, "--group-by", "-2", "--gate", "-o", page)
    assert written.returncode == 8 and "; gate: failed" in written.stderr  # in the -o note, as compare's


def test_chart_titles_use_the_table_labels(branches, tmp_path):
    """The charts name a series as the table does (reports/trend.py label), never its raw key."""
    page = tmp_path / "t.html"
    assert run_cli("trend", branches / "b", "--group-by", "-2", "-o", page).returncode == 0
    text = page.read_text()
    assert "step p50 (ms)" in text and "step_p50_ms (ms)" not in text
    assert "finding:" not in text and "launch_bound (ms per step of the time it is about)" in text


def test_levels_are_written_as_every_ms_figure_is():
    """A level in ms reads as compare's ms figures do (wording.ms_text: four significant figures, thousands
    separated), never a raw ``4660.128 ms`` (trial): in the table and in the verdict line."""
    from tracetriage.analyzers.trend_records import Change, ChangeFinding, Level
    from tracetriage.analyzers.trend_verdict import verdict
    from tracetriage.reports.trend_view import level
    from tracetriage.wording import ms_text

    for value in (4660.128, 612.75, 70.347, 0.6064):
        assert level(value, "ms") == level(value, "ms/step") == ms_text(value)
    assert level(4660.128, "ms") == "4,660 ms" and level(0.6064, "ms") == "0.606 ms"
    change = Change("g", "step_p50_ms", "ms", "level_shift", "regressed", "night-4", "night-5", None,
                    Level(3728.1, 1.0, 5), Level(4660.128, 1.0, 1), 25.0,
                    findings=(ChangeFinding("launch_bound", "new", 0.0, 1234.5678),))
    line = verdict("g", [change], [{"name": f"night-{i}"} for i in range(6)])
    assert "(3,728 -> 4,660 ms)" in line and "launch_bound new at 1,235 ms/step" in line, line


def test_finding_columns_equal_the_pivot_tables_they_replace():
    """trend's finding series (analyzers/trend._finding_columns, one pass over the rows) are what the two
    pivot tables it replaced gave: the first value a case reported (NaN rows skipped), the cells a case
    did not report, only findings with some value, in sorted order; rows without an id in no column; on
    random tables with duplicate, missing and NaN rows."""
    import pandas as pd

    from tracetriage.analyzers.trend import _finding_columns

    rng = np.random.default_rng(36)
    for _ in range(150):
        cases = [f"c{i}" for i in range(int(rng.integers(1, 12)))]
        rows = int(rng.integers(0, 40))
        f = pd.DataFrame({"case_id": rng.choice(cases, rows),
                          "id": [None if draw < 0.1 else f"f{int(draw * 6)}" for draw in rng.random(rows)],
                          "ms_per_step": np.where(rng.random(rows) < 0.3, np.nan, rng.normal(5, 2, rows))})
        ids = [case for case in cases if rng.random() < 0.8] or cases[:1]
        f = f[f["case_id"].isin(ids)]
        got = _finding_columns(f["case_id"].tolist(), [None if fid is None or fid != fid else fid for fid in f["id"]],
                               f["ms_per_step"].to_numpy(np.float64), ids)
        if not len(f):
            assert got == {}
            continue
        table = f.pivot_table(index="case_id", columns="id", values="ms_per_step", aggfunc="first").reindex(ids)
        present = f.assign(one=1).pivot_table(index="case_id", columns="id", values="one", aggfunc="first").reindex(ids)
        assert list(got) == sorted(table.columns)
        for fid, (values, absent) in got.items():
            assert values.tobytes() == table[fid].to_numpy(np.float64, na_value=np.nan).tobytes()
            assert (absent == present[fid].isna().to_numpy()).all()


def test_neighbour_medians_are_numpys_nanmedian_bit_for_bit():
    """The outlier search's median of each point's neighbours (trend_changes._row_nanmedian) is
    ``np.nanmedian(axis=1)`` as bytes: rows of 1-6 values with NaN (none finite too), ties, whole
    numbers, signed zeros (numpy's median of -0.0 and -0.0 is +0.0), magnitudes from 1e-3 to 1e6."""
    import warnings

    from tracetriage.analyzers.trend_changes import _row_nanmedian

    rng = np.random.default_rng(36)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's "All-NaN slice encountered"
        for trial in range(600):
            rows = rng.normal(0, 10 ** rng.uniform(-3, 6), (int(rng.integers(1, 400)), int(rng.integers(1, 7))))
            if trial % 3 == 0:
                rows = np.round(rows)  # ties and -0.0
            rows[rng.random(rows.shape) < rng.uniform(0, 0.6)] = np.nan
            assert _row_nanmedian(rows).tobytes() == np.nanmedian(rows, axis=1).tobytes(), rows
