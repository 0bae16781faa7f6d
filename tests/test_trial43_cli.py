"""What the new-user trial of stop 43 met on the CLI and the library: a bad per-case limit or
Dask address is the usage error (exit 2) before anything is written, never a traceback, a worker
'crash' or exit 70; the library's keywords are checked as the CLI's flags are."""

from __future__ import annotations

import pytest
from conftest import BUNDLES, run_cli

import tracetriage
from tracetriage.errors import EXIT_USAGE, UsageError


def _one_line_usage(proc) -> str:
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    return proc.stderr


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_a_case_timeout_that_is_no_positive_number_is_refused_before_the_batch(tmp_path, value):
    out = tmp_path / "out"
    line = _one_line_usage(run_cli("batch", BUNDLES / "eager_decode", "-o", out, "--case-timeout", value, "--no-progress"))
    assert "--case-timeout must be a positive number of seconds" in line
    assert not out.exists()


@pytest.mark.parametrize("address", ["notanaddress", "bogus::", "tcp://host-without-port"])
def test_a_malformed_dask_address_is_the_usage_error_and_writes_no_outdir(tmp_path, address):
    out = tmp_path / "out"
    line = _one_line_usage(run_cli("batch", BUNDLES / "eager_decode", "-o", out, "--dask", address, "--no-progress"))
    assert "not a Dask scheduler address" in line and address in line
    assert not out.exists()


def test_the_librarys_keywords_are_checked_as_the_flags_are(tmp_path):
    with pytest.raises(UsageError, match="threshold_pct must be a number"):
        tracetriage.compare(BUNDLES / "eager_decode", BUNDLES / "graph_decode", threshold_pct="x")
    with pytest.raises(UsageError, match="across_devices must be True or False"):
        tracetriage.compare(BUNDLES / "eager_decode", BUNDLES / "graph_decode", across_devices="yes")
    with pytest.raises(UsageError, match="--on-error must be one of skip, fail"):
        tracetriage.batch([BUNDLES / "eager_decode"], tmp_path / "out", on_error="explode", progress=False)
    with pytest.raises(UsageError, match="--case-timeout must be a positive number"):
        tracetriage.batch([BUNDLES / "eager_decode"], tmp_path / "out", case_timeout=-1, progress=False)
    with pytest.raises(UsageError, match="gate must be True or False"):
        tracetriage.trend(BUNDLES, gate="yes")
    with pytest.raises(UsageError, match="order_by must be time or name"):
        tracetriage.trend(BUNDLES, order_by="size")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", ["text", "md"])
def test_an_inconclusive_compare_says_its_figures_are_not_judged_before_listing_them(fmt):
    """Trial 73cc2a3 item 54: ~30 rows of 'n/a ... not judged' followed an inconclusive verdict with nothing
    to say what they were; the HTML folds them; text and md list them (every field of the view in every
    format) under one line that says none is judged."""
    out = run_cli("compare", BUNDLES / "eager_decode", BUNDLES / "serving_at_capacity", "-f", fmt, "--no-cache").stdout
    said = out.find("none judged: the captures are not comparable")
    assert 0 < said < out.lower().find("per step, absolute")
    same = run_cli("compare", BUNDLES / "eager_decode", BUNDLES / "graph_decode", "-f", fmt, "--no-cache").stdout
    assert "none judged" not in same


@pytest.mark.parametrize("keep", [100, 0.5, -4096])
def test_a_cut_off_sqlite_copy_is_called_truncated_with_its_sizes(tmp_path, keep):
    """Trial 43 item 15: a copy cut at 100 bytes, at half or a page short was 'not a readable SQLite database
    (database disk image is malformed)' in nested parentheses; the header counts the pages: say so."""
    data = (BUNDLES / "graph_decode" / "trace.sqlite").read_bytes()
    cut = keep if isinstance(keep, int) and keep > 0 else (int(len(data) * keep) if isinstance(keep, float) else len(data) + keep)
    path = tmp_path / "cut.sqlite"
    path.write_bytes(data[:cut])
    proc = run_cli("analyze", path, "--no-cache")
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1
    assert "truncated: its header counts" in proc.stderr and f"the file holds {cut:,}" in proc.stderr
    assert "((" not in proc.stderr and "))" not in proc.stderr


def test_a_batch_result_shows_its_counts_not_every_record(tmp_path):
    """Trial 43 item 12: the BatchResult a notebook cell shows was a 61 KB dump of every record."""
    result = tracetriage.batch([BUNDLES / "eager_decode", BUNDLES / "healthy"], tmp_path / "out", progress=False,
                               reports="none")
    shown = repr(result)
    assert shown.startswith("BatchResult(") and "records=2" in shown and "analyzed=2" in shown and len(shown) < 300
    assert len(result.records) == 2  # the records are all still there


def test_a_side_without_a_gpu_trace_is_not_told_to_compare_across_devices():
    """Trial 43b item 2: 'no GPU after' pointed at --across-devices, which then refused too: with no trace
    on one side there is no device to hold it against; say what is missing."""
    line = run_cli("compare", BUNDLES / "eager_decode", BUNDLES / "serving_at_capacity", "--no-cache").stdout.split("\n")[0]
    assert "no GPU trace on the after side" in line and "--across-devices" not in line
