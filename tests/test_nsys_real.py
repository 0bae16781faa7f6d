"""The nsys parser on the seven real exports: counts pinned against plain SQL.

Each test re-measures with sqlite3 where cheap, and pins the figures recorded in
shared/samples/real/nsys/SOURCES.md (measured there with plain SQL).
"""


import numpy as np
import pytest
from conftest import BUNDLES, real, sql

from tracetriage import open_case
from tracetriage.parsers import nsys

FILES = {
    # name: (kernels, memcpy, memset, runtime rows, nvtx rows kept, devices, processes with GPU work, version)
    "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite": (4010, 1020, 269, 7466, 19118, 2, [144, 145], "2026.2.1.210"),
    "nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite": (3442, 904, 22, 5796, 16782, 2, [111, 112], "2026.2.1.210"),
    "nsys2026.1_tiny_cuda_app_full_export.sqlite": (2, 1, 0, 9, 0, 1, None, "2026.1.1.204"),
    "nsys2025.1_1xH200_nvfuser_pytorch_crossentropy.sqlite": (18, 3, 3, 990, 13513, 1, None, "2025.1.1.110"),
    "nsys2024.6_1xH200_nvfuser_matmul.sqlite": (19, 1, 1, 968, 652, 1, None, "2024.6.2.25"),
    "nsys2025.5_2xRTX3090_cuda_uvm_osrt_sampling.sqlite": (86, 56, 2, 170, 0, 1, None, "2025.5.1.121"),
    "nsys2021.2_1xRTX6000_legacy_schema_no_metadata.sqlite": (12, 48, 12, 111, 0, 1, None, "2021.2.1"),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_counts(name):
    path = real("nsys", name)
    kernels, memcpy, memset, runtime, ranges, ndev, pids, version = FILES[name]
    trace = nsys.parse(str(path))
    c = trace.counts()
    assert c["kernels"] == kernels == sql(path, "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    assert c["memcpy"] == memcpy
    assert c["memset"] == memset
    assert c["api_calls"] == runtime
    assert c["ranges"] == ranges
    assert c["graph_replays"] == 0
    assert len(trace.devices) == ndev
    if pids:
        assert sorted(trace.gpu["pid"].unique().tolist()) == pids
    assert trace.meta["version"] == version
    # int64 nanoseconds, interned names, no object columns for events
    assert trace.gpu["start"].dtype == np.int64 and str(trace.gpu["name"].dtype) == "category"
    assert (trace.gpu["end"] >= trace.gpu["start"]).all()


def test_torchrun_correlation_is_per_process():
    path = real("nsys", "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite")
    trace = nsys.parse(str(path))
    k = trace.gpu[trace.gpu["kind"] == "kernel"]
    assert len(k.merge(trace.api, on=["pid", "correlation"])) == 3986
    # the naive join on correlationId alone is what the file warns about
    assert len(k.merge(trace.api, on=["correlation"])) == 4280
    assert sql(path, "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL k join CUPTI_ACTIVITY_KIND_RUNTIME r "
                     "on k.correlationId=r.correlationId and (k.globalPid>>24)=(r.globalTid>>24)")[0][0] == 3986


def test_torchrun_categories_and_collectives():
    path = real("nsys", "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite")
    trace = nsys.parse(str(path))
    cats = trace.api["category"].value_counts()
    # 3604 cudaLaunchKernel_v7000 + 402 driver cuLaunchKernelEx
    assert cats["launch"] == 4006
    assert cats["sync"] == 33  # cudaStreamSynchronize
    assert cats["memcpy_async"] == 1018
    assert cats["memset"] == 268
    assert "cudaLaunchKernel" in set(trace.api["name"].astype(str))
    assert not any(n.endswith("_v7000") for n in trace.api["name"].cat.categories)
    coll = trace.gpu[trace.gpu["collective"].notna()]
    assert len(coll) == 66 and set(coll["collective"].astype(str)) == {"SendRecv"}
    assert set(coll["name"].astype(str)) == {"ncclDevKernel_SendRecv"}
    # NVTX: the NCCL domain (names via textId) next to PyTorch's inline text
    assert trace.ranges["domain"].value_counts()["domain 1"] == 462
    assert "ncclGroupStart" in set(trace.ranges["name"].astype(str))


def test_fastvideo_syncs_and_pageable():
    path = real("nsys", "nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite")
    trace = nsys.parse(str(path))
    types = trace.syncs["sync_type"].value_counts()
    assert types["stream_sync"] == 8 and types["stream_wait_event"] == 236
    m = trace.gpu[trace.gpu["kind"] == "memcpy"]
    assert int((m["copy_kind"] == "HtoD").sum()) == 450
    assert int(((m["copy_kind"] == "HtoD") & m["pageable"]).sum()) == 4
    assert int((m["copy_kind"] == "DtoD").sum()) == 450
    assert any("time window" in w for w in trace.warnings)


def test_devices_keyed_by_process_and_mapped_to_gpu():
    path = real("nsys", "nsys2025.5_2xRTX3090_cuda_uvm_osrt_sampling.sqlite")
    trace = nsys.parse(str(path))
    # TARGET_INFO_GPU id 1 is CUDA device 0 in this file: the mapping goes through TARGET_INFO_CUDA_DEVICE
    assert trace.devices.iloc[0]["name"] == "NVIDIA GeForce RTX 3090"
    assert trace.devices.iloc[0]["gpu_index"] == 0
    uvm = trace.gpu[(trace.gpu["kind"] == "memcpy")]
    assert int((uvm["copy_kind"] == "HtoD").sum()) == 4  # plain copies
    assert int((uvm["copy_kind"] == "UVM_HtoD").sum()) == 25  # unified-memory migrations are their own kind


def test_legacy_schema_without_metadata():
    path = real("nsys", "nsys2021.2_1xRTX6000_legacy_schema_no_metadata.sqlite")
    trace = nsys.parse(str(path))
    assert trace.devices.iloc[0]["name"] == "Quadro RTX 6000"
    assert trace.meta["schema_version"] is None


@pytest.mark.parametrize("name", sorted(FILES))
def test_input_file_is_byte_identical_after_analysis(name, tmp_path):
    import hashlib
    import os
    import shutil

    from tracetriage import analyze

    # On a writable copy: the shared originals are read-only, which would hide a write.
    path = tmp_path / name
    shutil.copyfile(real("nsys", name), path)
    path.chmod(0o644)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    mtime = os.stat(path).st_mtime_ns
    analyze(open_case([path]))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert os.stat(path).st_mtime_ns == mtime
    assert not (path.parent / (path.name + "-journal")).exists()


@pytest.mark.parametrize("name", sorted(FILES))
def test_real_json_validates_against_schema(name):
    import json
    from pathlib import Path

    import jsonschema

    from tracetriage import analyze
    from tracetriage.reports import render

    schema = json.loads((Path(__file__).resolve().parent.parent / "reports" / "analysis.schema.json").read_text())
    data = json.loads(render(analyze(open_case([real("nsys", name)])), "json"))
    jsonschema.validate(data, schema)
    assert data["headline"]


# Plain-SQL definitions of the API categories, independent of the parser's regexes.
CATEGORY_SQL = {
    "launch": "s.value LIKE 'cudaLaunchKernel%' OR s.value LIKE 'cuLaunchKernel%' "
              "OR s.value LIKE 'cudaLaunchCooperativeKernel%' OR s.value LIKE 'cuLaunchCooperativeKernel%'",
    "graph_launch": "s.value LIKE 'cudaGraphLaunch%' OR s.value LIKE 'cuGraphLaunch%'",
    "sync": " OR ".join(f"s.value LIKE '{p}%'" for p in (
        "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
        "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize")),
    "memcpy_async": "s.value LIKE 'cu%Memcpy%Async%'",
    "memcpy_sync": "s.value LIKE 'cu%Memcpy%' AND s.value NOT LIKE '%Async%'",
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_api_categories_and_processes_match_plain_sql(name):
    path = real("nsys", name)
    trace = nsys.parse(str(path))
    cats = trace.api["category"].value_counts()
    for category, where in CATEGORY_SQL.items():
        expected = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                             f"WHERE {where}")[0][0]
        assert int(cats.get(category, 0)) == expected, (category, int(cats.get(category, 0)), expected)
    gpu_tables = [t for (t,) in sql(path, "SELECT name FROM sqlite_master WHERE name IN ('CUPTI_ACTIVITY_KIND_KERNEL', "
                                          "'CUPTI_ACTIVITY_KIND_MEMCPY', 'CUPTI_ACTIVITY_KIND_MEMSET')")]
    union = " UNION ".join([f"SELECT (globalPid >> 24) & 16777215 FROM {t}" for t in gpu_tables]
                           + ["SELECT (globalTid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME"])
    pids = {p for (p,) in sql(path, union)}
    assert set(trace.processes["pid"].tolist()) == pids
    pairs = " UNION ".join(f"SELECT (globalPid >> 24) & 16777215, deviceId FROM {t}" for t in gpu_tables)
    assert len(trace.devices) == sql(path, f"SELECT count(*) FROM ({pairs})")[0][0]


@pytest.mark.parametrize("name", sorted(FILES))
def test_all_sqlite_readers_build_the_same_model(name, monkeypatch):
    """Small files are read with the stdlib cursor, big ones through ADBC, and their big
    tables decoded from the b-tree pages: forced each way, the same export gives the same
    tables, value for value, and the b-tree reader serves every export's kernels and calls."""
    from tracetriage.parsers import btree, sqlite

    path = str(real("nsys", name))
    served = []
    real_read = btree.read_columns
    monkeypatch.setattr(btree, "read_columns", lambda db, table, *a: served.append((table, r := real_read(db, table, *a)))
                        or r)
    models = {}
    for reader, adbc_min, btree_min in (("stdlib", 1 << 62, 1 << 62), ("adbc", 0, 1 << 62), ("btree", 1 << 62, 0)):
        monkeypatch.setattr(sqlite, "ADBC_MIN_BYTES", adbc_min)
        monkeypatch.setattr(btree, "MIN_BYTES", btree_min)
        served.clear()
        models[reader] = nsys.parse(path)
    assert served and all(r is not None for _, r in served), [t for t, r in served if r is None]
    base = models.pop("stdlib")
    for reader, model in models.items():
        for table in ("gpu", "api", "ranges", "syncs", "devices", "processes"):
            a, b = getattr(model, table), getattr(base, table)
            assert list(a.columns) == list(b.columns), (reader, table)
            for col in a.columns:
                assert a[col].astype(object).tolist() == b[col].astype(object).tolist(), (reader, table, col)
        assert model.warnings == base.warnings, reader


@pytest.mark.parametrize("pids,shuffled", [((7,), False), ((7,), True), ((7, 9), False)])
def test_linked_fraction_matches_a_join(pids, shuffled):
    """The launch-link estimate (sorted search, with or without the one-process shortcut)
    equals the share found by a plain pandas join on (pid, correlation)."""
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 5000
    gpu = pd.DataFrame({"pid": rng.choice(pids, n), "correlation": rng.integers(0, 8000, n)})
    api = pd.DataFrame({"pid": rng.choice(pids, 6000), "correlation": rng.permutation(12000)[:6000]})
    if not shuffled:
        api = api.sort_values("correlation", ignore_index=True)
    expected = len(gpu.merge(api.drop_duplicates(), on=["pid", "correlation"])) / n
    got = nsys._linked_fraction(gpu, np.ones(n, bool), api)
    assert got == pytest.approx(expected) and 0.2 < got < 0.8


@pytest.mark.parametrize("pids", [(5,), (5, 3)])
def test_device_keys_match_a_sorted_factorization(pids):
    """(pid, ordinal) device keys, ordinal -1 (missing) included, equal the ranks of the sorted
    distinct pairs, by the lookup table (one process) and by the general path alike."""
    rng = np.random.default_rng(1)
    pid = rng.choice(pids, 1000).astype(np.int64)
    ordinal = rng.choice([-1, 0, 3, 7, 65535], 1000).astype(np.int64)
    keys, pairs = nsys.device_keys(pid, ordinal)
    distinct = sorted(set(zip(pid.tolist(), ordinal.tolist())))
    assert list(zip(pairs["pid"].tolist(), pairs["ordinal"].tolist())) == distinct
    assert keys.dtype == np.int32
    assert [distinct[k] for k in keys] == list(zip(pid.tolist(), ordinal.tolist()))


@pytest.mark.parametrize("reader", ["sql", "btree"])
@pytest.mark.parametrize("holes", ["dense", "deleted", "sparse"])
def test_parallel_column_reader_with_deleted_and_sparse_rowids(holes, reader, tmp_path, monkeypatch):
    """Rows read in rowid ranges into preallocated columns, or decoded from the b-tree's
    leaves: deleted rows (holes closed up afterwards) and a rowid far beyond the row count
    (chunks concatenated instead; the b-tree reader leaves such a table to SQL) give the
    rows plain SQL gives, in rowid order."""
    import shutil
    import sqlite3

    from tracetriage.parsers import btree
    from tracetriage.parsers import sqlite as tt_sqlite

    src = BUNDLES / "eager_decode" / "trace.sqlite"
    path = tmp_path / "trace.sqlite"
    shutil.copy(src, path)
    con = sqlite3.connect(path)
    if holes == "deleted":
        con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 7 = 3 OR rowid BETWEEN 100 AND 2000")
    elif holes == "sparse":
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = 1000000000000 "
                    "WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    con.commit()
    con.close()
    monkeypatch.setattr(tt_sqlite, "ADBC_MIN_BYTES", 0)
    monkeypatch.setattr(tt_sqlite, "PARALLEL_MIN_ROWS", 100)
    monkeypatch.setattr(btree, "MIN_BYTES", 0 if reader == "btree" else 1 << 62)
    monkeypatch.setattr(btree, "SEGMENT_BYTES", 64 << 10)  # many segments, on both threads
    calls, direct = [], []
    real_scan_columns = tt_sqlite.Database.scan_columns
    monkeypatch.setattr(tt_sqlite.Database, "scan_columns",
                        lambda self, table, columns, convert, chunk_rows=1_000_000:
                        calls.append(table) or real_scan_columns(self, table, columns, convert, chunk_rows=1000))
    real_read = btree.read_columns
    monkeypatch.setattr(btree, "read_columns", lambda *a: direct.append(r := real_read(*a)) or r)
    trace = nsys.parse(str(path))
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in calls
    # the b-tree reader served the kernels unless their rowids are sparse
    assert (direct[0] is not None) == (reader == "btree" and holes != "sparse")
    want = sql(path, "SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start, rowid")
    k = trace.gpu[trace.gpu["kind"] == "kernel"]
    assert len(k) == len(want) > 1000
    assert k["start"].tolist() == [r[0] for r in want]
    assert k["end"].tolist() == [r[1] for r in want]
    assert k["correlation"].tolist() == [r[2] for r in want]
