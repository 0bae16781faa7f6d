"""What a newcomer meets outside the single report (issue 26): batch's index and summary,
the CLI's output paths and format detection, the Python API's validation."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest

from conftest import BUNDLES, run_cli
from tracetriage.batch import run_batch


@pytest.fixture(scope="module")
def batch_out(tmp_path_factory):
    root = tmp_path_factory.mktemp("newcomer")
    work = root / "work"
    for name in ("tp8_cross_island", "serving_at_capacity"):
        shutil.copytree(BUNDLES / name, work / name)
    (work / "broken.sqlite").write_text("this is not a database\n")
    out = root / "out"
    return run_batch([str(work)], str(out), jobs=1, progress=False), out


def test_summary_counts_add_up_and_failed_is_not_analyzed(batch_out):
    result, out = batch_out
    assert len(result.records) == 3
    assert result.failed == 1 and result.analyzed == 2 and result.reused == 0
    assert result.analyzed + result.reused + result.failed + result.not_run == len(result.records)
    again = run_batch([str(out.parent / "work")], str(out), jobs=1, progress=False)
    assert (again.analyzed, again.reused, again.failed) == (0, 2, 1)


def test_steps_is_one_rank_steps_not_the_sum(batch_out):
    _, out = batch_out
    s = pd.read_parquet(out / "summary.parquet")
    row = s[s["path"].str.contains("tp8_cross_island")].iloc[0]
    import json

    data = json.loads((out / row["report_json"]).read_text())
    counts = [p["steps"]["count"] for p in data["processes"] if p["steps"]["count"]]
    assert len(counts) == 8
    assert row["steps"] == sorted(counts)[len(counts) // 2] and row["steps"] < sum(counts)


def test_index_names_each_finding_once_and_never_sorts_on_mixed_impacts(batch_out):
    _, out = batch_out
    index = (out / "index.html").read_text()
    assert not re.search(r"(\w+)</span> \[\1\]", index)  # "gpu_starved [gpu_starved]"
    f = pd.read_parquet(out / "findings.parquet")
    tops = f[f["rank"] == 1]
    assert len(set(tops["impact_denominator"])) > 1  # a % of the window and a % of TTFT in one batch
    for _, t in tops.iterrows():
        if t["id"] != "healthy":
            assert f"{t['impact_pct']:.1f}% of the {t['impact_denominator']}" in index
    assert '<th data-type="num">impact %</th>' not in index
    # failed first, then by severity: never by a number whose denominators differ
    rows = re.findall(r'<tr class="(\w+)">', index)
    assert rows[0] == "failed"
