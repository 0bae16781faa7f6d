"""Issue 25 item 1: unrelated captures are not merged into one verdict. analyze applies the
rule batch groups files by (tracetriage/runs.py) to every combination of traces it is given."""

import gzip
import json
import shutil

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
