"""New-user trial 53: trend, the CLI and the analysis cache.

1. ``trend --gate`` over 4 captures passed although the last step p50 was 2.5x the others: a jump at the
   latest capture is no level shift (a segment needs 2) and no outlier (nothing after it): it is judged
   against the captures before it (analyzers/trend_latest.py); a noisy but flat series still passes.
2. trend's exit codes for a bad input are analyze's for the same input.
3. trend over captures says where batch wrote, and its md/html links reach the case reports from where
   the output is (relative with -o, absolute on standard output).
4. ``-f md -o x.html``: the same usage error (exit 2, one line naming both) in analyze, compare and trend.
5. A capture copied (its time kept) is the same cache entry: the analysis of the copy names the copy.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import BUNDLES, ROOT, run_cli, samples_generate

SCHEMA = json.loads((ROOT / "reports" / "trend.schema.json").read_text())


# -- 1. the latest capture alone -------------------------------------------------------------------


@pytest.fixture(scope="module")
def four_nights(tmp_path_factory):
    """Four nightly captures (the generator's): ``jump``, eager on the 4th night (the step about 3x), and
    ``flat``, the same nights without the switch; each batch-analyzed once."""
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    gen = samples_generate()
    root = tmp_path_factory.mktemp("four")
    out = {}
    for name, switch in (("jump", 4), ("flat", None)):
        gen.generate_nightly(root / name, nights=4, switch_at=switch, outlier_at=None, seed=5)
        run_batch([str(root / name)], str(root / f"{name}-batch"), runtime=Runtime(jobs=1), progress=False)
        out[name] = (root / name, root / f"{name}-batch")
    return out


def _trend(batch, *extra):
    proc = run_cli("trend", batch, "-f", "json", *extra)
    data = json.loads(proc.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(data, SCHEMA)
    return proc, data


def test_a_jump_at_the_latest_of_four_captures_fails_the_gate(four_nights):
    folder, batch = four_nights["jump"]
    truth = json.loads((folder / "series_truth.json").read_text())
    steps = [night["step_p50_ns"] for night in truth["nights"]]
    assert steps[-1] > 2.0 * max(steps[:-1])  # the generator's truth: the last night's step is the jump
    proc, data = _trend(batch, "--gate")
    assert proc.returncode == 8, proc.stderr
    latest = [item for item in data["gate"]["latest"] if item["metric"] == "step_p50_ms"]
    assert latest and latest[0]["status"] == "regressed" and latest[0]["captures"] == 3
    assert latest[0]["latest"] == truth["nights"][-1]["name"] and latest[0]["p"] < 0.001
    # the levels are the truth's, to the analysis' resolution
    assert latest[0]["value"] == pytest.approx(steps[-1] / 1e6, rel=0.05)
    assert latest[0]["level"] == pytest.approx(np.mean(steps[:-1]) / 1e6, rel=0.05)
    assert data["groups"][0]["latest_regressed"] and data["gate"]["regressed"]
    assert "the latest capture" in data["groups"][0]["verdict"] and " alone:" not in data["groups"][0]["verdict"]
    assert "gate: failed (exit 8)" in proc.stderr and truth["nights"][-1]["name"] in proc.stderr


def test_four_flat_captures_pass_the_gate(four_nights):
    _, batch = four_nights["flat"]
    proc, data = _trend(batch, "--gate")
    assert proc.returncode == 0, proc.stderr
    assert data["gate"]["latest"] == [] and not data["gate"]["regressed"] and "gate: passed" in proc.stderr


def _with_steps(batch: Path, dest: Path, factors) -> Path:
    """The batch folder copied with its step p50s set to the first case's times ``factors``, in capture order."""
    import pandas as pd

    shutil.copytree(batch, dest)
    summary = pd.read_parquet(dest / "summary.parquet")
    order = summary["capture_start_ns"].argsort().to_numpy()
    base = float(summary["step_p50_ms"].iloc[order[0]])
    for rank, row in enumerate(order):
        summary.loc[summary.index[row], "step_p50_ms"] = base * factors[rank]
        summary.loc[summary.index[row], "step_p99_ms"] = base * factors[rank]
    summary.to_parquet(dest / "summary.parquet")
    return dest


@pytest.mark.parametrize(("factors", "code"), [
    ((1.0, 1.08, 0.93, 1.05), 0),  # noisy (+-8%) but flat: the latest is inside the others' spread
    ((1.0, 1.08, 0.93, 0.90), 0),  # noisy, the latest better: never a regression
    ((1.0, 1.01, 0.99, 2.5), 8),  # quiet, the latest 2.5x: a regression of the latest capture
    ((1.0, 1.05, 0.96, 2.5), 8),  # noisy (+-5%), the latest 2.5x: still far beyond that noise
    ((1.0, 1.20, 0.85, 2.5), 9),  # very noisy (+-20%), the latest 2.5x: beyond that spread, not provably its noise
])
def test_the_latest_step_against_its_history(four_nights, tmp_path, factors, code):
    from tracetriage.analyzers.trend_latest import FAIL_P, UNDECIDED_P, t_sf

    _, batch = four_nights["flat"]
    proc, data = _trend(_with_steps(batch, tmp_path / "b", factors), "--gate")
    assert proc.returncode == code, proc.stderr
    # the truth, computed here: the one-sided prediction p of the latest against the three before it
    history = np.array(factors[:3])
    t = (factors[3] - history.mean()) / (history.std(ddof=1) * np.sqrt(1 + 1 / 3))
    p = t_sf(float(t), 2)
    assert (p < FAIL_P) == (code == 8) and (code == 0) == (p >= UNDECIDED_P or factors[3] < history.mean())
    assert ("gate: passed" in proc.stderr) == (code == 0)


def test_an_undecided_latest_capture_is_inconclusive(four_nights, tmp_path):
    """Beyond the history's spread but not far enough beyond its noise (p between 0.001 and 0.01): the gate
    says it could not judge, exit 9, never a pass."""
    from tracetriage.analyzers.trend_latest import FAIL_P, UNDECIDED_P, t_sf

    factors = (1.0, 1.1, 0.9, 2.5)
    history = np.array(factors[:3])
    p = t_sf(float((factors[3] - history.mean()) / (history.std(ddof=1) * np.sqrt(4 / 3))), 2)
    assert FAIL_P <= p < UNDECIDED_P  # the case's premise, from the statistics alone
    _, batch = four_nights["flat"]
    proc, data = _trend(_with_steps(batch, tmp_path / "b", factors), "--gate")
    assert proc.returncode == 9, proc.stderr
    assert "gate: inconclusive (exit 9)" in proc.stderr and "the next capture, or a --baseline, decides" in proc.stderr
    assert any(item["status"] == "undecided" for item in data["gate"]["latest"]) and not data["gate"]["regressed"]
    assert "gate: passed" not in proc.stderr


def test_t_survival_is_scipys():
    stats = pytest.importorskip("scipy.stats")
    from tracetriage.analyzers.trend_latest import t_sf

    for df in (1, 2, 3, 4, 7, 10, 29, 30, 200):
        for t in (-3.0, -0.5, 0.0, 0.7, 2.0, 6.96, 22.3, 80.0):
            assert t_sf(t, df) == pytest.approx(float(stats.t.sf(t, df)), rel=1e-9, abs=1e-15), (t, df)


def test_flat_noise_rarely_fails_the_gate():
    """On flat series of normal noise the latest capture is called regressed about FAIL_P of the time (the
    test's size), whatever the noise, at 4 captures and at 20; 10% noise included."""
    from tracetriage.analyzers.trend_latest import FAIL_P, UNDECIDED_P, judge_latest
    from tracetriage.analyzers.trend_records import Case

    rng = np.random.default_rng(53)
    for n, noise in ((4, 0.02), (4, 0.10), (20, 0.05)):
        cases = [Case(f"n{i}", str(i), None, None, None) for i in range(n)]
        trials, regressed, undecided = 4000, 0, 0
        for _ in range(trials):
            values = rng.normal(10.0, 10.0 * noise, n)
            judged = judge_latest({"step_p50_ms": ("ms", True, values)}, [], cases, float(np.median(values)), 5.0)
            regressed += any(item.status == "regressed" for item in judged)
            undecided += any(item.status == "undecided" for item in judged)
        assert regressed <= 3 * FAIL_P * trials + 3, (n, noise, regressed)
        assert undecided <= 2 * UNDECIDED_P * trials + 5, (n, noise, undecided)


# -- 2. the exit codes of a bad input ----------------------------------------------------------------


def _bad_inputs(folder: Path) -> dict[str, Path]:
    folder.mkdir()
    made = {"empty.sqlite": b"", "text.sqlite": b"hello, not a database\n",
            "truncated.sqlite": (BUNDLES / "eager_decode" / "trace.sqlite").read_bytes()[:20000],
            "random.json": bytes(range(256)) * 8}
    for name, data in made.items():
        (folder / name).write_bytes(data)
    return {name: folder / name for name in made}


def test_trend_exits_as_analyze_does_on_a_bad_input(tmp_path):
    for name, path in _bad_inputs(tmp_path / "bad").items():
        analyzed = run_cli("analyze", path)
        followed = run_cli("trend", path, "--batch-dir", tmp_path / f"b-{name}")
        assert analyzed.returncode == 3, (name, analyzed.stderr)
        assert followed.returncode == analyzed.returncode, (name, followed.stderr)
        assert followed.stderr.count("\n") == 1 and followed.stderr.startswith("tracetriage: error:"), followed.stderr
    # a folder of bad files: the same code, as analyze's on that folder
    analyzed = run_cli("analyze", tmp_path / "bad")
    followed = run_cli("trend", tmp_path / "bad", "--batch-dir", tmp_path / "b-folder")
    assert followed.returncode == analyzed.returncode, (analyzed.stderr, followed.stderr)


# -- 3. where trend's batch wrote, and the links -----------------------------------------------------


def _links(text: str) -> list[str]:
    return [link for link in re.findall(r'(?:href="|\]\()([^")]+report\.html)', text)]


def test_trend_on_captures_says_where_and_links_from_where_the_output_is(tmp_path):
    gen = samples_generate()
    gen.generate_nightly(tmp_path / "nights", nights=4, switch_at=4, outlier_at=None, seed=9)  # a change: md links it
    cache = tmp_path / "cache"
    out = tmp_path / "reports" / "deep" / "trend.html"
    proc = run_cli("trend", tmp_path / "nights", "-o", out, "--cache-dir", cache)
    assert proc.returncode == 0, proc.stderr
    note = [line for line in proc.stderr.splitlines() if "batch analyzed the captures into" in line]
    assert len(note) == 1
    batch = Path(note[0].split(" into ", 1)[1].split(" (", 1)[0])
    assert (batch / "summary.parquet").is_file() and batch.resolve().is_relative_to(cache.resolve())
    links = _links(out.read_text())
    assert links and all(not link.startswith("/") for link in links)  # relative to where -o writes
    assert all((out.parent / link).resolve().is_file() for link in links), links[:2]
    for fmt in ("md", "html"):  # standard output: read from anywhere, so the links are absolute
        shown = run_cli("trend", tmp_path / "nights", "-f", fmt, "--cache-dir", cache)
        assert shown.returncode == 0, shown.stderr
        links = _links(shown.stdout)
        assert links and all(Path(link).is_absolute() and Path(link).is_file() for link in links), links[:2]


# -- 4. --format against -o's extension -------------------------------------------------------------


def test_a_format_and_an_extension_that_disagree_are_one_usage_error(tmp_path):
    bundle = BUNDLES / "eager_decode"
    batch = tmp_path / "batch"
    assert run_cli("batch", bundle, BUNDLES / "graph_decode", "-o", batch).returncode == 0
    commands = {"analyze": ["analyze", bundle], "compare": ["compare", bundle, BUNDLES / "graph_decode"],
                "trend": ["trend", batch]}
    for command, argv in commands.items():
        for fmt, name in (("md", "x.html"), ("html", "x.md"), ("json", "x.txt"), ("text", "x.json")):
            out = tmp_path / command / name
            proc = run_cli(*argv, "-f", fmt, "-o", out)
            assert proc.returncode == 2, (command, fmt, name, proc.stderr)
            assert proc.stderr.count("\n") == 1 and f"--format {fmt}" in proc.stderr and str(out) in proc.stderr
            assert not out.exists()
        agreed = run_cli(*argv, "-f", "md", "-o", tmp_path / command / "ok.md")
        assert agreed.returncode == 0, agreed.stderr
    for fmt, name in (("parquet", "x.html"), ("html", "x.parquet")):
        proc = run_cli("trend", batch, "-f", fmt, "-o", tmp_path / name)
        assert proc.returncode == 2 and f"--format {fmt}" in proc.stderr and not (tmp_path / name).exists()


# -- 5. a copy of a cached capture -------------------------------------------------------------------


def _paths(value, found=None) -> list[str]:
    """Every string of an analysis that names a file (ends in .sqlite), wherever it is."""
    found = [] if found is None else found
    if isinstance(value, dict):
        for item in value.values():
            _paths(item, found)
    elif isinstance(value, list):
        for item in value:
            _paths(item, found)
    elif isinstance(value, str) and ".sqlite" in value:
        found.append(value)
    return found


def test_the_analysis_of_a_copy_names_the_copy(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench

    from tracetriage import cache as cache_mod

    first = tmp_path / "a" / "decode.sqlite"
    first.parent.mkdir()
    bench.build(first, 40_000)  # above the cache's size floor: model and metrics are kept
    assert first.stat().st_size > cache_mod.MIN_CACHED_BYTES
    copy = tmp_path / "b" / "decode.sqlite"
    copy.parent.mkdir()
    shutil.copy2(first, copy)  # its time kept: the same identity, the same cache entries
    cache = tmp_path / "cache"
    one = run_cli("analyze", first, "-f", "json", "--cache-dir", cache)
    two = run_cli("analyze", copy, "-f", "json", "--cache-dir", cache)
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert {device["trace"] for device in b["devices"]} == {str(copy)}
    assert str(first) not in json.dumps(b) and str(first.parent) not in two.stdout
    assert _paths(b) and all(str(copy) in path for path in _paths(b))
    assert a["devices"][0]["gaps"] == b["devices"][0]["gaps"]  # the same capture, the same answer
    assert len(list((cache / "metrics").iterdir())) == 1  # one entry: the copy's analysis reused the first's
    # in the library: the third copy's model and metrics come from the cache, and name the third copy
    from tracetriage import Runtime, analyze, open_case

    third = tmp_path / "c" / "decode.sqlite"
    third.parent.mkdir()
    shutil.copy2(first, third)
    runtime = Runtime(cache=cache_mod.Cache(cache))
    case = open_case([third], runtime=runtime)
    assert isinstance(case.traces[0], cache_mod.CachedTrace) and case.traces[0].path == str(third)
    data = analyze(case, runtime=runtime).data
    assert runtime.cache.hits["metrics"] == 1 and {device["trace"] for device in data["devices"]} == {str(third)}
    assert str(first) not in json.dumps(data, default=str) and str(copy) not in json.dumps(data, default=str)
