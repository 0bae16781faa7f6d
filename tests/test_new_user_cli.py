"""What a new user met on the command line (issue 38, ../shared/trials/new-user-73cc2a3.md):
each test names the trial item it answers."""

from __future__ import annotations

import io
import tarfile
import time

import pytest
from conftest import BUNDLES, run_cli

from tracetriage.archive import extract
from tracetriage.errors import EXIT_FAIL_ON, EXIT_INPUT, EXIT_NOTHING, EXIT_OUTPUT, EXIT_USAGE, ArchiveError


class _Zeros(io.RawIOBase):
    """``size`` zero bytes, read in chunks: a member's content without holding it in memory."""

    def __init__(self, size: int):
        self.left = size

    def readable(self):
        return True

    def readinto(self, buffer):
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def _zeros_tar_gz(path, size):
    with tarfile.open(path, "w:gz", compresslevel=9) as tf:
        info = tarfile.TarInfo("trace.sqlite")
        info.size = size
        tf.addfile(info, io.BufferedReader(_Zeros(size)))


def test_tar_gz_of_zeros_is_refused_as_a_bomb_fast(tmp_path):
    """Item 7: a .tar.gz whose one member is zeros inflates ~1000x; it is refused once it
    passes MAX_RATIO times the archive's size, not after writing every byte."""
    arc = tmp_path / "zeros.tar.gz"
    _zeros_tar_gz(arc, 256 << 20)
    assert arc.stat().st_size < (1 << 20)
    started = time.monotonic()
    with pytest.raises(ArchiveError, match="inflates more than 200x its size"):
        extract(arc, tmp_path / "out")
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out").exists()


def test_extraction_is_bounded_in_time(tmp_path, monkeypatch):
    """Item 7: decompression is bounded by time as well as bytes."""
    import tracetriage.archive

    monkeypatch.setattr(tracetriage.archive, "MAX_EXTRACT_SECONDS", 0.0)
    arc = tmp_path / "small.tar"
    with tarfile.open(arc, "w") as tf:
        info = tarfile.TarInfo("a.txt")
        info.size = 3
        tf.addfile(info, io.BytesIO(b"abc"))
    with pytest.raises(ArchiveError, match="longer than 0 s"):
        extract(arc, tmp_path / "out")


def test_a_plain_tar_is_not_held_to_the_ratio(tmp_path):
    arc = tmp_path / "plain.tar"
    with tarfile.open(arc, "w") as tf:
        info = tarfile.TarInfo("zeros.bin")
        info.size = 20 << 20
        tf.addfile(info, io.BufferedReader(_Zeros(info.size)))
    assert (extract(arc, tmp_path / "out") / "zeros.bin").stat().st_size == 20 << 20


EAGER = BUNDLES / "eager_decode"


def _one_error_line(proc, code, words):
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("tracetriage: error: ")]
    assert len(errors) == 1 and words in errors[0], proc.stderr


def test_a_full_standard_output_is_the_reports_error():
    """Item 15: `analyze ... > /dev/full` is exit 7 with the reason, not an internal error or exit 0."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:  # the real stream: only a process of its own has it as stdout
        proc = subprocess.run([sys.executable, "-m", "tracetriage", "analyze", str(EAGER), "--no-cache"],
                              stdout=full, stderr=subprocess.PIPE, text=True)
    _one_error_line(proc, EXIT_OUTPUT, "standard output: cannot write the report: No space left on device")


def test_o_without_an_extension_writes_text(tmp_path):
    """Item 20: -o FILE without an extension is the default format (text), not a usage error."""
    out = tmp_path / "report"
    proc = run_cli("analyze", EAGER, "-o", out, "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("tracetriage ")
    assert run_cli("analyze", EAGER, "-o", tmp_path / "r.csv", "--no-cache").returncode == EXIT_USAGE


def test_o_under_a_file_names_the_file(tmp_path):
    """Item 25: a path component that is a file is said to be one."""
    (tmp_path / "fake.sqlite").write_text("x")
    proc = run_cli("analyze", EAGER, "-o", tmp_path / "fake.sqlite" / "x.html", "--no-cache")
    _one_error_line(proc, EXIT_OUTPUT, f"{tmp_path / 'fake.sqlite'} is a file, not a folder")


def test_fail_on_says_what_matched(tmp_path):
    """Item 21: exit 5 comes with the line naming the findings (and, in batch, the case) that matched."""
    proc = run_cli("analyze", EAGER, "--fail-on", "high", "--no-cache")
    assert proc.returncode == EXIT_FAIL_ON
    assert "tracetriage: --fail-on high matched: high launch_bound" in proc.stderr
    batch = run_cli("batch", EAGER, "-o", tmp_path / "out", "--fail-on", "high", "--no-progress", "--no-cache", "-j", "1")
    assert batch.returncode == EXIT_FAIL_ON
    assert f"--fail-on high matched: {EAGER / 'trace.sqlite'}: high launch_bound" in batch.stderr


def test_batch_with_nothing_to_analyze_is_exit_4(tmp_path):
    """Item 16: an empty folder, or one of notes only, holds nothing: exit 4, as analyze and trend say."""
    empty = tmp_path / "empty"
    empty.mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("nothing here\n")
    for folder in (empty, notes):
        proc = run_cli("batch", folder, "-o", tmp_path / "out", "--no-progress", "--no-cache")
        _one_error_line(proc, EXIT_NOTHING, "nothing to analyze: no capture")
        assert not (tmp_path / "out").exists()


def test_batch_names_an_input_that_gave_no_case(tmp_path):
    """Item 17: an input with no capture in it is named as skipped, not dropped in silence."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "readme.txt").write_text("hello\n")
    proc = run_cli("batch", EAGER, notes, "-o", tmp_path / "out", "--no-progress", "--no-cache", "-j", "1")
    assert proc.returncode == 0, proc.stderr
    assert f"tracetriage: skipped: {notes}: no capture" in proc.stderr
    assert "1 case: 1 analyzed" in proc.stderr


def test_batch_missing_input_is_exit_3_like_a_pattern_matching_nothing(tmp_path):
    """Item 18: a missing input and a pattern that matches nothing are both exit 3."""
    missing = run_cli("batch", tmp_path / "nonexist", "-o", tmp_path / "out", "--no-progress")
    _one_error_line(missing, EXIT_INPUT, "no such file or directory")
    pattern = run_cli("batch", f"{tmp_path}/nomatch*", "-o", tmp_path / "out", "--no-progress")
    _one_error_line(pattern, EXIT_INPUT, "the pattern matches no file")


def test_nsys_given_but_missing_is_said(tmp_path):
    """Item 19: --nsys PATH that does not exist is named, not 'no nsys was found ... give --nsys PATH'."""
    report = tmp_path / "fake.nsys-rep"
    report.write_bytes(b"NVIDIA Tegra Profiler Report 1\x00\x00\x02" + bytes(200) + b"2022.4.2.50-32196742v0" + bytes(100))
    proc = run_cli("analyze", report, "--nsys", "/nonexistent/nsys", "--no-cache")
    _one_error_line(proc, EXIT_INPUT, "the nsys given (/nonexistent/nsys, from --nsys or $NSYS) does not exist")


def test_an_unreachable_dask_scheduler_is_a_usage_error(tmp_path, monkeypatch):
    """Item 14: one line with the usage exit code, not exit 70 after 30 s."""
    pytest.importorskip("dask.distributed", reason="dask[distributed] not installed")
    import tracetriage.batches

    monkeypatch.setattr(tracetriage.batches, "DASK_CONNECT_TIMEOUT_S", 2.0)
    proc = run_cli("batch", EAGER, "-o", tmp_path / "out", "--dask", "tcp://127.0.0.1:1", "--no-progress", "--no-cache")
    _one_error_line(proc, EXIT_USAGE, "tcp://127.0.0.1:1: cannot reach the Dask scheduler")


def test_the_input_line_says_the_format_once():
    """Item 26: a rocpd input reads `[rocpd schema 3]`, not `[rocpd rocpd schema 3]` (the JSON keeps the version as read)."""
    proc = run_cli("analyze", BUNDLES / "graph_decode_rocpd", "--no-cache")
    line = next(line for line in proc.stdout.splitlines() if line.startswith("input"))
    assert "[rocpd schema 3]" in line and "rocpd rocpd" not in line, line


@pytest.mark.parametrize("name, expected", [
    ("pytest", True), ("/usr/bin/python3 -m pytest tests", True), ("ipykernel_launcher", True),
    ("deepspeed --num_gpus 8 train.py", True), ("./batched_gemm", False), ("pid 4242", None),
])
def test_python_entry_points_are_python_processes(name, expected):
    """Trial of integ32, item 15: a process named pytest was told to use perf as a native program."""
    from tracetriage.analyzers.rules.hints import is_python

    assert is_python(name) is expected


def test_a_cut_json_names_line_and_column_once(tmp_path):
    """Trial item 24 / integ32 item 19: 'Unterminated string starting at at line 1' read 'at at'."""
    path = tmp_path / "cut.json"
    path.write_text('{"traceEvents": [{"name": "unterminated')
    proc = run_cli("analyze", path, "--no-cache")
    _one_error_line(proc, EXIT_INPUT, "not valid JSON")
    assert "at at" not in proc.stderr and "line 1, column" in proc.stderr


def test_a_cut_zip_is_a_corrupt_archive_in_analyze_and_batch(tmp_path):
    """Trial of integ32, item 11: a truncated .zip read 'binary file' in analyze and was dropped in silence by batch."""
    import zipfile

    whole = tmp_path / "whole.zip"
    with zipfile.ZipFile(whole, "w") as zf:
        zf.writestr("trace.sqlite", b"x" * 50_000)
    cut = tmp_path / "in" / "cut.zip"
    cut.parent.mkdir()
    cut.write_bytes(whole.read_bytes()[:1000])
    _one_error_line(run_cli("analyze", cut, "--no-cache"), EXIT_INPUT, "corrupt or unsupported archive")
    proc = run_cli("batch", cut.parent, "-o", tmp_path / "out", "--no-progress", "--no-cache", "-j", "1")
    assert "1 case: 0 analyzed, 0 unchanged, 1 failed" in proc.stderr and "cut.zip" in proc.stderr


@pytest.mark.parametrize(("name", "suffix", "packing"), [("cap.tar.gz", ".tar.gz", "a gzip archive"),
                                                         ("cap.tgz", ".tgz", "a gzip archive"),
                                                         ("cap.zip", ".zip", "a zip archive"),
                                                         ("notes.log.gz", ".gz", "gzip-compressed")])
def test_a_file_named_as_an_archive_that_is_not_one_says_so(tmp_path, name, suffix, packing):
    """Trial of m37, item 17: a fake .tar.gz (text inside, not gzip) was called "a text file"; it is
    named as packed but is not, and says both."""
    fake = tmp_path / name
    fake.write_text("a few words, not a capture\n")
    _one_error_line(run_cli("analyze", fake, "--no-cache"), EXIT_INPUT, f"named {suffix} but not {packing}: text file")


def test_a_gzip_holding_no_tar_says_so(tmp_path):
    import gzip

    fake = tmp_path / "cap.tar.gz"
    fake.write_bytes(gzip.compress(b"plain words, no tar header"))
    _one_error_line(run_cli("analyze", fake, "--no-cache"), EXIT_INPUT, "gzip-compressed, but what it holds is not a tar archive")


def test_the_content_decides_not_the_extension(tmp_path):
    """An SQLite export named .json is read as SQLite; a saved analysis given to analyze is named as one
    (not "JSON without traceEvents"), and compare reads one by its content whatever its name."""
    import shutil

    renamed = tmp_path / "trace.json"
    shutil.copy(BUNDLES / "eager_decode" / "trace.sqlite", renamed)
    proc = run_cli("analyze", renamed, "--format", "json", "--no-cache")
    assert proc.returncode == 0 and '"launch_bound"' in proc.stdout
    saved = tmp_path / "eager.analysis"
    saved.write_text(proc.stdout)
    _one_error_line(run_cli("analyze", saved, "--no-cache"), EXIT_INPUT,
                    "a tracetriage result (tracetriage.analysis/1), not a capture")
    compared = run_cli("compare", saved, BUNDLES / "eager_decode", "--no-cache")
    assert compared.returncode == 0 and compared.stdout.startswith("tracetriage compare: unchanged")
