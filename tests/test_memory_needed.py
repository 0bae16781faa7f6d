"""An input too large for the memory left (tracetriage/errors.py EXIT_MEMORY): an nsys export is analyzed
streamed instead (tracetriage/cli_streamed.py), its numbers those of the whole-table run; one the stream
cannot analyze exactly is refused in one line naming the file, its rows, both sizes and the stream's reason,
exit 10, before the whole-table model reads any table; an allocation that fails later is the same exit,
never an "internal error"."""

import sqlite3

import pytest
from conftest import BUNDLES, run_cli

from tracetriage import memory
from tracetriage.errors import EXIT_MEMORY
from tracetriage.parsers import nsys

TRACE = BUNDLES / "eager_decode" / "trace.sqlite"
GRAPHS = BUNDLES / "graph_decode" / "trace.sqlite"  # CUDA graph replays: streamed, their dependency waits joined
# graph replays and no steps over the whole capture: the phase rules (which count a replay as a kernel) are not streamed
REFUSED = BUNDLES / "setup_then_starved" / "trace.sqlite"
TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")


def _rows(trace=TRACE) -> int:
    """The bundle's rows of the tables the model holds, counted by SQLite itself."""
    with sqlite3.connect(f"file:{trace}?mode=ro", uri=True) as db:
        present = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return sum(db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in TABLES if t in present)


def test_an_export_larger_than_the_free_memory_is_refused_before_it_is_read(monkeypatch):
    rows = _rows(REFUSED)
    need = rows * nsys.MODEL_BYTES_PER_ROW
    monkeypatch.setattr(memory, "available_bytes", lambda: need - 1)
    read = []
    monkeypatch.setattr(nsys, "read_kernels", lambda *a: read.append(a) or None)
    proc = run_cli("analyze", REFUSED, "--no-cache")
    assert proc.returncode == EXIT_MEMORY == 10
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"tracetriage: error: {REFUSED}: too large for the memory this machine has free: "
                               f"its {rows:,} kernel, copy and runtime rows need at least")
    assert "GiB is available" in lines[0] and "shorter window" in lines[0]
    assert lines[0].endswith("; streamed, it cannot be analyzed exactly either: graph replays in a capture without "
                             "steps (the phase rules' kernels)")
    assert read == []  # the whole-table model read no table
    assert proc.stdout == ""


@pytest.mark.parametrize("trace_path", [TRACE, GRAPHS], ids=["eager_decode", "graph_decode"])
def test_an_export_larger_than_the_free_memory_is_analyzed_streamed_to_the_same_numbers(monkeypatch, trace_path):
    """With the threshold forced below the bundle's need, analyze takes the streamed path: its window, each
    device's busy time and gaps (idle causes, quantiles, histogram, longest) and the kernel summary are the
    whole-table run's, and the report says what it did not measure. graph_decode: CUDA graph replays."""
    import json

    whole = json.loads(run_cli("analyze", trace_path, "--no-cache", "-f", "json").stdout)
    trace = nsys.parse(str(trace_path))  # for the figures the contract does not carry, from the whole-table model
    from tracetriage import analyze, open_case

    whole_slices = list(analyze(open_case([trace_path])).series["slices"].values())  # the decomposition, in ns
    monkeypatch.setattr(memory, "available_bytes", lambda: _rows(trace_path) * nsys.MODEL_BYTES_PER_ROW - 1)
    read = []
    monkeypatch.setattr(nsys, "read_kernels", lambda *a: read.append(a) or None)
    proc = run_cli("analyze", trace_path, "--no-cache", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert read == [] and got["analysis"] == "streamed" and "schema" not in got  # not the contract's document
    assert got["window"] == whole["window"]
    fields = ("pid", "ordinal", "busy_ns", "window_ns", "busy_pct", "gaps")
    assert [{f: d[f] for f in fields} for d in got["devices"]] == [{f: d[f] for f in fields} for d in whole["devices"]]
    assert got["kernels"] == whole["kernels"]
    # the window's decomposition as far as the stream measures it: the idle slices exactly, busy in one
    for device, want in zip(got["devices"], whole_slices):
        busy = want["compute"] + want["collective"] + want["copy"]
        assert device["slices"] == {"busy": busy, **{k: v for k, v in want.items() if k.startswith("idle:")}}
        assert sum(device["slices"].values()) == device["window_ns"]
        largest = max(device["slices"], key=device["slices"].get)
        assert device["largest_slice"]["slice"] == largest and device["largest_slice"]["ns"] == device["slices"][largest]
    from tracetriage.analyzers import kernels as kern
    from tracetriage.model import is_kind

    lo, hi = whole["window"]["start_ns"], whole["window"]["end_ns"]
    starts = trace.gpu["start"].to_numpy()
    assert got["kernel_median_ns"] == kern.kernel_duration_median(trace, lo, hi)
    assert got["kernels_in_window"] == int((is_kind(trace.gpu, "kernel") & (starts >= lo) & (starts < hi)).sum())
    assert [(s["pid"], s["count"]) for s in got["steps"]] == [(p["pid"], p["steps"]["count"]) for p in whole["processes"]]
    assert any("collectives" in what for what in got["not_measured"])
    text = run_cli("analyze", trace_path, "--no-cache").stdout
    assert text.startswith(f"tracetriage: streamed analysis of {trace_path}\n")
    assert "NOT measured on the streamed path: collectives" in text and "No verdict is given." in text
    assert f"busy {whole['devices'][0]['busy_pct']:.1f}% of the window" in text
    top = got["devices"][0]["largest_slice"]
    assert f"largest slice of the window: {top['slice']} {top['pct_of_window']:.1f}%" in text


def test_an_export_that_fits_is_analyzed(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: _rows() * nsys.MODEL_BYTES_PER_ROW)
    assert run_cli("analyze", TRACE, "--no-cache", "-f", "json").returncode == 0
    monkeypatch.setattr(memory, "available_bytes", lambda: None)  # not Linux: nothing to judge by
    assert run_cli("analyze", TRACE, "--no-cache", "-f", "json").returncode == 0


def test_a_failed_allocation_is_the_memory_exit_naming_the_input(monkeypatch):
    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(nsys, "read_api", exhausted)
    proc = run_cli("analyze", TRACE, "--no-cache")
    assert proc.returncode == EXIT_MEMORY
    assert proc.stderr == (f"tracetriage: error: {TRACE}: out of memory while analyzing it: analyze it on a machine "
                           "with more memory free, or capture a shorter window\n")


def test_the_free_memory_is_read_on_linux():
    free = memory.available_bytes()
    assert free is None or 0 < free < 1 << 50


def test_the_streamed_path_reports_a_damaged_export_as_the_whole_table_path_does(tmp_path, monkeypatch):
    """A page of the kernel or runtime table overwritten (the header and schema intact): the b-tree reader
    steps aside mid-table, SQLite reads the pass again, and the streamed path ends in the whole-table path's
    one line and exit code (3, the input's), not in the memory refusal."""
    import shutil
    import sys

    from conftest import ROOT

    from tracetriage.parsers import btree

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import shapes

    good = tmp_path / "good.sqlite"
    shapes.build(good, 20_000, shape="sync2dev")
    monkeypatch.setattr(btree, "MIN_BYTES", 0)  # the direct reader, as on a large file
    size = good.stat().st_size
    for where in (0.3, 0.85):  # a kernel page, a runtime page
        bad = tmp_path / f"bad{where}.sqlite"
        shutil.copy(good, bad)
        with open(bad, "r+b") as handle:
            handle.seek(int(size * where) // 4096 * 4096)
            handle.write(b"\xff" * 4096)
        monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 50)
        whole = run_cli("analyze", bad, "--no-cache", "-f", "json")
        monkeypatch.setattr(memory, "available_bytes", lambda: 1)
        streamed = run_cli("analyze", bad, "--no-cache", "-f", "json")
        assert whole.returncode == streamed.returncode == 3
        assert streamed.stderr == whole.stderr == f"tracetriage: error: {bad}: query failed: database disk image is malformed\n"
        assert streamed.stdout == ""


def test_the_streamed_path_opens_the_export_read_only_and_creates_nothing_beside_it(tmp_path, monkeypatch):
    import os
    import shutil

    trace = tmp_path / "trace.sqlite"
    shutil.copy(TRACE, trace)
    os.chmod(trace, 0o444)
    before = (sorted(os.listdir(tmp_path)), trace.stat().st_mtime_ns)
    monkeypatch.setattr(memory, "available_bytes", lambda: 1)
    proc = run_cli("analyze", trace, "--no-cache", "-f", "json")
    assert proc.returncode == 0 and '"analysis": "streamed"' in proc.stdout, proc.stderr
    assert (sorted(os.listdir(tmp_path)), trace.stat().st_mtime_ns) == before


def test_open_export_refuses_what_open_case_refuses_in_one_line(tmp_path):
    """tracetriage.case.open_export, the streamed path's opening place: the input errors open_case gives."""
    from tracetriage.case import open_export
    from tracetriage.errors import UnsupportedInputError

    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    cases = {tmp_path / "missing.sqlite": "no such file or directory", tmp_path: "a folder, not an Nsight Systems export",
             text: "not a supported input: ", other: "not a supported input: SQLite database of another program"}
    for path, why in cases.items():
        with pytest.raises(UnsupportedInputError) as refused:
            open_export(path)
        assert str(refused.value).startswith(f"{path}: {why}"), str(refused.value)
    with open_export(TRACE) as db:
        assert db.uri.endswith("?mode=ro&immutable=1") and db.has("CUPTI_ACTIVITY_KIND_KERNEL")
