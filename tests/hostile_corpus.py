"""A corpus of hostile inputs: corrupt, mutated, foreign and adversarial variants of the samples.

``generate(out)`` writes every case into its own folder under ``out`` and returns the list
of cases: (family, name, path to analyze). Run by tests/test_hostile.py, one process per
case under a time and memory limit. Families:

* nsys-values  — text / NULL / huge / negative values in every column the nsys parser reads
* nsys-shape   — dropped and renamed columns, duplicate or invalid string ids, impossible
  intervals, truncation, page corruption, WAL leftovers, recursive and endless views
* rocpd        — the same families on a rocprofv3 rocpd database
* kineto       — non-finite and enormous numbers, wrong JSON types, lone surrogates, corrupt
  gzip, deep nesting, a top-level array
* pyspy        — speedscope with wrong types, very deep stacks, raw stacks with junk
* text         — logs, scrapes, matrices with binary noise, enormous lines, gzip, truncation
* archive      — corrupt, encrypted and unsupported zip members, PAX size overflow, a ratio
  bomb, a huge comment, path escapes
* special      — FIFOs, dangling symlinks, symlink loops, a symlink to /proc/self/mem
* names        — control characters and newlines in file and folder names
* rpd          — legacy RPD (the real sample, when present) with NULL / repeated / text ids
* rocprof_csv  — rocprofv3 CSV traces with huge, negative, non-finite and non-numeric cells

``EXPECTED_EXIT`` names the cases whose exit code is fixed (a malformed file is 3, not 4).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import shutil
import sqlite3
import struct
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = ROOT / "samples" / "bundles"
NSYS = BUNDLES / "eager_decode_nvtx" / "trace.sqlite"
NSYS_COPY = BUNDLES / "graph_decode" / "trace.sqlite"
ROCPD = BUNDLES / "graph_decode_rocpd" / "4202_results.db"

# Columns the nsys parser reads, by table.
NSYS_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "shortName",
                                   "demangledName", "graphNodeId"],
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "globalTid", "correlationId", "nameId"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes",
                                   "copyKind", "srcKind", "dstKind"],
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ["start", "end", "globalPid", "syncType", "correlationId"],
    "NVTX_EVENTS": ["start", "end", "text", "globalTid", "domainId", "eventType"],
    "StringIds": ["id", "value"],
    "TARGET_INFO_GPU": ["id", "name", "smCount", "totalMemory", "cuDevice"],
    "TARGET_INFO_CUDA_DEVICE": ["gpuId", "cudaId", "pid", "numMultiprocessors"],
    "PROCESSES": ["globalPid", "pid", "name"],
    "ENUM_CUDA_MEMCPY_OPER": ["id", "name"],
    "META_DATA_EXPORT": ["name", "value"],
}
BAD_VALUES = {"text": "'abc'", "null": "NULL", "huge": "1e308", "neg": "-9223372036854775808", "blob": "x'fffe00'"}
RPD = ROOT / "samples" / "real" / "rocprof" / "rpd_v2_pytorch_matmul.rpd"  # MIT, kept in the repository
if not RPD.exists():
    RPD = ROOT.parent / "shared" / "samples" / "real" / "rocprof" / "rpd_v2_pytorch_matmul.rpd"
INVALID_UTF8 = "CAST(x'c328ffa0' AS TEXT)"  # what a flipped high bit leaves in a text cell
# Cases whose exit code is part of the contract (the rest may end 0, 3 or 4).
EXPECTED_EXIT: dict[str, int] = {}


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def _sql(db: Path, *statements: str) -> None:
    con = sqlite3.connect(db)
    try:
        for s in statements:
            con.execute(s)
        con.commit()
    finally:
        con.close()


def _sqlite_case(cases: list, family: str, src: Path, case_dir: Path, file: str, name: str, *statements: str) -> None:
    """A copy of ``src`` changed by ``statements`` becomes a case; one SQLite refuses is dropped."""
    db = _copy(src, case_dir / file)
    try:
        _sql(db, *statements)
    except sqlite3.DatabaseError:
        shutil.rmtree(case_dir)
        return
    cases.append((family, name, db))


def nsys_values(out: Path, cases: list) -> None:
    for table, cols in NSYS_COLUMNS.items():
        for col in cols:
            for label, value in BAD_VALUES.items():
                name = f"{table}.{col}={label}"
                _sqlite_case(cases, "nsys-values", NSYS, out / name, "trace.sqlite", name,
                             f'UPDATE "{table}" SET "{col}" = {value} WHERE rowid IN (SELECT rowid FROM "{table}" LIMIT 3)')
        for col in cols[:2]:  # a whole column of text
            name = f"{table}.{col}=all-text"
            _sqlite_case(cases, "nsys-values", NSYS, out / name, "trace.sqlite", name,
                         f'UPDATE "{table}" SET "{col}" = \'x\' || "{col}"')


def nsys_shape(out: Path, cases: list) -> None:
    def variant(name, *statements):
        _sqlite_case(cases, "nsys-shape", NSYS, out / name, "trace.sqlite", name, *statements)

    for table, cols in NSYS_COLUMNS.items():
        for col in cols:
            variant(f"drop {table}.{col}", f'ALTER TABLE "{table}" DROP COLUMN "{col}"')
    variant("rename NVTX end", 'ALTER TABLE NVTX_EVENTS RENAME COLUMN "end" TO "stop"')
    variant("duplicate StringIds ids", "CREATE TABLE s2 AS SELECT * FROM StringIds", "DROP TABLE StringIds",
            "CREATE TABLE StringIds AS SELECT * FROM s2 UNION ALL SELECT id, value || '_dup' FROM s2", "DROP TABLE s2")
    variant("invalid utf-8 in StringIds", "UPDATE StringIds SET value = CAST(x'c328ffa0' AS TEXT) WHERE rowid % 2 = 0")
    variant("no StringIds", "DROP TABLE StringIds")
    variant("kernel end INT64_MAX", "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 WHERE rowid = 7")
    variant("kernel end before start", "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1000000 WHERE rowid % 5 = 0")
    variant("kernel years away", "UPDATE CUPTI_ACTIVITY_KIND_KERNEL "
            "SET start = start + 100000000000000000, end = end + 100000000000000000 WHERE rowid = 3")
    variant("runtime end INT64_MAX", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = 9223372036854775807 WHERE rowid = 11")
    variant("negative times", "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -start, end = -end WHERE rowid % 3 = 0")
    variant("empty kernel table", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    variant("empty everything", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL", "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME",
            "DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    variant("kernel table as view", "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO K2",
            "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM K2")
    variant("recursive view", "ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME RENAME TO R2",
            "CREATE VIEW CUPTI_ACTIVITY_KIND_RUNTIME AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
            "SELECT x AS start, x + 1 AS end, 0 AS eventClass, 0 AS globalTid, x AS correlationId, 1 AS nameId, "
            "0 AS returnValue, NULL AS callchainId FROM c")
    variant("endless cross join view", "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY RENAME TO M2",
            "CREATE VIEW CUPTI_ACTIVITY_KIND_MEMCPY AS SELECT a.* FROM M2 a, M2 b, M2 c, M2 d, M2 e, K0 f ORDER BY random()",
            "CREATE TABLE K0 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    variant("NVTX domain-create row with text domainId",
            "INSERT INTO NVTX_EVENTS (start, \"end\", eventType, domainId, text, globalTid) "
            "VALUES (1, NULL, 75, 'abc', 'dom', 0)")
    variant("NVTX domain-create row with blob text",
            "INSERT INTO NVTX_EVENTS (start, \"end\", eventType, domainId, text, globalTid) "
            "VALUES (1, NULL, 75, 7, x'fffe00', 0)")
    # Over 4 MB an export is read through ADBC/Arrow, which does not check text: invalid UTF-8
    # in any cell (a flipped high bit) must not reach the conversion to numpy.
    pad = "CREATE TABLE zz_pad (b BLOB)", "INSERT INTO zz_pad VALUES (zeroblob(4500000))"
    for table, col in (("CUPTI_ACTIVITY_KIND_KERNEL", "start"), ("CUPTI_ACTIVITY_KIND_KERNEL", "shortName"),
                       ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId"), ("CUPTI_ACTIVITY_KIND_RUNTIME", "end"),
                       ("StringIds", "value"), ("NVTX_EVENTS", "text")):
        variant(f"over 4 MB, invalid UTF-8 in {table}.{col}", *pad,
                f'UPDATE "{table}" SET "{col}" = {INVALID_UTF8} WHERE rowid IN (SELECT rowid FROM "{table}" LIMIT 3 OFFSET 5)')
    data = NSYS.read_bytes()
    page = 4096
    rng = random.Random(25)
    for k in range(8):  # single flipped bits anywhere past the header
        name = f"flipped bit {k}"
        p = out / name / "trace.sqlite"
        p.parent.mkdir(parents=True)
        b = bytearray(data)
        b[rng.randrange(100, len(b))] ^= 1 << rng.randrange(8)
        p.write_bytes(bytes(b))
        cases.append(("nsys-shape", name, p))
    for frac in (0.1, 0.5, 0.9):
        name = f"truncated at {int(frac * 100)}%"
        p = out / name / "trace.sqlite"
        p.parent.mkdir(parents=True)
        p.write_bytes(data[: int(len(data) * frac) // page * page])
        cases.append(("nsys-shape", name, p))
    rng = random.Random(7)
    for k in range(6):
        name = f"corrupt page {k}"
        p = out / name / "trace.sqlite"
        p.parent.mkdir(parents=True)
        b = bytearray(data)
        at = rng.randrange(page * 2, len(b) - page)
        b[at:at + 64] = bytes(rng.randrange(256) for _ in range(64))
        p.write_bytes(bytes(b))
        cases.append(("nsys-shape", name, p))
    # WAL leftovers: an un-checkpointed -wal copied while the writer still had it open
    d = out / "wal uncheckpointed"
    d.mkdir()
    work = out / "wal-work"
    work.mkdir()
    src = _copy(NSYS, work / "trace.sqlite")
    con = sqlite3.connect(src)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = end + 1 WHERE rowid < 50")
    con.commit()
    for f in ("trace.sqlite", "trace.sqlite-wal", "trace.sqlite-shm"):
        if (work / f).exists():
            shutil.copyfile(work / f, d / f)
    con.close()
    shutil.rmtree(work)
    cases.append(("nsys-shape", "wal uncheckpointed", d / "trace.sqlite"))
    d = out / "wal without shm"
    d.mkdir()
    p = _copy(NSYS, d / "trace.sqlite")
    (d / "trace.sqlite-wal").write_bytes(b"")
    cases.append(("nsys-shape", "wal without shm", p))
    d = out / "garbage wal"
    d.mkdir()
    p = _copy(NSYS, d / "trace.sqlite")
    (d / "trace.sqlite-wal").write_bytes(os.urandom(8192))
    (d / "trace.sqlite-shm").write_bytes(os.urandom(32768))
    cases.append(("nsys-shape", "garbage wal", p))
    d = out / "wal-mode db in read-only dir"
    d.mkdir()
    p = _copy(NSYS_COPY, d / "trace.sqlite")
    _sql(p, "PRAGMA journal_mode=WAL")
    for f in d.iterdir():
        if f.name != "trace.sqlite":
            f.unlink()
    cases.append(("nsys-shape", "wal-mode db in read-only dir", p))


def rocpd(out: Path, cases: list) -> None:
    con = sqlite3.connect(ROCPD)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    cols = {t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    con.close()
    wanted = ("rocpd_string", "rocpd_region", "rocpd_kernel_dispatch", "rocpd_memory_copy", "rocpd_info_agent",
              "rocpd_event", "rocpd_info_kernel_symbol", "rocpd_info_process")
    for t in tables:
        if not t.startswith(wanted):
            continue
        for c in cols[t]:
            if c in ("guid", "nid"):
                continue
            for label in ("text", "null"):
                name = f"{t.split('_')[1]}_{t.split('_')[2] if t.count('_') > 1 else ''}.{c}={label}"
                _sqlite_case(cases, "rocpd", ROCPD, out / name, "4202_results.db", name,
                             f'UPDATE "{t}" SET "{c}" = {BAD_VALUES[label]} WHERE rowid IN (SELECT rowid FROM "{t}" LIMIT 3)')
    string_table = next(t for t in tables if t.startswith("rocpd_string"))
    d = out / "rocpd duplicate string ids"
    d.mkdir()
    db = _copy(ROCPD, d / "4202_results.db")
    _sql(db, f'CREATE TABLE dup_tmp AS SELECT * FROM "{string_table}"', f'DROP TABLE "{string_table}"',
         f'CREATE TABLE "{string_table}" AS SELECT * FROM dup_tmp UNION ALL SELECT id, guid, string || \'_dup\' FROM dup_tmp',
         "DROP TABLE dup_tmp")
    cases.append(("rocpd", "rocpd duplicate string ids", db))


def _kineto_doc() -> dict:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 10, "tid": 10, "ts": 1000.0, "dur": 5000.0}]
    ts = 1100.0
    for i in range(60):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": ts,
                       "dur": 5.0, "args": {"correlation": 100 + i}})
        events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{i % 5}", "pid": 0, "tid": 7, "ts": ts + 8, "dur": 20.0,
                       "args": {"correlation": 100 + i, "device": 0, "stream": 7}})
        ts += 40
    events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": ts,
                   "dur": 10.0, "args": {"correlation": 999, "device": 0, "bytes": 4096}})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}], "distributedInfo": {"rank": 0},
            "traceEvents": events}


def kineto(out: Path, cases: list) -> None:
    def write(name, text: str | bytes, gz=False):
        p = out / name / ("trace.json.gz" if gz else "trace.json")
        p.parent.mkdir(parents=True)
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        p.write_bytes(gzip.compress(data) if gz else data)
        cases.append(("kineto", name, p))

    base = _kineto_doc()
    write("valid", json.dumps(base))
    for field in ("ts", "dur", "pid", "correlation", "bytes"):
        for label, raw in (("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e308", "1e308"), ("NaN", "NaN"),
                           ("5000 digits", "9" * 5000), ("string", '"12x"'), ("null", "null"), ("list", "[1,2]")):
            doc = json.loads(json.dumps(base))
            for ev in doc["traceEvents"][1:8]:
                if field in ("correlation", "bytes"):
                    ev.setdefault("args", {})[field] = "__X__"
                else:
                    ev[field] = "__X__"
            write(f"{field}={label}", json.dumps(doc).replace('"__X__"', raw))
    for key, value in (("distributedInfo", "[1]"), ("distributedInfo", '"rank0"'), ("deviceProperties", '{"a": 1}'),
                       ("deviceProperties", "7"), ("traceEvents", '{"a": 1}'), ("traceEvents", "null"),
                       ("traceEvents", '"events"'), ("traceEvents", "42")):
        doc = json.loads(json.dumps(base))
        doc[key] = "__X__"
        write(f"{key} as {value[:8]}", json.dumps(doc).replace('"__X__"', value))
        if key == "traceEvents":  # malformed, not a CPU-only trace
            EXPECTED_EXIT[f"{key} as {value[:8]}"] = 3
    for value in ('{"a": 1}', "null", '"events"'):  # the same through the tolerant reader (NaN elsewhere)
        name = f"traceEvents as {value[:8]}, non-strict JSON"
        write(name, '{"schemaVersion": NaN, "traceEvents": ' + value + "}")
        EXPECTED_EXIT[name] = 3
    doc = json.loads(json.dumps(base))
    doc["traceEvents"][3]["name"] = "kern\udc80el"
    write("lone surrogate name", json.dumps(doc, ensure_ascii=False))
    write("events not objects", json.dumps({"traceEvents": [1, "a", None, [], {"ph": 3}]}))
    write("deep nesting", '{"traceEvents": ' + "[" * 50000 + "]" * 50000 + "}")
    good = gzip.compress(json.dumps(base).encode())
    p = out / "corrupt deflate" / "trace.json.gz"
    p.parent.mkdir()
    p.write_bytes(good[:40] + bytes(200) + good[240:])
    cases.append(("kineto", "corrupt deflate", p))
    p = out / "truncated gzip" / "trace.json.gz"
    p.parent.mkdir()
    p.write_bytes(good[: len(good) // 2])
    cases.append(("kineto", "truncated gzip", p))
    write("whitespace gzip", b'{"traceEvents": [' + b" " * (64 * 1024 * 1024) + b"]}", gz=True)
    write("top-level array", json.dumps(base["traceEvents"]))


def _rocprof_json_doc() -> dict:
    """A small rocprofv3 --output-format json capture (rocprofiler-sdk's layout)."""
    kinds = [{"kind": "NONE", "operations": []}, {"kind": "HIP_RUNTIME_API", "operations": ["hipLaunchKernel", "hipMemcpy"]},
             {"kind": "KERNEL_DISPATCH", "operations": ["KERNEL_DISPATCH_COMPLETE"]},
             {"kind": "MEMORY_COPY", "operations": ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_DEVICE"]}]
    hip, ks = [], []
    t = 1000
    for i in range(40):
        hip.append({"kind": 1, "operation": 0, "thread_id": 5, "correlation_id": {"internal": i + 1},
                    "start_timestamp": t, "end_timestamp": t + 3000})
        ks.append({"kind": 2, "operation": 0, "thread_id": 5, "correlation_id": {"internal": i + 1}, "start_timestamp": t + 4000,
                   "end_timestamp": t + 9000, "stream_id": {"handle": 0},
                   "dispatch_info": {"kernel_id": 1 + i % 2, "agent_id": {"handle": 2}, "queue_id": {"handle": 1}}})
        t += 12000
    copies = [{"kind": 3, "operation": 1, "thread_id": 5, "correlation_id": {"internal": 99}, "start_timestamp": t,
               "end_timestamp": t + 5000, "src_agent_id": {"handle": 1}, "dst_agent_id": {"handle": 2}, "bytes": 1 << 20}]
    return {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 77, "command": ["./app"]},
        "agents": [{"id": {"handle": 1}, "type": 1, "name": "cpu"},
                   {"id": {"handle": 2}, "type": 2, "logical_node_type_id": 0, "name": "gfx942", "product_name": "MI300X"}],
        "strings": {"buffer_records": kinds, "marker_api": []},
        "kernel_symbols": [{"kernel_id": 1, "formatted_kernel_name": "gemm"}, {"kernel_id": 2, "formatted_kernel_name": "norm"}],
        "buffer_records": {"kernel_dispatch": ks, "hip_api": hip, "memory_copy": copies, "marker_api": []}}]}


def rocprof_json(out: Path, cases: list) -> None:
    def write(name, text: str):
        p = out / name / "run_results.json"
        p.parent.mkdir(parents=True)
        p.write_bytes(text.encode("utf-8", "surrogatepass"))
        cases.append(("rocprof_json", name, p))

    base = _rocprof_json_doc()
    write("valid", json.dumps(base))
    for record, field in (("kernel_dispatch", "start_timestamp"), ("kernel_dispatch", "end_timestamp"),
                          ("kernel_dispatch", "dispatch_info"), ("kernel_dispatch", "correlation_id"),
                          ("hip_api", "operation"), ("hip_api", "kind"), ("memory_copy", "bytes"),
                          ("memory_copy", "src_agent_id")):
        for label, raw in (("Infinity", "Infinity"), ("1e308", "1e308"), ("5000 digits", "9" * 5000), ("string", '"12x"'),
                           ("null", "null"), ("list", "[1,2]"), ("negative", "-5")):
            doc = json.loads(json.dumps(base))
            for r in doc["rocprofiler-sdk-tool"][0]["buffer_records"][record][:5]:
                r[field] = "__X__"
            write(f"{record}.{field}={label}", json.dumps(doc).replace('"__X__"', raw))
    for key, value in (("agents", '{"a": 1}'), ("agents", "[1, null]"), ("strings", "[]"), ("kernel_symbols", '"x"'),
                       ("buffer_records", "7"), ("metadata", "[]")):
        doc = json.loads(json.dumps(base))
        doc["rocprofiler-sdk-tool"][0][key] = "__X__"
        write(f"{key} as {value[:8]}", json.dumps(doc).replace('"__X__"', value))
    doc = json.loads(json.dumps(base))
    doc["rocprofiler-sdk-tool"][0]["kernel_symbols"][0]["formatted_kernel_name"] = "ge\udc80mm"
    write("lone surrogate kernel name", json.dumps(doc).replace("\\udc80", "\udc80"))
    write("root is a number", json.dumps({"rocprofiler-sdk-tool": 3}))
    write("processes not objects", json.dumps({"rocprofiler-sdk-tool": [1, "a", None]}))
    write("operation index out of range", json.dumps(base).replace('"operation": 0', '"operation": 4000000000'))
    write("truncated", json.dumps(base)[:2000])
    write("deep nesting", '{"rocprofiler-sdk-tool": ' + "[" * 50000 + "]" * 50000 + "}")
    write("duplicate correlation ids", json.dumps(base).replace('"internal": 3}', '"internal": 2}'))


def pyspy(out: Path, cases: list) -> None:
    def write(name, text, fname="profile.speedscope.json"):
        p = out / name / fname
        p.parent.mkdir(parents=True)
        p.write_text(text)
        cases.append(("pyspy", name, p))

    ok = {"$schema": "https://www.speedscope.app/file-format-schema.json",
          "shared": {"frames": [{"name": "f", "file": "a.py", "line": 1}, {"name": "g", "file": "a.py", "line": 2}]},
          "profiles": [{"type": "sampled", "name": "p", "unit": "none", "startValue": 0, "endValue": 2,
                        "samples": [[0, 1], [0]], "weights": [1, 1]}]}
    write("speedscope valid", json.dumps(ok))
    for path, value in ((("shared", "frames"), "7"), (("shared", "frames"), '[1, "a", null]'), (("profiles",), '{"a": 1}'),
                        (("profiles",), '[7]'), (("shared",), "[]")):
        doc = json.loads(json.dumps(ok))
        target = doc
        for k in path[:-1]:
            target = target[k]
        target[path[-1]] = "__X__"
        write(f"speedscope {'.'.join(path)}={value[:6]}", json.dumps(doc).replace('"__X__"', value))
    doc = json.loads(json.dumps(ok))
    doc["profiles"][0]["weights"] = ["x", None]
    write("speedscope weights junk", json.dumps(doc))
    doc = json.loads(json.dumps(ok))
    doc["profiles"][0]["samples"] = [[0, 99, -5], "x"]
    write("speedscope sample indexes junk", json.dumps(doc))
    doc = json.loads(json.dumps(ok))
    doc["profiles"][0]["samples"] = [[0, 1] * 10000] * 5
    doc["profiles"][0]["weights"] = [1] * 5
    write("speedscope 20k-frame stack", json.dumps(doc))
    stack = ";".join(f"f{i} (m.py:{i})" for i in range(50000))
    write("raw 50k-frame stack", f"{stack} 10\n{stack} 3\n", fname="pyspy.txt")
    write("raw junk counts", "a;b;c x\n;;; 5\na;b 99999999999999999999999\n", fname="pyspy.txt")
    write("dump with noise", "Process 12: python3 x.py\nPython v3.11\n\nThread 0x7F (idle)\n\x00\x01 junk\n    f (a.py:1)\n",
          fname="dump.txt")


def text(out: Path, cases: list) -> None:
    nccl = (BUNDLES / "tp8_cross_island" / "nccl.log").read_text()
    topo = (BUNDLES / "tp8_cross_island" / "topo.txt").read_text()
    log = (BUNDLES / "serving_at_capacity" / "vllm.log").read_text()
    prom = (BUNDLES / "serving_at_capacity" / "metrics.prom").read_text()
    bench = (BUNDLES / "serving_at_capacity" / "bench.json").read_text()
    noise = bytes(random.Random(3).randrange(256) for _ in range(4000))

    def write(name, fname, data: bytes):
        p = out / name / fname
        p.parent.mkdir(parents=True)
        p.write_bytes(data)
        cases.append(("text", name, p))

    for label, content, fname in (("nccl", nccl, "nccl.log"), ("topo", topo, "topo.txt"), ("vllm log", log, "vllm.log"),
                                  ("prom", prom, "metrics.prom"), ("bench", bench, "bench.json")):
        raw = content.encode()
        write(f"{label} with binary noise", fname, raw[: len(raw) // 2] + noise + raw[len(raw) // 2:])
        write(f"{label} truncated", fname, raw[: len(raw) * 2 // 3])
        write(f"{label} gzipped", fname + ".gz", gzip.compress(raw))
        write(f"{label} 1 MB line", fname, raw[:200] + b"x" * 1_000_000 + b"\n" + raw[200:])
        write(f"{label} nul bytes", fname, raw.replace(b"\n", b"\x00\n", 5))
    write("nccl 200 kB token", "nccl.log", b"host:1:2 [0] NCCL INFO " + b"A" * 200_000 + b"\n")
    write("topo ragged", "topo.txt", b"\tGPU0\tGPU1\nGPU0\t X \tNV4\tNV4\tNV4\tSYS\nGPU1\n\nLegend:\n  X = Self\n")
    write("bench wrong types", "bench.json", b'{"request_throughput": "fast", "mean_ttft_ms": [1], "completed": {}}')
    records = json.loads(bench)
    records = records if isinstance(records, list) else [records]
    for label, fn in (("numbers as strings", str), ("numbers as junk strings", lambda v: f"{v}ms"),
                      ("numbers as NaN", lambda v: float("nan")), ("numbers as Infinity", lambda v: float("inf")),
                      ("numbers as null", lambda v: None), ("numbers as bools", lambda v: True)):
        doc = [{k: (fn(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v) for k, v in r.items()}
               for r in records]
        d = out / f"bench {label}"
        d.mkdir()
        (d / "bench.json").write_text(json.dumps(doc))
        for f in ("vllm.log", "metrics.prom"):  # with the rest of the bundle, so the analysis reads them
            shutil.copyfile(BUNDLES / "serving_at_capacity" / f, d / f)
        cases.append(("text", f"bench {label}", d))
    samples = [i for i, line in enumerate(prom.splitlines()) if line and not line.startswith("#")]
    for label, values in (("+Inf, NaN values", ["+Inf", "NaN", "-Inf"]), ("1e308 values", ["1e308"]),
                          ("huge and negative values", ["9" * 400, "-1e308", "-5"])):
        lines = prom.splitlines()
        for k, i in enumerate(samples):
            lines[i] = lines[i].rsplit(" ", 1)[0] + " " + values[k % len(values)]
        # each sample twice (two model labels): counters summed past the float range
        lines += [lines[i].replace("{", '{model="b",', 1) if "{" in lines[i] else lines[i] for i in samples]
        d = out / f"prom {label}"
        d.mkdir()
        (d / "metrics.prom").write_text("\n".join(lines) + "\n")
        for f in ("vllm.log", "bench.json"):
            shutil.copyfile(BUNDLES / "serving_at_capacity" / f, d / f)
        cases.append(("text", f"prom {label}", d))
    write("bench deep", "bench.json", b'{"request_throughput": ' + b"[" * 100000 + b"]" * 100000 + b"}")


def archive(out: Path, cases: list) -> None:
    trace = NSYS.read_bytes()

    def add(name, path):
        cases.append(("archive", name, path))

    d = out / "zip corrupt member"
    d.mkdir()
    p = d / "cap.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bundle/trace.sqlite", trace)
    b = bytearray(p.read_bytes())
    b[200:400] = bytes(200)
    p.write_bytes(bytes(b))
    add("zip corrupt member", p)
    for flag_name, patch in (("zip encrypted member", "enc"), ("zip unknown method", "m99"), ("zip ppmd method", "m98")):
        d = out / flag_name
        d.mkdir()
        p = d / "cap.zip"
        with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
            z.writestr("trace.sqlite", trace[:100000])
        b = bytearray(p.read_bytes())
        for sig in (b"PK\x03\x04", b"PK\x01\x02"):
            i = b.find(sig)
            flag_at, method_at = (i + 6, i + 8) if sig == b"PK\x03\x04" else (i + 8, i + 10)
            if patch == "enc":
                b[flag_at] |= 1
            else:
                b[method_at:method_at + 2] = struct.pack("<H", 99 if patch == "m99" else 98)
        p.write_bytes(bytes(b))
        add(flag_name, p)
    d = out / "zip 64 KiB comment"
    d.mkdir()
    p = d / "cap.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("trace.sqlite", trace)
        z.comment = b"c" * 65535
    add("zip 64 KiB comment", p)
    EXPECTED_EXIT["zip 64 KiB comment"] = 0
    d = out / "zip 64 KiB comment, no suffix, in a folder"
    d.mkdir()
    shutil.copyfile(p, d / "capture")
    add("zip 64 KiB comment, no suffix, in a folder", d)
    EXPECTED_EXIT["zip 64 KiB comment, no suffix, in a folder"] = 0
    d = out / "zip ratio bomb"
    d.mkdir()
    p = d / "cap.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        with z.open("zeros.bin", "w", force_zip64=True) as w:
            chunk = bytes(1 << 20)
            for _ in range(1024):  # 1 GiB of zeros, about 1 MB compressed
                w.write(chunk)
    add("zip ratio bomb", p)
    d = out / "tar pax size overflow"
    d.mkdir()
    p = d / "cap.tar"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo("trace.sqlite")
        info.size = 10
        info.pax_headers = {"size": "9" * 40}
        t.addfile(info, io.BytesIO(b"0123456789"))
    p.write_bytes(buf.getvalue())
    add("tar pax size overflow", p)
    d = out / "tar.gz corrupt deflate"
    d.mkdir()
    p = d / "cap.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        t.add(NSYS, arcname="trace.sqlite")
    raw = bytearray(buf.getvalue())
    raw[100:300] = bytes(200)
    p.write_bytes(bytes(raw))
    add("tar.gz corrupt deflate", p)
    EXPECTED_EXIT["tar.gz corrupt deflate"] = 3
    d = out / "tar.gz corrupt deflate in a folder"
    d.mkdir()
    shutil.copyfile(p, d / "cap.tar.gz")
    add("tar.gz corrupt deflate in a folder", d)
    EXPECTED_EXIT["tar.gz corrupt deflate in a folder"] = 3
    d = out / "tar.gz truncated"
    d.mkdir()
    (d / "cap.tar.gz").write_bytes(bytes(raw[: len(raw) // 2]))
    add("tar.gz truncated", d / "cap.tar.gz")
    EXPECTED_EXIT["tar.gz truncated"] = 3
    for name, member in (("tar path escape", "../../escape.sqlite"), ("tar absolute path", "/tmp/abs.sqlite")):
        d = out / name
        d.mkdir()
        p = d / "cap.tar"
        with tarfile.open(p, "w") as t:
            info = tarfile.TarInfo(member)
            info.size = len(trace)
            t.addfile(info, io.BytesIO(trace))
        add(name, p)
    d = out / "tar symlink member"
    d.mkdir()
    p = d / "cap.tar"
    with tarfile.open(p, "w") as t:
        info = tarfile.TarInfo("trace.sqlite")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        t.addfile(info)
    add("tar symlink member", p)


def special(out: Path, cases: list) -> None:
    def case(name: str, target: str | None = None) -> Path:
        """A folder for the case; the case is that folder, or ``target`` inside it."""
        d = out / name
        d.mkdir()
        cases.append(("special", name, d / target if target else d))
        return d

    os.mkfifo(case("fifo named trace.sqlite", "trace.sqlite") / "trace.sqlite")
    d = case("fifo inside a bundle")
    _copy(NSYS, d / "trace.sqlite")
    os.mkfifo(d / "nccl.log")
    os.mkfifo(case("fifo named tar.gz", "cap.tar.gz") / "cap.tar.gz")
    d = case("dangling symlink in bundle")
    _copy(NSYS, d / "trace.sqlite")
    (d / "topo.txt").symlink_to(d / "nowhere.txt")
    d = case("symlink loop", "a.log")
    (d / "a.log").symlink_to(d / "b.log")
    (d / "b.log").symlink_to(d / "a.log")
    (case("proc self mem", "trace.sqlite") / "trace.sqlite").symlink_to("/proc/self/mem")
    (case("directory named trace.sqlite", "trace.sqlite") / "trace.sqlite").mkdir()


def names(out: Path, cases: list) -> None:
    for label, name in (("newline in file name", "tra\nce.sqlite"), ("escape in file name", "tr\x1b[31mace.sqlite"),
                        ("newline in folder", "fol\nder/trace.sqlite"), ("tab and bell", "t\t\x07.sqlite")):
        p = out / label / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"not a trace at all\x00\x01")
        cases.append(("names", label, p))
    p = out / "bad table name" / "trace.sqlite"
    p.parent.mkdir()
    _sql(p, 'CREATE TABLE "evil\ntable\x1b[2J" (x)')
    cases.append(("names", "bad table name", p))


def rpd(out: Path, cases: list) -> None:
    """Legacy RPD: ids rebuilt without their constraints (a damaged or hand-merged file), then NULL,
    text, huge or repeated. Needs the real sample (skipped when absent)."""
    if not RPD.exists():
        return
    unconstrained = ('CREATE TABLE t_copy AS SELECT * FROM "{t}"', 'DROP TABLE "{t}"', 'ALTER TABLE t_copy RENAME TO "{t}"')

    def views(db):
        con = sqlite3.connect(db)
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'")]
        con.close()
        return [f'DROP VIEW "{v}"' for v in names]

    for table, col in (("rocpd_api", "id"), ("rocpd_op", "id"), ("rocpd_api_ops", "api_id"), ("rocpd_api_ops", "op_id"),
                       ("rocpd_string", "id"), ("rocpd_copyapi", "api_ptr_id")):
        for label in ("null", "text", "huge", "repeated"):
            value = "(SELECT MIN(\"{c}\") FROM \"{t}\")".format(c=col, t=table) if label == "repeated" else BAD_VALUES[label]
            name = f"rpd {table}.{col}={label}"
            d = out / name
            db = _copy(RPD, d / "trace.rpd")
            try:
                _sql(db, *views(db), *(x.format(t=table) for x in unconstrained),
                     f'UPDATE "{table}" SET "{col}" = {value} WHERE rowid IN (SELECT rowid FROM "{table}" LIMIT 3)')
            except sqlite3.DatabaseError:
                shutil.rmtree(d)
                continue
            cases.append(("rpd", name, db))


def rocprof_csv(out: Path, cases: list) -> None:
    """A rocprofv3 CSV run (kernel + HIP API traces, rocprofv3's headers) with bad cells."""
    api_hdr = ["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp", "End_Timestamp"]
    k_hdr = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
             "Correlation_Id", "Start_Timestamp", "End_Timestamp", "Grid_Size_X"]
    t0 = 1_550_151_853_029_637
    api = [["HIP_RUNTIME_API", "hipLaunchKernel", 77, 77, i + 1, t0 + i * 12000, t0 + i * 12000 + 3000] for i in range(60)]
    ker = [["KERNEL_DISPATCH", "Agent 4", 1, 1, 77, i + 1, 1 + i % 2, "gemm" if i % 2 else "norm", i + 1,
            t0 + i * 12000 + 4000, t0 + i * 12000 + 9000, 1024] for i in range(60)]

    def write(name, kernel_rows, api_rows):
        d = out / name
        d.mkdir()
        for fname, hdr, rows in (("run_kernel_trace.csv", k_hdr, kernel_rows), ("run_hip_api_trace.csv", api_hdr, api_rows)):
            (d / fname).write_text("\n".join(",".join(f'"{c}"' for c in r) for r in [hdr, *rows]) + "\n")
        cases.append(("rocprof_csv", name, d))

    write("valid", ker, api)
    for label, value in (("huge", "9" * 25), ("negative", "-5"), ("int64 min", "-9223372036854775808"), ("NaN", "nan"),
                         ("inf", "inf"), ("1e308", "1e308"), ("text", "abc"), ("empty", ""),
                         ("19 digits", "9999999999999999999")):
        for col in ("Correlation_Id", "Start_Timestamp", "End_Timestamp", "Agent_Id", "Stream_Id"):
            j = k_hdr.index(col)
            rows = [list(r) for r in ker]
            for r in rows[2:7]:
                r[j] = value
            arows = [list(r) for r in api]
            if col in api_hdr:
                for r in arows[2:7]:
                    r[api_hdr.index(col)] = value
            write(f"{col}={label}", rows, arows)


FAMILIES = [nsys_values, nsys_shape, rocpd, kineto, rocprof_json, pyspy, text, archive, special, names, rpd, rocprof_csv]


def generate(out: Path) -> list[tuple[str, str, Path]]:
    cases: list = []
    for family in FAMILIES:
        d = out / family.__name__
        d.mkdir(parents=True, exist_ok=True)
        family(d, cases)
    return cases
