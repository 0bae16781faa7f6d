"""Issue 25 item 1: unrelated captures are not merged into one verdict. analyze applies the
rule batch groups files by (tracetriage/runs.py) to every combination of traces it is given."""

import gzip
import json
import shutil
from pathlib import Path

from conftest import BUNDLES, ROOT, real, run_cli
from conftest import add_nsys_session as _session

H200 = ROOT / "samples" / "h200"


def _refused(p):
    assert p.returncode == 2, (p.returncode, p.stdout[:300])
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("tracetriage: error: ")
    assert "not one run" in p.stderr and "tracetriage batch" in p.stderr


def test_two_unrelated_bundles_are_refused():
    """eager_decode + tp8_cross_island used to give 'mean over 9 devices', exit 0."""
    _refused(run_cli("analyze", BUNDLES / "eager_decode", BUNDLES / "tp8_cross_island", "--no-cache"))


def test_a_bundle_and_a_real_export_are_refused():
    export = real("nsys", "nsys2026.1_tiny_cuda_app_full_export.sqlite")  # in samples/real (trial item 10)
    _refused(run_cli("analyze", BUNDLES / "eager_decode" / "trace.sqlite", export, "--no-cache"))


def test_exports_whose_sessions_do_not_overlap_are_refused_and_overlapping_ones_are_one_run(tmp_path):
    t0 = 1_780_000_000 * 10**9
    src = BUNDLES / "tp4_island" / "trace.sqlite"
    for name, start in (("rank0.sqlite", t0), ("rank1.sqlite", t0 + 10**8), ("later.sqlite", t0 + 3600 * 10**9)):
        shutil.copyfile(src, tmp_path / name)
        _session(tmp_path / name, start, 5 * 10**9)
    ok = run_cli("analyze", tmp_path / "rank0.sqlite", tmp_path / "rank1.sqlite", "-f", "json", "--no-cache")
    assert ok.returncode == 0, ok.stderr
    assert len(json.loads(ok.stdout)["inputs"]) == 2
    p = run_cli("analyze", tmp_path / "rank0.sqlite", tmp_path / "later.sqlite", "--no-cache")
    _refused(p)
    assert "capture sessions do not overlap" in p.stderr


def test_kineto_ranks_of_one_job_are_one_run_other_kineto_files_are_not(tmp_path):
    base = json.loads(gzip.open(H200 / "eager_decode.json.gz").read())
    for rank in (0, 1):
        (tmp_path / f"r{rank}.json").write_text(
            json.dumps(dict(base, distributedInfo={"backend": "nccl", "rank": rank, "world_size": 2})))
    (tmp_path / "dup.json").write_text(json.dumps(dict(base, distributedInfo={"backend": "nccl", "rank": 1, "world_size": 2})))
    ok = run_cli("analyze", tmp_path / "r0.json", tmp_path / "r1.json", "--no-cache")
    assert ok.returncode == 0, ok.stderr
    _refused(run_cli("analyze", tmp_path / "r1.json", tmp_path / "dup.json", "--no-cache"))  # rank 1 twice: two jobs
    _refused(run_cli("analyze", tmp_path / "r0.json", H200 / "gemm_bf16.json.gz", "--no-cache"))  # no distributedInfo


def test_different_profilers_are_not_one_run(tmp_path):
    p = run_cli("analyze", BUNDLES / "eager_decode" / "trace.sqlite", H200 / "eager_decode.json.gz", "--no-cache")
    _refused(p)
    assert "different profilers" in p.stderr


def test_side_artifacts_do_not_split_a_run():
    """One trace with its topology and NCCL log is one case (the rule is about traces only)."""
    p = run_cli("analyze", BUNDLES / "tp8_cross_island", "--no-cache", "-f", "json")
    assert p.returncode == 0, p.stderr


def test_copies_of_one_export_are_not_one_run_in_analyze_or_batch(tmp_path):
    """A folder of 'nightly' exports that are copies of one night's export (new-user trial 48
    item 6): their capture sessions are the same to the nanosecond, which two ranks' sessions
    never are. analyze used to read them as one run of 3 x H200 (exit 0); batch grouped them
    into one case. Both keep them apart, and real per-rank exports (overlapping, not equal)
    still make one run beside them."""
    from tracetriage.batches import discover

    folder = tmp_path / "nightly"
    folder.mkdir()
    t0 = 1_780_000_000 * 10**9
    src = BUNDLES / "tp4_island" / "trace.sqlite"
    for name, start in (("night1.sqlite", t0), ("night2.sqlite", t0), ("rank0.sqlite", t0 + 7200 * 10**9),
                        ("rank1.sqlite", t0 + 7200 * 10**9 + 10**8)):
        # night2: another program's export with night1's session (not the same bytes): the session says copies
        shutil.copyfile(BUNDLES / "eager_decode" / "trace.sqlite" if name == "night2.sqlite" else src, folder / name)
        _session(folder / name, start, 5 * 10**9)
    p = run_cli("analyze", folder / "night1.sqlite", folder / "night2.sqlite", "--no-cache")
    _refused(p)
    assert "copies of one capture" in p.stderr and f"utcEpochNs {t0}" in p.stderr
    ok = run_cli("analyze", folder / "rank0.sqlite", folder / "rank1.sqlite", "-f", "json", "--no-cache")
    assert ok.returncode == 0, ok.stderr
    specs = discover([str(folder)], tmp_path / "out")
    cases = sorted(tuple(sorted(Path(p).name for p in s.paths)) for s in specs)
    assert cases == [("night1.sqlite",), ("night2.sqlite",), ("rank0.sqlite", "rank1.sqlite")]


def test_overlapping_groups_keeps_equal_spans_apart_and_chains_the_rest():
    from tracetriage.parsers.common import overlapping_groups
    from tracetriage.runs import same_span_copies

    spans = {"r0": (0, 10), "copyA": (2, 8), "copyB": (2, 8), "r1": (5, 12), "late": (20, 30), "none": None}
    groups = overlapping_groups(list(spans), spans.get)
    assert sorted(map(sorted, groups)) == [["copyA"], ["copyB"], ["late"], ["none"], ["r0", "r1"]]
    assert same_span_copies(list(spans.items())) == ("copyA", "copyB", (2, 8))
    assert same_span_copies([("a", (0, 1)), ("b", (0, 2)), ("c", None)]) is None


def test_files_with_the_same_bytes_are_copies_whatever_they_record(tmp_path):
    """Copies of an export without session tables (trial 49 item 9: 'records no capture session time'
    said nothing of the files being one file), and of a Kineto trace."""
    for name in ("run1.sqlite", "run2.sqlite"):
        shutil.copyfile(BUNDLES / "eager_decode" / "trace.sqlite", tmp_path / name)
    p = run_cli("analyze", tmp_path, "--no-cache")
    _refused(p)
    assert "run1.sqlite and " in p.stderr
    assert "run2.sqlite are not one run: they are copies of one file (the same bytes)" in p.stderr
    for name in ("a.json.gz", "b.json.gz"):
        shutil.copyfile(H200 / "eager_decode.json.gz", tmp_path / name)
    p = run_cli("analyze", tmp_path / "a.json.gz", tmp_path / "b.json.gz", "--no-cache")
    _refused(p)
    assert "copies of one file" in p.stderr
