"""AMD traces: rocpd v3, legacy RPD, rocprofv3 CSV — counts pinned with plain SQL, parity with nsys."""

import shutil
import sqlite3
import sys

import numpy as np
import pytest
from conftest import BUNDLES, ROOT, real, run_cli, sql

from tracetriage import analyze, open_case
from tracetriage.case import detect
from tracetriage.errors import EXIT_INPUT

sys.path.insert(0, str(ROOT / "samples"))
import generate  # noqa: E402

# name: (kernels, memsets, API regions, GPU busy % over the whole capture (the file's own `busy` view where it has one))
ROCPD = {
    "rocprofv3_rocpd_v3_bmm_trace_mi300x.db": (150, 151, 623, None),
    "rocprofv3_rocpd_v3_ck_batched_gemm_mi300x.db": (150, 1, 629, 16.6),
}


@pytest.mark.parametrize("name", sorted(ROCPD))
def test_rocpd_v3_real(name):
    path = real("rocprof", name)
    assert detect(path) == "rocpd"
    kernels, memsets, regions, busy = ROCPD[name]
    case = open_case([path])
    t = case.traces[0]
    c = t.counts()
    assert c["kernels"] == kernels and c["memset"] == memsets
    assert c["api_calls"] == regions == sql(path, "select count(*) from rocpd_region")[0][0]
    assert c["kernels"] + c["memset"] == sql(path, "select count(*) from rocpd_kernel_dispatch")[0][0]
    # every dispatch links to its launching region through rocpd_event.stack_id
    linked = np.isin(t.gpu["correlation"].to_numpy(), t.api["correlation"].to_numpy())
    assert linked.all()
    assert sql(path, "select count(*) from rocpd_kernel_dispatch k join rocpd_event e on e.id=k.event_id "
                     "join rocpd_region r on r.id=e.stack_id")[0][0] == kernels + memsets
    # agent_id 2 is the first GPU: type_index 0, not "GPU2"
    assert t.devices["gpu_index"].tolist() == [0] and t.devices["name"].tolist() == ["AMD Instinct MI300X"]
    launches = t.api[t.api["category"] == "launch"]
    assert len(launches) == 150
    if busy is not None:
        # The file's busy view spans all of its dispatches; the window starts at the first kernel
        # (set-up memsets before it are left out): put the set-up back and the two agree.
        a = analyze(case)
        w = a.data["window"]
        first_kernel = sql(path, "select min(start) from kernels where name not like '__amd_rocclr_fill%'")[0][0]
        assert w["start_ns"] == first_kernel
        setup_busy = sql(path, f"select coalesce(sum(end - start), 0) from kernels where end <= {first_kernel}")[0][0]
        span = w["duration_ns"] + w["setup_excluded_ns"]
        assert span == sql(path, "select max(end) - min(start) from kernels")[0][0]
        whole = 100.0 * (a.data["devices"][0]["busy_ns"] + setup_busy) / span
        assert abs(whole - busy) < 0.1


def test_rocpd_without_views_reads_base_tables(tmp_path):
    src = real("rocprof", "rocprofv3_rocpd_v3_bmm_trace_mi300x.db")
    dst = tmp_path / "noviews.db"
    shutil.copyfile(src, dst)
    dst.chmod(0o644)
    con = sqlite3.connect(dst)
    for (v,) in con.execute("select name from sqlite_master where type='view'").fetchall():
        con.execute(f'drop view "{v}"')
    con.commit()
    con.close()
    assert open_case([dst]).traces[0].counts() == open_case([src]).traces[0].counts()


def test_rocpd_other_schema_version_rejected(tmp_path):
    dst = tmp_path / "v4.db"
    shutil.copyfile(real("rocprof", "rocprofv3_rocpd_v3_bmm_trace_mi300x.db"), dst)
    dst.chmod(0o644)
    con = sqlite3.connect(dst)
    table = next(n for (n,) in con.execute("select name from sqlite_master where name like 'rocpd_metadata_%'"))
    con.execute(f"update \"{table}\" set value='4' where tag='schema_version'")
    con.commit()
    con.close()
    proc = run_cli("analyze", dst)
    assert proc.returncode == EXIT_INPUT and "schema_version 4" in proc.stderr and "Traceback" not in proc.stderr


def test_rocpd_missing_tables_named(tmp_path):
    dst = tmp_path / "cut.db"
    con = sqlite3.connect(dst)
    con.execute("create table rocpd_region_0000aaaa_bbbb_cccc_dddd_eeeeffff0000 (id integer)")
    con.commit()
    con.close()
    proc = run_cli("analyze", dst)
    assert proc.returncode == EXIT_INPUT
    assert "rocpd_string, rocpd_kernel_dispatch, rocpd_info_agent" in proc.stderr


def test_rpd_matmul():
    path = real("rocprof", "rpd_v2_pytorch_matmul.rpd")
    assert detect(path) == "rpd"
    c = open_case([path]).traces[0].counts()
    assert (c["kernels"], c["memcpy"], c["memset"], c["api_calls"]) == (29, 55, 1, 125)


def test_rpd_vllm_hip_graphs_not_idle():
    path = real("rocprof", "rpd_v2_vllm_hipgraph.rpd.gz")
    assert detect(path) == "gzip_sqlite"
    case = open_case([path])
    t = case.traces[0]
    c = t.counts()
    # 1228 KernelExecution + 7720 graph Task kernels; 804 DtoD + 350 HtoD + 22 DtoH copies
    assert c["kernels"] == 1228 + 7720 and c["memcpy"] == 804 + 350 + 22
    assert c["api_calls"] == 14736 - 11884 and c["ranges"] == 11884  # UserMarker rows are ranges
    assert int(t.gpu["in_graph"].sum()) == 7720 + 640  # hipGraphLaunch fans out into Task + D2D ops
    a = analyze(case)
    assert a.data["devices"][0]["busy_pct"] > 90  # the HIP-graph decode is busy, not idle
    assert "launch_bound" not in [f["id"] for f in a.findings]


def test_rocprof_csv_directory(tmp_path):
    files = {
        "run_kernel_trace.csv": "rocprofv3_docs_kernel_trace.csv",
        "run_memory_copy_trace.csv": "rocprofv3_docs_memory_copy_trace.csv",
        "run_hip_api_trace.csv": "rocprofv3_docs_hip_runtime_trace.csv",
        "run_marker_api_trace.csv": "rocprofv3_docs_marker_api_trace.csv",
        "run_rccl_api_trace.csv": "rocprofv3_docs_rccl_trace.csv",
    }
    for dst, src in files.items():
        shutil.copyfile(real("rocprof", src), tmp_path / dst)
    case = open_case([tmp_path])
    assert len(case.traces) == 1
    c = case.traces[0].counts()
    assert (c["kernels"], c["memcpy"]) == (9, 4)
    assert c["ranges"] == 5  # marker rows (MARKER_CORE_API)
    names = set(case.traces[0].api["name"].astype(str))
    assert "ncclAllReduce" in names and "hipMalloc" in names
    # the docs excerpts come from different runs: said, not silently merged
    assert any("different runs" in w for w in case.traces[0].warnings)


@pytest.mark.parametrize("name,kind", [
    ("rocprofv3_docs_kernel_trace.csv", "rocprof_csv"),
    ("rocprofv3_docs_rocpd-to-csv.csv", "rocprof_csv"),
    ("rocprofv3_docs_memory_copy_trace.csv", "rocprof_csv"),
])
def test_rocprof_csv_detected(name, kind):
    assert detect(real("rocprof", name)) == kind


def test_rocprof_stats_csv_is_rejected_with_reason():
    proc = run_cli("analyze", real("rocprof", "rocprofv3_docs_hip_api_stats.csv"))
    assert proc.returncode == EXIT_INPUT and "statistics summary" in proc.stderr


@pytest.mark.parametrize("scenario", ["eager_decode", "graph_decode", "tp8_cross_island", "tp4_island", "prefill_stall"])
def test_same_scenario_nsys_and_rocpd_agree(scenario, tmp_path):
    bundle = generate.generate_rocpd(tmp_path, only=[scenario])[0]
    amd = analyze(open_case([bundle])).data
    nv = analyze(open_case([BUNDLES / scenario / "trace.sqlite"])).data
    assert len(amd["devices"]) == len(nv["devices"])
    for a, n in zip(sorted(amd["devices"], key=lambda d: d["pid"]), sorted(nv["devices"], key=lambda d: d["pid"])):
        assert abs(a["busy_pct"] - n["busy_pct"]) <= 0.5
        assert abs(a["collective_share_pct"] - n["collective_share_pct"]) <= 0.5
    for a, n in zip(sorted(amd["processes"], key=lambda p: p["pid"]), sorted(nv["processes"], key=lambda p: p["pid"])):
        for k in ("launches_per_step", "graph_launches_per_step", "syncs_per_step"):
            assert a[k] == n[k], k
        assert a["steps"]["count"] == n["steps"]["count"]
    assert [f["id"] for f in amd["findings"]] == [f["id"] for f in nv["findings"]]
    if scenario.startswith("tp8"):  # generically named RCCL kernels get their op from ncclAllReduce
        assert all(set(d["collectives_by_op"]) == {"AllReduce"} for d in amd["devices"])


def test_rocpd_instant_marks_from_samples(tmp_path):
    import random

    ranks, _ = generate.scenario_healthy(random.Random(1))
    db = tmp_path / f"{ranks[0].pid}_results.db"
    generate.write_rocpd(db, ranks[0], "marks")
    con = sqlite3.connect(db)
    track_table = next(n for (n,) in con.execute("select name from sqlite_master where name like 'rocpd_track_%'"))
    suffix = track_table[len("rocpd_track_"):]
    guid = con.execute(f"select guid from rocpd_string_{suffix} limit 1").fetchone()[0]
    sid = con.execute(f"select max(id) from rocpd_string_{suffix}").fetchone()[0]
    con.execute(f"insert into rocpd_string_{suffix} (id, guid, string) "
                "values (?, ?, 'scheduler tick'), (?, ?, 'MARKER_CORE_API')",
                (sid + 1, guid, sid + 2, guid))
    con.execute(f"insert into rocpd_track_{suffix} (id, guid, nid, pid, tid, name_id) values (1, ?, 1, 1, 1, ?)", (guid, sid + 1))
    eid = con.execute(f"select max(id) from rocpd_event_{suffix}").fetchone()[0] + 1
    con.execute(f"insert into rocpd_event_{suffix} (id, guid, category_id, stack_id) values (?, ?, ?, 0)", (eid, guid, sid + 2))
    t0 = generate.T0 + 5_000_000
    con.execute(f"insert into rocpd_sample_{suffix} (id, guid, track_id, timestamp, event_id) values (1, ?, 1, ?, ?)",
                (guid, t0, eid))
    con.commit()
    con.close()
    r = open_case([db]).traces[0].ranges
    marks = r[r["name"] == "scheduler tick"]
    assert len(marks) == 1 and int(marks["start"].iloc[0]) == int(marks["end"].iloc[0]) == t0
    assert int(marks["pid"].iloc[0]) == ranks[0].pid


CSV_FILES = {
    # file: (what the reader classifies it as, or None when detection rejects it)
    "rocprofv3_docs_kernel_trace.csv": "kernel",
    "rocprofv3_docs_memory_copy_trace.csv": "copy",
    "rocprofv3_docs_hip_runtime_trace.csv": "api",
    "rocprofv3_docs_marker_api_trace.csv": "api",
    "rocprofv3_docs_rccl_trace.csv": "api",
    "rocprofv3_docs_rocpd-to-csv.csv": "api",
    "rocprofv3_docs_memory_allocation_trace.csv": "alloc",
    "rocprofv3_docs_hip_api_stats.csv": None,
}


@pytest.mark.parametrize("name", sorted(CSV_FILES))
def test_every_rocprofv3_csv_is_read(name):
    import csv

    from tracetriage.errors import MissingDataError, UnsupportedInputError
    from tracetriage.parsers import rocprof_csv

    path = real("rocprof", name)
    with open(path, newline="") as fh:
        rows = len(list(csv.reader(fh))) - 1  # independent count: every line but the header
    expected = CSV_FILES[name]
    if expected is None:  # a statistics summary, not a trace: rejected by name of what it is
        with pytest.raises(UnsupportedInputError, match="statistics summary"):
            open_case([path])
        return
    df = rocprof_csv._read(path)
    assert rocprof_csv.classify(df) == expected and len(df) == rows
    if expected in ("kernel", "copy"):
        c = open_case([path]).traces[0].counts()
        assert c["kernels" if expected == "kernel" else "memcpy"] == rows
    else:  # host calls or allocations alone hold no GPU activity: said, not guessed
        with pytest.raises(MissingDataError, match="no kernel or memory-copy trace"):
            open_case([path])
