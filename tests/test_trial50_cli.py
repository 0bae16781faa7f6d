"""New-user trial 50, CLI consistency: trend names a failed case once, in the form its other cases are
named (not its name and then batch's absolute path), and trend --gate writes its gate line where compare
--gate writes its own: stderr (or the -o note), the report alone on stdout (``-f json | jq`` works)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import BUNDLES, run_cli


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """Three captures and a truncated one, batched by their absolute folder: a batch folder with a failed row."""
    from tracetriage.batches import run_batch
    from tracetriage.runtime import Runtime

    root = tmp_path_factory.mktemp("trial50")
    for name in ("night-1", "night-2", "night-3"):
        shutil.copytree(BUNDLES / "graph_decode", root / "nightly" / name)
    data = (BUNDLES / "eager_decode" / "trace.sqlite").read_bytes()
    (root / "nightly" / "night-4").mkdir()
    (root / "nightly" / "night-4" / "trace.sqlite").write_bytes(data[:5000])
    run_batch([str((root / "nightly").resolve())], str(root / "b"), runtime=Runtime(jobs=1), progress=False)
    return root


def test_a_failed_case_is_named_once_as_the_others_are(archive):
    text = run_cli("trend", archive / "b", "--no-cache").stdout
    failed = [line for line in text.splitlines() if line.startswith("failed: ")]
    assert failed == [failed[0]] and failed[0].startswith("failed: night-4: not a supported input: "), failed
    assert str(archive) not in failed[0]  # batch recorded the absolute path; the other cases are named below it
    assert "night-1" in text and str(archive / "nightly") not in text.replace(str(archive / "b"), "")
    data = json.loads(run_cli("trend", archive / "b", "-f", "json", "--no-cache").stdout)
    assert [entry["name"] for entry in data["failed"]] == ["night-4"]
    assert data["failed"][0]["error"].startswith("not a supported input: ")
    md = run_cli("trend", archive / "b", "-f", "md", "--no-cache").stdout
    assert "failed: night-4: not a supported input" in md.replace("\\", "") and str(archive / "nightly") not in md


def test_trend_gate_line_goes_where_compare_puts_it(archive, tmp_path):
    gated = run_cli("trend", archive / "b", "--gate", "-f", "json", "--no-cache")
    assert gated.returncode == 9  # three captures: too few to tell, the gate judged nothing
    json.loads(gated.stdout)  # the report alone on stdout
    assert gated.stderr.count("tracetriage: gate: inconclusive (exit 9): ") == 1, gated.stderr
    text = run_cli("trend", archive / "b", "--gate", "--no-cache")
    assert "gate:" not in text.stdout and text.stderr.count("tracetriage: gate: inconclusive (exit 9): ") == 1
    assert text.stdout == run_cli("trend", archive / "b", "--no-cache").stdout  # the report, with or without --gate
    page = tmp_path / "t.html"
    written = run_cli("trend", archive / "b", "--gate", "-o", page, "--no-cache")
    assert written.stderr.count("gate: inconclusive") == 1 and "wrote" in written.stderr  # in the -o note
    plain = run_cli("trend", archive / "b", "--no-cache")
    assert "gate:" not in plain.stderr + plain.stdout
    nights = archive / "nightly"
    compared = run_cli("compare", nights / "night-1", nights / "night-2", "--gate", "-f", "json", "--no-cache")
    json.loads(compared.stdout)
    assert compared.stderr.count("tracetriage: gate: ") == 1  # the same place, the same prefix
