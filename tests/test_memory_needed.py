"""An input too large for the memory left (tracetriage/errors.py EXIT_MEMORY): one line naming the file,
its rows and both sizes, exit 10, before any table is read; an allocation that fails later is the same
exit, never an "internal error"."""

import sqlite3

from conftest import BUNDLES, run_cli

from tracetriage import memory
from tracetriage.errors import EXIT_MEMORY
from tracetriage.parsers import nsys

TRACE = BUNDLES / "eager_decode" / "trace.sqlite"
TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")


def _rows() -> int:
    """The bundle's rows of the tables the model holds, counted by SQLite itself."""
    with sqlite3.connect(f"file:{TRACE}?mode=ro", uri=True) as db:
        present = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return sum(db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in TABLES if t in present)


def test_an_export_larger_than_the_free_memory_is_refused_before_it_is_read(monkeypatch):
    rows = _rows()
    need = rows * nsys.MODEL_BYTES_PER_ROW
    monkeypatch.setattr(memory, "available_bytes", lambda: need - 1)
    read = []
    monkeypatch.setattr(nsys, "read_kernels", lambda *a: read.append(a) or None)
    proc = run_cli("analyze", TRACE, "--no-cache")
    assert proc.returncode == EXIT_MEMORY == 10
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"tracetriage: error: {TRACE}: too large for the memory this machine has free: "
                               f"its {rows:,} kernel, copy and runtime rows need at least")
    assert "GiB is available" in lines[0] and "shorter window" in lines[0]
    assert read == []  # refused before the kernel table was read


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
