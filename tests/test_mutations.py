"""Exports from versions we have not seen: columns missing, NULLs, dangling ids. The parser
either reads them or says what is wrong — never a traceback, never a crash."""

import shutil
import sqlite3

import pytest
from conftest import BUNDLES, run_cli

from tracetriage import analyze, open_case
from tracetriage.errors import TraceTriageError

SRC = BUNDLES / "eager_decode_nvtx" / "trace.sqlite"


def rebuild_without(con, table, column):
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")') if r[1] != column]
    sel = ", ".join(f'"{c}"' for c in cols)
    con.execute(f'CREATE TABLE "tmp_{table}" AS SELECT {sel} FROM "{table}"')
    con.execute(f'DROP TABLE "{table}"')
    con.execute(f'ALTER TABLE "tmp_{table}" RENAME TO "{table}"')


MUTATIONS = {
    "kernel_without_globalPid": lambda c: rebuild_without(c, "CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"),
    "kernel_without_shortName": lambda c: rebuild_without(c, "CUPTI_ACTIVITY_KIND_KERNEL", "shortName"),
    "kernel_without_correlation": lambda c: rebuild_without(c, "CUPTI_ACTIVITY_KIND_KERNEL", "correlationId"),
    "runtime_without_nameId": lambda c: rebuild_without(c, "CUPTI_ACTIVITY_KIND_RUNTIME", "nameId"),
    "nvtx_without_text": lambda c: rebuild_without(c, "NVTX_EVENTS", "text"),
    "untimed_kernels": lambda c: c.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 0, "end" = 0 WHERE rowid % 7 = 0'),
    "end_before_start": lambda c: c.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 5 WHERE rowid % 11 = 0'),
    "dangling_string_ids": lambda c: c.execute("DELETE FROM StringIds WHERE id % 2 = 0"),
    "no_string_ids_rows": lambda c: c.execute("DELETE FROM StringIds"),
    "text_in_integer_column": lambda c: c.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 'x' WHERE rowid = 3"),
    "no_runtime_table": lambda c: c.execute("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME"),
    "no_metadata_tables": lambda c: (c.execute("DROP TABLE META_DATA_EXPORT"), c.execute("DROP TABLE META_DATA_CAPTURE")),
    "no_enum_tables": lambda c: [c.execute(f'DROP TABLE "{n}"') for (n,) in
                                 c.execute("SELECT name FROM sqlite_master WHERE name LIKE 'ENUM_%'").fetchall()],
    "empty_devices_info": lambda c: (c.execute("DELETE FROM TARGET_INFO_GPU"), c.execute("DELETE FROM TARGET_INFO_CUDA_DEVICE")),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutated_export(name, tmp_path):
    path = tmp_path / f"{name}.sqlite"
    shutil.copyfile(SRC, path)
    con = sqlite3.connect(path)
    MUTATIONS[name](con)
    con.commit()
    con.close()
    try:
        a = analyze(open_case([path]))
    except TraceTriageError:
        pass  # a one-line, named error is an acceptable answer
    else:
        assert a.data["devices"] and a.headline
        for d in a.data["devices"]:
            assert 0 <= d["busy_pct"] <= 100
    proc = run_cli("analyze", path, "--format", "json")
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 3, 4), proc.stderr


def test_untimed_records_are_ignored_and_said(tmp_path):
    path = tmp_path / "untimed.sqlite"
    shutil.copyfile(SRC, path)
    con = sqlite3.connect(path)
    n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 7 = 0").fetchone()[0]
    MUTATIONS["untimed_kernels"](con)
    con.commit()
    con.close()
    t = open_case([path]).traces[0]
    assert any(f"{n:,} GPU records without timestamps" in w for w in t.warnings)
    assert int(t.gpu["start"].min()) > 0


def test_loosely_typed_kineto_events(tmp_path):
    import json

    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": "12", "tid": 3, "ts": "100.5", "dur": 5,
         "args": {"correlation": "7"}},
        {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": "stream 7", "ts": 110, "dur": "3.5",
         "args": {"device": "0", "stream": "7", "correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "k2", "ts": None, "dur": 2, "args": "oops"},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "ts": 120, "dur": 1,
         "args": {"bytes": "a lot", "correlation": 9}},
        "not an event", {"ph": "i", "name": "instant"},
    ]
    path = tmp_path / "loose.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": "0", "name": "GPU", "numSms": "x"}]}))
    t = open_case([path]).traces[0]
    # k2 has no timestamp: it cannot be placed on the timeline, so it is dropped and counted
    assert t.counts()["kernels"] == 1 and t.counts()["memcpy"] == 1
    assert any("without a valid ts" in w for w in t.warnings)
    k1 = t.gpu[t.gpu["name"] == "k1"].iloc[0]
    assert int(k1["pid"]) == 12 and int(k1["start"]) == 110_000 and int(k1["end"]) == 113_500
